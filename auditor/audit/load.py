"""The table pass's edge with the database: it reads the events, notices and rounds that the
pure checks of `auditor.replay` (procedures, tables, shoes, irregular) judge, as their small
frozen values.

Kept out of `replay/` so that replay stays pure functions over plain values; every query here
filters to one batch of tables (`db.table_batches`) where it can, so a day of millions of
rounds is read a batch at a time.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from functools import lru_cache

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from auditor.errors import UserError
from auditor.ingest.log_findings import AHEAD_SQL
from auditor.replay.irregular import Irregularity
from auditor.replay.log_ends import StreamEvent, TableStream
from auditor.replay.procedures import Notice, TableEvent, Timeline, declared_at
from auditor.replay.tables import (
    MIN_UNDECLARED_ROUNDS,
    RoundOrder,
    order_facts,
    paid_round,
    round_kind,
    run_spans,
)
from auditor.replay.text import iso
from auditor.rules.cards import parse_card
from auditor.store import notices as hand
from auditor.store import stamps
from auditor.store.db import one, table_range_sql
from auditor.store.sql import stream_key
from auditor.store.stamps import FIRST_INSTANT, LAST_INSTANT

# --- the stream's order and delivery (issue 28) -------------------------------------------

# An event `e`'s ordered time (auditor.audit.streams): ORDERED_TS, with ORDERED_JOIN.
ORDERED_JOIN = "LEFT JOIN ordered_times o ON o.stream = e.stream AND o.seq = e.seq"
ORDERED_TS = "coalesce(o.ts, e.ts)"
# When an event `e` was delivered: the ingest of the piece of its file that holds its line
# (source_extents; a file loaded whole is one piece), DELIVERED_AT with DELIVERY_JOIN.
DELIVERY_JOIN = (
    "ASOF LEFT JOIN source_extents x ON x.source_id = e.source_id AND e.line_no >= x.first_line"
)
DELIVERED_AT = "x.ingested_at"


def load_change_audits(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, int], dt.datetime]:
    """(table, seq) -> when the procedure change was first judged against its notices."""
    return {
        (t, s): at for t, s, at in con.execute(
            "SELECT table_id, seq, min(audited_at) FROM change_audits GROUP BY ALL"
        ).fetchall()
    }


# --- procedures and notices ---------------------------------------------------------------

def load_table_events(con: duckdb.DuckDBPyConnection) -> list[TableEvent]:
    """Opens, changes and closes at their ordered times (a change takes effect no later than
    the next event of its stream, whatever it is stamped)."""
    rows = con.execute(
        f"""
        SELECT e.table_id, e.seq, {ORDERED_TS}, e.type, s.path || ':' || e.line_no, e.pit,
               e.game, e.jurisdiction, e.variant, e.procedure
        FROM events e JOIN sources s ON s.id = e.source_id {ORDERED_JOIN}
        WHERE e.type IN ('table_open', 'procedure_change', 'table_close')
        ORDER BY e.table_id, e.seq
        """
    ).fetchall()
    return [TableEvent(*r) for r in rows]


def load_last_ts(con: duckdb.DuckDBPyConnection) -> dict[str, dt.datetime]:
    """Each table's last event, at its ordered time."""
    return dict(
        con.execute(
            f"SELECT e.table_id, max({ORDERED_TS}) FROM events e {ORDERED_JOIN} "
            "WHERE e.table_id IS NOT NULL GROUP BY ALL"
        ).fetchall()
    )


