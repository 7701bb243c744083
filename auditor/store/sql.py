"""SQL text spelled once: string literals, and the stream key every module groups events by.

A stream is one table's or one pit's run of `seq` numbers, keyed `table:<id>` or `pit:<id>`.
The key is written by ingest, grouped on by the seq-gap check, and read back into a table or
pit by the audit, the backfill and the CLI; spelling it here keeps those places in agreement.
"""

from __future__ import annotations

from typing import Literal

StreamKind = Literal["table", "pit"]


def quote(text: str) -> str:
    """`text` as a SQL string literal, for the few statements whose text must carry a value
    (DuckDB's relational API and some DDL take no parameters)."""
    return "'" + text.replace("'", "''") + "'"


def stream_key(kind: StreamKind, name: str) -> str:
    """The stream key of table or pit `name`, in Python."""
    return f"{kind}:{name}"


def stream_name(kind: StreamKind, key: str) -> str | None:
    """The table or pit a stream key names, or None when the key is of the other kind."""
    prefix = f"{kind}:"
    return key[len(prefix):] if key.startswith(prefix) else None


def stream_key_sql(kind: StreamKind, name_expr: str) -> str:
    """SQL for the stream key of the table or pit that `name_expr` holds."""
    return f"{quote(kind + ':')} || {name_expr}"


def is_stream_sql(kind: StreamKind, key_expr: str) -> str:
    """SQL that is true when the stream key `key_expr` is of `kind`."""
    return f"starts_with({key_expr}, {quote(kind + ':')})"


def stream_name_sql(kind: StreamKind, key_expr: str) -> str:
    """SQL for the table or pit the stream key `key_expr` names, NULL for the other kind."""
    return (
        f"CASE WHEN {is_stream_sql(kind, key_expr)} "
        f"THEN substr({key_expr}, {len(kind) + 2}) END"
    )
