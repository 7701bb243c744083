"""The shoe-integrity pass: every shoe's dealt cards against every earlier shoe in the
database, against a new pack's order, and against the previous shoe (docs/shoe-integrity.md).

A year of shoes is searched without reading a year of events: each shoe's order is kept once
(`shoe_orders`) with the k-grams of every `step`-th position (`shoe_grams`), and only the
shoes that got cards since the last pass (`shoe_index_marks` says which lines of which source
were read) are read and probed with all their k-grams, one hash join in DuckDB. The pure
sums and tests are in auditor.replay.integrity.

The index is derived data, like round_audits: a shoe that gets more cards (a file still being
written) is indexed again. What the pass read and indexed is kept append-only and sealed, and
the index is counted against it before an audit searches it (store/shoe_index.py).
Findings are never withdrawn here: the cards they rest on are events, and events are never
rewritten.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, replace
from itertools import chain
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from auditor.config import PropertyConfig
from auditor.errors import UserError
from auditor.finding import Finding, fingerprint
from auditor.replay import integrity as rules
from auditor.replay.text import iso
from auditor.rules.cards import CARD_PATTERN_SQL
from auditor.store import findings, shoe_index
from auditor.store.columns import utc_times
from auditor.store.sql import stream_key

CODES = ("shoe.repeated_order", "shoe.unshuffled")
K, STEP = rules.seed_layout(rules.MIN_REPEAT)
RUN_CARDS_SHOWN = 24  # cards of a run written into the evidence; the length says the rest
# Shoes indexed and probed at once (a table's shoes stay together): a gaming day of 7,000
# tables holds some 125,000 shoes and 49 M cards, whose lists at once exceeded a 2.5 GB limit.
SHOES_A_BATCH = 4096

# The card's code 0..51 (rules.card_code) from any spelling the log format allows.
# A card's code 0-51 (rules.card_code), NULL for a text no card pattern reads.
_CODE_SQL = (
    f"CASE WHEN regexp_full_match(card, '{CARD_PATTERN_SQL}') THEN "
    "((strpos('A23456789TJQK', CASE WHEN length(card) = 3 THEN 'T' "
    "ELSE upper(left(card, 1)) END) - 1) * 4 + strpos('cdhs', lower(right(card, 1))) - 1) END"
)


@dataclass
class ShoeOrder:
    shoe_no: int
    table: str
    shoe: str
    first_ts: dt.datetime | None
    decks: int | None
    shuffle: str | None
    batch: str | None
    codes: list[int]
    rounds: list[int]
    pit: str | None = None
    dealer: str | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        """Earlier first: by the time of the first card, then table and shoe."""
        return (self.first_ts or dt.datetime.max.replace(tzinfo=dt.UTC), self.table, self.shoe)


def integrity_findings(
    con: duckdb.DuckDBPyConnection, run_id: int, config: PropertyConfig,
    finished_only: bool = False,
) -> dict[str, Any]:
    """Index the shoes that got cards since the last pass, search them, record what is found.
    Returns a JSON-ready summary.

    `finished_only` (watch): a shoe still being dealt stays pending until it is over, so that
    a finding live is the finding of the whole shoe, as the batch audit makes it. Without it
    (audit, nightly) every shoe is judged as far as it is logged.

    A transaction a batch (_batches), not one for the pass: DuckDB held some 2 GB beyond its
    memory limit until the end of one transaction over the 10M-round day's 126,702 shoes (4.7
    GB resident under a 2.5 GB limit; 2.5 GB a batch at a time). So the lines read are marked
    and the shoes queued first, in one transaction, and each batch records its shoes done as
    it commits its index rows and findings: a pass cut short leaves the rest pending, for the
    next pass. All three are append-only and sealed (store/shoe_index.py)."""
    con.execute("BEGIN TRANSACTION")
    try:
        shoe_index.adopt(con, run_id)
        touched = _touched(con, run_id)
        waiting = {(t, s) for t, s in con.execute(shoe_index.PENDING_SQL).fetchall()}
        _with_shoes(con, f"INSERT INTO shoe_index_queue SELECT table_id, shoe, {int(run_id)}, "
                         "now() FROM _shoes", [x for x in touched if x not in waiting])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    todo = sorted(waiting.union(touched))
    if finished_only:
        todo = _over(con, todo)
    indexed, found_n, new = 0, 0, 0
    for shoes in _batches(todo):
        con.execute("BEGIN TRANSACTION")
        try:
            # laid: their cards end to end, for both searches; done: what was written
            orders, laid, done = _index(con, shoes)
            found = repeats(con, orders, config, laid) + _unshuffled(con, orders, laid)
            if found:
                _locate(con, found)
                new += findings.record_staged(con, run_id, "integrity_pass_findings", found)
            shoe_index.record_done(con, done, run_id)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        indexed, found_n = indexed + len(orders), found_n + len(found)
    if not todo:
        return {"shoes_indexed": 0, "findings": 0, "findings_new": 0}
    return {"shoes_indexed": indexed, "findings": found_n, "findings_new": new,
            "min_repeat_run": rules.MIN_REPEAT, "min_pack_run": rules.MIN_PACK_RUN}


def _with_shoes(con: duckdb.DuckDBPyConnection, sql: str, shoes: list[tuple[str, str]]) -> None:
    """`sql` over the (table, shoe) `shoes` as the registered table `_shoes`."""
    if not shoes:
        return
    con.register("_shoes", pa.table({
        "table_id": pa.array([t for t, _ in shoes], pa.string()),
        "shoe": pa.array([s for _, s in shoes], pa.string()),
    }))
    try:
        con.execute(sql).fetchall()
    finally:
        con.unregister("_shoes")


# --- the index --------------------------------------------------------------------------------


def _touched(con: duckdb.DuckDBPyConnection, run_id: int) -> list[tuple[str, str]]:
    """(table, shoe) of every shoe with a card on a line not yet indexed; marks the lines."""
    changed = con.execute(
        f"""
        SELECT t.source_id, coalesce(i.last_line, 0), t.last_line FROM source_totals t
        LEFT JOIN ({shoe_index.MARKS_SQL}) i USING (source_id)
        WHERE t.last_line > coalesce(i.last_line, 0)
        """
    ).fetchall()
    if not changed:
        return []
    con.register("_changed_lines", pa.table({
        "source_id": pa.array([c[0] for c in changed], pa.int64()),
        "after": pa.array([c[1] for c in changed], pa.int64()),
        "last_line": pa.array([c[2] for c in changed], pa.int64()),
    }))
    try:
        # The sources as constants too: DuckDB then skips the row groups of every other
        # source, so a year's database is not scanned for one night's lines.
        sources = ", ".join(str(int(c[0])) for c in changed)
        rows = con.execute(
            f"""
            SELECT DISTINCT e.table_id, e.shoe FROM events e
            JOIN _changed_lines c ON e.source_id = c.source_id AND e.line_no > c.after
            WHERE e.source_id IN ({sources})
              AND e.type = 'card' AND e.shoe IS NOT NULL AND e.table_id IS NOT NULL
            ORDER BY ALL
            """
        ).fetchall()
        con.execute(f"INSERT INTO shoe_index_marks SELECT source_id, last_line, {int(run_id)}, "
                    "now() FROM _changed_lines").fetchall()
    finally:
        con.unregister("_changed_lines")
    return [(t, s) for t, s in rows]


def _batches(touched: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The touched shoes (in table order) in runs of whole tables of about SHOES_A_BATCH
    shoes. A batch is probed against the index as the batches before it left it, as a night
    is against the nights before: a repeat between two batches is found once, from the later
    batch, and is the finding of the later shoe whichever batch holds it. A table's shoes
    stay in one batch, so each shoe's previous one is in it or indexed before."""
    out: list[list[tuple[str, str]]] = []
    for shoe in touched:
        if not out or (len(out[-1]) >= SHOES_A_BATCH and out[-1][-1][0] != shoe[0]):
            out.append([])
        out[-1].append(shoe)
    return out