def _tables_list(text: str | None) -> tuple[str, ...] | None:
    """A notices row's tables: a JSON list or a comma list; empty means the whole pit."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    items = json.loads(text) if text.startswith("[") else text.split(",")
    names = tuple(str(t).strip() for t in items if str(t).strip())
    return names or None


def load_notices(con: duckdb.DuckDBPyConnection) -> list[Notice]:
    """Notices from procedure_notice events and from the `notices` table (entered by hand).
    A logged notice is given at its ordered time in the pit's stream, with its own stamp kept
    where that differs, and when its line was delivered."""
    rows = con.execute(
        f"""
        SELECT e.pit, e.seq, e.tables, e.procedure, e.effective, e.recipient, e.written,
               {ORDERED_TS}, s.path || ':' || e.line_no, e.ts, {DELIVERED_AT}
        FROM events e JOIN sources s ON s.id = e.source_id {ORDERED_JOIN} {DELIVERY_JOIN}
        WHERE e.type = 'procedure_notice'
        ORDER BY e.pit, e.seq
        """
    ).fetchall()
    out = [
        Notice(f"{stream_key('pit', pit)}#{seq}", pit, tuple(tables) if tables else None, procedure,
               effective, recipient, bool(written), ts, source,
               stamped if stamped != ts else None, delivered)
        for (pit, seq, tables, procedure, effective, recipient, written, ts, source, stamped,
             delivered) in rows
    ]
    for n in hand.list_notices(con, withdrawn=False):
        out.append(
            Notice(f"hand:{n.id}", n.pit, _tables_list(n.tables), n.procedure, n.effective,
                   n.recipient, n.written, n.given_at,
                   f"entered by hand by {n.entered_by} at "
                   f"{iso(n.entered_at.replace(microsecond=0))} (notice {n.id})")
        )
    return out


def _procedure_tables(timeline: Timeline, tables_in: tuple[str, str] | None) -> list[str]:
    return sorted(
        t for t in timeline.declared
        if t in timeline.rules and (tables_in is None or tables_in[0] <= t <= tables_in[1])
    )


def round_keys(keys: Sequence[tuple[str, str, int]]) -> pa.Table:
    """(table, shoe, round) keys as a table to register and join a query's rounds to."""
    return pa.table({
        "table_id": pa.array([k[0] for k in keys], pa.string()),
        "shoe": pa.array([k[1] for k in keys], pa.string()),
        "round": pa.array([k[2] for k in keys], pa.int64()),
    })


def _rounds_sql(tables_in: tuple[str, str] | None) -> str:
    """Rounds (first seq, void or not) of the tables listed in the query's one parameter."""
    return f"""
          SELECT table_id, shoe, round, min(seq) AS first_seq, bool_or(type = 'void') AS void
          FROM events
          WHERE shoe IS NOT NULL AND round IS NOT NULL AND {table_range_sql(tables_in)}
            AND table_id IN (SELECT unnest(?::VARCHAR[]))
          GROUP BY ALL"""


