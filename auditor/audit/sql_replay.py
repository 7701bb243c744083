"""The round replay vectorised in DuckDB SQL: the common checks of `check_round` for every
round of an audit at once, instead of a Python loop over rounds.

`auditor.replay.round.check_round` stays the reference: this path is tested against it round
for round (tests/test_replay_sql.py) and gives the same codes, seqs, fingerprints, messages,
expected and observed values, sources, times and evidence. It works in two passes, because a
night's rounds are nearly all clean and only the few that are not need their details:

1. Verdict, over every round (`_PASS1`): a few hash aggregates of plain integers, per class
   of event, grouped by an exact integer round key: the cards as per-hand counts, value sums
   and min/max/sum of seqs (a hand holds at most three cards, so min, max and sum place every
   card: no sort), the announcements as counts and min/max of what they said, the pays and
   vigorish packed into one integer by seq, the settlement keys (seat, bet) as counts and
   sums in cents. Joined with the rule pack's draw tables (bit masks) and payouts (exact
   integer arithmetic on cents) they say whether a round is provably clean; any round that
   is not, or that the verdict's encodings cannot hold, is flagged.
2. Findings, over the flagged rounds only (`_PASS2`): their events are read again and every
   finding is built as the reference builds it. This pass alone is a complete replay (the
   tests run it over every round with `flag_all`), so the verdict can only cost time, never
   a finding.

Rounds this path does not judge are left to the reference, never guessed at (table
`fallback`): rounds with a `void` or `irregularity` event or a chemin de fer event type, a
card that is not a normalised card dealt to the Player or the Banker, a hand with more than
three cards, a pay or vigorish at a seat numbered 2**20 or more; chemin de fer rounds (their
own replay, auditor.replay.chemin); rounds whose table context the audit cannot use (no
table_open, no rule pack, unknown variant); and rounds under a pack whose initial deal is
not Player, Banker, Player, Banker or whose variant lists more than two Banker-win
exceptions.

It relies on one invariant of the events table that ingest enforces: a table's `seq` values
are unique (a repeated seq is quarantined, an identical event from another file dropped), so
a seq names one event of a round.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import duckdb
import pyarrow as pa

from auditor.rules.pack import RulePack, RulePackError, load_pack
from auditor.store.events import ROUND_EVENTS

ROUND_TYPES = ", ".join(f"'{t}'" for t in ROUND_EVENTS)
# Event types the SQL path leaves to the reference: a void round is judged on its returns
# only, an irregularity by the pack's dispositions, and chemin de fer types do not belong in
# a punto banco round.
ODD_TYPES = ("void", "irregularity", "bank", "banco", "option", "commission", "bank_pass")
PBPB = ("player", "banker", "player", "banker")
# Bets pass 1 tells apart (by position); any other bet flags its round for pass 2.
BET_CODES = (
    "player",
    "banker",
    "tie",
    "dragon7",
    "panda8",
    "total_cards_4",
    "total_cards_5",
    "total_cards_6",
)
MAX_EXCEPTIONS = 2
SEAT_LIMIT = 1 << 20  # moves are encoded as seat * 2 + kind; larger seats go to the reference
_VIG_ROUNDING = {"exact_cents": 0, "down_to_cent": 1, "up_to_cent": 2}

PackLoader = Callable[[str, str], RulePack]


@dataclass(frozen=True)
class SqlReplay:
    """What `sql_round_findings` left behind, as temp tables on the connection.

    - `findings`: one row per finding, columns `auditor.store.findings.FINDING_COLUMNS` (expected,
      observed and evidence as JSON), ready for `findings.record(con, run, f"SELECT * FROM
      {findings}")`.
    - `judged`: the rounds the SQL path judged: table_id, shoe, round, events, last_seq,
      findings (the columns of round_audits before run_id and audited_at).
    - `fallback`: the rounds it did not judge: table_id, shoe, round, rid, reason. The caller
      must replay these with `check_round` (or skip them, as the audit run does for a table
      with no usable context); the SQL path has no findings for them. Reasons starting with
      "context:" are the rounds audit.run._context does not audit either.
    """

    findings: str
    judged: str
    fallback: str
    rounds_judged: int
    rounds_fallback: int
    findings_count: int

    def fallback_rounds(self, con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, int, str]]:
        """(table_id, shoe, round, reason) of every round left to the reference."""
        return con.execute(
            f"SELECT table_id, shoe, round, reason FROM {self.fallback} "
            "ORDER BY table_id, shoe, round"
        ).fetchall()


def sql_round_findings(
    con: duckdb.DuckDBPyConnection,
    rounds_table: str = "todo",
    *,
    packs: Mapping[tuple[str, str], RulePack] | None = None,
    loader: PackLoader | None = None,
    prefix: str = "replay_",
    flag_all: bool = False,
    timings: dict[str, float] | None = None,
) -> SqlReplay:
    """Replay the rounds listed in `rounds_table` in SQL and materialise their findings.

    `rounds_table` has the shape of the audit run's `todo` (table_id, shoe, round, first_seq,
    last_seq, n, ts, pit, game, jurisdiction, variant, seats, side_bets, procedure, ...); the
    `events` and `sources` tables are read for the rounds' events (types ROUND_EVENTS) and
    their file:line. `packs` maps (jurisdiction, game) to a loaded RulePack; a pair missing
    from it is loaded with `loader` (default `load_pack`), like the audit run does. `flag_all`
    skips the verdict and spells out every round (for tests: it shows the verdict never
    hides a finding). `timings`, if given, receives the seconds each step took, by the
    table it made. Results go to temp tables named `prefix` + findings / judged / fallback
    (replaced if they exist); scratch tables start with `_rp_` and are dropped.

    Runs several statements; the caller owns the transaction (the audit run does the whole
    audit in one).
    """
    names = SqlReplay(f"{prefix}findings", f"{prefix}judged", f"{prefix}fallback", 0, 0, 0)

    def run(sql: str) -> None:
        start = time.perf_counter()
        con.execute(sql)
        if timings is not None:
            m = _MADE.search(sql)
            key = m.group(1) if m else sql.split(None, 1)[0]
            timings[key] = timings.get(key, 0.0) + time.perf_counter() - start

    start = time.perf_counter()
    _contexts(con, rounds_table, packs or {}, loader or load_pack)
    _macros(con)
    if timings is not None:
        timings["contexts"] = time.perf_counter() - start
    run(_ROUNDS_SQL.format(rounds=rounds_table))
    run(_SHOES_SQL)
    run(_ROUND_KEYS_SQL)
    if flag_all:
        run("CREATE OR REPLACE TEMP TABLE _rp_flag0 AS SELECT rid FROM _rp_rounds WHERE ok")
    else:
        for sql in _PASS1:
            run(sql)
    for sql in _PASS2:
        run(sql.replace("__FALLBACK__", names.fallback))
    run(_FINDINGS_SQL.replace("__FINDINGS__", names.findings))
    run(_JUDGED_SQL.format(judged=names.judged, fallback=names.fallback, findings=names.findings))
    judged, fallback, found = con.execute(
        f"SELECT (SELECT count(*) FROM {names.judged}), (SELECT count(*) FROM "
        f"{names.fallback}), (SELECT count(*) FROM {names.findings})"
    ).fetchall()[0]
    for t in _SCRATCH:
        con.execute(f"DROP TABLE IF EXISTS {t}")
    return SqlReplay(names.findings, names.judged, names.fallback, judged, fallback, found)


_MADE = re.compile(r"TEMP TABLE (\w+)")


_SCRATCH = (
    "_rp_ctx",
    "_rp_pay",
    "_rp_rounds",
    "_rp_shoe",
    "_rp_rh",
    "_rp_c",
    "_rp_a",
    "_rp_m",
    "_rp_x",
    "_rp_kk",
    "_rp_r",
    "_rp_flag0",
    "_rp_fe",
    "_rp_o",
    "_rp_k",
    "_rp_kx",
    "_rp_vx",
    "_rp_flag",
    "_rp_fd",
)


# --- the rule packs as small tables ------------------------------------------------------


def _mask(cells: tuple[bool, ...]) -> int:
    return sum(1 << i for i, on in enumerate(cells) if on)


def _odds(f: Fraction) -> tuple[int, int]:
    return f.numerator, f.denominator


def _context_row(
    key: tuple,
    packs: Mapping[tuple[str, str], RulePack],
    loader: PackLoader,
    cache: dict[tuple[str, str], RulePack | str],
) -> tuple[dict[str, Any], list[tuple[str, int, int]]]:
    """The SQL parameters of one table context (jurisdiction, game, variant, procedure,
    side_bets), or a reason to leave its rounds to the reference; and its paytable rows."""
    jurisdiction, game, variant, procedure, side_bets = key
    row: dict[str, Any] = {"reason": None}
    if game is None:
        row["reason"] = "context: no table_open event before the round"
        return row, []
    if game == "chemin_de_fer":
        row["reason"] = "chemin de fer (auditor.replay.chemin replays it)"
        return row, []
    pk = (jurisdiction, game)
    if pk not in cache:
        if pk in packs:
            cache[pk] = packs[pk]
        else:
            try:
                cache[pk] = loader(jurisdiction, game)
            except (RulePackError, FileNotFoundError, KeyError) as e:
                cache[pk] = f"context: no usable rule pack ({e})"
    pack = cache[pk]
    if isinstance(pack, str):
        row["reason"] = pack
        return row, []
    if variant not in pack.variants:
        row["reason"] = f"context: variant {variant!r} not in rule pack {pack.id}"
        return row, []
    if tuple(pack.deal_order) != PBPB:
        row["reason"] = "pack: initial deal other than Player, Banker, Player, Banker"
        return row, []
    v = pack.variant(variant)
    if len(v.banker_exceptions) > MAX_EXCEPTIONS:
        row["reason"] = f"pack: more than {MAX_EXCEPTIONS} Banker-win exceptions"
        return row, []
    banker = _mask(pack.draw.banker)
    charged = bool(v.vig_charged.value) and v.vig_rate is not None
    rate = Fraction(v.vig_rate.value) if charged and v.vig_rate else Fraction(0)
    rounding = v.vig_rounding.value if v.vig_rounding else "exact_cents"
    row.update(
        nat_mask=_mask(pack.draw.natural),
        pl_mask=_mask(pack.draw.player),
        bk_lo=banker & ((1 << 55) - 1),
        bk_hi=banker >> 55,
        # vig_charged drives vig.not_allowed and the procedure steps; `charged` (with a rate)
        # drives what is owed, as settle.vigorish_owed does.
        vig_charged=bool(v.vig_charged.value),
        vig_num=rate.numerator,
        vig_den=rate.denominator,
        vig_round=_VIG_ROUNDING[rounding],
        push_on_tie=bool(pack.value("settlement.push_on_tie", True)),
        proc_check=procedure is not None and procedure in pack.procedures,
        variant_name=v.name,
        tc_offered=any(b.startswith("total_cards") for b in (side_bets or ())),
    )
    for i in range(MAX_EXCEPTIONS):
        ex = v.banker_exceptions[i] if i < len(v.banker_exceptions) else None
        row[f"ex{i}_count"] = None if ex is None else ex.count
        row[f"ex{i}_cards"] = None if ex is None else ex.cards
        row[f"ex{i}_push"] = None if ex is None else ex.pays is None
        row[f"ex{i}_num"] = None if ex is None or ex.pays is None else ex.pays.numerator
        row[f"ex{i}_den"] = None if ex is None or ex.pays is None else ex.pays.denominator
    for kind in ("tie_hand", "total_cards", "dragon_7", "panda_8"):
        rule = pack.announcements.get(kind)
        applies = rule is not None and (rule.variants is None or variant in rule.variants)
        row[f"due_{kind}"] = rule.value if applies and rule is not None else None
    pays = [(bet, *_odds(v.pays(bet))) for bet in ("player", "banker", "tie")]
    for name, side in pack.side_bets.items():
        if side.variants is None or variant in side.variants:
            pays.append((name, *_odds(side.pays.value)))
    return row, pays


_CTX_TYPES: dict[str, pa.DataType] = {
    "ctx_id": pa.int64(),
    "reason": pa.string(),
    "nat_mask": pa.int64(),
    "pl_mask": pa.int64(),
    "bk_lo": pa.int64(),
    "bk_hi": pa.int64(),
    "vig_charged": pa.bool_(),
    "vig_num": pa.int64(),
    "vig_den": pa.int64(),
    "vig_round": pa.int64(),
    "push_on_tie": pa.bool_(),
    "proc_check": pa.bool_(),
    "variant_name": pa.string(),
    "tc_offered": pa.bool_(),
    **{
        f"ex{i}_{f}": (pa.bool_() if f == "push" else pa.int64())
        for i in range(MAX_EXCEPTIONS)
        for f in ("count", "cards", "push", "num", "den")
    },
    **{f"due_{k}": pa.string() for k in ("tie_hand", "total_cards", "dragon_7", "panda_8")},
}


def _contexts(
    con: duckdb.DuckDBPyConnection,
    rounds: str,
    packs: Mapping[tuple[str, str], RulePack],
    loader: PackLoader,
) -> None:
    """`_rp_ctx` (one row per distinct table context in `rounds`, keyed by its five columns)
    and `_rp_pay` (ctx_id, bet, num, den: the winnings per unit of each wager it settles)."""
    keys = con.execute(
        f"SELECT DISTINCT jurisdiction, game, variant, procedure, side_bets FROM {rounds}"
    ).fetchall()
    cache: dict[tuple[str, str], RulePack | str] = {}
    rows: list[dict[str, Any]] = []
    pays: list[tuple[int, str, int, int]] = []
    for i, key in enumerate(keys):
        row, paytable = _context_row(key, packs, loader, cache)
        rows.append({"ctx_id": i, **row})
        pays += [(i, *p) for p in paytable]
    ctx = pa.table(
        {
            "jurisdiction": pa.array([k[0] for k in keys], pa.string()),
            "game": pa.array([k[1] for k in keys], pa.string()),
            "variant": pa.array([k[2] for k in keys], pa.string()),
            "procedure": pa.array([k[3] for k in keys], pa.int64()),
            "side_bets": pa.array([k[4] for k in keys], pa.list_(pa.string())),
            **{c: pa.array([r.get(c) for r in rows], t) for c, t in _CTX_TYPES.items()},
        }
    )
    pay = pa.table(
        {
            "ctx_id": pa.array([p[0] for p in pays], pa.int64()),
            "bet": pa.array([p[1] for p in pays], pa.string()),
            "bet_code": pa.array(
                [BET_CODES.index(p[1]) if p[1] in BET_CODES else None for p in pays], pa.int64()
            ),
            "num": pa.array([p[2] for p in pays], pa.int64()),
            "den": pa.array([p[3] for p in pays], pa.int64()),
        }
    )
    for name, table in (("_rp_ctx", ctx), ("_rp_pay", pay)):
        con.register("_rp_arrow", table)
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM _rp_arrow")
        con.unregister("_rp_arrow")


def _macros(con: duckdb.DuckDBPyConnection) -> None:
    for m in _MACROS:
        con.execute(m)


_MACROS = (
    # Cents (HUGEINT) as the reference writes money: "17.50".
    "CREATE OR REPLACE TEMP MACRO _rp_money(c) AS "
    "CAST(CAST(c AS DECIMAL(38,0)) * 0.01 AS DECIMAL(38,2))::VARCHAR",
    # round_half_up(cents * num / den), as settle.times does with Decimal.
    "CREATE OR REPLACE TEMP MACRO _rp_times(c, num, den) AS (2 * c * num + den) // (2 * den)",
    "CREATE OR REPLACE TEMP MACRO _rp_cents(amount) AS CAST(amount * 100 AS HUGEINT)",
    # A card as ingest normalises it ('Ts'); the reference could not value any other.
    "CREATE OR REPLACE TEMP MACRO _rp_card_ok(card) AS coalesce(length(card) = 2 "
    "AND instr('A23456789TJQK', left(card, 1)) > 0 AND instr('cdhs', right(card, 1)) > 0, "
    "false)",
    # Whether a Banker-win exception (count, cards) applies to a wager on `bet`.
    "CREATE OR REPLACE TEMP MACRO _rp_exc(bet, bc, nb, cnt, cards) AS "
    "bet = 'banker' AND bc = cnt AND (cards IS NULL OR nb = cards)",
    # How a wager on `bet` is settled for the outcome (settle.expected_settlement).
    """CREATE OR REPLACE TEMP MACRO _rp_how(bet, win, bc, nb, dragon7, panda8, total, push_on_tie,
                                          e0c, e0k, e0p, e1c, e1k, e1p) AS CASE
         WHEN bet IN ('player', 'banker') AND win = 'tie'
           THEN CASE WHEN push_on_tie THEN 'push' ELSE 'collect' END
         WHEN bet IN ('player', 'banker') AND win <> bet THEN 'collect'
         WHEN _rp_exc(bet, bc, nb, e0c, e0k) THEN CASE WHEN e0p THEN 'push' ELSE 'pay' END
         WHEN _rp_exc(bet, bc, nb, e1c, e1k) THEN CASE WHEN e1p THEN 'push' ELSE 'pay' END
         WHEN bet IN ('player', 'banker') THEN 'pay'
         WHEN bet = 'tie' THEN CASE WHEN win = 'tie' THEN 'pay' ELSE 'collect' END
         WHEN CASE WHEN bet = 'dragon7' THEN dragon7 WHEN bet = 'panda8' THEN panda8
                   WHEN starts_with(bet, 'total_cards_') THEN substr(bet, 13) = total::VARCHAR
                   ELSE false END THEN 'pay'
         ELSE 'collect' END""",
    # Its amount in cents: the winnings for a pay, the stake for a collect or a push.
    """CREATE OR REPLACE TEMP MACRO _rp_amount(how, stake_c, bet, bc, nb, num, den, e0c, e0k,
                                             e0n, e0d, e1c, e1k, e1n, e1d) AS CASE
         WHEN how IS NULL THEN NULL WHEN how <> 'pay' THEN stake_c
         WHEN _rp_exc(bet, bc, nb, e0c, e0k) THEN _rp_times(stake_c, e0n, e0d)
         WHEN _rp_exc(bet, bc, nb, e1c, e1k) THEN _rp_times(stake_c, e1n, e1d)
         ELSE _rp_times(stake_c, num, den) END""",
    # Whether an announcement due `when` (rulepack.ANNOUNCE_WHEN) is due in the round.
    """CREATE OR REPLACE TEMP MACRO _rp_due(when_, win, tc_offered, dragon7, panda8) AS CASE when_
         WHEN 'always' THEN true WHEN 'tie' THEN win = 'tie'
         WHEN 'total_card_wagers_offered' THEN tc_offered WHEN 'dragon7_hand' THEN dragon7
         WHEN 'panda8_hand' THEN panda8 ELSE false END""",
    # Vigorish owed on winnings of win_c cents (settle.vigorish_owed): rate num/den, rounded
    # half up (0), down (1) or up (2) to the cent.
    """CREATE OR REPLACE TEMP MACRO _rp_owed(win_c, num, den, mode) AS CASE
         WHEN win_c IS NULL THEN NULL
         WHEN mode = 0 THEN _rp_times(win_c, num, den)
         WHEN mode = 1 THEN win_c * num // den
         ELSE (win_c * num + den - 1) // den END""",
    """CREATE OR REPLACE TEMP MACRO _rp_bet_name(b) AS CASE
         WHEN b IS NULL THEN 'unnamed'
         WHEN starts_with(b, 'total_cards_') THEN 'Total Cards ' || substr(b, 13)
         WHEN b = 'player' THEN 'Player' WHEN b = 'banker' THEN 'Banker'
         WHEN b = 'tie' THEN 'Tie' WHEN b = 'dragon7' THEN 'Dragon 7'
         WHEN b = 'panda8' THEN 'Panda 8' ELSE b END""",
    "CREATE OR REPLACE TEMP MACRO _rp_title(h) AS upper(h[1]) || h[2:]",
    # Sort key of a pay/vig step (code = seat * 2 + kind, kind 0 pay, 1 vig) under
    # procedure p: 1 pays then vigs, 2 vigs then pays, 3 seat by seat pay then vig,
    # 4 seat by seat vig then pay; seats from the highest down (auditor.replay.order).
    """CREATE OR REPLACE TEMP MACRO _rp_key(p, c) AS CASE p
         WHEN 1 THEN (c % 2) * 4294967296 - c // 2
         WHEN 2 THEN (1 - c % 2) * 4294967296 - c // 2
         WHEN 3 THEN -2 * (c // 2) + c % 2
         ELSE -2 * (c // 2) + 1 - c % 2 END""",
    # Whether the step codes in event order fit procedure p: consecutive equal codes are
    # one step; every other pair must rise in p's order.
    """CREATE OR REPLACE TEMP MACRO _rp_fits(p, mv) AS coalesce(list_bool_and(
         list_transform(mv, lambda c, i: i = 1 OR mv[i - 1] = c
                                         OR _rp_key(p, mv[i - 1]) < _rp_key(p, c))), true)""",
    # The steps (codes, consecutive repeats merged) in the order procedure p requires.
    """CREATE OR REPLACE TEMP MACRO _rp_required(p, steps) AS list_transform(
         list_sort(list_transform(list_distinct(steps), lambda c: {'k': _rp_key(p, c), 'c': c})),
         lambda s: s.c)""",
    "CREATE OR REPLACE TEMP MACRO _rp_step_text(c) AS CASE WHEN c % 2 = 0 "
    "THEN 'paid seat ' || (c // 2) ELSE 'took vigorish at seat ' || (c // 2) END",
    "CREATE OR REPLACE TEMP MACRO _rp_step_json(c) AS "
    "CASE WHEN c % 2 = 0 THEN 'pay ' ELSE 'vig ' END || (c // 2)",
    "CREATE OR REPLACE TEMP MACRO _rp_hand(name, cards, cnt) AS CASE WHEN len(cards) = 0 "
    "THEN name || ' (no cards)' ELSE name || ' ' || array_to_string(cards, ' ') || ' (' || "
    "cnt || ')' END",
    "CREATE OR REPLACE TEMP MACRO _rp_winner_text(w) AS CASE WHEN w = 'tie' THEN 'a tie' "
    "WHEN w IS NULL THEN 'no winner' ELSE 'a ' || _rp_title(w) || ' win' END",
    "CREATE OR REPLACE TEMP MACRO _rp_result_text(pc, bc, w) AS CASE WHEN w = 'tie' "
    "THEN 'a tie at ' || pc WHEN w = 'player' THEN 'a Player win, ' || pc || ' to ' || bc "
    "ELSE 'a Banker win, ' || bc || ' to ' || pc END",
    "CREATE OR REPLACE TEMP MACRO _rp_done(t) AS CASE t WHEN 'pay' THEN 'paid' "
    "WHEN 'collect' THEN 'collected' WHEN 'push' THEN 'returned' END",
)


