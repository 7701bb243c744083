"""`bacc-audit runs`: the recorded runs, with the status a reader should see
(auditor.store.runs)."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated

import typer
from rich.table import Table as RichTable

from auditor.cli import console
from auditor.cli.options import DbOption, JsonOption
from auditor.errors import DatabaseBusy, UserError
from auditor.store import db, filters, runs
from auditor.store.stamps import refuse_impossible_stamps
from auditor.words import count


class RunStatus(StrEnum):
    running = "running"
    done = "done"
    failed = "failed"
    interrupted = "interrupted"


# The commands that record a run (what `runs --command` can name).
RUN_COMMANDS = ("ingest", "audit", "nightly", "watch", "ack", "notice add", "backfill",
                "verify")
RUNS_LIMIT = 50


def runs_cmd(
    db_path: DbOption = None,
    limit: Annotated[
        int,
        typer.Option(
            min=0,
            help=f"Only the latest N runs (default {RUNS_LIMIT}: a year of nightly runs is "
            "hundreds); 0 for all.",
            show_default=False,
        ),
    ] = RUNS_LIMIT,
    command: Annotated[
        str | None,
        typer.Option(help=f"Only this command's runs: {', '.join(RUN_COMMANDS)}."),
    ] = None,
    status: Annotated[
        RunStatus | None,
        typer.Option(help="Only runs with this status (as shown: a dead run is interrupted)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List the recorded runs, oldest first: command, times, status, exit code and counts.

    The latest 50 by default (--limit 0 for all), after --command and --status filter them;
    the text listing says how many it left out. A --command that no command records is
    refused (exit 2) with the near one named: "0 runs" for a typo would read as none ran.

    A run stopped with Ctrl-C is recorded as 'interrupted' (exit 130). A run whose process
    died before it finished (killed, power loss) still reads 'running' in its row; it is
    shown as 'interrupted' too (the row itself is never edited).
    """
    from auditor.jobs.lock import lock_holder

    path = db_path or db.default_db_path()
    holder = lock_holder(path)
    try:
        con = db.connect(path, read_only=True)
    except DatabaseBusy:
        if holder is None:
            raise
        raise DatabaseBusy(
            f"{path}: database busy: {holder.describe()} is writing to it; "
            "try again when it has finished"
        ) from None
    try:
        if command is not None:
            recorded = [r[0] for r in con.execute("SELECT DISTINCT command FROM runs").fetchall()]
            known = sorted(set(RUN_COMMANDS) | set(recorded))
            if command not in known:
                raise UserError(
                    f"--command {command}: no such command records runs"
                    f"{filters.near(command, known)} (they are {', '.join(known)})"
                )
        live = {holder.run_id} if holder and holder.run_id else set()
        live |= db.served_runs(con)  # the owner serving this reader, and commands it serves
        refuse_impossible_stamps(con, tables={"runs"})
        every = runs.listing(con, live, command=command, status=status and status.value)
    finally:
        con.close()
    rows = every[-limit:] if limit else every
    if as_json:
        console.out.print_json(json.dumps(rows, default=str))
        return
    t = RichTable(show_lines=False)
    for col in ("id", "command", "started (UTC)", "finished (UTC)", "status", "exit", "counts"):
        t.add_column(col)
    for r in rows:
        t.add_row(
            str(r["id"]),
            r["command"],
            r["started_at"][:19].replace("T", " "),
            (r["finished_at"] or "")[:19].replace("T", " "),
            r["status"],
            "" if r["exit_code"] is None else str(r["exit_code"]),
            ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in r["counts"].items()),
        )
    console.wide(140).print(t)
    left_out = len(every) - len(rows)
    more = f" ({left_out:,} earlier left out: --limit 0 for all)" if left_out else ""
    console.out.print(f"{count(len(rows), 'run')}{more}")