def load_rounds(
    con: duckdb.DuckDBPyConnection, tables_in: tuple[str, str] | None = None
) -> pa.Table:
    """Every round (table_id, shoe, round) of the tables in `tables_in` (one of
    db.table_batches, or all) as columns: `first_seq_all` and `void` over all its events,
    where the payment orders read the declared procedure; `first_seq`, `last_seq` and `cards`
    without the cutting card, the span the shoe checks count (`spanned` false when the
    cutting card is all the round has). One aggregate over the events serves both passes,
    the costliest read of the table pass.

    And where the stream puts it (replay/shoe_labels.py): `current` and `current_seq`, the
    table's last shoe_start before the round, `current_ended` whether that shoe had ended;
    `misfiled` 'not_started' when no shoe_start of the round's own shoe came before it,
    'reopened' when the table started another shoe since; `counted_in`, the shoe its cards
    count in (the shoe being dealt for a misfiled round, else its own); `split_at`, where a
    round begun in its own shoe goes on after another shoe's shoe_start (`split_to`): a round
    number of the shoe left, reused for events of the next. In order of (table_id,
    counted_in, first_seq). Seq gaps are not looked at here (load_shoes)."""
    these = table_range_sql(tables_in)
    return con.sql(
        f"""
        WITH r AS (
          SELECT table_id, shoe, round, min(seq) AS first_seq_all, max(seq) AS last_seq_all,
                 bool_or(type = 'void') AS void,
                 count(*) FILTER (type NOT IN ('cut_card')) > 0 AS spanned,
                 min(seq) FILTER (type NOT IN ('cut_card')) AS first_seq,
                 max(seq) FILTER (type NOT IN ('cut_card')) AS last_seq,
                 count(*) FILTER (type = 'card') AS cards
          FROM events ANTI JOIN round_exclusions USING (table_id, seq)
          WHERE shoe IS NOT NULL AND round IS NOT NULL AND {these}
          GROUP BY ALL
        ), starts AS (
          SELECT table_id, shoe, seq FROM events WHERE type = 'shoe_start' AND {these}
        ), ends AS (
          SELECT table_id, shoe, seq FROM events WHERE type = 'shoe_end' AND {these}
        ), spans AS (
          SELECT table_id, shoe, min(first_seq_all) AS lo, max(last_seq_all) AS hi
          FROM r GROUP BY ALL
        ), opened AS (
          SELECT s.*, (SELECT max(t.seq) FROM starts t WHERE t.table_id = s.table_id
                         AND t.shoe = s.shoe AND t.seq < s.lo) AS start_seq
          FROM spans s
        ), odd AS (
          -- The shoes whose rounds may lie outside their shoe: not started before their first
          -- round, or another shoe started between that start and their last round; only
          -- their rounds are placed one by one.
          SELECT table_id, shoe FROM opened s
          WHERE start_seq IS NULL
             OR EXISTS (SELECT 1 FROM starts t WHERE t.table_id = s.table_id
                          AND t.shoe <> s.shoe AND t.seq > s.start_seq AND t.seq < s.hi)
        ), placed AS (
          SELECT r.table_id, r.shoe, r.round, c.shoe AS current, c.seq AS current_seq,
                 coalesce(e.seq > c.seq, false) AS current_ended,
                 CASE WHEN o.seq IS NULL THEN 'not_started'
                      WHEN c.seq > o.seq THEN 'reopened' END AS misfiled,
                 CASE WHEN o.seq = c.seq AND t.seq > c.seq AND t.shoe <> r.shoe
                      THEN t.seq END AS split_at,
                 t.shoe AS split_to
          FROM (SELECT * FROM r SEMI JOIN odd USING (table_id, shoe)) r
          ASOF LEFT JOIN starts c ON r.table_id = c.table_id AND r.first_seq_all > c.seq
          ASOF LEFT JOIN starts o ON r.table_id = o.table_id AND r.shoe = o.shoe
            AND r.first_seq_all > o.seq
          ASOF LEFT JOIN ends e ON c.table_id = e.table_id AND c.shoe = e.shoe
            AND r.first_seq_all > e.seq
          ASOF LEFT JOIN starts t ON r.table_id = t.table_id AND r.last_seq_all > t.seq
        )
        SELECT r.*, p.* EXCLUDE (table_id, shoe, round),
               CASE WHEN p.misfiled IS NOT NULL AND p.current IS NOT NULL
                         AND NOT p.current_ended THEN p.current ELSE r.shoe END AS counted_in
        FROM r LEFT JOIN placed p USING (table_id, shoe, round)
        ORDER BY table_id, counted_in, first_seq
        """
    ).to_arrow_table()


_NO_ORDERS = pa.schema([("table_id", pa.string()), ("shoe", pa.string()), ("round", pa.int64()),
                        ("first_seq_all", pa.int64()), ("void_stood", pa.bool_()),
                        ("first_seq", pa.int64()), ("void", pa.bool_()), ("moves", pa.string())])


