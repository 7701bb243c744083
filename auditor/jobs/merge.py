"""The backfill's merge: a finished partition's database copied into the audit database, in
one transaction, its ids renumbered, unless it meets what the database already holds
(auditor.jobs.backfill, docs/scale-out.md)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import duckdb

from auditor.store import db, set_logs
from auditor.store.sql import quote


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    return [
        r[0]
        for r in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND table_name = ? ORDER BY column_index",
            [table],
        ).fetchall()
    ]


def _copy(
    con: duckdb.DuckDBPyConnection,
    table: str,
    replace: dict[str, str],
    joins: str = "",
    where: str = "true",
) -> None:
    """Rows of the partition's `table` into the database's, columns by name, some replaced
    by expressions over `x` (the partition's row) and `joins`."""
    cols = _columns(con, table)
    select = ", ".join(replace.get(c, f"x.{_ident(c)}") for c in cols)
    names = ", ".join(_ident(c) for c in cols)
    con.execute(
        f"INSERT INTO {table} ({names}) SELECT {select} FROM part.{table} x {joins} "
        f"WHERE {where}"
    )


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _renumber(con: duckdb.DuckDBPyConnection, name: str, ids_sql: str, sequence: str) -> None:
    """Temp table `name` (old, new): the ids `ids_sql` gives, each with a new id from
    `sequence`, in the same order."""
    n = int(db.single(con, f"SELECT count(*) FROM ({ids_sql})")[0])
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE {name} AS
        SELECT o.old, n.new FROM
          (SELECT id AS old, row_number() OVER (ORDER BY id) AS k FROM ({ids_sql})) o
        JOIN (SELECT id AS new, row_number() OVER (ORDER BY id) AS k
              FROM (SELECT nextval('{sequence}') AS id FROM range({n}))) n USING (k)
        """
    )


def conflicts(con: duckdb.DuckDBPyConnection) -> str:
    """Why the attached partition cannot be merged as it is, or "": it shares a stream's
    seq range, a path, a file's content or a file's first line with what the database holds
    (duplicates, altered or grown files: `ingest` must judge them against each other)."""
    checks = (
        ("a stream's seq range",
         "SELECT 1 FROM part.stream_sources a JOIN stream_sources r ON a.stream = r.stream "
         "AND r.min_seq <= a.max_seq AND a.min_seq <= r.max_seq LIMIT 1"),
        ("a file's path",
         "SELECT 1 FROM part.sources a JOIN sources s ON s.path = a.path LIMIT 1"),
        ("a file's content",
         "SELECT 1 FROM part.sources a JOIN sources s ON s.sha256 = a.sha256 "
         "AND s.status = 'ingested' AND a.status = 'ingested' LIMIT 1"),
        ("a file's first line",
         "SELECT 1 FROM part.source_files a JOIN source_files s "
         "ON s.head_sha256 = a.head_sha256 LIMIT 1"),
    )
    for what, sql in checks:
        if db.one(con, sql):
            return what
    return ""


def merge_partition(
    con: duckdb.DuckDBPyConnection, path: Path, run_id: int, streams: Counter[str]
) -> bool:
    """Copy a finished partition's sources, files, pieces, events, quarantine, findings,
    audited rounds and the late events left out of them into the database, in one
    transaction, as written by run `run_id`, its ids renumbered. False (nothing copied) when
    it meets what the database holds (`conflicts`). `streams` counts, per stream, the
    partitions merged that hold it."""
    con.execute(f"ATTACH {quote(str(path))} AS part (READ_ONLY)")
    try:
        if conflicts(con):
            return False
        run = str(int(run_id))
        con.execute("BEGIN TRANSACTION")
        try:
            _renumber(con, "merge_sources", "SELECT id FROM part.sources", "source_id_seq")
            _renumber(con, "merge_findings", "SELECT id FROM part.findings", "finding_id_seq")
            src = "JOIN merge_sources m ON m.old = x.source_id"
            _copy(con, "sources", {"id": "m.new", "run_id": run},
                  "JOIN merge_sources m ON m.old = x.id")
            _copy(con, "source_files", {"id": "m.new", "run_id": run},
                  "JOIN merge_sources m ON m.old = x.id")
            _copy(con, "source_extents",
                  {"source_id": "m.new", "file_id": "coalesce(f.new, x.file_id)", "run_id": run},
                  src + " LEFT JOIN merge_sources f ON f.old = x.file_id")
            _copy(con, "stream_sources", {"source_id": "m.new"}, src)
            _copy(con, "quarantine", {"source_id": "m.new"}, src)
            _copy(con, "events", {"source_id": "m.new"}, src)
            # A finding already standing in the database is not recorded again, as
            # findings.record would not; log.altered's evidence names its source by id.
            _copy(
                con,
                "findings",
                {
                    "id": "n.new",
                    "run_id": run,
                    "evidence": "CASE WHEN a.new IS NULL THEN x.evidence ELSE "
                    "json_merge_patch(x.evidence, json_object('source_id', a.new)) END",
                },
                "JOIN merge_findings n ON n.old = x.id "
                "LEFT JOIN merge_sources a ON x.code = 'log.altered' "
                "AND a.old = try_cast(json_extract(x.evidence, '$.source_id') AS BIGINT)",
                "x.fingerprint NOT IN (SELECT fingerprint FROM current_findings)",
            )
            _copy(con, "round_audits", {"run_id": run})
            # The late events its replay left out of their rounds (issue 28): the table
            # passes on the merged database leave them out too.
            # the database's own, taken in before the partition's are copied
            set_logs.adopt(con, set_logs.EXCLUSIONS, run_id)
            _copy(con, "round_exclusions", {})
            _copy(con, "round_exclusion_log", {"run_id": run})
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        streams.update(r[0] for r in con.execute(
            "SELECT DISTINCT stream FROM part.stream_sources").fetchall())
        return True
    finally:
        con.execute("DETACH part")