# The rounds with their context and a dense id.
_ROUNDS_SQL = """
CREATE OR REPLACE TEMP TABLE _rp_rounds AS
SELECT (row_number() OVER ())::BIGINT AS rid, r.table_id, r.shoe, r.round, r.first_seq,
       r.last_seq, r.n, r.pit, c.ctx_id, c.reason IS NULL AS ok, c.reason,
       coalesce(c.vig_charged, false) AS charged
FROM {rounds} r
JOIN _rp_ctx c
  ON c.jurisdiction IS NOT DISTINCT FROM r.jurisdiction AND c.game IS NOT DISTINCT FROM r.game
 AND c.variant IS NOT DISTINCT FROM r.variant AND c.procedure IS NOT DISTINCT FROM r.procedure
 AND c.side_bets IS NOT DISTINCT FROM r.side_bets
"""


# --- pass 1: the verdict over every round ------------------------------------------------
#
# Whether each round is provably clean, from a few hash aggregates of plain numbers. The
# aggregates are per class of event (cards, announcements, pays and vigorish, settlement
# keys), each over only its rows, and pack several counts into one integer: in DuckDB the
# cost of a grouped aggregate grows with every aggregate function and every group, so fewer
# of both is what makes this pass fast. Anything the pass cannot prove clean (including any
# round the SQL path leaves to the reference) is flagged, and pass 2 decides it exactly; a
# flag costs time, never correctness. Packed fields are 8 bits wide, so rounds of 256 events
# or more are flagged, as are seqs of 2**40 or more.

