"""Shoe checks through the whole path: decks (N.J.A.C. 13:69F-7.1(a),(d)), batch alternation
(7.1(d)5), composition, burns (house option; 4.12(j)), the cutting card and the end of the shoe
(house options), rounds the rules make void (4.12(j),(k)); log.seq_gap across files; and logs
that stop without a table's close or a shoe's end (log.table_unclosed, log.shoe_unfinished).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from helpers.tablelog import DECK, Log, TablePassDb, at, deal_rounds

from auditor.replay.log_ends import GamingDays
from auditor.replay.shoes import (
    ShoeRules,
    card_excess,
    face_up_burn_size,
    start_burn_size,
)
from auditor.rules.pack import load_pack

SHIPPED_RULES = Path(__file__).resolve().parents[2] / "rules"

# An 8-deck shoe's first cards after a correct burn (Ac exposed: 1 more card).
BURN_ACE = ["Ac", "Kd"]


def one_shoe(decks: int = 8, shuffle: str = "manual", *, burn: list[str] | None = None,
             jurisdiction: str = "NJ", game: str = "mini_baccarat") -> Log:
    log = Log()
    log.open("MB-01", "P1", "22:00", procedure=1 if jurisdiction == "NJ" else None,
             jurisdiction=jurisdiction, game=game)
    log.shoe_start("MB-01", "22:01", "S1", decks=decks, shuffle=shuffle)
    log.burn("MB-01", "S1", BURN_ACE if burn is None else burn)
    return log


def findings(tmp_path, log: Log, code: str) -> list[dict]:
    a = TablePassDb(tmp_path)
    a.ingest(log)
    a.run()
    return a.findings(code)


# --- decks: 13:69F-7.1(a),(d) --------------------------------------------------------------


def test_a_shoe_of_four_decks_is_too_few(tmp_path):
    [f] = findings(tmp_path, one_shoe(4), "shoe.too_few_decks")
    assert (f["table_id"], f["shoe"], f["seq"]) == ("MB-01", "S1", 2)
    assert f["expected"]["total"] == 6 and f["observed"]["decks"] == 4


@pytest.mark.parametrize("decks", [6, 8])
def test_six_or_more_decks_without_a_shuffler_are_enough(tmp_path, decks):
    assert findings(tmp_path, one_shoe(decks), "shoe.too_few_decks") == []


def test_automated_shuffler_with_two_batches_of_five_decks_is_too_few(tmp_path):
    [f] = findings(tmp_path, one_shoe(5, "automated"), "shoe.too_few_decks")
    assert f["observed"] == {"decks": 5, "batches": 2, "total": 10}
    assert f["expected"]["total"] == 12


def test_automated_shuffler_with_two_batches_of_six_decks_is_enough(tmp_path):
    assert findings(tmp_path, one_shoe(6, "automated"), "shoe.too_few_decks") == []


@pytest.mark.slow
def test_nz_shoe_of_six_decks_is_too_few_for_its_rule_pack(tmp_path):
    [f] = findings(tmp_path, one_shoe(6, jurisdiction="NZ"), "shoe.too_few_decks")
    assert f["expected"]["total"] == 8


# --- batches: 13:69F-7.1(d)4-5 -------------------------------------------------------------


def shoes_with_batches(*batches: str, close_after: int | None = None) -> Log:
    log = Log()
    log.open("MB-05", "P2", "22:00", procedure=3)
    for i, batch in enumerate(batches, start=1):
        hour = f"{(22 + i) % 24:02d}"
        if close_after is not None and i == close_after + 1:
            log.close("MB-05", f"{hour}:00")
            log.open("MB-05", "P2", f"{hour}:05", procedure=3)
        shoe = f"S{i}"
        log.shoe_start("MB-05", f"{hour}:10", shoe, decks=6, shuffle="automated", batch=batch)
        log.burn("MB-05", shoe, BURN_ACE)
        log.shoe_end("MB-05", shoe)
    return log


@pytest.mark.slow
def test_automated_shuffler_alternating_two_batches_is_correct(tmp_path):
    log = shoes_with_batches("red", "blue", "red", "blue")
    assert findings(tmp_path, log, "shoe.batch_not_alternated") == []


@pytest.mark.slow
def test_automated_shuffler_dealing_one_batch_twice_in_a_row_is_not_alternated(tmp_path):
    [f] = findings(tmp_path, shoes_with_batches("red", "blue", "blue"),
                   "shoe.batch_not_alternated")
    assert f["shoe"] == "S3"
    assert f["observed"]["batches"] == [{"shoe": "S1", "batch": "red"},
                                        {"shoe": "S2", "batch": "blue"},
                                        {"shoe": "S3", "batch": "blue"}]
    assert [e["seq"] for e in f["evidence"]["events"]] == [2, 5, 8]


@pytest.mark.slow
def test_a_third_batch_breaks_the_alternation(tmp_path):
    [f] = findings(tmp_path, shoes_with_batches("red", "blue", "green"),
                   "shoe.batch_not_alternated")
    assert f["shoe"] == "S3" and "neither 'blue'" in f["message"]


@pytest.mark.slow
def test_batches_are_compared_within_one_opening_of_the_table(tmp_path):
    log = shoes_with_batches("red", "blue", "blue", close_after=2)
    assert findings(tmp_path, log, "shoe.batch_not_alternated") == []


# --- composition ---------------------------------------------------------------------------


@pytest.mark.slow
def test_nine_queens_of_hearts_in_an_eight_deck_shoe_are_too_many(tmp_path):
    log = one_shoe(8)
    for rnd in range(1, 10):
        log.round("MB-01", "S1", rnd, [("player", "Qh"), ("banker", "2c"), ("player", "3d"),
                                       ("banker", "4s")] if rnd <= 8 else
                  [("player", "2d"), ("banker", "Qh"), ("player", "3s"), ("banker", "4c")])
    [f] = findings(tmp_path, log, "shoe.composition")
    assert f["observed"]["cards"] == {"Qh": 9}
    assert f["expected"] == {"max_per_card": 8}
    ninth = f["evidence"]["events"][0]
    assert ninth["seq"] == f["seq"] and ninth["card"] == "Qh"
    assert "Qh x9" in f["message"]


@pytest.mark.slow
def test_eight_queens_of_hearts_in_an_eight_deck_shoe_are_allowed(tmp_path):
    log = one_shoe(8)
    for rnd in range(1, 9):
        log.round("MB-01", "S1", rnd, [("player", "Qh"), ("banker", "2c"), ("player", "3d"),
                                       ("banker", "4s")])
    assert findings(tmp_path, log, "shoe.composition") == []


@pytest.mark.slow
def test_cards_spelled_differently_are_the_same_card(tmp_path):
    log = one_shoe(1, burn=["Ac", "10s"])
    log.round("MB-01", "S1", 1, [("player", "Ts"), ("banker", "2c"), ("player", "3d"),
                                 ("banker", "4s")])
    [f] = findings(tmp_path, log, "shoe.composition")
    assert f["observed"]["cards"] == {"Ts": 2}


@pytest.mark.slow
def test_finished_shoe_with_cards_missing(tmp_path):
    log = one_shoe(6)
    for rnd, cards in enumerate(deal_rounds(DECK, 2, 2), start=1):
        log.round("MB-01", "S1", rnd, cards)
    log.shoe_end("MB-01", "S1", remaining=300)  # 312 - 2 burned - 8 dealt = 302
    [f] = findings(tmp_path, log, "shoe.composition")
    assert f["observed"] == {"dealt_or_burned": 10, "remaining": 300, "total": 310}
    assert "2 cards are missing" in f["message"]


def test_finished_shoe_whose_cards_all_add_up(tmp_path):
    log = one_shoe(6)
    for rnd, cards in enumerate(deal_rounds(DECK, 2, 2), start=1):
        log.round("MB-01", "S1", rnd, cards)
    log.shoe_end("MB-01", "S1", remaining=302)
    assert findings(tmp_path, log, "shoe.composition") == []


def test_card_excess_reference_matches_sql_path():
    t = at("23:00")
    cards = [("Qh", i, t, "f") for i in range(9)] + [("qH", 20, t, "f"), ("2c", 21, t, "f")]
    [e] = card_excess(cards, 8)
    assert (e.card, e.count, e.seq) == ("Qh", 10, 8)


# --- burns: house option; 13:69F-4.12(j) ---------------------------------------------------


@pytest.mark.parametrize(("first", "size"), [("Ac", 2), ("7d", 8), ("9s", 10), ("Kh", 11),
                                             ("Td", 11)])
def test_start_burn_is_the_exposed_card_and_as_many_as_its_value(first, size):
    option = {"expose": 1, "burn": "card_value", "ten_value_burns": 10}
    assert start_burn_size(first, option) == size


def test_burn_of_the_right_number_of_cards_is_correct(tmp_path):
    log = one_shoe(8, burn=["7d", *DECK[20:27]])
    log.round("MB-01", "S1", 1, deal_rounds(DECK, 0, 1)[0])
    assert findings(tmp_path, log, "shoe.burn") == []


@pytest.mark.slow
def test_burn_of_too_few_cards_after_a_seven_is_wrong(tmp_path):
    log = one_shoe(8, burn=["7d", "2c", "3c", "4c"])
    log.round("MB-01", "S1", 1, deal_rounds(DECK, 0, 1)[0])
    [f] = findings(tmp_path, log, "shoe.burn")
    assert f["expected"]["cards"] == 8 and f["observed"]["cards"] == 4
    assert "calls for 7 more cards (8 in all); 4 were burned" in f["message"]


@pytest.mark.slow
def test_ten_value_exposed_card_burns_ten_more(tmp_path):
    ok = one_shoe(8, burn=["Kh", *DECK[0:10]])
    assert findings(tmp_path, ok, "shoe.burn") == []
    wrong = one_shoe(8, burn=["Kh", "2c"])
    [f] = findings(tmp_path / "wrong", wrong, "shoe.burn")
    assert f["expected"]["cards"] == 11 and "(a 10-value card)" in f["message"]


def test_no_burn_before_dealing_is_reported(tmp_path):
    log = Log()
    log.open("MB-01", "P1", "22:00")
    log.shoe_start("MB-01", "22:01", "S1")
    log.round("MB-01", "S1", 1, deal_rounds(DECK, 0, 1)[0])
    [f] = findings(tmp_path, log, "shoe.burn")
    assert f["round"] == 1 and "no burn was recorded" in f["message"]


def test_card_found_face_up_is_burned_with_as_many_cards_as_its_value(tmp_path):
    log = one_shoe(8)
    log.face_up("MB-01", "S1", "7h", DECK[0:7])
    log.face_up("MB-01", "S1", "Qs", [])  # a queen's value is 0 (7.1(b)): nothing more
    log.round("MB-01", "S1", 1, deal_rounds(DECK, 10, 1)[0])
    assert findings(tmp_path, log, "shoe.burn") == []


def test_card_found_face_up_burned_with_too_few_cards_is_wrong(tmp_path):
    log = one_shoe(8)
    face_up = log.face_up("MB-01", "S1", "7h", DECK[0:5])
    log.round("MB-01", "S1", 1, deal_rounds(DECK, 10, 1)[0])
    [f] = findings(tmp_path, log, "shoe.burn")
    assert f["seq"] == face_up["seq"]
    assert f["expected"] == {"burned_with_it": 7, "card": "7h"}
    assert f["observed"]["burned_with_it"] == 5


def test_face_up_ten_value_card_needs_no_more_cards_by_the_rules_words():
    assert face_up_burn_size("Kd") == 0 and face_up_burn_size("9c") == 9


# --- cutting card and end of shoe (house options) ------------------------------------------
# A one-deck shoe keeps the counts small: 52 cards, 2 burned (Ac exposed), rounds of 4 cards.
# The house places the cutting card 14-16 from the end: 36 to 38 cards in front of it.


def small_shoe(cut_round: int | None, rounds: int, *, then: str = "close",
               last_short: bool = False, void_last: bool = False) -> Log:
    deck = ["Ac", "Kd", *[c for c in DECK if c not in ("Ac", "Kd")]]
    log = Log()
    log.open("MB-01", "P1", "22:00")
    log.shoe_start("MB-01", "22:01", "S1", decks=1)
    log.burn("MB-01", "S1", deck[:2])
    pos = 2
    for rnd in range(1, rounds + 1):
        if last_short and rnd == rounds:
            cards = [("player", deck[pos]), ("banker", deck[pos + 1])]
        else:
            cards = deal_rounds(deck, pos, 1)[0]
        pos += len(cards)
        log.round("MB-01", "S1", rnd, cards, void=void_last and rnd == rounds)
        if rnd == cut_round:
            log.cut_card("MB-01", "S1", rnd)
    log.shoe_end("MB-01", "S1", remaining=52 - pos)
    if then == "close":
        log.close("MB-01", "23:00")
    else:
        log.shoe_start("MB-01", "23:00", "S2", decks=1)
    return log


def test_cutting_card_out_fourteen_to_sixteen_cards_from_the_end_is_correct(tmp_path):
    a = TablePassDb(tmp_path)
    a.ingest(small_shoe(9, 10))
    a.run()
    assert a.findings("shoe.cut_card") == [] and a.findings("shoe.end_of_shoe") == []


@pytest.mark.slow
def test_cutting_card_out_thirty_cards_from_the_end_is_misplaced(tmp_path):
    [f] = findings(tmp_path, small_shoe(5, 10), "shoe.cut_card")
    assert f["round"] == 5 and f["observed"]["cards_left"] == [30, 34]


def test_shoe_dealt_past_the_cutting_card_position_with_no_cutting_card(tmp_path):
    [f] = findings(tmp_path, small_shoe(None, 10), "shoe.cut_card")
    assert f["observed"] == {"cards_out": 42, "cut_card": None}


def test_two_rounds_after_the_cutting_card_round_is_one_too_many(tmp_path):
    [f] = findings(tmp_path, small_shoe(9, 11), "shoe.end_of_shoe")
    assert f["round"] == 11 and f["observed"] == {"rounds_after": [11]}
    assert f["expected"]["last_round"] == 10


@pytest.mark.slow
def test_shoe_ended_without_its_one_more_round_before_the_next_shoe(tmp_path):
    [f] = findings(tmp_path, small_shoe(9, 9, then="next shoe"), "shoe.end_of_shoe")
    assert f["observed"] == {"last_round": 9, "cards_left": 14}


def test_shoe_ended_at_the_cutting_card_round_when_the_table_closes_is_not_reported(tmp_path):
    assert findings(tmp_path, small_shoe(9, 9, then="close"), "shoe.end_of_shoe") == []


# --- rounds the rules make void: 13:69F-4.12(j),(k) ----------------------------------------


def test_round_the_shoe_could_not_complete_must_be_void(tmp_path):
    log = small_shoe(9, 13, last_short=True)  # 2 + 12 x 4 + 2 = 52 cards
    [f] = findings(tmp_path, log, "shoe.void_required")
    assert f["round"] == 13 and "ran out of cards" in f["message"]


@pytest.mark.slow
def test_round_the_shoe_could_not_complete_declared_void_is_correct(tmp_path):
    log = small_shoe(9, 13, last_short=True, void_last=True)
    assert findings(tmp_path, log, "shoe.void_required") == []


def test_last_round_with_a_card_found_face_up_must_be_void(tmp_path):
    log = one_shoe(8)
    log.round("MB-01", "S1", 1, deal_rounds(DECK, 0, 1)[0])
    log.emit("table:MB-01", log.clock["table:MB-01"], "round_start", shoe="S1", round=2)
    log.face_up("MB-01", "S1", "Ah", ["2h"])
    log.emit("table:MB-01", log.clock["table:MB-01"], "round_end", shoe="S1", round=2)
    log.shoe_end("MB-01", "S1")
    [f] = findings(tmp_path, log, "shoe.void_required")
    assert f["round"] == 2 and "Ah was found face up in the shoe during round 2" in f["message"]
    assert f["rule"] == "N.J.A.C. 13:69F-4.12(j),(k)"


# --- log.seq_gap over a stream spread over several files -----------------------------------


@pytest.mark.slow
def test_seq_gap_across_files_is_found_and_withdrawn_when_the_missing_file_arrives(tmp_path):
    log = one_shoe(8)
    for rnd, cards in enumerate(deal_rounds(DECK, 0, 3), start=1):
        log.round("MB-01", "S1", rnd, cards)
    events = log.streams["table:MB-01"]
    a = TablePassDb(tmp_path)
    first, middle, last = events[:10], events[10:20], events[20:]
    for part in (first, last):
        log.streams["table:MB-01"] = part
        a.ingest(log)
    [gap] = a.findings("log.seq_gap")
    assert (gap["table_id"], gap["seq"]) == ("MB-01", 21)
    assert gap["observed"] == {"seq": 21, "previous_seq": 10, "missing": 10}
    assert gap["source"].endswith("log2.jsonl:1")
    a.run()
    assert a.run()["shoes_with_seq_gap"] == 1
    log.streams["table:MB-01"] = middle
    a.ingest(log)
    assert a.findings("log.seq_gap") == []
    assert a.run()["shoes_with_seq_gap"] == 0


@pytest.mark.slow
def test_start_times_of_shoes_are_kept_in_utc(tmp_path):
    a = TablePassDb(tmp_path)
    a.ingest(one_shoe(4))
    a.run()
    [f] = a.findings("shoe.too_few_decks")
    assert f["ts"] == at("22:01").astimezone(dt.UTC)


# --- irregularities: NZ rule 12.2 ----------------------------------------------------------


def nz_round(player: list[str], banker: list[str], disposition: str, *,
             next_first: str | None = None, kind: str = "player_extra_card") -> Log:
    log = one_shoe(8, jurisdiction="NZ")
    cards = [("player", player[0]), ("banker", banker[0]), ("player", player[1]),
             ("banker", banker[1])]
    log.round("MB-01", "S1", 1, cards, after_cards=[
        ("card", {"to": "player", "card": "8c"}),
        ("irregularity", {"kind": kind, "card": "8c", "disposition": disposition}),
    ])
    if next_first:
        log.round("MB-01", "S1", 2, [("player", next_first), ("banker", "2d"),
                                     ("player", "3s"), ("banker", "4s")])
    return log


def test_player_third_card_in_error_becomes_the_bankers_when_the_banker_must_draw(tmp_path):
    log = nz_round(["3c", "3d"], ["2h", "Kc"], "banker_third_card")  # Player 6, Banker 2
    assert findings(tmp_path, log, "irregularity.") == []


def test_player_third_card_in_error_kept_for_next_round_when_the_banker_must_draw(tmp_path):
    log = nz_round(["3c", "3d"], ["2h", "Kc"], "next_round_first_card")
    [f] = findings(tmp_path, log, "irregularity.")
    assert f["expected"] == {"dispositions": ["banker_third_card"], "banker": "banker_must_draw"}
    assert f["round"] == 1 and "must draw" in f["message"]


@pytest.mark.slow
def test_player_third_card_in_error_given_to_a_banker_who_must_stand(tmp_path):
    log = nz_round(["3c", "3d"], ["7h", "Kc"], "banker_third_card")  # Banker 7 stands
    [f] = findings(tmp_path, log, "irregularity.")
    assert f["expected"]["banker"] == "banker_must_stand"
    assert f["observed"]["disposition"] == "banker_third_card"


@pytest.mark.slow
def test_card_kept_for_the_next_round_must_be_its_first_card(tmp_path):
    ok = nz_round(["3c", "3d"], ["7h", "Kc"], "next_round_first_card", next_first="8c")
    assert findings(tmp_path, ok, "irregularity.") == []
    wrong = nz_round(["3c", "3d"], ["7h", "Kc"], "next_round_first_card", next_first="5h")
    [f] = findings(tmp_path / "wrong", wrong, "irregularity.")
    assert f["observed"] == {"next_round_first_card": "5h"}


@pytest.mark.slow
def test_third_card_the_player_was_entitled_to_is_no_irregularity(tmp_path):
    log = nz_round(["2c", "3d"], ["7h", "Kc"], "banker_third_card")  # Player 5 draws
    [f] = findings(tmp_path, log, "irregularity.")
    assert "was entitled to one" in f["message"]


def test_irregularity_the_rule_pack_does_not_list_is_not_judged(tmp_path):
    log = nz_round(["3c", "3d"], ["7h", "Kc"], "burned", kind="shoe_dropped")
    a = TablePassDb(tmp_path)
    a.ingest(log)
    assert a.run()["irregularities_not_judged"] == 1
    assert a.findings("irregularity.") == []


@pytest.mark.slow
def test_the_propertys_house_option_moves_where_the_cutting_card_belongs(tmp_path):
    from auditor import config

    path = tmp_path / "property.toml"
    path.write_text('[house_options]\n"nj-mini_baccarat:shoe.cut_card_from_end" = [10, 12]\n')
    a = TablePassDb(tmp_path / "db", config.load(path))
    a.ingest(small_shoe(9, 10))  # 14-18 cards behind the cutting card: right by default
    a.run()
    [f] = a.findings("shoe.cut_card")
    assert f["expected"] == {"cut_card_from_end": [10, 12]}


# --- logs that stop: log.table_unclosed, log.shoe_unfinished --------------------------------


def night_with_a_cut(other_closes: str = "06:05") -> tuple[Log, list[dict]]:
    """MB-01 plays three rounds of shoe S1 and closes at 23:30; MB-02 opens and closes at
    `other_closes`. Returns the log and MB-01's events after round 2 (the part a cut loses)."""
    log = one_shoe(8)
    for rnd, cards in enumerate(deal_rounds(DECK, 2, 3), start=1):
        log.round("MB-01", "S1", rnd, cards)
    log.shoe_end("MB-01", "S1")
    log.close("MB-01", "23:30")
    log.open("MB-02", "P1", "22:00", procedure=1)
    log.close("MB-02", other_closes)
    events = log.streams["table:MB-01"]
    cut = max(i for i, e in enumerate(events) if e["type"] == "round_end" and e["round"] == 2)
    return log, events[cut + 1:]


