"""The simulator's own cards and money: shuffled shoes, card values, the round a shoe's next
cards make under a pack's tableau (`deal`, and `deal_chemin` with its option cells), whether a
round lets a deviation show cleanly, and amounts as the logs write them. Written apart from the
replay's rules (auditor.replay), so the generator and the audit stay two witnesses.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

from auditor.rules.cards import RANKS, SUITS, rank_value
from auditor.rules.draw import banker_draws, is_natural, player_draws
from auditor.rules.pack import RulePack

CENT = Decimal("0.01")


def shuffled_shoe(rng: random.Random, decks: int) -> list[str]:
    """`decks` packs shuffled together by `rng`, so a seed deals the same night again."""
    cards = [r + s for r in RANKS for s in SUITS] * decks
    rng.shuffle(cards)
    return cards


def value(card: str) -> int:
    """A card's baccarat value from its rank, without parsing (cards here are well formed)."""
    return rank_value(card[0])


def money(x: Decimal | Fraction | int) -> Decimal:
    """To the cent, half up: the simulated dealers' own arithmetic."""
    if isinstance(x, Fraction):
        x = Decimal(x.numerator) / Decimal(x.denominator)
    return Decimal(x).quantize(CENT, rounding=ROUND_HALF_UP)


def times(stake: Decimal, odds: Fraction) -> Decimal:
    """Winnings of `stake` at `odds`, to the cent."""
    return money(Fraction(stake) * odds)


def amount(x: Decimal) -> int | str:
    """Whole amounts as JSON numbers, cents as strings (both are valid v1)."""
    return int(x) if x == x.to_integral_value() else str(x)


@dataclass
class Outcome:
    """A dealt round: the hands, who got each card, the counts and the winner."""

    player: list[str]
    banker: list[str]
    order: list[str]  # hand of each card in shoe order
    player_count: int
    banker_count: int
    winner: str
    options: list[tuple[str, str]] = field(default_factory=list)  # chemin de fer decisions
    kept_aside: str | None = None  # a card dealt in error before the Banker's third card

    @property
    def cards(self) -> int:
        """The cards of the two hands."""
        return len(self.player) + len(self.banker)

    @property
    def out_of_shoe(self) -> int:
        """The cards the round took from the shoe, a card kept aside included."""
        return self.cards + (self.kept_aside is not None)


def hand_count(cards: list[str]) -> int:
    """A hand's point count: the last digit of its values' sum."""
    return sum(value(c) for c in cards) % 10


def deal(pack: RulePack, shoe: list[str], pos: int, deviation: str = "") -> Outcome | None:
    """The round the next cards make under the pack's tables, with an optional draw error."""
    if pos + 6 > len(shoe):
        return None
    p, b = [shoe[pos], shoe[pos + 2]], [shoe[pos + 1], shoe[pos + 3]]
    order = ["player", "banker", "player", "banker"]
    nxt = pos + 4
    pc, bc = hand_count(p), hand_count(b)
    if not (is_natural(pack, pc) or is_natural(pack, bc)):
        third: int | None = None
        p_draws = player_draws(pack, pc)
        if deviation in ("player_extra", "player_missed"):
            p_draws = not p_draws
        if p_draws:
            p.append(shoe[nxt])
            order.append("player")
            third = value(shoe[nxt])
            nxt += 1
        b_draws = banker_draws(pack, bc, third)
        if deviation in ("banker_missed", "banker_extra"):
            b_draws = not b_draws
        if b_draws:
            b.append(shoe[nxt])
            order.append("banker")
    pc, bc = hand_count(p), hand_count(b)
    winner = "player" if pc > bc else "banker" if bc > pc else "tie"
    return Outcome(p, b, order, pc, bc, winner)


