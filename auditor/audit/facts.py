"""Per-round facts for the verdict (auditor.replay.verdict), aggregated by DuckDB.

One row per round and one per (round, seat, bet), in plain integers: the encodings are
described on verdict.Rounds and verdict.Stakes. The aggregates read only the events of the
shoes being audited, within each shoe's seq range, and group them by an exact integer round
key (shoe number * 2**24 + round), so auditing the newest rounds of a big database does not
read all of it. A few narrow aggregates rather than one wide one: DuckDB's cost grows with
every aggregate function and group, and each class of event has its own.

Which event types are counted comes from the vocabulary: a round event type the verdict does
not understand (auditor.replay.verdict.UNDERSTOOD) is counted in `n_other`, and the round goes
to check_round, so a type added to the vocabulary is never silently skipped.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from auditor.replay.verdict import (
    BET_CODES,
    LIMIT_CENTS,
    LIMIT_SEQ,
    MAX_SEAT,
    OTHER_BET,
    POSITIONS,
    UNDERSTOOD,
    Rounds,
    Stakes,
    field_names,
)
from auditor.store.events import ROUND_EVENTS
from auditor.store.sql import quote

OTHER_TYPES = tuple(t for t in ROUND_EVENTS if t not in UNDERSTOOD)
ROUND_KEY = 1 << 24  # rounds numbered this high or higher are not keyed (not clean)
SEAT_KEYS = 1 << 20  # settlement keys are seat * 16 + bet; higher seats get key -1


def _types(types: tuple[str, ...]) -> str:
    return ", ".join(map(quote, types)) or "NULL"


_SHOES = """
CREATE OR REPLACE TEMP TABLE _rf_shoe AS
SELECT table_id, shoe, min(first_seq) AS lo, max(last_seq) AS hi,
       (row_number() OVER ())::BIGINT AS sid
FROM {rounds} GROUP BY ALL
"""
_KEYS = f"""
CREATE OR REPLACE TEMP TABLE _rf_rh AS
SELECT r.rid, s.sid * {ROUND_KEY} + r.round AS h
FROM {{rounds}} r JOIN _rf_shoe s USING (table_id, shoe)
WHERE r.round < {ROUND_KEY}
"""
_SPAN = (
    "events e JOIN _rf_shoe s ON e.table_id = s.table_id AND e.shoe = s.shoe "
    f"AND e.seq BETWEEN s.lo AND s.hi AND e.round < {ROUND_KEY}"
)
_RK = f"s.sid * {ROUND_KEY} + e.round AS h"
# A card as ingest normalises it ('Ts'); check_round could not value any other.
_CARD_OK = (
    "coalesce(length(e.card) = 2 AND instr('A23456789TJQK', left(e.card, 1)) > 0 "
    "AND instr('cdhs', right(e.card, 1)) > 0, false)"
)
_CARDS = f"""
CREATE OR REPLACE TEMP TABLE _rf_c AS
SELECT e.sid * {ROUND_KEY} + e.round AS h,
  sum(CASE e.to_hand WHEN 'player' THEN 1 WHEN 'banker' THEN 256 ELSE 65536 END
      + CASE WHEN {_CARD_OK} THEN 0 ELSE 65536 END)::BIGINT AS nc,
  max(CASE WHEN e.to_hand = 'player' THEN e.seq * 16 + v END) AS p_hi,
  min(CASE WHEN e.to_hand = 'player' THEN e.seq END) AS p_lo,
  sum(CASE WHEN e.to_hand = 'player' THEN e.seq * 256 + v END)::BIGINT AS p_sum,
  max(CASE WHEN e.to_hand = 'banker' THEN e.seq * 16 + v END) AS b_hi,
  min(CASE WHEN e.to_hand = 'banker' THEN e.seq END) AS b_lo,
  sum(CASE WHEN e.to_hand = 'banker' THEN e.seq * 256 + v END)::BIGINT AS b_sum
