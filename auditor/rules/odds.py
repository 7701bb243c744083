"""Exact baccarat odds by complete enumeration of a finite shoe, using the pack's own tables.

Published figures (house edges, side-bet returns) are only a check if they are recomputed
from the very tables the audit replays; a typo in a pack then shows up as a wrong edge.

Counting is done in ordered six-card sequences, the unit the published combination counts
use (416*415*...*411 for eight decks): a round that stops at four or five cards counts once
for every way the unused cards could follow. Cards are grouped by baccarat value (ten
classes, the 0 class holding 10 J Q K), so each ordered value sequence is weighted by how
many card sequences give it. Everything is an exact integer or Fraction until to_decimal().
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from functools import lru_cache
from math import perm
from types import MappingProxyType
from typing import Any

from auditor.rules.draw import banker_draws, is_natural, player_draws
from auditor.rules.pack import DrawTables, RulePack, Variant

# (player count, banker count, player cards, banker cards) at the end of a round.
Outcome = tuple[int, int, int, int]
Event = Callable[[Outcome], bool]

CARDS_PER_RANK_PER_DECK = 4
ZERO_RANKS = 4  # 10, J, Q, K


def shoe_composition(decks: int) -> tuple[int, ...]:
    """Cards per baccarat value 0-9 in a full shoe of `decks` decks."""
    if decks < 1:
        raise ValueError(f"a shoe has at least one deck, got {decks}")
    per_value = CARDS_PER_RANK_PER_DECK * decks
    return (ZERO_RANKS * per_value,) + (per_value,) * 9


@dataclass(frozen=True)
class OutcomeCounts:
    """Ordered six-card sequences of a shoe, counted by how the round they start ends."""

    composition: tuple[int, ...]
    total: int
    counts: Mapping[Outcome, int]

    def count(self, event: Event) -> int:
        return sum(n for outcome, n in self.counts.items() if event(outcome))

    def probability(self, event: Event) -> Fraction:
        return Fraction(self.count(event), self.total)

    def expectation(self, net_return: Callable[[Outcome], Fraction]) -> Fraction:
        """Expected net return per unit staked, for a wager settled by `net_return`."""
        total = sum(n * net_return(outcome) for outcome, n in self.counts.items())
        return Fraction(total, self.total)


def enumerate_shoe(pack: RulePack | DrawTables, decks: int = 8) -> OutcomeCounts:
    tables = pack if isinstance(pack, DrawTables) else pack.draw
    return outcome_counts(tables, shoe_composition(decks))


@lru_cache(maxsize=64)
def outcome_counts(tables: DrawTables, composition: tuple[int, ...]) -> OutcomeCounts:
    """Every round a shoe of this composition can deal next (any composition, e.g. a depleted
    shoe), memoised on the draw tables and the composition."""
    if len(composition) != 10 or any(n < 0 for n in composition):
        raise ValueError(f"a composition is ten non-negative counts, got {composition}")
    if sum(composition) < 6:
        raise ValueError("a round can need six cards; the shoe holds fewer")
    counts = _count_rounds(tables, list(composition))
    total = perm(sum(composition), 6)
    return OutcomeCounts(composition, total, MappingProxyType(counts))


def _count_rounds(tables: DrawTables, c: list[int]) -> dict[Outcome, int]:
    n = sum(c)
    after4 = (n - 4) * (n - 5)  # orders of the unused 5th and 6th cards of a 4-card round
    after5 = n - 5
    acc: dict[Outcome, int] = {}
    for pc, bc, w in _initial_deals(c):
        if is_natural(tables, pc) or is_natural(tables, bc):
            _add(acc, (pc, bc, 2, 2), w * after4)
        elif player_draws(tables, pc):
            for p3 in range(10):
                k = c[p3]
                if not k:
                    continue
                pf = (pc + p3) % 10
                if banker_draws(tables, bc, p3):
                    c[p3] -= 1
                    for b3 in range(10):
                        if c[b3]:
                            _add(acc, (pf, (bc + b3) % 10, 3, 3), w * k * c[b3])
                    c[p3] += 1
                else:
                    _add(acc, (pf, bc, 3, 2), w * k * after5)
        elif banker_draws(tables, bc, None):
            for b3 in range(10):
                if c[b3]:
                    _add(acc, (pc, (bc + b3) % 10, 2, 3), w * c[b3] * after5)
        else:
            _add(acc, (pc, bc, 2, 2), w * after4)
    return acc


def _add(acc: dict[Outcome, int], key: Outcome, weight: int) -> None:
    acc[key] = acc.get(key, 0) + weight


def _initial_deals(c: list[int]) -> Iterator[tuple[int, int, int]]:
    """(Player count, Banker count, ordered sequences) of every four-card start.

    While a start is yielded, `c` holds the shoe without its four cards. The weight of a
    value sequence depends only on the multiset drawn, so both orders of a hand's two cards
    count alike: pairs are enumerated unordered and distinct ones doubled.
    """
    for p1 in range(10):
        for p2 in range(p1, 10):
            wp = c[p1]
            c[p1] -= 1
            wp *= c[p2]
            c[p2] -= 1
            if wp > 0:
                wp *= 1 if p1 == p2 else 2
                for b1 in range(10):
                    for b2 in range(b1, 10):
                        w = c[b1]
                        c[b1] -= 1
                        w *= c[b2]
                        c[b2] -= 1
                        if w > 0:
                            w *= wp * (1 if b1 == b2 else 2)
                            yield (p1 + p2) % 10, (b1 + b2) % 10, w
                        c[b2] += 1
                        c[b1] += 1
            c[p2] += 1
            c[p1] += 1


# --- Events and wagers -------------------------------------------------------------------


def _banker_wins(o: Outcome) -> bool:
    return o[1] > o[0]


def _player_wins(o: Outcome) -> bool:
    return o[0] > o[1]


def _tie(o: Outcome) -> bool:
    return o[0] == o[1]


def _dragon7(o: Outcome) -> bool:
    return o[1] > o[0] and o[1] == 7 and o[3] == 3


def _panda8(o: Outcome) -> bool:
    return o[0] > o[1] and o[0] == 8 and o[2] == 3


def _total_cards(k: int) -> Event:
    return lambda o: o[2] + o[3] == k


# Keyed like KNOWN_SIDE_BETS and the main wagers; what each wager wins on.
EVENTS: Mapping[str, Event] = MappingProxyType(
    {
        "banker": _banker_wins,
        "player": _player_wins,
        "tie": _tie,
        "dragon7": _dragon7,
        "panda8": _panda8,
        "total_cards_4": _total_cards(4),
        "total_cards_5": _total_cards(5),
        "total_cards_6": _total_cards(6),
    }
)


def probabilities(pack: RulePack, decks: int = 8) -> dict[str, Fraction]:
    """P(Banker), P(Player), P(Tie), P(dragon 7), P(panda 8), P(4/5/6 cards), exactly."""
    shoe = enumerate_shoe(pack, decks)
    return {name: shoe.probability(event) for name, event in EVENTS.items()}


def banker_return(variant: Variant, push_on_tie: bool = True) -> Callable[[Outcome], Fraction]:
    """Net return per unit on a Banker wager: odds less vigorish, or a variant's exception."""
    win = variant.pays("banker") * (1 - variant.vigorish_rate)
    exceptions = variant.banker_exceptions
    tie = Fraction(0) if push_on_tie else Fraction(-1)

    def net(o: Outcome) -> Fraction:
        if o[1] > o[0]:
            for exc in exceptions:
                if exc.applies(o[1], o[3]):
                    return Fraction(0) if exc.pays is None else exc.pays
            return win
        return tie if o[0] == o[1] else Fraction(-1)

    return net


