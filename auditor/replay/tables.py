"""Table and pit checks of the payout procedure (N.J.A.C. 13:69F-7.10(c)) beyond each table's
own notices (auditor.replay.procedures): one procedure per pit, and changes the payout order
shows although the log never declared them.

The rules are pure functions over small frozen values (`Segment`, `RoundOrder`);
`auditor.audit.load` reads those values from the audit database, and
`auditor.audit.table_pass.table_findings` records what the rules find. docs/procedures.md explains
every choice made where the regulation is silent.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from auditor.finding import Finding
from auditor.finding import fingerprint as make_fingerprint
from auditor.replay import order as order_rules
from auditor.replay.procedures import Notice, Segment
from auditor.replay.text import and_list, iso, local, minutes

MINI, PUNTO = "mini_baccarat", "punto_banco"
# Consecutive discriminating rounds that fit another procedure, and not the declared one,
# before they are reported as one undeclared change rather than round by round. One or two
# are a dealer's slip (each stays an order.procedure_mismatch); three in a row at one table,
# with nothing in between fitting the declared procedure, are a practice.
MIN_UNDECLARED_ROUNDS = 3


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
        on = and_list([f"{t} on procedure {'/'.join(map(str, sorted(e.tables[t])))}"
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


def paid_round(
    table: str,
    shoe: str,
    rnd: int,
    first_seq: int,
    pairs: tuple[tuple[str, int], ...],
    first_pay: tuple[int, dt.datetime, str],
    declared: int | None,
    vig_charged: bool,
) -> RoundOrder:
    """A round's RoundOrder from its pay/vig events: their (type, seat) in seq order and the
    first one's (seq, ts, source), what one aggregate per round reads (auditor.audit.load)."""
    fits, informative = order_facts(pairs, vig_charged)
    seq, ts, source = first_pay
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


# What a round is to a run (run_spans): one that closes any run (no declared procedure, or
# informative and fitting the declared), one that can be in a run as informative, or neither.
BREAKS, OTHER, NEITHER = 0, 1, 2


def round_kind(declared: int | None, fits: frozenset[int], informative: bool) -> int:
    """BREAKS, OTHER or NEITHER, as undeclared_runs treats the round."""
    if declared is None or (informative and declared in fits):
        return BREAKS
    return OTHER if informative and fits else NEITHER


def run_spans(
    declared: np.ndarray, kinds: np.ndarray, min_rounds: int = MIN_UNDECLARED_ROUNDS
) -> list[tuple[int, int]]:
    """Where in one table's rounds (seq order: each one's declared procedure, -1 for none,
    and its round_kind) a run can lie: the [start, stop) index spans between the points where
    `undeclared_runs` closes any run (a BREAKS round, a declared change) that hold at least
    `min_rounds` OTHER rounds. `undeclared_runs` over each span alone finds exactly the runs
    it finds over all the rounds, since it begins each span and ends it with no run open:
    the table pass builds a RoundOrder, with its time and source, only for these rounds, not
    for every round of a year's history (issue 32). In numpy: it looks at every round."""
    n = len(kinds)
    if not n:
        return []
    breaks = kinds == BREAKS
    after_break = np.concatenate(([True], breaks[:-1]))
    changed = np.concatenate(([True], declared[1:] != declared[:-1]))
    starts = np.flatnonzero(~breaks & (after_break | changed))
    bounds = np.append(np.union1d(np.flatnonzero(breaks), starts), n)
    stops = bounds[np.searchsorted(bounds, starts, side="right")]
    other = np.concatenate(([0], np.cumsum(kinds == OTHER)))
    keep = other[stops] - other[starts] >= min_rounds
    return list(zip(starts[keep].tolist(), stops[keep].tolist(), strict=True))


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