# The shoes of the rounds to judge, each with a number and the seq range of those rounds.
# The aggregates read only these events (so auditing the newest rounds of a big database does
# not read all of it) and group them by sid * 2**24 + round, an exact integer round key.
_SHOES_SQL = """
CREATE OR REPLACE TEMP TABLE _rp_shoe AS
SELECT table_id, shoe, min(first_seq) AS lo, max(last_seq) AS hi,
       (row_number() OVER ())::BIGINT AS sid
FROM _rp_rounds WHERE ok GROUP BY ALL
"""
_ROUND_KEYS_SQL = """
CREATE OR REPLACE TEMP TABLE _rp_rh AS
SELECT r.rid, s.sid * 16777216 + r.round AS h
FROM _rp_rounds r JOIN _rp_shoe s USING (table_id, shoe)
WHERE r.ok AND r.round < 16777216
"""
_SPAN = (
    "events e JOIN _rp_shoe s ON e.table_id = s.table_id AND e.shoe = s.shoe "
    "AND e.seq BETWEEN s.lo AND s.hi AND e.round < 16777216"
)
_RK = "s.sid * 16777216 + e.round AS h"

# Cards, per hand: the count (and bad cards) packed in `nc`; max(seq * 16 + value) gives the
# last card's seq and value; min(seq); sum(seq * 256 + value) gives both sums. With at most
# three cards a hand these place every card (the middle seq is sum - min - max).
_P1_CARDS_SQL = f"""
CREATE OR REPLACE TEMP TABLE _rp_c AS
SELECT e.sid * 16777216 + e.round AS h,
  sum(CASE e.to_hand WHEN 'player' THEN 1 WHEN 'banker' THEN 256 ELSE 65536 END
      + CASE WHEN _rp_card_ok(e.card) THEN 0 ELSE 65536 END)::BIGINT AS nc,
  max(CASE WHEN e.to_hand = 'player' THEN e.seq * 16 + v END) AS p_hi,
  min(CASE WHEN e.to_hand = 'player' THEN e.seq END) AS p_lo,
  sum(CASE WHEN e.to_hand = 'player' THEN e.seq * 256 + v END)::BIGINT AS p_sum,
  max(CASE WHEN e.to_hand = 'banker' THEN e.seq * 16 + v END) AS b_hi,
  min(CASE WHEN e.to_hand = 'banker' THEN e.seq END) AS b_lo,
  sum(CASE WHEN e.to_hand = 'banker' THEN e.seq * 256 + v END)::BIGINT AS b_sum
FROM (SELECT e.*, s.sid, instr('A23456789', left(e.card, 1)) AS v FROM {_SPAN}
      WHERE e.type = 'card' AND e.seq < 1099511627776) e
GROUP BY ALL
"""

# Announcements: counts by kind packed in `na`; what the results said as one number
# (player * 100 + banker * 10 + winner), min and max; the total-card counts, min and max.
_P1_ANNOUNCE_SQL = f"""
CREATE OR REPLACE TEMP TABLE _rp_a AS
SELECT {_RK},
  sum(CASE e.kind WHEN 'result' THEN 1 WHEN 'tie_hand' THEN 256 WHEN 'dragon_7' THEN 65536
      WHEN 'panda_8' THEN 16777216 WHEN 'total_cards' THEN 4294967296 ELSE 0 END)::BIGINT AS na,
  min(CASE WHEN e.kind = 'result' THEN coalesce(e.player_count * 100 + e.banker_count * 10
      + CASE e.winner WHEN 'player' THEN 0 WHEN 'banker' THEN 1 WHEN 'tie' THEN 2 END, -1) END)
    AS res_lo,
  max(CASE WHEN e.kind = 'result' THEN coalesce(e.player_count * 100 + e.banker_count * 10
      + CASE e.winner WHEN 'player' THEN 0 WHEN 'banker' THEN 1 WHEN 'tie' THEN 2 END, -1) END)
    AS res_hi,
  min(CASE WHEN e.kind = 'total_cards' THEN coalesce(e.count, -1) END) AS tc_lo,
  max(CASE WHEN e.kind = 'total_cards' THEN coalesce(e.count, -1) END) AS tc_hi
FROM {_SPAN} WHERE e.type = 'announce' GROUP BY ALL
"""

