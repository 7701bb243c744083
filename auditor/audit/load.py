"""The table pass's edge with the database: it reads the events, notices and rounds that the
pure checks of `auditor.replay` (tables, shoes, irregular) judge, as their small frozen values.

Kept out of `replay/` so that replay stays pure functions over plain values; every query here
filters to one batch of tables (`db.table_batches`) where it can, so a day of millions of
rounds is read a batch at a time.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

import duckdb

from auditor.replay.irregular import Irregularity
from auditor.replay.shoes import (
    Excess,
    RoundSpan,
    Shoe,
    ShoeEvent,
    ShoeRules,
    StreamEvent,
    TableStream,
    opening_seq,
)
from auditor.replay.tables import (
    Notice,
    RoundOrder,
    TableEvent,
    Timeline,
    declared_at,
    iso,
    order_facts,
    round_order,
)
from auditor.rules.cards import parse_card
from auditor.store import notices as hand
from auditor.store.db import table_range_sql

# --- procedures and notices ---------------------------------------------------------------

def load_table_events(con: duckdb.DuckDBPyConnection) -> list[TableEvent]:
    rows = con.execute(
        """
        SELECT e.table_id, e.seq, e.ts, e.type, s.path || ':' || e.line_no, e.pit, e.game,
               e.jurisdiction, e.variant, e.procedure
        FROM events e JOIN sources s ON s.id = e.source_id
        WHERE e.type IN ('table_open', 'procedure_change', 'table_close')
        ORDER BY e.table_id, e.seq
        """
    ).fetchall()
    return [TableEvent(*r) for r in rows]


def load_last_ts(con: duckdb.DuckDBPyConnection) -> dict[str, dt.datetime]:
    return dict(
        con.execute(
            "SELECT table_id, max(ts) FROM events WHERE table_id IS NOT NULL GROUP BY ALL"
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
    """Notices from procedure_notice events and from the `notices` table (entered by hand)."""
    rows = con.execute(
        """
        SELECT e.pit, e.seq, e.tables, e.procedure, e.effective, e.recipient, e.written, e.ts,
               s.path || ':' || e.line_no
        FROM events e JOIN sources s ON s.id = e.source_id
        WHERE e.type = 'procedure_notice'
        ORDER BY e.pit, e.seq
        """
    ).fetchall()
    out = [
        Notice(f"pit:{pit}#{seq}", pit, tuple(tables) if tables else None, procedure,
               effective, recipient, bool(written), ts, source)
        for pit, seq, tables, procedure, effective, recipient, written, ts, source in rows
    ]
    for n in hand.list_notices(con):
        out.append(
            Notice(f"hand:{n.id}", n.pit, _tables_list(n.tables), n.procedure, n.effective,
                   n.recipient, n.written, n.given_at,
                   f"entered by hand by {n.entered_by} at {iso(n.entered_at)} (notice {n.id})")
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


def tables_with_other_orders(
    con: duckdb.DuckDBPyConnection,
    timeline: Timeline,
    vig_charged: Callable[[str], bool | None],
    tables_in: tuple[str, str] | None = None,
) -> tuple[list[str], int]:
    """The tables where an undeclared run can start, and the rounds with payments seen.

    A run starts only at an informative round whose order fits some procedure but not the
    declared one; at any other table `undeclared_runs` finds nothing. One row per round with
    its order as text (no times, no sources) keeps this cheap for a day of millions of rounds.
    """
    tables = _procedure_tables(timeline, tables_in)
    if not tables:
        return [], 0
    these_e = table_range_sql(tables_in, "e.table_id")
    suspects: set[str] = set()
    rounds = 0
    reader = con.sql(
        f"""
        WITH r AS ({_rounds_sql(tables_in)})
        SELECT e.table_id, r.first_seq,
               string_agg(e.type || ' ' || coalesce(e.seat, 0), ' ' ORDER BY e.seq) AS moves
        FROM events e JOIN r USING (table_id, shoe, round)
        WHERE e.type IN ('pay', 'vig') AND NOT r.void AND {these_e}
        GROUP BY e.table_id, e.shoe, e.round, r.first_seq
        """,
        params=[tables],
    ).to_arrow_reader(1 << 16)
    for batch in reader:
        cols = batch.to_pydict()
        for table, first_seq, moves in zip(
            cols["table_id"], cols["first_seq"], cols["moves"], strict=True
        ):
            charged = vig_charged(table)
            if charged is None:
                continue
            rounds += 1
            if table in suspects:
                continue
            words = moves.split(" ")
            pairs = tuple((words[i], int(words[i + 1])) for i in range(0, len(words), 2))
            fits, informative = order_facts(pairs, charged)
            declared = declared_at(timeline.declared[table], first_seq, None)
            if informative and fits and declared is not None and declared not in fits:
                suspects.add(table)
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
        WHERE e.type IN ('pay', 'vig') AND NOT r.void AND {these_e}
        ORDER BY e.table_id, r.first_seq, e.seq
        """,
        [tables],
    ).fetchall()
    out: list[RoundOrder] = []
    key: tuple | None = None
    moves: list[tuple[str, int, int, dt.datetime, str]] = []

    def flush() -> None:
        if key is None:
            return
        table, shoe, rnd, first_seq = key
        charged = vig_charged(table)
        if charged is None:
            return
        declared = declared_at(timeline.declared[table], first_seq, None)
        r = round_order(table, shoe, rnd, first_seq, moves, declared, charged)
        if r is not None:
            out.append(r)

    for table, shoe, rnd, first_seq, kind, seat, seq, ts, source in rows:
        k = (table, shoe, rnd, first_seq)
        if k != key:
            flush()
            key, moves = k, []
        moves.append((kind, seat or 0, seq, ts, source))
    flush()
    return out


