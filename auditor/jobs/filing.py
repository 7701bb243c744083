"""Filing the shift reports while `watch` runs (issue 33, docs/live.md).

`nightly` cannot run beside `watch` (the watch owns the database), so a property that keeps the
board up all day would have no filed PDFs. With `watch --file-reports`, the watch files them
itself, as `nightly` does (auditor.jobs.archive.report_shift: ARCHIVE/DAY/DAY_SHIFT.pdf, signed
when a key is configured, a new version beside one already filed when what it shows changed,
never a file rewritten), after the ledger is sealed and checked as `nightly` checks it.

When: once the logs reach the shift's end plus a grace (`FILE_GRACE`: the table systems' last
lines of the shift delivered, a round that straddles the end judged), and, for a shift that
ends with its gaming day, once the day is closed (the watch closes it at the day's end plus
its own grace, or `close-day` does), so that the tables whose logs stop are in its report as in
a batch `nightly`'s. The time is the logs', as for closing a day: a night fed again later is
filed when its own logs say so. A shift once filed is filed again (the next version, or
nothing when it would show the same) when a finding in it is recorded or withdrawn later: a
late line, a table's log end judged at the day's close.

The filing is asked for right after a sweep (the table, pit and shoe checks just decided). A
served watch (auditor.jobs.service) files in a thread of its own (`FilingThread`), on a cursor
of its own: the polls go on while a report renders (14-25 s for a busy shift), so a finding
still reaches the board within its poll. The filing cannot see half a poll: it decides what
is due, records a day closed, seals and opens its read snapshot while holding the watch's
`writing` lock, which every poll holds from its first statement to its last; then it renders
from that snapshot, which later polls do not change, and records the versions filed in the
same transaction. One connection writes (the watch's), through its cursors.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from auditor.audit.load import load_latest_ts
from auditor.config import PropertyConfig
from auditor.errors import WRITE_ERRNOS, UserError, private_files
from auditor.jobs import verify as verifying
from auditor.jobs.archive import (
    ShiftReport,
    archive_error,
    data_changed_at,
    report_shift,
    sweep_partials,
)
from auditor.jobs.watch import CLOSE_GRACE
from auditor.replay.log_ends import GamingDays
from auditor.report import signing
from auditor.store.closed_days import close, closed_days

# Past a shift's end (in the logs) before its report is filed: the grace `watch` gives a
# gaming day before closing it (auditor.jobs.watch.CLOSE_GRACE), so the last shift of a day
# is filed at the sweep that closes the day.
FILE_GRACE = dt.timedelta(minutes=30)
# The gaming days looked at besides the latest event's: the one before (a watch started the
# morning after files the night).
DAYS_BACK = 1

Say = Callable[[str], None]
ShiftKey = tuple[dt.date, str]


@dataclass(frozen=True)
class FilingOptions:
    """`watch --file-reports`: where to file, and the grace after a shift's end."""

    archive: Path
    grace: dt.timedelta = FILE_GRACE
    # The watch's: past a gaming day's end before it is closed (WatchOptions.close_grace).
    close_grace: dt.timedelta = CLOSE_GRACE


@dataclass
class Filed:
    """A shift this watch filed (or found without rounds), and the findings row it had
    seen then: a finding of the shift recorded after it files the shift again."""

    day: dt.date
    shift: str
    upto: int  # the last findings row id when it was filed
    report: ShiftReport | None  # None: filed before this watch