# Pays and vigorish in seq order without a sort: each as a 6-bit code (seat * 2 + kind + 1)
# at bit 6 * (seq % 10) of one sum, exact while they span at most 10 seqs and seats stay
# below 31 (else the round is flagged); the last collection's seq for collect-after-pay.
_P1_MOVES_SQL = f"""
CREATE OR REPLACE TEMP TABLE _rp_m AS
SELECT {_RK},
  sum(CASE WHEN e.type <> 'collect' AND e.seat BETWEEN 0 AND 30
      THEN (e.seat * 2 + (e.type = 'vig')::INT + 1) << (6 * (e.seq % 10)) END) AS mv,
  min(CASE WHEN e.type <> 'collect' THEN e.seq END) AS mv_lo,
  max(CASE WHEN e.type <> 'collect' THEN e.seq END) AS mv_hi,
  max(CASE WHEN e.type <> 'collect' THEN coalesce(e.seat, 999) END) AS mv_seat,
  max(CASE WHEN e.type = 'collect' THEN e.seq END) AS col_hi
FROM {_SPAN} WHERE e.type IN ('pay', 'vig', 'collect') GROUP BY ALL
"""

_P1_ODD_SQL = f"""
CREATE OR REPLACE TEMP TABLE _rp_x AS
SELECT DISTINCT {_RK} FROM {_SPAN} WHERE e.type IN {ODD_TYPES}
"""

_P1_CENTS = "CAST(e.amount * 100 AS BIGINT)"  # exact: amounts are DECIMAL(18,2)

# Settlement keys (seat, bet) as seat * 16 + bet code (BET_CODES; 15 for any other bet),
# with each seat's vigorish in its Banker key: counts by type packed in `kc`, and the stake,
# the settled amount and the vigorish in cents.
_P1_KEYS_SQL = f"""
CREATE OR REPLACE TEMP TABLE _rp_kk AS
SELECT {_RK}, CASE WHEN coalesce(e.seat, 0) NOT BETWEEN 0 AND {SEAT_LIMIT - 1} THEN -1
    ELSE coalesce(e.seat, 0) * 16 + CASE WHEN e.type = 'vig' THEN 1 ELSE CASE e.bet
    {" ".join(f"WHEN '{b}' THEN {i}" for i, b in enumerate(BET_CODES))} ELSE 15 END END
  END AS kidx,
  sum(CASE e.type WHEN 'wager' THEN 1 WHEN 'pay' THEN 256 WHEN 'collect' THEN 65536
      WHEN 'push' THEN 16777216 ELSE 4294967296 END)::BIGINT AS kc,
  try_cast(sum(CASE WHEN e.type = 'wager' THEN {_P1_CENTS} END) AS BIGINT) AS stake_c,
  try_cast(sum(CASE WHEN e.type IN ('pay', 'collect', 'push') THEN {_P1_CENTS} END)
           AS BIGINT) AS settled_c,
  try_cast(sum(CASE WHEN e.type = 'vig' THEN {_P1_CENTS} END) AS BIGINT) AS vig_c
FROM {_SPAN} WHERE e.type IN ('wager', 'pay', 'collect', 'push', 'vig') GROUP BY ALL
"""

POSITIONS = 10  # pays and vigorish packed per round (6 bits each in a BIGINT)


def _packed_moves() -> tuple[str, str, str]:
    """SQL for the packed pays and vigorish (_rp_m.mv): select items c0..c9 (the 6-bit code
    at each position, from the first pay or vigorish on), k0..k9 (the procedure key of each,
    NULL where there is none or where the variant charges no vigorish), and the condition
    that the keys never go down in seq order, which is "the round fits the procedure in
    force" (a key is injective on (kind, seat), so repeats of one step are one step).

    Unrolled over the positions, in separate query levels so DuckDB computes each item once:
    a list lambda costs it about a microsecond a round.
    """
    codes = ",\n    ".join(
        f"(mv >> (6 * ((mv_lo + {i}) % {POSITIONS}))) & 63 AS c{i}" for i in range(POSITIONS)
    )
    keys = ",\n    ".join(
        f"CASE WHEN c{i} > 0 AND (vig_charged OR c{i} % 2 = 1) "
        f"THEN _rp_key(procedure, c{i} - 1) END AS k{i}"
        for i in range(POSITIONS)
    )
    rising = " AND ".join(
        f"coalesce(k{i} >= greatest({', '.join(f'k{j}' for j in range(i))}), true)"
        for i in range(1, POSITIONS)
    )
    return codes, keys, f"({rising})"


_CODES, _KEYS, _RISING = _packed_moves()

# The round verdict: outcome, deal and draws from the card numbers, then every round-level
# check; `clean` only where each of them provably passes.
_P1_ROUNDS_SQL = f"""
CREATE OR REPLACE TEMP TABLE _rp_r AS
WITH l1 AS (
  SELECT r.rid, h, r.ctx_id, r.n, r.last_seq, c.procedure,
    c.proc_check, c.vig_charged, c.nat_mask, c.pl_mask, c.bk_lo, c.bk_hi, c.tc_offered,
    c.due_tie_hand, c.due_total_cards, c.due_dragon_7, c.due_panda_8,
    coalesce(k.nc, 0) & 255 AS np, (coalesce(k.nc, 0) >> 8) & 255 AS nb,
    coalesce(k.nc, 0) >> 16 AS nbad, k.p_lo, k.b_lo, k.p_hi >> 4 AS p_last,
    k.b_hi >> 4 AS b_last, k.p_hi & 15 AS p_lastv, k.b_hi & 15 AS b_lastv,
    k.p_sum >> 8 AS p_ss, k.b_sum >> 8 AS b_ss, k.p_sum & 255 AS p_vs, k.b_sum & 255 AS b_vs,
    coalesce(a.na, 0) AS na, a.res_lo, a.res_hi, a.tc_lo, a.tc_hi, m.mv_lo, m.col_hi,
    coalesce(m.mv_hi - m.mv_lo < {POSITIONS} AND m.mv_seat <= 30, false) AS mv_ok,
    CASE WHEN m.mv_hi - m.mv_lo < {POSITIONS} AND m.mv_seat <= 30 THEN m.mv::BIGINT END AS mv,
    x.h IS NOT NULL AS odd
  FROM _rp_rounds r
  JOIN _rp_rh USING (rid)
  JOIN _rp_ctx c ON c.ctx_id = r.ctx_id
  LEFT JOIN _rp_c k USING (h)
  LEFT JOIN _rp_a a USING (h)
  LEFT JOIN _rp_m m USING (h)
  LEFT JOIN _rp_x x USING (h)
  WHERE r.ok
), l2 AS (
  SELECT *,
    CASE np WHEN 2 THEN p_last WHEN 3 THEN p_ss - p_lo - p_last END AS p_2nd,
    CASE nb WHEN 2 THEN b_last WHEN 3 THEN b_ss - b_lo - b_last END AS b_2nd,
    p_vs % 10 AS pc, b_vs % 10 AS bc, np + nb AS total,
    (p_vs - CASE WHEN np = 3 THEN p_lastv ELSE 0 END) % 10 AS p2c,
    (b_vs - CASE WHEN nb = 3 THEN b_lastv ELSE 0 END) % 10 AS b2c,
    na & 255 AS n_res, (na >> 8) & 255 AS n_tie_hand, (na >> 16) & 255 AS n_dragon_7,
    (na >> 24) & 255 AS n_panda_8, na >> 32 AS n_total_cards,
    {_CODES}
  FROM l1
), l3 AS (
  SELECT *,
    coalesce(np IN (2, 3) AND nb IN (2, 3) AND p_lo < b_lo AND b_lo < p_2nd AND p_2nd < b_2nd
             AND (np = 2 OR p_last > b_2nd) AND (nb = 2 OR b_last > b_2nd)
             AND (np = 2 OR nb = 2 OR p_last < b_last), false) AS deal_ok,
    CASE WHEN pc > bc THEN 'player' WHEN bc > pc THEN 'banker' ELSE 'tie' END AS win,
    (nat_mask >> p2c) & 1 = 1 OR (nat_mask >> b2c) & 1 = 1 AS nat,
    b2c * 11 + CASE WHEN np = 3 THEN p_lastv ELSE 10 END AS bk_cell,
    {_KEYS}
  FROM l2
), l4 AS (
  SELECT *,
    NOT nat AND (pl_mask >> p2c) & 1 = 1 AS req_p,
    NOT nat AND CASE WHEN bk_cell < 55 THEN (bk_lo >> bk_cell) & 1
                     ELSE (bk_hi >> (bk_cell - 55)) & 1 END = 1 AS req_b,
    win = 'banker' AND nb = 3 AND bc = 7 AS dragon7,
    win = 'player' AND np = 3 AND pc = 8 AS panda8,
    pc * 100 + bc * 10 + CASE win WHEN 'player' THEN 0 WHEN 'banker' THEN 1 ELSE 2 END AS want,
    mv_ok AND {_RISING} AS fits
  FROM l3
)
SELECT rid, h, ctx_id, np, nb, bc, win, total, dragon7, panda8,
  n < 256 AND last_seq < 1099511627776 AND NOT odd AND nbad = 0 AND deal_ok
  AND req_p = (np = 3) AND req_b = (nb = 3)
  AND n_res > 0 AND res_lo = want AND res_hi = want AND (win = 'tie' OR n_tie_hand = 0)
  AND NOT (_rp_due(due_tie_hand, win, tc_offered, dragon7, panda8) AND n_tie_hand = 0)
  AND NOT (_rp_due(due_total_cards, win, tc_offered, dragon7, panda8) AND n_total_cards = 0)
  AND NOT (_rp_due(due_dragon_7, win, tc_offered, dragon7, panda8) AND n_dragon_7 = 0)
  AND NOT (_rp_due(due_panda_8, win, tc_offered, dragon7, panda8) AND n_panda_8 = 0)
  AND (n_total_cards = 0 OR (tc_lo = total AND tc_hi = total))
  AND NOT coalesce(col_hi > mv_lo, false)
  AND (NOT proc_check OR mv_lo IS NULL OR fits) AS clean
FROM l4
"""

