"""The table pass's edge with the database: it reads the events, notices and rounds that the
pure checks of `auditor.replay` (procedures, tables, shoes, irregular) judge, as their small
frozen values.

Kept out of `replay/` so that replay stays pure functions over plain values; every query here
filters to one batch of tables (`db.table_batches`) where it can, so a day of millions of
rounds is read a batch at a time.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from auditor.replay.irregular import Irregularity
from auditor.replay.log_ends import StreamEvent, TableStream
from auditor.replay.procedures import Notice, TableEvent, Timeline, declared_at
from auditor.replay.shoes import (
    Excess,
    Rounds,
    Shoe,
    ShoeEvent,
    ShoeRules,
    cited_rounds,
    opening_seq,
)
from auditor.replay.tables import RoundOrder, order_facts, round_order
from auditor.replay.text import iso
from auditor.rules.cards import parse_card
from auditor.store import notices as hand
from auditor.store.db import table_range_sql
from auditor.store.sql import stream_key

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
    db.table_batches, or all) as columns, in seq order per shoe: `first_seq_all` and `void`
    over all its events, where the payment orders read the declared procedure; `first_seq`,
    `last_seq` and `cards` without the cutting card, the span the shoe checks count
    (`spanned` false when the cutting card is all the round has). One aggregate over the
    events serves both passes, the costliest read of the table pass."""
    return con.sql(
        f"""
        SELECT table_id, shoe, round, min(seq) AS first_seq_all,
               bool_or(type = 'void') AS void,
               count(*) FILTER (type NOT IN ('cut_card')) > 0 AS spanned,
               min(seq) FILTER (type NOT IN ('cut_card')) AS first_seq,
               max(seq) FILTER (type NOT IN ('cut_card')) AS last_seq,
               count(*) FILTER (type = 'card') AS cards
        FROM events ANTI JOIN round_exclusions USING (table_id, seq)
        WHERE shoe IS NOT NULL AND round IS NOT NULL AND {table_range_sql(tables_in)}
        GROUP BY ALL ORDER BY table_id, shoe, first_seq
        """
    ).to_arrow_table()


def tables_with_other_orders(
    con: duckdb.DuckDBPyConnection,
    timeline: Timeline,
    vig_charged: Callable[[str], bool | None],
    tables_in: tuple[str, str] | None = None,
    rounds: pa.Table | None = None,
) -> tuple[list[str], int]:
    """The tables where an undeclared run can start, and the rounds with payments seen.

    A run starts only at an informative round whose order fits some procedure but not the
    declared one; at any other table `undeclared_runs` finds nothing. One row per round with
    its order as text (no times, no sources), read as columns: a table repeats a few orders
    under a few declared procedures, and each (order, declared) pair is judged once.
    `rounds`: load_rounds of the same tables, if already read.
    """
    tables = _procedure_tables(timeline, tables_in)
    if not tables:
        return [], 0
    these_e = table_range_sql(tables_in, "e.table_id")
    con.register("batch_rounds", load_rounds(con, tables_in) if rounds is None else rounds)
    try:
        got = con.sql(
            f"""
            SELECT e.table_id, r.first_seq_all AS first_seq,
                   string_agg(e.type || ' ' || coalesce(e.seat, 0), ' ' ORDER BY e.seq) AS moves
            FROM events e JOIN batch_rounds r USING (table_id, shoe, round)
            ANTI JOIN round_exclusions x ON x.table_id = e.table_id AND x.seq = e.seq
            WHERE e.type IN ('pay', 'vig') AND NOT r.void AND {these_e}
              AND e.table_id IN (SELECT unnest(?::VARCHAR[]))
            GROUP BY e.table_id, e.shoe, e.round, r.first_seq_all
            ORDER BY e.table_id
            """,
            params=[tables],
        ).to_arrow_table()
    finally:
        con.unregister("batch_rounds")
    if not got.num_rows:
        return [], 0
    table_col = pc.dictionary_encode(got.column("table_id").combine_chunks())
    moves_col = pc.dictionary_encode(got.column("moves").combine_chunks())
    t_idx = table_col.indices.to_numpy()
    m_idx = moves_col.indices.to_numpy()
    first_seq = got.column("first_seq").to_numpy()
    names, orders = table_col.dictionary.to_pylist(), moves_col.dictionary.to_pylist()
    starts = np.flatnonzero(np.diff(t_idx, prepend=-1))
    pairs: dict[int, tuple[tuple[str, int], ...]] = {}
    suspects: set[str] = set()
    rounds = 0
    for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), got.num_rows], strict=True):
        table = names[t_idx[lo]]
        charged = vig_charged(table)
        if charged is None:
            continue
        rounds += hi - lo
        declared = declared_at(timeline.declared[table], first_seq[lo:hi])
        known = declared >= 0
        seen = np.unique(declared[known] * len(orders) + m_idx[lo:hi][known])
        for d, m in (divmod(k, len(orders)) for k in seen.tolist()):
            if m not in pairs:
                words = orders[m].split(" ")
                pairs[m] = tuple((words[i], int(words[i + 1])) for i in range(0, len(words), 2))
            fits, informative = order_facts(pairs[m], charged)
            if informative and fits and d not in fits:
                suspects.add(table)
                break
    return sorted(suspects), rounds