def _sources_of(con: duckdb.DuckDBPyConnection, tables: set[str]) -> str:
    """The ids of the sources that hold these tables' streams, as SQL constants: a read of
    some shoes' events then skips the row groups of every other file (a year of them)."""
    streams = [stream_key("table", t) for t in sorted(tables)]
    ids = [str(int(i)) for (i,) in con.execute(
        "SELECT DISTINCT source_id FROM stream_sources WHERE stream IN (SELECT unnest(?))",
        [streams]).fetchall()]
    return ", ".join(ids) or "NULL"


def _over(con: duckdb.DuckDBPyConnection, shoes: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The shoes that are over (a shoe_end, or the table gone on to another shoe or closed
    after their shoe_start); the others stay pending. A shoe without its shoe_start waits
    for the batch audit."""
    if not shoes:
        return shoes
    con.register("_candidates", pa.table({
        "table_id": pa.array([t for t, _ in shoes], pa.string()),
        "shoe": pa.array([s for _, s in shoes], pa.string()),
    }))
    try:
        # Shoe-level events only (a few a shoe), not the cards: this runs every sweep.
        sources = _sources_of(con, {t for t, _ in shoes})
        over = {(t, s) for t, s in con.execute(
            f"""
            WITH marks AS (
              SELECT table_id, shoe, type, seq FROM events
              WHERE source_id IN ({sources})
                AND type IN ('shoe_start', 'shoe_end', 'table_close')
                AND table_id IN (SELECT table_id FROM _candidates)
            ), started AS (
              SELECT table_id, shoe, min(seq) AS seq FROM marks
              WHERE type = 'shoe_start' GROUP BY ALL
            )
            SELECT c.table_id, c.shoe FROM _candidates c
            WHERE EXISTS (SELECT 1 FROM marks m WHERE m.table_id = c.table_id
                            AND m.type = 'shoe_end' AND m.shoe = c.shoe)
               OR EXISTS (SELECT 1 FROM marks m JOIN started s
                            ON s.table_id = c.table_id AND s.shoe = c.shoe
                          WHERE m.table_id = c.table_id AND m.seq > s.seq
                            AND (m.type = 'table_close' OR m.shoe IS DISTINCT FROM c.shoe))
            """
        ).fetchall()}
    finally:
        con.unregister("_candidates")
    return [x for x in shoes if x in over]


def _index(
    con: duckdb.DuckDBPyConnection, touched: list[tuple[str, str]]
) -> tuple[list[ShoeOrder], tuple[np.ndarray, np.ndarray], pa.Table]:
    """Read the touched shoes' cards in order, replace their rows in the index. Returns the
    shoes, their cards end to end (_laid_out), and the `done` rows of every touched shoe
    with the digests of what was written (store/shoe_index.py). The cards stay columns from
    DuckDB to the index: a night's shoes hold close to a million cards, and a Python int made
    of each, and an Arrow value made again of that, cost more than the read."""
    con.register("_touched_shoes", pa.table({
        "table_id": pa.array([t for t, _ in touched], pa.string()),
        "shoe": pa.array([s for _, s in touched], pa.string()),
    }))
    sources = _sources_of(con, {t for t, _ in touched})
    try:
        got, indexed = _read_orders(con, sources)
        if indexed:  # shoes indexed before, with more cards now: their rows go
            con.execute("DELETE FROM shoe_grams WHERE shoe_no IN (SELECT shoe_no FROM "
                        "shoe_orders SEMI JOIN _touched_shoes USING (table_id, shoe))").fetchall()
            con.execute("DELETE FROM shoe_orders WHERE (table_id, shoe) IN "
                        "(SELECT (table_id, shoe) FROM _touched_shoes)").fetchall()
    finally:
        con.unregister("_touched_shoes")
    # A shoe indexed before keeps its number; a new one takes the next, in (table, shoe) order,
    # past the numbers kept too (their rows were just deleted, not freed).
    numbers = pc.fill_null(got.column("shoe_no"), -1).to_numpy().astype(np.int64)
    no = max(int(con.execute("SELECT coalesce(max(shoe_no), 0) FROM shoe_orders").fetchall()[0][0]),
             int(numbers.max(initial=0))) + 1
    new = numbers < 0
    numbers[new] = np.arange(no, no + int(new.sum()), dtype=np.int64)
    got = got.set_column(0, "shoe_no", pa.array(numbers, pa.int64()))
    codes = got.column("codes").combine_chunks()
    if pc.list_flatten(codes).null_count:  # ingest stores only cards; a row changed since
        _refuse_no_card(got.column("table_id").to_pylist(), got.column("shoe").to_pylist(),
                        codes.to_pylist())
    offsets = np.asarray(codes.offsets, np.int64)
    laid = (np.asarray(pc.list_flatten(codes), np.int64), offsets - offsets[0])
    cols = {name: got.column(name).to_pylist()
            for name in ("table_id", "shoe", "decks", "shuffle", "batch", "codes", "rounds")}
    orders = [ShoeOrder(*row) for row in zip(
        numbers.tolist(), cols["table_id"], cols["shoe"], utc_times(got.column("first_ts")),
        cols["decks"], cols["shuffle"], cols["batch"], cols["codes"], cols["rounds"],
        strict=True)]
    con.register("_orders", got)
    shoe_ix, pos, gram = rules.grams(*laid, K)
    keep = pos % STEP == 0
    kept = (numbers[shoe_ix[keep]], pos[keep], gram[keep])
    done = shoe_index.done_rows(touched, got, shoe_index.grams_digests(*kept))
    con.register("_grams", pa.table({
        "gram": pa.array(kept[2], pa.int64()),
        "shoe_no": pa.array(kept[0], pa.int64()),
        "pos": pa.array(kept[1].astype(np.int32), pa.int32()),
    }))
    try:
        con.execute("INSERT INTO shoe_orders BY NAME SELECT * FROM _orders").fetchall()
        con.execute("INSERT INTO shoe_grams BY NAME SELECT * FROM _grams").fetchall()
    finally:
        con.unregister("_orders")
        con.unregister("_grams")
    return orders, laid, done


def _read_orders(con: duckdb.DuckDBPyConnection, sources: str) -> tuple[pa.Table, bool]:
    """The shoe_orders rows (ORDER_COLUMNS; shoe_no null for a shoe new to the index) of the
    shoes in `_touched_shoes` that have a card, in (table, shoe) order, and whether any of
    those shoes is in the index already. The cards are read flat in (table, shoe, seq) order
    and cut into each shoe's lists here, and each distinct card text is read once: lists
    ordered inside DuckDB's aggregate, and a pattern matched on every card, cost about twice
    the read (docs/benchmarks.md, session 65)."""
    cards = con.sql(
        f"""
        SELECT table_id, shoe, ts, coalesce(round, 0) AS round, card FROM events
        SEMI JOIN _touched_shoes USING (table_id, shoe)
        ANTI JOIN round_exclusions USING (table_id, seq)
        WHERE source_id IN ({sources}) AND type = 'card'
        ORDER BY table_id, shoe, seq
        """
    ).to_arrow_table()
    heads = con.sql(
        f"""
        SELECT t.table_id, t.shoe, o.shoe_no, s.decks, s.shuffle, s.batch
        FROM _touched_shoes t
        LEFT JOIN (
          SELECT table_id, shoe, arg_min(decks, seq) AS decks,
                 arg_min(shuffle, seq) AS shuffle, arg_min(batch, seq) AS batch
          FROM events SEMI JOIN _touched_shoes USING (table_id, shoe)
          WHERE source_id IN ({sources}) AND type = 'shoe_start' GROUP BY ALL
        ) s USING (table_id, shoe)
        LEFT JOIN shoe_orders o USING (table_id, shoe)
        """
    ).to_arrow_table()
    n = cards.num_rows
    tables, shoes = (cards.column(c).combine_chunks() for c in ("table_id", "shoe"))
    moved = np.ones(n, dtype=bool)
    if n > 1:
        moved[1:] = pc.or_(pc.not_equal(tables.slice(1), tables.slice(0, n - 1)),
                           pc.not_equal(shoes.slice(1), shoes.slice(0, n - 1))).to_numpy(
                               zero_copy_only=False)
    starts = np.flatnonzero(moved)
    offsets = pa.array(np.append(starts, n), pa.int32())
    texts = pc.dictionary_encode(cards.column("card").combine_chunks())
    codes = _card_codes(con, texts.dictionary).take(texts.indices)
    ts = cards.column("ts").combine_chunks()
    stamps = pc.fill_null(ts.cast(pa.int64()), np.iinfo(np.int64).max).to_numpy()
    first = (np.minimum.reduceat(stamps, starts) if n
             else np.zeros(0, np.int64))
    first_ts = pa.array(first, pa.int64(), mask=first == np.iinfo(np.int64).max).cast(ts.type)
    keys = list(zip(heads.column("table_id").to_pylist(), heads.column("shoe").to_pylist(),
                    strict=True))
    at = {k: i for i, k in enumerate(keys)}
    row = pa.array([at[k] for k in zip(tables.take(pa.array(starts)).to_pylist(),
                                       shoes.take(pa.array(starts)).to_pylist(), strict=True)],
                   pa.int64())
    columns = {
        "shoe_no": heads.column("shoe_no").take(row),
        "table_id": tables.take(pa.array(starts)),
        "shoe": shoes.take(pa.array(starts)),
        "first_ts": first_ts,
        **{c: heads.column(c).take(row) for c in ("decks", "shuffle", "batch")},
        "codes": pa.ListArray.from_arrays(offsets, codes),
        "rounds": pa.ListArray.from_arrays(offsets, cards.column("round").combine_chunks()),
    }
    indexed = bool(pc.any(pc.is_valid(heads.column("shoe_no"))).as_py())
    return pa.table(columns), indexed


def _card_codes(con: duckdb.DuckDBPyConnection, texts: pa.Array) -> pa.Array:
    """Each card text's code (uint8, null where no card pattern reads it), by _CODE_SQL."""
    con.register("_card_texts", pa.table({
        "i": pa.array(np.arange(len(texts)), pa.int64()), "card": texts}))
    try:
        got = con.sql(f"SELECT ({_CODE_SQL})::UTINYINT AS code FROM _card_texts "
                      "ORDER BY i").to_arrow_table()
    finally:
        con.unregister("_card_texts")
    return got.column("code").combine_chunks()


def _refuse_no_card(tables: list[str], shoes: list[str], codes: list[list[int | None]]) -> None:
    """The first shoe with a card event no card code reads, by name and place."""
    for table, shoe, cards in zip(tables, shoes, codes, strict=True):
        if None in cards:
            raise UserError(
                f"table {table} shoe {shoe}: the events table holds a card event whose card "
                f"is no card (card {cards.index(None) + 1} of the shoe), so it was changed "
                "after ingest; run `bacc-audit verify` to name the row")


def _laid_out(orders: list[ShoeOrder]) -> tuple[np.ndarray, np.ndarray]:
    """The shoes' codes end to end, and each shoe's first index then the total."""
    offsets = np.cumsum([0, *(len(o.codes) for o in orders)])
    codes = np.fromiter(chain.from_iterable(o.codes for o in orders), np.int64,
                        count=int(offsets[-1]))
    return codes, offsets


# --- shoe.repeated_order --------------------------------------------------------------------


def repeats(
    con: duckdb.DuckDBPyConnection, orders: list[ShoeOrder], config: PropertyConfig,
    laid: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[Finding]:
    """Probe the index with every k-gram of the touched shoes; extend each seed hit along its
    diagonal to the whole run; a run of MIN_REPEAT or more is a finding of the later shoe.
    `laid`: _laid_out(orders), if the caller has it."""
    if not orders:
        return []
    shoe_ix, pos, gram = rules.grams(*(laid or _laid_out(orders)), K)
    nos = np.array([o.shoe_no for o in orders], np.int64)
    con.register("_probe", pa.table({
        "gram": pa.array(gram, pa.int64()),
        "shoe_no": pa.array(nos[shoe_ix] if len(shoe_ix) else np.zeros(0, np.int64),
                            pa.int64()),
        "pos": pa.array(pos, pa.int64()),
    }))
    try:
        hits = con.execute(
            """
            SELECT p.shoe_no, g.shoe_no, min(p.pos), p.pos - g.pos AS diagonal
            FROM _probe p JOIN shoe_grams g USING (gram)
            WHERE g.shoe_no <> p.shoe_no
            GROUP BY p.shoe_no, g.shoe_no, diagonal
            """
        ).fetchall()
    finally:
        con.unregister("_probe")
    if not hits:
        return []
    by_no = {o.shoe_no: o for o in orders}
    missing = sorted({b for _, b, _, _ in hits} - by_no.keys())
    by_no.update(_orders(con, missing))
    runs: dict[tuple[int, int], set[tuple[int, int, int]]] = defaultdict(set)
    for a_no, b_no, a_pos, diagonal in hits:
        a, b = by_no[a_no], by_no[b_no]
        start_a, start_b, length = rules.extend(a.codes, b.codes, int(a_pos),
                                                int(a_pos - diagonal))
        if length < rules.MIN_REPEAT:
            continue
        # One key per unordered pair, the earlier shoe first.
        if a.key < b.key:
            runs[(a_no, b_no)].add((start_a, start_b, length))
        else:
            runs[(b_no, a_no)].add((start_b, start_a, length))
    zone = config.zone_for(con) if runs else dt.UTC  # a scan of events: only when needed
    return [_repeat_finding(by_no[e], by_no[later], sorted(found, key=lambda r: -r[2]), zone)
            for (e, later), found in sorted(runs.items())]


def _orders(con: duckdb.DuckDBPyConnection, nos: list[int]) -> dict[int, ShoeOrder]:
    if not nos:
        return {}
    rows = con.execute(
        "SELECT shoe_no, table_id, shoe, first_ts, decks, shuffle, batch, codes, rounds "
        f"FROM shoe_orders WHERE shoe_no IN ({', '.join(str(int(n)) for n in nos)})"
    ).fetchall()
    return {int(r[0]): ShoeOrder(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6],
                                 [int(c) for c in r[7]], [int(x) for x in r[8]])
            for r in rows}


def _repeat_finding(earlier: ShoeOrder, later: ShoeOrder,
                    runs: list[tuple[int, int, int]], zone: dt.tzinfo) -> Finding:
    start_e, start_l, length = runs[0]
    cards = [rules.card_text(c) for c in later.codes[start_l:start_l + length]]
    same_table = earlier.table == later.table
    where = (f"shoe {earlier.shoe}" if same_table
             else f"shoe {earlier.shoe} at table {earlier.table}")
    when = (f" at {earlier.first_ts.astimezone(zone):%Y-%m-%d %H:%M}" if earlier.first_ts
            else "")
    message = (
        f"Shoe {later.shoe} deals, from its card {start_l + 1} (round "
        f"{later.rounds[start_l]}), {length} cards in the order {where} dealt them{when} from "
        f"its card {start_e + 1} (round {earlier.rounds[start_e]}); chance repeats a run of "
        f"{rules.MIN_REPEAT} cards less than once in a hundred years at 100 tables."
    )
    return Finding(
        code="shoe.repeated_order",
        seq=None, source=None,  # set by _locate: the run's first card in this shoe
        message=message,
        expected=f"no run of {rules.MIN_REPEAT} cards or more of an earlier shoe, in order",
        observed={"run_cards": length, "earlier_table": earlier.table,
                  "earlier_shoe": earlier.shoe},
        fingerprint=fingerprint("shoe.repeated_order", later.table, later.shoe, earlier.table,
                                earlier.shoe),
        table=later.table, shoe=later.shoe, round=None,
        evidence={
            "run_cards": length,
            "min_run": rules.MIN_REPEAT,
            "chance_per_year_at_100_tables": rules.chance_text(length, rules.chance_repeats),
            "this_shoe": _side(later, start_l, length),
            "earlier_shoe": _side(earlier, start_e, length),
            "cards": cards[:RUN_CARDS_SHOWN],
            "other_runs": [{"this_from_card": s_l + 1, "earlier_from_card": s_e + 1,
                            "cards": n} for s_e, s_l, n in runs[1:]],
        },
        # the run's first card is where the finding shows; _locate sets ts, seq, source
        ts=later.first_ts,
    )


def _side(o: ShoeOrder, start: int, length: int) -> dict[str, Any]:
    return {"table": o.table, "shoe": o.shoe,
            "first_card_at": iso(o.first_ts) if o.first_ts else None,
            "cards_seen": len(o.codes),
            "from_card": start + 1, "to_card": start + length,
            "rounds": [o.rounds[start], o.rounds[start + length - 1]]}


# --- shoe.unshuffled --------------------------------------------------------------------------


def _unshuffled(con: duckdb.DuckDBPyConnection, orders: list[ShoeOrder],
                laid: tuple[np.ndarray, np.ndarray]) -> list[Finding]:
    """Both tests over all the touched shoes at once (numpy), then a finding per shoe
    flagged, in the shoes' order: the pack runs first, then the kept pairs."""
    runs = rules.pack_runs_of_shoes(*laid)
    out = [_pack_finding(o, runs[i]) for i, o in enumerate(orders) if i in runs]
    pairs = _pairs_to_test(con, orders)
    tests = rules.kept_pairs_of_shoes(
        [np.asarray(previous.codes, np.int64) for previous, _ in pairs],
        [np.asarray(o.codes, np.int64) for _, o in pairs],
        [o.decks or previous.decks or 8 for previous, o in pairs],
    )
    for (previous, o), test in zip(pairs, tests, strict=True):
        if test.flagged:
            out.append(_pairs_finding(previous, o, test))
    return out


def _pack_finding(o: ShoeOrder, runs: list[rules.Run]) -> Finding:
    first = max(runs, key=lambda r: r.length)
    cards = [rules.card_text(c) for c in o.codes[first.start:first.start + first.length]]
    way = "up" if first.direction > 0 else "down"
    return Finding(
        code="shoe.unshuffled", seq=None, source=None,
        message=(
            f"Shoe {o.shoe} deals {first.length} cards in a new pack's order from its card "
            f"{first.start + 1} (round {o.rounds[first.start]}): {' '.join(cards)}; chance "
            f"gives a run of {rules.MIN_PACK_RUN} less than once in a hundred years at 100 "
            "tables."
        ),
        expected=f"no run of {rules.MIN_PACK_RUN} cards or more in a new pack's order",
        observed={"run_cards": first.length, "cards": cards},
        fingerprint=fingerprint("shoe.unshuffled", o.table, o.shoe, "pack_order"),
        table=o.table, shoe=o.shoe, round=None, ts=o.first_ts,
        evidence={
            "test": "pack_order", "min_run": rules.MIN_PACK_RUN,
            "chance_per_year_at_100_tables": rules.chance_text(first.length,
                                                               rules.pack_run_chance),
            "runs": [{"from_card": r.start + 1, "cards": r.length,
                      "rounds": [o.rounds[r.start], o.rounds[r.start + r.length - 1]],
                      "ranks": "ace to king" if r.direction > 0 else "king to ace",
                      "dealt": [rules.card_text(c) for c in o.codes[r.start:r.start + r.length]]}
                     for r in runs],
            "first_run_goes": way,
            "from_card": first.start + 1,
            "cards_seen": len(o.codes),
        },
    )


def _pairs_finding(previous: ShoeOrder, o: ShoeOrder, test: rules.PairTest) -> Finding:
    return Finding(
        code="shoe.unshuffled", seq=None, source=None,
        message=(
            f"Shoe {o.shoe} keeps {test.kept} of its {test.pairs} neighbouring pairs from the "
            f"order of shoe {previous.shoe}, where a shuffle leaves {test.expected:.1f} "
            f"± {test.sd:.1f} by chance (z = {test.z:.1f}, limit {rules.PAIR_Z:g})."
        ),
        expected={"kept_pairs_at_most": round(test.expected + rules.PAIR_Z * test.sd, 1)},
        observed={"kept_pairs": test.kept, "previous_shoe": previous.shoe},
        fingerprint=fingerprint("shoe.unshuffled", o.table, o.shoe, "previous_order",
                                previous.shoe),
        table=o.table, shoe=o.shoe, round=None, ts=o.first_ts,
        evidence={
            "test": "previous_order", "previous_shoe": previous.shoe,
            "previous_batch": previous.batch, "pairs": test.pairs, "kept": test.kept,
            "expected": round(test.expected, 2), "sd": round(test.sd, 2),
            "z": round(test.z, 2), "z_limit": rules.PAIR_Z,
            "cards_seen": len(o.codes), "previous_cards_seen": len(previous.codes),
        },
    )


def _pairs_to_test(
    con: duckdb.DuckDBPyConnection, orders: list[ShoeOrder]
) -> list[tuple[ShoeOrder, ShoeOrder]]:
    """(previous, shoe) for every touched shoe and every shoe whose previous one was
    touched. The previous shoe is the table's last one before it; with an automated shuffler
    whose batches alternate, the last one of the same batch (the cards that went into the
    shuffler then)."""
    if not orders:
        return []
    tables = sorted({o.table for o in orders})
    rows = con.execute(
        "SELECT shoe_no, table_id, shoe, first_ts, batch, shuffle FROM shoe_orders "
        f"WHERE table_id IN ({', '.join('?' for _ in tables)}) "
        "ORDER BY table_id, first_ts NULLS LAST, shoe",
        tables,
    ).fetchall()
    previous_of: dict[int, int] = {}
    last: dict[tuple[str, str | None], int] = {}
    for no, table, _shoe, _ts, batch, shuffle in rows:
        lane = (table, batch if shuffle == "automated" else None)
        if lane in last:
            previous_of[int(no)] = last[lane]
        last[lane] = int(no)
    touched = {o.shoe_no for o in orders}
    wanted = {no: prev for no, prev in previous_of.items() if no in touched or prev in touched}
    by_no = {o.shoe_no: o for o in orders}
    by_no.update(_orders(con, sorted({*wanted, *wanted.values()} - by_no.keys())))
    return [(by_no[prev], by_no[no]) for no, prev in sorted(wanted.items())]


# --- where each finding shows -----------------------------------------------------------------


def _locate(con: duckdb.DuckDBPyConnection, found: list[Finding]) -> None:
    """Each finding's seq, time, source and dealer: its first card of the run (or the shoe's
    first card), its shoe's shoe_start dealer, its table's pit. Few findings: one query each."""
    for i, f in enumerate(found):
        ev = f.evidence or {}
        nth = (ev.get("this_shoe", {}).get("from_card") or ev.get("from_card") or 1)
        row = con.execute(
            """
            SELECT e.seq, e.ts, s.path || ':' || e.line_no,
                   (SELECT arg_min(dealer, seq) FROM events WHERE type = 'shoe_start'
                      AND table_id = e.table_id AND shoe = e.shoe),
                   (SELECT arg_max(pit, seq) FROM events WHERE type = 'table_open'
                      AND table_id = e.table_id AND seq <= e.seq)
            FROM events e JOIN sources s ON s.id = e.source_id
            ANTI JOIN round_exclusions x ON x.table_id = e.table_id AND x.seq = e.seq
            WHERE e.type = 'card' AND e.table_id = ? AND e.shoe = ?
            ORDER BY e.seq LIMIT 1 OFFSET ?
            """,
            [f.table, f.shoe, int(nth) - 1],
        ).fetchall()
        if not row:
            continue
        seq, ts, source, dealer, pit = row[0]
        found[i] = replace(f, seq=seq, ts=ts, source=source, dealer=dealer, pit=pit)