# Flagged: rounds not provably clean, and rounds with a settlement key (or a seat's
# vigorish) that is not exactly as the pack settles it.
_P1_FLAG_SQL = """
CREATE OR REPLACE TEMP TABLE _rp_flag0 AS
SELECT rid FROM _rp_rounds
WHERE ok AND rid NOT IN (SELECT rid FROM _rp_r WHERE clean)  -- not proven clean
UNION
SELECT rid FROM (
  SELECT *,
    CASE WHEN bet_code IS NULL AND kidx >= 0 AND kidx % 16 <> 15
           THEN ns > 0 AND nw > 0  -- a bet the pack does not settle: settled at all?
         WHEN kidx < 0 OR kidx % 16 = 15
           OR greatest(stake_c, settled_c, vig_c) >= 1099511627776
           THEN false
         WHEN nw = 0 AND ns = 0 THEN true
         WHEN nw = 0 OR ns = 0 THEN false
         ELSE CASE how WHEN 'pay' THEN npay WHEN 'collect' THEN ncol ELSE npush END = ns
              AND settled_c = amount_c END
    AND CASE WHEN kidx % 16 <> 1 THEN true
             WHEN NOT vig_charged THEN nvig = 0
             ELSE coalesce(vig_c, 0) = CASE WHEN how = 'pay'
                    THEN _rp_owed(amount_c, vig_num, vig_den, vig_round) ELSE 0 END
        END AS ok
  FROM (
    SELECT *, _rp_amount(how, stake_c, bet, bc, nb, num, den, ex0_count, ex0_cards, ex0_num,
                         ex0_den, ex1_count, ex1_cards, ex1_num, ex1_den) AS amount_c
    FROM (
      SELECT *, CASE WHEN nw > 0 AND num IS NOT NULL THEN _rp_how(bet, win, bc, nb, dragon7,
        panda8, total, push_on_tie, ex0_count, ex0_cards, ex0_push, ex1_count, ex1_cards,
        ex1_push) END AS how
      FROM (
        SELECT o.*, k.kidx, k.stake_c, k.settled_c, k.vig_c, p.bet, p.bet_code, p.num, p.den,
          k.kc & 255 AS nw, (k.kc >> 8) & 255 AS npay, (k.kc >> 16) & 255 AS ncol,
          (k.kc >> 24) & 255 AS npush, k.kc >> 32 AS nvig,
          ((k.kc >> 8) & 255) + ((k.kc >> 16) & 255) + ((k.kc >> 24) & 255) AS ns
        FROM _rp_kk k
        JOIN (SELECT r.*, c.* EXCLUDE (ctx_id) FROM _rp_r r JOIN _rp_ctx c USING (ctx_id)
              WHERE r.clean) o USING (h)
        LEFT JOIN _rp_pay p ON p.ctx_id = o.ctx_id AND p.bet_code = k.kidx % 16
      )
    )
  )
) WHERE NOT coalesce(ok, false)
"""

_PASS1 = (
    _P1_CARDS_SQL,
    _P1_ANNOUNCE_SQL,
    _P1_MOVES_SQL,
    _P1_ODD_SQL,
    _P1_KEYS_SQL,
    _P1_ROUNDS_SQL,
    _P1_FLAG_SQL,
)


# --- pass 2: each flagged round in full --------------------------------------------------

# The flagged rounds' events (few: a night's rounds are nearly all clean). A hash of the
# round key picks them out of the events cheaply; the join on the key itself decides.
_FLAGGED_EVENTS_SQL = f"""
CREATE OR REPLACE TEMP TABLE _rp_fe AS
WITH f AS (SELECT * FROM _rp_rounds WHERE rid IN (SELECT rid FROM _rp_flag0))
SELECT r.rid, e.seq, e.type, e.ts, src.path || ':' || e.line_no AS source, e.to_hand, e.card,
       coalesce(e.seat, 0) AS seat, coalesce(e.bet, '') AS bet, e.amount, e.kind,
       e.player_count, e.banker_count, e.winner, e.count, e.mode, r.charged
FROM (SELECT * FROM events WHERE type IN ({ROUND_TYPES})
        AND hash(table_id, shoe, round) IN (SELECT hash(table_id, shoe, round) FROM f)) e
JOIN f r ON e.table_id = r.table_id AND e.shoe = r.shoe AND e.round = r.round
JOIN sources src ON src.id = e.source_id
"""

# Pass 2 works on the events of the flagged rounds (_rp_fe), with what the aggregates need.
_EVENTS_CTE = """
ev AS (
  SELECT rid, charged, seq, type, to_hand, card, seat, bet, amount, kind, player_count,
         banker_count, winner, count, mode, instr('A23456789', left(card, 1))::INT AS v
  FROM _rp_fe
)"""

# One row per flagged round, everything check_round needs without the verdict's encodings
# and limits: per-hand counts, value sums and min/max/sum of seqs, the announcements as
# counts and min/max of what they said, the pays and vigorish as an ordered list; then the
# outcome, the deal and draw verdicts and the announcement verdicts from them. Also the
# reasons to leave a round to the reference (_FALLBACK_SQL).
_VERDICT_SQL = f"""
CREATE OR REPLACE TEMP TABLE _rp_o AS
WITH {_EVENTS_CTE},
agg AS (
  SELECT rid,
    count(*) FILTER (WHERE type = 'card') AS ncard,
    count(*) FILTER (WHERE type IN {ODD_TYPES}) AS nodd,
    count(*) FILTER (WHERE type = 'card' AND (to_hand IS NULL OR to_hand NOT IN
                     ('player', 'banker') OR NOT _rp_card_ok(card))) AS nbadcard,
    count(*) FILTER (WHERE type IN ('pay', 'vig') AND seat >= {SEAT_LIMIT}) AS nbigseat,
    count(*) FILTER (WHERE type = 'card' AND to_hand = 'player') AS np,
    min(seq) FILTER (WHERE type = 'card' AND to_hand = 'player') AS p_lo,
    max(seq) FILTER (WHERE type = 'card' AND to_hand = 'player') AS p_hi,
    sum(seq) FILTER (WHERE type = 'card' AND to_hand = 'player')::BIGINT AS p_ss,
    sum(v) FILTER (WHERE type = 'card' AND to_hand = 'player')::INT AS p_vs,
    arg_max(v, seq) FILTER (WHERE type = 'card' AND to_hand = 'player') AS p_vl,
    count(*) FILTER (WHERE type = 'card' AND to_hand = 'banker') AS nb,
    min(seq) FILTER (WHERE type = 'card' AND to_hand = 'banker') AS b_lo,
    max(seq) FILTER (WHERE type = 'card' AND to_hand = 'banker') AS b_hi,
    sum(seq) FILTER (WHERE type = 'card' AND to_hand = 'banker')::BIGINT AS b_ss,
    sum(v) FILTER (WHERE type = 'card' AND to_hand = 'banker')::INT AS b_vs,
    arg_max(v, seq) FILTER (WHERE type = 'card' AND to_hand = 'banker') AS b_vl,
    coalesce(max(seq) FILTER (WHERE type = 'round_end'), max(seq)) AS end_seq,
    count(*) FILTER (WHERE type = 'announce' AND kind = 'result') AS n_res,
    count(player_count) FILTER (WHERE type = 'announce' AND kind = 'result')
      + count(banker_count) FILTER (WHERE type = 'announce' AND kind = 'result')
      + count(winner) FILTER (WHERE type = 'announce' AND kind = 'result') AS res_nn,
    min(player_count) FILTER (WHERE type = 'announce' AND kind = 'result') AS res_p_lo,
    max(player_count) FILTER (WHERE type = 'announce' AND kind = 'result') AS res_p_hi,
    min(banker_count) FILTER (WHERE type = 'announce' AND kind = 'result') AS res_b_lo,
    max(banker_count) FILTER (WHERE type = 'announce' AND kind = 'result') AS res_b_hi,
    min(winner) FILTER (WHERE type = 'announce' AND kind = 'result') AS res_w_lo,
    max(winner) FILTER (WHERE type = 'announce' AND kind = 'result') AS res_w_hi,
    count(*) FILTER (WHERE type = 'announce' AND kind = 'tie_hand') AS n_tie_hand,
    count(*) FILTER (WHERE type = 'announce' AND kind = 'dragon_7') AS n_dragon_7,
    count(*) FILTER (WHERE type = 'announce' AND kind = 'panda_8') AS n_panda_8,
    count(*) FILTER (WHERE type = 'announce' AND kind = 'total_cards') AS n_total_cards,
    count(count) FILTER (WHERE type = 'announce' AND kind = 'total_cards') AS tc_nn,
    min(count) FILTER (WHERE type = 'announce' AND kind = 'total_cards') AS tc_lo,
    max(count) FILTER (WHERE type = 'announce' AND kind = 'total_cards') AS tc_hi,
    min(seq) FILTER (WHERE type IN ('pay', 'vig')) AS pv_lo,
    max(seq) FILTER (WHERE type = 'collect') AS col_hi,
    list(coalesce(seat, 0) * 2 + (type = 'vig')::INT ORDER BY seq)
      FILTER (WHERE type = 'pay' OR (type = 'vig' AND charged)) AS moves
  FROM ev GROUP BY rid
)
SELECT a.*, c.* EXCLUDE (reason),
  CASE a.np WHEN 2 THEN a.p_hi WHEN 3 THEN a.p_ss - a.p_lo - a.p_hi END AS p_2nd,
  CASE a.nb WHEN 2 THEN a.b_hi WHEN 3 THEN a.b_ss - a.b_lo - a.b_hi END AS b_2nd,
  -- deal_error() is None exactly when the cards went P, B, P, B, then the Player's third
  -- (if any), then the Banker's (if any).
  coalesce(a.np IN (2, 3) AND a.nb IN (2, 3) AND a.p_lo < a.b_lo AND a.b_lo < p_2nd
           AND p_2nd < b_2nd AND (a.np = 2 OR a.p_hi > b_2nd) AND (a.nb = 2 OR a.b_hi > b_2nd)
           AND (a.np = 2 OR a.nb = 2 OR a.p_hi < a.b_hi), false) AS deal_ok,
  a.np BETWEEN 2 AND 3 AND a.nb BETWEEN 2 AND 3 AS complete,
  a.p_vs % 10 AS pc,
  a.b_vs % 10 AS bc,
  CASE WHEN pc > bc THEN 'player' WHEN bc > pc THEN 'banker' ELSE 'tie' END AS win,
  a.np + a.nb AS total,
  win = 'banker' AND a.nb = 3 AND bc = 7 AS dragon7,
  win = 'player' AND a.np = 3 AND pc = 8 AS panda8,
  (a.p_vs - CASE WHEN a.np = 3 THEN a.p_vl ELSE 0 END) % 10 AS p2c,
  (a.b_vs - CASE WHEN a.nb = 3 THEN a.b_vl ELSE 0 END) % 10 AS b2c,
  (c.nat_mask >> p2c) & 1 = 1 OR (c.nat_mask >> b2c) & 1 = 1 AS nat,
  NOT nat AND (c.pl_mask >> p2c) & 1 = 1 AS req_p,
  b2c * 11 + CASE WHEN a.np = 3 THEN a.p_vl ELSE 10 END AS bk_cell,
  NOT nat AND CASE WHEN bk_cell < 55 THEN (c.bk_lo >> bk_cell) & 1
                       ELSE (c.bk_hi >> (bk_cell - 55)) & 1 END = 1 AS req_b,
  deal_ok AND req_p <> (a.np = 3) AS draw_p_bad,
  deal_ok AND req_b <> (a.nb = 3) AS draw_b_bad,
  greatest(a.p_hi, a.b_hi) AS card_hi,
  complete AND (a.n_res = 0 OR a.res_nn <> 3 * a.n_res OR a.res_p_lo <> pc
                OR a.res_p_hi <> pc OR a.res_b_lo <> bc OR a.res_b_hi <> bc
                OR a.res_w_lo <> win OR a.res_w_hi <> win
                OR (win <> 'tie' AND a.n_tie_hand > 0)) AS result_bad,
  CASE c.due_tie_hand WHEN 'always' THEN true WHEN 'tie' THEN win = 'tie'
       WHEN 'total_card_wagers_offered' THEN c.tc_offered WHEN 'dragon7_hand' THEN dragon7
       WHEN 'panda8_hand' THEN panda8 ELSE false END AND complete AND a.n_tie_hand = 0
    AS miss_tie_hand,
  CASE c.due_total_cards WHEN 'always' THEN true WHEN 'tie' THEN win = 'tie'
       WHEN 'total_card_wagers_offered' THEN c.tc_offered WHEN 'dragon7_hand' THEN dragon7
       WHEN 'panda8_hand' THEN panda8 ELSE false END AND complete AND a.n_total_cards = 0
    AS miss_total_cards,
  CASE c.due_dragon_7 WHEN 'always' THEN true WHEN 'tie' THEN win = 'tie'
       WHEN 'total_card_wagers_offered' THEN c.tc_offered WHEN 'dragon7_hand' THEN dragon7
       WHEN 'panda8_hand' THEN panda8 ELSE false END AND complete AND a.n_dragon_7 = 0
    AS miss_dragon_7,
  CASE c.due_panda_8 WHEN 'always' THEN true WHEN 'tie' THEN win = 'tie'
       WHEN 'total_card_wagers_offered' THEN c.tc_offered WHEN 'dragon7_hand' THEN dragon7
       WHEN 'panda8_hand' THEN panda8 ELSE false END AND complete AND a.n_panda_8 = 0
    AS miss_panda_8,
  complete AND a.n_total_cards > 0 AND (a.tc_nn <> a.n_total_cards OR a.tc_lo <> total
                                        OR a.tc_hi <> total) AS total_cards_bad,
  coalesce(a.col_hi > a.pv_lo, false) AS collect_late,
  c.proc_check AND NOT _rp_fits(c.procedure, a.moves) AS procedure_bad
FROM agg a
JOIN _rp_rounds r USING (rid)
JOIN _rp_ctx c ON c.ctx_id = r.ctx_id
"""

