"""The payout procedure at each table (N.J.A.C. 13:69F-7.10(b)-(c)): the procedure in force
at every moment, the changes that need notice, and the written notices each change had, judged
against the rule pack.

The rules are pure functions over small frozen values (`TableEvent`, `Notice`, `Change`);
`auditor.audit.load` reads those values from the audit database, and
`auditor.audit.table_pass.table_findings` records what the rules find. docs/procedures.md explains
every choice made where the regulation is silent. One procedure per pit and changes the log
never declared are `auditor.replay.tables`.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from auditor.finding import Finding
from auditor.finding import fingerprint as make_fingerprint
from auditor.replay.text import and_list, iso, local, minutes
from auditor.rules.pack import RulePack

DIVISION, SURVEILLANCE = "division", "surveillance"

# A notice covers the first change at its table at or after the time it announced. Pit
# terminals and table systems keep separate clocks, so a change logged this much before the
# announced time still counts as the announced change (its lead is measured all the same).
EFFECTIVE_TOLERANCE = dt.timedelta(minutes=1)
# Notices shown with a change as considered-but-not-counted (another pit, not written, ...)
# are those announced within this distance of the change; older ones are other business.
RELATED_WINDOW = dt.timedelta(hours=12)

# --- values -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableEvent:
    """A table_open, procedure_change or table_close event (the fields the checks read)."""

    table: str
    seq: int
    ts: dt.datetime
    type: str
    source: str
    pit: str | None = None
    game: str | None = None
    jurisdiction: str | None = None
    variant: str | None = None
    procedure: int | None = None


@dataclass(frozen=True)
class Notice:
    """A written (or not) notice that `procedure` takes effect at `effective` in `pit`, or only
    at `tables`; from a procedure_notice event or entered by hand (auditor.store.notices).

    `key` is stable: `pit:P1#3` (the pit stream's seq) or `hand:7` (the notices row id).
    A logged notice is given at its ordered time in the pit's stream (auditor.audit.streams);
    `stamped` is its own `ts` where that differs, `delivered_at` when its line was ingested.
    """

    key: str
    pit: str
    tables: tuple[str, ...] | None
    procedure: int
    effective: dt.datetime
    recipient: str
    written: bool
    given_at: dt.datetime
    source: str
    stamped: dt.datetime | None = None
    delivered_at: dt.datetime | None = None

    @property
    def logged(self) -> bool:
        """From the pit's log, not entered by hand (`notice add` has its own rules)."""
        return not self.key.startswith("hand:")

    def covers_table(self, table: str) -> bool:
        return self.tables is None or table in self.tables

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "pit": self.pit,
            "tables": list(self.tables) if self.tables is not None else None,
            "procedure": self.procedure,
            "effective": iso(self.effective),
            "recipient": self.recipient,
            "written": self.written,
            "given_at": iso(self.given_at),
            "source": self.source,
            **({"stamped": iso(self.stamped)} if self.stamped is not None else {}),
        }


@dataclass(frozen=True)
class ProcedureRules:
    """What a rule pack says about payout procedures and their notices (None: no such rule)."""

    pack: str
    procedures: tuple[int, ...]
    notice_minutes: int | None
    recipients: tuple[str, ...]
    written: bool
    same_in_pit: bool
    follow_punto_banco: bool

    @classmethod
    def of(cls, pack: RulePack) -> ProcedureRules | None:
        """None for a pack without payout procedures (NZ, chemin de fer)."""
        if not pack.procedures:
            return None
        return cls(
            pack=pack.id,
            procedures=tuple(pack.procedures),
            notice_minutes=pack.notice_minutes,
            recipients=tuple(pack.value("procedures.notice_recipients", (DIVISION, SURVEILLANCE))),
            written=bool(pack.value("procedures.notice_written", True)),
            same_in_pit=bool(pack.value("procedures.same_in_pit", False)),
            follow_punto_banco=bool(pack.value("procedures.follow_punto_banco_in_pit", False)),
        )