def cut_away(log: Log, lost: list[dict]) -> Log:
    log.streams["table:MB-01"] = log.streams["table:MB-01"][:-len(lost)]
    return log


@pytest.mark.slow
def test_a_table_log_cut_at_a_round_boundary_is_reported_and_withdrawn_when_completed(
    tmp_path,
):
    log, lost = night_with_a_cut()
    assert [e["type"] for e in lost][-3:] == ["round_end", "shoe_end", "table_close"]
    a = TablePassDb(tmp_path)
    a.ingest(cut_away(log, lost))
    assert a.findings("log.seq_gap") == []  # nothing in seq shows the cut
    a.run()
    [f] = a.findings("log.")
    assert (f["code"], f["table_id"], f["shoe"], f["round"]) == (
        "log.table_unclosed", "MB-01", None, None)
    last = log.streams["table:MB-01"][-1]
    assert (last["type"], last["round"]) == ("round_end", 2)
    assert f["seq"] == last["seq"] and f["severity"] == "major"
    assert f["observed"]["open_shoe"] == "S1"
    assert f["observed"]["gaming_day"] == "2026-11-28"
    assert f["observed"]["opened"]["seq"] == 1
    assert "no table_close" in f["message"] and "shoe S1 was left without" in f["message"]
    # The rest of the night arrives in a later file: the table closes, the finding is withdrawn.
    rest = Log()
    rest.streams["table:MB-01"] = lost
    a.ingest(rest)
    a.run()
    assert a.findings("log.") == []
    [withdrawn] = a.con.execute(
        "SELECT status FROM findings WHERE code = 'log.table_unclosed' ORDER BY id DESC LIMIT 1"
    ).fetchall()
    assert withdrawn == ("withdrawn",)


