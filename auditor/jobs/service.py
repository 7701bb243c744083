"""`watch` as a service (auditor.jobs.watch does the watching): the database waited for, the
run recorded, the board served beside it, and SIGTERM or Ctrl-C turned into a clean stop."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from auditor.board.settings import BoardSettings
from auditor.config import PropertyConfig
from auditor.errors import DatabaseBusy
from auditor.jobs.filing import FilingOptions, FilingThread, ShiftFiler
from auditor.jobs.watch import Say, Watch, WatchOptions, WatchStats
from auditor.store import config_record, db, outcome, runs

if TYPE_CHECKING:  # the board is imported only when it is served
    from auditor.board.app import BoardServer

# A service starting while a command reads the database waits for it this long.
BUSY_WAIT_SECONDS = 60.0
# The board reads the new findings as soon as the watch has committed some (it nudges the
# board: Watch.on_commit), and besides every second (rows stored by anything else; the
# health check). Polling every 50 ms instead cost a tenth of a core with nothing to read.
BOARD_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class BoardAt:
    """Where to serve the board (--web HOST:PORT) and its [board] settings."""

    host: str
    port: int
    settings: BoardSettings
    archive: Path | None = None  # the shift reports' archive, listed on the reports page


def connect_waiting(
    path: Path, say: Say, wait: float = BUSY_WAIT_SECONDS
) -> duckdb.DuckDBPyConnection:
    """The database, for writing. A reader that opened it while no writer had it (a report,
    a findings export) holds it for a while; a service waits for it rather than fail, and
    says so once. Another writer still holding it after `wait` seconds is refused (exit 4)."""
    deadline = time.monotonic() + wait
    said = False
    while True:
        try:
            return db.connect(path)
        except DatabaseBusy as e:
            if time.monotonic() >= deadline:
                raise
            if not said:
                say(f"waiting for the database: {e}")
                said = True
            time.sleep(0.5)


@contextlib.contextmanager
def board_served(
    con: duckdb.DuckDBPyConnection, conf: PropertyConfig, at: BoardAt | None, say: Say
) -> Iterator[BoardServer | None]:
    """The live board on `at` for the block (None when `at` is), stopped when it ends."""
    if at is None:
        yield None
        return
    from auditor.board.app import create_app, serve
    from auditor.board.auth import Auth
    from auditor.jobs.verify import report_check

    app = create_app(con, property_config=conf, auth=Auth.for_host(at.settings, at.host),
                     settings=at.settings, poll_interval=BOARD_POLL_SECONDS,
                     report_check=lambda cur: report_check(cur)[0], archive=at.archive)
    server = serve(app, at.host, at.port)
    say(f"the board is at {server.url}")
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def stopped_by_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set `stop` during the block instead of killing the process, so the
    service ends its work cleanly; the handlers before are put back after."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in before:
        signal.signal(sig, lambda *_: stop.set())
    try:
        yield
    finally:
        for sig, handler in before.items():
            if handler is not None:  # None: a handler not set from Python, left as it is
                signal.signal(sig, handler)


def run_watch(
    path: Path,
    spool: Path,
    conf: PropertyConfig,
    args: dict[str, Any],
    *,
    board: BoardAt | None = None,
    poll: float = WatchOptions.poll,
    filing: FilingOptions | None = None,
    say: Say,
) -> tuple[int, WatchStats, ShiftFiler | None]:
    """Follow `spool` into the database at `path` until SIGTERM or Ctrl-C, in a run recorded
    with `args`, serving the board on `board`, filing the shift reports with `filing`.
    Returns the run's id, what it did and what it filed."""
    con = connect_waiting(path, say)
    stop = threading.Event()
    filer = None
    try:
        args = {**args, **config_record.run_args(conf)}
        with runs.recorded(con, "watch", args) as run, contextlib.ExitStack() as stack:
            config_record.check_unchanged(con, conf, "watch")  # as `audit` and `nightly` do
            watch = Watch(con, spool, conf, run.id, WatchOptions(poll=poll), say=say)
            filing_thread: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
            if filing is not None:
                # Its own cursor and thread: the polls go on while a report renders.
                cursor = stack.enter_context(contextlib.closing(con.cursor()))
                cursor.execute("SET TimeZone = 'UTC'")  # a cursor's own setting (db.connect)
                filer = ShiftFiler(cursor, conf, run.id, filing, watch.seal, say,
                                   writing=watch.writing)
                filing_thread = thread = FilingThread(filer.after_sweep)
                watch.after_sweep = thread.request
                say(f"filing each shift's report into {filing.archive} once the logs are "
                    f"{filing.grace.total_seconds() / 60:g} minutes past its end")
            with board_served(con, conf, board, say) as server, stopped_by_signals(stop):
                if server is not None:
                    watch.on_commit = server.nudge
                say(f"following {spool} into {path} (stop with Ctrl-C or SIGTERM)")
                with filing_thread:  # its last filing done before the run ends
                    stats = watch.run(stop)
            summary = stats.summary() | ({"filing": filer.summary()} if filer else {})
            run.done(outcome.exit_code(), summary)  # a clean stop: findings or none
    finally:
        con.close()
    return run.id, stats, filer
