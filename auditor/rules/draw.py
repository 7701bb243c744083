"""Third-card rules as pure functions over a pack's draw tables and plain card values.

These are the reference the audit (and any vectorised SQL path) is tested against, and the
inner loop of the exact odds, so they only index precomputed tuples (RulePack.draw).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from auditor.rules.pack import DrawTables, RulePack

Tables = RulePack | DrawTables

STOOD = 10  # column of DrawTables.banker used when the Player's hand took no third card


class Round(NamedTuple):
    """How a clean round plays out: cards per hand, final counts and the winner."""

    player_cards: int
    banker_cards: int
    player_count: int
    banker_count: int
    winner: str  # "player", "banker" or "tie"

    @property
    def total_cards(self) -> int:
        return self.player_cards + self.banker_cards


def _tables(pack: Tables) -> DrawTables:
    return pack if isinstance(pack, DrawTables) else pack.draw


def is_natural(pack: Tables, two_card_count: int) -> bool:
    return _tables(pack).natural[two_card_count]


def player_draws(pack: Tables, player_count: int) -> bool:
    """The Player's table alone; a natural in either hand stops both (see expected_hands)."""
    return _tables(pack).player[player_count]


def banker_draws(pack: Tables, banker_count: int, player_third_value: int | None) -> bool:
    """The Banker's table: by the Player's third-card value, or None when the Player stood.

    Like player_draws this does not look at the Player's two-card count, so the caller
    checks the naturals first.
    """
    column = STOOD if player_third_value is None else player_third_value
    return _tables(pack).banker[banker_count * 11 + column]


def expected_hands(pack: Tables, values: Sequence[int]) -> tuple[int, int]:
    """Cards the Player's and the Banker's hands must take, given the card values in the
    order they leave the shoe (P, B, P, B, then the Player's third if drawn, then the
    Banker's). Extra values are ignored; too few to decide is a ValueError.
    """
    return play_round(pack, values)[:2]


def play_round(pack: Tables, values: Sequence[int]) -> Round:
    t = _tables(pack)
    if len(values) < 4:
        raise ValueError(f"a round needs at least 4 card values, got {len(values)}")
    player = (values[0] + values[2]) % 10
    banker = (values[1] + values[3]) % 10
    player_cards = banker_cards = 2
    if not (t.natural[player] or t.natural[banker]):
        column = STOOD
        if t.player[player]:
            third = _card(values, 4)
            player = (player + third) % 10
            player_cards = 3
            column = third
        if t.banker[banker * 11 + column]:
            banker = (banker + _card(values, player_cards + 2)) % 10
            banker_cards = 3
    if player > banker:
        winner = "player"
    elif banker > player:
        winner = "banker"
    else:
        winner = "tie"
    return Round(player_cards, banker_cards, player, banker, winner)


def _card(values: Sequence[int], index: int) -> int:
    if index >= len(values):
        raise ValueError(f"the round needs a card at position {index + 1}, got {len(values)}")
    return values[index]