@pytest.mark.slow
def test_a_night_still_being_delivered_is_not_flagged_until_its_gaming_day_is_over(tmp_path):
    # The latest event in the database is MB-02's close at 05:30, before the 06:00 end of
    # gaming day 2026-11-28: MB-01 may still be coming.
    log, lost = night_with_a_cut(other_closes="05:30")
    a = TablePassDb(tmp_path)
    a.ingest(cut_away(log, lost))
    a.run()
    assert a.findings("log.") == []
    later = Log()
    later.open("MB-03", "P1", "06:10", procedure=1)  # the next gaming day has begun
    a.ingest(later)
    a.run()
    assert [f["code"] for f in a.findings("log.")] == ["log.table_unclosed"]


def test_the_propertys_gaming_day_start_decides_when_the_day_is_over(tmp_path):
    from auditor.config import PropertyConfig

    log, lost = night_with_a_cut(other_closes="05:30")
    a = TablePassDb(tmp_path, PropertyConfig(gaming_day_start=dt.time(4)))
    a.ingest(cut_away(log, lost))
    a.run()
    [f] = a.findings("log.")
    assert f["observed"]["gaming_day"] == "2026-11-28"
    assert "ended at 2026-11-29 04:00:00" in f["message"]


def test_a_shoe_with_no_end_before_the_next_shoe_or_the_close(tmp_path):
    log = one_shoe(8)
    log.round("MB-01", "S1", 1, deal_rounds(DECK, 2, 1)[0])
    log.shoe_start("MB-01", "23:00", "S2")  # S1 never ended
    log.burn("MB-01", "S2", BURN_ACE)
    log.round("MB-01", "S2", 1, deal_rounds(DECK, 2, 1)[0])
    log.close("MB-01", "23:30")  # nor did S2
    a = TablePassDb(tmp_path)
    a.ingest(log)
    a.run()
    found = a.findings("log.")
    assert [(f["code"], f["shoe"], f["round"]) for f in found] == [
        ("log.shoe_unfinished", "S1", None), ("log.shoe_unfinished", "S2", None)
    ]
    events = log.streams["table:MB-01"]
    s2_start = [e for e in events if e["type"] == "shoe_start"][1]
    close = events[-1]
    assert [f["seq"] for f in found] == [s2_start["seq"], close["seq"]]
    assert found[0]["severity"] == "minor"
    assert found[0]["observed"]["last_round"] == 1
    assert found[0]["observed"]["next_event"]["type"] == "shoe_start"
    assert "went on with shoe_start of shoe S2" in found[0]["message"]


