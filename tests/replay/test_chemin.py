"""Chemin de fer: the NJ pack, and the replay of one round against N.J.A.C. 13:69F-4.7 (wagers
against the Banker), the pack's tableau with its option cells, the commission, the passing of
the bank and the irregularities of 13:69F-4.12. Each provision has a correct and a faulty
round; the names read like the regulation.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from auditor.replay.chemin import check_chemin_round, replay_chemin_round, round_facts
from auditor.replay.chemin_model import CheminEvent, CheminRules, History, RoundFacts
from auditor.replay.hands import count
from auditor.replay.model import TableContext
from auditor.rules.pack import RulePack, RulePackError, load_pack, load_pack_file

REPO_RULES = Path(__file__).resolve().parents[2] / "rules"
CF_TOML = (REPO_RULES / "nj-chemin_de_fer.toml").read_text()
NJ_CF = load_pack("NJ", "chemin_de_fer", rules_dir=REPO_RULES)
T0 = dt.datetime(2026, 11, 28, 23, 0, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
SHOE = "CF-09-1128-01"
RIGHT = object()  # "the right amount" for coup(commission=...)


def table(pack: RulePack = NJ_CF, seats: int = 9) -> TableContext:
    return TableContext("CF-09", "P3", "chemin_de_fer", "NJ", "standard", None, seats, (), pack)


def pack_with(tmp_path: Path, old: str, new: str) -> RulePack:
    """The NJ chemin de fer pack with one edit, loaded from a temporary folder."""
    assert old in CF_TOML, old
    path = tmp_path / "nj-chemin_de_fer.toml"
    path.write_text(CF_TOML.replace(old, new, 1))
    return load_pack_file(path)


def _card_events(spec: str) -> dict[str, Any]:
    """'P4d' -> a card to the Player; 'option:banker:stay'; 'irr:kind:card:disposition'."""
    if spec.startswith("option:"):
        _, hand, choice = spec.split(":")
        return {"type": "option", "hand": hand, "choice": choice}
    if spec.startswith("irr:"):
        _, kind, card, disposition = spec.split(":")
        return {"type": "irregularity", "kind": kind,
                "card": None if card == "-" else card, "disposition": disposition}
    return {"type": "card", "to": {"P": "player", "B": "banker"}[spec[0]], "card": spec[1:]}


def coup(
    *,
    banker: int = 1,
    bank: int | str = 1000,
    bancos: Sequence[tuple[int, str, int | str]] = ((3, "partial", 300),),
    late: Sequence[tuple[int, str, int | str]] = (),
    after_no_more_bets: Sequence[Mapping[str, Any]] = (),
    cards: Sequence[str] = ("P4d", "BQs", "PTh", "B7c", "P2h"),
    winner: str | None = None,
    counts: tuple[int, int] | None = None,
    settle: Mapping[int, tuple[str, int | str] | None] | None = None,
    commission: Any = RIGHT,
    commission_seat: int | None = None,
    void: str | None = None,
    before: Sequence[Mapping[str, Any]] = (),
    after: Sequence[Mapping[str, Any]] = (),
    shoe: str = SHOE,
    rnd: int = 7,
) -> list[CheminEvent]:
    """One chemin de fer round as a log writes it, settled correctly unless told otherwise.

    `winner` and `counts` default to what the cards make (give them for irregular rounds);
    `settle` overrides a seat's settlement (None: leave it unsettled); `commission` is 5% of
    the Banker's winnings unless given (None: none taken)."""
    records: list[dict[str, Any]] = [{"type": "round_start"}, *map(dict, before)]
    records.append({"type": "bank", "seat": banker, "amount": bank})
    records += [{"type": "banco", "seat": s, "kind": k, "amount": a} for s, k, a in bancos]
    records.append({"type": "no_more_bets"})
    records += [{"type": "banco", "seat": s, "kind": k, "amount": a} for s, k, a in late]
    records += list(map(dict, after_no_more_bets))
    records += [_card_events(c) for c in cards]
    hands = {"P": [c[1:] for c in cards if c[0] == "P"], "B": [c[1:] for c in cards if c[0] == "B"]}
    p, b = counts or (count(hands["P"]), count(hands["B"]))
    if winner is None:
        winner = "player" if p > b else "banker" if b > p else "tie"
    if void:
        records.append({"type": "void", "reason": void})
        winner = "void"
    else:
        records.append({"type": "announce", "kind": "result", "player": p, "banker": b,
                        "winner": winner})
    stakes: dict[int, Decimal] = {}
    for s, _, a in (*bancos, *late):
        stakes[s] = stakes.get(s, Decimal(0)) + Decimal(str(a))
    how = {"player": "pay", "banker": "collect"}.get(winner, "push")
    for seat, stake in stakes.items():
        settled = (settle or {}).get(seat, (how, stake))
        if settled is not None:
            records.append({"type": settled[0], "seat": seat, "bet": "player",
                            "amount": settled[1]})
    if commission is RIGHT:
        won = sum(stakes.values(), Decimal(0)) if winner == "banker" else Decimal(0)
        commission = (won * Decimal("0.05")).quantize(Decimal("0.01")) if won else None
    if commission is not None:
        records.append({"type": "commission", "seat": commission_seat or banker,
                        "amount": commission})
    records.append({"type": "round_end"})
    records += list(map(dict, after))
    events = []
    for i, record in enumerate(records):
        seq = 100 + i
        full = {"seq": seq, "ts": T0 + dt.timedelta(seconds=i), "shoe": shoe, "round": rnd,
                **record}
        events.append(CheminEvent.from_record(full, f"cf.jsonl:{seq}"))
    return events