FROM (SELECT e.*, s.sid, instr('A23456789', left(e.card, 1)) AS v FROM {_SPAN}
      WHERE e.type = 'card' AND e.seq < {LIMIT_SEQ}) e
GROUP BY ALL
"""
_RESULT = (
    "coalesce(e.player_count * 100 + e.banker_count * 10 + CASE e.winner WHEN 'player' "
    "THEN 0 WHEN 'banker' THEN 1 WHEN 'tie' THEN 2 END, -1)"
)
_ANNOUNCE = f"""
CREATE OR REPLACE TEMP TABLE _rf_a AS
SELECT {_RK},
  sum(CASE e.kind WHEN 'result' THEN 1 WHEN 'tie_hand' THEN 256 WHEN 'dragon_7' THEN 65536
      WHEN 'panda_8' THEN 16777216 WHEN 'total_cards' THEN 4294967296 ELSE 0 END)::BIGINT AS na,
  min(CASE WHEN e.kind = 'result' THEN {_RESULT} END) AS res_lo,
  max(CASE WHEN e.kind = 'result' THEN {_RESULT} END) AS res_hi,
  min(CASE WHEN e.kind = 'total_cards' THEN coalesce(e.count, -1) END) AS tc_lo,
  max(CASE WHEN e.kind = 'total_cards' THEN coalesce(e.count, -1) END) AS tc_hi
FROM {_SPAN} WHERE e.type = 'announce' GROUP BY ALL
"""
# Pays and vigorish in seq order without a sort: a 6-bit code each at bit 6 x (seq % 10) of
# one sum, exact while they span fewer than 10 seqs and seats stay at or below 30.
_MOVES = f"""
CREATE OR REPLACE TEMP TABLE _rf_m AS
SELECT h, CASE WHEN mv_ok THEN mv::BIGINT ELSE 0 END AS mv, mv_ok, mv_lo, col_hi FROM (
  SELECT {_RK},
    sum(CASE WHEN e.type <> 'collect' AND e.seat BETWEEN 0 AND {MAX_SEAT}
        THEN (e.seat * 2 + (e.type = 'vig')::INT + 1) << (6 * (e.seq % {POSITIONS})) END) AS mv,
    min(CASE WHEN e.type <> 'collect' THEN e.seq END) AS mv_lo,
    coalesce(max(CASE WHEN e.type <> 'collect' THEN e.seq END) - min(CASE WHEN e.type <>
      'collect' THEN e.seq END) < {POSITIONS} AND max(CASE WHEN e.type <> 'collect' THEN
      coalesce(e.seat, 999) END) <= {MAX_SEAT}, false) AS mv_ok,
    max(CASE WHEN e.type = 'collect' THEN e.seq END) AS col_hi
  FROM {_SPAN} WHERE e.type IN ('pay', 'vig', 'collect') GROUP BY ALL
)
"""
_OTHER = f"""
CREATE OR REPLACE TEMP TABLE _rf_x AS
SELECT {_RK}, count(*) AS n_other FROM {_SPAN}
WHERE e.type IN ({_types(OTHER_TYPES)}) GROUP BY ALL
"""
_CENTS = "CAST(e.amount * 100 AS BIGINT)"  # exact: amounts are DECIMAL(18,2)
_BETS = " ".join(f"WHEN {quote(b)} THEN {i}" for i, b in enumerate(BET_CODES))
_STAKES = f"""
CREATE OR REPLACE TEMP TABLE _rf_k AS
SELECT rh.rid - 1 AS pos, k.kidx, k.kc,
  CASE WHEN big THEN 0 ELSE coalesce(stake, 0)::BIGINT END AS stake_c,
  CASE WHEN big THEN 0 ELSE coalesce(settled, 0)::BIGINT END AS settled_c,
  CASE WHEN big THEN 0 ELSE coalesce(vig, 0)::BIGINT END AS vig_c, big
