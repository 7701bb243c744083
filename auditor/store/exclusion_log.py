"""The late events kept out of their rounds, on the record (docs/ledger.md).

`round_exclusions` says which events each round was judged without (auditor/audit/rounds.py:
delivered after the round was judged, or after its end), and every pass after the replay
leaves them out too. It is rewritten a round at a time, so it cannot be sealed per run; a
row added there would take a card out of its round, and a round judged again without it
could lose its finding, with nothing in the ledger to show it.

So each time a round's exclusions are set anew, the whole set is appended to
`round_exclusion_log` (a row per event left out, or one row with seq -1 when none is), which
the ledger seals a run at a time (store/derived.py's registry). What `round_exclusions`
holds must be the latest set of every round: the audit compares them before it trusts the
table (`refuse_untrusted`), and `verify` names each row that differs (`mismatches`).
"""

from __future__ import annotations

import duckdb

from auditor.errors import UserError

NONE = -1  # the seq of the row that says a round's set is empty
# The row that says a database's exclusions from before this log were taken in.
ADOPTED = "('', '', -1, -1, 'adopted')"

LATEST_SQL = """
    SELECT l.table_id, l.shoe, l.round, l.seq, l.why FROM round_exclusion_log l
    JOIN (SELECT table_id, shoe, round, max(set_at) AS at FROM round_exclusion_log
          WHERE round >= 0 GROUP BY ALL) s
      ON s.table_id = l.table_id AND s.shoe = l.shoe AND s.round = l.round AND s.at = l.set_at
    WHERE l.seq >= 0"""


def adopt(con: duckdb.DuckDBPyConnection, run_id: int) -> None:
    """Once, before the log's first row: the exclusions a database holds from before it, as
    found, under run `run_id` (whose end seals them), and a row saying so. With the log
    begun, an exclusion without its log row is named, never taken in."""
    if con.execute("SELECT 1 FROM round_exclusion_log LIMIT 1").fetchall():
        return
    run = int(run_id)
    con.execute(f"INSERT INTO round_exclusion_log SELECT table_id, shoe, round, seq, why, {run}, "
                f"now() FROM round_exclusions UNION ALL SELECT *, {run}, now() "
                f"FROM (VALUES {ADOPTED})")


def record(con: duckdb.DuckDBPyConnection, run_id: int, rounds: str) -> None:
    """The exclusions of the rounds in table `rounds` (table_id, shoe, round) as they now
    stand, appended to the log under run `run_id` where they differ from the round's latest
    logged set (a round with an event after its end is read again by every audit), in the
    caller's transaction (the one that set them)."""
    adopt(con, run_id)
    run = int(run_id)
    con.execute(
        f"""
        INSERT INTO round_exclusion_log
        WITH keys AS (SELECT DISTINCT table_id, shoe, round FROM {rounds}),
        stands AS (
          SELECT table_id, shoe, round, seq, why FROM round_exclusions
          SEMI JOIN keys USING (table_id, shoe, round)
          UNION ALL
          SELECT table_id, shoe, round, {NONE}, '' FROM keys
          ANTI JOIN round_exclusions USING (table_id, shoe, round)
        ), logged AS (
          SELECT l.table_id, l.shoe, l.round, l.seq, l.why FROM round_exclusion_log l
          JOIN (SELECT table_id, shoe, round, max(set_at) AS at FROM round_exclusion_log
                SEMI JOIN keys USING (table_id, shoe, round) GROUP BY ALL) s
            ON s.table_id = l.table_id AND s.shoe = l.shoe AND s.round = l.round
           AND s.at = l.set_at
        ), changed AS (
          SELECT table_id, shoe, round FROM (
            SELECT table_id, shoe, round, list(seq || why ORDER BY seq, why) AS x
            FROM stands GROUP BY ALL
          ) n LEFT JOIN (
            SELECT table_id, shoe, round, list(seq || why ORDER BY seq, why) AS x
            FROM logged GROUP BY ALL
          ) o USING (table_id, shoe, round)
          WHERE o.x IS DISTINCT FROM n.x
        )
        SELECT table_id, shoe, round, seq, why, {run}, now()
        FROM stands SEMI JOIN changed USING (table_id, shoe, round)
        """
    )


def mismatches(
    con: duckdb.DuckDBPyConnection, limit: int = 50
) -> tuple[list[tuple[str, str, int, int, str]], int]:
    """The rows of `round_exclusions` that are not in their round's latest logged set
    ('inserted') and the logged ones it lacks ('missing'): (what, table, shoe, round, seq)
    for the first `limit`, and how many in all. Nothing before the log has begun."""
    if not con.execute("SELECT 1 FROM round_exclusion_log LIMIT 1").fetchall():
        return [], 0
    rows = con.execute(
        f"""
        WITH latest AS ({LATEST_SQL}),
        stands AS (SELECT table_id, shoe, round, seq, why FROM round_exclusions),
        diff AS (
          (SELECT 'inserted' AS what, * FROM
             (SELECT * FROM stands EXCEPT ALL SELECT * FROM latest))
          UNION ALL
          (SELECT 'missing', * FROM (SELECT * FROM latest EXCEPT ALL SELECT * FROM stands))
        )
        SELECT what, table_id, shoe, round, seq, count(*) OVER () FROM diff
        ORDER BY table_id, shoe, round, seq, what LIMIT {int(limit)}
        """
    ).fetchall()
    return [r[:5] for r in rows], (rows[0][5] if rows else 0)


def refuse_untrusted(con: duckdb.DuckDBPyConnection) -> None:
    """Before an audit leaves events out of their rounds: `round_exclusions` as logged."""
    from auditor.store.db import has_table

    if not has_table(con, "round_exclusion_log"):
        return
    found, n = mismatches(con, 1)
    if found:
        what, table, shoe, rnd, seq = found[0]
        raise UserError(
            f"round_exclusions: the event seq {seq} of table {table} is {what} as left out "
            f"of round {rnd} of shoe {shoe}{f' (and {n - 1:,} more rows)' if n > 1 else ''}: "
            "the record of the events kept out of their rounds was changed outside the "
            "product, and an audit that trusted it could judge a round without a card dealt "
            "in it; `bacc-audit verify` names what differs"
        )
