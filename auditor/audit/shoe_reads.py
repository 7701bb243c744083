"""The shoe checks' edge with the database: each shoe's events and rounds (`load_shoes`),
where the stream shows a round or shoe event was dealt from another shoe than it names
(replay/shoe_labels.py), the cards of each shoe against its decks (`load_composition`), and
the last round of a shoe dealt to its last card.

Split from `auditor.audit.load` for its size; the same rules hold: every query filters to one
batch of tables (`db.table_batches`) where it can, and a day's millions of rounds are read as
columns, never a Python loop per card or round.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from auditor.audit.load import load_rounds, round_keys
from auditor.replay.shoe_labels import misfiled_kind
from auditor.replay.shoes import (
    Excess,
    Misfiled,
    Rounds,
    Shoe,
    ShoeEvent,
    ShoeRules,
    cited_rounds,
    opening_seq,
)
from auditor.rules.cards import CARD_PATTERN_SQL, parse_card
from auditor.store.db import table_range_sql

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
    them, if already read).

    A round or shoe event that names a shoe the table was not dealing from (shoe_labels) is
    counted in the shoe it was: its round in that shoe's `rounds` (its own shoe in
    `rounds.labels`), a burn or a card found face up in its cards, and a Misfiled in its
    `misfiled`; a shoe_end or cutting card of such a shoe ends or cuts nothing."""
    these = table_range_sql(tables_in, "e.table_id")
    gaps: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for table, prev, seq in _seq_gaps(con, "stream", tables_in):
        gaps[table].append((prev, seq))
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

    def shoe_of(table: str, shoe_id: str) -> Shoe:
        key = (table, shoe_id)
        if key not in shoes:
            session, pit_, game_, jur = opening.get(table, (0, None, None, None))
            shoes[key] = Shoe(table, shoe_id, pit_, jur, session, rules=rules_for(jur, game_))
            order.append(key)
        return shoes[key]

    dealing = _Dealing("")
    for (table, seq, ts, type_, source, shoe_id, pit, game, jurisdiction, decks, shuffle,
         batch, cards, card, burned, rnd, remaining, next_type) in rows:
        if table != dealing.table:
            dealing = _Dealing(table)
        if type_ == "table_open":
            n = opening.get(table, (0, None, None, None))[0] + 1
            opening[table] = (n, pit, game, jurisdiction)
            continue
        if type_ == "table_close" or shoe_id is None:
            continue
        ev = ShoeEvent(table, shoe_id, seq, ts, type_, source, decks, shuffle, batch,
                       tuple(map(_card_text, cards or ())),
                       None if card is None else _card_text(card),
                       tuple(map(_card_text, burned or ())), rnd, remaining, next_type)
        if type_ == "shoe_start":
            dealing.start(shoe_id, seq)
            s = shoe_of(table, shoe_id)
            if s.start is None:
                s.start = ev
            continue
        misfiled = dealing.place(ev, gaps[table])
        s = shoe_of(table, shoe_id if misfiled is None else misfiled.counted_in)
        if misfiled is not None:
            s.misfiled.append(misfiled)
            if misfiled.counted_in != shoe_id and type_ in ("cut_card", "shoe_end"):
                continue  # a shoe the table was not dealing from ends or cuts nothing
        if type_ == "burn":
            s.burns.append(ev)
        elif type_ == "face_up_in_shoe":
            s.face_ups.append(ev)
        elif type_ == "cut_card" and s.cut is None:
            s.cut = ev
        elif type_ == "shoe_end" and s.end is None:
            dealing.end(shoe_id)
            s.end = ev
    # Rounds as columns, a shoe's rounds together in seq order; a shoe known only by its rounds
    # comes after the others of its table here, and the sort at the end puts it in its place.
    spans = load_rounds(con, tables_in) if rounds is None else rounds
    spans = _unplaced_in_gaps(spans.filter(pc.field("spanned")), gaps)
    if spans.num_rows:
        cols = {n: spans.column(n).to_numpy() for n in ("round", "first_seq", "last_seq",
                                                         "cards")}
        cols["void"] = spans.column("void").fill_null(False).to_numpy()
        tables = pc.dictionary_encode(spans.column("table_id").combine_chunks())
        shoe_ids = pc.dictionary_encode(spans.column("counted_in").combine_chunks())
        t_idx = tables.indices.fill_null(-1).to_numpy()
        s_idx = shoe_ids.indices.fill_null(-1).to_numpy()
        starts = np.flatnonzero(np.diff(t_idx, prepend=-2) | np.diff(s_idx, prepend=-2))
        names, shoe_names = tables.dictionary.to_pylist(), shoe_ids.dictionary.to_pylist()
        placed = _misfiled_rounds(con, spans, these)
        for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), spans.num_rows], strict=True):
            key = (names[t_idx[lo]], shoe_names[s_idx[lo]])
            if key not in shoes:  # a shoe known by its rounds alone: no rules, no checks
                shoes[key] = Shoe(*key, pit=opening.get(key[0], (0, None))[1])
                order.append(key)
            s = shoes[key]
            labels = {i - lo: m.label for i, m in placed.items() if lo <= i < hi
                      and m.label != key[1]}
            s.rounds = Rounds(**{n: c[lo:hi] for n, c in cols.items()}, labels=labels)
            s.misfiled += [m for i, m in placed.items() if lo <= i < hi]
        for m in _split_rounds(con, spans, these, gaps):
            shoe_of(m.table, m.counted_in).misfiled.append(m)
        _cite_rounds(con, shoes.values(), these)
    _mark_gaps(shoes, gaps)
    return [shoes[k] for k in sorted(order, key=lambda k: (k[0], opening_seq(shoes[k])))]


