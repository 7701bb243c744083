"""Table and pit checks of the payout procedure (N.J.A.C. 13:69F-7.10(b)-(c)): the procedure in
force at each table at every moment, the written notices each change needs, one procedure per
pit, and changes the payout order shows although the log never declared them.

The rules are pure functions over small frozen values (`TableEvent`, `Notice`, `RoundOrder`);
`auditor.audit.load` reads those values from the audit database, and
`auditor.audit.table_pass.table_findings` records what the rules find. docs/procedures.md explains
every choice made where the regulation is silent.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from auditor.finding import Finding
from auditor.finding import fingerprint as make_fingerprint
from auditor.replay import order as order_rules
from auditor.rules.pack import RulePack

MINI, PUNTO = "mini_baccarat", "punto_banco"
DIVISION, SURVEILLANCE = "division", "surveillance"

# A notice covers the first change at its table at or after the time it announced. Pit
# terminals and table systems keep separate clocks, so a change logged this much before the
# announced time still counts as the announced change (its lead is measured all the same).
EFFECTIVE_TOLERANCE = dt.timedelta(minutes=1)
# Notices shown with a change as considered-but-not-counted (another pit, not written, ...)
# are those announced within this distance of the change; older ones are other business.
RELATED_WINDOW = dt.timedelta(hours=12)
# Consecutive discriminating rounds that fit another procedure, and not the declared one,
# before they are reported as one undeclared change rather than round by round. One or two
# are a dealer's slip (each stays an order.procedure_mismatch); three in a row at one table,
# with nothing in between fitting the declared procedure, are a practice.
MIN_UNDECLARED_ROUNDS = 3


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


def iso(ts: dt.datetime) -> str:
    """UTC RFC 3339, the form evidence carries (a report converts to the property's zone)."""
    return ts.astimezone(dt.UTC).isoformat()


def local(ts: dt.datetime, zone: dt.tzinfo) -> str:
    """A time for a sentence: `2026-11-29 03:00:00` in the property's zone."""
    return ts.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S")


def minutes(delta: dt.timedelta) -> str:
    """`20 minutes`, `29 minutes 59 seconds`."""
    total = int(delta.total_seconds())
    sign = "-" if total < 0 else ""
    m, s = divmod(abs(total), 60)
    text = f"{m} minute{'s' if m != 1 else ''}"
    if s:
        text += f" {s} second{'s' if s != 1 else ''}"
    return sign + text


def _and(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


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


def declared_at(declared: Sequence[tuple[int, int]], seq: int, default: int | None) -> int | None:
    """The procedure in force just before `seq` (the last declaration with a smaller seq)."""
    found = default
    for s, procedure in declared:
        if s < seq:
            found = procedure
        else:
            break
    return found


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


def judge_change(
    change: Change,
    notices: Iterable[Notice],
    table_changes: Sequence[Change],
    zone: dt.tzinfo = dt.UTC,
) -> NoticeVerdict:
    """Whether `change` had written notice to every recipient the pack names, early enough.

    A notice counts for a change when it is for the change's pit (and, if it lists tables,
    names the table), for the new procedure, announced for a time no later than the change
    (within EFFECTIVE_TOLERANCE) and for no earlier change at the table, in writing, and given
    no later than the change. Per recipient the earliest notice that counts is taken; the lead
    is the change's time minus the time the notice was given, and the shortest lead over the
    recipients must be at least `notice_minutes` (exactly 30:00 is on time, 29:59 late).
    `table_changes` are all changes at the change's table, in time order.
    """
    rules = change.rules
    counted: dict[str, Notice] = {}
    rejected: list[tuple[Notice, str]] = []
    for n in sorted(notices, key=lambda n: (n.given_at, n.key)):
        reason = why_not(n, change, table_changes, zone)
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
    return NoticeVerdict(change, code, counted, missing, tuple(rejected), lead)


def notice_verdicts(
    changes: Sequence[Change], notices: Sequence[Notice], zone: dt.tzinfo = dt.UTC
) -> list[NoticeVerdict]:
    """Every change judged (changes of packs without notice rules are skipped).

    Only a notice for the change's pit can count, so a change is judged on its pit's notices
    first: a day of thousands of changes and notices is not judged change by notice. A change
    that then has a finding is judged again on every notice, for the related notices that do
    not count, which its finding lists (a verdict without a finding keeps only its pit's)."""
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
        v = judge_change(c, by_pit.get(c.pit, ()), per_table[c.table], zone)
        if v.code is not None:
            v = judge_change(c, notices, per_table[c.table], zone)
        out.append(v)
    return out


def _recipient_text(recipients: Iterable[str]) -> str:
    names = {DIVISION: "the Division", SURVEILLANCE: "surveillance"}
    return _and([names.get(r, r) for r in recipients])


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
            given = _and(sorted({local(n.given_at, zone) for n in counted}))
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


# --- one procedure per pit ----------------------------------------------------------------


@dataclass(frozen=True)
class PitConflict:
    """Tables of one pit on different procedures at one moment, and the provision broken."""

    rule: str  # "7.10(c)1", "7.10(c)2" or "3.10(c)"
    tables: tuple[tuple[str, str, int], ...]  # (table, game, procedure)


def pit_conflicts(active: Sequence[Segment]) -> list[PitConflict]:
    """What is inconsistent among the segments open at one moment in one pit.

    7.10(c)1: all mini-baccarat tables of a pit on one procedure. 7.10(c)2: a mini-baccarat
    table in a pit with a punto banco table uses the punto banco table's procedure. 3.10(c)
    (assumed, per the punto banco pack's same_in_pit): punto banco tables of a pit agree.
    Only tables open at that moment count: a closed table uses no procedure.
    """
    out = []
    minis = sorted((s for s in active if s.game == MINI and s.rules.same_in_pit),
                   key=lambda s: s.table)
    puntos = sorted((s for s in active if s.game == PUNTO), key=lambda s: s.table)

    def names(segs: Iterable[Segment]) -> tuple[tuple[str, str, int], ...]:
        return tuple((s.table, s.game, s.procedure) for s in segs)

    if len({s.procedure for s in minis}) > 1:
        out.append(PitConflict("7.10(c)1", names(minis)))
    if len({s.procedure for s in puntos}) > 1 and any(s.rules.same_in_pit for s in puntos):
        out.append(PitConflict("3.10(c)", names(puntos)))
    if puntos:
        pb = {s.procedure for s in puntos}
        followers = [s for s in active if s.game == MINI and s.rules.follow_punto_banco]
        if any(s.procedure not in pb for s in followers):
            out.append(PitConflict("7.10(c)2", names(sorted([*puntos, *followers],
                                                                key=lambda s: s.table))))
    return out


@dataclass
class _Episode:
    pit: str
    start: dt.datetime
    end: dt.datetime | None = None
    states: list[dict[str, Any]] = field(default_factory=list)
    tables: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    rules: set[str] = field(default_factory=set)
    events: dict[tuple[str, int], Segment] = field(default_factory=dict)
    open_ended: bool = False


def pit_episodes(
    segments: Sequence[Segment], grace: dt.timedelta = dt.timedelta(0)
) -> list[_Episode]:
    """Maximal intervals during which a pit's open tables are inconsistent.

    The state holds from one boundary (a table opening, changing, closing) to the next, so
    tables changing at the same instant never conflict. An episode shorter than `grace` is
    dropped (default 0: the regulation allows no changeover; a property may set one).
    """
    by_pit: dict[str, list[Segment]] = defaultdict(list)
    for s in segments:
        by_pit[s.pit].append(s)
    episodes = []
    for pit in sorted(by_pit):
        starts: dict[dt.datetime, list[Segment]] = defaultdict(list)
        ends: dict[dt.datetime, list[Segment]] = defaultdict(list)
        for s in by_pit[pit]:
            if s.end > s.start:
                starts[s.start].append(s)
                ends[s.end].append(s)
        times = sorted(set(starts) | set(ends))
        active: dict[tuple[str, int], Segment] = {}
        current: _Episode | None = None
        for i, t in enumerate(times[:-1]):
            for s in ends.get(t, ()):
                active.pop((s.table, s.start_seq), None)
            for s in starts.get(t, ()):
                active[(s.table, s.start_seq)] = s
            conflicts = pit_conflicts(list(active.values()))
            if conflicts:
                if current is None:
                    current = _Episode(pit, t)
                involved = {name for c in conflicts for name, _, _ in c.tables}
                current.states.append({
                    "from": iso(t),
                    "to": iso(times[i + 1]),
                    "procedures": {s.table: s.procedure for s in active.values()
                                   if s.table in involved},
                    "rules": sorted({c.rule for c in conflicts}),
                })
                for c in conflicts:
                    current.rules.add(c.rule)
                    for name, _, proc in c.tables:
                        current.tables[name].add(proc)
                for s in active.values():
                    if s.table in involved:
                        current.events[(s.table, s.start_seq)] = s
            elif current is not None:
                current.end = t
                episodes.append(current)
                current = None
        if current is not None:
            current.end = times[-1]
            current.open_ended = any(
                s.open_ended and s.end == times[-1] for s in current.events.values()
            )
            episodes.append(current)
    return [e for e in episodes if e.end is not None and e.end - e.start >= grace]


# The provisions themselves are the finding's rule, from the tables' packs.
_PIT_RULE_TEXT = {
    "7.10(c)1": "mini-baccarat tables of one pit must use one procedure",
    "7.10(c)2": "a mini-baccarat table must use the procedure of the punto banco table in its "
                "pit",
    "3.10(c)": "punto banco tables of one pit must use one procedure",
}


def pit_findings(episodes: Sequence[_Episode], zone: dt.tzinfo = dt.UTC) -> list[Finding]:
    """One finding per episode, naming its tables, their procedures and the interval."""
    out = []
    for e in episodes:
        assert e.end is not None
        first = min(e.events.values(), key=lambda s: (s.start, s.table))
        starters = sorted((s for s in e.events.values() if s.start == e.start),
                          key=lambda s: s.table) or [first]
        tables = sorted(e.tables)
        on = _and([f"{t} on procedure {'/'.join(map(str, sorted(e.tables[t])))}"
                   for t in tables])
        until = ("until the log ends at " if e.open_ended else "to ") + local(e.end, zone)
        message = (
            f"Pit {e.pit}: {on} from {local(e.start, zone)} {until} "
            f"({minutes(e.end - e.start)}); "
            + "; ".join(_PIT_RULE_TEXT[r] for r in sorted(e.rules)) + "."
        )
        events = [
            {"table": s.table, "seq": s.start_seq, "ts": iso(s.start),
             "type": s.start_type, "procedure": s.procedure, "source": s.start_source}
            for s in sorted(e.events.values(), key=lambda s: (s.start, s.table))
        ]
        fingerprint = make_fingerprint("procedure.pit_inconsistent", e.pit, iso(e.start),
                                       iso(e.end), ",".join(tables))
        out.append(
            Finding(
                code="procedure.pit_inconsistent",
                fingerprint=fingerprint,
                table=None,
                pit=e.pit,
                shoe=None,
                round=None,
                seq=None,
                ts=e.start,
                message=message,
                expected={"procedures_in_pit": 1, "rules": sorted(e.rules)},
                observed={
                    "tables": {t: sorted(e.tables[t]) for t in tables},
                    "start": iso(e.start),
                    "end": iso(e.end),
                    "open_ended": e.open_ended,
                    "states": e.states,
                },
                source=starters[0].start_source,
                evidence={
                    "tables": tables,
                    "pit": e.pit,
                    "events": events,
                    "interval": [iso(e.start), iso(e.end)],
                    "states": e.states,
                },
            )
        )
    return out


# --- undeclared changes -------------------------------------------------------------------


@dataclass(frozen=True)
class RoundOrder:
    """One round's payout order as the undeclared-change check needs it."""

    table: str
    shoe: str
    round: int
    first_seq: int  # the round's first event (where the declared procedure is read)
    pay_seq: int  # the first pay or vig event (where the order shows)
    ts: dt.datetime
    source: str
    declared: int | None
    fits: frozenset[int]
    informative: bool  # two or more seats and some vigorish: procedures 1-4 look different

    def as_json(self) -> dict[str, Any]:
        return {"table": self.table, "shoe": self.shoe, "round": self.round,
                "seq": self.pay_seq, "ts": iso(self.ts), "source": self.source,
                "consistent_procedures": sorted(self.fits)}


@lru_cache(maxsize=1 << 16)
def order_facts(
    pairs: tuple[tuple[str, int], ...], vig_charged: bool
) -> tuple[frozenset[int], bool]:
    """The procedures a payment order fits, and whether it tells them apart. Rounds repeat
    a few hundred orders between them, so a day of millions of rounds computes each once."""
    steps = order_rules.steps(pairs, vig_charged)
    seats = {seat for _, seat in steps}
    informative = len(seats) >= 2 and any(k == order_rules.VIG for k, _ in steps)
    return order_rules.consistent_procedures(pairs, vig_charged), informative


def round_order(
    table: str,
    shoe: str,
    rnd: int,
    first_seq: int,
    moves: Sequence[tuple[str, int, int, dt.datetime, str]],
    declared: int | None,
    vig_charged: bool,
) -> RoundOrder | None:
    """A RoundOrder from the round's pay/vig events (type, seat, seq, ts, source) in seq order;
    None for a round without payments."""
    if not moves:
        return None
    fits, informative = order_facts(
        tuple((kind, seat) for kind, seat, _, _, _ in moves), vig_charged
    )
    _, _, seq, ts, source = moves[0]
    return RoundOrder(table, shoe, rnd, first_seq, seq, ts, source, declared, fits, informative)


@dataclass
class Run:
    """Consecutive rounds at one table fitting other procedures than the declared one."""

    table: str
    declared: int
    procedures: frozenset[int]
    rounds: list[RoundOrder] = field(default_factory=list)  # the informative rounds
    covered: list[RoundOrder] = field(default_factory=list)  # every round it explains
    pending: list[RoundOrder] = field(default_factory=list)  # ambiguous, after the last one

    @property
    def first(self) -> RoundOrder:
        return self.rounds[0]

    @property
    def last(self) -> RoundOrder:
        return self.rounds[-1]


def undeclared_runs(
    rounds: Sequence[RoundOrder], min_rounds: int = MIN_UNDECLARED_ROUNDS
) -> list[Run]:
    """Runs of at least `min_rounds` informative rounds at a table that fit a procedure other
    than the declared one, with none in between fitting the declared procedure.

    - Informative: two or more seats paid and some vigorish. Rounds with one winning seat or no
      vigorish cannot tell the procedures apart (1 looks like 3, 2 like 4, or all alike): they
      neither start nor break a run; within a run they are covered when they fit its procedure
      and not the declared one.
    - An informative round fitting the declared procedure breaks the run; one fitting another
      procedure than the run's ends it and starts a new run.
    - A round fitting no procedure is no evidence either way (it stays an
      order.procedure_mismatch) and neither starts nor breaks a run.
    - A declared change (procedure_change, table_open) ends the run: a run is against one
      declared procedure.
    `rounds` are in seq order per table (any tables mixed).
    """
    by_table: dict[str, list[RoundOrder]] = defaultdict(list)
    for r in rounds:
        by_table[r.table].append(r)
    runs: list[Run] = []
    for table in sorted(by_table):
        run: Run | None = None

        def close() -> None:
            nonlocal run
            if run is not None and len(run.rounds) >= min_rounds:
                runs.append(run)
            run = None

        for r in sorted(by_table[table], key=lambda r: r.first_seq):
            if r.declared is None:
                close()
                continue
            if run is not None and r.declared != run.declared:
                close()
            if not r.fits:
                continue
            if not r.informative:
                if run is not None and r.declared not in r.fits and r.fits & run.procedures:
                    run.pending.append(r)
                continue
            if r.declared in r.fits:
                close()
                continue
            if run is not None and r.fits & run.procedures:
                run.procedures &= r.fits
                run.covered += run.pending
                run.pending = []
                run.rounds.append(r)
                run.covered.append(r)
                continue
            close()
            run = Run(table, r.declared, r.fits, [r], [r])
        close()
    return runs


def _round_name(r: RoundOrder) -> str:
    return f"shoe {r.shoe} round {r.round}"


def undeclared_findings(
    runs: Sequence[Run],
    pits: Mapping[str, str],
    notices: Sequence[Notice] = (),
    zone: dt.tzinfo = dt.UTC,
) -> list[Finding]:
    """One finding per run, at its first round, naming its first and last round. The rounds it
    covers are listed in evidence (`covered_rounds`): their order.procedure_mismatch findings
    are this one deviation seen round by round (see covered_rounds / supersede in
    auditor.audit.table_pass)."""
    out = []
    for run in runs:
        first, last = run.first, run.last
        procs = sorted(run.procedures)
        fit = "procedure " + " or ".join(map(str, procs))
        pit = pits.get(run.table)
        related = [n for n in notices if n.pit == pit and n.procedure in run.procedures
                   and n.covers_table(run.table) and n.effective <= last.ts]
        message = (
            f"{run.table}: from {_round_name(first)} to {_round_name(last)} "
            f"({local(first.ts, zone)} to {local(last.ts, zone)}), {len(run.rounds)} rounds "
            f"with several winners were paid in the order of {fit}, none in the order of the "
            f"declared procedure {run.declared}; no procedure change was logged."
        )
        if related:
            message += (f" Notices for {fit} exist ({len(related)}), but the table never "
                        "logged the change.")
        covered = sorted(run.covered, key=lambda r: r.first_seq)
        fingerprint = make_fingerprint("procedure.undeclared_change", run.table, first.shoe,
                                       first.round, last.shoe, last.round, run.declared)
        out.append(
            Finding(
                code="procedure.undeclared_change",
                fingerprint=fingerprint,
                table=run.table,
                pit=pit,
                shoe=first.shoe,
                round=first.round,
                seq=first.pay_seq,
                ts=first.ts,
                message=message,
                expected={"procedure": run.declared},
                observed={
                    "consistent_procedures": procs,
                    "first": first.as_json(),
                    "last": last.as_json(),
                    "informative_rounds": len(run.rounds),
                    "covered_rounds": [[r.shoe, r.round] for r in covered],
                },
                source=first.source,
                evidence={
                    "tables": [run.table],
                    "pit": pit,
                    "events": [
                        {"table": r.table, "seq": r.pay_seq, "ts": iso(r.ts),
                         "type": "pay", "shoe": r.shoe, "round": r.round, "source": r.source}
                        for r in (first, last)
                    ],
                    "interval": [iso(first.ts), iso(last.ts)],
                    "covered_rounds": [[r.shoe, r.round] for r in covered],
                    "notices": [n.as_json() for n in related],
                },
            )
        )
    return out
