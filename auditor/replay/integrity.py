"""Shoe integrity: the order of a shoe's cards against chance (docs/shoe-integrity.md).

Pure: the audit (auditor/audit/integrity.py) reads each shoe's dealt cards in order, keeps
an index of their k-grams in the database and hands the candidates here. This module says
how long a repeated run must be before chance cannot explain it, finds runs in a new pack's
order, extends a seed match to the whole run, and tests how much of the previous shoe's order
a shoe kept.

Every length and threshold comes from a stated sum over a stated volume (`Volume`), so a
reader can redo it: a property of 100 tables dealing round the clock, a year of shoes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from auditor.rules.cards import RANKS, SUITS, parse_card

FACES = len(RANKS) * len(SUITS)  # 52 distinct cards, each `decks` times in a shoe
# A k-gram of SEED cards is one base-52 number: 52**11 < 2**63, so 11 cards fit in a BIGINT
# exactly and a seed match is a real match, never a hash collision.
SEED = 11


def card_code(card: str) -> int:
    """0..51: rank index * 4 + suit index ('Ac' 0, 'As' 3, 'Ks' 51); any spelling the log
    format allows."""
    c = parse_card(card)
    return RANKS.index(c.rank) * len(SUITS) + SUITS.index(c.suit)


def card_text(code: int) -> str:
    return RANKS[code // len(SUITS)] + SUITS[code % len(SUITS)]


# --- how long a run must be -----------------------------------------------------------------


@dataclass(frozen=True)
class Volume:
    """The volume the chance sums are made for: more than most properties deal, so that a
    property's real chance is smaller still. Fewer decks make a given run likelier (one
    card's copies are a bigger share of the shoe), so the smallest shoe a pack allows is the
    one assumed."""

    tables: int = 100
    shoes_per_table_day: int = 30  # a shoe every 48 minutes, 24 hours a day
    cards_per_shoe: int = 416  # eight decks, every card dealt
    decks: int = 6  # the fewest any shipped pack allows (N.J.A.C. 13:69F-7.1(a))
    days: int = 365
    target: float = 0.01  # chance matches a year we accept: one in a hundred years

    @property
    def positions(self) -> int:
        """Card positions dealt in a year: where a run can start."""
        return self.tables * self.shoes_per_table_day * self.days * self.cards_per_shoe

    @property
    def shoes(self) -> int:
        return self.tables * self.shoes_per_table_day * self.days


YEAR_AT_100_TABLES = Volume()


def run_chance(length: int, decks: int) -> float:
    """An upper bound on the chance that `length` given cards come out, in that order, at
    given positions of a fairly shuffled shoe of `decks` decks.

    A shuffled shoe is exchangeable: any `length` positions hold what the first `length`
    hold, so the chance is Π (copies of the i-th card still in) / (cards still in), and each
    factor is at most decks / (52·decks - i). Past the shoe's last card the factors are
    dropped (each is at most 1, so the bound still holds)."""
    n = FACES * decks
    return math.prod(decks / (n - i) for i in range(min(length, n - 1)))


def chance_repeats(length: int, volume: Volume = YEAR_AT_100_TABLES) -> float:
    """Expected chance matches of `length` cards between two different shoes in a year of
    `volume`: (positions choose 2) pairs of starting positions, each a match with at most
    run_chance(length)."""
    p = volume.positions
    return p * (p - 1) / 2 * run_chance(length, volume.decks)


def min_repeat_run(volume: Volume = YEAR_AT_100_TABLES) -> int:
    """The shortest repeated run whose chance matches in a year stay under volume.target
    (12 cards at 100 tables: docs/shoe-integrity.md has the sum)."""
    length = 1
    while chance_repeats(length, volume) >= volume.target:
        length += 1
    return length


def pack_run_chance(length: int, volume: Volume = YEAR_AT_100_TABLES) -> float:
    """Expected chance runs of `length` cards in a new pack's order (one suit, ranks one
    apart, one direction) in a year: at each position, the first card is anything, the
    second one of its at most two neighbours in rank of its suit, each next one the one card
    that goes on in that direction."""
    d, n = volume.decks, FACES * volume.decks
    if length <= 1:
        return float(volume.positions)
    p = 2 * d / (n - 1) * math.prod(d / (n - i) for i in range(2, min(length, n - 1)))
    return volume.positions * p


def min_pack_run(volume: Volume = YEAR_AT_100_TABLES) -> int:
    """The shortest run in a new pack's order that chance leaves under volume.target a year
    (8 cards at 100 tables)."""
    length = 2
    while pack_run_chance(length, volume) >= volume.target:
        length += 1
    return length


def chance_text(length: int, chance: Callable[[int, Volume], float],
                volume: Volume = YEAR_AT_100_TABLES) -> str:
    """'3.3e-04', or '< 1e-300' where the float underflows (a whole shoe repeated)."""
    x = chance(length, volume)
    return f"{x:.1e}" if x > 1e-300 else "< 1e-300"


MIN_REPEAT = min_repeat_run()
MIN_PACK_RUN = min_pack_run()


def seed_layout(min_run: int = MIN_REPEAT) -> tuple[int, int]:
    """(k, step): the k-gram length and the positions of an indexed shoe that are kept
    (every `step`-th). A shoe compared with all its k-grams finds every run of `min_run` or
    more in an indexed shoe: such a run covers min_run - k + 1 consecutive starting
    positions there, so one of them is a kept one."""
    k = min(SEED, min_run)
    return k, min_run - k + 1


# --- k-grams and runs ------------------------------------------------------------------------


def grams(
    codes: np.ndarray | Sequence[int], offsets: np.ndarray | Sequence[int], k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every k-gram of several shoes' card codes laid end to end (`offsets`: each shoe's
    first index, then the total): (shoe index, position in its shoe, gram as base-52)."""
    c = np.asarray(codes, np.int64)
    starts_of = np.asarray(offsets, np.int64)
    total = len(c)
    if total < k:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    gram = np.zeros(total - k + 1, np.int64)
    for i in range(k):
        gram = gram * FACES + c[i : total - k + 1 + i]
    starts = np.arange(total - k + 1, dtype=np.int64)
    shoe = np.searchsorted(starts_of, starts, side="right") - 1
    fits = starts + k <= starts_of[shoe + 1]
    return shoe[fits], (starts - starts_of[shoe])[fits], gram[fits]