@pytest.mark.slow
def test_a_table_opened_again_without_a_close(tmp_path):
    log = one_shoe(8)
    log.round("MB-01", "S1", 1, deal_rounds(DECK, 2, 1)[0])
    log.shoe_end("MB-01", "S1")
    reopen = log.open("MB-01", "P1", "23:00", procedure=1)
    log.close("MB-01", "23:30")
    a = TablePassDb(tmp_path)
    a.ingest(log)
    a.run()
    [f] = a.findings("log.")
    assert f["code"] == "log.table_unclosed"
    assert f["observed"]["reopened"]["seq"] == reopen["seq"]
    assert f["observed"]["last_event"]["type"] == "shoe_end" and f["seq"] == reopen["seq"] - 1
    assert f["observed"]["open_shoe"] is None


def test_a_missing_end_inside_a_seq_gap_is_the_gaps_finding(tmp_path):
    log = one_shoe(8)
    log.round("MB-01", "S1", 1, deal_rounds(DECK, 2, 1)[0])
    end = log.shoe_end("MB-01", "S1")
    log.close("MB-01", "23:30")
    log.streams["table:MB-01"].remove(end)  # the shoe_end is lost: seq skips it
    a = TablePassDb(tmp_path)
    a.ingest(log)
    a.run()
    assert [f["code"] for f in a.findings("log.")] == ["log.seq_gap"]


