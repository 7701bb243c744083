"""The events' columns read again from their lines, as ingest reads them: a piece's leaf
seals the lines themselves (store/ledger_rows.py), and `bacc-audit verify` holds every
other column of an event to what its line says, so an event edited in place (a winner, a
card, an amount changed in its column) is named with its line and column.

The reading is ingest's own per-line SQL (validate.staging_select), which the fast reader
agrees with line for line (tests/ingest/test_fast.py).
"""

from __future__ import annotations

import duckdb

from auditor.ingest.validate import present_types, staging_select
from auditor.store.db import one
from auditor.store.events import FIELDS

COLUMNS = ("stream", "seq", "ts", "ts_offset_min", "type", *(f.column for f in FIELDS.values()))


def differing(
    con: duckdb.DuckDBPyConnection, where: str = "true", limit: int = 50
) -> tuple[list[tuple[int, int, str, str | None, str | None]], int]:
    """Events (matching `where`, over `events`) whose columns are not what their line says:
    (source_id, line_no, the first such column, its value, the line's), in line order, at
    most `limit`; and how many in all."""
    chunk = (
        "(SELECT source_id, line_no, raw AS line, true AS utf8_ok FROM events "
        f"WHERE {where})"
    )
    cols = [f'"{c}"' for c in COLUMNS]
    differs = " OR ".join(f"e.{c} IS DISTINCT FROM r.{c}" for c in cols)
    which = " ".join(f"WHEN e.{c} IS DISTINCT FROM r.{c} THEN '{c.strip(chr(34))}'"
                     for c in cols)
    stored = " ".join(f"WHEN e.{c} IS DISTINCT FROM r.{c} THEN CAST(e.{c} AS VARCHAR)"
                      for c in cols)
    read = " ".join(f"WHEN e.{c} IS DISTINCT FROM r.{c} THEN CAST(r.{c} AS VARCHAR)"
                    for c in cols)
    (lines,) = one(con, f"SELECT count(*) FROM events WHERE {where}") or (0,)
    types = present_types(con, chunk, int(lines))
    rows = con.execute(
        f"""
        WITH r AS ({staging_select(chunk, "source_id", types)})
        SELECT e.source_id, e.line_no,
               CASE WHEN r.rejected IS NOT NULL THEN 'raw' {which} END,
               CASE WHEN r.rejected IS NOT NULL THEN e.raw {stored} END,
               CASE WHEN r.rejected IS NOT NULL THEN r.rejected {read} END,
               count(*) OVER ()
        FROM events e JOIN r USING (source_id, line_no)
        WHERE r.rejected IS NOT NULL OR {differs}
        ORDER BY e.source_id, e.line_no LIMIT {int(limit)}
        """
    ).fetchall()
    total = int(rows[0][5]) if rows else 0
    return [(int(a), int(b), c, d, e) for a, b, c, d, e, _ in rows], total