def codes(events: list[CheminEvent], history: History | None = None,
          ctx: TableContext | None = None) -> list[str]:
    return sorted(f.code for f in check_chemin_round(ctx or table(), events, history))


def facts(**kw: Any) -> RoundFacts:
    """Facts of a round before this one, at the same table and shoe by default."""
    base: dict[str, Any] = dict(shoe=SHOE, round=6, banker_seat=1, bank=Decimal(1000),
                                winner="banker", equalled=())
    base.update(kw)
    return RoundFacts(**base)


def after(*rounds: RoundFacts) -> History:
    history = History()
    for r in rounds:
        history = history.after(r)
    return history


# --- The pack ---------------------------------------------------------------------------------


def test_the_tableau_is_marked_unverified_with_its_source() -> None:
    for key in ("draw.player", "draw.banker_when_player_stood", "draw.banker_when_player_drew",
                "draw.naturals"):
        entry = NJ_CF.cited(key)
        assert not entry.verified and entry.source and "casino rule sheets" in entry.source
        assert "(unverified:" in entry.provenance


def test_option_cells_load_as_options_never_as_mandatory_draws() -> None:
    draw = NJ_CF.draw
    assert draw.player[5] is False and draw.player_option[5] is True
    assert [i for i, o in enumerate(draw.banker_option) if o] == [3 * 11 + 9, 5 * 11 + 4]
    assert draw.banker[3 * 11 + 9] is False and draw.banker[5 * 11 + 4] is False


PLAYER_CELLS = ["draw"] * 5 + ["option", "stand", "stand"]
STOOD_CELLS = ["draw"] * 6 + ["stand", "stand"]
DREW_CELLS = {  # Banker count -> cell by the Player's third-card value 0-9
    0: ["draw"] * 10,
    1: ["draw"] * 10,
    2: ["draw"] * 10,
    3: ["draw"] * 8 + ["stand", "option"],
    4: ["stand", "stand"] + ["draw"] * 6 + ["stand", "stand"],
    5: ["stand"] * 4 + ["option", "draw", "draw", "draw", "stand", "stand"],
    6: ["stand"] * 6 + ["draw", "draw", "stand", "stand"],
    7: ["stand"] * 10,
}


@pytest.mark.parametrize("player", range(8))
def test_the_dominant_player_draws_on_0_to_4_may_choose_on_5_and_stands_on_6_and_7(
    player: int,
) -> None:
    rules = CheminRules.of(NJ_CF)
    assert rules.player_cell(player, 0) == PLAYER_CELLS[player]
    assert rules.player_cell(player, 8) == "stand"  # a Banker natural stops the Player


@pytest.mark.parametrize("banker", range(8))
def test_the_banker_draws_by_the_traditional_chemin_de_fer_tableau(banker: int) -> None:
    rules = CheminRules.of(NJ_CF)
    assert rules.banker_cell(6, banker, None) == STOOD_CELLS[banker]
    assert [rules.banker_cell(2, banker, v) for v in range(10)] == DREW_CELLS[banker]
    assert rules.banker_cell(9, banker, None) == "stand"  # a Player natural stops the Banker


def test_4_7_provisions_are_cited_and_practice_is_a_house_option() -> None:
    assert NJ_CF.cited("wagers.limit").citation == "N.J.A.C. 13:69F-4.7(a)"
    assert NJ_CF.cited("wagers.priority").citation == "N.J.A.C. 13:69F-4.7(b)-(d)"
    assert NJ_CF.cited("wagers.after_no_more_bets").citation == "N.J.A.C. 13:69F-4.7(e)"
    assert NJ_CF.cited("settlement.wagers_against_banker").citation == "N.J.A.C. 13:69F-4.7(g)"
    for key in ("commission.rate", "commission.rounding", "bank.pass_when_banker_loses",
                "irregularity_options.h_procedure", "irregularity_options.h1_ten_value_burns",
                "shoe.min_decks"):
        assert NJ_CF.cited(key).house_option, key
    assert NJ_CF.value("commission.rate") == Decimal("0.05")
    assert NJ_CF.cited("irregularity_options.h_procedure").choices == (1, 2, 3)
    assert NJ_CF.cited("irregularity_options.h1_ten_value_burns").choices == (1, 10)
    for key, entry in NJ_CF.entries.items():
        if key.startswith("irregularities."):
            assert entry.citation and entry.citation.startswith("N.J.A.C. 13:69F-4.12"), key


def test_there_is_no_tie_wager_in_chemin_de_fer() -> None:
    assert set(NJ_CF.variant("standard").payouts) == {"player", "banker"}


def test_a_chemin_de_fer_cell_must_be_draw_stand_or_option(tmp_path: Path) -> None:
    with pytest.raises(RulePackError) as err:
        pack_with(tmp_path, '"draw", "option", "stand",', '"draw", "maybe", "stand",')
    assert str(err.value).endswith(
        "draw.player cell for two-card count 5 is 'maybe'; a cell must be \"draw\", \"stand\" "
        'or "option".'
    )


def test_a_natural_cannot_be_an_option_cell(tmp_path: Path) -> None:
    old = '"option", "stand", "stand", "stand", "stand"]'
    with pytest.raises(RulePackError, match='count 8 is "option" but 8 is a natural'):
        pack_with(tmp_path, old, '"option", "stand", "stand", "option", "stand"]')


def test_a_commission_rate_that_is_not_a_decimal_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RulePackError, match=r"commission\.rate is 'five'"):
        pack_with(tmp_path, 'default = "0.05"', 'default = "five"')