# One row per (round, seat, bet) that has wagers or settlements: the stake, and the
# settlements by type.
_KEYS_SQL = f"""
CREATE OR REPLACE TEMP TABLE _rp_k AS
WITH {_EVENTS_CTE}
SELECT rid, coalesce(seat, 0) AS seat, coalesce(bet, '') AS bet,
  sum(amount) FILTER (WHERE type = 'wager') AS stake,
  count(*) FILTER (WHERE type = 'wager') AS nw,
  min(seq) FILTER (WHERE type = 'wager') AS w_lo,
  count(*) FILTER (WHERE type <> 'wager') AS ns,
  sum(amount) FILTER (WHERE type <> 'wager') AS s_sum,
  count(*) FILTER (WHERE type = 'pay') AS n_pay,
  count(*) FILTER (WHERE type = 'collect') AS n_collect,
  count(*) FILTER (WHERE type = 'push') AS n_push,
  min(seq) FILTER (WHERE type = 'pay') AS pay_lo,
  min(seq) FILTER (WHERE type = 'collect') AS collect_lo,
  min(seq) FILTER (WHERE type = 'push') AS push_lo,
  min(seq) FILTER (WHERE type <> 'wager') AS s_lo,
  max(seq) FILTER (WHERE type <> 'wager') AS s_hi,
  NULL::VARCHAR AS _pad
FROM ev WHERE type IN ('wager', 'collect', 'pay', 'push')
GROUP BY ALL
"""

# Each key judged against the settlement the pack gives for the round's outcome
# (settle.expected_settlement, in integer cents), and its problem, if any.
_KEYS_JUDGED_SQL = """
CREATE OR REPLACE TEMP TABLE _rp_kx AS
SELECT k.* EXCLUDE (_pad), o.complete, o.end_seq, _rp_cents(k.stake) AS stake_c,
  _rp_cents(k.s_sum) AS s_sum_c,
  p.num IS NOT NULL AS settleable,
  CASE WHEN o.complete AND k.nw > 0 AND p.num IS NOT NULL THEN _rp_how(k.bet, o.win, o.bc,
    o.nb, o.dragon7, o.panda8, o.total, o.push_on_tie, o.ex0_count, o.ex0_cards, o.ex0_push,
    o.ex1_count, o.ex1_cards, o.ex1_push) END AS how,
  _rp_amount(how, stake_c, k.bet, o.bc, o.nb, p.num, p.den, o.ex0_count, o.ex0_cards,
             o.ex0_num, o.ex0_den, o.ex1_count, o.ex1_cards, o.ex1_num, o.ex1_den) AS amount_c,
  CASE
    WHEN k.nw = 0 THEN 'settle.wrong_outcome'
    WHEN k.ns = 0 THEN 'settle.unsettled'
    WHEN how IS NULL THEN NULL
    WHEN (how = 'pay' AND k.n_pay <> k.ns) OR (how = 'collect' AND k.n_collect <> k.ns)
      OR (how = 'push' AND k.n_push <> k.ns) THEN 'settle.wrong_outcome'
    WHEN s_sum_c <> amount_c THEN 'settle.wrong_amount' END AS code,
  CASE code
    WHEN 'settle.unsettled' THEN o.end_seq
    WHEN 'settle.wrong_amount' THEN k.s_hi
    WHEN 'settle.wrong_outcome' THEN CASE WHEN k.nw = 0 THEN k.s_lo ELSE least(
      CASE WHEN how <> 'pay' THEN k.pay_lo END, CASE WHEN how <> 'collect' THEN k.collect_lo END,
      CASE WHEN how <> 'push' THEN k.push_lo END) END END AS at_seq
FROM _rp_k k
JOIN _rp_o o USING (rid)
LEFT JOIN _rp_pay p ON p.ctx_id = o.ctx_id AND p.bet = k.bet
"""

# Vigorish per seat (round._vigorish_findings): what was taken, what each winning Banker
# wager owed, and the problem, if any.
_VIGS_SQL = f"""
CREATE OR REPLACE TEMP TABLE _rp_vx AS
WITH {_EVENTS_CTE},
taken AS (
  SELECT rid, coalesce(seat, 0) AS seat, sum(amount) AS got, min(seq) AS v_lo
  FROM ev WHERE type = 'vig' GROUP BY ALL
),
owing AS (
  SELECT rid, seat, stake, amount_c AS win_c, pay_lo
  FROM _rp_kx WHERE bet = 'banker' AND how = 'pay'
),
both_ AS (
  SELECT coalesce(w.rid, t.rid) AS rid, coalesce(w.seat, t.seat) AS seat, w.stake, w.win_c,
         w.pay_lo, t.got, t.v_lo
  FROM owing w FULL JOIN taken t ON t.rid = w.rid AND t.seat = w.seat
)
SELECT b.*, o.vig_charged, o.variant_name,
  coalesce(_rp_owed(b.win_c, o.vig_num, o.vig_den, o.vig_round), 0::HUGEINT) AS owed_c,
  CASE
    WHEN NOT o.vig_charged THEN CASE WHEN b.got IS NOT NULL THEN 'vig.not_allowed' END
    WHEN NOT o.complete THEN NULL
    WHEN b.got IS NULL THEN CASE WHEN owed_c > 0 THEN 'vig.missing' END
    WHEN _rp_cents(b.got) <> owed_c THEN 'vig.wrong_amount' END AS code,
  CASE WHEN code = 'vig.missing' THEN coalesce(b.pay_lo, o.end_seq) ELSE b.v_lo END AS at_seq
FROM both_ b JOIN _rp_o o USING (rid)
"""

# --- which rounds go where ---------------------------------------------------------------

