"""Stamps no clock can show: a time outside the years 1 to 9999 in UTC, which DuckDB stores
and no Python datetime holds.

Ingest quarantines such a line, and nothing the product writes carries one; a database
written by an earlier bacc-audit, or edited since, may still hold one anywhere. A command
that would read it says so in a sentence naming where, before any work, instead of failing
with an internal error halfway through (a report half rendered, a listing cut short). The
ledger's check (`bacc-audit verify`) then says whether the row was changed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import duckdb

from auditor.errors import UserError
from auditor.store.sql import quote

# The instants a Python datetime holds: years 1 to 9999 in UTC.
FIRST_INSTANT = "'0001-01-01 00:00:00+00'::TIMESTAMPTZ"
LAST_INSTANT = "'9999-12-31 23:59:59.999999+00'::TIMESTAMPTZ"


class UnreadableStamp(UserError):
    """A stored time no clock can show. The board answers it with 409: the database's
    state, not the request, is at fault."""

    status = 409


def _time_columns(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """(table, column) of every time column of the database's own tables (not its views)."""
    return [
        (str(t), str(c)) for t, c in con.execute(
            "SELECT c.table_name, c.column_name FROM duckdb_columns() c "
            "JOIN duckdb_tables() t ON t.database_name = c.database_name "
            "AND t.schema_name = c.schema_name AND t.table_name = c.table_name "
            "WHERE c.database_name = current_database() AND c.schema_name = 'main' "
            "AND c.data_type LIKE 'TIMESTAMP%' ORDER BY ALL"
        ).fetchall()
    ]


def refuse_impossible_stamps(
    con: duckdb.DuckDBPyConnection,
    tables: Collection[str] | None = None,
    rows: Mapping[str, str] | None = None,
) -> None:
    """UnreadableStamp naming the first table, column and row that holds a stamp no clock
    can show; nothing when there is none. Every table, or those of `tables`, and of a table
    in `rows` only the rows its SQL condition takes (what a page reads: the notices page
    need not refuse over a round's changed event). One statement over the time columns: the
    row groups' statistics answer it for nearly every group without reading it (~8 ms for
    the whole of the sample night's database)."""
    columns = [(t, c) for t, c in _time_columns(con) if tables is None or t in tables]
    if not columns:
        return
    taken = rows or {}
    probes = " UNION ALL ".join(
        f"(SELECT {quote(t)}, {quote(c)}, rowid, CAST({_ident(c)} AS VARCHAR) FROM {_ident(t)} "
        f"WHERE ({_ident(c)} > {LAST_INSTANT} OR {_ident(c)} < {FIRST_INSTANT}) "
        f"AND ({taken.get(t, 'true')}) LIMIT 1)"
        for t, c in columns
    )
    found = con.execute(f"SELECT * FROM ({probes}) LIMIT 1").fetchall()
    if found:
        table, column, rowid, value = found[0]
        raise UnreadableStamp(
            f"the audit database holds {value} in {table}.{column} (row {rowid}), outside the "
            "years 1 to 9999 in UTC, which no clock can show: it was written by an earlier "
            "bacc-audit or edited since (`bacc-audit verify` says which row changed)"
        )


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
