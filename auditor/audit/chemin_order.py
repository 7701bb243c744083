"""A chemin de fer table's rounds in the order of its log, for the History each round's
replay needs (auditor.audit.chemin_history.CheminHistory): the rounds by the first seq among their
round events, and per shoe the round its cutting card came out in.

A batch audit reads them from every event of the tables concerned (`read_orders`). `watch`
keeps them from poll to poll instead (`CheminTails`): read once per table, then told of
the round events and cut cards each poll loads (auditor.ingest.follow.Poll.round_seqs,
.cut_cards), since only the watch writes events. Read each poll, they cost a scan of every
event the database holds, every night of it.

What is kept of a table is exact from a floor on: every round whose first seq is at or
above it, with that first seq (the rounds of the table's last shoes when read, at least
TAIL_ROUNDS of them, and every round since). The rest is read again rather than guessed:
a table whose round to judge is not kept, or is of a shoe that had rounds under the floor
when read (`below`: a key logged again under an old shoe's name could belong there), or
whose rounds to judge may look back past the floor (the caller's check, CheminHistory).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import duckdb

from auditor.audit.rounds import ROUND_TYPES
from auditor.replay.chemin_model import RoundFacts

RoundKey = tuple[str, str, int]
ShoeKey = tuple[str, str]
# Rounds kept of a table when it is read (whole shoes, so at least this many); past
# TRIM_AT times as many, what is kept is cut back to that (a watch runs for weeks).
TAIL_ROUNDS = 64
TRIM_AT = 4

_ORDER = f"""
SELECT table_id, shoe, round, min(seq) FROM events
WHERE type IN ({ROUND_TYPES}) AND shoe IS NOT NULL AND list_contains(?, table_id)
GROUP BY ALL ORDER BY table_id, min(seq)
"""
_CUTS = (
    "SELECT table_id, shoe, min(round) FROM events WHERE type = 'cut_card' "
    "AND list_contains(?, table_id) GROUP BY ALL"
)

Orders = dict[str, list[RoundKey]]
Cuts = dict[ShoeKey, int | None]


def read_orders(
    con: duckdb.DuckDBPyConnection, tables: Sequence[str]
) -> tuple[dict[str, list[tuple[RoundKey, int]]], Cuts]:
    """Every round of `tables` with its first seq, in log order per table, and each shoe's
    cut card round (None: a cut card without a round)."""
    rounds: dict[str, list[tuple[RoundKey, int]]] = {}
    for t, s, r, seq in con.execute(_ORDER, [list(tables)]).fetchall():
        rounds.setdefault(t, []).append(((t, s, r), seq))
    cuts = {(t, s): r for t, s, r in con.execute(_CUTS, [list(tables)]).fetchall()}
    return rounds, cuts


@dataclass
class _Tail:
    first: dict[RoundKey, int]  # every round whose first seq is at or above the floor
    floor: int | None  # None: every round of the table is kept
    below: set[str] = field(default_factory=set)  # shoes with a round under the floor
    stale: bool = False  # to be read again


class CheminTails:
    """`watch`'s kept orders, by table (see the module's docstring)."""

    def __init__(self) -> None:
        self._tables: dict[str, _Tail] = {}
        self._cuts: Cuts = {}

    def loaded(self, round_seqs: Mapping[RoundKey, int], cut_cards: Iterable[RoundKey]) -> None:
        """A poll loaded round events (the first seq among them, per round) and cut cards."""
        for key, seq in round_seqs.items():
            tail = self._tables.get(key[0])
            if tail is None or tail.stale:
                continue
            was = tail.first.get(key)
            if was is None and key[1] in tail.below:
                tail.stale = True
                continue
            first = seq if was is None else min(was, seq)
            if tail.floor is not None and first < tail.floor:
                tail.first.pop(key, None)  # now under the floor: its shoe with it
                tail.below.add(key[1])
            else:
                tail.first[key] = first
                if len(tail.first) > TRIM_AT * TAIL_ROUNDS:
                    self._keep(key[0], sorted(tail.first.items(), key=lambda x: x[1]),
                               self._cuts, tail.floor, tail.below)
        for t, s, r in cut_cards:
            if t in self._tables:
                was = self._cuts.get((t, s))
                self._cuts[(t, s)] = r if was is None else min(was, r)

    def orders(
        self, con: duckdb.DuckDBPyConnection, tables: Sequence[str], todo: Collection[RoundKey]
    ) -> tuple[Orders, Cuts, set[str]]:
        """The rounds of `tables` in log order and their shoes' cut card rounds, for judging
        `todo`; and the tables answered from what was kept with a floor (their rounds start
        there: the caller checks that no round to judge looks back past it, else `read`)."""
        kept: set[str] = set()
        for t in tables:
            tail = self._tables.get(t)
            if tail is not None and not tail.stale and all(
                k in tail.first and k[1] not in tail.below for k in todo if k[0] == t
            ):
                kept.add(t)
        orders, cuts = self.read(con, [t for t in tables if t not in kept])
        for t in kept:
            tail = self._tables[t]
            orders[t] = sorted(tail.first, key=tail.first.__getitem__)
            cuts.update({k: v for k, v in self._cuts.items() if k[0] == t})
        return orders, cuts, {t for t in kept if self._tables[t].floor is not None}

    def read(self, con: duckdb.DuckDBPyConnection, tables: Sequence[str]) -> tuple[Orders, Cuts]:
        """Every round of `tables` in log order, read from the events, and kept from here on."""
        if not tables:
            return {}, {}
        rounds, cuts = read_orders(con, tables)
        for t in tables:
            self._keep(t, rounds.get(t, []), cuts)
        return {t: [k for k, _ in r] for t, r in rounds.items()}, cuts

    def _keep(
        self,
        table: str,
        rounds: list[tuple[RoundKey, int]],
        cuts: Cuts,
        floor: int | None = None,
        below: Iterable[str] = (),
    ) -> None:
        """Keep the rounds of `table` of its last shoes, at least TAIL_ROUNDS: `rounds` are
        every one of its rounds from `floor` on (None: all), in log order, `below` the
        shoes with rounds under that floor."""
        kept_cuts = {k: v for k, v in cuts.items() if k[0] == table}
        for k in kept_cuts:
            self._cuts.pop(k, None)
        tail = _Tail(dict(rounds), floor, set(below))
        if len(rounds) > TAIL_ROUNDS:
            shoes = {k[1] for k, _ in rounds[-TAIL_ROUNDS:]}
            tail.floor = min(seq for k, seq in rounds if k[1] in shoes)
            tail.first = {k: seq for k, seq in rounds if seq >= tail.floor}
            tail.below.update(k[1] for k, seq in rounds if seq < tail.floor)
        self._tables[table] = tail
        self._cuts.update({k: v for k, v in kept_cuts.items() if k[1] not in tail.below})


def walks_past_floor(
    order: Mapping[str, list[RoundKey]],
    facts: Mapping[RoundKey, RoundFacts],
    todo: Collection[RoundKey],
    need: Collection[RoundKey],
    from_floor: Iterable[str],
) -> set[str]:
    """The tables of `from_floor` (their rounds in `order` from a floor on) where a round to
    judge may walk back (History: to the last round not a stand off) past the first round
    placed: whatever it meets that is to be judged or read back (`need`) may be a stand
    off, so it walks on; a round with no facts, or counted, stops it."""
    past: set[str] = set()
    for t in from_floor:
        keys = order[t]
        for i, k in enumerate(keys):
            if k not in todo:
                continue
            for j in range(i - 1, -2, -1):
                if j < 0:
                    past.add(t)
                    break
                b = keys[j]
                if b in todo or b in need:
                    continue
                f = facts.get(b)
                if f is None or f.counts_as_previous_wager:
                    break
            if t in past:
                break
    return past