def load_round_orders(
    con: duckdb.DuckDBPyConnection,
    timeline: Timeline,
    vig_charged: Callable[[str], bool | None],
    tables_in: tuple[str, str] | None = None,
    only: Sequence[str] | None = None,
) -> list[RoundOrder]:
    """Each non-void round's payout order at tables with procedures, in seq order (of the
    tables in `tables_in`, one of db.table_batches, or of all; and of `only` if given).

    `vig_charged(table)` says whether the table's variant charges vigorish (None: unknown
    variant, the table is skipped).
    """
    tables = _procedure_tables(timeline, tables_in)
    if only is not None:
        tables = sorted(set(tables) & set(only))
    if not tables:
        return []
    these_e = table_range_sql(tables_in, "e.table_id")
    rows = con.execute(
        f"""
        WITH r AS ({_rounds_sql(tables_in)})
        SELECT e.table_id, e.shoe, e.round, r.first_seq, e.type, e.seat, e.seq, e.ts,
               s.path || ':' || e.line_no
        FROM events e JOIN r USING (table_id, shoe, round)
        JOIN sources s ON s.id = e.source_id
        ANTI JOIN round_exclusions x ON x.table_id = e.table_id AND x.seq = e.seq
        WHERE e.type IN ('pay', 'vig') AND NOT r.void AND {these_e}
        ORDER BY e.table_id, r.first_seq, e.seq
        """,
        [tables],
    ).fetchall()
    keys: list[tuple[str, str, int, int]] = []  # (table, shoe, round, first seq)
    moves: list[list[tuple[str, int, int, dt.datetime, str]]] = []
    for table, shoe, rnd, first_seq, kind, seat, seq, ts, source in rows:
        k = (table, shoe, rnd, first_seq)
        if not keys or k != keys[-1]:
            keys.append(k)
            moves.append([])
        moves[-1].append((kind, seat or 0, seq, ts, source))
    out: list[RoundOrder] = []
    for table, group in itertools.groupby(range(len(keys)), key=lambda i: keys[i][0]):
        charged = vig_charged(table)
        if charged is None:
            continue
        at = list(group)
        declared = declared_at(timeline.declared[table], np.array([keys[i][3] for i in at]))
        for i, d in zip(at, declared.tolist(), strict=True):
            _, shoe, rnd, first_seq = keys[i]
            r = round_order(table, shoe, rnd, first_seq, moves[i], None if d < 0 else d, charged)
            if r is not None:
                out.append(r)
    return out


# --- shoes ---------------------------------------------------------------------------------

_NORM_CARD = (
    "(CASE WHEN length(c) = 3 THEN 'T' ELSE upper(left(c, 1)) END || lower(right(c, 1)))"
)


@lru_cache(maxsize=1024)
def _card_text(card: str) -> str:
    return str(parse_card(card))


