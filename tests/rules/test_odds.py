"""Exact odds from the packs' own tables against published figures.

Sources of the published figures (facts only; no code or text taken):
- [WOO]  Wizard of Odds, baccarat pages (M. Shackleford): 8-deck combinations
  (Banker 2,292,252,566,437,888; Player 2,230,518,282,592,256; Tie 475,627,426,473,216),
  house edges 1.06% / 1.24% / 14.36%, appendix 3 totals 0.458597 / 0.446247 / 0.095156.
  Reproduced with 6- and 4-deck combinations at casinoexploit.com/baccarat.html.
- [WOO-EZ] Wizard of Odds, EZ Baccarat: Banker push on a winning three-card 7, edge 1.02%
  (-0.010183); dragon 7 (40:1) 112,633,011,329,024 combinations, edge 7.61% (-0.076113);
  panda 8 (25:1) 172,660,763,262,976 combinations, edge 10.19% (-0.101876).
- [WOO-SB] Wizard of Odds, baccarat side bets appendix, "4-5-6": probability of 4, 5, 6
  cards for 8 decks 0.378868 / 0.303444 / 0.317687 and 6 decks 0.378925 / 0.303540 /
  0.317535 (paying 3:2, 2:1, 2:1).
- [EXP]  excelpunks.com, "Baccarat vs Non-Commission Baccarat": Banker wins by final count
  (8 decks), e.g. on 6: 269,232,304,455,680; Banker edge 0.010579, Player 0.012351, Tie
  0.143596.
- [JAC]  E. Jacobson, 888casino.com blog on the Super Six side bet: commission-free Banker
  paying 1:2 on a winning six, house edge 1.4581%.
- [GURU] baccarat.guru, "Know Baccarat Odds": single deck Banker 1.01%, Player 1.29%,
  Tie 15.75%.
- [TIE9] practicalwebtools.com baccarat tie bet calculator: Tie at 9:1 (8 decks) 4.84%;
  casinoexploit.com and others print it to one place, 4.8%.
"""

from __future__ import annotations

import time
from fractions import Fraction
from itertools import product
from math import perm

import pytest

from auditor.rules import odds
from auditor.rules.draw import play_round
from auditor.rules.odds import EVENTS, enumerate_shoe, house_edges, probabilities, to_decimal
from auditor.rules.pack import RulePack, load_pack


@pytest.fixture(scope="module")
def nj() -> RulePack:
    return load_pack("NJ", "mini_baccarat")


def pct(x: Fraction) -> str:
    """As the sources print house edges: percent, two decimals."""
    return str(to_decimal(x * 100, 2))


# --- Main wagers --------------------------------------------------------------------------


def test_eight_deck_combinations_match_the_published_counts(nj: RulePack) -> None:  # [WOO]
    shoe = enumerate_shoe(nj, 8)
    assert shoe.total == perm(416, 6) == 4_998_398_275_503_360
    assert shoe.count(EVENTS["banker"]) == 2_292_252_566_437_888
    assert shoe.count(EVENTS["player"]) == 2_230_518_282_592_256
    assert shoe.count(EVENTS["tie"]) == 475_627_426_473_216


def test_eight_deck_probabilities_to_six_places(nj: RulePack) -> None:  # [WOO]
    p = probabilities(nj, 8)
    assert str(to_decimal(p["banker"])) == "0.458597"
    assert str(to_decimal(p["player"])) == "0.446247"
    assert str(to_decimal(p["tie"])) == "0.095156"
    assert p["banker"] + p["player"] + p["tie"] == 1


def test_six_deck_combinations(nj: RulePack) -> None:  # [WOO] via casinoexploit
    shoe = enumerate_shoe(nj, 6)
    assert shoe.total == perm(312, 6)
    assert shoe.count(EVENTS["banker"]) == 403_095_751_234_560
    assert shoe.count(EVENTS["player"]) == 392_220_492_728_832
    assert shoe.count(EVENTS["tie"]) == 83_552_962_932_288


def test_four_deck_combinations(nj: RulePack) -> None:  # [WOO] via casinoexploit
    shoe = enumerate_shoe(nj, 4)
    assert shoe.count(EVENTS["banker"]) == 34_543_624_867_840
    assert shoe.count(EVENTS["player"]) == 33_608_344_225_792


@pytest.mark.parametrize(
    ("decks", "banker", "player", "tie"),
    [
        (8, "1.06", "1.24", "14.36"),  # [WOO]
        (6, "1.06", "1.24", "14.44"),  # [WOO] via casinoexploit
        (1, "1.01", "1.29", "15.75"),  # [GURU]
    ],
)
def test_standard_house_edges(nj: RulePack, decks: int, banker: str, player: str, tie: str) -> None:
    edge = house_edges(nj, decks, "standard")
    assert (pct(edge["banker"]), pct(edge["player"]), pct(edge["tie"])) == (banker, player, tie)


def test_eight_deck_house_edges_to_six_places(nj: RulePack) -> None:  # [EXP]
    edge = house_edges(nj, 8, "standard")
    assert str(to_decimal(edge["banker"])) == "0.010579"
    assert str(to_decimal(edge["player"])) == "0.012351"
    assert str(to_decimal(edge["tie"])) == "0.143596"


def test_tie_paying_9_to_1(nj: RulePack) -> None:  # [TIE9]
    shoe = enumerate_shoe(nj, 8)
    nine_to_one = odds.fixed_odds_return(Fraction(9), EVENTS["tie"])
    assert pct(-shoe.expectation(nine_to_one)) == "4.84"