def test_a_disposition_the_replay_does_not_know_is_refused(tmp_path: Path) -> None:
    pack = pack_with(tmp_path, 'value = { any = ["player_card"] }',
                     'value = { any = ["give_it_back"] }')
    with pytest.raises(RulePackError, match="names disposition 'give_it_back'"):
        CheminRules.of(pack)


# --- 4.7(a): the bank is the limit ----------------------------------------------------------


def test_4_7_a_wagers_together_equal_to_the_bank_are_accepted() -> None:
    assert codes(coup(bancos=[(2, "partial", 600), (4, "partial", 400)])) == []


def test_4_7_a_wagers_together_exceeding_the_bank_are_over_bank() -> None:
    found = check_chemin_round(table(), coup(bancos=[(2, "partial", 600), (4, "partial", 500)]))
    assert [f.code for f in found] == ["chemin.over_bank"]
    assert found[0].seq == 103  # seat 4's wager took the total past the bank
    assert found[0].observed["total"] == "1100.00"


def test_4_7_a_a_single_wager_exceeding_the_bank_is_over_bank() -> None:
    assert codes(coup(bancos=[(5, "partial", 1200)])) == ["chemin.over_bank"]


def test_4_7_a_only_the_remaining_participants_wager_against_the_banker() -> None:
    assert codes(coup(banker=3, bancos=[(4, "partial", 200)])) == []
    assert codes(coup(banker=3, bancos=[(3, "partial", 200)])) == ["chemin.priority"]


# --- 4.7(b): banco suivi ----------------------------------------------------------------------


WON_AGAINST_SEAT_6 = facts(winner="banker", equalled=(6,))


def test_4_7_b_banco_suivi_by_the_participant_who_equalled_and_lost_goes_first() -> None:
    events = coup(bancos=[(6, "suivi", 1000)])
    assert codes(events, after(WON_AGAINST_SEAT_6)) == []


def test_4_7_b_banco_suivi_by_a_participant_who_did_not_equal_and_lose_breaks_priority() -> None:
    events = coup(bancos=[(4, "suivi", 1000)])
    found = check_chemin_round(table(), events, after(WON_AGAINST_SEAT_6))
    assert [f.code for f in found] == ["chemin.priority"]
    assert "seat 6 equalled and lost" in found[0].message
    assert found[0].expected["suivi_entitled"] == [6]


def test_4_7_b_a_partial_wager_accepted_before_an_announced_banco_suivi_breaks_priority() -> None:
    events = coup(bancos=[(2, "partial", 200), (6, "suivi", 1000)])
    found = check_chemin_round(table(), events, after(WON_AGAINST_SEAT_6))
    assert sorted(f.code for f in found) == ["chemin.over_bank", "chemin.priority"]
    priority = next(f for f in found if f.code == "chemin.priority")
    assert "seat 2's partial wager was accepted before seat 6's banco suivi" in priority.message


def test_4_7_b_a_stand_off_is_not_counted_as_the_preceding_wager() -> None:
    stand_off = facts(round=6, winner="tie", equalled=())
    history = after(facts(round=5, winner="banker", equalled=(6,)), stand_off)
    assert codes(coup(bancos=[(6, "suivi", 1000)]), history) == []


def test_4_7_b_a_participant_who_equalled_and_won_has_no_banco_suivi() -> None:
    history = after(facts(winner="player", equalled=(6,), passes=((1, 2),)))
    events = coup(banker=2, bancos=[(6, "suivi", 1000)])
    assert codes(events, history) == ["chemin.priority"]


def test_4_7_b_banco_suivi_is_against_the_same_bankers_preceding_wager() -> None:
    history = after(facts(banker_seat=1, winner="banker", equalled=(6,), passes=((1, 2),)))
    assert codes(coup(banker=2, bancos=[(6, "suivi", 1000)]), history) == ["chemin.priority"]


def test_4_7_b_banco_suivi_is_not_judged_without_the_preceding_rounds() -> None:
    assert codes(coup(bancos=[(4, "suivi", 1000)]), History()) == []


def test_4_7_b_banco_suivi_for_less_than_the_bank_is_not_a_banco_suivi() -> None:
    events = coup(bancos=[(6, "suivi", 800)])
    assert codes(events, after(WON_AGAINST_SEAT_6)) == ["chemin.priority"]


# --- 4.7(c): banco seul -----------------------------------------------------------------------


def test_4_7_c_banco_seul_when_no_banco_suivi_is_announced() -> None:
    assert codes(coup(bancos=[(5, "seul", 1000)]), after(facts(winner="banker"))) == []


def test_4_7_c_a_partial_wager_accepted_before_a_banco_seul_breaks_priority() -> None:
    events = coup(bancos=[(2, "partial", 200), (5, "seul", 1000)])
    assert codes(events) == ["chemin.over_bank", "chemin.priority"]


def test_4_7_c_of_two_banco_seul_the_nearest_counterclockwise_comes_first() -> None:
    nearest_first = coup(banker=8, bancos=[(1, "seul", 1000), (4, "seul", 1000)])
    assert codes(nearest_first) == ["chemin.over_bank"]  # the second one is over the bank
    farthest_first = coup(banker=8, bancos=[(4, "seul", 1000), (1, "seul", 1000)])
    assert codes(farthest_first) == ["chemin.over_bank", "chemin.priority"]


def test_4_7_c_banco_seul_for_less_than_the_bank_breaks_priority() -> None:
    assert codes(coup(bancos=[(5, "seul", 900)])) == ["chemin.priority"]


# --- 4.7(d): partial wagers ---------------------------------------------------------------


def test_4_7_d_partial_wagers_counterclockwise_from_the_bankers_right_wrap_round() -> None:
    events = coup(banker=8, bancos=[(9, "partial", 300), (1, "partial", 300), (3, "partial", 200)])
    assert codes(events) == []