def load_shoes(
    con: duckdb.DuckDBPyConnection,
    rules_for: Callable[[str | None, str | None], ShoeRules | None],
    tables_in: tuple[str, str] | None = None,
    rounds: pa.Table | None = None,
) -> list[Shoe]:
    """Every (table, shoe) with its shoe-level events, round spans, rules and opening (of the
    tables in `tables_in`, one of db.table_batches, or of all; `rounds`: load_rounds of
    them, if already read)."""
    these = table_range_sql(tables_in, "e.table_id")
    rows = con.execute(
        f"""
        WITH t AS (
          SELECT e.table_id, e.seq, e.ts, e.type, s.path || ':' || e.line_no AS source,
                 e.shoe, e.pit, e.game, e.jurisdiction, e.decks, e.shuffle, e.batch, e.cards,
                 e.card, e.burned, e.round, e.remaining
          FROM events e JOIN sources s ON s.id = e.source_id
          WHERE e.type IN ('table_open', 'table_close', 'shoe_start', 'burn', 'face_up_in_shoe',
                           'cut_card', 'shoe_end') AND {these}
        )
        SELECT *, lead(type) OVER (PARTITION BY table_id ORDER BY seq) AS next_type
        FROM t ORDER BY table_id, seq
        """
    ).fetchall()
    shoes: dict[tuple[str, str], Shoe] = {}
    order: list[tuple[str, str]] = []
    opening: dict[str, tuple[int, str | None, str | None, str | None]] = {}
    for (table, seq, ts, type_, source, shoe_id, pit, game, jurisdiction, decks, shuffle,
         batch, cards, card, burned, rnd, remaining, next_type) in rows:
        if type_ == "table_open":
            n = opening.get(table, (0, None, None, None))[0] + 1
            opening[table] = (n, pit, game, jurisdiction)
            continue
        if type_ == "table_close" or shoe_id is None:
            continue
        key = (table, shoe_id)
        if key not in shoes:
            session, pit_, game_, jur = opening.get(table, (0, None, None, None))
            shoes[key] = Shoe(table, shoe_id, pit_, jur, session,
                              rules=rules_for(jur, game_))
            order.append(key)
        s = shoes[key]
        ev = ShoeEvent(table, shoe_id, seq, ts, type_, source, decks, shuffle, batch,
                       tuple(map(_card_text, cards or ())),
                       None if card is None else _card_text(card),
                       tuple(map(_card_text, burned or ())), rnd, remaining, next_type)
        if type_ == "shoe_start" and s.start is None:
            s.start = ev
        elif type_ == "burn":
            s.burns.append(ev)
        elif type_ == "face_up_in_shoe":
            s.face_ups.append(ev)
        elif type_ == "cut_card" and s.cut is None:
            s.cut = ev
        elif type_ == "shoe_end" and s.end is None:
            s.end = ev
    # Rounds as columns, a shoe's rounds together in seq order; a shoe known only by its rounds
    # comes after the others of its table here, and the sort at the end puts it in its place.
    spans = load_rounds(con, tables_in) if rounds is None else rounds
    spans = spans.filter(pc.field("spanned"))
    if spans.num_rows:
        cols = {n: spans.column(n).to_numpy() for n in ("round", "first_seq", "last_seq",
                                                         "cards")}
        cols["void"] = spans.column("void").fill_null(False).to_numpy()
        tables = pc.dictionary_encode(spans.column("table_id").combine_chunks())
        shoe_ids = pc.dictionary_encode(spans.column("shoe").combine_chunks())
        t_idx = tables.indices.fill_null(-1).to_numpy()
        s_idx = shoe_ids.indices.fill_null(-1).to_numpy()
        starts = np.flatnonzero(np.diff(t_idx, prepend=-2) | np.diff(s_idx, prepend=-2))
        names, shoe_names = tables.dictionary.to_pylist(), shoe_ids.dictionary.to_pylist()
        for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), spans.num_rows], strict=True):
            key = (names[t_idx[lo]], shoe_names[s_idx[lo]])
            if key not in shoes:
                shoes[key] = Shoe(*key)
                order.append(key)
            shoes[key].rounds = Rounds(**{n: c[lo:hi] for n, c in cols.items()})
        _cite_rounds(con, shoes.values(), these)
    _mark_gaps(con, shoes, tables_in)
    return [shoes[k] for k in sorted(order, key=lambda k: (k[0], opening_seq(shoes[k])))]


def _cite_rounds(con: duckdb.DuckDBPyConnection, shoes: Iterable[Shoe], these: str) -> None:
    """The time and source of the rounds a finding can cite (shoes.cited_rounds), read for
    those rounds only."""
    where: dict[tuple[str, str, int], tuple[Shoe, int]] = {}
    for s in shoes:
        for i in cited_rounds(s):
            where[(s.table, s.shoe, int(s.rounds.round[i]))] = (s, i)
    if not where:
        return
    con.register("cited_rounds", pa.table({
        "table_id": pa.array([k[0] for k in where], pa.string()),
        "shoe": pa.array([k[1] for k in where], pa.string()),
        "round": pa.array([k[2] for k in where], pa.int64()),
    }))
    try:
        rows = con.execute(
            f"""
            SELECT e.table_id, e.shoe, e.round, min(e.ts),
                   arg_min(s.path || ':' || e.line_no, e.seq)
            FROM events e
            JOIN cited_rounds c ON e.table_id IS NOT DISTINCT FROM c.table_id
              AND e.shoe = c.shoe AND e.round = c.round
            JOIN sources s ON s.id = e.source_id
            WHERE e.type NOT IN ('cut_card') AND {these}
            GROUP BY ALL
            """
        ).fetchall()
    finally:
        con.unregister("cited_rounds")
    for table, shoe_id, rnd, ts, source in rows:
        s, i = where[(table, shoe_id, rnd)]
        s.rounds.detail[i] = (ts, source)


