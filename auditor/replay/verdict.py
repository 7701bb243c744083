"""The verdict "this round is exactly right", vectorised over per-round facts.

A night's rounds are nearly all clean, and the clean ones need no findings, only the proof
that they are clean. This module gives that proof for many rounds at once, over plain integer
arrays (one row per round, built by auditor.audit.facts); every round it does not call clean
goes to `auditor.replay.round.check_round`, which alone writes round findings. So the verdict
may cost time (a clean round flagged is only replayed), never a finding: a round is called
clean only where each check of check_round provably passes on the facts.

What the facts hold, and why they are enough (a hand has at most three cards, seqs name
events): per hand the card count, the min, max and sum of its seqs and of `seq * 16 + value`,
which place every card and give the values of the two-card and three-card counts; the
announcements as counts per kind and the min and max of what they said; the pays and vigorish
as 6-bit step codes packed by seq; per (seat, bet) the numbers of wagers, pays, collections,
pushes and vigorish and their sums in cents. Anything the encodings cannot hold exactly (256
events or more, seqs of 2**40 or more, a seat above 30 among the pays, amounts of 2**40 cents
or more, a type of event the facts do not count) makes the round not clean.

Pure: numpy arrays and rule packs in, a boolean array out.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, fields
from fractions import Fraction

import numpy as np

from auditor.replay.hands import BANKER, PLAYER, TIE, Outcome
from auditor.replay.model import TableContext
from auditor.replay.order import PROCEDURES
from auditor.replay.round import announcement_due
from auditor.replay.settle import COLLECT, PAY, PUSH, settlement_terms
from auditor.rules.pack import RulePack

# The round event types the facts count. Any other type of ROUND_EVENTS in a round (void,
# irregularity, the chemin de fer types, or one added to the vocabulary later) is counted as
# `n_other` and the round goes to check_round.
UNDERSTOOD = (
    "round_start",
    "wager",
    "no_more_bets",
    "card",
    "announce",
    "collect",
    "pay",
    "push",
    "vig",
    "round_end",
)
# Bets told apart by the facts (their index is the bet code); any other bet is code 15.
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
OTHER_BET = 15
PBPB = ("player", "banker", "player", "banker")
POSITIONS = 10  # pays and vigorish packed per round, 6 bits each
MAX_SEAT = 30  # a pay or vigorish at a higher seat does not fit 6 bits
LIMIT_SEQ = 1 << 40
LIMIT_CENTS = 1 << 40
LIMIT_ODDS = 1 << 16  # numerators and denominators, so cents x odds stays in int64
# Outcomes: Player count, Banker count, and two or three cards in each hand.
OUTCOMES = 400
# Announcements other than the result whose absence the facts count, by bit.
DUE_BITS = {"tie_hand": 1, "dragon_7": 2, "panda_8": 4, "total_cards": 8}
HOW = {PAY: 1, COLLECT: 2, PUSH: 3}  # 0: a wager the pack does not settle
NOT_A_STEP = np.iinfo(np.int64).min


def outcome_index(pc: int, bc: int, player_cards: int, banker_cards: int) -> int:
    return (pc * 10 + bc) * 4 + (player_cards - 2) * 2 + (banker_cards - 2)


def _outcome(i: int) -> Outcome:
    pc, bc, p3, b3 = i // 40, (i // 4) % 10, (i // 2) % 2, i % 2
    winner = PLAYER if pc > bc else BANKER if bc > pc else TIE
    return Outcome(pc, bc, 2 + p3, 2 + b3, winner)


@dataclass(frozen=True)
class Terms:
    """What the verdict needs of one table context, as tables over the outcomes of a round
    (outcome_index), each computed by the reference's own rule functions: which
    announcements are due (announcement_due), how each bet is settled and at what odds
    (settle.settlement_terms); the draw tables of the pack; the order of pay and vigorish
    steps under the procedure in force."""

    natural: tuple[bool, ...]  # by two-card count
    player: tuple[bool, ...]  # by the Player's two-card count
    banker: tuple[bool, ...]  # by banker count * 11 + the Player's third card (10: stood)
    vig_charged: bool
    vig_num: int  # vigorish owed per unit of Banker winnings
    vig_den: int
    vig_add: int  # rounding: owed = (2 * cents * num + vig_add) // (2 * den)
    due: tuple[int, ...]  # per outcome: DUE_BITS of the announcements due
    how: tuple[int, ...]  # per outcome x 16 bet codes: HOW, 0 where the pack settles none
    num: tuple[int, ...]  # per outcome x 16 bet codes: winnings per unit, for a pay
    den: tuple[int, ...]
    steps: tuple[int, ...]  # per step code (seat * 2 + kind, kind 1 vigorish): its place


# What the per-outcome tables of Terms depend on: the pack, the variant, the side bets; not
# the procedure (the steps alone). OutcomeTables of one key serve each procedure's Terms.
OutcomeTables = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def outcome_key(ctx: TableContext) -> tuple:
    return (ctx.jurisdiction, ctx.game, ctx.variant, tuple(ctx.side_bets))


def terms(ctx: TableContext, tables: OutcomeTables | str | None = None) -> Terms | str:
    """The Terms of a table context, or why the verdict leaves its rounds to check_round (a
    pack it does not encode: another first deal, odds beyond its integers). `tables`: what
    outcome_tables gave for a context of the same outcome_key, if known (6,400 settlement
    calls each: an audit's fixed cost, once per procedure otherwise)."""
    pack, v = ctx.pack, ctx.rules
    if tuple(pack.deal_order) != PBPB:
        return "pack: initial deal other than Player, Banker, Player, Banker"
    unknown = set(pack.announcements) - set(DUE_BITS) - {"result"}
    if unknown:
        return f"pack: announcements the verdict does not count ({', '.join(sorted(unknown))})"
    checked = ctx.procedure is not None and ctx.procedure in pack.procedures
    if checked and ctx.procedure not in PROCEDURES:
        return f"pack: procedure {ctx.procedure} is not one the verdict encodes"
    if tables is None:
        tables = outcome_tables(ctx)
    if isinstance(tables, str):
        return tables
    due, how, num, den = tables
    charged = bool(v.vig_charged.value)
    rate = v.vigorish_rate
    rounding = v.vig_rounding.value if v.vig_rounding else "exact_cents"
    add = {"exact_cents": rate.denominator, "down_to_cent": 0}.get(
        rounding, 2 * rate.denominator - 2
    )
    return Terms(
        natural=tuple(pack.draw.natural),
        player=tuple(pack.draw.player),
        banker=tuple(pack.draw.banker),
        vig_charged=charged,
        vig_num=rate.numerator,
        vig_den=rate.denominator,
        vig_add=add,
        due=due,
        how=how,
        num=num,
        den=den,
        steps=tuple(
            _step_key(ctx.procedure, code)
            if checked and ctx.procedure and (charged or code % 2 == 0)
            else NOT_A_STEP
            for code in range(64)
        ),
    )


def outcome_tables(ctx: TableContext) -> OutcomeTables | str:
    """Per outcome: the announcements due, and per bet code how it settles at what odds; or
    why the verdict cannot hold them."""
    pack, v = ctx.pack, ctx.rules
    rate = v.vigorish_rate
    due: list[int] = []
    how: list[int] = []
    num: list[int] = []
    den: list[int] = []
    odds: set[Fraction] = {rate}
    try:
        for i in range(OUTCOMES):
            result = _outcome(i)
            bits = 0
            for kind, rule in pack.announcements.items():
                applies = rule.variants is None or ctx.variant in rule.variants
                if kind != "result" and applies and announcement_due(rule.value, ctx, result):
                    bits |= DUE_BITS[kind]
            due.append(bits)
            for code in range(16):
                settled = (
                    settlement_terms(BET_CODES[code], result, v, pack)
                    if code < len(BET_CODES)
                    else None
                )
                if settled is None:
                    settled = ("", Fraction(0))
                odds.add(settled[1])
                how.append(HOW.get(settled[0], 0))
                num.append(settled[1].numerator)
                den.append(settled[1].denominator)
    except ValueError as e:  # a condition of the pack the reference itself cannot judge
        return f"pack: {e}"
    if any(f.numerator >= LIMIT_ODDS or f.denominator >= LIMIT_ODDS for f in odds):
        return "pack: odds or a vigorish rate beyond the verdict's integers"
    return tuple(due), tuple(how), tuple(num), tuple(den)


# outcome_tables kept across audits in one process (nightly's passes, a watch's sweeps,
# the tests): each costs ~25 ms of CPU, a fixed cost of every audit per kind of table. Keyed by
# the pack object, which is frozen and shared while its file is unchanged (a pack edited on
# disk is another object: rules/pack.load_pack_file); kept with its tables so that its id
# is not reused while the entry lives.
_SHARED: dict[tuple, tuple[RulePack, OutcomeTables | str]] = {}
_SHARED_MAX = 64
_SHARED_LOCK = threading.Lock()


def shared_outcome_tables(ctx: TableContext) -> OutcomeTables | str:
    """outcome_tables(ctx), worked out once a process for its pack and outcome_key."""
    key = (id(ctx.pack), *outcome_key(ctx))
    hit = _SHARED.get(key)
    if hit is not None and hit[0] is ctx.pack:
        return hit[1]
    tables = outcome_tables(ctx)
    with _SHARED_LOCK:  # audits in two threads of a process (backfill's workers) both add
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.pop(next(iter(_SHARED)), None)  # the oldest
        _SHARED[key] = (ctx.pack, tables)
    return tables


def _step_key(procedure: int, code: int) -> int:
    """The place of a step (code seat * 2 + kind, kind 0 pay, 1 vigorish) in the order
    procedure 1-4 requires (auditor.replay.order): 1 pays then vigorish, 2 vigorish then
    pays, 3 seat by seat pay then vigorish, 4 seat by seat vigorish then pay; seats from the
    highest down."""
    kind, seat = code % 2, code // 2
    if procedure == 1:
        return kind * (1 << 32) - seat
    if procedure == 2:
        return (1 - kind) * (1 << 32) - seat
    if procedure == 3:
        return -2 * seat + kind
    return -2 * seat + 1 - kind


@dataclass(frozen=True)
class Rounds:
    """Per-round facts, one element per round (auditor.audit.facts builds them).

    `nc` packs the cards: Player count + 256 x Banker count + 65536 x cards that are not a
    normalised card to the Player or the Banker. `p_hi` is max(seq * 16 + value) of the
    Player's cards, `p_lo` min(seq), `p_sum` sum(seq * 256 + value); `b_*` the Banker's.
    `na` packs the announcement counts by kind (result, tie_hand, dragon_7, panda_8 in 8
    bits each, total_cards above); `res_lo`/`res_hi` what the results said as player * 100 +
    banker * 10 + winner (0 player, 1 banker, 2 tie; -1 a part missing); `tc_lo`/`tc_hi`
    the total-card counts announced. `mv` packs each pay or vigorish as code seat * 2 + kind
    + 1 (kind 0 pay, 1 vigorish) at bit 6 x (seq % 10), exact when `mv_ok`; `mv_lo` is the
    first pay or vigorish's seq (-1: none), `col_hi` the last collection's. `keyed`: the
    round's facts could be keyed at all (its round number fits). Zeros stand for "none".
    """

    ctx: np.ndarray  # index into the Terms list
    n: np.ndarray  # events in the round
    last_seq: np.ndarray
    keyed: np.ndarray  # bool
    n_other: np.ndarray  # events of a type not in UNDERSTOOD
    nc: np.ndarray
    p_hi: np.ndarray
    p_lo: np.ndarray
    p_sum: np.ndarray
    b_hi: np.ndarray
    b_lo: np.ndarray
    b_sum: np.ndarray
    na: np.ndarray
    res_lo: np.ndarray
    res_hi: np.ndarray
    tc_lo: np.ndarray
    tc_hi: np.ndarray
    mv: np.ndarray
    mv_ok: np.ndarray  # bool
    mv_lo: np.ndarray
    col_hi: np.ndarray


@dataclass(frozen=True)
class Stakes:
    """Per (round, seat, bet) facts, with each seat's vigorish under its Banker key.

    `pos` is the round's index in Rounds; `kidx` is seat * 16 + bet code (-1: a seat the
    encoding cannot hold); `kc` packs the numbers of wagers, pays, collections, pushes (8
    bits each) and vigorish events (above); `big` marks a sum of 2**40 cents or more."""

    pos: np.ndarray
    kidx: np.ndarray
    kc: np.ndarray
    stake_c: np.ndarray
    settled_c: np.ndarray
    vig_c: np.ndarray
    big: np.ndarray  # bool


def field_names(kind: type[Rounds] | type[Stakes]) -> tuple[str, ...]:
    return tuple(f.name for f in fields(kind))


@dataclass(frozen=True)
class _Table:
    """The Terms stacked as flat arrays indexed by context (and outcome, bet code, ...)."""

    natural: np.ndarray  # ctx * 10 + count
    player: np.ndarray
    banker: np.ndarray  # (ctx * 10 + count) * 11 + column
    vig_charged: np.ndarray
    vig_num: np.ndarray
    vig_den: np.ndarray
    vig_add: np.ndarray
    due: np.ndarray  # ctx * OUTCOMES + outcome
    how: np.ndarray  # (ctx * OUTCOMES + outcome) * 16 + code
    num: np.ndarray
    den: np.ndarray
    steps: np.ndarray  # ctx * 64 + step code

    @classmethod
    def of(cls, all_terms: Sequence[Terms]) -> _Table:
        def flat(name: str, dtype: type) -> np.ndarray:
            return np.array([x for t in all_terms for x in getattr(t, name)], dtype)

        def each(name: str, dtype: type) -> np.ndarray:
            return np.array([getattr(t, name) for t in all_terms], dtype)

        return cls(
            natural=flat("natural", bool),
            player=flat("player", bool),
            banker=flat("banker", bool),
            vig_charged=each("vig_charged", bool),
            vig_num=each("vig_num", np.int64),
            vig_den=each("vig_den", np.int64),
            vig_add=each("vig_add", np.int64),
            due=flat("due", np.int64),
            how=flat("how", np.int8),
            num=flat("num", np.int64),
            den=flat("den", np.int64),
            steps=flat("steps", np.int64),
        )


CHUNK = 1 << 16  # rounds judged at a time: the temporaries stay in the CPU's caches


def clean(r: Rounds, s: Stakes, all_terms: Sequence[Terms]) -> np.ndarray:
    """For each round of `r`, whether check_round would find nothing in it."""
    t = _Table.of(all_terms)
    n = len(r.ctx)
    ok = np.empty(n, bool)
    at = np.empty(n, np.int64)
    names = field_names(Rounds)
    for lo in range(0, n, CHUNK):
        part = Rounds(**{k: getattr(r, k)[lo : lo + CHUNK] for k in names})
        ok[lo : lo + CHUNK], at[lo : lo + CHUNK] = _rounds_ok(part, t)
    # Settlements and vigorish, per (seat, bet); a round with one wrong key is not clean.
    keys = field_names(Stakes)
    for lo in range(0, len(s.pos), CHUNK):
        part_s = Stakes(**{k: getattr(s, k)[lo : lo + CHUNK] for k in keys})
        wrong = ~_stakes_ok(part_s, t, r.ctx[part_s.pos], at[part_s.pos])
        ok[part_s.pos[wrong]] = False
    return ok


def _rounds_ok(r: Rounds, t: _Table) -> tuple[np.ndarray, np.ndarray]:
    """Whether each round passes every check but the settlements; and its index into the
    tables by context and outcome, for those."""
    c = r.ctx
    # Cards: counts, values and where each card sits.
    n_p, n_b, n_bad = r.nc & 255, (r.nc >> 8) & 255, r.nc >> 16
    p3, b3 = n_p == 3, n_b == 3
    p_last, b_last = r.p_hi >> 4, r.b_hi >> 4
    p_lastv, b_lastv = r.p_hi & 15, r.b_hi & 15
    p_vs, b_vs = r.p_sum & 255, r.b_sum & 255
    p_2nd = np.where(p3, (r.p_sum >> 8) - r.p_lo - p_last, p_last)
    b_2nd = np.where(b3, (r.b_sum >> 8) - r.b_lo - b_last, b_last)
    deal_ok = (
        ((n_p == 2) | p3)
        & ((n_b == 2) | b3)
        & (r.p_lo < r.b_lo)
        & (r.b_lo < p_2nd)
        & (p_2nd < b_2nd)
        & (~p3 | (p_last > b_2nd))
        & (~b3 | (b_last > b_2nd))
        & (~p3 | ~b3 | (p_last < b_last))
    )
    pc, bc = p_vs % 10, b_vs % 10
    p2c = (p_vs - np.where(p3, p_lastv, 0)) % 10
    b2c = (b_vs - np.where(b3, b_lastv, 0)) % 10
    # The draws the tables require.
    natural = t.natural[c * 10 + p2c] | t.natural[c * 10 + b2c]
    column = np.where(p3, p_lastv, 10)
    draws_ok = ((~natural & t.player[c * 10 + p2c]) == p3) & (
        (~natural & t.banker[(c * 10 + b2c) * 11 + column]) == b3
    )
    # The outcome, and what had to be announced.
    outcome = (pc * 10 + bc) * 4 + np.clip(n_p - 2, 0, 1) * 2 + np.clip(n_b - 2, 0, 1)
    at = c * OUTCOMES + outcome
    win = np.where(pc > bc, 0, np.where(bc > pc, 1, 2))
    n_res, n_tie = r.na & 255, (r.na >> 8) & 255
    n_tc = r.na >> 32
    missing = (
        np.where(n_tie == 0, DUE_BITS["tie_hand"], 0)
        | np.where(((r.na >> 16) & 255) == 0, DUE_BITS["dragon_7"], 0)
        | np.where(((r.na >> 24) & 255) == 0, DUE_BITS["panda_8"], 0)
        | np.where(n_tc == 0, DUE_BITS["total_cards"], 0)
    )
    want = pc * 100 + bc * 10 + win
    total = n_p + n_b
    said_ok = (
        (n_res > 0)
        & (r.res_lo == want)
        & (r.res_hi == want)
        & ((win == 2) | (n_tie == 0))
        & ((t.due[at] & missing) == 0)
        & ((n_tc == 0) | ((r.tc_lo == total) & (r.tc_hi == total)))
    )
    # Losers first, then the procedure in force: each step's place never goes down.
    moved = r.mv_lo >= 0
    order_ok = ~(moved & (r.col_hi > r.mv_lo))
    fits = r.mv_ok.copy()
    highest = np.full(len(c), NOT_A_STEP, np.int64)
    base = c * 64
    for i in range(POSITIONS):
        code = (r.mv >> (6 * ((r.mv_lo + i) % POSITIONS))) & 63
        key = t.steps[base + np.maximum(code - 1, 0)]
        key = np.where(code > 0, key, NOT_A_STEP)
        fits &= (key == NOT_A_STEP) | (key >= highest)
        np.maximum(highest, key, out=highest)
    checked = t.steps[base] != NOT_A_STEP  # pay at seat 0 is a step wherever order counts
    order_ok &= ~checked | ~moved | fits
    ok = (
        r.keyed
        & (r.n < 256)
        & (r.last_seq < LIMIT_SEQ)
        & (r.n_other == 0)
        & (n_bad == 0)
        & deal_ok
        & draws_ok
        & said_ok
        & order_ok
    )
    return ok, at


def _stakes_ok(s: Stakes, t: _Table, c: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Per key: wagers settled exactly as the pack settles them (settle.settlement_terms),
    and per seat the vigorish owed on its winning Banker wager (settle.vigorish_owed)."""
    seat_ok = s.kidx >= 0
    code = np.where(seat_ok, s.kidx & 15, OTHER_BET)
    i = at * 16 + code
    how = t.how[i].astype(np.int64)
    nw = s.kc & 255
    ns = ((s.kc >> 8) & 255) + ((s.kc >> 16) & 255) + ((s.kc >> 24) & 255)
    pay = how == HOW[PAY]
    den = t.den[i]
    amount = np.where(pay, (2 * s.stake_c * t.num[i] + den) // (2 * den), s.stake_c)
    done = (s.kc >> (8 * np.maximum(how, 1))) & 255  # settlements of the expected kind
    known = how > 0
    exact = (nw > 0) & (ns > 0) & (done == ns) & (s.settled_c == amount)
    ok = np.where(
        ~known,
        seat_ok & (code != OTHER_BET) & (ns > 0) & (nw > 0),
        ~s.big & (((nw == 0) & (ns == 0)) | exact),
    )
    # Vigorish: only under the Banker key; none at all where the variant charges none.
    banker = np.flatnonzero(code == 1)
    if len(banker):
        cb = c[banker]
        won = np.where(pay[banker], amount[banker], 0)
        owed = (2 * won * t.vig_num[cb] + t.vig_add[cb]) // (2 * t.vig_den[cb])
        vig_ok = np.where(
            t.vig_charged[cb],
            (s.vig_c[banker] == owed) & (won < (1 << 44)),
            (s.kc[banker] >> 32) == 0,
        )
        ok[banker] &= vig_ok
    return ok