def test_4_7_d_partial_wagers_out_of_counterclockwise_order_break_priority() -> None:
    events = coup(banker=8, bancos=[(1, "partial", 300), (9, "partial", 300)])
    found = check_chemin_round(table(), events)
    assert [f.code for f in found] == ["chemin.priority"]
    assert found[0].seq == 103
    assert "seat 9 sits nearer counterclockwise from the Banker at seat 8" in found[0].message


# --- 4.7(e): "No more bets" -----------------------------------------------------------------


def test_4_7_e_a_wager_made_after_no_more_bets_is_late() -> None:
    found = check_chemin_round(table(), coup(late=[(7, "partial", 100)]))
    assert [f.code for f in found] == ["chemin.late_wager"]
    assert found[0].observed == {"seq": 104, "seat": 7, "kind": "partial", "amount": "100.00"}


def test_4_7_e_a_wager_raised_after_no_more_bets_is_late() -> None:
    events = coup(bancos=[(3, "partial", 300)], late=[(3, "partial", 100)])
    assert codes(events) == ["chemin.late_wager"]


def test_4_7_e_the_banker_withdraws_the_uncovered_part_after_no_more_bets() -> None:
    events = coup(bancos=[(3, "partial", 600)],
                  after_no_more_bets=[{"type": "bank", "seat": 1, "amount": 600}])
    assert codes(events) == []


def test_4_7_e_the_banker_may_not_withdraw_a_covered_part_or_raise_the_bank() -> None:
    withdrawn = coup(bancos=[(3, "partial", 600)],
                     after_no_more_bets=[{"type": "bank", "seat": 1, "amount": 400}])
    raised = coup(bancos=[(3, "partial", 600)],
                  after_no_more_bets=[{"type": "bank", "seat": 1, "amount": 1500}])
    assert codes(withdrawn) == ["chemin.late_wager"]
    assert codes(raised) == ["chemin.late_wager"]


# --- 4.7(g): settlement -------------------------------------------------------------------


PLAYER_WINS = ("P4d", "BQs", "PTh", "B7c", "P5h")  # Player 4 draws 5 -> 9; Banker 7 stands
BANKER_WINS = ("P4d", "BQs", "PTh", "B7c", "P2h")  # Player 4 draws 2 -> 6; Banker 7 stands
STAND_OFF = ("P4d", "BQs", "PTh", "B7c", "P3h")  # Player 4 draws 3 -> 7; Banker 7 stands


def test_4_7_g_1_participants_win_when_the_players_hand_is_higher() -> None:
    assert codes(coup(cards=PLAYER_WINS)) == []
    short = coup(cards=PLAYER_WINS, settle={3: ("pay", 250)})
    assert codes(short) == ["settle.wrong_amount"]


def test_4_7_g_2_participants_lose_when_the_players_hand_is_lower() -> None:
    assert codes(coup(cards=BANKER_WINS)) == []
    paid = coup(cards=BANKER_WINS, settle={3: ("pay", 300)})
    assert codes(paid) == ["settle.wrong_outcome"]


def test_4_7_g_3_wagers_are_void_when_the_counts_are_equal() -> None:
    assert codes(coup(cards=STAND_OFF)) == []
    collected = coup(cards=STAND_OFF, settle={3: ("collect", 300)})
    assert codes(collected) == ["settle.wrong_outcome"]


def test_4_7_g_a_wager_against_the_bank_left_unsettled() -> None:
    assert codes(coup(cards=PLAYER_WINS, settle={3: None})) == ["settle.unsettled"]


def test_4_7_g_a_settlement_for_a_seat_that_did_not_wager() -> None:
    events = coup(cards=PLAYER_WINS)
    extra = CheminEvent.from_record(
        {"seq": 150, "ts": T0, "type": "pay", "shoe": SHOE, "round": 7, "seat": 9,
         "bet": "player", "amount": 50}, "cf.jsonl:150")
    assert codes([*events[:-1], extra, events[-1]]) == ["settle.wrong_outcome"]


def test_a_wrong_result_announcement_at_a_chemin_de_fer_table() -> None:
    assert codes(coup(cards=BANKER_WINS, counts=(7, 6), winner="banker")) == [
        "result.misannounced"
    ]


# --- Commission on the Banker's winnings ----------------------------------------------------


def test_commission_is_five_percent_of_the_bankers_winnings() -> None:
    events = coup(cards=BANKER_WINS, bancos=[(3, "partial", 300), (5, "partial", 250)])
    assert codes(events) == []
    assert [e.amount for e in events if e.type == "commission"] == [Decimal("27.50")]


def test_a_short_commission() -> None:
    found = check_chemin_round(table(), coup(cards=BANKER_WINS, commission=12))
    assert [f.code for f in found] == ["chemin.commission"]
    assert found[0].message == (
        "The Banker won 300.00; 5% commission is 15.00, and 12.00 was taken."
    )


def test_no_commission_when_the_banker_does_not_win() -> None:
    assert codes(coup(cards=PLAYER_WINS, commission=15)) == ["chemin.commission"]
    assert codes(coup(cards=STAND_OFF, commission=15)) == ["chemin.commission"]


def test_a_missing_commission() -> None:
    assert codes(coup(cards=BANKER_WINS, commission=None)) == ["chemin.commission"]


def test_commission_is_taken_from_the_banker() -> None:
    assert codes(coup(cards=BANKER_WINS, commission_seat=3)) == ["chemin.commission"]