def _mark_gaps(
    con: duckdb.DuckDBPyConnection,
    shoes: Mapping[tuple[str, str], Shoe],
    tables_in: tuple[str, str] | None,
) -> None:
    gaps: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for table, prev, seq in _seq_gaps(con, "stream", tables_in):
        gaps[table].append((prev, seq))
    for (table, _), s in shoes.items():
        lo = opening_seq(s)
        ends = [e.seq for e in (s.end, s.cut) if e is not None]
        if len(s.rounds):
            ends.append(int(s.rounds.last_seq.max()))
        hi = max(ends, default=lo)
        s.gap = any(prev < hi and seq > lo for prev, seq in gaps[table])


def _seq_gaps(
    con: duckdb.DuckDBPyConnection, by: str, tables_in: tuple[str, str] | None
) -> list[tuple[str, int, int]]:
    """(table, seq before, seq) wherever seq skips numbers in a partition (`by`: stream or
    table_id) of the events of tables. A stream never repeats a seq (ingest refuses that), so a
    partition of one stream whose seqs number as many as its range has no gap: the window over
    the events, the costly part, runs only over the others."""
    these = table_range_sql(tables_in)
    broken = [
        part for part, ok in con.execute(
            f"""
            SELECT {by}, count(seq) = count(*) AND count(*) = max(seq) - min(seq) + 1
                   AND min(stream) = max(stream)
            FROM events WHERE table_id IS NOT NULL AND {these} GROUP BY ALL
            """
        ).fetchall()
        if not ok
    ]
    if not broken:
        return []
    only = ("true" if None in broken
            else f"{by} IN (SELECT unnest(?::VARCHAR[]))")
    return [
        (t, p, q) for t, p, q in con.execute(
            f"""
            SELECT table_id, prev, seq FROM (
              SELECT table_id, seq, lag(seq) OVER (PARTITION BY {by} ORDER BY seq) AS prev
              FROM events WHERE table_id IS NOT NULL AND {these} AND {only}
            ) WHERE seq > prev + 1
            """,
            [] if None in broken else [broken],
        ).fetchall()
    ]