class _Dealing:
    """Which shoe one table is dealing from, event by event in seq order: its last
    shoe_start, until that shoe's shoe_end (load_rounds says the same of rounds, in SQL)."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.started: dict[str, int] = {}  # each shoe's last shoe_start seq
        self.current: str | None = None
        self.current_seq: int | None = None
        self.ended = False

    def start(self, shoe: str, seq: int) -> None:
        self.started[shoe] = seq
        self.current, self.current_seq, self.ended = shoe, seq, False

    def end(self, shoe: str) -> None:
        if shoe == self.current:
            self.ended = True

    def place(self, ev: ShoeEvent, gaps: Sequence[tuple[int, int]]) -> Misfiled | None:
        """The Misfiled for a shoe event out of its shoe, else None."""
        since = -1 if self.current_seq is None else self.current_seq
        gap = any(prev >= since and seq <= ev.seq for prev, seq in gaps)
        kind = misfiled_kind(ev.shoe, self.started, self.current_seq, gap)
        if kind is None:
            return None
        dealt = self.current if self.current is not None and not self.ended else ev.shoe
        out = len(ev.cards) if ev.type == "burn" else (
            1 + len(ev.burned) if ev.type == "face_up_in_shoe" else 0)
        return Misfiled(ev.table, ev.shoe, kind, ev.type, ev.seq, ev.seq, ev.ts, ev.source,
                        ev.round if ev.type == "cut_card" else None, out, dealt, self.current,
                        self.current_seq, self.ended)


def _unplaced_in_gaps(spans: pa.Table, gaps: Mapping[str, list[tuple[int, int]]]) -> pa.Table:
    """The rounds with their misfiled kind and shoe taken back where the table's seq skips
    numbers between its last shoe_start and the round: the missing events may hold that
    round's shoe_start (log.seq_gap reports them)."""
    if not gaps or not pc.any(pc.is_valid(spans.column("misfiled"))).as_py():
        return spans
    at = np.flatnonzero(pc.is_valid(spans.column("misfiled")).to_numpy())
    sub = spans.take(pa.array(at)).select(["table_id", "current_seq", "first_seq_all"]).to_pylist()
    keep = np.ones(spans.num_rows, dtype=bool)
    for i, r in zip(at.tolist(), sub, strict=True):
        since = -1 if r["current_seq"] is None else r["current_seq"]
        if any(prev >= since and seq <= r["first_seq_all"] for prev, seq in gaps[r["table_id"]]):
            keep[i] = False
    if keep.all():
        return spans
    mask = pa.array(~keep)
    spans = spans.set_column(
        spans.schema.get_field_index("misfiled"), "misfiled",
        pc.if_else(mask, pa.scalar(None, pa.string()), spans.column("misfiled")))
    spans = spans.set_column(
        spans.schema.get_field_index("counted_in"), "counted_in",
        pc.if_else(mask, spans.column("shoe"), spans.column("counted_in")))
    return spans.sort_by([("table_id", "ascending"), ("counted_in", "ascending"),
                          ("first_seq", "ascending")])