def load_orders(
    con: duckdb.DuckDBPyConnection,
    timeline: Timeline,
    tables_in: tuple[str, str] | None = None,
    rounds: pa.Table | None = None,
) -> pa.Table:
    """Every round with a payment or vigorish at the tables with procedures (of the tables in
    `tables_in`), one row each, its order as text (`moves`: 'pay 5 vig 5 ...', the events
    left out of the round aside), and the round read two ways: `first_seq_all` and
    `void_stood` as it stood (load_rounds: without the events left out of it), `first_seq`
    and `void` over all the events that name it. `rounds`: load_rounds of the same tables,
    if already read.

    One read serves tables_with_other_orders (the round as it stood) and load_round_orders
    (over all its events): the orders are the costliest part of both, and the events left
    out of rounds are few, so the second reading is the first amended by them."""
    tables = _procedure_tables(timeline, tables_in)
    if not tables:
        return _NO_ORDERS.empty_table()
    these_e = table_range_sql(tables_in, "e.table_id")
    con.register("batch_rounds", load_rounds(con, tables_in) if rounds is None else rounds)
    try:
        got = con.sql(
            f"""
            WITH paid AS (
              SELECT e.table_id, e.shoe, e.round, r.first_seq_all, r.void AS void_stood,
                     string_agg(e.type || ' ' || coalesce(e.seat, 0), ' ' ORDER BY e.seq)
                       AS moves
              FROM events e JOIN batch_rounds r USING (table_id, shoe, round)
              ANTI JOIN round_exclusions x ON x.table_id = e.table_id AND x.seq = e.seq
              WHERE e.type IN ('pay', 'vig') AND {these_e}
                AND e.table_id IN (SELECT unnest(?::VARCHAR[]))
              GROUP BY ALL
            ), left_out AS (
              SELECT e.table_id, e.shoe, e.round, min(e.seq) AS first_seq,
                     bool_or(e.type = 'void') AS void
              FROM events e SEMI JOIN round_exclusions x
                ON x.table_id = e.table_id AND x.seq = e.seq
              WHERE e.shoe IS NOT NULL AND e.round IS NOT NULL AND {these_e}
                AND e.table_id IN (SELECT unnest(?::VARCHAR[]))
              GROUP BY ALL
            )
            SELECT p.table_id, p.shoe, p.round, p.first_seq_all, p.void_stood,
                   least(p.first_seq_all, o.first_seq) AS first_seq,
                   p.void_stood OR coalesce(o.void, false) AS void, p.moves
            FROM paid p LEFT JOIN left_out o USING (table_id, shoe, round)
            """,
            params=[tables, tables],
        ).to_arrow_table()
    finally:
        con.unregister("batch_rounds")
    return got


def tables_with_other_orders(
    timeline: Timeline,
    vig_charged: Callable[[str], bool | None],
    orders: pa.Table,
) -> tuple[list[str], int]:
    """The tables where an undeclared run can start, and the rounds with payments seen
    (not void as they stood), from load_orders.

    A run starts only at an informative round whose order fits some procedure but not the
    declared one; at any other table `undeclared_runs` finds nothing. A table repeats a few
    orders under a few declared procedures, and each (order, declared) pair is judged once.
    """
    got = orders.filter(~pc.field("void_stood")).select(
        ["table_id", "first_seq_all", "moves"]).rename_columns(
        ["table_id", "first_seq", "moves"]).sort_by("table_id")
    suspects: set[str] = set()
    rounds = 0
    tables_at, first_seq, m_idx, moves = _by_table(got)
    for table, lo, hi in tables_at:
        charged = vig_charged(table)
        if charged is None:
            continue
        rounds += hi - lo
        declared = declared_at(timeline.declared[table], first_seq[lo:hi])
        known = declared >= 0
        seen = np.unique(declared[known] * len(moves) + m_idx[lo:hi][known])
        for d, m in (divmod(k, len(moves)) for k in seen.tolist()):
            fits, informative = order_facts(_pairs(moves[m]), charged)
            if informative and fits and d not in fits:
                suspects.add(table)
                break
    return sorted(suspects), rounds


