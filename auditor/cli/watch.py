"""`bacc-audit watch`: follow the spool as the tables write it, audit as the rounds end, and
serve the board (auditor.jobs.watch, auditor.board)."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Annotated

import duckdb
import typer
from rich.console import Console

from auditor.cli.options import ConfigOption, DbOption
from auditor.errors import DatabaseBusy, UserError
from auditor.store import db, runs

# A service starting while a command reads the database waits for it this long.
BUSY_WAIT_SECONDS = 60.0


def _connect(path: Path, err: Console) -> duckdb.DuckDBPyConnection:
    """The database, for writing. A reader that opened it while no writer had it (a report,
    a findings export) holds it for a while; watch, a service, waits for it rather than
    fail, and says so once. Another writer still holding it after BUSY_WAIT_SECONDS is
    refused (exit 4)."""
    deadline = time.monotonic() + BUSY_WAIT_SECONDS
    said = False
    while True:
        try:
            return db.connect(path)
        except DatabaseBusy as e:
            if time.monotonic() >= deadline:
                raise
            if not said:
                err.print(f"watch: waiting for the database: {e}")
                said = True
            time.sleep(0.5)


def watch_cmd(
    spool: Annotated[
        Path,
        typer.Option(
            envvar="BACC_AUDIT_SPOOL",
            help="The folder the table systems write their logs to; every log in it (and in "
            "its subfolders) is followed as it grows.",
        ),
    ],
    web: Annotated[
        str | None,
        typer.Option(
            help="Serve the board on HOST:PORT (127.0.0.1:8080 for this machine only; any "
            "other address asks for a login: [board] users or tokens in the config).",
            show_default=False,
        ),
    ] = None,
    poll: Annotated[
        float, typer.Option(help="Seconds from one look at the files to the next.")
    ] = 0.2,
    as_json: Annotated[
        bool, typer.Option("--json", help="On stopping, print a JSON summary.")
    ] = False,
    db_path: DbOption = None,
    config_path: ConfigOption = None,
) -> None:
    """Audit as the night goes: follow every log in the spool as it is written, audit each
    round as its round_end comes in, decide the table, pit and shoe checks as soon as they
    can be, and (with --web) serve the live board.

    Runs until stopped (SIGTERM or Ctrl-C), then loads what is left, decides it and ends its
    run. Killed outright (SIGKILL), it loses and repeats nothing: started again, it goes on
    where the database says. Started while another command has the database open, it waits
    for it up to a minute. While it runs, findings, report, runs, ack and doctor still
    answer through it (docs/database.md).

    Exit codes: 0 stopped cleanly; 2 input or configuration error (no spool folder, a bad
    --web address or [board] section); 3 internal failure; 4 database busy (another process
    still had it open after a minute).
    """
    from auditor import config as cfg
    from auditor.cli.app import err, out

    conf = cfg.load(config_path)
    if not spool.is_dir():
        raise UserError(f"--spool {spool}: no such folder (the folder the table systems "
                        "write their logs to)")
    host: str | None = None
    port: int | None = None
    settings = None
    if web is not None:
        from auditor.board.settings import load_settings, parse_listen

        host, port = parse_listen(web, "--web")
        settings = load_settings(conf)
    path = db_path or db.default_db_path()
    con = _connect(path, err)
    stop = threading.Event()
    server = None
    run_id = runs.start(con, "watch", {"spool": str(spool), "web": web, "poll": poll})
    status, code = "failed", 3
    stats = None
    try:
        from auditor.jobs.watch import Watch, WatchOptions

        if web is not None and settings is not None:
            from auditor.board.app import create_app, serve
            from auditor.board.auth import Auth

            # The board looks for new findings every 50 ms: a cheap query, and a finding
            # should reach the page within a poll of the audit that stored it.
            app = create_app(con, property_config=conf, auth=Auth.for_host(settings, host),
                             settings=settings, poll_interval=0.05)
            server = serve(app, host, port)
            err.print(f"watch: the board is at {server.url}")
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        err.print(f"watch: following {spool} into {path} (stop with Ctrl-C or SIGTERM)")
        w = Watch(con, spool, conf, run_id, WatchOptions(poll=poll),
                  say=lambda line: err.print(f"watch: {line}"))
        stats = w.run(stop)
        status, code = "done", 0
    except UserError as e:  # e.g. the board refused to listen where no login is set
        code = e.exit_code
        raise
    finally:
        if server is not None:
            server.stop()
        runs.finish(con, run_id, status, code, stats.summary() if stats else {})
        con.close()
    assert stats is not None
    if as_json:
        out.print_json(json.dumps({"run_id": run_id, **stats.summary()}))
    else:
        s = stats.summary()
        out.print(
            f"watch: {s['events']} events from {s['files_followed']} files, "
            f"{s['rounds_audited']} rounds audited ({s['rounds_audited_live']} as they "
            f"ended), {s['findings_new']} new findings, {s['findings_withdrawn']} withdrawn"
        )
