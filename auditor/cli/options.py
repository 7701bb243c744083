"""The options every command that opens the database or the property config shares, defined
once so that `--db` and `--config` read the same everywhere (and their environment
variables)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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
