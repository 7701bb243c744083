"""Tables the audit rewrites a key at a time, on the record (docs/ledger.md).

Some of the audit's bookkeeping is replaced whole for a key each time it is worked out again,
so it cannot be sealed per run as `round_audits` is:

- `round_exclusions`, per round: the late events the round was judged without
  (auditor/audit/rounds.py), which every pass after the replay leaves out too. A row added
  there takes a card out of its round; one removed puts back a card the audit left out.
- `ordered_times`, per stream: the events whose ordered time differs from their stamp
  (auditor/audit/streams.py), which the dealer and time checks read. A row changed there
  moves an event in time.

So each time a key's set is worked out anew, the whole set is appended to the table's log (a
row per row of the set, or one row with seq -1 when the set is empty), which the ledger seals
a run at a time (store/derived.py's registry). What the table holds must be the latest set of
every key: the audit compares them before it trusts the table (`refuse_untrusted`), and
`verify` names each row that differs (`mismatches`). A database from before the log has its
table taken in, as found, once (a row with seq -2 says so).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from auditor.errors import UserError

NONE, ADOPTED = -1, -2  # the seq of the row saying a key's set is empty / the table taken in


@dataclass(frozen=True)
class SetLog:
    table: str
    log: str
    keys: tuple[str, ...]  # what a set is replaced by
    values: tuple[str, ...]  # the rest of a row, `seq` first
    blank_keys: str  # SQL values of the keys of the row saying the table was taken in
    blank_values: str  # SQL values of `values` for the marker rows, `{seq}` the seq
    what: str  # a row of the table, in words, for the sentences
    harm: str  # what trusting a changed table would do

    @property
    def columns(self) -> str:
        return ", ".join((*self.keys, *self.values))

    def _on(self, a: str, b: str) -> str:
        return " AND ".join(f"{a}.{k} = {b}.{k}" for k in self.keys)

    def latest_sql(self, keys: str | None = None, empty: bool = False) -> str:
        """The rows of each key's latest logged set (of the keys in table `keys` if given),
        with the row that says a set is empty if `empty`."""
        only = f"SEMI JOIN {keys} USING ({', '.join(self.keys)})" if keys else ""
        cols = ", ".join(f"l.{c}" for c in (*self.keys, *self.values))
        return f"""
            SELECT {cols} FROM {self.log} l
            JOIN (SELECT {', '.join(self.keys)}, max(set_at) AS at FROM {self.log} {only}
                  WHERE seq <> {ADOPTED} GROUP BY ALL) s
              ON {self._on('s', 'l')} AND s.at = l.set_at
            WHERE l.seq >= {NONE if empty else 0}"""


EXCLUSIONS = SetLog(
    "round_exclusions", "round_exclusion_log", ("table_id", "shoe", "round"), ("seq", "why"),
    "'', '', -1", "{seq}, ''", "an event left out of its round",
    "an audit that trusted it could judge a round without a card dealt in it",
)
ORDERED_TIMES = SetLog(
    "ordered_times", "ordered_time_log", ("stream",), ("seq", "ts"),
    "''", "{seq}, TIMESTAMPTZ '1970-01-01 00:00:00+00'", "an event's ordered time",
    "an audit that trusted it could judge an event at a time its log does not give it",
)
LOGS = (EXCLUSIONS, ORDERED_TIMES)


def adopt(con: duckdb.DuckDBPyConnection, s: SetLog, run_id: int) -> None:
    """Once, before the log's first row: the table as found, under run `run_id` (whose end
    seals it), and a row saying so. With the log begun, a row without its log row is named,
    never taken in."""
    if con.execute(f"SELECT 1 FROM {s.log} LIMIT 1").fetchall():
        return
    run = int(run_id)
    con.execute(f"INSERT INTO {s.log} SELECT {s.columns}, {run}, now() FROM {s.table} "
                f"UNION ALL SELECT {s.blank_keys}, {s.blank_values.format(seq=ADOPTED)}, "
                f"{run}, now()")


def record(con: duckdb.DuckDBPyConnection, s: SetLog, run_id: int, keys: str) -> None:
    """The sets of the keys in table `keys` as they now stand, appended to the log under run
    `run_id` where they differ from the key's latest logged set (a round with an event after
    its end is read again by every audit), in the caller's transaction (the one that set
    them)."""
    adopt(con, s, run_id)
    k = ", ".join(s.keys)
    rows = f"list(({', '.join(s.values)}) ORDER BY ALL)"
    con.execute(
        f"""
        INSERT INTO {s.log}
        WITH keys AS (SELECT DISTINCT {k} FROM {keys}),
        stands AS (
          SELECT {s.columns} FROM {s.table} SEMI JOIN keys USING ({k})
          UNION ALL
          SELECT {k}, {s.blank_values.format(seq=NONE)} FROM keys
          ANTI JOIN {s.table} USING ({k})
        ), logged AS ({s.latest_sql('keys', empty=True)}
        ), changed AS (
          SELECT {k} FROM (SELECT {k}, {rows} AS x FROM stands GROUP BY ALL) n
          LEFT JOIN (SELECT {k}, {rows} AS x FROM logged GROUP BY ALL) o USING ({k})
          WHERE o.x IS DISTINCT FROM n.x
        )
        SELECT {s.columns}, {int(run_id)}, now() FROM stands SEMI JOIN changed USING ({k})
        """
    )


def mismatches(
    con: duckdb.DuckDBPyConnection, s: SetLog, limit: int = 50
) -> tuple[list[tuple[object, ...]], int]:
    """The rows of the table not in their key's latest logged set ('inserted') and the
    logged ones it lacks ('missing'): (what, *keys, *values) for the first `limit`, and how
    many in all. Nothing before the log has begun."""
    if not con.execute(f"SELECT 1 FROM {s.log} LIMIT 1").fetchall():
        return [], 0
    rows = con.execute(
        f"""
        WITH latest AS ({s.latest_sql()}),
        stands AS (SELECT {s.columns} FROM {s.table}),
        diff AS (
          (SELECT 'inserted' AS what, * FROM
             (SELECT * FROM stands EXCEPT ALL SELECT * FROM latest))
          UNION ALL
          (SELECT 'missing', * FROM (SELECT * FROM latest EXCEPT ALL SELECT * FROM stands))
        )
        SELECT *, count(*) OVER () FROM diff
        ORDER BY {s.columns}, what LIMIT {int(limit)}
        """
    ).fetchall()
    return [r[:-1] for r in rows], (rows[0][-1] if rows else 0)


def describe(s: SetLog, row: tuple[object, ...]) -> str:
    """A mismatch's row (without its `what`) by its columns, as `verify` and the audit say
    it: `table_id MB-01 shoe S round 72 seq 2064 why after_end`."""
    return " ".join(f"{c} {v}" for c, v in zip((*s.keys, *s.values), row, strict=True))


def refuse_untrusted(con: duckdb.DuckDBPyConnection, run_id: int | None) -> None:
    """Before an audit trusts these tables: each as its log says (taken in first by run
    `run_id`, if given, when the database is from before its log)."""
    from auditor.store.db import has_table

    for s in LOGS:
        if not has_table(con, s.log):
            continue
        if run_id is not None:
            adopt(con, s, run_id)
        found, n = mismatches(con, s, 1)
        if found:
            more = f" (and {n - 1:,} more rows)" if n > 1 else ""
            raise UserError(
                f"{s.table}: {s.what} ({describe(s, found[0][1:])}) is {found[0][0]}{more}: "
                f"the table was changed outside the product since the audit wrote it, and "
                f"{s.harm}; `bacc-audit verify` names what differs"
            )
