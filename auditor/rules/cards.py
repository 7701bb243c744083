"""Playing cards as event log v1 writes them, and their baccarat values.

Values and point counts follow N.J.A.C. 13:69F-7.1(b)-(c).
"""

from __future__ import annotations

import re
from typing import NamedTuple

RANKS = "A23456789TJQK"
SUITS = "cdhs"
CARD_RE = re.compile(r"^(?:[Aa2-9TtJjQqKk]|10)[CcDdHhSs]$")
# Same grammar for DuckDB's regexp functions (RE2 syntax).
CARD_PATTERN_SQL = r"^([Aa2-9TtJjQqKk]|10)[CcDdHhSs]$"


class Card(NamedTuple):
    rank: str  # one of RANKS
    suit: str  # one of SUITS

    def __str__(self) -> str:
        return self.rank + self.suit


def parse_card(text: str) -> Card:
    """Normalise `Ts`, `10S`, `qh` to Card('T','s'); ValueError names the bad text."""
    if not isinstance(text, str) or not CARD_RE.match(text):
        raise ValueError(f"not a card: {text!r} (rank A 2-9 T J Q K or 10, suit c d h s)")
    rank = "T" if text[:-1] == "10" else text[:-1].upper()
    return Card(rank, text[-1].lower())


def rank_value(rank: str) -> int:
    """Ace 1, two to nine face value, ten and faces 0 (7.1(b))."""
    i = RANKS.index(rank)
    return i + 1 if i < 9 else 0


def card_value(card: Card | str) -> int:
    c = parse_card(card) if isinstance(card, str) else card
    return rank_value(c.rank)


def point_count(values: list[int] | tuple[int, ...]) -> int:
    """Last digit of the sum (7.1(c)): A+2+9 = 12 counts 2."""
    return sum(values) % 10
