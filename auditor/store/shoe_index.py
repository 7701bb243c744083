"""The shoe-integrity index's bookkeeping, append-only and sealed (docs/shoe-integrity.md,
docs/ledger.md).

The index (`shoe_orders`, `shoe_grams`) is what the integrity pass searches: a shoe's order
deleted there, or its k-grams, and a later shoe dealt in the same order is never found. So
what the pass did is kept in three append-only tables that the ledger seals a run at a time
(store/derived.py's registry):

- `shoe_index_marks`: up to which line of each source the cards were read (the highest
  `last_line` of a source holds);
- `shoe_index_queue`: a shoe with new cards, to index (a shoe is pending while it has no
  `shoe_index_done` row written after its latest queue row);
- `shoe_index_done`: a shoe indexed, with the digests of its `shoe_orders` row and of its
  `shoe_grams` rows as written, in the same transaction.

A later audit counts the index against the latest `done` rows before it trusts it
(`refuse_untrusted`); `verify` digests it again (`mismatches`). The index itself is still
replaced in place when a shoe gets more cards: its digests follow it in `done`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from auditor.errors import UserError

PENDING_SQL = """
    SELECT DISTINCT q.table_id, q.shoe FROM shoe_index_queue q
    WHERE NOT EXISTS (SELECT 1 FROM shoe_index_done d
                      WHERE d.table_id = q.table_id AND d.shoe = q.shoe
                        AND d.done_at > q.queued_at)
    ORDER BY ALL"""
MARKS_SQL = "SELECT source_id, max(last_line) AS last_line FROM shoe_index_marks GROUP BY ALL"
LATEST_SQL = ("SELECT DISTINCT ON (table_id, shoe) * FROM shoe_index_done "
              "ORDER BY table_id, shoe, done_at DESC")
NO_RUNS = "SELECT NULL::BIGINT WHERE false"
ORDER_COLUMNS = ("shoe_no", "table_id", "shoe", "first_ts", "decks", "shuffle", "batch", "codes",
                 "rounds")
DONE_COLUMNS = ("table_id", "shoe", "shoe_no", "cards", "grams", "order_sha256", "grams_sha256")


# --- digests ---------------------------------------------------------------------------------
# Made in Python from the arrays the pass holds (a string built in SQL of each shoe's cards
# and k-grams cost the pass a third more), and made again the same way by `verify`.


def _text(h: hashlib._Hash, value: str | None) -> None:
    data = b"" if value is None else value.encode()
    h.update((-1 if value is None else len(data)).to_bytes(8, "big", signed=True) + data)


def order_digests(orders: pa.Table) -> list[str]:
    """The SHA-256 of each shoe_orders row of `orders` (ORDER_COLUMNS but its table and
    shoe, the key it is found by): each field length-prefixed or big-endian, NULL told
    apart from every value."""
    us = pc.cast(pc.cast(orders.column("first_ts"), pa.timestamp("us", tz="UTC")), pa.int64())
    codes, rounds = (orders.column(c).combine_chunks() for c in ("codes", "rounds"))
    code_bytes = np.asarray(pc.list_flatten(codes), np.uint8)
    round_values = np.asarray(pc.list_flatten(rounds), np.int64).astype(">i8")
    co, ro = (np.asarray(a.offsets, np.int64) - a.offsets[0].as_py() for a in (codes, rounds))
    out = []
    for i, (no, ts, decks, shuffle, batch) in enumerate(zip(
            orders.column("shoe_no").to_pylist(), us.to_pylist(),
            orders.column("decks").to_pylist(), orders.column("shuffle").to_pylist(),
            orders.column("batch").to_pylist(), strict=True)):
        h = hashlib.sha256(int(no).to_bytes(8, "big", signed=True))
        for v in (ts, decks):
            _text(h, None if v is None else str(v))
        _text(h, shuffle)
        _text(h, batch)
        h.update((co[i + 1] - co[i]).item().to_bytes(8, "big"))
        h.update(code_bytes[co[i]:co[i + 1]].tobytes())
        h.update(round_values[ro[i]:ro[i + 1]].tobytes())
        out.append(h.hexdigest())
    return out


def grams_digests(
    shoe_no: np.ndarray, pos: np.ndarray, gram: np.ndarray
) -> dict[int, tuple[int, str]]:
    """Per shoe number, (k-grams, SHA-256 of their positions and values in position order).
    A shoe has one k-gram a position, so (number, position) orders them whole (a third key,
    the k-gram's random value, made the sort eight times slower)."""
    order = np.lexsort((pos, shoe_no))
    nos = np.asarray(shoe_no, np.int64)[order]
    p = np.asarray(pos, np.int64)[order].astype(">i8")
    g = np.asarray(gram, np.int64)[order].astype(">i8")
    cuts = np.flatnonzero(np.diff(nos)) + 1
    out = {}
    for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(nos)], strict=True):
        if hi > lo:
            h = hashlib.sha256(p[lo:hi].tobytes())
            h.update(g[lo:hi].tobytes())
            out[int(nos[lo])] = (hi - lo, h.hexdigest())
    return out