def extend(a: Sequence[int], b: Sequence[int], i: int, j: int) -> tuple[int, int, int]:
    """The whole run of equal cards through a[i] == b[j] along their diagonal:
    (start in a, start in b, length)."""
    lo = 0
    while i - lo - 1 >= 0 and j - lo - 1 >= 0 and a[i - lo - 1] == b[j - lo - 1]:
        lo += 1
    hi = 0
    while i + hi < len(a) and j + hi < len(b) and a[i + hi] == b[j + hi]:
        hi += 1
    return i - lo, j - lo, lo + hi


@dataclass(frozen=True)
class Run:
    start: int  # 0-based position in the shoe's dealt cards
    length: int
    direction: int = 0  # +1 ace to king, -1 king to ace (new-pack runs)


def pack_runs(codes: Sequence[int], min_len: int = MIN_PACK_RUN) -> list[Run]:
    """Runs of `min_len` or more cards of one suit whose ranks go up (or down) one at a
    time: a new pack's order, whichever way its maker lays the suits out."""
    c = np.asarray(codes, np.int64)
    if len(c) < max(2, min_len):
        return []
    rank, suit = c // len(SUITS), c % len(SUITS)
    same = suit[1:] == suit[:-1]
    step = rank[1:] - rank[:-1]
    out: list[Run] = []
    for direction in (1, -1):
        ok = same & (step == direction)
        # maximal runs of True in ok: a run of m steps is m + 1 cards
        edges = np.diff(np.concatenate(([0], ok.astype(np.int8), [0])))
        for s, e in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True):
            if e - s + 1 >= min_len:
                out.append(Run(int(s), int(e - s + 1), direction))
    return sorted(out, key=lambda r: r.start)


def pack_runs_of_shoes(
    codes: np.ndarray, offsets: np.ndarray, min_len: int = MIN_PACK_RUN
) -> dict[int, list[Run]]:
    """pack_runs of several shoes' codes laid end to end (`offsets` as in `grams`), at once:
    shoe index -> its runs, for the shoes that have any. A night's shoes in a few numpy
    passes instead of one call each."""
    c = np.asarray(codes, np.int64)
    starts_of = np.asarray(offsets, np.int64)
    if len(c) < 2:
        return {}
    rank, suit = c // len(SUITS), c % len(SUITS)
    joined = np.ones(len(c) - 1, bool)  # pair (i, i + 1) within one shoe
    inner = starts_of[(starts_of > 0) & (starts_of < len(c))]
    joined[inner - 1] = False
    same = (suit[1:] == suit[:-1]) & joined
    step = rank[1:] - rank[:-1]
    found: list[tuple[int, int, int, int]] = []  # (shoe, direction order, start, length)
    for order, direction in enumerate((1, -1)):
        ok = same & (step == direction)
        edges = np.diff(np.concatenate(([0], ok.astype(np.int8), [0])))
        s, e = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        long = e - s + 1 >= min_len
        s, e = s[long], e[long]
        shoe = np.searchsorted(starts_of, s, side="right") - 1
        found += zip(shoe.tolist(), [order] * len(s), (s - starts_of[shoe]).tolist(),
                     (e - s + 1).tolist(), strict=True)
    out: dict[int, list[Run]] = {}
    # as pack_runs: up runs then down runs, each in order, then sorted (stably) by start
    for shoe_i, order, start, length in sorted(found, key=lambda f: (f[0], f[1])):
        out.setdefault(shoe_i, []).append(Run(start, length, 1 if order == 0 else -1))
    return {k: sorted(v, key=lambda r: r.start) for k, v in out.items()}