def test_commission_rounding_is_the_house_option(tmp_path: Path) -> None:
    pack = pack_with(tmp_path, 'default = "exact_cents"', 'default = "down_to_cent"')
    events = coup(cards=BANKER_WINS, bancos=[(3, "partial", "10.30")], commission="0.51")
    assert codes(events, ctx=table(pack)) == []
    assert codes(events) == ["chemin.commission"]  # half up: 0.52


# --- Drawing: mandatory cells and option cells ----------------------------------------------


def test_the_dominant_player_with_5_may_stay() -> None:
    stays = ("P4d", "BQs", "PAc", "B7c", "option:player:stay")
    assert codes(coup(cards=stays, winner="banker")) == []


def test_the_dominant_player_with_5_may_draw_without_declaring() -> None:
    draws = ("P4d", "BQs", "PAc", "B6c", "P3h")  # 5 + 3 = 8 against 6
    assert codes(coup(cards=draws)) == []


def test_the_dominant_player_with_4_must_draw_and_has_no_option_to_stay() -> None:
    stays = ("P4d", "BQs", "PTh", "B7c", "option:player:stay")
    found = check_chemin_round(table(), coup(cards=stays))
    assert [f.code for f in found] == ["chemin.option"]  # not also draw.player_missed
    assert "must draw" in found[0].message


def test_the_dominant_player_with_6_must_stand_and_has_no_option_to_draw() -> None:
    draws = ("P6d", "BQs", "PTh", "B7c", "option:player:card", "P2h")
    assert codes(coup(cards=draws)) == ["chemin.option"]


def test_the_dominant_player_with_4_who_stands_without_declaring_missed_a_draw() -> None:
    assert codes(coup(cards=("P4d", "BQs", "PTh", "B7c"))) == ["draw.player_missed"]


def test_a_decision_declared_on_a_mandatory_cell_is_an_option_even_if_the_cards_follow_it() -> None:
    """findings v1: an `option` event on a mandatory cell is chemin.option even when the cards
    then follow the cell; minor then (the log shows a decision the rules do not give), major
    when the cards follow the decision instead."""
    agreed = ("P4d", "BQs", "PTh", "B7c", "option:player:card", "P2h")  # 4 must draw; drew
    found = check_chemin_round(table(), coup(cards=agreed))
    assert [(f.code, f.severity) for f in found] == [("chemin.option", "minor")]
    assert found[0].message.endswith(
        '"card" was declared as if the rules gave an option, and the cards followed the rule.'
    )
    assert found[0].observed["choice"] == "card" and found[0].observed["third_card"] is True
    overruled = ("P4d", "BQs", "PTh", "B7c", "option:player:stay", "P2h")  # "stay", yet drew
    found = check_chemin_round(table(), coup(cards=overruled))
    assert [(f.code, f.severity) for f in found] == [("chemin.option", "minor")]
    assert found[0].expected == {"hand": "player", "option": False, "third_card": True}
    carried_out = ("P4d", "BQs", "PTh", "B7c", "option:player:stay")  # "stay", and stood
    assert [(f.code, f.severity) for f in check_chemin_round(table(), coup(cards=carried_out))] == [
        ("chemin.option", None)  # the registry's severity: major
    ]


def test_a_card_declared_on_a_mandatory_draw_but_not_given_is_the_missed_draw() -> None:
    missed = ("P4d", "BQs", "PTh", "B7c", "option:player:card")  # agreed with the cell, stood
    assert codes(coup(cards=missed)) == ["draw.player_missed"]


def test_at_an_option_cell_the_cards_follow_the_decision_declared() -> None:
    overruled = ("P4d", "BQs", "PAc", "B6c", "option:player:stay", "P3h")
    assert codes(coup(cards=overruled)) == ["chemin.option_not_followed"]


def test_the_banker_with_3_may_choose_when_the_player_drew_a_9() -> None:
    stays = ("P2d", "BQs", "PTh", "B3c", "P9h", "option:banker:stay")  # 1 against 3
    draws = ("P2d", "BQs", "PTh", "B3c", "P9h", "option:banker:card", "B4s")  # 1 against 7
    assert codes(coup(cards=stays)) == []
    assert codes(coup(cards=draws)) == []


def test_the_banker_with_3_must_stand_when_the_player_drew_an_8() -> None:
    extra = ("P2d", "BQs", "PTh", "B3c", "P8h", "B4s")
    assert codes(coup(cards=extra)) == ["draw.banker_extra"]
    declared = ("P2d", "BQs", "PTh", "B3c", "P8h", "option:banker:card", "B4s")
    assert codes(coup(cards=declared)) == ["chemin.option"]


def test_the_banker_with_5_may_choose_when_the_player_drew_a_4() -> None:
    stays = ("P2d", "BQs", "PTh", "B5c", "P4h")  # an undeclared decision is fine
    assert codes(coup(cards=stays)) == []


def test_the_banker_with_4_must_draw_when_the_player_drew_a_2() -> None:
    assert codes(coup(cards=("P2d", "BQs", "PTh", "B4c", "P2h"))) == ["draw.banker_missed"]
    assert codes(coup(cards=("P2d", "BQs", "PTh", "B4c", "P2h", "B3s"))) == []


def test_the_banker_with_6_draws_only_when_the_player_drew_a_6_or_7() -> None:
    assert codes(coup(cards=("P2d", "BQs", "PTh", "B6c", "P6h", "B2s"))) == []
    assert codes(coup(cards=("P2d", "BQs", "PTh", "B6c", "P5h", "B2s"))) == [
        "draw.banker_extra"
    ]


def test_the_banker_draws_on_0_to_5_when_the_player_stood() -> None:
    assert codes(coup(cards=("P6d", "BQs", "PTh", "B5c", "B2s"))) == []
    assert codes(coup(cards=("P6d", "BQs", "PTh", "B5c"))) == ["draw.banker_missed"]