@dataclass(frozen=True)
class Change:
    """A procedure implemented at, or changed at, a table: what needs notice (7.10(c)3).

    `kind`: `change` (a procedure_change to another procedure than the one in force) or
    `implementation` (a table_open declaring another procedure than the one in force at the
    table before, or than the pit's approved baseline at a table's first opening).
    """

    table: str
    pit: str
    game: str
    seq: int
    ts: dt.datetime
    source: str
    procedure: int
    previous: int | None
    kind: str
    rules: ProcedureRules

    def as_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "pit": self.pit,
            "seq": self.seq,
            "ts": iso(self.ts),
            "type": "procedure_change" if self.kind == "change" else "table_open",
            "from": self.previous,
            "to": self.procedure,
            "source": self.source,
        }


@dataclass(frozen=True)
class Segment:
    """A stretch of time during which an open table used one procedure.

    `end` is the close, the next change, or, when the log stops first, the table's last event
    (`open_ended`).
    """

    table: str
    pit: str
    game: str
    procedure: int
    start: dt.datetime
    end: dt.datetime
    start_seq: int
    start_source: str
    start_type: str  # the event the segment starts at: table_open or procedure_change
    open_ended: bool
    rules: ProcedureRules


@dataclass
class Timeline:
    """Everything the procedure checks need about the tables: segments and changes."""

    segments: list[Segment] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    # table -> [(seq, procedure in force from that seq on)], for the per-round declared procedure
    declared: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    pits: dict[str, str] = field(default_factory=dict)  # table -> pit (last table_open)
    rules: dict[str, ProcedureRules] = field(default_factory=dict)  # table -> rules

# --- procedure in force -------------------------------------------------------------------


RulesFor = Callable[[str | None, str | None], ProcedureRules | None]


def table_timeline(
    events: Sequence[TableEvent],
    baseline: Mapping[str, int],
    rules_for: RulesFor,
    last_ts: Mapping[str, dt.datetime],
) -> Timeline:
    """Segments of each table's procedure and the changes that need notice.

    `events` are the table_open/procedure_change/table_close events of any tables, `baseline`
    the property's approved procedure per pit (config.pit_procedures), `rules_for(jurisdiction,
    game)` the pack's procedure rules (None: the game has no procedures), `last_ts` each
    table's last event (where an unclosed table's segment ends).

    The procedure in force at a table is the last one it declared (table_open or
    procedure_change), across closes: a table reopening on the procedure it closed on changes
    nothing. Before a table has declared one, the pit's baseline is in force; with no baseline
    configured, a table's first declaration is its baseline and needs no notice (design.md:
    "the procedures declared in the logs as the baseline").
    """
    out = Timeline()
    by_table: dict[str, list[TableEvent]] = defaultdict(list)
    for e in events:
        by_table[e.table].append(e)
    for table in sorted(by_table):
        _one_table(table, sorted(by_table[table], key=lambda e: e.seq), baseline, rules_for,
                   last_ts.get(table), out)
    return out