def _by_table(got: pa.Table) -> tuple[list[tuple[str, int, int]], np.ndarray, np.ndarray,
                                      list[str]]:
    """Rows of one round each (table_id, first_seq, moves; in table order) as (table, first
    row, end row) per table, the first seqs, each row's index in the distinct orders, and
    those orders: a table repeats a few orders, each parsed and judged once."""
    if not got.num_rows:
        return [], np.array([], np.int64), np.array([], np.int64), []
    table_col = pc.dictionary_encode(got.column("table_id").combine_chunks())
    moves_col = pc.dictionary_encode(got.column("moves").combine_chunks())
    t_idx = table_col.indices.to_numpy()
    names = table_col.dictionary.to_pylist()
    starts = np.flatnonzero(np.diff(t_idx, prepend=-1)).tolist()
    at = [(names[t_idx[lo]], lo, hi)
          for lo, hi in zip(starts, [*starts[1:], got.num_rows], strict=True)]
    return (at, got.column("first_seq").to_numpy(), moves_col.indices.to_numpy(),
            moves_col.dictionary.to_pylist())


@lru_cache(maxsize=4096)
def _pairs(moves: str) -> tuple[tuple[str, int], ...]:
    """'pay 1 vig 1 pay 5' -> (('pay', 1), ('vig', 1), ('pay', 5))."""
    words = moves.split(" ")
    return tuple((words[i], int(words[i + 1])) for i in range(0, len(words), 2))


def load_round_orders(
    con: duckdb.DuckDBPyConnection,
    timeline: Timeline,
    vig_charged: Callable[[str], bool | None],
    tables_in: tuple[str, str] | None = None,
    only: Sequence[str] | None = None,
    min_rounds: int = MIN_UNDECLARED_ROUNDS,
    orders: pa.Table | None = None,
) -> list[list[RoundOrder]]:
    """The non-void rounds' payout orders where an undeclared run can lie, at tables with
    procedures (of the tables in `tables_in`, one of db.table_batches, or of all; and of `only`
    if given): one list per span of replay.tables.run_spans, in seq order.

    Two reads: every round's order as text (load_orders, or `orders` if already read; one row
    per round, judged once per distinct order and declared procedure), then the times and
    sources of the spans' rounds alone. A year's history has millions of rounds and a handful
    of spans; a RoundOrder for each round was most of the table pass (issue 32).

    `vig_charged(table)` says whether the table's variant charges vigorish (None: unknown
    variant, the table is skipped).
    """
    tables = _procedure_tables(timeline, tables_in)
    if only is not None:
        tables = sorted(set(tables) & set(only))
    if not tables:
        return []
    if orders is None:
        orders = load_orders(con, timeline, tables_in)
    these_e = table_range_sql(tables_in, "e.table_id")
    paid = f"""
        ANTI JOIN round_exclusions x ON x.table_id = e.table_id AND x.seq = e.seq
        WHERE e.type IN ('pay', 'vig') AND NOT r.void AND {these_e}
        GROUP BY e.table_id, e.shoe, e.round, r.first_seq"""
    got = orders.filter(~pc.field("void") & pc.field("table_id").isin(tables))
    got = got.select(["table_id", "shoe", "round", "first_seq", "moves"])
    # run_spans needs each table's rounds in seq order: sorted here, not left to the plan
    got = got.sort_by([("table_id", "ascending"), ("first_seq", "ascending")])
    picked, declared_of = _in_spans(got, timeline, vig_charged, min_rounds)
    if not picked:
        return []
    con.register("span_rounds", round_keys([k for span in picked for k in span]))
    try:
        rows = con.execute(
            f"""
            WITH r AS (SELECT * FROM ({_rounds_sql(tables_in)})
                       SEMI JOIN span_rounds USING (table_id, shoe, round))
            SELECT e.table_id, e.shoe, e.round, r.first_seq,
                   list(e.type ORDER BY e.seq), list(coalesce(e.seat, 0) ORDER BY e.seq),
                   min(e.seq), arg_min(e.ts, e.seq),
                   arg_min(s.path || ':' || e.line_no, e.seq)
            FROM events e JOIN r USING (table_id, shoe, round)
            JOIN sources s ON s.id = e.source_id {paid}
            """,
            [tables],
        ).fetchall()
    finally:
        con.unregister("span_rounds")
    by_key = {(t, shoe, rnd): row for t, shoe, rnd, *row in rows}
    spans: list[list[RoundOrder]] = []
    for span in picked:
        span_orders = []
        for key in span:
            first_seq, kinds, seats, seq, ts, source = by_key[key]
            d = declared_of[key]
            span_orders.append(paid_round(key[0], key[1], key[2], first_seq,
                                     tuple(zip(kinds, seats, strict=True)), (seq, ts, source),
                                     d, bool(vig_charged(key[0]))))
        spans.append(span_orders)
    return spans