def done_rows(
    shoes: list[tuple[str, str]], orders: pa.Table, grams: dict[int, tuple[int, str]]
) -> pa.Table:
    """A `done` row (DONE_COLUMNS) for each of `shoes`, from its index rows as written
    (`orders`: ORDER_COLUMNS; `grams`: grams_digests); shoe_no 0 for a shoe with no card
    left to index."""
    sha = order_digests(orders)
    by_key = {(t, s): (int(n), len(c), d) for t, s, n, c, d in zip(
        orders.column("table_id").to_pylist(), orders.column("shoe").to_pylist(),
        orders.column("shoe_no").to_pylist(), orders.column("codes").to_pylist(), sha,
        strict=True)}
    rows = []
    for t, s in shoes:
        no, cards, order_sha = by_key.get((t, s), (0, 0, None))
        n, grams_sha = grams.get(no, (0, None)) if no else (0, None)
        rows.append((t, s, no, cards, n, order_sha, grams_sha))
    types = (pa.string(), pa.string(), pa.int64(), pa.int64(), pa.int64(), pa.string(),
             pa.string())
    return pa.table({name: pa.array([r[i] for r in rows], t)
                     for i, (name, t) in enumerate(zip(DONE_COLUMNS, types, strict=True))})


def record_done(con: duckdb.DuckDBPyConnection, rows: pa.Table, run_id: int) -> None:
    """The `done` rows, under run `run_id`, in the caller's transaction."""
    if not rows.num_rows:
        return
    con.register("_done", rows)
    try:
        con.execute(f"INSERT INTO shoe_index_done SELECT *, {int(run_id)}, now() FROM _done")
    finally:
        con.unregister("_done")


def _index_as_stored(
    con: duckdb.DuckDBPyConnection, where: str = "true"
) -> Iterator[tuple[pa.Table, dict[int, tuple[int, str]]]]:
    """The index's rows (shoe_orders rows that match `where`, and their k-grams), read back
    and digested, a few thousand shoes at a time."""
    nos = [n for (n,) in con.execute(
        f"SELECT shoe_no FROM shoe_orders WHERE {where} ORDER BY shoe_no").fetchall()]
    for i in range(0, len(nos), 4096):
        lo, hi = nos[i], nos[min(i + 4096, len(nos)) - 1]
        orders = con.sql(
            f"SELECT {', '.join(ORDER_COLUMNS)} FROM shoe_orders WHERE {where} "
            "AND shoe_no BETWEEN ? AND ? ORDER BY shoe_no, table_id, shoe", params=[lo, hi]
        ).to_arrow_table()
        g = con.sql("SELECT shoe_no, pos, gram FROM shoe_grams WHERE shoe_no BETWEEN ? AND ?",
                    params=[lo, hi]).to_arrow_table()
        yield orders, grams_digests(*(np.asarray(g.column(c).combine_chunks(), np.int64)
                                      for c in ("shoe_no", "pos", "gram")))


def adopt(con: duckdb.DuckDBPyConnection, run_id: int) -> None:
    """A database from before these tables: its marks and pending shoes (the old mutable
    `shoe_index_lines` and `shoe_index_pending`) and its index as found are taken in under
    run `run_id`, whose end seals them; the old tables go. Once: with a `done` row on
    record, an index row without one is not taken in (`verify` names it)."""
    from auditor.store.db import has_table

    if has_table(con, "shoe_index_lines"):
        con.execute(f"INSERT INTO shoe_index_marks SELECT source_id, last_line, {int(run_id)}, "
                    "now() FROM shoe_index_lines")
        con.execute("DROP TABLE shoe_index_lines")
    if has_table(con, "shoe_index_pending"):
        con.execute(f"INSERT INTO shoe_index_queue SELECT DISTINCT table_id, shoe, "
                    f"{int(run_id)}, now() FROM shoe_index_pending")
        con.execute("DROP TABLE shoe_index_pending")
    if con.execute("SELECT 1 FROM shoe_index_done LIMIT 1").fetchall():
        return
    # Shoes that share a number (an earlier bacc-audit gave a new shoe the number of one it
    # indexed again in the same pass) share their k-grams: they are indexed anew.
    shared = "SELECT shoe_no FROM shoe_orders GROUP BY ALL HAVING count(*) > 1"
    con.execute(f"INSERT INTO shoe_index_queue SELECT table_id, shoe, {int(run_id)}, now() "
                f"FROM shoe_orders WHERE shoe_no IN ({shared})")
    con.execute(f"DELETE FROM shoe_grams WHERE shoe_no IN ({shared})")
    con.execute(f"DELETE FROM shoe_orders WHERE shoe_no IN ({shared})")
    for orders, grams in _index_as_stored(con):
        keys = list(zip(orders.column("table_id").to_pylist(), orders.column("shoe").to_pylist(),
                        strict=True))
        record_done(con, done_rows(keys, orders, grams), run_id)