@pytest.mark.slow
def test_a_complete_night_has_no_end_finding(tmp_path):
    log, _ = night_with_a_cut()
    a = TablePassDb(tmp_path)
    a.ingest(log)
    a.run()
    assert a.findings("log.") == []


def test_gaming_days_start_at_the_propertys_hour_in_its_zone():
    days = GamingDays(dt.time(6), at("22:00").tzinfo or dt.UTC)
    assert days.of(at("05:59:59")) == dt.date(2026, 11, 28)
    assert days.of(at("06:00")) == dt.date(2026, 11, 29)
    assert days.of(at("22:00")) == dt.date(2026, 11, 28)
    assert days.end(dt.date(2026, 11, 28)) == at("06:00")
    # The same instant in UTC belongs to the same gaming day.
    assert days.of(at("05:59:59").astimezone(dt.UTC)) == dt.date(2026, 11, 28)


def test_an_event_at_the_very_end_of_the_gaming_day_closes_it(tmp_path):
    log, lost = night_with_a_cut(other_closes="06:00")
    a = TablePassDb(tmp_path)
    a.ingest(cut_away(log, lost))
    a.run()
    assert [f["code"] for f in a.findings("log.")] == ["log.table_unclosed"]


@pytest.mark.slow
def test_the_face_up_rule_is_a_pack_key_not_a_jurisdiction_in_code(tmp_path, monkeypatch):
    """A jurisdiction's face-up rule comes from its pack (shoe.face_up_in_shoe): the NJ
    mini-baccarat pack copied as jurisdiction XX judges a face-up card's burn with the key and
    not without it, with no engine change."""
    text = (SHIPPED_RULES / "nj-mini_baccarat.toml").read_text()
    text = text.replace('id = "nj-mini_baccarat"', 'id = "xx-mini_baccarat"')
    text = text.replace('jurisdiction = "NJ"', 'jurisdiction = "XX"')
    faulty = one_shoe(8, jurisdiction="XX")
    faulty.face_up("MB-01", "S1", "7h", DECK[0:5])  # 7 more are due
    faulty.round("MB-01", "S1", 1, deal_rounds(DECK, 10, 1)[0])
    for keep, found in ((True, 1), (False, 0)):
        rules = tmp_path / f"rules-{keep}"
        rules.mkdir()
        cut = text.index("[shoe.face_up_in_shoe]"), text.index("[shoe.burn]")
        pack = text if keep else text[: cut[0]] + text[cut[1] :]
        (rules / "xx-mini_baccarat.toml").write_text(pack)
        monkeypatch.setenv("BACC_AUDIT_RULES", str(rules))
        (tmp_path / f"db-{keep}").mkdir()
        got = findings(tmp_path / f"db-{keep}", faulty, "shoe.burn")
        assert len(got) == found, (keep, got)
    nz = load_pack("NZ", "mini_baccarat", SHIPPED_RULES)
    assert got == [] and ShoeRules.of(nz).face_up_rule is False