def _in_spans(
    got: pa.Table,
    timeline: Timeline,
    vig_charged: Callable[[str], bool | None],
    min_rounds: int,
) -> tuple[list[list[tuple[str, str, int]]], dict[tuple[str, str, int], int | None]]:
    """The rounds of `got` (table_id, shoe, round, first_seq, moves; by table and first_seq)
    in run_spans' spans (each a list of keys in order), and their declared procedures."""
    picked: list[list[tuple[str, str, int]]] = []
    declared_of: dict[tuple[str, str, int], int | None] = {}
    tables_at, first_seq, m_idx, orders = _by_table(got)
    for table, lo, hi in tables_at:
        charged = vig_charged(table)
        if charged is None:
            continue
        declared = declared_at(timeline.declared[table], first_seq[lo:hi])
        # each (declared, order) pair of the table judged once
        seen, which = np.unique((declared + 1) * len(orders) + m_idx[lo:hi],
                                return_inverse=True)
        kinds = np.array(
            [round_kind(None if d == 0 else d - 1, *order_facts(_pairs(orders[m]), charged))
             for d, m in (divmod(k, len(orders)) for k in seen.tolist())], np.int8)[which]
        spans = run_spans(declared, kinds, min_rounds)
        if not spans:
            continue
        shoes = got.column("shoe").slice(lo, hi - lo).to_pylist()
        rounds = got.column("round").slice(lo, hi - lo).to_pylist()
        for a, b in spans:
            keys = [(table, shoes[i], rounds[i]) for i in range(a, b)]
            picked.append(keys)
            for i, k in zip(range(a, b), keys, strict=True):
                declared_of[k] = None if declared[i] < 0 else int(declared[i])
    return picked, declared_of


# --- where table streams stop ---------------------------------------------------------------


def refuse_impossible_stamps(con: duckdb.DuckDBPyConnection) -> None:
    """Ingest quarantines a line stamped outside the years 1 to 9999 in UTC (no Python
    datetime holds such an instant, so the audit could not read it back); a database loaded
    by an earlier bacc-audit, or edited since, may still hold one. It is said as a sentence
    before any work, not met as an internal error in the middle of it. So is an event
    without its seq (edited since: ingest quarantines a line without one). (The row groups'
    statistics answer these for nearly every group without reading it.)"""
    row = one(
        con,
        f"""
        SELECT coalesce(f.path, 'source ' || e.source_id), e.line_no,
               replace(e.stream, ':', ' '), e.seq, e.type, CAST(e.ts AS VARCHAR)
        FROM events e LEFT JOIN source_files f ON f.id = e.source_id
        WHERE e.ts > {LAST_INSTANT} OR e.ts < {FIRST_INSTANT}
        LIMIT 1
        """,
    )
    if row is not None:
        path, line, stream, seq, kind, ts = row
        raise UserError(
            f"{path}:{line}: {stream} seq {seq} ({kind}) is stamped {ts}, outside the years 1 "
            "to 9999 in UTC, which no audit can read: this database was loaded by an earlier "
            "bacc-audit (ingest now quarantines such lines) or edited since (bacc-audit "
            "verify says which); ingest its logs into a new database"
        )
    stamps.refuse_impossible_stamps(con)  # and in every other time column
    row = one(
        con,
        """
        SELECT coalesce(f.path, 'source ' || e.source_id), e.line_no, e.table_id, e.type
        FROM events e LEFT JOIN source_files f ON f.id = e.source_id
        WHERE e.seq IS NULL LIMIT 1
        """,
    )
    if row is not None:  # its stream's order, and so its times, cannot be worked out
        path, line, table, kind = row
        raise UserError(
            f"{path}:{line}: the events table holds a {kind} event of table {table} without "
            "its seq, which ingest never stores, so the row was changed after ingest; run "
            "`bacc-audit verify` to compare it with its line"
        )