def counts(con: duckdb.DuckDBPyConnection) -> tuple[int, int, int, int]:
    """(shoes, k-grams) as the latest `done` rows say, (shoes, k-grams) in the index."""
    row = con.execute(
        f"""
        WITH latest AS ({LATEST_SQL})
        SELECT (SELECT count(*) FROM latest WHERE shoe_no > 0),
               (SELECT coalesce(sum(grams), 0) FROM latest),
               (SELECT count(*) FROM shoe_orders), (SELECT count(*) FROM shoe_grams)
        """
    ).fetchall()[0]
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])


def refuse_untrusted(con: duckdb.DuckDBPyConnection) -> None:
    """Before the integrity pass searches the index: it must hold as many shoes and k-grams
    as the pass wrote (a shoe's order or k-grams deleted would hide a later repeat of it).
    Counting is cheap; the digests are for `verify`."""
    from auditor.store.db import has_table

    if not has_table(con, "shoe_index_done"):
        return
    if not con.execute("SELECT 1 FROM shoe_index_done LIMIT 1").fetchall():
        return  # nothing written yet, or a database from before: `adopt` takes it in
    shoes, grams, in_shoes, in_grams = counts(con)
    if (shoes, grams) != (in_shoes, in_grams):
        raise UserError(
            f"the shoe-integrity index holds {in_shoes:,} shoes and {in_grams:,} k-grams, "
            f"the integrity pass wrote {shoes:,} and {grams:,}: the index was changed outside "
            "the product, and a search of it could miss a shoe dealt again; `bacc-audit "
            "verify` names what differs"
        )


def mismatches(
    con: duckdb.DuckDBPyConnection, old_runs: str = NO_RUNS, limit: int = 50
) -> tuple[list[tuple[str, str, str, str]], int]:
    """The shoes whose index rows differ from what the pass wrote (their latest `done` row):
    (table, shoe, what, detail) for the first `limit` (by table and shoe), and how many in
    all. Shoes last indexed by a run that `old_runs` (a query of run ids: checked before)
    gives are left to `counts`."""
    if not con.execute("SELECT 1 FROM shoe_index_done LIMIT 1").fetchall():
        return [], 0
    written = {(r[0], r[1]): r[2:] for r in con.execute(
        f"SELECT table_id, shoe, shoe_no, cards, grams, order_sha256, grams_sha256, run_id "
        f"FROM ({LATEST_SQL}) WHERE run_id NOT IN ({old_runs})").fetchall()}
    older = (f"(table_id, shoe) NOT IN (SELECT (table_id, shoe) FROM ({LATEST_SQL}) "
             f"WHERE run_id IN ({old_runs}))")
    stood: dict[tuple[str, str], tuple[int, int, int, str | None, str | None]] = {}
    for orders, grams in _index_as_stored(con, older):
        sha = order_digests(orders)
        for t, sh, no, codes, d in zip(
                orders.column("table_id").to_pylist(), orders.column("shoe").to_pylist(),
                orders.column("shoe_no").to_pylist(), orders.column("codes").to_pylist(), sha,
                strict=True):
            n, gsha = grams.get(int(no), (0, None))
            stood[(t, sh)] = (int(no), len(codes), n, d, gsha)
    out = []
    for key in sorted(written.keys() | stood.keys()):
        w, now = written.get(key), stood.get(key)
        if w is not None and now is not None and w[0] > 0 and w[:5] == now:
            continue
        if w is None or (w[0] == 0 and now is not None):
            out.append((*key, "inserted", "its order: no integrity pass wrote it"))
        elif now is None:
            if w[0] > 0:
                out.append((*key, "missing", f"its order: the integrity pass of run {w[5]} "
                                             "wrote it, it is gone"))
        elif now[0] != w[0] or now[1] != w[1] or now[3] != w[3]:
            out.append((*key, "changed", f"its order: the integrity pass of run {w[5]} wrote "
                                         "it otherwise"))
        else:
            counted = f" ({now[2]:,} stand, {w[2]:,} written)" if now[2] != w[2] else ""
            out.append((*key, "changed", f"its k-grams{counted}: the integrity pass of run "
                                         f"{w[5]} wrote them otherwise"))
    orphans = con.execute(
        "SELECT count(*) FROM shoe_grams WHERE shoe_no NOT IN (SELECT shoe_no FROM shoe_orders)"
    ).fetchall()[0][0]
    if orphans:
        out.append(("", "", "inserted",
                    f"{orphans:,} k-grams of no indexed shoe: no integrity pass wrote them"))
    return out[:limit], len(out)