_FALLBACK_SQL = """
CREATE OR REPLACE TEMP TABLE __FALLBACK__ AS
SELECT table_id, shoe, round, rid, why AS reason FROM (
  SELECT r.table_id, r.shoe, r.round, r.rid,
    CASE
      WHEN NOT r.ok THEN r.reason
      WHEN o.rid IS NULL THEN 'no round events'
      WHEN o.nodd > 0 THEN 'void, irregularity or chemin de fer event'
      WHEN o.nbadcard > 0 THEN 'a card that is not a normalised card to the Player or Banker'
      WHEN o.np > 3 OR o.nb > 3 THEN 'a hand with more than three cards'
      WHEN o.nbigseat > 0 THEN 'a seat number beyond the SQL encoding'
    END AS why
  FROM _rp_rounds r LEFT JOIN _rp_o o USING (rid)
  WHERE NOT r.ok OR r.rid IN (SELECT rid FROM _rp_flag0)
) WHERE why IS NOT NULL
"""

_FLAGGED_SQL = """
CREATE OR REPLACE TEMP TABLE _rp_flag AS
SELECT rid FROM _rp_flag0 WHERE rid NOT IN (SELECT rid FROM __FALLBACK__)
"""

# --- pass 2: the findings ----------------------------------------------------------------

# Per flagged round: the cards as the reference lists them, and the pay/vig steps.
_DETAILS_SQL = """
CREATE OR REPLACE TEMP TABLE _rp_fd AS
WITH cards AS (
  SELECT rid,
    coalesce(list(to_hand ORDER BY seq) FILTER (WHERE type = 'card'), []) AS hands,
    coalesce(list(seq ORDER BY seq) FILTER (WHERE type = 'card'), []) AS card_seqs,
    coalesce(list(card ORDER BY seq) FILTER (WHERE type = 'card' AND to_hand = 'player'), [])
      AS pcards,
    coalesce(list(card ORDER BY seq) FILTER (WHERE type = 'card' AND to_hand = 'banker'), [])
      AS bcards
  FROM _rp_fe GROUP BY rid
),
moves AS (
  SELECT rid, seq, seat * 2 + (type = 'vig')::INT AS code,
         lag(seat * 2 + (type = 'vig')::INT) OVER (PARTITION BY rid ORDER BY seq) AS prev
  FROM _rp_fe WHERE (type = 'pay' OR (type = 'vig' AND charged))
    AND rid IN (SELECT rid FROM _rp_flag)  -- fallback rounds may have seats beyond the codes
),
steps AS (
  SELECT rid, list(code ORDER BY seq) AS steps, list(seq ORDER BY seq) AS step_seqs
  FROM moves WHERE prev IS NULL OR prev <> code GROUP BY rid
)
SELECT c.*, coalesce(s.steps, []) AS steps, coalesce(s.step_seqs, []) AS step_seqs
FROM cards c LEFT JOIN steps s USING (rid)
"""

_PASS2 = (
    _FLAGGED_EVENTS_SQL,
    _VERDICT_SQL,
    _KEYS_SQL,
    _KEYS_JUDGED_SQL,
    _VIGS_SQL,
    _FALLBACK_SQL,
    _FLAGGED_SQL,
    _DETAILS_SQL,
)

_NULL = "'null'::JSON"

