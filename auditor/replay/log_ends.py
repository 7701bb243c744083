"""Logs that stop (event log v1): a table opening with no table_close before the table opens
again or its stream ends (log.table_unclosed), and a shoe with no shoe_end before the table goes
on (log.shoe_unfinished). Pure: `auditor.audit.load.load_streams` reads the streams, and the
shoes are `auditor.replay.shoes`'s.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from auditor.finding import Finding, fingerprint
from auditor.replay.shoes import Shoe, opening_seq
from auditor.replay.text import iso, local


@dataclass(frozen=True)
class GamingDays:
    """The property's gaming days (config `gaming_day_start`, in its zone): which one an event
    belongs to and when that day ends."""

    start: dt.time
    zone: dt.tzinfo

    def of(self, ts: dt.datetime) -> dt.date:
        at = ts.astimezone(self.zone)
        return at.date() - dt.timedelta(days=1) if at.time() < self.start else at.date()

    def end(self, day: dt.date) -> dt.datetime:
        return dt.datetime.combine(day + dt.timedelta(days=1), self.start, self.zone)


@dataclass
class ClosedDays:
    """Which gaming days are closed, so that the streams that stop in them are judged: the
    days on record (the `closed_days` table: `nightly`, `close-day`, `watch`, an earlier
    audit), and a day the database shows over, its latest event (`latest`) at or after the
    day's end plus `grace`, which the run then records (`newly`, by `how`). A day is never
    judged closed but on such a record."""

    days: GamingDays
    recorded: frozenset[dt.date] = frozenset()
    latest: dt.datetime | None = None
    grace: dt.timedelta = dt.timedelta(0)
    newly: set[dt.date] = field(default_factory=set)

    def __call__(self, day: dt.date) -> bool:
        if day in self.recorded or day in self.newly:
            return True
        if self.latest is not None and self.latest >= self.days.end(day) + self.grace:
            self.newly.add(day)
            return True
        return False


@dataclass(frozen=True)
class StreamEvent:
    """One event of a stream, as the end checks (and auditor.replay.stream_order) cite it;
    `table` None for an event of a pit's stream."""

    table: str | None
    seq: int
    ts: dt.datetime
    type: str
    source: str
    shoe: str | None = None
    round: int | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"seq": self.seq, "ts": iso(self.ts), "type": self.type,
                               "source": self.source}
        if self.table is not None:
            out = {"table": self.table, **out}
        if self.shoe is not None:
            out["shoe"] = self.shoe
        if self.round is not None:
            out["round"] = self.round
        return out

    def text(self, zone: dt.tzinfo) -> str:
        """'round_end of round 12 of shoe S4, seq 4410 at 2026-11-29 03:12:40'."""
        what = self.type
        if self.round is not None:
            what += f" of round {self.round}"
        if self.shoe is not None:
            what += f" of shoe {self.shoe}"
        return f"{what}, seq {self.seq} at {local(self.ts, zone)}"


@dataclass(frozen=True)
class TableStream:
    """What the end checks read of one table's stream in the database.

    `marks`: its table_open and table_close events in seq order; `before`: for each table_open
    after the first event, the event just before it (where an opening left unclosed stopped);
    `last`: the stream's last event; `gaps`: (seq, next seq) wherever seq skips numbers.
    """

    table: str
    pit: str | None
    marks: tuple[StreamEvent, ...]
    before: Mapping[int, StreamEvent]
    last: StreamEvent
    gaps: tuple[tuple[int, int], ...] = ()

    def gap_between(self, lo: int, hi: int) -> bool:
        """Whether events are missing between seq `lo` and seq `hi` (one of them the end)."""
        return any(lo <= prev and seq <= hi for prev, seq in self.gaps)


def last_seq(shoe: Shoe) -> int:
    """The shoe's last event in the stream: its end, else its last round, cut, burn."""
    seqs = [e.seq for e in (shoe.start, shoe.cut, shoe.end) if e is not None]
    seqs += [e.seq for e in (*shoe.burns, *shoe.face_ups)]
    if len(shoe.rounds):
        seqs.append(int(shoe.rounds.last_seq.max()))
    return max(seqs, default=0)


def _log_finding(code: str, key: str, stream: TableStream, shoe: str | None,
                 at: StreamEvent, message: str, expected: Any, observed: Any,
                 events: Sequence[StreamEvent]) -> Finding:
    return Finding(
        code=code, fingerprint=key, table=stream.table, pit=stream.pit, shoe=shoe,
        round=None, seq=at.seq, ts=at.ts, message=message, expected=expected,
        observed=observed, source=at.source,
        evidence={"tables": [stream.table], "pit": stream.pit, "shoe": shoe,
                  "events": [e.as_json() for e in events]},
    )


