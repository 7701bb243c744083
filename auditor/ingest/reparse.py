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
from auditor.store.events import FIELDS

COLUMNS = ("stream", "seq", "ts", "ts_offset_min", "type", *(f.column for f in FIELDS.values()))


# Events read again in one statement at most (whole sources, in source order): the line's
# columns are joined back to the stored ones, and a join of a 10M-round day's 157.6 M events
# at once spilled more than 36 GB beside the database (docs/benchmarks.md, session 39).
CHUNK_EVENTS = 2_000_000


def differing(
    con: duckdb.DuckDBPyConnection, where: str = "true", limit: int = 50
) -> tuple[list[tuple[int, int, str, str | None, str | None]], int]:
    """Events (matching `where`, over `events`) whose columns are not what their line says:
    (source_id, line_no, the first such column, its value, the line's), in line order, at
    most `limit`; and how many in all. Read a stretch of sources at a time (CHUNK_EVENTS)."""
    counts = con.execute(
        # NOT NULL in the schema; a row forged past it is check_rows' (no piece holds it)
        f"SELECT source_id, count(*) FROM events WHERE source_id IS NOT NULL AND ({where}) "
        "GROUP BY ALL ORDER BY 1"
    ).fetchall()
    found: list[tuple[int, int, str, str | None, str | None]] = []
    total = 0
    for lo, hi, lines in _stretches(counts, CHUNK_EVENTS):
        rows, n = _differing(
            con, f"({where}) AND source_id BETWEEN {lo} AND {hi}", lines, limit - len(found)
        )
        found += rows
        total += n
    return found, total


def _stretches(
    counts: list[tuple[int, int]], most: int
) -> list[tuple[int, int, int]]:
    """Consecutive sources ((source_id, events), in order) cut into (first, last, events)
    stretches of at most `most` events, a source bigger than that alone."""
    out: list[tuple[int, int, int]] = []
    for sid, n in counts:
        if out and out[-1][2] + n <= most:
            out[-1] = (out[-1][0], sid, out[-1][2] + n)
        else:
            out.append((sid, sid, n))
    return out


def _differing(
    con: duckdb.DuckDBPyConnection, where: str, lines: int, limit: int
) -> tuple[list[tuple[int, int, str, str | None, str | None]], int]:
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
    types = present_types(con, chunk, lines)
    rows = con.execute(
        f"""
        WITH r AS ({staging_select(chunk, "source_id", types)})
        SELECT e.source_id, e.line_no,
               CASE WHEN r.rejected IS NOT NULL THEN 'raw' {which} END,
               CASE WHEN r.rejected IS NOT NULL THEN e.raw {stored} END,
               CASE WHEN r.rejected IS NOT NULL THEN r.rejected {read} END,
               count(*) OVER ()
        FROM (SELECT * FROM events WHERE {where}) e JOIN r USING (source_id, line_no)
        WHERE r.rejected IS NOT NULL OR {differs}
        ORDER BY e.source_id, e.line_no LIMIT {max(int(limit), 1)}
        """
    ).fetchall()
    total = int(rows[0][5]) if rows else 0
    return [(int(a), int(b), c, d, e) for a, b, c, d, e, _ in rows[:max(limit, 0)]], total