_FINDINGS_PARTS = [
    # deal.order (hands.deal_error: the first four against the deal order, then the Banker's
    # third card before the Player's; more than three cards a hand went to the reference)
    """
    SELECT rid, 'deal.order' AS code,
      CASE WHEN idx IS NULL THEN end_seq ELSE card_seqs[idx] END AS seq, 0 AS ord,
      'Cards dealt out of order: ' || problem || ' (cards went ' ||
        coalesce(nullif(array_to_string(list_transform(hands, lambda h: _rp_title(h)), ', '),
                        ''), 'nowhere') || ').' AS message,
      json_object('first_four', ['player', 'banker', 'player', 'banker'],
                  'max_cards_per_hand', 3) AS expected,
      json_object('order', hands, 'player', pcards, 'banker', bcards) AS observed
    FROM (
      SELECT o.rid, o.end_seq, d.hands, d.card_seqs, d.pcards, d.bcards,
        list_position(list_transform(range(1, least(len(d.hands), 4) + 1),
          lambda i: d.hands[i] <> ['player', 'banker', 'player', 'banker'][i]), true) AS mism,
        CASE WHEN mism IS NOT NULL THEN mism WHEN len(d.hands) < 4 THEN NULL ELSE 5 END AS idx,
        CASE WHEN mism IS NOT NULL THEN 'card ' || mism || ' went to the ' ||
               _rp_title(d.hands[mism]) || ', not the ' ||
               _rp_title(['player', 'banker', 'player', 'banker'][mism])
             WHEN len(d.hands) < 4 THEN 'only ' || len(d.hands) || ' cards were dealt'
             ELSE 'the Banker''s third card came out before the Player''s third card'
        END AS problem
      FROM _rp_o o JOIN _rp_fd d USING (rid) WHERE NOT o.deal_ok
    )
    """,
    # draw.player_missed / draw.player_extra
    """
    SELECT o.rid, CASE WHEN o.req_p THEN 'draw.player_missed' ELSE 'draw.player_extra' END,
      CASE WHEN o.req_p THEN o.card_hi ELSE o.p_hi END, 0,
      _rp_hand('Player', d.pcards[1:2], o.p2c) || CASE WHEN o.req_p
        THEN ' had to draw a third card (' || _rp_hand('Banker', d.bcards[1:2], o.b2c) ||
             ') but stood.'
        ELSE ' had to stand (' || _rp_hand('Banker', d.bcards[1:2], o.b2c) ||
             ') but was given a third card, ' || d.pcards[3] || '.' END,
      json_object('player_third_card', o.req_p),
      json_object('player_third_card', o.np = 3, 'player', d.pcards, 'banker', d.bcards)
    FROM _rp_o o JOIN _rp_fd d USING (rid) WHERE o.draw_p_bad
    """,
    # draw.banker_missed / draw.banker_extra
    """
    SELECT o.rid, CASE WHEN o.req_b THEN 'draw.banker_missed' ELSE 'draw.banker_extra' END,
      CASE WHEN o.req_b THEN o.card_hi ELSE o.b_hi END, 0,
      _rp_hand('Banker', d.bcards[1:2], o.b2c) || CASE WHEN o.req_b
        THEN ' had to draw a third card ' ELSE ' had to stand ' END ||
        CASE WHEN o.np = 3 THEN 'after the Player''s third card ' || d.pcards[3]
             ELSE 'with the Player standing' END ||
        CASE WHEN o.req_b THEN ' but stood.'
             ELSE ' but was given a third card, ' || d.bcards[3] || '.' END,
      json_object('banker_third_card', o.req_b),
      json_object('banker_third_card', o.nb = 3, 'player', d.pcards, 'banker', d.bcards)
    FROM _rp_o o JOIN _rp_fd d USING (rid) WHERE o.draw_b_bad
    """,
    # result.misannounced: no result announced
    f"""
    SELECT o.rid, 'result.misannounced', o.end_seq, 0,
      'No result was announced; the cards make ' || _rp_result_text(o.pc, o.bc, o.win) || '.',
      json_object('player', o.pc, 'banker', o.bc, 'winner', o.win), {_NULL}
    FROM _rp_o o JOIN _rp_flag USING (rid) WHERE o.complete AND o.n_res = 0
    """,
    # result.misannounced: a result announced other than the cards make
    """
    SELECT o.rid, 'result.misannounced', e.seq, 0,
      'Announced Player ' || coalesce(e.player_count::VARCHAR, 'None') || ', Banker ' ||
        coalesce(e.banker_count::VARCHAR, 'None') || ', ' || _rp_winner_text(e.winner) ||
        '; the cards make Player ' || o.pc || ', Banker ' || o.bc || ', ' ||
        _rp_winner_text(o.win) || '.',
      json_object('player', o.pc, 'banker', o.bc, 'winner', o.win),
      json_object('player', e.player_count, 'banker', e.banker_count, 'winner', e.winner)
    FROM _rp_o o JOIN _rp_fe e USING (rid)
    WHERE o.complete AND e.type = 'announce' AND e.kind = 'result'
      AND (e.player_count IS DISTINCT FROM o.pc OR e.banker_count IS DISTINCT FROM o.bc
           OR e.winner IS DISTINCT FROM o.win)
    """,
    # result.misannounced: "Tie Hand" announced without a tie
    """
    SELECT o.rid, 'result.misannounced', e.seq, 0,
      '"Tie Hand" was announced but the cards make ' || _rp_result_text(o.pc, o.bc, o.win) ||
        '.',
      json_object('player', o.pc, 'banker', o.bc, 'winner', o.win),
      json_object('announce', 'tie_hand')
    FROM _rp_o o JOIN _rp_fe e USING (rid)
    WHERE o.complete AND o.win <> 'tie' AND e.type = 'announce' AND e.kind = 'tie_hand'
      AND o.n_res > 0  -- the reference stops at "no result announced"
    """,
    # announce.*_missing
    f"""
    SELECT o.rid, m.code, o.end_seq, 0, m.message, m.expected, {_NULL}
    FROM _rp_o o JOIN _rp_flag USING (rid), LATERAL (
      SELECT 'announce.tie_missing' AS code,
             'Player and Banker tie at ' || o.pc || ', but "Tie Hand" was not announced.'
               AS message,
             json_object('announce', 'tie_hand') AS expected, o.miss_tie_hand AS due
      UNION ALL
      SELECT 'announce.total_cards_missing',
             'Total card wagers are offered and ' || o.total || ' cards were dealt, but the '
               || 'number of cards was not announced.',
             json_object('announce', 'total_cards', 'count', o.total), o.miss_total_cards
      UNION ALL
      SELECT 'announce.dragon7_missing',
             'The Banker wins with a three-card 7 (dragon 7), but "dragon 7" was not '
               || 'announced.',
             json_object('announce', 'dragon_7'), o.miss_dragon_7
      UNION ALL
      SELECT 'announce.panda8_missing',
             'The Player wins with a three-card 8 (panda 8), but "panda 8" was not announced.',
             json_object('announce', 'panda_8'), o.miss_panda_8
    ) m WHERE m.due
    """,
    # announce.total_cards_wrong
    """
    SELECT o.rid, 'announce.total_cards_wrong', e.seq, 0,
      coalesce(e.count::VARCHAR, 'None') || ' cards were announced; ' || o.total ||
        ' were dealt.',
      json_object('count', o.total), json_object('count', e.count)
    FROM _rp_o o JOIN _rp_fe e USING (rid)
    WHERE o.complete AND e.type = 'announce' AND e.kind = 'total_cards'
      AND e.count IS DISTINCT FROM o.total
    """,
    # settle.*: one per wager (or settled key without a wager) with a problem
    f"""
    SELECT k.rid, k.code, k.at_seq,
      CASE WHEN k.nw > 0 THEN k.w_lo ELSE 1099511627776 + k.s_lo END,
      CASE
        WHEN k.nw = 0 THEN 'Seat ' || k.seat || ' had no ' || _rp_bet_name(k.bet) ||
          ' wager but one was ' || _rp_done(s.first_type) || ' (' || s.first_amount || ').'
        WHEN k.code = 'settle.unsettled' THEN name ||
          ' was never collected, paid or returned before the round ended.'
        WHEN k.code = 'settle.wrong_outcome' THEN name || ' should have been ' ||
          _rp_done(k.how) || ' ' || _rp_money(k.amount_c) || ' but was ' || s.did || '.'
        ELSE name || ' should have been ' || _rp_done(k.how) || ' ' || _rp_money(k.amount_c) ||
          ' and was ' || _rp_done(k.how) || ' ' || _rp_money(k.s_sum_c) || '.' END,
      CASE WHEN k.how IS NULL THEN {_NULL} ELSE json_object('seat', k.seat, 'bet', k.bet,
        'wager', k.stake::VARCHAR, 'outcome', k.how, 'amount', _rp_money(k.amount_c)) END,
      CASE WHEN k.code = 'settle.wrong_amount' THEN json_object('seat', k.seat, 'bet', k.bet,
             'outcome', k.how, 'amount', _rp_money(k.s_sum_c))
           ELSE json_object('seat', k.seat, 'bet', k.bet, 'settlements',
                            coalesce(s.settlements, [])) END
    FROM (SELECT *, 'Seat ' || seat || '''s ' || stake::VARCHAR || ' ' || _rp_bet_name(bet) ||
                    ' wager' AS name
          FROM _rp_kx WHERE code IS NOT NULL AND rid IN (SELECT rid FROM _rp_flag)) k
    LEFT JOIN (
      SELECT rid, seat, bet,
        list({{'type': type, 'amount': amount::VARCHAR, 'seq': seq}} ORDER BY seq)
          AS settlements,
        arg_min(type, seq) AS first_type, arg_min(amount, seq)::VARCHAR AS first_amount,
        array_to_string(list_sort(list(DISTINCT _rp_done(type))), ' and ') AS did
      FROM _rp_fe WHERE type IN ('collect', 'pay', 'push') GROUP BY ALL
    ) s USING (rid, seat, bet)
    """,
    # vig.*: per seat
    """
    SELECT v.rid, v.code, v.at_seq, -v.seat,
      CASE
        WHEN v.code = 'vig.not_allowed' THEN 'Vigorish of ' || v.got::VARCHAR || ' was ' ||
          t.verb || ' at seat ' || v.seat || '; this table''s variant (' || v.variant_name ||
          ') charges none.'
        ELSE CASE WHEN v.win_c IS NOT NULL
               THEN 'Seat ' || v.seat || ' owed ' || _rp_money(v.owed_c) ||
                    ' vigorish on its winning ' || v.stake::VARCHAR || ' Banker wager'
               ELSE 'Seat ' || v.seat || ' had no winning Banker wager and owed no vigorish'
             END || CASE WHEN v.code = 'vig.missing' THEN '; none was collected or marked.'
                         ELSE '; ' || v.got::VARCHAR || ' was ' || t.verb || '.' END END,
      json_object('seat', v.seat, 'vigorish',
                  CASE WHEN v.code = 'vig.not_allowed' THEN '0.00' ELSE _rp_money(v.owed_c) END),
      CASE WHEN v.code = 'vig.missing' THEN json_object('seat', v.seat, 'vigorish', NULL)
           ELSE json_object('seat', v.seat, 'vigorish', v.got::VARCHAR, 'seqs', t.seqs) END
    FROM (SELECT * FROM _rp_vx WHERE code IS NOT NULL AND rid IN (SELECT rid FROM _rp_flag)) v
    LEFT JOIN (
      SELECT rid, seat, list(seq ORDER BY seq) AS seqs,
        array_to_string(list_transform(list_sort(list(DISTINCT coalesce(mode, 'collect'))),
          lambda m: CASE WHEN m = 'mark' THEN 'marked' ELSE 'collected' END), ' and ') AS verb
      FROM _rp_fe WHERE type = 'vig' GROUP BY ALL
    ) t USING (rid, seat)
    """,
    # order.collect_after_pay
    """
    SELECT l.rid, 'order.collect_after_pay', l.late[1].seq, 0,
      'Seat ' || l.late[1].seat || '''s losing ' || l.late[1].amount || ' ' ||
        _rp_bet_name(l.late[1].bet) || ' wager was collected after seat ' || p.seat ||
        ' was ' || CASE WHEN p.type = 'pay' THEN 'paid' ELSE 'charged vigorish' END ||
        '; losing wagers are collected first.',
      json_object('collect_before_seq', p.seq),
      json_object('late_collections', l.late)
    FROM (
      SELECT rid, arg_min({'seq': seq, 'seat': seat, 'type': type}, seq) AS p
      FROM _rp_fe WHERE type IN ('pay', 'vig') GROUP BY rid
    ) f(rid, p)
    JOIN (
      SELECT c.rid, list({'seat': c.seat, 'bet': c.bet, 'amount': c.amount::VARCHAR,
                          'seq': c.seq} ORDER BY c.seq) AS late
      FROM _rp_fe c JOIN (SELECT rid, min(seq) AS first_pv FROM _rp_fe
                          WHERE type IN ('pay', 'vig') GROUP BY rid) m USING (rid)
      WHERE c.type = 'collect' AND c.seq > m.first_pv GROUP BY c.rid
    ) l USING (rid)
    """,
    # order.procedure_mismatch
    """
    SELECT rid, 'order.procedure_mismatch', step_seqs[dep], 0,
      'Procedure ' || procedure || ' is in force, but the dealer ' ||
        array_to_string(list_transform(steps, lambda c: _rp_step_text(c)), ', ') || ' (' ||
        CASE WHEN len(fits) = 0 THEN 'fits no procedure'
             ELSE 'fits procedure ' || array_to_string(fits, ', ') END ||
        '); procedure ' || procedure || ' requires: ' ||
        array_to_string(list_transform(required, lambda c: _rp_step_text(c)), ', ') || '.',
      json_object('procedure', procedure,
                  'order', list_transform(required, lambda c: _rp_step_json(c))),
      json_object('order', list_transform(steps, lambda c: _rp_step_json(c)),
                  'consistent_procedures', fits)
    FROM (
      SELECT o.rid, o.procedure, d.steps, d.step_seqs,
        _rp_required(o.procedure, d.steps) AS required,
        list_filter([1, 2, 3, 4], lambda p: _rp_required(p, d.steps) = d.steps) AS fits,
        coalesce(list_position(list_transform(range(1, least(len(d.steps), len(required)) + 1),
                                              lambda i: d.steps[i] <> required[i]), true),
                 least(len(required), len(d.steps) - 1) + 1) AS dep
      FROM _rp_o o JOIN _rp_fd d USING (rid) WHERE o.procedure_bad
    )
    """,
]

_FINDINGS_SQL = (
    """
CREATE OR REPLACE TEMP TABLE __FINDINGS__ AS
WITH found(rid, code, seq, ord, message, expected, observed) AS (
  {parts}
),
numbered AS (
  SELECT f.*, row_number() OVER (PARTITION BY rid, code, seq ORDER BY ord) - 1 AS k
  FROM found f WHERE rid IN (SELECT rid FROM _rp_flag)
)
SELECT f.code || '|' || r.table_id || '|' || r.shoe || '|' || r.round || '|' || f.seq || '|'
         || f.k AS fingerprint,
       f.code, r.table_id, r.pit, r.shoe, r.round, f.seq, e.ts, f.message,
       f.expected::JSON AS expected, f.observed::JSON AS observed, e.source,
       json_object('round_events', [r.first_seq, r.last_seq]) AS evidence
FROM numbered f
JOIN _rp_rounds r USING (rid)
JOIN _rp_fe e ON e.rid = f.rid AND e.seq = f.seq
"""
).format(parts="\n  UNION ALL\n".join(p.strip() for p in _FINDINGS_PARTS))

_JUDGED_SQL = """
CREATE OR REPLACE TEMP TABLE {judged} AS
SELECT r.table_id, r.shoe, r.round, r.n AS events, r.last_seq,
       coalesce(f.findings, 0) AS findings
FROM _rp_rounds r
LEFT JOIN (SELECT table_id, shoe, round, count(*) AS findings FROM {findings} GROUP BY ALL) f
  USING (table_id, shoe, round)
WHERE r.rid NOT IN (SELECT rid FROM {fallback})
"""
