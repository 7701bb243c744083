"""The third-card rules, cell by cell, against tables written out here from the regulation text.

The expected tables below are transcribed independently from the tableau (58 Pa. Code
631a.11 Table 1, identical in every source; see shared rules-reference), not read from the
packs, so a typo in a pack's TOML fails here.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from auditor.rules.cards import card_value, point_count
from auditor.rules.draw import (
    banker_draws,
    expected_hands,
    is_natural,
    play_round,
    player_draws,
)
from auditor.rules.pack import RulePack, load_pack

PACKS = [("NJ", "mini_baccarat"), ("NJ", "punto_banco"), ("NZ", "mini_baccarat")]

# Player: draws on 0-5, stands on 6-7.
PLAYER_DRAWS_ON = {0, 1, 2, 3, 4, 5}
# Banker, when the Player stood: draws on 0-5, stands on 6-7.
BANKER_DRAWS_ON_WHEN_PLAYER_STOOD = {0, 1, 2, 3, 4, 5}
# Banker, when the Player drew a third card of value v: the values of v on which it draws.
BANKER_DRAWS_WHEN_PLAYER_THIRD_CARD_IS = {
    0: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},  # any
    1: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},  # any
    2: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},  # any
    3: {0, 1, 2, 3, 4, 5, 6, 7, 9},  # any except 8
    4: {2, 3, 4, 5, 6, 7},
    5: {4, 5, 6, 7},
    6: {6, 7},
    7: set(),  # stands on any
}
NATURALS = {8, 9}


@pytest.fixture(scope="module", params=PACKS, ids=lambda p: f"{p[0]}-{p[1]}")
def pack(request: pytest.FixtureRequest) -> RulePack:
    return load_pack(*request.param)


def _verb(draws: bool) -> str:
    return "draws" if draws else "stands"


PLAYER_CASES = [(count, count in PLAYER_DRAWS_ON) for count in range(8)]


@pytest.mark.parametrize(
    ("count", "draws"), PLAYER_CASES, ids=[f"with_{c}_{_verb(d)}" for c, d in PLAYER_CASES]
)
def test_player(pack: RulePack, count: int, draws: bool) -> None:
    assert player_draws(pack, count) is draws
    # Banker 7 stands on anything, so the Player's decision alone sets the card count.
    assert expected_hands(pack, [count, 7, 0, 0, 0, 0]) == (3 if draws else 2, 2)


STOOD_CASES = [(count, count in BANKER_DRAWS_ON_WHEN_PLAYER_STOOD) for count in range(8)]


@pytest.mark.parametrize(
    ("count", "draws"),
    STOOD_CASES,
    ids=[f"with_{c}_{_verb(d)}_when_player_stood" for c, d in STOOD_CASES],
)
def test_banker_when_player_stood(pack: RulePack, count: int, draws: bool) -> None:
    assert banker_draws(pack, count, None) is draws
    # Player 6 stands; the Banker's first two cards are count and 0.
    assert expected_hands(pack, [6, count, 0, 0, 0, 0]) == (2, 3 if draws else 2)


BANKER_CASES = [
    (banker, third, third in BANKER_DRAWS_WHEN_PLAYER_THIRD_CARD_IS[banker])
    for banker in range(8)
    for third in range(10)
]


@pytest.mark.parametrize(
    ("banker", "third", "draws"),
    BANKER_CASES,
    ids=[f"with_{b}_{_verb(d)}_when_player_third_card_is_{v}" for b, v, d in BANKER_CASES],
)
def test_banker(pack: RulePack, banker: int, third: int, draws: bool) -> None:
    assert banker_draws(pack, banker, third) is draws
    # Player 0 draws `third`; the Banker's first two cards are banker and 0.
    assert expected_hands(pack, [0, banker, 0, 0, third, 0]) == (3, 3 if draws else 2)


NATURAL_CASES = [(p, b) for p in range(10) for b in range(10) if p in NATURALS or b in NATURALS]


@pytest.mark.parametrize(
    ("player", "banker"),
    NATURAL_CASES,
    ids=[f"player_{p}_banker_{b}_neither_hand_draws" for p, b in NATURAL_CASES],
)
def test_natural(pack: RulePack, player: int, banker: int) -> None:
    assert expected_hands(pack, [player, banker, 0, 0, 0, 0]) == (2, 2)


@pytest.mark.parametrize("count", range(10))
def test_natural_is_a_two_card_count_of_8_or_9(pack: RulePack, count: int) -> None:
    assert is_natural(pack, count) is (count in NATURALS)


def _reference_hands(values: list[int]) -> tuple[int, int]:
    """The tableau as prose, written without the packs or the module under test."""
    player = (values[0] + values[2]) % 10
    banker = (values[1] + values[3]) % 10
    if player in NATURALS or banker in NATURALS:
        return 2, 2
    if player not in PLAYER_DRAWS_ON:
        return 2, 3 if banker in BANKER_DRAWS_ON_WHEN_PLAYER_STOOD else 2
    third = values[4]
    return 3, 3 if third in BANKER_DRAWS_WHEN_PLAYER_THIRD_CARD_IS.get(banker, set()) else 2


def test_every_four_card_start_and_player_third_card_matches_the_tableau(
    pack: RulePack,
) -> None:
    for p1 in range(10):
        for b1 in range(10):
            for p2 in range(10):
                for b2 in range(10):
                    for fifth in range(10):
                        values = [p1, b1, p2, b2, fifth, (p1 + fifth) % 10]
                        assert expected_hands(pack, values) == _reference_hands(values), values


@given(st.lists(st.integers(0, 9), min_size=6, max_size=6))
def test_final_counts_are_the_point_counts_of_the_cards_each_hand_took(
    pack: RulePack, values: list[int]
) -> None:
    r = play_round(pack, values)
    player = values[0:3:2] + (values[4:5] if r.player_cards == 3 else [])
    banker = values[1:4:2] + ([values[r.player_cards + 2]] if r.banker_cards == 3 else [])
    assert (r.player_count, r.banker_count) == (point_count(player), point_count(banker))
    expected = "player" if r.player_count > r.banker_count else "banker"
    assert r.winner == ("tie" if r.player_count == r.banker_count else expected)


def test_event_log_example_round_banker_7_beats_player_6(pack: RulePack) -> None:
    # spec/event-log-v1.md: 4d Qs Th 7c 2h; Player 4 draws a 2 -> 6, Banker 7 stands.
    values = [card_value(c) for c in ("4d", "Qs", "Th", "7c", "2h")]
    result = play_round(pack, values)
    assert (result.player_cards, result.banker_cards) == (3, 2)
    assert (result.player_count, result.banker_count, result.winner) == (6, 7, "banker")
    assert result.total_cards == 5


def test_too_few_cards_to_decide_is_an_error(pack: RulePack) -> None:
    with pytest.raises(ValueError, match="at least 4 card values"):
        expected_hands(pack, [1, 2, 3])
    with pytest.raises(ValueError, match="position 5"):
        expected_hands(pack, [0, 7, 0, 0])  # Player 0 must draw a fifth card