# --- how much of the previous shoe's order a shoe kept ----------------------------------------

# One-sided normal tail of 6 sd: about 1e-9 per shoe; measured on fairly shuffled shoes in
# tests/replay/test_integrity.py and docs/shoe-integrity.md.
PAIR_Z = 6.0


@dataclass(frozen=True)
class PairTest:
    """Neighbouring pairs of a shoe (card x then card y) that were neighbours, in that order,
    in the previous shoe, against what a fair shuffle leaves by chance."""

    pairs: int  # neighbouring pairs tested in this shoe
    kept: int  # of them, also neighbours in the previous shoe
    expected: float
    sd: float

    @property
    def z(self) -> float:
        return (self.kept - self.expected) / self.sd if self.sd > 0 else 0.0

    @property
    def flagged(self) -> bool:
        return self.z >= PAIR_Z


def kept_pairs(previous: Sequence[int], current: Sequence[int], decks: int) -> PairTest:
    """The test of a shuffle's quality (docs/shoe-integrity.md). Under a fair shuffle the
    shoe is a random order of its 52·decks cards, so any two neighbouring positions hold
    (x, y) with chance decks·(decks - [x = y]) / (n(n - 1)); summed over the previous shoe's
    distinct neighbouring pairs that is p, each of the shoe's pairs is kept with chance p,
    and the count is compared with its binomial mean and sd (the pairs overlap, which the
    6-sd threshold and the measured rate allow for)."""
    before = {(previous[i], previous[i + 1]) for i in range(len(previous) - 1)}
    pairs = max(len(current) - 1, 0)
    kept = sum((current[i], current[i + 1]) in before for i in range(pairs))
    n = FACES * decks
    if n < 2 or pairs == 0:
        return PairTest(pairs, kept, 0.0, 0.0)
    p = sum(decks * (decks - (x == y)) for x, y in before) / (n * (n - 1))
    p = min(p, 1.0)
    expected = pairs * p
    return PairTest(pairs, kept, expected, math.sqrt(pairs * p * (1 - p)))


PAIR_CODES = FACES * FACES  # a neighbouring pair (x, y) as x * 52 + y
_SAME_CARD = np.arange(FACES) * (FACES + 1)  # the pairs (x, x)
PAIRS_CHUNK = 2048  # tests held in one membership matrix (2048 x 2704 bytes)


def kept_pairs_of_shoes(
    previous: Sequence[np.ndarray], current: Sequence[np.ndarray], decks: Sequence[int]
) -> list[PairTest]:
    """kept_pairs(previous[i], current[i], decks[i]) for every i, the same PairTests, with
    the pairs counted in numpy a chunk of tests at a time: a set per shoe in Python was
    most of the pass."""
    out: list[PairTest] = []
    for lo in range(0, len(current), PAIRS_CHUNK):
        hi = min(lo + PAIRS_CHUNK, len(current))
        out += _kept_pairs_chunk(previous[lo:hi], current[lo:hi], decks[lo:hi])
    return out


def _pair_codes(shoes: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Every neighbouring pair of each shoe as (test index, pair code)."""
    tests, codes = [], []
    for i, c in enumerate(shoes):
        c = np.asarray(c, np.int64)
        if len(c) > 1:
            codes.append(c[:-1] * FACES + c[1:])
            tests.append(np.full(len(c) - 1, i, np.int64))
    if not codes:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(tests), np.concatenate(codes)


def _kept_pairs_chunk(
    previous: Sequence[np.ndarray], current: Sequence[np.ndarray], decks: Sequence[int]
) -> list[PairTest]:
    n_tests = len(current)
    before = np.zeros((n_tests, PAIR_CODES), bool)
    t, code = _pair_codes(previous)
    before[t, code] = True
    distinct = before.sum(axis=1)
    same = before[:, _SAME_CARD].sum(axis=1)
    t, code = _pair_codes(current)
    kept = np.bincount(t, weights=before[t, code], minlength=n_tests).astype(np.int64)
    out = []
    for i in range(n_tests):
        d = int(decks[i])
        pairs = max(len(current[i]) - 1, 0)
        n = FACES * d
        if n < 2 or pairs == 0:
            out.append(PairTest(pairs, int(kept[i]), 0.0, 0.0))
            continue
        # as kept_pairs: the sum of d * (d - [x = y]) over the distinct pairs, exactly
        p = min((d * d * int(distinct[i]) - d * int(same[i])) / (n * (n - 1)), 1.0)
        out.append(PairTest(pairs, int(kept[i]), pairs * p, math.sqrt(pairs * p * (1 - p))))
    return out
