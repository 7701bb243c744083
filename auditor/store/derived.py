"""The audit's own bookkeeping, sealed: which rounds it judged on which events
(`round_audits`), which procedure changes it judged (`change_audits`), which streams it
checked (`stream_checks`), which lines and shoes the shoe-integrity pass read and indexed
(`shoe_index_*`, store/shoe_index.py). A later audit trusts these rows to skip work, so a
row forged there changes what it judges without touching a finding: a `round_audits` row
for a round not yet judged, with the round's event count, makes every later audit take the
round as judged and never replay it.

A leaf per row would cost a seal too much (a row per round), so these rows are sealed a
run at a time: when a run ends, `record` digests each table's rows of that run into
`run_derived` (a row per run and table it wrote: how many rows, and their SHA-256 as
store/ledger_rows.py digests columns), and the ledger seals that row with the run's end
(kind `derived`). `verify` counts and digests the rows again (ledger_verify.check_derived),
and an audit counts them before it trusts them (`refuse_untrusted`): a row added, changed
or removed since its run ended is named with its table and run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import duckdb

from auditor.errors import UserError
from auditor.store import ledger_rows, set_logs, shoe_index, stream_sources


@dataclass(frozen=True)
class Derived:
    """A table of the audit's bookkeeping: rows appended by runs (never updated or deleted),
    each with the `run_id` of the run that wrote it. `columns` are digested in this order,
    and the rows in the order of all of them; a TIMESTAMPTZ column as microseconds since
    1970 UTC."""

    table: str
    columns: tuple[str, ...]
    times: tuple[str, ...] = ()

    def select_sql(self) -> str:
        cols = ", ".join(f"epoch_us({c})" if c in self.times else c for c in self.columns)
        return f"SELECT {cols} FROM {self.table} WHERE run_id = ? ORDER BY ALL"

    @property
    def text(self) -> tuple[bool, ...]:
        return tuple(c in TEXT_COLUMNS for c in self.columns)


TEXT_COLUMNS = frozenset({"table_id", "shoe", "stream", "why", "order_sha256", "grams_sha256"})

# The one registry: a table added here is sealed and verified with no other change.
DERIVED: tuple[Derived, ...] = (
    Derived("round_audits",
            ("table_id", "shoe", "round", "events", "last_seq", "findings", "audited_at"),
            ("audited_at",)),
    Derived("change_audits", ("table_id", "seq", "audited_at"), ("audited_at",)),
    Derived("stream_checks", ("stream", "events", "max_seq", "reversed", "checked_at"),
            ("checked_at",)),
    # the logs of the tables rewritten a key at a time (store/set_logs.py)
    Derived("round_exclusion_log", ("table_id", "shoe", "round", "seq", "why", "set_at"),
            ("set_at",)),
    Derived("ordered_time_log", ("stream", "seq", "ts", "set_at"), ("ts", "set_at")),
    # the shoe-integrity pass (store/shoe_index.py)
    Derived("shoe_index_marks", ("source_id", "last_line", "marked_at"), ("marked_at",)),
    Derived("shoe_index_queue", ("table_id", "shoe", "queued_at"), ("queued_at",)),
    Derived("shoe_index_done",
            ("table_id", "shoe", "shoe_no", "cards", "grams", "order_sha256", "grams_sha256",
             "done_at"),
            ("done_at",)),
)

TABLE = "run_derived"
DDL = f"""
    CREATE TABLE IF NOT EXISTS {TABLE} (
      run_id BIGINT NOT NULL,
      tab VARCHAR NOT NULL,
      rows BIGINT NOT NULL,
      sha256 VARCHAR NOT NULL,
      recorded_by BIGINT NOT NULL,
      recorded_at TIMESTAMPTZ NOT NULL
    )"""
# The `tab` of the row the first seal leaves (at_seal): `rows` is how many runs it took in.
ADOPTED = "(runs before)"
# The ledger's key of a run_derived row (store/ledger.py's Covered `derived`).
KEY_SQL = "tab || ' of run ' || run_id"


def digest(con: duckdb.DuckDBPyConnection, d: Derived, run_id: int) -> tuple[int, str]:
    """(rows, SHA-256) of run `run_id`'s rows of `d`, as `record` keeps them."""
    reader = con.sql(d.select_sql(), params=[int(run_id)]).to_arrow_reader(
        ledger_rows.BATCH_ROWS // 4)
    try:
        return ledger_rows.batches_digest(reader, d.text)
    finally:
        reader.close()


def record(con: duckdb.DuckDBPyConnection, runs: Iterable[int], sealer: int) -> int:
    """Digest the rows of `runs` in every derived table into `run_derived`, as recorded by
    run `sealer`, for each (run, table) with rows and no digest yet. A run with no digest
    of a table wrote none of it: a row found there later under its id is named by `verify`.
    Returns the digests written. In the caller's transaction (the seal's)."""
    ids = ", ".join(str(int(r)) for r in sorted(set(runs)))
    if not ids:
        return 0
    have = set(con.execute(
        f"SELECT run_id, tab FROM {TABLE} WHERE run_id IN ({ids})").fetchall())
    rows = [
        (run, d.table, *digest(con, d, run), int(sealer))
        for d in DERIVED
        for (run,) in con.execute(
            f"SELECT DISTINCT run_id FROM {d.table} WHERE run_id IN ({ids}) ORDER BY 1"
        ).fetchall()
        if (run, d.table) not in have
    ]
    if rows:
        con.executemany(f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?, ?, now())", rows)
    return len(rows)


def at_seal(
    con: duckdb.DuckDBPyConnection, run_id: int | None, sealer: int, starting: bool = False
) -> None:
    """What a seal of `run_id` by `sealer` digests (store/ledger.py): the run once it has
    ended, or when another run seals it (it died); at its start (`starting`), rows that
    already carry its id (forged before it began: it has written none), so that its end
    cannot take them in as its own. The first seal of a database whose ledger has no digest
    yet (a new one, or one from before `run_derived`) also digests every run that has
    ended, as their rows are found, and leaves a row saying so (tab ADOPTED): it happens
    once, so a row forged later under an earlier run's id is not taken in."""
    runs: set[int] = set()
    if run_id is not None:
        ended = con.execute(
            "SELECT finished_at IS NOT NULL FROM runs WHERE id = ?", [int(run_id)]
        ).fetchall()
        if starting or run_id != sealer or (ended and ended[0][0]):
            runs.add(int(run_id))
    # asked of the ledger, not of run_derived: a table emptied or dropped must not look new
    first = not con.execute("SELECT 1 FROM ledger WHERE kind = 'derived' LIMIT 1").fetchall()
    if first:
        earlier = {int(r) for (r,) in con.execute(
            "SELECT id FROM runs WHERE finished_at IS NOT NULL").fetchall()}
        runs |= earlier
    record(con, runs, sealer)
    if first:
        con.execute(f"INSERT INTO {TABLE} VALUES (?, ?, ?, '', ?, now())",
                    [int(sealer), ADOPTED, len(runs), int(sealer)])


def refuse_untrusted(con: duckdb.DuckDBPyConnection, run_id: int | None = None) -> None:
    """Before an audit trusts its bookkeeping to skip work: the rows of every run that has
    ended must number what its sealed digest says (a forged round_audits row would make the
    audit skip a round it never judged). Counting is cheap; the digests themselves are for
    `verify`. Rows of a run still open (the caller's own, a `watch`) are not judged. Then
    the tables rewritten in place against their logs: round_exclusions and ordered_times
    (set_logs; taken in first by run `run_id` if the database is from before their logs)
    and the shoe-integrity index. Before all of them, ingest's per-stream summary against
    the pieces it sums (store/stream_sources.py)."""
    from auditor.store.db import has_table  # db's schema includes this module's

    stream_sources.refuse_untrusted(con)
    if not has_table(con, TABLE):
        return
    for d in DERIVED:
        row = con.execute(
            f"""
            WITH now AS (SELECT run_id, count(*) AS n FROM {d.table} GROUP BY run_id),
            sealed AS (SELECT run_id, rows FROM {TABLE} WHERE tab = ?)
            SELECT coalesce(n.run_id, s.run_id), coalesce(n.n, 0), s.rows
            FROM now n FULL OUTER JOIN sealed s USING (run_id)
            LEFT JOIN runs r ON r.id = coalesce(n.run_id, s.run_id)
            WHERE coalesce(n.n, 0) IS DISTINCT FROM coalesce(s.rows, 0)
              AND (r.id IS NULL OR r.finished_at IS NOT NULL)
            ORDER BY 1 LIMIT 1
            """,
            [d.table],
        ).fetchall()
        if row:
            run, now, sealed = row[0]
            said = "no digest" if sealed is None else f"a digest of {sealed:,}"
            raise UserError(
                f"{d.table}: {now:,} {'row stands' if now == 1 else 'rows stand'} under "
                f"run {run}, for which the ledger sealed {said}: "
                "the audit's record of what it did was changed outside the product, and "
                "an audit that trusted it could skip work it never did; `bacc-audit "
                "verify` names what differs"
            )
    set_logs.refuse_untrusted(con, run_id)
    shoe_index.refuse_untrusted(con)