def test_a_natural_is_shown_and_neither_hand_has_an_option() -> None:
    natural = ("P4d", "BQs", "P4h", "B7c")
    assert codes(coup(cards=natural)) == []
    asked = ("P4d", "BQs", "P4h", "B7c", "option:banker:card", "B2s")
    assert codes(coup(cards=asked)) == ["chemin.option"]


def test_cards_out_of_order_in_the_initial_deal() -> None:
    assert codes(coup(cards=("P4d", "PTh", "BQs", "B7c", "P2h"))) == ["deal.order"]


# --- The bank passing -----------------------------------------------------------------------


def test_the_bank_passes_when_the_banker_loses() -> None:
    history = after(facts(winner="player", passes=((1, 2),)))
    assert codes(coup(banker=2, bancos=[(3, "partial", 300)]), history) == []


def test_a_banker_who_lost_and_kept_the_bank() -> None:
    found = check_chemin_round(table(), coup(banker=1), after(facts(winner="player")))
    assert [f.code for f in found] == ["chemin.bank_pass"]
    assert "lost round 6 and kept the bank" in found[0].message


def test_a_banker_who_lost_may_keep_the_bank_where_the_house_allows_it(tmp_path: Path) -> None:
    pack = pack_with(tmp_path, "default = true\nchoices = [true, false]",
                     "default = false\nchoices = [true, false]")
    assert codes(coup(banker=1), after(facts(winner="player")), ctx=table(pack)) == []


def test_the_banker_who_won_keeps_the_bank() -> None:
    assert codes(coup(banker=1), after(facts(winner="banker"))) == []


def test_a_bank_that_changes_hands_without_a_bank_pass() -> None:
    assert codes(coup(banker=4, bancos=[(5, "partial", 300)]), after(facts())) == [
        "chemin.bank_pass"
    ]


def test_a_bank_pass_logged_at_the_start_of_the_next_round_counts() -> None:
    passed = [{"type": "bank_pass", "from_seat": 1, "to_seat": 2}]
    events = coup(banker=2, bancos=[(3, "partial", 300)], before=passed)
    assert codes(events, after(facts(winner="player"))) == []


def test_a_bank_pass_from_a_seat_that_did_not_hold_the_bank() -> None:
    history = after(facts(banker_seat=1, winner="player", passes=((5, 2),)))
    assert codes(coup(banker=2, bancos=[(3, "partial", 300)]), history) == ["chemin.bank_pass"]


def test_a_new_shoe_may_start_with_any_banker() -> None:
    history = after(facts(shoe="CF-09-1128-00", banker_seat=1))
    assert codes(coup(banker=4, bancos=[(5, "partial", 300)]), history) == []


def test_round_facts_carry_what_the_next_round_needs() -> None:
    passed = [{"type": "bank_pass", "from_seat": 1, "to_seat": 2}]
    events = coup(cards=PLAYER_WINS, bancos=[(6, "seul", 1000)], after=passed)
    f = round_facts(table(), events)
    assert (f.banker_seat, f.bank, f.winner, f.equalled, f.passes) == (
        1, Decimal(1000), "player", (6,), ((1, 2),))


# --- 4.12 irregularities ----------------------------------------------------------------------


def irr(kind: str, disposition: str, card: str = "-") -> str:
    return f"irr:{kind}:{card}:{disposition}"


def test_4_12_a_a_wrong_order_that_cannot_be_rectified_annuls_the_hand() -> None:
    cards = ("P4d", "BQs", "B7c", "PTh", irr("banker_deal_order", "hand_annulled"))
    assert codes(coup(cards=cards, winner="void")) == []
    assert codes(coup(cards=cards, winner="banker")) == [
        "chemin.commission",  # none is due on an annulled hand
        "settle.wrong_outcome",
    ]
    wrong = ("P4d", "BQs", "B7c", "PTh", irr("banker_deal_order", "banker_count_zero"))
    assert "irregularity.chemin_disposition" in codes(coup(cards=wrong, winner="void"))


def test_4_12_b_a_banker_with_more_than_two_initial_cards_counts_0() -> None:
    # Banker took Qs 9c 9d; counts 0, draws 5s -> 5. Player 4 draws 3 -> 7: Player wins.
    cards = ("P4d", "BQs", "PTh", "B9c", "B9d",
             irr("banker_extra_initial_card", "banker_count_zero"), "P3h", "B5s")
    assert codes(coup(cards=cards, counts=(7, 5), winner="player")) == []
    annulled = tuple(c.replace("banker_count_zero", "hand_annulled") for c in cards)
    assert codes(coup(cards=annulled, winner="void")) == ["irregularity.chemin_disposition"]


def test_4_12_b_the_banker_count_of_0_decides_the_settlement() -> None:
    # Banker took 9c 9d 9h (7 as dealt); counts 0 and draws 4s -> 4. Player 6 stands: wins.
    cards = ("P6d", "B9c", "PTh", "B9d", "B9h", irr("banker_extra_initial_card",
                                                      "banker_count_zero"), "B4s")
    assert codes(coup(cards=cards, counts=(6, 4), winner="player")) == []
    as_dealt = coup(cards=cards, counts=(6, 1), winner="player")
    assert codes(as_dealt) == ["result.misannounced"]
    collected = coup(cards=cards, counts=(6, 4), winner="player",
                     settle={3: ("collect", 300)})
    assert codes(collected) == ["settle.wrong_outcome"]


