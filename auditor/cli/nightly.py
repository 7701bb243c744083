"""`bacc-audit nightly`: the unattended job, ingest, audit and a PDF per shift
(auditor.jobs.nightly)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from auditor import config as cfg
from auditor.cli import console
from auditor.cli.options import ConfigOption, DbOption, JsonSummaryOption
from auditor.errors import UserError
from auditor.store import db


def nightly_cmd(
    spool: Annotated[
        Path,
        typer.Option(
            envvar="BACC_AUDIT_SPOOL",
            help="The folder the table systems deliver logs to; new files are ingested, "
            "files already ingested are skipped.",
        ),
    ],
    date: Annotated[
        str | None,
        typer.Option(
            help="The gaming day to report (default: the latest one that has ended, in the "
            "property's time zone; or, when the files this run ingests hold other ended "
            "gaming days, each of those days)."
        ),
    ] = None,
    archive: Annotated[
        Path | None,
        typer.Option(
            envvar="BACC_AUDIT_ARCHIVE",
            help="Where the PDFs are filed as DAY/DAY_SHIFT.pdf (default: [property] archive "
            "in the config, else reports/archive).",
            show_default=False,
        ),
    ] = None,
    fail_on: Annotated[
        str,
        typer.Option(
            help="Exit 1 when a finding of the night is at least this severe; acknowledged "
            "findings count too, unless the value ends in :unacknowledged (major:unacknowledged).",
        ),
    ] = "major",
    file_ingested: Annotated[
        str,
        typer.Option(
            "--file-ingested",
            help="What becomes of a spool file once its ingest committed: keep (leave it in "
            "the spool), move or link (hard-link, never copy) it into "
            "ARCHIVE/evidence/DAY/, so the spool holds only what is new. Only ingested and "
            "already ingested files leave; refused, unreadable and empty ones stay.",
        ),
    ] = "keep",
    as_json: JsonSummaryOption = False,
    db_path: DbOption = None,
    config_path: ConfigOption = None,
) -> None:
    """The unattended nightly job: ingest the spool, audit, file a PDF per shift.

    Without --date, the files this run ingests may hold other ended gaming days than the
    latest (an older night delivered late): the run names them and reports each of them.
    Every shift of the gaming day with rounds gets its PDF under ARCHIVE/DAY/DAY_SHIFT.pdf;
    shifts without rounds are skipped and said so. The gaming day is recorded closed before
    the audit (unless it has not ended yet), so a table whose log stops without its close is
    in that day's PDF. A report once filed is never rewritten:
    when what it shows changed, the next version is filed beside it (DAY_SHIFT.v2.pdf,
    numbered after the files in the archive). An earlier gaming day with reports in the
    archive whose findings changed since (a log of that day delivered late) is filed again
    too, and the summary names the day and why. With a [signing] key in the property
    config every PDF is signed; the summary lists the filed versions no sign-off names
    (`bacc-audit signoff`). One run at a time (a lock file beside the database, `DB.lock`);
    a run killed anywhere leaves a consistent database and the next run completes its work.

    Exit codes: 0 clean; 1 findings at or above --fail-on in the night's data (standing in
    the gaming day, or new in this run; acknowledged or not, unless --fail-on ends in
    :unacknowledged); 2 input or configuration error (missing spool, unreadable or empty
    file, an archive it cannot write to, no rounds in the whole gaming day, a signing key
    that will not open, a property config changed since the standing findings were made:
    run `audit --rerun all --reason TEXT` first); 3 internal failure; 4 database busy
    (another command has the database open); 5 another nightly run holds the lock; 130
    interrupted (Ctrl-C).
    """
    from auditor.jobs import nightly

    try:
        conf = cfg.load(config_path)
        day = cfg.parse_date(date) if date else None
        result = nightly.run_nightly(
            db_path or db.default_db_path(),
            spool,
            conf,
            day=day,
            archive=archive,
            fail_on=fail_on,
            file_ingested=file_ingested,
            say=lambda line: console.err.print(f"nightly: {line}"),
        )
    except UserError as e:
        if as_json:  # monitoring reads stdout: give it JSON even for a refusal
            console.out.print_json(json.dumps({"error": str(e), "exit_code": e.exit_code}))
        raise
    if as_json:
        console.out.print_json(json.dumps(result.summary()))
    else:
        for line in nightly.summary_lines(result):
            console.out.print(line)
    raise typer.Exit(result.exit_code)
