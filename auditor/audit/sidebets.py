"""Side-bet counting in the audit database (docs/side-bets.md): the cards out of every shoe
and every seat's wagers at tables where seats wager on a counted side bet (Dragon 7, Panda 8),
read with DuckDB; the count and the test are `auditor.replay.sidebets`.

`side_bet_findings` recomputes play.side_bet_counting over the whole database on every audit,
records the new findings and withdraws the standing ones the data no longer supports, in one
transaction, as the dealer step does (auditor/audit/table_pass.py).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import duckdb

from auditor.audit.dealers import EPOCH, Window, shift_windows, windows_sql
from auditor.config import PropertyConfig
from auditor.finding import Finding
from auditor.replay.sidebets import (
    CODE,
    MIN_ROUNDS,
    MIN_SIDE_WAGERS,
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
    per_bet = ", ".join(
        f"sum(w.amount) FILTER (WHERE w.bet = {quote(b)}) AS b{i}" for i, b in enumerate(bets)
    )
    enough = " OR ".join(
        f"count(b{i}) OVER seat >= {MIN_SIDE_WAGERS}" for i in range(len(bets))
    )
    in_bets = ", ".join(quote(b) for b in bets)
    return con.execute(
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
        SELECT label, table_id, seat, shoe, round, epoch_us(ts),
               {", ".join(f"b{i}" for i in range(len(bets)))}
        FROM (
          SELECT *, count(*) OVER seat AS n, ({enough}) AS enough FROM played
          WINDOW seat AS (PARTITION BY label, table_id, seat)
        )
        WHERE enough AND n >= {MIN_ROUNDS}
        ORDER BY label, table_id, seat, ts, shoe, round
        """,
        [min(w.start for w in windows), max(w.end for w in windows)],
    ).fetchall()


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
    the true count of the bet's count before each round the seat played."""
    bets = sorted(counts)
    rows = load_seat_rounds(con, shift_windows(con, config, config.zone_for(con)), bets)
    if not rows:
        return []
    segments = load_segments(con, sorted({(r[1], r[3]) for r in rows}))
    true: dict[tuple[str, str, str], dict[int, RoundCount]] = {}
    for (table, shoe), (decks, segs) in segments.items():
        if decks is None:  # no shoe_start: the shoe's size is unknown, its count too
            continue
        for bet in bets:
            true[(bet, table, shoe)] = {c.round: c for c in shoe_counts(counts[bet], decks, segs)}
    pits = _pits(con)
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


def compute(
    con: duckdb.DuckDBPyConnection, config: PropertyConfig
) -> tuple[list[Finding], int]:
    """play.side_bet_counting over the whole database, and the number of (table, seat, bet,
    shift) tested. Reads only."""
    counts = load_counts()
    return counting_findings(seat_series(con, config, counts), counts)


def side_bet_findings(
    con: duckdb.DuckDBPyConnection, run_id: int, config: PropertyConfig
) -> dict[str, Any]:
    """play.side_bet_counting over every shift in the database, recorded, and the standing
    ones the data no longer supports withdrawn, in one transaction."""
    found, tested = compute(con, config)
    new, withdrawn = findings.replace_pass(con, run_id, "side_bet_pass_findings", found, [CODE])
    return {"seat_shift_bets_tested": tested, "findings": len(found), "findings_new": new,
            "findings_withdrawn": withdrawn}