def load_latest_ts(con: duckdb.DuckDBPyConnection) -> dt.datetime | None:
    """The latest event in the database (of any table or pit) stamped in time: how far the
    logs reach, which closes gaming days. An event stamped more than the clocks' tolerance
    after its own delivery (log.future_stamp) does not count: one lying line stamped next
    year would otherwise close today's day, and rounds still being dealt would be judged.

    The latest stamps are checked against their deliveries a few at a time, from the
    latest down: nearly always the first is in time."""
    take = 64
    while True:
        # Each piece's lines are first_line..last_line: a range join of these few rows costs
        # less than DELIVERY_JOIN's ASOF over every piece.
        [(latest, checked)] = con.execute(
            f"""
            WITH e AS (SELECT source_id, line_no, ts FROM events WHERE ts IS NOT NULL
                       ORDER BY ts DESC LIMIT {take})
            SELECT max(e.ts) FILTER (x.ingested_at IS NULL
                                     OR e.ts <= x.ingested_at + {AHEAD_SQL}),
                   count(*)
            FROM e LEFT JOIN source_extents x ON x.source_id = e.source_id
              AND e.line_no BETWEEN x.first_line AND x.last_line
            """
        ).fetchall()
        if latest is not None or checked < take:
            return latest
        take *= 8


def load_streams(
    con: duckdb.DuckDBPyConnection, tables_in: tuple[str, str] | None = None
) -> list[TableStream]:
    """Each table's opens and closes (with the event before each open), its last event and
    its seq gaps (of the tables in `tables_in`, one of db.table_batches, or of all), then the
    few events kept read in full, at their ordered times (a last line stamped next year does
    not make the log go on until then).

    A table whose events are one stream numbered without a gap (a stream never repeats a seq)
    has its neighbours' seqs by arithmetic; a window of seq numbers, the costly part, runs
    over the other tables only."""
    these = table_range_sql(tables_in)
    rows = con.execute(
        f"""
        WITH stats AS (
          SELECT table_id, min(seq) AS lo, max(seq) AS hi,
                 coalesce(count(seq) = count(*) AND count(*) = max(seq) - min(seq) + 1
                          AND min(stream) = max(stream), false) AS whole
          FROM events WHERE table_id IS NOT NULL AND {these} GROUP BY ALL
        ), whole AS (
          SELECT e.table_id, e.seq, e.type,
                 CASE WHEN e.seq > st.lo THEN e.seq - 1 END AS p_seq,
                 CASE WHEN e.seq < st.hi THEN e.seq + 1 END AS n_seq
          FROM events e JOIN stats st USING (table_id)
          WHERE st.whole AND (e.type IN ('table_open', 'table_close') OR e.seq = st.hi)
            AND {table_range_sql(tables_in, "e.table_id")}
        ), w AS (
          SELECT table_id, seq, type, lag(seq) OVER x AS p_seq, lead(seq) OVER x AS n_seq
          FROM events WHERE table_id IS NOT NULL AND {these}
            AND table_id IN (SELECT table_id FROM stats WHERE NOT whole)
          WINDOW x AS (PARTITION BY table_id ORDER BY seq)
        ), keep AS (
          SELECT * FROM w
          WHERE type IN ('table_open', 'table_close') OR n_seq IS NULL OR seq > p_seq + 1
          UNION ALL
          SELECT * FROM whole
        )
        SELECT k.table_id, k.seq, {ORDERED_TS}, k.type, s.path || ':' || e.line_no, e.shoe,
               e.round, e.pit, k.p_seq, coalesce(po.ts, p.ts), p.type,
               ps.path || ':' || p.line_no, p.shoe, p.round, k.n_seq
        FROM keep k
        JOIN events e ON e.table_id = k.table_id AND e.seq = k.seq
        JOIN sources s ON s.id = e.source_id
        {ORDERED_JOIN}
        LEFT JOIN events p ON k.type = 'table_open' AND p.table_id = k.table_id
          AND p.seq = k.p_seq AND {table_range_sql(tables_in, "p.table_id")}
        LEFT JOIN ordered_times po ON po.stream = p.stream AND po.seq = p.seq
        LEFT JOIN sources ps ON ps.id = p.source_id
        WHERE {table_range_sql(tables_in, "e.table_id")}
        ORDER BY k.table_id, k.seq
        """
    ).fetchall()
    out: list[TableStream] = []
    marks: list[StreamEvent] = []
    before: dict[int, StreamEvent] = {}
    gaps: list[tuple[int, int]] = []
    pit: str | None = None
    for (table, seq, ts, type_, source, shoe, rnd, pit_, p_seq, p_ts, p_type, p_source,
         p_shoe, p_round, n_seq) in rows:
        event = StreamEvent(table, seq, ts, type_, source, shoe, rnd)
        if type_ == "table_open":
            pit = pit_ if pit_ is not None else pit
            if p_ts is not None:
                before[seq] = StreamEvent(table, p_seq, p_ts, p_type, p_source, p_shoe, p_round)
        if type_ in ("table_open", "table_close"):
            marks.append(event)
        if p_seq is not None and seq > p_seq + 1:
            gaps.append((p_seq, seq))
        if n_seq is None:
            out.append(TableStream(table, pit, tuple(marks), before, event, tuple(gaps)))
            marks, before, gaps, pit = [], {}, [], None
    return out