def qualifies(pack: RulePack, kind: str, o: Outcome) -> bool:
    """Whether a round's cards let the deviation show cleanly (and nothing else with it)."""
    pc2 = hand_count(o.player[:2])
    bc2 = hand_count(o.banker[:2])
    natural = is_natural(pack, pc2) or is_natural(pack, bc2)
    if kind == "banker_missed":
        return not natural and len(o.banker) == 3 and not player_draws(pack, pc2)
    if kind == "player_extra":
        return not natural and len(o.player) == 2 and bc2 == 7
    if kind == "player_missed":  # the Banker's decision is the same with the Player standing
        return (
            not natural
            and len(o.player) == 3
            and banker_draws(pack, bc2, None) == (len(o.banker) == 3)
        )
    if kind == "banker_extra":
        return not natural and len(o.banker) == 2
    if kind == "unsettled":  # the Tie wager loses and is left on the layout
        return o.winner != "tie"
    if kind in ("tie_missing", "push_collected"):
        return o.winner == "tie"
    if kind == "dragon_missing":
        return o.winner == "banker" and len(o.banker) == 3 and o.banker_count == 7
    if kind in ("vig_short", "vig_not_allowed", "vig_missing", "wrong_winner",
                "procedure_order"):
        return o.winner == "banker" and not (len(o.banker) == 3 and o.banker_count == 7)
    if kind in ("pay_short", "collect_after_pay", "total_cards_missing"):
        return o.winner == "player"
    if kind == "panda8_missing":
        return is_panda8(o)
    if kind == "irregular_disposition":  # the Player stands and the Banker must draw
        return not natural and len(o.player) == 2 and len(o.banker) == 3
    return True


def is_panda8(o: Outcome) -> bool:
    return o.winner == "player" and len(o.player) == 3 and o.player_count == 8


def panda8_due(pack: RulePack, variant: str) -> bool:
    """Whether the pack makes "panda 8" due at this variant (no shipped pack does; a house
    pack may)."""
    rule = pack.announcements.get("panda_8")
    return rule is not None and rule.value == "panda8_hand" and (
        rule.variants is None or variant in rule.variants
    )


def with_card_kept_aside(o: Outcome, shoe: list[str], pos: int) -> Outcome:
    """The round with a card dealt to the Player in error before the Banker's third card, and
    kept aside (NZ rule 12.2 wants it to be the Banker's third card, the Banker having to
    draw): the Banker draws the card after it, and the hands are settled without it."""
    banker = [*o.banker[:2], shoe[pos + 5]]
    bc = hand_count(banker)
    winner = "player" if o.player_count > bc else "banker" if bc > o.player_count else "tie"
    return Outcome(o.player, banker, o.order, o.player_count, bc, winner, kept_aside=shoe[pos + 4])


def deal_chemin(
    pack: RulePack,
    shoe: list[str],
    pos: int,
    player_choice: bool,
    banker_choice: bool,
    force_player: bool | None = None,
) -> Outcome | None:
    """The round the next cards make under a chemin de fer pack's tableau: mandatory cells
    are followed, option cells decided by `player_choice` / `banker_choice` (True: card) and
    recorded in `options`; `force_player` overrides the Player's decision (a planted
    deviation), declared as if it were an option."""
    if pos + 6 > len(shoe):
        return None
    tables = pack.draw
    p, b = [shoe[pos], shoe[pos + 2]], [shoe[pos + 1], shoe[pos + 3]]
    order = ["player", "banker", "player", "banker"]
    options: list[tuple[str, str]] = []
    nxt = pos + 4
    pc, bc = hand_count(p), hand_count(b)
    if not (is_natural(pack, pc) or is_natural(pack, bc)):
        p_draws = player_draws(pack, pc)
        if tables.player_option and tables.player_option[pc]:
            p_draws = player_choice
            options.append(("player", "card" if p_draws else "stay"))
        if force_player is not None:
            p_draws = force_player
            options = [("player", "card" if p_draws else "stay")]
        third: int | None = None
        if p_draws:
            p.append(shoe[nxt])
            order.append("player")
            third = value(shoe[nxt])
            nxt += 1
        cell = bc * 11 + (10 if third is None else third)
        b_draws = banker_draws(pack, bc, third)
        if tables.banker_option and tables.banker_option[cell]:
            b_draws = banker_choice
            options.append(("banker", "card" if b_draws else "stay"))
        if b_draws:
            b.append(shoe[nxt])
            order.append("banker")
    pc, bc = hand_count(p), hand_count(b)
    winner = "player" if pc > bc else "banker" if bc > pc else "tie"
    return Outcome(p, b, order, pc, bc, winner, options)