def _one_table(
    table: str,
    events: list[TableEvent],
    baseline: Mapping[str, int],
    rules_for: RulesFor,
    last_ts: dt.datetime | None,
    out: Timeline,
) -> None:
    current: int | None = None
    pit = game = None
    rules: ProcedureRules | None = None
    seg: tuple[int, dt.datetime, int, str, str] | None = None  # procedure, start, seq, ...
    declared: list[tuple[int, int]] = []
    clock: dt.datetime | None = None

    def close(at: dt.datetime, open_ended: bool = False) -> None:
        nonlocal seg
        if seg is not None and pit is not None and game is not None and rules is not None:
            out.segments.append(
                Segment(table, pit, game, seg[0], seg[1], max(at, seg[1]), seg[2], seg[3],
                        seg[4], open_ended, rules)
            )
        seg = None

    for e in events:
        # Times within a stream never run backwards for these checks (a back-dated change is
        # placed at the previous event's time).
        clock = e.ts if clock is None else max(clock, e.ts)
        if e.type == "table_open":
            close(clock)
            pit, game = e.pit, e.game
            rules = rules_for(e.jurisdiction, e.game)
            if pit is not None:
                out.pits[table] = pit
            if rules is None or pit is None or game is None:
                continue
            out.rules[table] = rules
            reference = current if current is not None else baseline.get(pit)
            if e.procedure is None:  # declares nothing: what was in force stays in force
                if reference is not None:
                    current = reference
                    declared.append((e.seq, current))
                    seg = (current, clock, e.seq, e.source, e.type)
                continue
            if reference is not None and e.procedure != reference:
                out.changes.append(Change(table, pit, game, e.seq, clock, e.source, e.procedure,
                                          reference, "implementation", rules))
            current = e.procedure
            declared.append((e.seq, current))
            seg = (current, clock, e.seq, e.source, e.type)
        elif e.type == "procedure_change":
            if rules is None or e.procedure is None or pit is None or game is None:
                continue
            reference = current if current is not None else baseline.get(pit)
            if e.procedure == reference:
                continue
            out.changes.append(Change(table, pit, game, e.seq, clock, e.source, e.procedure,
                                      reference, "change", rules))
            current = e.procedure
            declared.append((e.seq, current))
            if seg is not None:
                close(clock)
                seg = (current, clock, e.seq, e.source, e.type)
        elif e.type == "table_close":
            close(clock)
    if seg is not None:
        close(max(last_ts or clock or seg[1], seg[1]), open_ended=True)
    if declared:
        out.declared[table] = declared


def declared_at(declared: Sequence[tuple[int, int]], seqs: np.ndarray) -> np.ndarray:
    """The procedure in force just before each of `seqs` (-1 for none): the declaration before
    the first one whose seq is not below it (a running maximum keeps that a search), for the
    millions of rounds of a day at once."""
    at = np.maximum.accumulate(np.array([s for s, _ in declared], np.int64))
    procedures = np.array([-1] + [p for _, p in declared], np.int64)
    return procedures[np.searchsorted(at, seqs, side="left")]


# --- notices ------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoticeVerdict:
    """How a change stands against the notices: `code` None when it was duly notified."""

    change: Change
    code: str | None
    counted: dict[str, Notice]  # recipient -> the notice counted for it (the earliest given)
    missing: tuple[str, ...]  # recipients with no notice that counts
    rejected: tuple[tuple[Notice, str], ...]  # related notices that do not count, and why
    # (by notice_verdicts: all of them for a change with a finding, else its pit's only)
    lead: dt.timedelta | None  # the shortest lead among the counted notices
    # logged notices that would count but for when they were logged or delivered, and why
    backdated: tuple[tuple[Notice, str], ...] = ()

    def siblings_key(self) -> tuple:
        return (self.change.pit, self.change.procedure, self.code,
                tuple(sorted(n.key for n in self.counted.values())))


def _first_change_from(
    changes: Sequence[Change], since: dt.datetime
) -> Change | None:
    """The first change (by time, then seq) at or after `since`, `changes` being one table's."""
    for c in changes:
        if c.ts >= since:
            return c
    return None


def why_not(
    n: Notice, change: Change, table_changes: Sequence[Change], zone: dt.tzinfo
) -> str | None:
    """Why notice `n` does not count for `change`; None when it counts."""
    if n.pit != change.pit:
        return f"for pit {n.pit}, not {change.pit}"
    if not n.covers_table(change.table):
        return f"for tables {', '.join(n.tables or ())} only"
    if n.procedure != change.procedure:
        return f"for procedure {n.procedure}, not {change.procedure}"
    if n.effective - EFFECTIVE_TOLERANCE > change.ts:
        return f"announced for {local(n.effective, zone)}, later than the change"
    first = _first_change_from(table_changes, n.effective - EFFECTIVE_TOLERANCE)
    if first is not None and first is not change and first.seq != change.seq:
        return (f"for the earlier change at {local(first.ts, zone)} "
                f"(seq {first.seq})")
    if not n.written:
        return "not in writing"
    if n.given_at > change.ts:
        return f"given at {local(n.given_at, zone)}, after the change"
    return None