# --- shoes ---------------------------------------------------------------------------------

_NORM_CARD = (
    "(CASE WHEN length(c) = 3 THEN 'T' ELSE upper(left(c, 1)) END || lower(right(c, 1)))"
)


def load_shoes(
    con: duckdb.DuckDBPyConnection,
    rules_for: Callable[[str | None, str | None], ShoeRules | None],
    tables_in: tuple[str, str] | None = None,
) -> list[Shoe]:
    """Every (table, shoe) with its shoe-level events, round spans, rules and opening (of the
    tables in `tables_in`, one of db.table_batches, or of all)."""
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
                       tuple(str(parse_card(c)) for c in cards or ()),
                       None if card is None else str(parse_card(card)),
                       tuple(str(parse_card(c)) for c in burned or ()), rnd, remaining,
                       next_type)
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
    for table, shoe_id, rnd, first_seq, last_seq, ts, source, cards, void in con.execute(
        f"""
        SELECT e.table_id, e.shoe, e.round, min(e.seq), max(e.seq), min(e.ts),
               arg_min(s.path || ':' || e.line_no, e.seq),
               count(*) FILTER (e.type = 'card'), bool_or(e.type = 'void')
        FROM events e JOIN sources s ON s.id = e.source_id
        WHERE e.shoe IS NOT NULL AND e.round IS NOT NULL
          AND e.type NOT IN ('cut_card') AND {these}
        GROUP BY ALL ORDER BY e.table_id, min(e.seq)
        """
    ).fetchall():
        key = (table, shoe_id)
        if key not in shoes:
            shoes[key] = Shoe(table, shoe_id)
            order.append(key)
        shoes[key].rounds.append(RoundSpan(rnd, first_seq, last_seq, ts, source, cards, void))
    _mark_gaps(con, shoes, tables_in)
    return [shoes[k] for k in sorted(order, key=lambda k: (k[0], opening_seq(shoes[k])))]


def _mark_gaps(
    con: duckdb.DuckDBPyConnection,
    shoes: Mapping[tuple[str, str], Shoe],
    tables_in: tuple[str, str] | None,
) -> None:
    gaps: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for table, prev, seq in con.execute(
        f"""
        SELECT table_id, prev, seq FROM (
          SELECT table_id, seq, lag(seq) OVER (PARTITION BY stream ORDER BY seq) AS prev
          FROM events WHERE table_id IS NOT NULL AND {table_range_sql(tables_in)}
        ) WHERE seq > prev + 1
        """
    ).fetchall():
        gaps[table].append((prev, seq))
    for (table, _), s in shoes.items():
        lo = opening_seq(s)
        ends = [e.seq for e in (s.end, s.cut) if e is not None] + [r.last_seq for r in s.rounds]
        hi = max(ends, default=lo)
        s.gap = any(prev < hi and seq > lo for prev, seq in gaps[table])


