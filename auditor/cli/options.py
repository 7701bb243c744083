"""The options every command that opens the database or the property config shares, defined
once so that `--db` and `--config` read the same everywhere (and their environment
variables)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from auditor.words import count

DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        envvar="BACC_AUDIT_DB",
        help="Audit database file (default: ./bacc-audit.duckdb).",
        show_default=False,
    ),
]

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        envvar="BACC_AUDIT_CONFIG",
        help="Property config (default: ./bacc-audit.toml if present, else built-in defaults).",
        show_default=False,
    ),
]


def files_sentence(statuses: Counter[str], events: int, quarantined: int) -> str:
    """The last line of `ingest` (and `backfill`): the files by what became of them (by
    status), the events loaded and the lines quarantined."""
    empty = f", {statuses['empty']} empty" if statuses["empty"] else ""
    return (
        f"{count(sum(statuses.values()), 'file')}: {statuses['ingested']} ingested, "
        f"{statuses['already_ingested']} already ingested, "
        f"{statuses['refused_altered']} refused, {statuses['unreadable']} unreadable{empty}; "
        f"{count(events, 'event')} loaded, {count(quarantined, 'line')} quarantined"
    )
