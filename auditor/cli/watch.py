"""`bacc-audit watch`: follow the spool as the tables write it, audit as the rounds end, and
serve the board (auditor.jobs.service, auditor.jobs.watch, auditor.board)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Annotated

import typer

from auditor import config as cfg
from auditor.cli import console
from auditor.cli.options import ConfigOption, DbOption
from auditor.errors import UserError
from auditor.store import db
from auditor.words import count

MIN_POLL, MAX_POLL = 0.01, 60.0
MIN_GRACE, MAX_GRACE = 0.0, 24 * 60.0  # --file-grace, minutes
# auditor.jobs.filing.FILE_GRACE in minutes (a test holds them equal): that module is not
# imported before the command runs, as it brings the PDF renderer.
FILE_GRACE_MINUTES = 30.0


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
        float,
        typer.Option(help="The longest wait, in seconds, from one look at the files to the "
                     "next; sooner while lines arrive (docs/live.md)."),
    ] = 0.2,
    file_reports: Annotated[
        bool,
        typer.Option(
            "--file-reports",
            help="File each shift's report into the archive as nightly does (signed, "
            "versioned, never rewritten) once the logs are --file-grace past the shift's end "
            "(a gaming day's last shift: once the day is closed); docs/live.md.",
        ),
    ] = False,
    archive: Annotated[
        Path | None,
        typer.Option(
            envvar="BACC_AUDIT_ARCHIVE",
            help="With --file-reports: where the PDFs are filed as DAY/DAY_SHIFT.pdf; with "
            "--web, the archive whose versions the board's reports page lists (default: "
            "[property] archive in the config, else reports/archive).",
            show_default=False,
        ),
    ] = None,
    file_grace: Annotated[
        float,
        typer.Option(
            "--file-grace",
            help="With --file-reports: minutes past a shift's end, in the logs, before its "
            "report is filed.",
        ),
    ] = FILE_GRACE_MINUTES,
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

    With --file-reports it files the shift PDFs itself, as nightly would (which cannot run
    beside it): each shift once the logs are --file-grace minutes past its end, a gaming
    day's last shift once the day is closed, the next version when a filed shift's findings
    change later.

    Exit codes: 0 stopped cleanly; 2 input or configuration error (no spool folder, a bad
    --web address or [board] section, with --file-reports an archive it cannot write or a
    signing key that will not open); 3 internal failure; 4 database busy (another process
    still had it open after a minute).
    """
    from auditor.jobs.archive import archive_dir
    from auditor.jobs.filing import FilingOptions
    from auditor.jobs.service import BoardAt, run_watch

    if not MIN_POLL <= poll <= MAX_POLL:  # nan, 0 or less: a loop that never rests
        raise UserError(f"--poll {poll}: seconds from {MIN_POLL} to {MAX_POLL:g}")
    conf = cfg.load(config_path)
    if not spool.is_dir():
        raise UserError(f"--spool {spool}: no such folder (the folder the table systems "
                        "write their logs to)")
    if not MIN_GRACE <= file_grace <= MAX_GRACE:  # nan, negative, or past the next day
        raise UserError(f"--file-grace {file_grace:g}: minutes from {MIN_GRACE:g} to "
                        f"{MAX_GRACE:g} past a shift's end")
    filing = None
    if file_reports:
        filing = FilingOptions(archive_dir(conf, archive), dt.timedelta(minutes=file_grace))
    board = None
    if web is not None:
        from auditor.board.settings import load_settings, parse_listen

        host, port = parse_listen(web, "--web")
        board = BoardAt(host, port, load_settings(conf), archive_dir(conf, archive))
    run_id, stats, filer = run_watch(
        db_path or db.default_db_path(), spool, conf,
        {"spool": str(spool), "web": web, "poll": poll,
         "file_reports": str(filing.archive) if filing else None,
         "file_grace": file_grace if filing else None},
        board=board, poll=poll, filing=filing,
        say=lambda line: console.err.print(f"watch: {line}"),
    )
    s = stats.summary() | ({"filing": filer.summary()} if filer else {})
    if as_json:
        console.out.print_json(json.dumps({"run_id": run_id, **s}))
    else:
        console.out.print(
            f"watch: {s['events']} events from {s['files_followed']} files, "
            f"{s['rounds_audited']} rounds audited ({s['rounds_audited_live']} as they "
            f"ended), {s['findings_new']} new findings, {s['findings_withdrawn']} withdrawn"
        )
        if filer is not None:
            console.out.print(f"watch: {count(len(filer.reports), 'report')} filed into "
                              f"{filer.options.archive}")
            for r in filer.reports:
                console.out.print(f"  {r.shift:<8} {r.status:<11} v{r.version}  {r.path}")
