"""The options several commands share, defined once so that they read the same everywhere:
`--db` and `--config` (and their environment variables), `--json`, `--fail-on`, and the
formats of the listings (`findings`, `dealers`)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from auditor.errors import UserError


def _database_file(value: Path | None) -> Path | None:
    """--db checked once, for every command, before any use of it: a path that names no
    file at all (`/`, `.`, ``) is one sentence, not an error deep in a command that puts a
    lock or an owner file beside it. What the file is, is each command's to judge (doctor
    lists it among its checks)."""
    if value is not None and value.name in ("", ".", ".."):
        raise UserError(f"--db {value}: names a folder, not the audit database file")
    return value


DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        envvar="BACC_AUDIT_DB",
        help="Audit database file (default: ./bacc-audit.duckdb).",
        show_default=False,
        callback=_database_file,
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

# --json of the commands that load or judge logs, and of those that list.
JsonSummaryOption = Annotated[bool, typer.Option("--json", help="Print a JSON summary.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]

# --fail-on of `audit` and `backfill` (nightly's says "of the night"); rules.codes.at_least
# checks the value.
FailOnOption = Annotated[
    str, typer.Option(help="Exit 1 when a new finding is at least this severe.")
]


class Format(StrEnum):
    jsonl = "jsonl"
    csv = "csv"
    table = "table"


FormatOption = Annotated[Format, typer.Option("--format", help="Output format.")]