def test_4_12_c_three_cards_to_the_dominant_player_count_the_highest_of_two_or_three() -> None:
    # 5c 4d 3h: 5+4 = 9 is the highest (all three make 2); Banker 7.
    cards = ("P5c", "BQs", "P4d", "B7c", "P3h", irr("player_extra_initial_card",
                                                      "player_highest"))
    assert codes(coup(cards=cards, counts=(9, 7), winner="player")) == []
    assert codes(coup(cards=cards, counts=(2, 7), winner="banker")) == [
        "chemin.commission", "result.misannounced", "settle.wrong_outcome"
    ]
    wrong = ("P5c", "BQs", "P4d", "B7c", "P3h", irr("player_extra_initial_card", "hand_void"))
    assert "irregularity.chemin_disposition" in codes(coup(cards=wrong, winner="void"))


def test_4_12_d_two_cards_instead_of_one_count_the_lowest() -> None:
    # Player 6 stands; Banker Tc 3d draws two, 4h and 5s: 7 or 8, the lowest is 7.
    cards = ("P6d", "BTc", "PKd", "B3d", "B4h", "B5s", irr("banker_extra_draw_card",
                                                            "banker_lowest"))
    assert codes(coup(cards=cards, counts=(6, 7), winner="banker")) == []
    assert codes(coup(cards=cards, counts=(6, 8), winner="banker")) == ["result.misannounced"]


STAY_THEN_CARD = ("P6d", "BTc", "PKd", "B{b}", "option:player:stay", "P5h")


def test_4_12_e_a_card_after_stay_is_the_bankers_when_the_banker_must_draw() -> None:
    cards = tuple(  # Banker 4 must draw: 4 + 5 = 9
        c.format(b="4d") for c in (*STAY_THEN_CARD, irr("card_after_stay", "banker_card", "5h"))
    )
    assert codes(coup(cards=cards, counts=(6, 9), winner="banker")) == []
    burned = (*cards[:-1], irr("card_after_stay", "burn_value", "5h"))
    assert codes(coup(cards=burned, counts=(6, 4), winner="player")) == [
        "irregularity.chemin_disposition"
    ]


def test_4_12_e_a_card_after_stay_goes_to_h_when_the_banker_must_stay() -> None:
    cards = tuple(c.format(b="7d") for c in (*STAY_THEN_CARD,
                                             irr("card_after_stay", "burn_value", "5h")))
    assert codes(coup(cards=cards, counts=(6, 7), winner="banker")) == []
    given = (*cards[:-1], irr("card_after_stay", "banker_card", "5h"))
    found = check_chemin_round(table(), coup(cards=given, counts=(6, 2), winner="player"))
    assert [f.code for f in found] == ["irregularity.chemin_disposition"]
    assert found[0].expected == {"kind": "card_after_stay", "situation": "banker_must_stay",
                                 "dispositions": ["burn_value"]}


def test_4_12_e_and_f_differ_where_the_banker_would_have_had_the_option(tmp_path: Path) -> None:
    # A pack whose Banker may choose on 5 when the Player stood.
    pack = pack_with(
        tmp_path,
        'value = ["draw", "draw", "draw", "draw", "draw", "draw", "stand",',
        'value = ["draw", "draw", "draw", "draw", "draw", "option", "stand",',
    )
    ctx = table(pack)
    base = tuple(c.format(b="5d") for c in STAY_THEN_CARD)  # Banker 5: option
    e_card = coup(cards=(*base, irr("card_after_stay", "banker_card", "5h")),
                  counts=(6, 0), winner="player")
    f_card = coup(cards=(*base, irr("card_after_stay_card_called", "banker_card", "5h")),
                  counts=(6, 0), winner="player")
    f_burn = coup(cards=(*base, irr("card_after_stay_card_called", "burn_value", "5h")),
                  counts=(6, 5), winner="player")
    assert codes(e_card, ctx=ctx) == []
    assert codes(f_card, ctx=ctx) == ["irregularity.chemin_disposition"]
    assert codes(f_burn, ctx=ctx) == []


def test_4_12_f_a_card_after_stay_and_card_called_is_the_bankers_only_when_it_must_draw() -> None:
    base = tuple(c.format(b="4d") for c in STAY_THEN_CARD)
    cards = (*base, irr("card_after_stay_card_called", "banker_card", "5h"))
    assert codes(coup(cards=cards, counts=(6, 9), winner="banker")) == []


def test_4_12_g_an_undisclosed_card_drawn_in_error_is_the_first_card_of_the_next_hand() -> None:
    kept = (*BANKER_WINS, irr("card_drawn_undisclosed", "next_hand_first_card", "8s"))
    events = coup(cards=kept)
    found, facts_ = replay_chemin_round(table(), events, History())
    assert found == [] and facts_.kept_card == "8s"
    history = History().after(facts_)
    next_ok = coup(rnd=8, cards=("P8s", "BQs", "PTh", "B7c"))
    next_wrong = coup(rnd=8, cards=("P4d", "BQs", "PTh", "B7c", "P2h"))
    assert codes(next_ok, history) == []
    assert codes(next_wrong, history) == ["irregularity.chemin_disposition"]


def test_4_12_g_not_for_the_next_hand_once_the_cutting_card_is_out() -> None:
    kept = (*BANKER_WINS, irr("card_drawn_undisclosed", "next_hand_first_card", "8s"))
    discarded = (*BANKER_WINS, irr("card_drawn_undisclosed", "discarded", "8s"))
    cut_before = History(cut_card_round=5)
    assert codes(coup(cards=kept), cut_before) == ["irregularity.chemin_disposition"]
    assert codes(coup(cards=discarded), cut_before) == []
    assert codes(coup(cards=kept), History(cut_card_round=7)) == []  # the log cannot tell


