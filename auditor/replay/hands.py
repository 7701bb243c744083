"""The two hands of a round as dealt: deal order, third-card draws, counts and the winner.

Everything here looks only at the cards that actually left the shoe, in their order, and at
the pack's tables; the findings built from it live in auditor.replay.round.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from auditor.rules.cards import RANKS, SUITS, card_value, rank_value
from auditor.rules.draw import banker_draws
from auditor.rules.pack import DrawTables

PLAYER, BANKER, TIE = "player", "banker", "tie"
MAX_CARDS = 3


class Hands(NamedTuple):
    """The cards each hand received, in shoe order, and the hand of each card in that order."""

    player: tuple[str, ...]
    banker: tuple[str, ...]
    order: tuple[str, ...]

    @classmethod
    def deal(cls, cards: Sequence[tuple[str, str]]) -> Hands:
        """From (to, card) pairs in the order the cards left the shoe."""
        order = tuple(to for to, _ in cards)
        player = tuple(card for to, card in cards if to == PLAYER)
        banker = tuple(card for to, card in cards if to == BANKER)
        return cls(player, banker, order)

    @property
    def total_cards(self) -> int:
        return len(self.player) + len(self.banker)

    @property
    def complete(self) -> bool:
        """Each hand holds two or three cards, so counts and a winner can be read from it."""
        return 2 <= len(self.player) <= MAX_CARDS and 2 <= len(self.banker) <= MAX_CARDS


class Outcome(NamedTuple):
    """Final counts and the winner read from the cards, with the cards per hand."""

    player_count: int
    banker_count: int
    player_cards: int
    banker_cards: int
    winner: str

    @property
    def total_cards(self) -> int:
        return self.player_cards + self.banker_cards

    @property
    def dragon7(self) -> bool:
        """A "dragon 7 hand": the Banker wins with a three-card count of 7 (13:69F-7.3(i))."""
        return self.winner == BANKER and self.banker_cards == 3 and self.banker_count == 7

    @property
    def panda8(self) -> bool:
        """The Player wins with a three-card count of 8 (the panda 8 side wager)."""
        return self.winner == PLAYER and self.player_cards == 3 and self.player_count == 8


# Values of normalised cards ('Ts'), so the per-round loop looks them up instead of parsing.
_VALUES = {rank + suit: rank_value(rank) for rank in RANKS for suit in SUITS}


def value(card: str) -> int:
    """Baccarat value of a card (13:69F-7.1(b)); any v1 spelling, normalised ones fastest."""
    v = _VALUES.get(card)
    return card_value(card) if v is None else v


def count(cards: Sequence[str]) -> int:
    """Last digit of the sum of the card values (13:69F-7.1(c))."""
    return sum(value(c) for c in cards) % 10


def outcome(hands: Hands) -> Outcome:
    """Counts and winner from the cards as dealt, whatever the tables said they should be:
    wagers are settled on the cards on the layout, so that is what settlement is checked on."""
    p, b = count(hands.player), count(hands.banker)
    winner = PLAYER if p > b else BANKER if b > p else TIE
    return Outcome(p, b, len(hands.player), len(hands.banker), winner)


class DealError(NamedTuple):
    """Why the cards were not dealt in order, and the index of the card where it shows."""

    at: int | None  # None: the round ran out of cards before the initial deal was complete
    problem: str


def deal_error(hands: Hands, deal_order: Sequence[str]) -> DealError | None:
    """The first way the deal broke the order: the first four cards by the pack's deal order,
    at most three cards a hand, and the Player's third card before the Banker's.

    The last rule is not in the deal.order text of the pack but follows from the draw rules:
    the Banker's draw depends on the Player's third card, so the Player's hand is completed
    first (13:69F-7.8 before 7.9); a Banker third card ahead of it is dealt out of order.
    """
    order = hands.order
    for i, hand in enumerate(deal_order):
        if i >= len(order):
            return DealError(None, f"only {len(order)} cards were dealt")
        if order[i] != hand:
            return DealError(
                i, f"card {i + 1} went to the {order[i].title()}, not the {hand.title()}"
            )
    seen = {PLAYER: 0, BANKER: 0}
    for i, hand in enumerate(order):
        if hand not in seen:
            return DealError(i, f"card {i + 1} went to neither hand ({hand!r})")
        seen[hand] += 1
        if seen[hand] > MAX_CARDS:
            return DealError(i, f"the {hand.title()}'s hand got a {seen[hand]}th card")
    if len(order) == 6 and order[4] == BANKER:
        return DealError(4, "the Banker's third card came out before the Player's third card")
    return None


class Draws(NamedTuple):
    """Whether each hand had to take a third card."""

    player: bool
    banker: bool


def required_draws(tables: DrawTables, hands: Hands) -> Draws:
    """The third cards the pack's tables require, from the first four cards dealt.

    The Banker is judged against the Player's third card actually dealt (or "stood" when the
    Player took none), not against the one the Player should have had: a dealer who gives the
    Player a wrong card and then plays the Banker correctly from the layout made one error, and
    reporting the Banker too would blame a second, correct decision. Naturals stop both hands.
    Assumes deal_error(hands) is None (two cards each from the initial deal).
    """
    p2, b2 = count(hands.player[:2]), count(hands.banker[:2])
    if tables.natural[p2] or tables.natural[b2]:
        return Draws(False, False)
    third = value(hands.player[2]) if len(hands.player) == 3 else None
    return Draws(tables.player[p2], banker_draws(tables, b2, third))
