"""`bacc-audit backfill`: ingest and audit many logs on a Dask cluster, into one database
(auditor.jobs.backfill, docs/scale-out.md)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from auditor.cli import console
from auditor.cli.options import ConfigOption, DbOption, FailOnOption, JsonSummaryOption
from auditor.errors import UserError
from auditor.store import db, outcome
from auditor.words import count

if TYPE_CHECKING:  # Dask and the backfill load when the command runs, not at startup
    from auditor.jobs.backfill import BackfillResult


WORKERS_A_CORE = 4  # a local cluster's processes; each starts a Python of its own


def backfill_cmd(
    paths: Annotated[
        list[Path], typer.Argument(help="Log files (.jsonl, .jsonl.gz) or directories.")
    ],
    engine: Annotated[
        str,
        typer.Option(
            help="The engine that runs the partitions: dask. (ray is refused, exit 2: "
            "docs/scale-out.md says why.)"
        ),
    ] = "dask",
    address: Annotated[
        str | None,
        typer.Option(
            help="A running Dask scheduler (tcp://HOST:8786); without it, a local cluster on "
            "this machine's cores.",
            show_default=False,
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            help="Worker processes of the local cluster (default: one a core); with "
            "--address, the cluster's own workers are used.",
            show_default=False,
        ),
    ] = None,
    work_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where workers write their partitions' databases until the merge; on a "
            "cluster, a shared folder the driver can read (default: beside the database).",
            show_default=False,
        ),
    ] = None,
    partition_mb: Annotated[
        int, typer.Option(help="Group small streams into partitions of about this many MB.")
    ] = 256,
    fail_on: FailOnOption = "major",
    as_json: JsonSummaryOption = False,
    db_path: DbOption = None,
    config_path: ConfigOption = None,
) -> None:
    """Ingest and audit many logs on a cluster, into the database, as `ingest` then `audit`
    would on one machine.

    The logs are split by table (or pit) stream, small streams grouped into partitions;
    each partition is ingested and its rounds replayed on a worker, in a DuckDB of its own;
    the driver merges them and then judges what crosses partitions (sequence gaps,
    duplicates and altered files, the table, pit, shoe and dealer passes) on the merged
    database. `findings`, `report` and `nightly` work on the result unchanged. A worker
    killed midway has its partition redone elsewhere; nothing is lost or counted twice.

    The paths must be readable at the same names on every worker (a shared file system).
    Dask is an optional dependency: pip install 'bacc-audit[backfill]'.

    Exit codes: 0 clean; 1 findings (quarantined lines, refused files, findings at or above
    --fail-on); 2 usage or input error (a path that does not exist, an empty or unreadable
    file, an unknown engine, a scheduler that cannot be reached); 3 internal failure; 4
    database busy; 130 interrupted.
    """
    from auditor import config as cfg
    from auditor.jobs.backfill import run_backfill

    if partition_mb < 1:
        raise UserError(f"--partition-mb {partition_mb}: give at least 1")
    if workers is not None and workers < 1:
        raise UserError(f"--workers {workers}: give at least 1")
    cores = os.cpu_count() or 1
    if workers is not None and address is None and workers > WORKERS_A_CORE * cores:
        raise UserError(
            f"--workers {workers:,}: a local cluster of more than {WORKERS_A_CORE} worker "
            f"processes a core only slows it (this machine has {count(cores, 'core')}); give "
            f"at most {WORKERS_A_CORE * cores}, or run workers on other machines (--address)"
        )
    conf = cfg.load(config_path)
    result, code = run_backfill(
        db_path or db.default_db_path(),
        paths,
        conf,
        engine=engine,
        address=address,
        workers=workers,
        work_dir=work_dir,
        partition_bytes=partition_mb << 20,
        fail_on=fail_on,
        say=None if as_json else console.err.print,
    )
    if as_json:
        console.out.print_json(json.dumps(result.summary() | {"exit_code": code}, default=str))
        raise typer.Exit(code)
    _print(result)
    raise typer.Exit(code)


def _print(result: BackfillResult) -> None:
    out, err = console.out, console.err
    for f in result.files:
        for line in f["problems"]:
            err.print(f"quarantined: {line}")
        if f["status"] in outcome.ERROR_STATUSES:
            console.error(f["message"])
    statuses = Counter(f["status"] for f in result.files)
    out.print(outcome.files_sentence(statuses, result.events, result.quarantined))
    out.print(
        f"{count(len(result.partitions), 'partition')} on {count(result.workers, 'worker')}: "
        f"{result.merged} merged, {len(result.redone_locally)} ingested by the driver"
    )
    a = result.audit
    if a is not None:
        out.print(
            f"audit on the merged database: {count(a.rounds, 'more round')} replayed; the "
            f"passes over tables, pits, shoes, dealers and seats: "
            f"{count(a.passes_new, 'new finding')}, {a.passes_withdrawn} withdrawn"
        )
        console.not_audited(a.skipped)
    s = result.seconds
    out.print(
        f"{s.get('total', 0):.1f} s: partitions {s.get('partitions', 0):.1f} s (merge "
        f"{s.get('merge', 0):.1f} s), across partitions {s.get('across', 0):.1f} s, audit "
        f"{s.get('audit', 0):.1f} s"
    )