def _round_heads(
    con: duckdb.DuckDBPyConnection, keys: Sequence[tuple[str, str, int]], these: str
) -> dict[tuple[str, str, int], tuple[dt.datetime, str]]:
    """The time and source of the first event (cutting card aside) of the rounds `keys`
    (table, shoe as logged, round), read for those rounds only."""
    if not keys:
        return {}
    con.register("head_rounds", round_keys(keys))
    try:
        rows = con.execute(
            f"""
            SELECT e.table_id, e.shoe, e.round, min(e.ts),
                   arg_min(s.path || ':' || e.line_no, e.seq)
            FROM events e
            JOIN head_rounds c ON e.table_id IS NOT DISTINCT FROM c.table_id
              AND e.shoe = c.shoe AND e.round = c.round
            JOIN sources s ON s.id = e.source_id
            WHERE e.type NOT IN ('cut_card') AND {these}
            GROUP BY ALL
            """
        ).fetchall()
    finally:
        con.unregister("head_rounds")
    return {(t, sh, r): (ts, source) for t, sh, r, ts, source in rows}


def _misfiled_rounds(
    con: duckdb.DuckDBPyConnection, spans: pa.Table, these: str
) -> dict[int, Misfiled]:
    """The rounds of `spans` the stream shows were dealt from another shoe than they name,
    by row."""
    if not pc.any(pc.is_valid(spans.column("misfiled"))).as_py():
        return {}
    at = np.flatnonzero(pc.is_valid(spans.column("misfiled")).to_numpy())
    rows = spans.take(pa.array(at)).to_pylist()
    heads = _round_heads(con, [(r["table_id"], r["shoe"], r["round"]) for r in rows], these)
    out = {}
    for i, r in zip(at.tolist(), rows, strict=True):
        ts, source = heads[(r["table_id"], r["shoe"], r["round"])]
        out[i] = Misfiled(r["table_id"], r["shoe"], r["misfiled"], "round", r["first_seq"],
                          r["last_seq"], ts, source, r["round"], r["cards"], r["counted_in"],
                          r["current"], r["current_seq"], r["current_ended"])
    return out


def _split_rounds(
    con: duckdb.DuckDBPyConnection, spans: pa.Table, these: str,
    gaps: Mapping[str, list[tuple[int, int]]],
) -> list[Misfiled]:
    """The events of rounds begun in their own shoe that go on after another shoe's
    shoe_start (load_rounds' `split_at`): a round number of the shoe left, used again for
    events of the shoe now dealt. Each tail is a Misfiled return to the shoe left, counted in
    the shoe started; none where the seq skips numbers between that start and the tail."""
    if not pc.any(pc.is_valid(spans.column("split_at"))).as_py():
        return []
    at = pa.array(np.flatnonzero(pc.is_valid(spans.column("split_at")).to_numpy()))
    keys = spans.take(at).select(["table_id", "shoe", "round", "split_at", "split_to"])
    con.register("split_rounds", keys)
    try:
        rows = con.execute(
            f"""
            SELECT e.table_id, e.shoe, e.round, k.split_at, k.split_to, min(e.seq), max(e.seq),
                   count(*) FILTER (e.type = 'card'), min(e.ts),
                   arg_min(s.path || ':' || e.line_no, e.seq)
            FROM events e
            JOIN split_rounds k ON e.table_id = k.table_id AND e.shoe = k.shoe
              AND e.round = k.round AND e.seq > k.split_at
            JOIN sources s ON s.id = e.source_id
            WHERE e.type NOT IN ('cut_card') AND {these}
            GROUP BY ALL ORDER BY 1, 6
            """
        ).fetchall()
    finally:
        con.unregister("split_rounds")
    return [
        Misfiled(table, shoe, "reopened", "round", lo, hi, ts, source, rnd, cards, to, to,
                 start)
        for table, shoe, rnd, start, to, lo, hi, cards, ts, source in rows
        if not any(prev >= start and seq <= lo for prev, seq in gaps.get(table, ()))
    ]


def _cite_rounds(con: duckdb.DuckDBPyConnection, shoes: Iterable[Shoe], these: str) -> None:
    """The time and source of the rounds a finding can cite (shoes.cited_rounds), read for
    those rounds only."""
    where: dict[tuple[str, str, int], tuple[Shoe, int]] = {}
    for s in shoes:
        for i in cited_rounds(s):
            where[(s.table, s.rounds.label(i, s.shoe), int(s.rounds.round[i]))] = (s, i)
    for key, head in _round_heads(con, list(where), these).items():
        s, i = where[key]
        s.rounds.detail[i] = head