FROM (
  SELECT *, coalesce(greatest(stake, settled, vig) >= {LIMIT_CENTS}, false) AS big FROM (
    SELECT {_RK},
      CASE WHEN coalesce(e.seat, 0) NOT BETWEEN 0 AND {SEAT_KEYS - 1} THEN -1
        ELSE coalesce(e.seat, 0) * 16 + CASE WHEN e.type = 'vig' THEN 1
          ELSE CASE e.bet {_BETS} ELSE {OTHER_BET} END END
      END AS kidx,
      sum(CASE e.type WHEN 'wager' THEN 1 WHEN 'pay' THEN 256 WHEN 'collect' THEN 65536
          WHEN 'push' THEN 16777216 ELSE 4294967296 END)::BIGINT AS kc,
      sum(CASE WHEN e.type = 'wager' THEN {_CENTS} END) AS stake,
      sum(CASE WHEN e.type IN ('pay', 'collect', 'push') THEN {_CENTS} END) AS settled,
      sum(CASE WHEN e.type = 'vig' THEN {_CENTS} END) AS vig
    FROM {_SPAN} WHERE e.type IN ('wager', 'pay', 'collect', 'push', 'vig') GROUP BY ALL
  )
) k JOIN _rf_rh rh USING (h)
"""
_ROUNDS = """
CREATE OR REPLACE TEMP TABLE _rf_r AS
SELECT r.rid, r.ctx, r.n, r.last_seq, rh.h IS NOT NULL AS keyed,
  coalesce(x.n_other, 0) AS n_other, coalesce(c.nc, 0) AS nc,
  coalesce(c.p_hi, 0) AS p_hi, coalesce(c.p_lo, 0) AS p_lo, coalesce(c.p_sum, 0) AS p_sum,
  coalesce(c.b_hi, 0) AS b_hi, coalesce(c.b_lo, 0) AS b_lo, coalesce(c.b_sum, 0) AS b_sum,
  coalesce(a.na, 0) AS na, coalesce(a.res_lo, -1) AS res_lo, coalesce(a.res_hi, -1) AS res_hi,
  coalesce(a.tc_lo, -1) AS tc_lo, coalesce(a.tc_hi, -1) AS tc_hi,
  coalesce(m.mv, 0) AS mv, coalesce(m.mv_ok, false) AS mv_ok,
  coalesce(m.mv_lo, -1) AS mv_lo, coalesce(m.col_hi, -1) AS col_hi
FROM {rounds} r
LEFT JOIN _rf_rh rh USING (rid)
LEFT JOIN _rf_c c USING (h)
LEFT JOIN _rf_a a USING (h)
LEFT JOIN _rf_m m USING (h)
LEFT JOIN _rf_x x USING (h)
"""
STEPS = (_SHOES, _KEYS, _CARDS, _ANNOUNCE, _MOVES, _OTHER, _STAKES, _ROUNDS)
SCRATCH = ("_rf_shoe", "_rf_rh", "_rf_c", "_rf_a", "_rf_m", "_rf_x", "_rf_k", "_rf_r")


def build(con: duckdb.DuckDBPyConnection, rounds: str) -> tuple[Rounds, Stakes]:
    """The facts of the rounds listed in table `rounds` (columns rid, numbered 1 to N,
    table_id, shoe, round, first_seq, last_seq, n, ctx), in rid order.

    Runs several statements; the caller owns the transaction."""
    for sql in STEPS:
        con.execute(sql.format(rounds=rounds))
    r = con.sql("SELECT * EXCLUDE (rid) FROM _rf_r ORDER BY rid").to_arrow_table()
    k = con.sql("SELECT * FROM _rf_k").to_arrow_table()
    for t in SCRATCH:
        con.execute(f"DROP TABLE IF EXISTS {t}")
    return (
        Rounds(**{n: _numpy(r.column(n)) for n in field_names(Rounds)}),
        Stakes(**{n: _numpy(k.column(n)) for n in field_names(Stakes)}),
    )


def _numpy(column: pa.ChunkedArray) -> np.ndarray:
    if pa.types.is_boolean(column.type):
        return np.asarray(column.to_numpy(), bool)
    return np.asarray(pc.cast(column, pa.int64()).to_numpy(), np.int64)