@dataclass
class ShiftFiler:
    """Files the shift reports that are due, after each sweep of a Watch (`after_sweep`)."""

    con: duckdb.DuckDBPyConnection
    config: PropertyConfig
    run_id: int
    options: FilingOptions
    seal: Callable[[], None]  # the watch's: what it wrote is sealed before a filing
    say: Say = field(default=lambda _line: None)
    filed: dict[ShiftKey, Filed] = field(default_factory=dict)
    reports: list[ShiftReport] = field(default_factory=list)  # every filing, in order
    problems: list[str] = field(default_factory=list)
    key: signing.SigningKey | None = None
    # The watch's (Watch.writing): held while deciding, sealing and opening the snapshot.
    writing: threading.RLock = field(default_factory=threading.RLock)
    _upto: int = 0  # the last findings row when the report being filed was read

    def __post_init__(self) -> None:
        """Open the signing key and make the archive now: a key that will not open or an
        archive this user cannot write stops the watch at its start (exit 2), not at the
        first shift's end."""
        self.key = signing.key_for(self.config)
        archive = self.options.archive
        try:
            private_files()
            archive.mkdir(parents=True, exist_ok=True)
            for p in sweep_partials(archive):  # the watch owns the database: no nightly runs
                self.say(f"removed {p}: left by a render that was interrupted")
        except OSError as e:
            if e.errno not in WRITE_ERRNOS:
                raise
            raise archive_error(archive, e) from None
        self._filed_before()

    def _filed_before(self) -> None:
        """The shifts this database filed into this archive before (an earlier watch, a
        nightly), as if this watch had filed them: filed again only when a finding of theirs
        is recorded or withdrawn after their last version, as during one watch. Not
        compared afresh at a restart, when a table's file read further than it was at the
        filing would make every recent shift a new version."""
        names = {s.name for s in self.config.shifts}
        under = f"{self.options.archive.resolve()}/%"
        rows = self.con.execute(
            "WITH last AS (SELECT slug, max(filed_at) AS at FROM report_versions "
            "WHERE path LIKE ? GROUP BY slug) "
            "SELECT slug, (SELECT coalesce(max(id), 0) FROM findings f "
            "WHERE f.recorded_at <= last.at) FROM last",
            [under],
        ).fetchall()
        for slug, upto in rows:
            day, _, name = slug.partition("_")
            try:
                when = dt.date.fromisoformat(day)
            except ValueError:
                continue
            if name in names:
                self.filed[(when, name)] = Filed(when, name, int(upto), None)

    def after_sweep(self) -> list[ShiftReport]:
        """File what is due now; returns the reports of this filing (none most times).

        What is due, the days closed for it, the seal and the check of the ledger are done
        between two polls (`writing` held), and so is what each report reads; its render
        is not, so the polls go on meanwhile when the filing has a thread of its own."""
        with self.writing:
            latest = load_latest_ts(self.con)
            if latest is None:
                return []
            zone = self.config.zone_for(self.con)
            due = self._due(latest, zone) + self._changed(zone)
            if not due:
                return []
            self.seal()
            checked = verifying.verify(self.con, fast=True)
            if checked.ok:
                verifying.record(self.con, checked, self.run_id)
            epoch = data_changed_at(self.con)
        return self._file(due, checked, epoch)

    @contextlib.contextmanager
    def _between_polls(self) -> Iterator[None]:
        """What a report reads, read between two polls (`writing` held), and the last
        findings row then: a finding recorded after it files the shift again."""
        with self.writing:
            self._upto = int(self.con.execute(
                "SELECT coalesce(max(id), 0) FROM findings").fetchall()[0][0])
            yield

    def _due(self, latest: dt.datetime, zone: dt.tzinfo) -> list[ShiftKey]:
        """The shifts over in the logs by the grace (a day's last shift: its day closed)
        that this watch has not filed yet. A day the logs show over by the watch's own
        grace is recorded closed first, as the sweep just before judged it (a sweep records
        a day closed only when a table's log stops in it) and as `nightly` records the day
        it files."""
        closed = closed_days(self.con)
        today = GamingDays(self.config.gaming_day_start, zone).of(latest)
        days = [today - dt.timedelta(days=n) for n in range(DAYS_BACK, -1, -1)]
        due = []
        for day in days:
            day_end = self.config.gaming_day_window(day, zone)[1]
            over = day in closed or latest >= day_end + self.options.close_grace
            names = [s.name for s in self.config.shifts if (day, s.name) not in self.filed
                     and (over or self._past_grace(day, s.name, day_end, latest, zone))]
            if not names:
                continue
            if not self._has_events(day, zone):  # nothing to file, no need to seal for it
                self.filed.update({(day, n): Filed(day, n, 0, None) for n in names})
                continue
            if over and day not in closed:
                close(self.con, [day], self.run_id, "watch")
            due += [(day, n) for n in names]
        return due

    def _past_grace(self, day: dt.date, name: str, day_end: dt.datetime, latest: dt.datetime,
                    zone: dt.tzinfo) -> bool:
        """Whether shift `name` of `day` ends before its day does and the logs are its grace
        past its end."""
        end = self.config.shift_window(day, name, zone)[1]
        return end < day_end and latest >= end + self.options.grace

    def _has_events(self, day: dt.date, zone: dt.tzinfo) -> bool:
        """Whether the logs hold an event of gaming day `day` (a day without one has nothing
        to file, and is left without a closing record: there is nothing in it to judge)."""
        return bool(self.con.execute(
            "SELECT count(*) FROM (SELECT 1 FROM events WHERE ts >= ? AND ts < ? LIMIT 1)",
            list(self.config.gaming_day_window(day, zone)),
        ).fetchall()[0][0])

    def _changed(self, zone: dt.tzinfo) -> list[ShiftKey]:
        """The shifts filed whose findings changed since (a row recorded in their window
        after the one they were filed at)."""
        if not self.filed:
            return []
        windows = [(k, *self.config.shift_window(k[0], k[1], zone), f.upto)
                   for k, f in self.filed.items()]
        values = ", ".join("(?, ?::TIMESTAMPTZ, ?::TIMESTAMPTZ, ?)" for _ in windows)
        rows = self.con.execute(
            f"SELECT DISTINCT w.i FROM findings f JOIN (VALUES {values}) AS w(i, lo, hi, upto) "
            "ON f.ts >= w.lo AND f.ts < w.hi AND f.id > w.upto",
            [x for i, w in enumerate(windows) for x in (i, w[1], w[2], w[3])],
        ).fetchall()
        return [windows[i][0] for (i,) in sorted(rows)]

    def _file(self, keys: list[ShiftKey], checked: verifying.Verification,
              epoch: dt.datetime) -> list[ShiftReport]:
        """File each shift, after the check of the ledger (`checked`, done as `nightly`
        does before filing; a failed one is said, and printed on the covers)."""
        if not checked.ok:
            self._problem(f"the audit database failed verification "
                          f"({checked.problems[0].sentence()}); the reports filed say so on "
                          "their cover; `bacc-audit verify` lists every record that differs")
        done = []
        for day, name in keys:
            try:
                r = report_shift(self.con, self.config, day, name, self.options.archive, epoch,
                                 self.say, self.run_id, self.key, checked.cover(),
                                 reading=self._between_polls)
            except UserError as e:  # an archive gone unwritable: said, tried again later
                self._problem(str(e))
                continue
            again = (day, name) in self.filed
            self.filed[(day, name)] = Filed(day, name, self._upto, r)
            if r.status != "skipped" and not (again and r.status == "unchanged"):
                self.reports.append(r)
            done.append(r)
        return done

    def _problem(self, sentence: str) -> None:
        if sentence not in self.problems:
            self.problems.append(sentence)
            self.say(sentence)

    def summary(self) -> dict[str, Any]:
        return {
            "archive": str(self.options.archive),
            "grace_minutes": self.options.grace.total_seconds() / 60,
            "reports": [r.as_dict() for r in self.reports],
            "problems": self.problems,
        }



