"""`bacc-audit ingest`: event logs into the audit database (auditor.ingest.run)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from auditor.cli import console
from auditor.cli.options import DbOption, JsonSummaryOption
from auditor.cli.progress import bytes_read
from auditor.ingest.paths import discover, escape_path
from auditor.ingest.result import IngestResult
from auditor.ingest.run import ingest
from auditor.store import db, outcome, runs


def ingest_cmd(
    paths: Annotated[
        list[Path], typer.Argument(help="Log files (.jsonl, .jsonl.gz) or directories.")
    ],
    db_path: DbOption = None,
    as_json: JsonSummaryOption = False,
) -> None:
    """Load event logs into the audit database.

    Each file loads in one transaction. Bad lines are kept in quarantine with their file,
    line and reason, and the rest of the file still loads. A file already ingested adds
    nothing; a file whose content changed since it was ingested is refused and recorded as
    a log.altered finding. An empty file is recorded as empty in the manifest and said on
    stderr (exit 2): its table system delivered nothing.
    """
    con = db.connect(db_path or db.default_db_path())
    try:
        with runs.recorded(con, "ingest", {"paths": [escape_path(p) for p in paths]}) as run:
            files, _ = discover(paths)
            total = sum(f.stat().st_size for f in files if f.is_file())
            bar = console.err.is_terminal and not as_json
            with bytes_read(console.err, total, bar) as progress:
                result = ingest(con, paths, run.id, progress)
            summary = result.summary()
            run.done(summary["exit_code"], summary)
    finally:
        con.close()
    if as_json:
        console.out.print_json(json.dumps(summary))
    else:
        _print(result, summary["streams"])
    raise typer.Exit(summary["exit_code"])


def _print(result: IngestResult, per_stream: dict[str, int]) -> None:
    for e in result.errors:
        console.error(e)
    for f in result.files:
        for line in f.problems:
            console.err.print(f"quarantined: {line}")
        for line in f.ahead:
            console.err.print(f"stamped ahead: {line}")
        if f.status in outcome.ERROR_STATUSES:
            console.error(f.message)
        else:
            console.out.print(f.message)
    if per_stream:
        console.out.print("events per stream:")
        for stream, n in sorted(per_stream.items()):
            console.out.print(f"  {stream.replace(':', ' '):<24} {n:>10,}")
    statuses = Counter(f.status for f in result.files)
    console.out.print(outcome.files_sentence(statuses, result.events, result.quarantined))
