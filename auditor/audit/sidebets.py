"""Side-bet counting in the audit database (docs/side-bets.md): the cards out of every shoe
and every seat's wagers at tables where seats wager on a counted side bet (Dragon 7, Panda 8),
read with DuckDB; the count and the test are `auditor.replay.sidebets`.

`side_bet_findings` recomputes play.side_bet_counting over the whole database on every audit,
records the new findings and withdraws the standing ones the data no longer supports, in one
transaction, as the dealer step does (auditor/audit/table_pass.py).
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa

from auditor.audit.dealers import EPOCH, Window, shift_windows, windows_sql
from auditor.config import PropertyConfig
from auditor.finding import Finding
from auditor.replay.sidebets import (
    CARDS_PER_DECK,
    CODE,
    MIN_ROUNDS,
    MIN_SIDE_WAGERS,
    Z_THRESHOLD,
    Observation,
    RoundCount,
    SeatSeries,
    Segment,
    counting_findings,
    shoe_counts,
)
from auditor.rules.counts import SideBetCount, load_counts
from auditor.store import findings
from auditor.store.sql import quote

ZERO = Decimal(0)


def load_seat_rounds(
    con: duckdb.DuckDBPyConnection, windows: Sequence[Window], bets: Sequence[str]
) -> list[tuple[Any, ...]]:
    """(shift, table, seat, shoe, round, round time in microseconds since 1970 UTC, amount on
    each bet or NULL) for every round a seat placed any wager in, of the (shift, table, seat)
    that placed at least MIN_SIDE_WAGERS wagers on one of `bets` and played MIN_ROUNDS
    rounds; in order of play."""
    if not windows or not bets:
        return []
    return con.execute(*_seat_rounds_sql(windows, bets)).fetchall()


def _seat_rounds_sql(windows: Sequence[Window], bets: Sequence[str]) -> tuple[str, list[Any]]:
    """load_seat_rounds' query (columns label, table_id, seat, shoe, round, us, b0, b1, ...)
    and its parameters."""
    per_bet = ", ".join(
        f"sum(w.amount) FILTER (WHERE w.bet = {quote(b)}) AS b{i}" for i, b in enumerate(bets)
    )
    enough = " OR ".join(
        f"count(b{i}) OVER seat >= {MIN_SIDE_WAGERS}" for i in range(len(bets))
    )
    in_bets = ", ".join(quote(b) for b in bets)
    return (
        f"""
        WITH side AS (
          SELECT DISTINCT table_id FROM events WHERE type = 'wager' AND bet IN ({in_bets})
        ), rs AS (
          SELECT table_id, shoe, round, min(ts) AS ts FROM events SEMI JOIN side USING (table_id)
          WHERE type = 'round_start' AND shoe IS NOT NULL AND round IS NOT NULL
                AND ts >= ? AND ts < ?
          GROUP BY ALL
        ), r AS (
          SELECT w.label, rs.* FROM rs JOIN {windows_sql(windows)}
          ON rs.ts >= w.ws AND rs.ts < w.we
        ), w AS (
          SELECT table_id, shoe, round, seat, bet, amount FROM events
          SEMI JOIN side USING (table_id)
          WHERE type = 'wager' AND seat IS NOT NULL AND shoe IS NOT NULL AND round IS NOT NULL
        ), played AS (
          SELECT r.label, r.table_id, w.seat, r.shoe, r.round, r.ts, {per_bet}
          FROM w JOIN r USING (table_id, shoe, round)
          GROUP BY ALL
        )
        SELECT label, table_id, seat, shoe, round, epoch_us(ts) AS us,
               {", ".join(f"b{i}" for i in range(len(bets)))}
        FROM (
          SELECT *, count(*) OVER seat AS n, ({enough}) AS enough FROM played
          WINDOW seat AS (PARTITION BY label, table_id, seat)
        )
        WHERE enough AND n >= {MIN_ROUNDS}
        ORDER BY label, table_id, seat, ts, shoe, round
        """,
        [min(w.start for w in windows), max(w.end for w in windows)],
    )


def load_segments(
    con: duckdb.DuckDBPyConnection, shoes: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], tuple[int | None, list[Segment]]]:
    """(table, shoe) -> (its decks, from its shoe_start; its segments in order): the cards
    out of the shoe between one round_start and the next, those a player sees (the burn's
    first card, every card dealt, a card found face up) and those burned unseen."""
    if not shoes:
        return {}
    keys = ", ".join(f"({quote(t)}, {quote(s)})" for t, s in shoes)
    rows = con.execute(
        f"""
        WITH e AS (
          SELECT table_id, shoe, seq, type, round, card, cards, burned, decks FROM events
          SEMI JOIN (VALUES {keys}) AS k(table_id, shoe) USING (table_id, shoe)
          WHERE type IN ('shoe_start', 'round_start', 'burn', 'face_up_in_shoe', 'card')
        ), s AS (
          SELECT *, count(*) FILTER (WHERE type = 'round_start')
                    OVER (PARTITION BY table_id, shoe ORDER BY seq) AS seg
          FROM e
        )
        SELECT table_id, shoe, seg,
               arg_min(round, seq) FILTER (WHERE type = 'round_start'),
               list(CASE type WHEN 'card' THEN card WHEN 'burn' THEN cards[1]
                              WHEN 'face_up_in_shoe' THEN card END ORDER BY seq)
                 FILTER (WHERE type IN ('card', 'burn', 'face_up_in_shoe')),
               coalesce(sum(CASE type WHEN 'burn' THEN greatest(len(cards) - 1, 0)
                                      WHEN 'face_up_in_shoe' THEN len(burned)
                                      ELSE 0 END), 0),
               arg_min(decks, seq) FILTER (WHERE type = 'shoe_start')
        FROM s GROUP BY ALL ORDER BY table_id, shoe, seg
        """
    ).fetchall()
    out: dict[tuple[str, str], tuple[int | None, list[Segment]]] = {}
    for table, shoe, seg, rnd, seen, unseen, decks in rows:
        known, segments = out.get((table, shoe), (None, []))
        segments.append(Segment(None if seg == 0 else rnd,
                                tuple(c for c in (seen or ()) if c), int(unseen)))
        out[(table, shoe)] = (known if decks is None else int(decks), segments)
    return out


def _pits(con: duckdb.DuckDBPyConnection) -> dict[str, str | None]:
    return dict(con.execute(
        "SELECT table_id, arg_max(pit, seq) FROM events WHERE type = 'table_open' GROUP BY ALL"
    ).fetchall())


def seat_series(
    con: duckdb.DuckDBPyConnection, config: PropertyConfig, counts: dict[str, SideBetCount]
) -> list[SeatSeries]:
    """Every (shift, table, seat, bet) with enough rounds and side wagers to be tested, with
    the true count of the bet's count before each round the seat played: the whole test's
    input, as `compute` screens it (bench/side_bets.py, and the tests' reference)."""
    bets = sorted(counts)
    rows = load_seat_rounds(con, shift_windows(con, config, config.zone_for(con)), bets)
    if not rows:
        return []
    true = true_counts(con, counts, sorted({(r[1], r[3]) for r in rows}))
    return _series(rows, bets, true, _pits(con))


def true_counts(
    con: duckdb.DuckDBPyConnection, counts: dict[str, SideBetCount],
    shoes: Sequence[tuple[str, str]],
) -> dict[tuple[str, str, str], dict[int, RoundCount]]:
    """(bet, table, shoe) -> round -> the count before it, for the shoes with a shoe_start."""
    true: dict[tuple[str, str, str], dict[int, RoundCount]] = {}
    for (table, shoe), (decks, segs) in load_segments(con, shoes).items():
        if decks is None:  # no shoe_start: the shoe's size is unknown, its count too
            continue
        for bet in counts:
            true[(bet, table, shoe)] = {c.round: c for c in shoe_counts(counts[bet], decks, segs)}
    return true


def _series(
    rows: Sequence[Sequence[Any]],
    bets: Sequence[str],
    true: dict[tuple[str, str, str], dict[int, RoundCount]],
    pits: dict[str, str | None],
) -> list[SeatSeries]:
    """load_seat_rounds' rows as SeatSeries, a round counted where its true count is known."""
    grouped: dict[tuple[str, str, int, str], list[Observation]] = defaultdict(list)
    none: dict[int, RoundCount] = {}
    for label, table, seat, shoe, rnd, us, *amounts in rows:
        ts = EPOCH + dt.timedelta(microseconds=us)
        for bet, amount in zip(bets, amounts, strict=True):
            c = true.get((bet, table, shoe), none).get(rnd)
            if c is None:
                continue
            grouped[(label, table, seat, bet)].append(
                Observation(shoe, rnd, ts, c.true, amount if amount is not None else ZERO)
            )
    return [
        SeatSeries(table, pits.get(table), seat, bet, label, tuple(obs))
        for (label, table, seat, bet), obs in sorted(grouped.items())
    ]


@contextmanager
def true_counts_sql(
    con: duckdb.DuckDBPyConnection, counts: dict[str, SideBetCount], shoes: str
) -> Iterator[str]:
    """A query of (bet, table_id, shoe, round, x): the true count `x` of each bet's count
    before each round of the shoes in table `shoes` (table_id, shoe) that have a shoe_start,
    as load_segments and replay.sidebets.shoe_counts make it (tests hold the two to each
    other), in one pass of window sums instead of a Python loop over every card of every
    shoe. The query reads `side_tags` (each card text's tag), registered while in the
    `with`."""
    texts = [t for (t,) in con.execute(
        f"""
        SELECT DISTINCT CASE type WHEN 'burn' THEN cards[1] ELSE card END FROM events
        SEMI JOIN {shoes} USING (table_id, shoe)
        WHERE type IN ('burn', 'face_up_in_shoe', 'card')
        """).fetchall() if t]
    bets = sorted(counts)
    con.register("side_tags", pa.table({
        "card": pa.array(texts, pa.string()),
        **{f"t{i}": pa.array([counts[b].tag(t) for t in texts], pa.int64())
           for i, b in enumerate(bets)},
    }))
    per_bet = ", ".join(f"coalesce(sum(g.t{i}), 0) AS t{i}" for i in range(len(bets)))
    before = ", ".join(f"sum(t{i}) OVER w - t{i} AS r{i}" for i in range(len(bets)))
    true = " UNION ALL ".join(
        f"SELECT {quote(b)} AS bet, table_id, shoe, round, seg, "
        f"r{i} * {CARDS_PER_DECK} / greatest(decks * {CARDS_PER_DECK} - out, 1) AS x FROM c"
        for i, b in enumerate(bets))
    query = f"""
      WITH e AS (
        SELECT table_id, shoe, seq, type, round, decks,
               CASE type WHEN 'card' THEN card WHEN 'burn' THEN cards[1]
                         WHEN 'face_up_in_shoe' THEN card END AS seen,
               coalesce(CASE type WHEN 'burn' THEN greatest(len(cards) - 1, 0)
                                  WHEN 'face_up_in_shoe' THEN len(burned) ELSE 0 END, 0)
                 AS unseen,
               count(*) FILTER (WHERE type = 'round_start')
                 OVER (PARTITION BY table_id, shoe ORDER BY seq) AS seg
        FROM events SEMI JOIN {shoes} USING (table_id, shoe)
        WHERE type IN ('shoe_start', 'round_start', 'burn', 'face_up_in_shoe', 'card')
      ), segs AS (  -- as load_segments: from one round_start to the next
        SELECT e.table_id, e.shoe, e.seg,
               arg_min(e.round, e.seq) FILTER (WHERE e.type = 'round_start') AS round,
               arg_min(e.decks, e.seq) FILTER (WHERE e.type = 'shoe_start') AS decks,
               count(*) FILTER (WHERE e.seen <> '') + sum(e.unseen) AS gone, {per_bet}
        FROM e LEFT JOIN side_tags g ON g.card = e.seen
        GROUP BY ALL
      ), sized AS (  -- the last segment with a shoe_start gives the shoe's decks
        SELECT table_id, shoe, arg_max(decks, seg) AS decks
        FROM segs WHERE decks IS NOT NULL GROUP BY ALL
      ), c AS (
        SELECT s.table_id, s.shoe, s.seg, s.round, z.decks, sum(s.gone) OVER w - s.gone AS out,
               {before}
        FROM segs s JOIN sized z USING (table_id, shoe)
        WINDOW w AS (PARTITION BY s.table_id, s.shoe ORDER BY s.seg
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
      )
      SELECT bet, table_id, shoe, round, arg_min(x, seg) AS x
      FROM ({true}) WHERE seg > 0 AND round IS NOT NULL
      GROUP BY ALL"""
    try:
        yield query
    finally:
        con.unregister("side_tags")


# Each series' rho, as DuckDB computes it, is within this of Python's (float sums in another
# order): a series the screen drops is one Python's test could not flag.
SCREEN_MARGIN = 1e-6


def compute(
    con: duckdb.DuckDBPyConnection, config: PropertyConfig, threshold: float = Z_THRESHOLD
) -> tuple[list[Finding], int]:
    """play.side_bet_counting over the whole database, and the number of (table, seat, bet,
    shift) tested. Reads only.

    Every series is tested in DuckDB at once (`_screen`: the average ranks and their
    correlation, as replay.sidebets.seat_test computes them); only the series it finds at
    or near the threshold are built in Python and tested there, and only Python's test
    makes a finding. A year's history holds tens of thousands of series; building each
    round of each was most of this pass (issue 32)."""
    counts = load_counts()
    bets = sorted(counts)
    windows = shift_windows(con, config, config.zone_for(con))
    if not windows or not bets:
        return [], 0
    query, params = _seat_rounds_sql(windows, bets)
    played = con.sql(query, params=params).to_arrow_table()
    if not played.num_rows:
        return [], 0
    shoes = played.select(["table_id", "shoe"]).group_by(["table_id", "shoe"]).aggregate([])
    tested, near = _screen(con, played, shoes, counts, threshold)
    if not near:
        return [], tested
    seats = sorted({k[:3] for k in near})  # a seat may be near on both bets
    keep = pa.table({"label": [k[0] for k in seats], "table_id": [k[1] for k in seats],
                     "seat": pa.array([k[2] for k in seats], played.schema.field("seat").type)})
    rows = played.join(keep, ["label", "table_id", "seat"], join_type="inner")
    rows = rows.sort_by([(c, "ascending") for c in ("label", "table_id", "seat", "us", "shoe",
                                                    "round")])
    true = true_counts(con, counts, sorted(set(zip(rows.column("table_id").to_pylist(),
                                                    rows.column("shoe").to_pylist(),
                                                    strict=True))))
    wanted = set(near)
    series = [s for s in _series(_as_rows(rows, played.column_names), bets, true, _pits(con))
              if (s.shift, s.table, s.seat, s.bet) in wanted]
    return counting_findings(series, counts, threshold=threshold)[0], tested


def _as_rows(table: pa.Table, names: Sequence[str]) -> list[tuple[Any, ...]]:
    cols = [table.column(n).to_pylist() for n in names]
    return list(zip(*cols, strict=True))


def _screen(
    con: duckdb.DuckDBPyConnection,
    played: pa.Table,
    shoes: pa.Table,
    counts: dict[str, SideBetCount],
    threshold: float,
) -> tuple[int, list[tuple[str, str, int, str]]]:
    """The series tested (enough rounds and side wagers) and those whose z is at least
    `threshold` less SCREEN_MARGIN: (shift, table, seat, bet). The true counts as
    `true_counts_sql` gives them."""
    bets = sorted(counts)
    amount = "CASE t.bet " + " ".join(
        f"WHEN {quote(b)} THEN p.b{i}" for i, b in enumerate(bets)) + " END"
    con.register("side_played", played)
    con.register("side_shoes", shoes)
    try:
        with true_counts_sql(con, counts, "side_shoes") as trues:
            rows = con.execute(
                f"""
                WITH side_trues AS ({trues}),
                o AS (
                  SELECT p.label, p.table_id, p.seat, t.bet, t.x, coalesce({amount}, 0) AS y
                  FROM side_played p JOIN side_trues t
                    ON t.table_id = p.table_id AND t.shoe = p.shoe AND t.round = p.round
                ), r AS (
                  SELECT *,
                         rank() OVER (PARTITION BY label, table_id, seat, bet ORDER BY x)
                           + (count(*) OVER (PARTITION BY label, table_id, seat, bet, x) - 1) / 2
                           AS rx,
                         rank() OVER (PARTITION BY label, table_id, seat, bet ORDER BY y)
                           + (count(*) OVER (PARTITION BY label, table_id, seat, bet, y) - 1) / 2
                           AS ry
                  FROM o
                )
                SELECT label, table_id, seat, bet, count(*) AS n,
                       count(*) FILTER (WHERE y > 0) AS side, corr(rx, ry) AS rho
                FROM r GROUP BY ALL
                """
            ).fetchall()
    finally:
        con.unregister("side_played")
        con.unregister("side_shoes")
    tested, near = 0, []
    for label, table, seat, bet, n, side, rho in rows:
        if n < MIN_ROUNDS or side < MIN_SIDE_WAGERS:
            continue
        tested += 1
        if rho is not None and not math.isnan(rho) and (
                rho * math.sqrt(n - 1) >= threshold - SCREEN_MARGIN):
            near.append((label, table, seat, bet))
    return tested, sorted(near)


def side_bet_findings(
    con: duckdb.DuckDBPyConnection, run_id: int, config: PropertyConfig
) -> dict[str, Any]:
    """play.side_bet_counting over every shift in the database, recorded, and the standing
    ones the data no longer supports withdrawn, in one transaction."""
    found, tested = compute(con, config)
    new, withdrawn = findings.replace_pass(con, run_id, "side_bet_pass_findings", found, [CODE])
    return {"seat_shift_bets_tested": tested, "findings": len(found), "findings_new": new,
            "findings_withdrawn": withdrawn}
