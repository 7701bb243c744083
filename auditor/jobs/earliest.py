"""How far back `watch` must read to have every event of the rounds it judges (issue 32).

A poll judges the rounds that ended in it; their events were loaded by this poll and by
earlier ones, stamped at any time (a table system's clock, or a lie, may stamp an event long
before the events around it). Reading the whole events table for them costs more as the
night, and the database, grow. `EarliestSeen` keeps, per round, the earliest stamp among
its events loaded while watching, so the rounds' events can be read from the earliest of
theirs (a bound DuckDB meets with its row groups' time ranges) and none loaded while
watching is missed. A round not followed from its first event loaded (loaded before the
watch started, judged and then given more, or an event without a stamp) gets no bound.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

from auditor.ingest.follow import fold_earliest

RoundKey = tuple[str, str, int]
# Rounds followed at most; past that they are no longer followed, and read without a bound.
ROUNDS_KEPT = 200_000


class EarliestSeen:
    """Per round followed, the earliest stamp among its events loaded so far (None: one
    had no stamp)."""

    def __init__(self) -> None:
        self._earliest: dict[RoundKey, dt.datetime | None] = {}
        # no longer followed: more events of one do not make its earliest (as watch._ended)
        self._judged: set[RoundKey] = set()

    def loaded(self, rounds: Mapping[RoundKey, dt.datetime | None]) -> None:
        """A poll loaded events of `rounds`, the earliest of each stamped as given."""
        if len(self._earliest) > ROUNDS_KEPT:  # rounds that never end: read those whole
            self._judged.update(self._earliest)
            self._earliest.clear()
        for k, ts in rounds.items():
            if k not in self._judged:  # judged before: what it had then is not followed
                fold_earliest(self._earliest, k, ts)

    def since(self, rounds: Iterable[RoundKey]) -> dt.datetime | None:
        """The earliest stamp of every event of `rounds` loaded while watching, or None
        when one of them is not followed (read those whole)."""
        stamps = [self._earliest.get(k) for k in rounds]
        if not stamps or None in stamps:
            return None
        return min(s for s in stamps if s is not None)

    def judged(self, rounds: Iterable[RoundKey]) -> None:
        """These rounds are judged: no longer followed (more events of one are late, and a
        late round is read whole)."""
        for k in rounds:
            self._earliest.pop(k, None)
            self._judged.add(k)