class FilingThread:
    """A ShiftFiler's filings (its after_sweep) in a thread of their own, so that the polls
    go on while a report renders. `request` (the watch's after_sweep) asks for a filing and
    returns at once; asks that come while one runs make one more. `close` files once more
    (what the watch's last sweep decided), then ends the thread. A filing that fails ends
    the thread and is raised where the watch asks next, or at `close`: the watch then
    stops, as it did when it filed in its own thread."""

    def __init__(self, file: Callable[[], object]) -> None:
        self.file = file  # a ShiftFiler's after_sweep
        self.error: BaseException | None = None
        self._asks: queue.SimpleQueue[bool] = queue.SimpleQueue()  # True: file; False: end
        self._done = threading.Condition()
        self._asked = self._answered = 0  # filings asked for, and those a filing answered
        self._thread = threading.Thread(target=self._loop, name="bacc-audit-filing",
                                        daemon=True)

    def __enter__(self) -> FilingThread:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:  # the watch failed: no filing after it, and its own error goes up
            self._asks.put(False)
            self._thread.join()

    def request(self) -> None:
        self._raise()
        with self._done:
            self._asked += 1
        self._asks.put(True)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every filing asked for so far is done (or the thread ended); whether
        it is, within `timeout` seconds (tests, and a caller that must see the archive)."""
        with self._done:
            return self._done.wait_for(
                lambda: self._answered >= self._asked or not self._thread.is_alive(), timeout)

    def close(self) -> None:
        self._asks.put(True)
        self._asks.put(False)
        self._thread.join()
        self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def _loop(self) -> None:
        try:
            while True:
                asks = [self._asks.get()]
                while not self._asks.empty():  # asks made meanwhile: one filing answers them
                    asks.append(self._asks.get())
                if any(asks):
                    with self._done:
                        asked = self._asked
                    try:
                        self.file()
                    except BaseException as e:  # raised in the watch's thread
                        self.error = e
                        return
                    with self._done:
                        self._answered = asked
                        self._done.notify_all()
                if not all(asks):
                    return
        finally:
            with self._done:
                self._done.notify_all()
