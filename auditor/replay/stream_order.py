"""A stream is read in its order (issue 28): time that runs backwards within a stream
(`log.time_reversed`), and round events that came after their round had ended or had been
judged (`log.after_round_end`, `log.late_delivery`). Pure: `auditor.audit.streams` and
`auditor.audit.rounds` find these in SQL and hand them here as small values to be worded.

What the checks do with a stream whose times contradict its order is in docs/event-log.md
("Time and the stream's order", "What a late event may change").
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from auditor.finding import Finding, fingerprint
from auditor.replay.log_ends import StreamEvent
from auditor.replay.text import and_list, iso, local
from auditor.words import duration

# Clocks of one table system may disagree by a little (the shoe's and the table management
# system's): time must run back more than this for log.time_reversed. A constant of the event
# log format, not a rule pack's option: pit streams have no pack, and the format is the same
# in every jurisdiction.
TIME_TOLERANCE = dt.timedelta(seconds=2)
# Events that make something take effect (a procedure): their time is capped by the next
# event of their stream, which cannot have happened before them.
CAPPED_BY_NEXT = ("procedure_change", "table_open")


# --- time running backwards -----------------------------------------------------------------


@dataclass(frozen=True)
class Reversal:
    """A run of consecutive events (by seq) each stamped more than TIME_TOLERANCE before the
    latest stamp logged before it in its stream."""

    stream: str
    table: str | None
    pit: str | None
    first: StreamEvent  # the run's first event
    peak: StreamEvent  # the event before it with the latest stamp
    last_seq: int  # the run's last event
    events: int  # events in the run
    back: dt.timedelta  # the most any event of the run is stamped before its stream's latest
    ordered: dt.datetime  # the time the checks give the run's first event
    # The finding's time: that of the event logged just before the peak (at its ordered
    # time), the stream's last time before the contradiction whichever side lies; the run's
    # own first stamp when the peak is the stream's first event.
    dated: dt.datetime | None = None


def reversal_finding(r: Reversal, zone: dt.tzinfo) -> Finding:
    """log.time_reversed for one run, anchored at its first event and dated before the peak
    it runs back from (`Reversal.dated`): a line stamped days ahead (yet before its file was
    delivered) dated the finding days ahead, in a report no one reads for the night it broke.

    The fingerprint names the stream and the run's first and last seqs: a run that grows as
    more of the stream arrives is another finding, and the shorter one is withdrawn."""
    who = f"Table {r.table}" if r.table is not None else f"Pit {r.pit}"
    first_back = r.peak.ts - r.first.ts
    more = ""
    if r.events > 1:
        more = (f"; {r.events} events, to seq {r.last_seq}, are stamped before a time already "
                f"logged (at most {duration(r.back)} before)")
    message = (
        f"{who}: time runs backwards at {r.first.text(zone)}, {duration(first_back)} before "
        f"{r.peak.text(zone)}, which is logged before it{more}. The checks that depend on "
        f"time take each event at its place in the stream (this one at "
        f"{local(r.ordered, zone)})."
    )
    return Finding(
        code="log.time_reversed",
        fingerprint=fingerprint("log.time_reversed", r.stream, r.first.seq, r.last_seq),
        table=r.table, pit=r.pit, shoe=None, round=None, seq=r.first.seq,
        ts=r.dated or r.first.ts,
        message=message,
        expected={"ts_at_least": iso(r.peak.ts - TIME_TOLERANCE),
                  "tolerance_seconds": TIME_TOLERANCE.total_seconds()},
        observed={"ts": iso(r.first.ts), "back_seconds": first_back.total_seconds(),
                  "most_back_seconds": r.back.total_seconds(), "events": r.events,
                  "last_seq": r.last_seq},
        source=r.first.source,
        evidence={"tables": [r.table] if r.table is not None else [], "pit": r.pit,
                  "stream": r.stream, "events": [r.peak.as_json(), r.first.as_json()],
                  "run": [r.first.seq, r.last_seq], "ordered_ts": iso(r.ordered)},
    )


# --- round events out of their round ----------------------------------------------------------


@dataclass(frozen=True)
class LateEvent:
    """A round event outside its round as it stood: after its round_end (or its table's
    table_close) in the stream, or delivered after the round was judged."""

    seq: int
    ts: dt.datetime
    type: str
    source: str
    delivered_at: dt.datetime | None
    seat: int | None = None
    bet: str | None = None
    amount: str | None = None
    card: str | None = None
    to: str | None = None

    def as_json(self, delivery: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"seq": self.seq, "ts": iso(self.ts), "type": self.type,
                               "source": self.source}
        for key in ("seat", "bet", "amount", "card", "to"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if delivery and self.delivered_at is not None:
            out["delivered_at"] = iso(self.delivered_at)
        return out

    def what(self) -> str:
        """'vig of 1.00 at seat 5', 'card Kh to the banker', 'collect'."""
        text = self.type
        if self.card is not None:
            text += f" {self.card}" + (f" to the {self.to}" if self.to else "")
        if self.amount is not None:
            text += f" of {self.amount}"
        if self.bet is not None:
            text += f" on {self.bet}"
        if self.seat is not None:
            text += f" at seat {self.seat}"
        return text


@dataclass(frozen=True)
class LateRound:
    """A round and its events that the audit left out of it: `after_end`, placed after its
    round_end (or the table's close) by the stream's order; `delivered_late`, placed within
    it but delivered after it was judged (`judged_at`)."""

    table: str
    pit: str | None
    shoe: str
    round: int
    end: StreamEvent | None  # its round_end, as judged
    close: StreamEvent | None  # the table_close after its start, if a late event follows it
    judged_at: dt.datetime | None
    after_end: tuple[LateEvent, ...] = ()
    delivered_late: tuple[LateEvent, ...] = ()


def _listed(events: Sequence[LateEvent], zone: dt.tzinfo) -> str:
    return and_list([f"{e.what()} (seq {e.seq}, stamped {local(e.ts, zone)})" for e in events])


def _evidence(r: LateRound, events: Sequence[LateEvent], delivery: bool) -> dict[str, Any]:
    """What the report shows: the round's end (and close), the events; with `delivery`, when
    the round was judged and each event delivered (log.late_delivery: the stream's order alone
    shows an event after the round's end, whenever it came)."""
    out = {"tables": [r.table], "pit": r.pit, "shoe": r.shoe, "round": r.round,
           "round_end": None if r.end is None else r.end.as_json(),
           "table_close": None if r.close is None else r.close.as_json(),
           "events": [e.as_json(delivery) for e in events]}
    if delivery:
        out["judged_at"] = None if r.judged_at is None else iso(r.judged_at)
    return out


def late_findings(r: LateRound, zone: dt.tzinfo) -> list[Finding]:
    """log.after_round_end and log.late_delivery of one round (at most one of each), anchored
    at the first such event. Each names every such event; the fingerprint names their seqs,
    so a round that gets more of them is another finding (the earlier one withdrawn)."""
    out: list[Finding] = []
    where = f"{r.table} shoe {r.shoe} round {r.round}"
    if r.after_end:
        first = r.after_end[0]
        parts = []
        if r.end is not None:
            late, after = first.ts - r.end.ts, first.seq - r.end.seq
            parts.append(f"{after} event{'s' if after != 1 else ''} and "
                         f"{duration(late) if late > dt.timedelta(0) else 'no time'} after its "
                         f"round_end (seq {r.end.seq}, {local(r.end.ts, zone)})")
        closed = r.close is not None and first.seq > r.close.seq
        if r.close is not None and closed:
            parts.append(f"after the table closed (table_close seq {r.close.seq}, "
                         f"{local(r.close.ts, zone)})")
        out.append(_late_finding(
            "log.after_round_end", r, r.after_end,
            f"{where}: {_listed(r.after_end, zone)} logged {' and '.join(parts) or 'late'}. "
            "The round is judged as it stood at its end; these events are not part of it.",
            {"before_seq": (r.end.seq + 1) if r.end is not None
             else (r.close.seq if r.close is not None else None)},
            {"events": len(r.after_end),
             "seconds_after_round_end": None if r.end is None
             else (first.ts - r.end.ts).total_seconds(),
             "events_after_round_end": None if r.end is None else first.seq - r.end.seq,
             "after_table_close": closed},
        ))
    if r.delivered_late:
        judged = "" if r.judged_at is None else f" at {local(r.judged_at, zone)}"
        sources = sorted({e.source.rsplit(":", 1)[0] for e in r.delivered_late})
        out.append(_late_finding(
            "log.late_delivery", r, r.delivered_late,
            f"{where}: {_listed(r.delivered_late, zone)} arrived in {and_list(sources)} "
            f"after the round was judged{judged}. Its findings stand as judged; these events "
            "are not part of it.",
            {"delivered_by": None if r.judged_at is None else iso(r.judged_at)},
            {"events": len(r.delivered_late),
             "delivered_at": [None if e.delivered_at is None else iso(e.delivered_at)
                              for e in r.delivered_late]},
        ))
    return out


def _late_finding(code: str, r: LateRound, events: Sequence[LateEvent], message: str,
                  expected: Any, observed: Any) -> Finding:
    first = events[0]
    return Finding(
        code=code,
        fingerprint=fingerprint(code, r.table, r.shoe, r.round,
                                ",".join(str(e.seq) for e in events)),
        table=r.table, pit=r.pit, shoe=r.shoe, round=r.round, seq=first.seq, ts=first.ts,
        message=message, expected=expected, observed=observed, source=first.source,
        evidence=_evidence(r, events, code == "log.late_delivery"),
    )