def player_return(variant: Variant, push_on_tie: bool = True) -> Callable[[Outcome], Fraction]:
    win = variant.pays("player")
    tie = Fraction(0) if push_on_tie else Fraction(-1)
    return lambda o: win if o[0] > o[1] else (tie if o[0] == o[1] else Fraction(-1))


def fixed_odds_return(odds: Fraction, event: Event) -> Callable[[Outcome], Fraction]:
    return lambda o: odds if event(o) else Fraction(-1)


def wager_returns(pack: RulePack, variant: str) -> dict[str, Callable[[Outcome], Fraction]]:
    """Settlement of every wager the pack offers under one variant, at the pack's defaults."""
    v = pack.variant(variant)
    push = bool(pack.value("settlement.push_on_tie", True))
    returns = {
        "banker": banker_return(v, push),
        "player": player_return(v, push),
        "tie": fixed_odds_return(v.pays("tie"), _tie),
    }
    for name, bet in pack.side_bets.items():
        if bet.variants is None or variant in bet.variants:
            returns[name] = fixed_odds_return(bet.pays.value, EVENTS[name])
    return returns


def house_edges(pack: RulePack, decks: int = 8, variant: str = "standard") -> dict[str, Fraction]:
    """House edge of each wager: expected loss per unit staked, ties counted as pushes."""
    shoe = enumerate_shoe(pack, decks)
    return {name: -shoe.expectation(net) for name, net in wager_returns(pack, variant).items()}


def to_decimal(value: Fraction, places: int = 6) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 60
        exact = Decimal(value.numerator) / Decimal(value.denominator)
        return exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN)


def odds_report(pack: RulePack, decks: int = 8, places: int = 6) -> dict[str, Any]:
    """The figures a report or `bacc-audit odds` prints, as Decimals, with the pack's label."""
    shoe = enumerate_shoe(pack, decks)
    return {
        "pack": pack.label,
        "decks": decks,
        "sequences": shoe.total,
        "probability": {k: to_decimal(p, places) for k, p in probabilities(pack, decks).items()},
        "house_edge": {
            name: {k: to_decimal(e, places) for k, e in house_edges(pack, decks, name).items()}
            for name in pack.variants
        },
    }