def log_end_findings(
    streams: Sequence[TableStream],
    shoes: Sequence[Shoe],
    closed: ClosedDays,
) -> list[Finding]:
    """log.table_unclosed and log.shoe_unfinished over `streams` and their tables' `shoes`.

    An opening (table_open) must be closed (table_close) before the table opens again or its
    stream ends; a shoe must have its shoe_end before the table goes on to another shoe, closes
    or opens again. What the stream has already gone past is judged at once (the missing event
    cannot come later unless seq skips numbers there, which log.seq_gap reports instead). The
    end of a stream is judged only once the gaming day of its last event is closed (`closed`):
    a night still being delivered is not flagged, and a later file that completes the stream
    withdraws the finding. A shoe in play where an unclosed opening stops is named in the
    table's finding, not reported again.
    """
    by_table: dict[str, list[Shoe]] = defaultdict(list)
    for s in shoes:
        by_table[s.table].append(s)
    out: list[Finding] = []
    for stream in streams:
        table_shoes = sorted(by_table.get(stream.table, []), key=opening_seq)
        covered: set[str] = set()
        current: StreamEvent | None = None
        openings: list[tuple[StreamEvent, StreamEvent, StreamEvent | None]] = []
        for mark in stream.marks:
            if mark.type == "table_open":
                if current is not None:
                    openings.append((current, stream.before.get(mark.seq, current), mark))
                current = mark
            elif mark.type == "table_close":
                current = None
        if current is not None:
            openings.append((current, stream.last, None))
        for opened, stop, reopened in openings:
            inside = [s for s in table_shoes if opened.seq < opening_seq(s) <= stop.seq]
            open_shoe = inside[-1] if inside and inside[-1].end is None else None
            if open_shoe is not None:
                covered.add(open_shoe.shoe)
            found = _unclosed(stream, opened, stop, reopened, open_shoe, closed)
            if found is not None:
                out.append(found)
        for s in table_shoes:
            if s.end is None and s.shoe not in covered:
                found = _unfinished(stream, s, table_shoes, closed)
                if found is not None:
                    out.append(found)
    return out


def _unclosed(stream: TableStream, opened: StreamEvent, stop: StreamEvent,
              reopened: StreamEvent | None, open_shoe: Shoe | None,
              closed: ClosedDays) -> Finding | None:
    days = closed.days
    zone = days.zone
    day = days.of(stop.ts)
    if reopened is None and not closed(day):
        return None
    if reopened is not None and stream.gap_between(stop.seq, reopened.seq):
        return None
    shoe_text = ""
    if open_shoe is not None:
        rounds = open_shoe.rounds
        after = f" after round {rounds[-1].round}" if rounds else ""
        shoe_text = f"; shoe {open_shoe.shoe} was left without its shoe_end{after}"
    if reopened is None:
        message = (
            f"{stream.table} opened at {local(opened.ts, zone)} (seq {opened.seq}) and its log "
            f"stops at {stop.text(zone)}, with no table_close; gaming day {day:%Y-%m-%d} "
            f"ended at {local(days.end(day), zone)}, so the table's later events, its close "
            f"at least, are missing{shoe_text}."
        )
    else:
        message = (
            f"{stream.table} opened at {local(opened.ts, zone)} (seq {opened.seq}) and opened "
            f"again at {local(reopened.ts, zone)} (seq {reopened.seq}) with no table_close in "
            f"between; its last event before that was {stop.text(zone)}{shoe_text}."
        )
    observed = {
        "opened": opened.as_json(), "last_event": stop.as_json(),
        "reopened": None if reopened is None else reopened.as_json(),
        "open_shoe": None if open_shoe is None else open_shoe.shoe,
        "gaming_day": f"{day:%Y-%m-%d}",
    }
    events = [opened, stop] + ([reopened] if reopened is not None else [])
    return _log_finding(
        "log.table_unclosed", fingerprint("log.table_unclosed", stream.table, opened.seq, stop.seq),
        stream, None, stop, message, {"table_close_after_seq": stop.seq}, observed,
        list(dict.fromkeys(events)),
    )


def _first_event(shoe: Shoe) -> StreamEvent | None:
    """Where the shoe shows first in the stream: its shoe_start (or other shoe event), else
    its first round."""
    anchor, rounds = shoe.anchor, shoe.rounds
    if rounds and (anchor is None or rounds[0].first_seq < anchor.seq):
        r = rounds[0]
        return StreamEvent(shoe.table, r.first_seq, r.ts, "round", r.source, shoe.shoe, r.round)
    if anchor is None:
        return None
    return StreamEvent(shoe.table, anchor.seq, anchor.ts, anchor.type, anchor.source, shoe.shoe)


def _unfinished(stream: TableStream, shoe: Shoe, table_shoes: Sequence[Shoe],
                closed: ClosedDays) -> Finding | None:
    zone = closed.days.zone
    last = last_seq(shoe)
    later = [e for e in map(_first_event, table_shoes) if e is not None and e.seq > last]
    later += [m for m in stream.marks if m.seq > last]
    went_on = min(later, key=lambda e: e.seq, default=None)
    if went_on is None:  # the stream stops in the shoe, and no opening names it
        if not closed(closed.days.of(stream.last.ts)):
            return None
        at, gone = stream.last, f"the log stops at {stream.last.text(zone)}"
    else:
        if stream.gap_between(last, went_on.seq):
            return None
        at, gone = went_on, f"the table went on with {went_on.text(zone)}"
    rounds = shoe.rounds
    if rounds:
        r = rounds[-1]
        played = f"its last round, round {r.round}, began at {local(r.ts, zone)}"
        last_round = [StreamEvent(shoe.table, r.first_seq, r.ts, "round", r.source, shoe.shoe,
                                  r.round)]
    else:
        played, last_round = "no round was dealt from it", []
    first = _first_event(shoe)
    cited = [*([first] if first is not None else []), *last_round, at]
    return _log_finding(
        "log.shoe_unfinished", fingerprint("log.shoe_unfinished", stream.table, shoe.shoe, last),
        stream, shoe.shoe, at,
        f"{stream.table} shoe {shoe.shoe} has no shoe_end: {played}, and {gone}.",
        {"shoe_end_before_seq": at.seq},
        {"last_seq": last, "last_round": rounds[-1].round if rounds else None,
         "next_event": None if went_on is None else went_on.as_json()},
        list(dict.fromkeys(cited)),
    )
