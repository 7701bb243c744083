"""`bacc-audit watch`: the audit as the night goes.

A surveillance room wants a wrong payout while the chips are still on the layout. So instead of
ingesting a finished night, `watch` follows every log in the spool as the table systems write
it (auditor.ingest.follow) and audits each round as soon as its `round_end` is in, with the
replay and the writer `audit` uses (auditor.audit.run.audit_rounds): a watched night's
findings are a batch night's, by fingerprint.

What needs more than one round is decided by a *sweep*: the rounds that can get no more events
but never had a `round_end` (the table went on, or the gaming day is over), then the table,
pit and shoe pass over the whole database, exactly as `audit` runs it. A sweep runs when an
event that can decide such a check arrives (a procedure change, a notice, a shoe's end, a table
closing...), but takes at most `sweep_share` of a core: the pass weighs what the night
weighs, so late in a busy night its findings come within a few of its own durations.

Nothing is kept only in memory: each poll's lines commit with the record of what was read,
each audit in its own transaction. Killed (SIGKILL included) and started again, `watch` goes on
where the database says it was, and its first sweep audits what the kill left unaudited.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from auditor.audit.chemin_order import CheminTails
from auditor.audit.listed import ContextIndex, Listed, keys_sql
from auditor.audit.load import load_latest_ts
from auditor.audit.round_rows import RoundRows
from auditor.audit.rounds import CONTEXT_EVENTS_SQL, JudgedBefore
from auditor.audit.run import AuditResult, Known, audit, audit_rounds
from auditor.config import PropertyConfig
from auditor.ingest.follow import Follower, Poll
from auditor.ingest.paths import folders_changed, logs_in
from auditor.jobs.earliest import EarliestSeen
from auditor.replay.log_ends import GamingDays
from auditor.store import ledger
from auditor.store.closed_days import closed_days
from auditor.store.db import single
from auditor.store.events import ROUND_EVENTS
from auditor.store.findings import short_id
from auditor.store.sql import stream_name

# The events a round's table context comes from, and the closes that end its rounds
# (auditor.audit.rounds.CONTEXT_EVENTS_SQL).
CONTEXT_TYPES = ("table_open", "procedure_change", "table_close")
# On stopping, polls until one loads nothing, but at most this many (a spool still written).
DRAIN_POLLS = 1000
# A gaming day is closed, and the ends of its tables' logs judged (store/closed_days.py),
# once the logs reach this long past its end: the next gaming day has begun, and the table
# systems have had time to deliver the last lines of the night (a table closing a little
# after the hour, a system that writes late). docs/live.md.
CLOSE_GRACE = dt.timedelta(minutes=30)
# The spool is walked whole at least this often (seconds), even when no folder of it
# changed (`Watch._scan`).
FULL_RESCAN = 30.0
# A sweep's round_audits rows are stamped by DuckDB's clock when its transaction began: those
# this long before it started on Python's are taken as its too (more is only slower).
SWEEP_CLOCK_MARGIN = dt.timedelta(seconds=5)
# New findings told one a line in a poll; a backlog (a night loaded at once) is counted.
TELL_AT_MOST = 20


@dataclass
class WatchOptions:
    # The poll rate follows what arrives (`next_wait`, docs/live.md): after a poll that
    # loaded lines the next one starts `poll_busy` seconds after it ended (a table's lines
    # come in bursts: the rest of a round is usually being written); after one that found
    # nothing the wait doubles, up to `poll` seconds from one poll's start to the next. So
    # a busy floor is looked at often, a quiet one costs a stat per file every `poll`.
    poll: float = 0.2
    poll_busy: float = 0.05
    # ...but the rest after a poll that loaded lines is at least the poll's own time times
    # (1 - poll_share) / poll_share (still never past `poll` from start to start): at real
    # speed every poll finds a few lines, and back to back the polls' fixed cost would take
    # a whole core; so they take about this share of it, however many tables write.
    poll_share: float = 0.2
    rescan: float = 1.0  # seconds between looks for new files in the spool
    sweep_share: float = 0.05  # the sweeps' share of a core (their CPU), at most
    sweep_every: float = 10.0  # seconds between sweeps, at least (but at the end)
    idle_sweep: float = 60.0  # a sweep this long after the last, even if nothing asked
    close_grace: dt.timedelta = CLOSE_GRACE  # past a gaming day's end before it is closed
    # A poll that wrote seals what it wrote once the last seal is this old (seconds; 0:
    # every poll), and the run's end seals the rest: a seal costs a few statements
    # whatever it holds, and at a poll every 0.2 s they would be a fifth of the watcher.
    seal_every: float = 1.0
    # ...and once a seal of `d` seconds is d * (1 - seal_share) / seal_share old, if more:
    # a seal reads back the pieces it digests, tens of ms at 500 tables.
    seal_share: float = 0.05
    # DuckDB's threads while polling (0: its setting left alone). A poll is ~30 statements
    # over a few rows each, where a second thread costs more CPU than it saves (one: a
    # poll's CPU about 16% less, docs/benchmarks.md, session 51); a sweep, which reads the
    # night, gets the connection's own count back while it runs.
    poll_threads: int = 1


@dataclass
class WatchStats:
    polls: int = 0
    events: int = 0
    quarantined: int = 0
    rounds_live: int = 0  # audited as their round_end came in
    rounds_swept: int = 0  # audited by a sweep
    findings_new: int = 0
    findings_withdrawn: int = 0
    sweeps: int = 0
    sweep_seconds: float = 0.0  # the last sweep's duration
    files: int = 0
    by_code: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)  # files refused or unreadable, once each

    def summary(self) -> dict[str, Any]:
        return {
            "polls": self.polls,
            "files_followed": self.files,
            "events": self.events,
            "quarantined": self.quarantined,
            "rounds_audited": self.rounds_live + self.rounds_swept,
            "rounds_audited_live": self.rounds_live,
            "findings_new": self.findings_new,
            "findings_withdrawn": self.findings_withdrawn,
            "sweeps": self.sweeps,
            "findings_by_code": dict(sorted(self.by_code.items())),
            "files_refused": self.problems,
        }


# A line for whoever runs `watch` (the CLI prints it): what just happened, in a sentence.
Say = Callable[[str], None]


class Watch:
    """One spool followed into one database. The caller owns the connection and the thread;
    `run` loops until `stop` is set, `step` is one poll (tests drive it directly)."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        spool: Path,
        config: PropertyConfig,
        run_id: int,
        options: WatchOptions | None = None,
        say: Say | None = None,
    ) -> None:
        self.con = con
        self.spool = spool
        self.config = config
        self.run_id = run_id
        self.options = options or WatchOptions()
        self.say = say or (lambda _: None)
        self.follower = Follower(run_id)
        self.known = Known(chemin_tails=CheminTails())
        self._judged_before = JudgedBefore(con, run_id)
        self.stats = WatchStats()
        # The gaming days, in the property's zone once it is known (`_gaming_days`).
        self._days: GamingDays | None = None
        self._last_scan = -1e9
        # The spool's folders at the last walk (`_scan`), when it was, and whether it met a
        # problem.
        self._folders: dict[str, tuple[int, int, int]] = {}
        self._walked_ns = 0
        self._last_walk = -1e9
        self._reported_problems = False
        self._sweep_due = True  # the first sweep audits what a kill left unaudited
        self._sweep_after = 0.0  # monotonic time before which no sweep starts
        self._last_sweep = time.monotonic()
        self._reported: set[str] = set()
        self._last_poll_files = 0
        # Rounds whose round_end came but that could still get events (chemin de fer).
        self._unclosed: set[tuple[str, str, int]] = set()
        # Rounds whose round_end came while watching: more events of one are late, and are
        # judged at once (log.after_round_end, log.late_delivery); those of rounds that
        # ended before a restart wait for the next sweep.
        self._ended: set[tuple[str, str, int]] = set()
        # From when the rounds it judges must be read (auditor.jobs.earliest).
        self._earliest = EarliestSeen()
        # The round events loaded, to replay a round from as it ends (auditor.audit.round_rows)
        self._held = RoundRows(stamped_to=single(con, "SELECT max(ts) FROM events")[0])
        self._held.ordered(con)
        # live_contexts (the table_open, procedure_change and table_close events), made whole
        # once, then given those of the sources of each poll that loaded one: made from every
        # event each time, it read every night the database keeps.
        self._contexts_stale = True
        self._contexts_whole = True
        self._context_sources: set[int] = set()
        self._contexts = ContextIndex()  # live_contexts' index, made with it
        # The gaming days on record as closed, and the notices and withdrawals entered by
        # hand, as last counted (`_entered_beside`).
        self._beside_seen = self._beside()
        self._wrote = False  # since the last seal
        self._sealed_to: dt.datetime | None = None  # the last seal's time (store/ledger.seal)
        self.seal_seconds = 0.0  # spent sealing (bench/ledger.py reads it)
        self._next_seal = -1e9  # monotonic time from which a poll that wrote seals
        self._types: dict[str, dict[str, str]] | None = None
        # Run after each sweep, in this thread: `watch --file-reports` files the shift
        # reports then (auditor.jobs.filing.ShiftFiler.after_sweep), or, served
        # (auditor.jobs.service), hands them to the filing's own thread.
        self.after_sweep: Callable[[], object] | None = None
        # Held by each step from its first statement to its last: whoever else writes
        # through this connection's cursors and must not interleave with a poll (the
        # filing's decision, seal and snapshot) takes it. Reentrant: a filing run inside a
        # step (tests, --file-reports without its thread) holds it already.
        self.writing = threading.RLock()
        # Called after each step that committed rows (lines loaded, with their `log.*`
        # findings, or findings of an audit or a sweep): the board reads the new findings
        # at once (auditor.board.app.BoardServer.nudge) instead of polling for them.
        self.on_commit: Callable[[], object] | None = None
        # DuckDB's thread count as the connection came (a setting of the whole database
        # instance, its cursors included): the sweeps' and what the run leaves behind.
        self._threads = int(single(con, "SELECT current_setting('threads')")[0])
        self._use_threads(self.options.poll_threads)
        self._committed = False  # this step committed rows
        self._wait = self.options.poll_busy  # after the last poll (`next_wait`)
        # The findings row up to which the new ones were told (`_tell_new`).
        self._told = int(con.execute("SELECT coalesce(max(id), 0) FROM findings").fetchall()[0][0])

    # -- the loop -----------------------------------------------------------------------

    def run(self, stop: threading.Event) -> WatchStats:
        """Poll until `stop` is set; then poll until nothing more comes (a backlog is loaded
        whole, at most DRAIN_POLLS polls) and sweep, so what came in is decided before the
        run ends."""
        while not stop.is_set():
            started, cpu = time.monotonic(), time.process_time()
            loaded = self.step()
            stop.wait(self.next_wait(
                loaded, time.monotonic() - started, time.process_time() - cpu))
        self._last_scan = self._last_walk = -1e9  # walk the spool once more
        for _ in range(DRAIN_POLLS):
            if not self.step() and not self._last_poll_files:
                break
        self.sweep()
        with self.writing:
            self._tell_board()
            if self._wrote:
                self.seal()
            self._use_threads(self._threads)
        return self.stats

    def _use_threads(self, n: int) -> None:
        if n > 0:
            self.con.execute(f"SET threads = {int(n)}")

    def next_wait(self, loaded: int, took: float, cpu: float | None = None) -> float:
        """Seconds to rest after a poll that loaded `loaded` events in `took` seconds of
        wall time and `cpu` seconds of the process's CPU (`took` if not given):
        `poll_busy` after one that loaded lines, or more after a costly one (`poll_share`),
        twice the last rest after one that loaded none, the whole stretch from one poll's
        start to the next at most `poll`. The share is of CPU, not of wall time: on a
        loaded machine a poll waits for a core, and resting for that wait too would leave
        the watch behind a busy floor."""
        o = self.options
        share = min(max(o.poll_share, 0.01), 1.0)
        spent = took if cpu is None else cpu
        busy = min(max(o.poll_busy, spent * (1 - share) / share), o.poll)
        self._wait = busy if loaded else min(self._wait * 2, o.poll)
        return max(0.0, min(self._wait, o.poll - took))

    def step(self) -> int:
        """Look for new files, load what the followed files gained, audit the rounds that
        ended, and sweep if one is due and allowed. Returns the events loaded."""
        with self.writing:
            loaded = self._step()
            self._tell_board()
        return loaded

    def _tell_board(self) -> None:
        """Nudge the board (`on_commit`) if rows were committed since the last nudge."""
        if self._committed and self.on_commit is not None:
            self.on_commit()
        self._committed = False

    def _step(self) -> int:
        now = time.monotonic()
        if now - self._last_scan >= self.options.rescan:
            self._scan()
            self._last_scan = now
            self._sweep_due |= self._entered_beside()
        poll = self.follower.poll(self.con)
        self.stats.polls += 1
        self._last_poll_files = len(poll.files)
        self._committed = self._committed or bool(poll.files)
        if any(t in CONTEXT_TYPES for counts in poll.types.values() for t in counts):
            self._contexts_stale = True
            loaded = [f.source_id for f in poll.files if f.status == "ingested"]
            self._contexts_whole |= None in loaded
            self._context_sources.update(i for i in loaded if i is not None)
        # only the watcher writes events: a shoe's dealer changes with a shoe_start loaded
        self.known.forget_shoes({
            t for s, counts in poll.types.items()
            if "shoe_start" in counts and (t := stream_name("table", s)) is not None
        })
        self._note(poll)
        if self.known.chemin_tails is not None:
            self.known.chemin_tails.loaded(poll.round_seqs, poll.cut_cards)
        self._earliest.loaded(poll.rounds_touched)
        self._held.loaded(poll.rows, poll.rounds_touched, poll.unheld)
        late = (poll.rounds_touched.keys() & self._ended) - set(poll.rounds_ended)
        self._ended.update(poll.rounds_ended)
        if poll.rounds_ended or self._unclosed or late:
            self._audit_ended(poll, late)
        if self._wants_sweep(poll) or (
            poll.events and time.monotonic() - self._last_sweep >= self.options.idle_sweep
        ):
            self._sweep_due = True
        if self._sweep_due and time.monotonic() >= self._sweep_after:
            self._tell_board()  # the rounds' findings shown before the sweep, not after it
            self.sweep()
        self._wrote = self._wrote or bool(poll.files)
        if self._wrote and time.monotonic() >= self._next_seal:
            self._tell_board()  # nor wait for the seal
            self.seal()
        return poll.events

    def seal(self) -> None:
        """Seal what this run wrote since its last seal (store/ledger.py): the pieces, the
        sources and the findings of the polls since, so the ledger is never more than
        `seal_every` behind the database. Only rows newer than the last seal are looked
        at."""
        with self.writing:
            self._seal()

    def _seal(self) -> None:
        started = time.monotonic()
        if self._types is None:
            self._types = ledger.column_types(self.con)
        sealed = ledger.seal(self.con, self.run_id, since=self._sealed_to, types=self._types)
        if sealed.head is not None:
            self._sealed_to = sealed.head.sealed_at
        self._wrote = False
        ended = time.monotonic()
        took = ended - started
        o = self.options
        share = max(o.seal_share, 0.01)
        # seal_every 0: after every poll that wrote (tests, bench/ledger.py), whatever it cost
        spaced = max(o.seal_every, took * (1 - share) / share) if o.seal_every > 0 else 0.0
        self._next_seal = ended + spaced
        self.seal_seconds += took

    def sweep(self) -> AuditResult:
        """The rounds that can get no more events and are not audited yet, then the table,
        pit and shoe pass: what `audit` does, short of judging a round still being dealt."""
        with self.writing:
            result = self._sweep()
        if self.after_sweep is not None:  # the shift reports due (auditor.jobs.filing)
            self.after_sweep()
        return result

    def _sweep(self) -> AuditResult:
        started, cpu = time.monotonic(), time.process_time()
        began = dt.datetime.now(dt.UTC) - SWEEP_CLOCK_MARGIN
        self._use_threads(self._threads if self.options.poll_threads else 0)
        try:
            result = audit(
                self.con,
                self.run_id,
                self.config,
                closed_before=self._final_before(),
                known=self.known,
                day_close=("watch", self.options.close_grace),
            )
        finally:
            self._use_threads(self.options.poll_threads)
            self._held.ordered(self.con)  # the sweep's stream check may have written some
        # The rounds it judged are judged as a poll's are: no longer followed nor held.
        judged = self.con.execute(
            "SELECT DISTINCT table_id, shoe, round FROM round_audits "
            "WHERE run_id = ? AND audited_at >= ?", [self.run_id, began]).fetchall()
        self._earliest.judged(judged)
        self._held.forget(judged)
        took = time.monotonic() - started
        self.stats.sweeps += 1
        self.stats.sweep_seconds = took
        self.stats.rounds_swept += result.rounds
        self._count(result, also_tables=True)
        self._sweep_due = False
        # The share is of CPU, as the polls' is (next_wait): a sweep's statements run on
        # DuckDB's threads and its integrity pass beside its table pass, so its wall time
        # says less and less of what it costs.
        share = max(self.options.sweep_share, 0.01)
        spent = time.process_time() - cpu
        self._sweep_after = time.monotonic() + max(
            spent * (1 - share) / share, self.options.sweep_every
        )
        self._last_sweep = time.monotonic()
        return result

    def _final_before(self) -> dt.datetime:
        """Rounds that started before this are final even without their round_end: those of
        the gaming days over, closed on record or by the logs reaching the day's end plus
        the close grace (the rule the table pass closes a day by). Not the day's end alone:
        a round dealt across 06:00 at one table is still being dealt when another table's
        first event of the new day comes in, and judged then it would be judged from part of
        its events (a false settle.unsettled, evidence cut short)."""
        days = self._gaming_days()
        ends = [days.end(day) for day in closed_days(self.con)]
        latest = load_latest_ts(self.con)
        if latest is not None:
            over = days.of(latest - self.options.close_grace) - dt.timedelta(days=1)
            ends.append(days.end(over))
        return max(ends, default=dt.datetime.min.replace(tzinfo=dt.UTC))

    # -- pieces ---------------------------------------------------------------------------

    def _gaming_days(self) -> GamingDays:
        """The gaming days in the property's zone: kept once the zone is known (configured,
        or read from the logs once some are in); in UTC until then, as `audit` would have
        them over a database without logs."""
        if self._days is not None:
            return self._days
        zone = self.config.zone_known(self.con)
        days = GamingDays(self.config.gaming_day_start, zone or self.config.zone())
        if zone is not None:
            self._days = days
        return days

    def _scan(self) -> None:
        """Follow the log files new in the spool. The spool is walked again only when one of
        its folders changed since the last walk (a file added, removed or renamed), when
        that walk found a problem (a link to nothing may come to lead somewhere), or once
        FULL_RESCAN has passed: at 500 tables a walk (a stat and a resolve per file) cost
        more than the polls between two of them that loaded nothing."""
        now = time.monotonic()
        if (
            self._folders
            and not self._reported_problems
            and now - self._last_walk < FULL_RESCAN
            and not folders_changed(self._folders, self._walked_ns)
        ):
            return
        self._folders, self._walked_ns, self._last_walk = {}, time.time_ns(), now
        found, problems = logs_in(self.spool, self._folders)
        self._reported_problems = bool(problems)
        for problem in problems:  # a link to nothing, a pipe: said once, as a bad file is
            if problem not in self._reported:
                self._reported.add(problem)
                self.stats.problems.append(problem)
                self.say(problem)
        followed = set(self.follower.paths)
        for path in found:
            if path not in followed:
                self.follower.follow(path)
                self.stats.files += 1

    def _entered_beside(self) -> bool:
        """Whether, since the last look, a gaming day was closed (`close-day`, written
        through this watch: its tables' log ends are then judged at the next sweep), or a
        notice entered or withdrawn by hand (`notice add`/`withdraw`, the board's notices
        page: the notice checks count it at the next sweep, as `audit` would)."""
        seen = self._beside()
        changed = seen != self._beside_seen
        self._beside_seen = seen
        return changed

    def _beside(self) -> tuple[int, int]:
        """The closed gaming days (closed_days counts a day once) and the notices and
        withdrawals ever entered (notice_entry.entries), in one statement: a writer's
        database has these tables (db.ensure_schema), and this runs once a second."""
        closed, notices = single(self.con, (
            "SELECT (SELECT count(DISTINCT gaming_day) FROM closed_days), "
            "(SELECT count(*) FROM notices) + (SELECT count(*) FROM notice_withdrawals)"))
        return int(closed), int(notices)

    def _note(self, poll: Poll) -> None:
        self.stats.events += poll.events
        self.stats.quarantined += poll.quarantined
        for f in poll.files:
            if f.status != "ingested" and f.message and f.message not in self._reported:
                self._reported.add(f.message)
                self.stats.problems.append(f.message)
                self.say(f.message)

    def _wants_sweep(self, poll: Poll) -> bool:
        """An event that can decide a table, pit or shoe check arrived (anything but a
        round's own events, and irregularities), or lines were put in quarantine (a gap may
        now be decidable). A round closed without its round_end waits for such an event or
        for idle_sweep."""
        if poll.quarantined:
            return True
        return any(
            t not in ROUND_EVENTS or t == "irregularity"  # irregularities: the table pass
            for counts in poll.types.values()
            for t in counts
        )

    def _audit_ended(self, poll: Poll, late: set[tuple[str, str, int]]) -> None:
        """The rounds that ended in this poll, those that ended before but could still
        get events then (chemin de fer: the bank's passing follows the round_end), once
        their table has gone on, and those that ended before and got events now (`late`)."""
        moved = self._tables_moved(poll)
        waiting = [k for k in self._unclosed if k[0] in moved]
        ended = list(dict.fromkeys([*poll.rounds_ended, *waiting, *sorted(late)]))
        if not ended:
            return
        if self._contexts_stale:
            self._update_contexts()
        audits = self._judged_before.audits_sql(ended)
        since = self._earliest.since(ended)
        # none judged before the watch, nor (`since`) while watching: their spans as held
        spans = None if self._judged_before.any_before(ended) else self._held.spans(ended, since)
        # the since is lifted for a round begun before the watch, or stamped before the rest
        result = audit_rounds(
            self.con, self.run_id, self.config, keys_sql(ended), since,
            known=self.known, contexts="live_contexts", audits=audits,
            listed=Listed(len(ended), self._contexts, self._held, self.follower.tops, spans),
        )
        self.stats.rounds_live += result.rounds
        self._count(result)
        audited = result.judged or set()  # the rounds listed audited, now or before
        self._unclosed = {k for k in self._unclosed | set(ended) if k not in audited}
        self._earliest.judged(audited)
        self._held.forget(audited)

    def _update_contexts(self) -> None:
        """live_contexts as CONTEXT_EVENTS_SQL gives them: made whole the first time, then
        given the new ones, read from the sources of the polls that loaded one (only the
        watch writes events; a (table, seq) is one event); and their index in Python
        (auditor.audit.listed), which the polls choose their rounds by."""
        if self._contexts_whole:
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE live_contexts AS {CONTEXT_EVENTS_SQL}")
            self._contexts = ContextIndex.read(self.con, "live_contexts")
        elif self._context_sources:
            ids = ", ".join(str(int(i)) for i in sorted(self._context_sources))
            self._contexts.add(self.con.execute(
                f"INSERT INTO live_contexts SELECT * FROM ({CONTEXT_EVENTS_SQL} "
                f"AND source_id IN ({ids})) ANTI JOIN live_contexts USING (table_id, seq) "
                "RETURNING *"
            ).fetchall())
        self._contexts_stale = self._contexts_whole = False
        self._context_sources.clear()

    @staticmethod
    def _tables_moved(poll: Poll) -> set[str]:
        """Tables whose stream received events in this poll."""
        return {t for s in poll.types if (t := stream_name("table", s)) is not None}

    def _count(self, result: AuditResult, also_tables: bool = False) -> None:
        wrote = bool(result.findings_new or result.findings_withdrawn or result.passes_new
                     or result.passes_withdrawn)
        self._wrote = self._wrote or wrote
        self._committed = self._committed or wrote
        new = result.findings_new + (result.passes_new if also_tables else 0)
        gone = result.findings_withdrawn + (result.passes_withdrawn if also_tables else 0)
        self.stats.findings_new += new
        self.stats.findings_withdrawn += gone
        self.stats.by_code.update(result.by_code)
        if new:
            self._tell_new()

    def _tell_new(self) -> None:
        """A line for each finding stored since the last told: its id, severity, code and
        where (the log of a night reads as the board's feed); at most TELL_AT_MOST a time."""
        rows = self.con.execute(
            "SELECT id, status, fingerprint, severity, code, table_id, pit, shoe, round "
            "FROM findings WHERE id > ? ORDER BY id",
            [self._told],
        ).fetchall()
        if not rows:
            return
        self._told = rows[-1][0]
        opened = [r for r in rows if r[1] == "open"]
        for _, _, fingerprint, severity, code, table, pit, shoe, rnd in opened[:TELL_AT_MOST]:
            where = f"table {table}" if table else (f"pit {pit}" if pit else "the property")
            if shoe is not None:
                where += f", shoe {shoe}" + (f" round {rnd}" if rnd is not None else "")
            self.say(f"new finding {short_id(fingerprint)}: {severity} {code} at {where}")
        if len(opened) > TELL_AT_MOST:
            self.say(f"and {len(opened) - TELL_AT_MOST} more new findings "
                     "(bacc-audit findings, or the board, lists them)")

