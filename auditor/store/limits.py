"""What the environment may cap in every command's DuckDB: its memory and its threads.

A machine the audit shares with other services (a surveillance server, a nightly job beside
`watch`) sets these rather than let each command take 80% of the memory and every core.
"""

from __future__ import annotations

import os

import duckdb

from auditor.errors import UserError


def apply(con: duckdb.DuckDBPyConnection) -> None:
    """Set `BACC_AUDIT_MEMORY_LIMIT` (e.g. 3GB: DuckDB spills to <db>.tmp beyond it instead
    of growing) and `BACC_AUDIT_THREADS` (DuckDB's worker threads; default: one a core) on
    a connection just opened; a value DuckDB cannot take closes it and is one sentence."""
    limit = os.environ.get("BACC_AUDIT_MEMORY_LIMIT")
    if limit:
        try:
            con.execute(f"SET memory_limit = '{limit.replace(chr(39), '')}'")
        except duckdb.Error as e:
            con.close()
            raise UserError(f"BACC_AUDIT_MEMORY_LIMIT={limit}: not a memory size ({e})") from None
    threads = os.environ.get("BACC_AUDIT_THREADS")
    if threads:
        if not threads.strip().isdigit() or not 1 <= int(threads) <= 1024:
            con.close()
            raise UserError(
                f"BACC_AUDIT_THREADS={threads}: not a number of threads (a whole number from "
                "1 to 1024)")
        con.execute(f"SET threads = {int(threads)}")