def _mark_gaps(
    shoes: Mapping[tuple[str, str], Shoe], gaps: Mapping[str, list[tuple[int, int]]]
) -> None:
    for (table, _), s in shoes.items():
        lo = opening_seq(s)
        ends = [e.seq for e in (s.end, s.cut) if e is not None]
        if len(s.rounds):
            ends.append(int(s.rounds.last_seq.max()))
        hi = max(ends, default=lo)
        s.gap = any(prev < hi and seq > lo for prev, seq in gaps.get(table, ()))


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


# The events as the rounds were judged: without the late ones (auditor.audit.rounds).
_JUDGED_EVENTS = "SELECT * FROM events ANTI JOIN round_exclusions USING (table_id, seq)"

# The cards of quarantined lines that still read as a card, burn or card found face up of a
# table's stream (JSON, that type, a table, an integer seq no event holds, a time with its
# offset, every card spelled as a card), each counted in the shoe its table was dealing at
# its seq (the last shoe_start before it, that shoe not ended since): the shoe id the line
# names is not trusted, it is often why the line was refused. A line quarantined is not an
# event and no round is replayed with it, but the card it shows came out of that shoe: a
# forger who breaks a card line (an invisible character in its shoe id) must not take the
# card out of the shoe's count (docs/event-log.md, "Quarantined card lines").
_QUARANTINED_CARDS = f"""
SELECT table_id, shoe, type, seq, ts, source_id, line_no, card, cards, burned FROM (
  SELECT p.*, d.shoe, d.seq AS start_seq,
         CASE WHEN p.type = 'card' THEN [p.card] WHEN p.type = 'burn' THEN p.cards
              ELSE list_prepend(p.card, coalesce(p.burned, []::VARCHAR[])) END AS shown,
         row_number() OVER (PARTITION BY p.table_id, p.seq ORDER BY p.source_id, p.line_no)
           AS nth
  FROM (
    SELECT source_id, line_no, j->>'type' AS type, j->>'table' AS table_id,
           TRY_CAST(j->>'seq' AS BIGINT) AS seq,
           CASE WHEN regexp_matches(j->>'ts', '(Z|[+-][0-9][0-9]:?[0-9][0-9])$')
                THEN TRY_CAST(j->>'ts' AS TIMESTAMPTZ) END AS ts,
           j->>'card' AS card, TRY_CAST(j->'cards' AS VARCHAR[]) AS cards,
           TRY_CAST(j->'burned' AS VARCHAR[]) AS burned
    FROM (SELECT source_id, line_no, TRY_CAST(raw AS JSON) AS j FROM quarantine)
  ) p
  ASOF JOIN (SELECT table_id, shoe, seq FROM events WHERE type = 'shoe_start') d
    ON d.table_id = p.table_id AND p.seq > d.seq
  WHERE p.type IN ('card', 'burn', 'face_up_in_shoe') AND p.ts IS NOT NULL AND {{these}}
) q
WHERE nth = 1 AND len(shown) > 0
  AND list_bool_and(list_transform(shown, lambda x: coalesce(
        regexp_full_match(x, '{CARD_PATTERN_SQL.strip("^$")}'), false)))
  AND NOT EXISTS (SELECT 1 FROM events e WHERE e.table_id = q.table_id AND e.seq = q.seq)
  AND NOT EXISTS (SELECT 1 FROM events x WHERE x.table_id = q.table_id
                    AND x.type = 'shoe_end' AND x.shoe = q.shoe
                    AND x.seq > q.start_seq AND x.seq < q.seq)
"""


def _and_quarantined(events: str, tables_in: tuple[str, str] | None) -> str:
    """`events` (a subquery) with the cards of quarantined lines (_QUARANTINED_CARDS)."""
    quarantined = _QUARANTINED_CARDS.format(these=table_range_sql(tables_in, "p.table_id"))
    return f"({events} UNION ALL BY NAME ({quarantined}))"