def _related(n: Notice, change: Change) -> bool:
    near = abs(n.effective - change.ts) <= RELATED_WINDOW or (
        abs(n.given_at - change.ts) <= RELATED_WINDOW
    )
    about = n.pit == change.pit or (n.tables is not None and change.table in n.tables) or (
        n.procedure == change.procedure
    )
    return near and about


def backdated_why(
    n: Notice,
    change: Change,
    reason: str | None,
    table_changes: Sequence[Change],
    judged_at: dt.datetime | None,
    zone: dt.tzinfo,
) -> str | None:
    """Why logged notice `n` is back-dated for `change` (it would count by its stamp and its
    delivery alone), or None. `reason` is why_not's answer for it. A notice counts only as
    logged before the change it announces: given (its ordered time in the pit's stream) no
    later than the change, and delivered before the change was first judged (`judged_at`)."""
    if not n.logged:
        return None
    if (reason is None and judged_at is not None and n.delivered_at is not None
            and n.delivered_at > judged_at):
        return (f"delivered at {local(n.delivered_at, zone)}, after the change had been judged "
                f"at {local(judged_at, zone)}")
    if (reason is not None and n.stamped is not None and n.given_at > change.ts
            and why_not(replace(n, given_at=n.stamped), change, table_changes, zone) is None):
        return (f"stamped {local(n.stamped, zone)} but logged after the change in the pit's "
                f"log, whose events before it run to {local(n.given_at, zone)}")
    return None


def judge_change(
    change: Change,
    notices: Iterable[Notice],
    table_changes: Sequence[Change],
    zone: dt.tzinfo = dt.UTC,
    judged_at: dt.datetime | None = None,
) -> NoticeVerdict:
    """Whether `change` had written notice to every recipient the pack names, early enough.

    A notice counts for a change when it is for the change's pit (and, if it lists tables,
    names the table), for the new procedure, announced for a time no later than the change
    (within EFFECTIVE_TOLERANCE) and for no earlier change at the table, in writing, and given
    no later than the change. Per recipient the earliest notice that counts is taken; the lead
    is the change's time minus the time the notice was given, and the shortest lead over the
    recipients must be at least `notice_minutes` (exactly 30:00 is on time, 29:59 late).
    `table_changes` are all changes at the change's table, in time order. A logged notice
    that would count but was logged after the change in its pit's stream, or delivered after
    the change was first judged (`judged_at`), does not count (`backdated_why`).
    """
    rules = change.rules
    counted: dict[str, Notice] = {}
    rejected: list[tuple[Notice, str]] = []
    backdated: list[tuple[Notice, str]] = []
    for n in sorted(notices, key=lambda n: (n.given_at, n.key)):
        reason = why_not(n, change, table_changes, zone)
        late = backdated_why(n, change, reason, table_changes, judged_at, zone)
        if late is not None:
            reason = late
            if n.recipient in rules.recipients:
                backdated.append((n, late))
        if reason is None and n.recipient not in rules.recipients:
            reason = f"to {n.recipient}, not a recipient the rules name"
        if reason is None:
            counted.setdefault(n.recipient, n)
        elif _related(n, change):
            rejected.append((n, reason))
    missing = tuple(r for r in rules.recipients if r not in counted)
    lead = min((change.ts - n.given_at for n in counted.values()), default=None)
    code: str | None = None
    if missing:
        code = "procedure.notice_missing"
    elif (
        rules.notice_minutes is not None
        and lead is not None
        and lead < dt.timedelta(minutes=rules.notice_minutes)
    ):
        code = "procedure.notice_late"
    return NoticeVerdict(change, code, counted, missing, tuple(rejected), lead,
                         tuple(backdated))


