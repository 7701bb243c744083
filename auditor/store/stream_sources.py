"""`stream_sources` held to the events it summarises (docs/ledger.md).

Ingest keeps one row per (stream, source) with the source's lowest and highest seq on that
stream and how many events it gave it, so that a pass finds a stream's events, its seq gaps
and its resends without scanning the night. The table is widened in place as a file grows,
so it cannot be sealed row by row; but it is a pure function of the events, and the events
are sealed piece by piece. So it is checked against them:

- `refuse_untrusted`, before an audit or a batch ingest trusts it: each source's events
  summed over its streams against what its pieces loaded (`source_extents`, sealed). A row
  deleted or its count changed shows there, at the cost of two small tables. (`watch`'s
  polls do not ask, as their ingest goes on from what the watch itself wrote; its sweeps,
  which audit, do.)
- `mismatches`, for `verify` (the fast check too): every row against the events grouped
  again, which also names a row moved to another stream or its seq range changed.
"""

from __future__ import annotations

import duckdb

from auditor.errors import UserError

# Each source's events as its rows in stream_sources sum them, and as its pieces loaded them.
_COUNTS_SQL = """
    WITH s AS (SELECT source_id, sum(events) AS n FROM stream_sources GROUP BY ALL),
    p AS (SELECT source_id, sum(events) AS n FROM source_extents GROUP BY ALL)
    SELECT coalesce(s.source_id, p.source_id) AS source_id, coalesce(s.n, 0) AS summed,
           coalesce(p.n, 0) AS loaded
    FROM s FULL OUTER JOIN p USING (source_id)
    WHERE coalesce(s.n, 0) <> coalesce(p.n, 0)
    ORDER BY 1"""


def refuse_untrusted(con: duckdb.DuckDBPyConnection) -> None:
    """Refuse an audit or an ingest over a summary that does not add up to its pieces: a
    (stream, source) row deleted would hide that source's events from the stream's rounds,
    and have ingest judge the stream's seq gaps and resends without them."""
    row = con.execute(f"{_COUNTS_SQL} LIMIT 1").fetchall()
    if row:
        source, summed, loaded = row[0]
        raise UserError(
            f"stream_sources: the streams of source {source} sum {summed:,} events, its "
            f"pieces loaded {loaded:,}: ingest's summary of where each stream's events are "
            "was changed outside the product, and what is judged through it could miss some "
            "of a stream's events; `bacc-audit verify` names what differs"
        )


def mismatches(
    con: duckdb.DuckDBPyConnection, limit: int = 50
) -> tuple[list[tuple[str, str, int, str]], int]:
    """The rows that differ from the events grouped again: (what, stream, source, detail)
    for the first `limit`, by source and stream, and how many in all. Every source, in the
    fast check too: a row moved to another stream keeps its source's sum, and a grouping of
    every event costs 14-18 ms on bench/audit.py's 2.2M (docs/benchmarks.md)."""
    rows = con.execute(
        f"""
        WITH e AS (
          SELECT stream, source_id, min(seq) AS lo, max(seq) AS hi, count(*) AS n
          FROM events GROUP BY ALL
        ),
        d AS (
          SELECT coalesce(e.stream, s.stream) AS stream,
                 coalesce(e.source_id, s.source_id) AS source_id,
                 e.lo, e.hi, e.n, s.min_seq, s.max_seq, s.events
          FROM e FULL OUTER JOIN stream_sources s ON e.stream IS NOT DISTINCT FROM s.stream
                                                 AND e.source_id = s.source_id
          WHERE e.n IS DISTINCT FROM s.events OR e.lo IS DISTINCT FROM s.min_seq
             OR e.hi IS DISTINCT FROM s.max_seq
        )
        SELECT *, count(*) OVER () FROM d ORDER BY source_id, stream LIMIT {int(limit)}
        """
    ).fetchall()
    found: list[tuple[str, str, int, str]] = []
    for stream, source, lo, hi, n, min_seq, max_seq, events, _ in rows:
        if n is None:
            found.append(("inserted", stream, source,
                          f"says {events:,} events (seq {min_seq}-{max_seq}); the source "
                          "has none on this stream"))
        elif events is None:
            found.append(("missing", stream, source,
                          f"the source has {n:,} events on this stream (seq {lo}-{hi}) and "
                          "no row says so"))
        else:
            found.append(("changed", stream, source,
                          f"says {events:,} events, seq {min_seq}-{max_seq}; the source has "
                          f"{n:,}, seq {lo}-{hi}"))
    return found, int(rows[0][-1]) if rows else 0