BANKER_WINS_ON = {  # [EXP], 8 decks
    1: 24_291_119_898_624,
    2: 44_681_581_871_104,
    3: 72_927_778_568_192,
    4: 163_359_790_133_248,
    5: 216_715_928_915_968,
    6: 269_232_304_455_680,
    7: 384_279_324_919_808,
    8: 529_914_458_673_152,
    9: 586_850_279_002_112,
}


@pytest.mark.parametrize("count", sorted(BANKER_WINS_ON))
def test_banker_wins_by_final_count(nj: RulePack, count: int) -> None:
    shoe = enumerate_shoe(nj, 8)
    assert shoe.count(lambda o: o[1] > o[0] and o[1] == count) == BANKER_WINS_ON[count]


# --- No-vigorish variants and side bets ---------------------------------------------------


def test_dragon_7_variant_and_side_bets(nj: RulePack) -> None:  # [WOO-EZ]
    shoe = enumerate_shoe(nj, 8)
    assert shoe.count(EVENTS["dragon7"]) == 112_633_011_329_024
    assert shoe.count(EVENTS["panda8"]) == 172_660_763_262_976
    edge = house_edges(nj, 8, "no_vig_dragon7")
    assert str(to_decimal(edge["banker"])) == "0.010183"
    assert str(to_decimal(edge["dragon7"])) == "0.076113"
    assert str(to_decimal(edge["panda8"])) == "0.101876"
    assert edge["player"] == house_edges(nj, 8, "standard")["player"]


def test_super_6_banker_edge(nj: RulePack) -> None:  # [JAC], [EXP]
    assert pct(house_edges(nj, 8, "super6")["banker"]) == "1.46"
    assert str(to_decimal(house_edges(nj, 8, "super6")["banker"], 6)) == "0.014581"


@pytest.mark.parametrize(
    ("decks", "four", "five", "six"),
    [(8, "0.378868", "0.303444", "0.317687"), (6, "0.378925", "0.303540", "0.317535")],
)
def test_total_cards_probabilities(
    nj: RulePack, decks: int, four: str, five: str, six: str
) -> None:  # [WOO-SB]
    p = probabilities(nj, decks)
    got = tuple(str(to_decimal(p[f"total_cards_{k}"])) for k in (4, 5, 6))
    assert got == (four, five, six)
    assert p["total_cards_4"] + p["total_cards_5"] + p["total_cards_6"] == 1


def test_total_cards_edges_at_the_pack_paytable(nj: RulePack) -> None:  # [WOO-SB], 8 decks
    # The source rounds after multiplying its rounded probabilities: allow 2 in the 6th place.
    edge = house_edges(nj, 8, "standard")
    for name, published in (
        ("total_cards_4", 0.05283),
        ("total_cards_5", 0.089668),
        ("total_cards_6", 0.046939),
    ):
        assert abs(float(edge[name]) - published) < 2e-6, name


# --- Consistency --------------------------------------------------------------------------


def test_every_pack_with_the_standard_tableau_gives_the_same_odds() -> None:
    nj_edges = house_edges(load_pack("NJ", "mini_baccarat"), 8, "standard")
    for jurisdiction, game in (("NJ", "punto_banco"), ("NZ", "mini_baccarat")):
        assert house_edges(load_pack(jurisdiction, game), 8, "standard") == nj_edges


@pytest.mark.parametrize("decks", [1, 2, 6, 8])
def test_counts_cover_every_six_card_sequence(nj: RulePack, decks: int) -> None:
    shoe = enumerate_shoe(nj, decks)
    assert sum(shoe.counts.values()) == shoe.total == perm(52 * decks, 6)


def test_depleted_shoe_matches_brute_force_over_value_sequences(nj: RulePack) -> None:
    """A small odd shoe, counted by a plain loop over all value sequences via play_round."""
    composition = (3, 2, 0, 1, 2, 0, 2, 1, 0, 2)
    present = [v for v in range(10) if composition[v]]
    expected: dict[tuple[int, int, int, int], int] = {}
    for values in product(present, repeat=6):
        left = list(composition)
        weight = 1
        for v in values:
            weight *= left[v]
            left[v] -= 1
        if weight:
            r = play_round(nj, values)
            key = (r.player_count, r.banker_count, r.player_cards, r.banker_cards)
            expected[key] = expected.get(key, 0) + weight
    got = odds.outcome_counts(nj.draw, composition)
    assert dict(got.counts) == expected
    assert got.total == perm(sum(composition), 6)


@pytest.mark.realtime
def test_eight_deck_enumeration_is_fast(nj: RulePack) -> None:
    odds.outcome_counts.cache_clear()
    start = time.perf_counter()
    enumerate_shoe(nj, 8)
    assert time.perf_counter() - start < 2.0


def test_report_gives_decimals_per_variant(nj: RulePack) -> None:
    report = odds.odds_report(nj, 8)
    assert report["pack"] == nj.label
    assert str(report["probability"]["banker"]) == "0.458597"
    assert set(report["house_edge"]) == {"standard", "no_vig_dragon7", "super6"}
    assert str(report["house_edge"]["no_vig_dragon7"]["banker"]) == "0.010183"


def test_too_small_a_shoe_is_refused(nj: RulePack) -> None:
    with pytest.raises(ValueError, match="fewer"):
        odds.outcome_counts(nj.draw, (1, 1, 1, 1, 1, 0, 0, 0, 0, 0))