def notice_verdicts(
    changes: Sequence[Change],
    notices: Sequence[Notice],
    zone: dt.tzinfo = dt.UTC,
    judged: Mapping[tuple[str, int], dt.datetime] | None = None,
) -> list[NoticeVerdict]:
    """Every change judged (changes of packs without notice rules are skipped).

    Only a notice for the change's pit can count, so a change is judged on its pit's notices
    first: a day of thousands of changes and notices is not judged change by notice. A change
    that then has a finding is judged again on every notice, for the related notices that do
    not count, which its finding lists (a verdict without a finding keeps only its pit's).
    `judged`: when each change (table, seq) was first judged, for notices delivered after."""
    judged = judged or {}
    per_table: dict[str, list[Change]] = defaultdict(list)
    for c in sorted(changes, key=lambda c: (c.ts, c.seq)):
        per_table[c.table].append(c)
    by_pit: dict[str, list[Notice]] = defaultdict(list)
    for n in notices:
        by_pit[n.pit].append(n)
    out = []
    for c in sorted(changes, key=lambda c: (c.ts, c.table, c.seq)):
        if c.rules.notice_minutes is None:
            continue
        at = judged.get((c.table, c.seq))
        v = judge_change(c, by_pit.get(c.pit, ()), per_table[c.table], zone, at)
        if v.code is not None:
            v = judge_change(c, notices, per_table[c.table], zone, at)
        out.append(v)
    return out


def _recipient_text(recipients: Iterable[str]) -> str:
    names = {DIVISION: "the Division", SURVEILLANCE: "surveillance"}
    return and_list([names.get(r, r) for r in recipients])


def _change_text(c: Change, zone: dt.tzinfo) -> str:
    if c.kind == "implementation":
        before = f"procedure {c.previous}" if c.previous is not None else "no procedure"
        return (f"{c.table} (pit {c.pit}) opened at {local(c.ts, zone)} on procedure "
                f"{c.procedure} where {before} was in force")
    before = f"from procedure {c.previous} " if c.previous is not None else ""
    return (f"{c.table} (pit {c.pit}) changed {before}to procedure {c.procedure} at "
            f"{local(c.ts, zone)}")