def test_4_12_g_h_a_disclosed_card_drawn_in_error_follows_the_preselected_procedure() -> None:
    burned = (*BANKER_WINS, irr("card_drawn_disclosed", "burn_value", "8s"))
    face_down = (*BANKER_WINS, irr("card_drawn_disclosed", "burn_one_face_down", "8s"))
    assert codes(coup(cards=burned)) == []
    assert codes(coup(cards=face_down)) == ["irregularity.chemin_disposition"]


def test_4_12_h_the_licensee_preselects_one_procedure(tmp_path: Path) -> None:
    pack = pack_with(tmp_path, "default = 1\nchoices = [1, 2, 3]",
                     "default = 2\nchoices = [1, 2, 3]")
    face_down = (*BANKER_WINS, irr("card_disclosed_in_error", "burn_one_face_down", "8s"))
    burned = (*BANKER_WINS, irr("card_disclosed_in_error", "burn_value", "8s"))
    assert codes(coup(cards=face_down), ctx=table(pack)) == []
    assert codes(coup(cards=burned), ctx=table(pack)) == ["irregularity.chemin_disposition"]


def test_4_12_i_a_card_the_banker_drew_after_card_was_called_goes_to_the_dominant_player() -> None:
    # Player 4 said "Card"; the Banker drew 5h for itself: it is the Player's (4 + 5 = 9);
    # the Banker (7) then stands.
    cards = ("P4d", "BQs", "PTh", "B7c", "B5h", irr("banker_took_player_card", "player_card",
                                                      "5h"))
    assert codes(coup(cards=cards, counts=(9, 7), winner="player")) == []
    kept = (*cards[:-1], irr("banker_took_player_card", "burn_value", "5h"))
    assert codes(coup(cards=kept, counts=(4, 7), winner="banker")) == [
        "irregularity.chemin_disposition"
    ]


def test_4_12_j_a_card_found_face_up_in_the_shoe_is_not_used() -> None:
    burned = (*BANKER_WINS, irr("face_up_in_shoe", "burned", "Kd"))
    void = (*BANKER_WINS, irr("face_up_in_shoe", "hand_void", "Kd"))
    used = (*BANKER_WINS, irr("face_up_in_shoe", "player_card", "Kd"))
    assert codes(coup(cards=burned)) == []
    assert codes(coup(cards=void, winner="void")) == []
    assert "irregularity.chemin_disposition" in codes(coup(cards=used))


def test_4_12_k_too_few_cards_to_complete_the_hand_make_it_void() -> None:
    cards = ("P4d", "BQs", "PTh", "B7c", irr("insufficient_cards", "hand_void"))
    assert codes(coup(cards=cards, winner="void")) == []
    assert codes(coup(cards=cards, winner="banker")) == [
        "chemin.commission", "settle.wrong_outcome"
    ]


def test_a_void_round_returns_every_wager_and_takes_no_commission() -> None:
    assert codes(coup(void="shoe dropped")) == []
    assert codes(coup(void="shoe dropped", commission=15)) == ["chemin.commission"]


def test_an_irregularity_the_pack_does_not_list_is_reported_not_judged() -> None:
    cards = (*BANKER_WINS, irr("shoe_dropped", "hand_void"))
    found = check_chemin_round(table(), coup(cards=cards, winner="player"))
    assert [f.code for f in found] == ["irregularity.unknown_kind"]


@pytest.mark.slow
def test_a_stay_declared_on_a_mandatory_draw_shows_as_a_minor_option_in_the_export(
    bacc_audit: Any, tmp_path: Path
) -> None:
    """As a user meets it: the sample's chemin de fer log with a "stay" declared before a
    third card the Dominant Player had to take (and took), ingested, audited and exported."""
    sample = Path(__file__).resolve().parents[2] / "sample_logs" / "2026-11-28_CF-01.jsonl"
    events = [json.loads(line) for line in sample.read_text().splitlines()]
    by_round: dict[tuple[str, int], list[int]] = {}
    for i, e in enumerate(events):
        if "round" in e and e["type"] != "cut_card":
            by_round.setdefault((e["shoe"], e["round"]), []).append(i)

    def must_draw_and_drew(idx: list[int]) -> bool:
        kinds = {events[i]["type"] for i in idx}
        player = [events[i]["card"] for i in idx if events[i].get("to") == "player"]
        plain = not kinds & {"option", "irregularity", "void"}
        return plain and len(player) == 3 and count(player[:2]) <= 4

    (shoe, rnd), idx = next((k, idx) for k, idx in by_round.items() if must_draw_and_drew(idx))
    third = [i for i in idx if events[i].get("to") == "player"][2]
    option = {**events[third], "type": "option", "hand": "player", "choice": "stay"}
    del option["to"], option["card"]
    events.insert(third, option)
    for e in events[third + 1 :]:
        e["seq"] += 1
    log = tmp_path / "CF-01.jsonl"
    log.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events))
    db_path = tmp_path / "audit.duckdb"
    assert bacc_audit("ingest", log, "--db", db_path).code == 0
    assert bacc_audit("audit", "--db", db_path).code == 1  # the sample's own major findings
    r = bacc_audit("findings", "--db", db_path, "--code", "chemin.option", "--format", "jsonl")
    assert r.code == 0
    found = {(f["shoe"], f["round"]): f for f in map(json.loads, r.out.splitlines())}
    assert found[(shoe, rnd)]["severity"] == "minor"
    assert found[(shoe, rnd)]["seq"] == option["seq"]
    assert found[(shoe, rnd)]["observed"]["choice"] == "stay"
    assert "the cards followed the rule" in found[(shoe, rnd)]["message"]
    planted = [f for k, f in found.items() if k != (shoe, rnd)]
    assert [f["severity"] for f in planted] == ["major"]  # "stay" declared and carried out