def load_composition(
    con: duckdb.DuckDBPyConnection,
    tables_in: tuple[str, str] | None = None,
    shoes: Sequence[Shoe] = (),
) -> tuple[dict[tuple[str, str], list[Excess]], dict[tuple[str, str], int]]:
    """Per (table, shoe): the cards seen more often than its decks allow, and the number of
    cards dealt, burned or found face up. A round or burn of `shoes` that the stream shows
    was dealt from another shoe than it names (Misfiled) counts in that shoe.

    Cards are counted per shoe as logged, and spellings are merged on those counts, not on
    every card; only the shoes with a card too many are read card by card."""
    moved = [m for s in shoes for m in s.misfiled if m.counted_in != m.label and m.cards]
    if not moved:
        # Late events a round was judged without (round_exclusions) count for no shoe.
        return _composition(con, tables_in, _and_quarantined(f"({_JUDGED_EVENTS})", tables_in))
    con.register("shoe_remap", pa.table({
        "table_id": pa.array([m.table for m in moved], pa.string()),
        "shoe": pa.array([m.label for m in moved], pa.string()),
        "lo": pa.array([m.seq for m in moved], pa.int64()),
        "hi": pa.array([m.last_seq for m in moved], pa.int64()),
        "counted_in": pa.array([m.counted_in for m in moved], pa.string()),
    }))
    try:
        return _composition(con, tables_in, _and_quarantined("""(
            SELECT e.* REPLACE (coalesce(m.counted_in, e.shoe) AS shoe) FROM events e
            ANTI JOIN round_exclusions x ON x.table_id = e.table_id AND x.seq = e.seq
            LEFT JOIN shoe_remap m ON m.table_id = e.table_id AND m.shoe = e.shoe
              AND e.seq BETWEEN m.lo AND m.hi)""", tables_in))
    finally:
        con.unregister("shoe_remap")


def _composition(
    con: duckdb.DuckDBPyConnection, tables_in: tuple[str, str] | None, events: str
) -> tuple[dict[tuple[str, str], list[Excess]], dict[tuple[str, str], int]]:
    """load_composition over `events` (the table, or its rows with the shoes counted in)."""
    these = table_range_sql(tables_in)
    decks_sql = f"""
        SELECT table_id, shoe, arg_min(decks, seq) AS decks FROM events
        WHERE type = 'shoe_start' AND {these} GROUP BY ALL"""
    used: dict[tuple[str, str], int] = {}
    over: list[tuple[str, str]] = []
    for table, shoe, n, too_many in con.execute(
        f"""
        WITH logged AS (
          SELECT table_id, shoe, card AS c, count(*) AS n FROM {events}
          WHERE type = 'card' AND shoe IS NOT NULL AND {these} GROUP BY ALL
          UNION ALL
          SELECT table_id, shoe, c, count(*) FROM (
            SELECT table_id, shoe,
                   unnest(CASE WHEN type = 'burn' THEN cards
                               ELSE list_prepend(card, coalesce(burned, []::VARCHAR[])) END) AS c
            FROM {events}
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
                FROM {events} e JOIN shoes_over o USING (table_id, shoe)
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
    wanted = sorted({int(seqs[decks]["source_id"]) for *_, seqs, decks in rows})
    paths = dict(con.execute("SELECT id, path FROM sources WHERE id IN (SELECT unnest(?))",
                             [wanted]).fetchall()) if wanted else {}
    for table, shoe, card, n, seqs, decks in rows:
        at = seqs[decks]
        excess[(table, shoe)].append(Excess(card, n, at["seq"], at["ts"],
                                            f"{paths[at['source_id']]}:{at['line']}",
                                            tuple(x["seq"] for x in seqs)))
    return dict(excess), used


def load_last_round_cards(
    con: duckdb.DuckDBPyConnection, shoes: Sequence[Shoe]
) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """The (to, card) pairs of the last round of each shoe dealt to its last card."""
    wanted = [
        (s.table, s.shoe, s.rounds.label(len(s.rounds) - 1, s.shoe), int(s.rounds.round[-1]))
        for s in shoes
        if len(s.rounds) and s.size is not None and not s.gap and s.consumed >= s.size
    ]
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for table, shoe, label, rnd in wanted:
        rows = con.execute(
            "SELECT to_hand, card FROM events ANTI JOIN round_exclusions USING (table_id, seq) "
            "WHERE type = 'card' AND table_id = ? AND shoe = ? AND round = ? ORDER BY seq",
            [table, label, rnd],
        ).fetchall()
        out[(table, shoe)] = [(to, str(parse_card(c))) for to, c in rows]
    return out