def notice_findings(
    verdicts: Sequence[NoticeVerdict], zone: dt.tzinfo = dt.UTC
) -> list[Finding]:
    """One finding per table change that was not duly notified.

    Per table, not per pit: each change is its own event (seq, file and line), tables of a
    pit may change at different times with different leads, and reports and filters work by
    table. The evidence names the other tables of the pit that changed to the same procedure
    under the same notices (`pit_change`), so a report can show the pit change as one.
    """
    groups: dict[tuple, list[Change]] = defaultdict(list)
    for v in verdicts:
        if v.code:
            groups[v.siblings_key()].append(v.change)
    out = []
    for v in verdicts:
        if not v.code:
            continue
        c, rules = v.change, v.change.rules
        siblings = groups[v.siblings_key()]
        counted = [v.counted[r] for r in rules.recipients if r in v.counted]
        need = dt.timedelta(minutes=rules.notice_minutes or 0)
        if v.code == "procedure.notice_late":
            assert v.lead is not None
            given = and_list(sorted({local(n.given_at, zone) for n in counted}))
            message = (
                f"{_change_text(c, zone)}; the written notice to "
                f"{_recipient_text(r for r in rules.recipients)} was given at {given}, "
                f"{minutes(v.lead)} before: at least {rules.notice_minutes} minutes are "
                "required."
            )
        else:
            message = f"{_change_text(c, zone)} with no written notice to " + (
                f"{_recipient_text(v.missing)}"
            )
            if counted:
                message += (f" (only {_recipient_text(n.recipient for n in counted)} "
                            "was notified)")
            if v.rejected:
                reasons = sorted({f"{n.recipient}: {why}" for n, why in v.rejected})
                message += "; notices found but not counted: " + "; ".join(reasons)
            message += "."
        keys = sorted(n.key for n in counted)
        fingerprint = make_fingerprint(v.code, c.table, c.seq, iso(c.ts), ",".join(keys))
        notices_json = [
            {**n.as_json(), "lead_seconds": (c.ts - n.given_at).total_seconds(), "counted": True}
            for n in counted
        ] + [{**n.as_json(), "counted": False, "reason": why} for n, why in v.rejected]
        out.append(
            Finding(
                code=v.code,
                fingerprint=fingerprint,
                table=c.table,
                pit=c.pit,
                shoe=None,
                round=None,
                seq=c.seq,
                ts=c.ts,
                message=message,
                expected={
                    "procedure": c.procedure,
                    "recipients": list(rules.recipients),
                    "written": rules.written,
                    "notice_minutes": rules.notice_minutes,
                    "given_by": iso(c.ts - need),
                },
                observed={
                    "change": c.as_json(),
                    "lead_seconds": None if v.lead is None else v.lead.total_seconds(),
                    "missing_recipients": list(v.missing),
                    "notices": notices_json,
                },
                source=c.source,
                evidence={
                    "tables": [c.table],
                    "pit": c.pit,
                    "events": [c.as_json()],
                    "notices": notices_json,
                    "interval": [
                        iso(min([n.given_at for n in counted] + [c.ts])),
                        iso(c.ts),
                    ],
                    "pit_change": {
                        "procedure": c.procedure,
                        "tables": sorted({s.table for s in siblings}),
                        "changes": [s.as_json() for s in siblings],
                    },
                },
            )
        )
    return out


def backdated_findings(
    verdicts: Sequence[NoticeVerdict], zone: dt.tzinfo = dt.UTC
) -> list[Finding]:
    """One notice.backdated per logged notice that would have counted for a change but for
    when it was logged or delivered (NoticeVerdict.backdated), naming every such change. The
    changes keep their own notice findings: a back-dated notice never withdraws one."""
    by_notice: dict[str, tuple[Notice, list[tuple[Change, str]]]] = {}
    for v in verdicts:
        for n, why in v.backdated:
            by_notice.setdefault(n.key, (n, []))[1].append((v.change, why))
    out = []
    for key in sorted(by_notice):
        n, changes = by_notice[key]
        changes.sort(key=lambda cw: (cw[0].ts, cw[0].table, cw[0].seq))
        whys = sorted({why for _, why in changes})
        stamp = n.stamped if n.stamped is not None else n.given_at
        at = and_list([f"{c.table} at {local(c.ts, zone)}" for c, _ in changes])
        message = (
            f"Pit {n.pit}: the written notice to {_recipient_text([n.recipient])} of procedure "
            f"{n.procedure} from {local(n.effective, zone)}, stamped {local(stamp, zone)} "
            f"({n.source}), was {'; '.join(whys)}. It does not count for the "
            f"change{'s' if len(changes) > 1 else ''} of {at}, whose notice findings stand."
        )
        notice = {**n.as_json(), "stamped": iso(stamp),
                  "delivered_at": None if n.delivered_at is None else iso(n.delivered_at)}
        seq = int(key.rsplit("#", 1)[1]) if "#" in key else None
        out.append(Finding(
            code="notice.backdated",
            fingerprint=make_fingerprint("notice.backdated", key),
            table=None, pit=n.pit, shoe=None, round=None, seq=seq, ts=n.given_at,
            message=message,
            expected={"logged_before": iso(changes[0][0].ts),
                      "counts_for": [c.as_json() for c, _ in changes]},
            observed={"notice": notice, "why": whys},
            source=n.source,
            evidence={"tables": sorted({c.table for c, _ in changes}), "pit": n.pit,
                      "notices": [notice], "events": [c.as_json() for c, _ in changes]},
        ))
    return out