def load_composition(
    con: duckdb.DuckDBPyConnection,
    tables_in: tuple[str, str] | None = None,
) -> tuple[dict[tuple[str, str], list[Excess]], dict[tuple[str, str], int]]:
    """Per (table, shoe): the cards seen more often than its decks allow, and the number of
    cards dealt, burned or found face up (one SQL aggregate over every card of every shoe)."""
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE shoe_cards AS
        SELECT table_id, shoe, seq, ts, source_id, line_no, {_NORM_CARD} AS card FROM (
          SELECT table_id, shoe, seq, ts, source_id, line_no,
                 unnest(CASE WHEN type = 'card' THEN [card]
                             WHEN type = 'burn' THEN cards
                             ELSE list_prepend(card, coalesce(burned, []::VARCHAR[])) END) AS c
          FROM events
          WHERE type IN ('card', 'burn', 'face_up_in_shoe') AND shoe IS NOT NULL
            AND {table_range_sql(tables_in)}
        )
        """
    )
    used = {
        (t, s): n
        for t, s, n in con.execute(
            "SELECT table_id, shoe, count(*) FROM shoe_cards GROUP BY ALL"
        ).fetchall()
    }
    excess: dict[tuple[str, str], list[Excess]] = defaultdict(list)
    for table, shoe, card, n, seqs, decks in con.execute(
        f"""
        WITH decks AS (
          SELECT table_id, shoe, arg_min(decks, seq) AS decks FROM events
          WHERE type = 'shoe_start' AND {table_range_sql(tables_in)} GROUP BY ALL
        )
        SELECT c.table_id, c.shoe, c.card, count(*),
               list({{'seq': c.seq, 'ts': c.ts, 'source_id': c.source_id, 'line': c.line_no}}
                    ORDER BY c.seq),
               d.decks
        FROM shoe_cards c JOIN decks d USING (table_id, shoe)
        GROUP BY c.table_id, c.shoe, c.card, d.decks
        HAVING count(*) > d.decks
        ORDER BY c.table_id, c.shoe, c.card
        """
    ).fetchall():
        at = seqs[decks]
        path = con.execute("SELECT path FROM sources WHERE id = ?",
                           [at["source_id"]]).fetchall()[0][0]
        excess[(table, shoe)].append(Excess(card, n, at["seq"], at["ts"],
                                            f"{path}:{at['line']}",
                                            tuple(x["seq"] for x in seqs)))
    con.execute("DROP TABLE IF EXISTS shoe_cards")
    return dict(excess), used


def load_last_round_cards(
    con: duckdb.DuckDBPyConnection, shoes: Sequence[Shoe]
) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """The (to, card) pairs of the last round of each shoe dealt to its last card."""
    wanted = [
        (s.table, s.shoe, s.rounds[-1].round)
        for s in shoes
        if s.rounds and s.size is not None and not s.gap and s.consumed >= s.size
    ]
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for table, shoe, rnd in wanted:
        rows = con.execute(
            "SELECT to_hand, card FROM events WHERE type = 'card' AND table_id = ? AND shoe = ? "
            "AND round = ? ORDER BY seq",
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
    its seq gaps (of the tables in `tables_in`, one of db.table_batches, or of all): one window
    of seq numbers over the streams, then the few events it keeps read in full."""
    these = table_range_sql(tables_in)
    rows = con.execute(
        f"""
        WITH w AS (
          SELECT table_id, seq, type, lag(seq) OVER x AS p_seq, lead(seq) OVER x AS n_seq
          FROM events WHERE table_id IS NOT NULL AND {these}
          WINDOW x AS (PARTITION BY table_id ORDER BY seq)
        ), keep AS (
          SELECT * FROM w
          WHERE type IN ('table_open', 'table_close') OR n_seq IS NULL OR seq > p_seq + 1
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