# --- irregularities ----------------------------------------------------------------------


def load_irregularities(con: duckdb.DuckDBPyConnection) -> list[Irregularity]:
    """Every irregularity event with its round's cards and the next round's first card."""
    rows = con.execute(
        """
        WITH irr AS (
          SELECT e.table_id, e.shoe, e.round, e.seq, e.ts, s.path || ':' || e.line_no AS source,
                 e.kind, e.disposition, e.card
          FROM events e JOIN sources s ON s.id = e.source_id
          WHERE e.type = 'irregularity'
        ), cards AS (
          SELECT table_id, shoe, round, list([to_hand, card] ORDER BY seq) AS cards,
                 arg_min(card, seq) AS first_card, min(seq) AS first_seq
          FROM events
          WHERE type = 'card' AND (table_id, shoe) IN (SELECT (table_id, shoe) FROM irr)
          GROUP BY ALL
        ), pits AS (
          SELECT table_id, arg_max(pit, seq) AS pit FROM events WHERE type = 'table_open'
          GROUP BY ALL
        )
        SELECT i.table_id, p.pit, i.shoe, i.round, i.seq, i.ts, i.source, i.kind,
               i.disposition, i.card, c.cards,
               (SELECT n.first_card FROM cards n WHERE n.table_id = i.table_id
                  AND n.shoe = i.shoe AND n.round > i.round ORDER BY n.round LIMIT 1)
        FROM irr i LEFT JOIN cards c USING (table_id, shoe, round)
        LEFT JOIN pits p USING (table_id)
        ORDER BY i.table_id, i.seq
        """
    ).fetchall()

    def norm(card: str | None) -> str | None:
        return None if card is None else str(parse_card(card))

    return [
        Irregularity(table, pit, shoe, rnd, seq, ts, source, kind, disposition, norm(card),
                     tuple((to, str(parse_card(c))) for to, c in cards or ()),
                     norm(next_first))
        for (table, pit, shoe, rnd, seq, ts, source, kind, disposition, card, cards,
             next_first) in rows
    ]