def load_composition(
    con: duckdb.DuckDBPyConnection,
    tables_in: tuple[str, str] | None = None,
) -> tuple[dict[tuple[str, str], list[Excess]], dict[tuple[str, str], int]]:
    """Per (table, shoe): the cards seen more often than its decks allow, and the number of
    cards dealt, burned or found face up.

    Cards are counted per shoe as logged, and spellings are merged on those counts, not on
    every card; only the shoes with a card too many are read card by card."""
    these = table_range_sql(tables_in)
    decks_sql = f"""
        SELECT table_id, shoe, arg_min(decks, seq) AS decks FROM events
        WHERE type = 'shoe_start' AND {these} GROUP BY ALL"""
    used: dict[tuple[str, str], int] = {}
    over: list[tuple[str, str]] = []
    for table, shoe, n, too_many in con.execute(
        f"""
        WITH logged AS (
          SELECT table_id, shoe, card AS c, count(*) AS n
          FROM events ANTI JOIN round_exclusions USING (table_id, seq)
          WHERE type = 'card' AND shoe IS NOT NULL AND {these} GROUP BY ALL
          UNION ALL
          SELECT table_id, shoe, c, count(*) FROM (
            SELECT table_id, shoe,
                   unnest(CASE WHEN type = 'burn' THEN cards
                               ELSE list_prepend(card, coalesce(burned, []::VARCHAR[])) END) AS c
            FROM events
            WHERE type IN ('burn', 'face_up_in_shoe') AND shoe IS NOT NULL AND {these}
          ) GROUP BY ALL
        ), counted AS (
          SELECT table_id, shoe, {_NORM_CARD} AS card, sum(n) AS n FROM logged GROUP BY ALL
        )
        SELECT c.table_id, c.shoe, sum(c.n), coalesce(bool_or(c.n > d.decks), false)
        FROM counted c LEFT JOIN ({decks_sql}) d USING (table_id, shoe)
        GROUP BY ALL
        """
    ).fetchall():
        used[(table, shoe)] = int(n)
        if too_many:
            over.append((table, shoe))
    if not over:
        return {}, used
    con.register("shoes_over", pa.table({
        "table_id": pa.array([t for t, _ in over], pa.string()),
        "shoe": pa.array([s for _, s in over], pa.string()),
    }))
    try:
        rows = con.execute(
            f"""
            WITH shoe_cards AS (
              SELECT table_id, shoe, seq, ts, source_id, line_no, {_NORM_CARD} AS card FROM (
                SELECT e.table_id, e.shoe, e.seq, e.ts, e.source_id, e.line_no,
                       unnest(CASE WHEN e.type = 'card' THEN [e.card]
                                   WHEN e.type = 'burn' THEN e.cards
                                   ELSE list_prepend(e.card, coalesce(e.burned, []::VARCHAR[]))
                              END) AS c
                FROM events e JOIN shoes_over o USING (table_id, shoe)
                ANTI JOIN round_exclusions x ON x.table_id = e.table_id AND x.seq = e.seq
                WHERE e.type IN ('card', 'burn', 'face_up_in_shoe') AND {these}
              )
            )
            SELECT c.table_id, c.shoe, c.card, count(*),
                   list({{'seq': c.seq, 'ts': c.ts, 'source_id': c.source_id,
                          'line': c.line_no}} ORDER BY c.seq),
                   d.decks
            FROM shoe_cards c JOIN ({decks_sql}) d USING (table_id, shoe)
            GROUP BY c.table_id, c.shoe, c.card, d.decks
            HAVING count(*) > d.decks
            ORDER BY c.table_id, c.shoe, c.card
            """
        ).fetchall()
    finally:
        con.unregister("shoes_over")
    excess: dict[tuple[str, str], list[Excess]] = defaultdict(list)
    for table, shoe, card, n, seqs, decks in rows:
        at = seqs[decks]
        path = con.execute("SELECT path FROM sources WHERE id = ?",
                           [at["source_id"]]).fetchall()[0][0]
        excess[(table, shoe)].append(Excess(card, n, at["seq"], at["ts"],
                                            f"{path}:{at['line']}",
                                            tuple(x["seq"] for x in seqs)))
    return dict(excess), used


def load_last_round_cards(
    con: duckdb.DuckDBPyConnection, shoes: Sequence[Shoe]
) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """The (to, card) pairs of the last round of each shoe dealt to its last card."""
    wanted = [
        (s.table, s.shoe, int(s.rounds.round[-1]))
        for s in shoes
        if len(s.rounds) and s.size is not None and not s.gap and s.consumed >= s.size
    ]
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for table, shoe, rnd in wanted:
        rows = con.execute(
            "SELECT to_hand, card FROM events ANTI JOIN round_exclusions USING (table_id, seq) "
            "WHERE type = 'card' AND table_id = ? AND shoe = ? AND round = ? ORDER BY seq",
            [table, shoe, rnd],
        ).fetchall()
        out[(table, shoe)] = [(to, str(parse_card(c))) for to, c in rows]
    return out


# --- where table streams stop ---------------------------------------------------------------


def load_latest_ts(con: duckdb.DuckDBPyConnection) -> dt.datetime | None:
    """The latest event in the database (of any table or pit): how far the logs reach."""
    return con.execute("SELECT max(ts) FROM events").fetchall()[0][0]


def load_streams(
    con: duckdb.DuckDBPyConnection, tables_in: tuple[str, str] | None = None
) -> list[TableStream]:
    """Each table's opens and closes (with the event before each open), its last event and
    its seq gaps (of the tables in `tables_in`, one of db.table_batches, or of all), then the
    few events kept read in full.

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
        SELECT k.table_id, k.seq, e.ts, k.type, s.path || ':' || e.line_no, e.shoe, e.round,
               e.pit, k.p_seq, p.ts, p.type, ps.path || ':' || p.line_no, p.shoe, p.round,
               k.n_seq
        FROM keep k
        JOIN events e ON e.table_id = k.table_id AND e.seq = k.seq
        JOIN sources s ON s.id = e.source_id
        LEFT JOIN events p ON k.type = 'table_open' AND p.table_id = k.table_id
          AND p.seq = k.p_seq AND {table_range_sql(tables_in, "p.table_id")}
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
