"""Which shoe a round was dealt from (issue 28): rounds naming a shoe no shoe_start began
(shoe.not_started) or a shoe the table had left (shoe.reopened) are findings, and their cards
still count in the shoe the table was dealing from, so a relabelled round cannot take a
composition error out of its shoe.
"""

from __future__ import annotations

from helpers.tablelog import DECK, Log, TablePassDb, deal_rounds

from auditor.replay.shoe_labels import id_difference

REAL = "MB-01-1128-01"
PHANTOM = "MB-01-1128-0l"  # one character off: l for 1
BURN = ["Ac", "Kd"]  # Ac exposed, one more card


def one_deck_shoe(rounds: int, relabel: dict[int, str] | None = None, extra: int = 0) -> Log:
    """MB-01: a one-deck shoe, `rounds` rounds of fresh cards, then round `rounds`+1 with the
    cards of round 1 again (four cards more than one deck holds), and its shoe_end with the
    cards left (`extra` more than are). `relabel`: round -> the shoe id its events name."""
    relabel = relabel or {}
    log = Log()
    log.open("MB-01", "P1", "22:00")
    log.shoe_start("MB-01", "22:01", REAL, decks=1)
    log.burn("MB-01", REAL, BURN)
    dealt = deal_rounds(DECK, 2, rounds)
    for rnd, cards in enumerate([*dealt, dealt[0]], start=1):
        log.round("MB-01", relabel.get(rnd, REAL), rnd, cards)
    used = len(BURN) + 4 * (rounds + 1)
    log.shoe_end("MB-01", REAL, remaining=52 - used + extra)
    log.close("MB-01", "23:30")
    return log


def run(tmp_path, log: Log) -> TablePassDb:
    a = TablePassDb(tmp_path)
    a.ingest(log)
    a.run()
    return a


def test_a_round_relabelled_to_a_look_alike_shoe_keeps_the_composition_finding(tmp_path):
    honest = run(tmp_path / "honest", one_deck_shoe(3))
    [excess] = honest.findings("shoe.composition")
    assert (excess["severity"], excess["shoe"]) == ("critical", REAL)
    assert excess["observed"]["cards"] == {"3c": 2, "4c": 2, "5c": 2, "6c": 2}
    # The forger's edit: round 4 (the one with the card too many) logged in PHANTOM, and the
    # shoe_end's `remaining` raised by its 4 cards, so that the real shoe's counts balance.
    lied = run(tmp_path / "lied", one_deck_shoe(3, relabel={4: PHANTOM}, extra=4))
    found = {f["fingerprint"]: f for f in lied.findings("shoe.")}
    # The composition finding stands, the same finding, at its severity ...
    assert found[excess["fingerprint"]]["severity"] == "critical"
    # ... the raised remaining is a composition finding of its own ...
    [total] = [f for f in found.values() if f["code"] == "shoe.composition"
               and f["fingerprint"] != excess["fingerprint"]]
    assert total["observed"] == {"dealt_or_burned": 18, "remaining": 38, "total": 56}
    assert "4 cards more than it holds" in total["message"]
    # ... and the new finding names the lie: the phantom shoe, its round, where it counts.
    [lie] = [f for f in found.values() if f["code"] == "shoe.not_started"]
    assert (lie["severity"], lie["table_id"], lie["shoe"], lie["round"]) == (
        "major", "MB-01", PHANTOM, 4)
    assert lie["observed"]["counted_in"] == REAL and lie["observed"]["rounds"] == [4]
    assert lie["observed"]["cards"] == 4
    assert lie["message"] == (
        f"MB-01: round 4 (seq {lie['seq']}) names shoe {PHANTOM}, which no shoe_start at "
        f"MB-01 began; the table was dealing from shoe {REAL} (shoe_start seq 2): their 4 "
        f"cards are counted in that shoe; {PHANTOM} is not {REAL}: character 13 is 'l' "
        "(U+006C) where it has '1' (U+0031)."
    )
    assert [e["shoe"] for e in lie["evidence"]["events"]] == [PHANTOM, REAL]
    # Never a downgrade: no burn finding for a shoe that was never a shoe.
    assert {f["code"] for f in found.values()} == {
        "shoe.composition", "shoe.not_started", "shoe.too_few_decks"}
    assert lied.findings("log.") == []


def test_a_return_to_an_earlier_shoe_counts_in_the_shoe_being_dealt(tmp_path):
    log = Log()
    log.open("MB-01", "P1", "22:00")
    log.shoe_start("MB-01", "22:01", "S1", decks=1)
    log.burn("MB-01", "S1", BURN)
    s1 = deal_rounds(DECK, 2, 2)
    for rnd, cards in enumerate(s1, start=1):
        log.round("MB-01", "S1", rnd, cards)
    log.shoe_end("MB-01", "S1", remaining=52 - 2 - 8)
    log.shoe_start("MB-01", "22:30", "S2", decks=1)
    log.burn("MB-01", "S2", BURN)
    s2 = deal_rounds(DECK, 2, 3)
    log.round("MB-01", "S2", 1, s2[0])
    # S2's round 2, its cards those of round 1 again, logged as S1's next round
    log.round("MB-01", "S1", 3, s2[0])
    log.round("MB-01", "S2", 3, s2[2])
    log.shoe_end("MB-01", "S2", remaining=52 - 2 - 12)
    log.close("MB-01", "23:30")
    a = run(tmp_path, log)
    [back] = a.findings("shoe.reopened")
    assert (back["severity"], back["shoe"], back["round"]) == ("major", "S1", 3)
    assert back["observed"]["counted_in"] == "S2"
    assert back["expected"] == {"shoe": "S2", "or_shoe_start_of": "S1"}
    starts = [e for e in log.streams["table:MB-01"] if e["type"] == "shoe_start"]
    assert back["message"].startswith(
        f"MB-01 went back to shoe S1 (shoe_start seq {starts[0]['seq']}) with round 3 "
        f"(seq {back['seq']}) after shoe S2 was started (seq {starts[1]['seq']}), with no new "
        "shoe_start of S1; the table was dealing from shoe S2")
    # The round counts in S2: its repeated cards are S2's composition error, and S2's
    # count in all balances; S1 is untouched.
    [excess] = a.findings("shoe.composition")
    assert excess["shoe"] == "S2" and excess["observed"]["cards"] == {
        "3c": 2, "4c": 2, "5c": 2, "6c": 2}
    assert a.findings("shoe.not_started") == []



def test_a_shoe_whose_every_round_comes_after_the_next_shoe_started_is_reopened(tmp_path):
    """S1 started and S2 started over it before any S1 round: the rounds logged as S1 are
    all after S2's shoe_start, so each is a return to S1 and counts in S2."""
    log = Log()
    log.open("MB-01", "P1", "22:00")
    log.shoe_start("MB-01", "22:01", "S1", decks=1)
    log.shoe_start("MB-01", "22:02", "S2", decks=1)
    log.burn("MB-01", "S2", BURN)
    dealt = deal_rounds(DECK, 2, 2)
    for rnd, cards in enumerate(dealt, start=1):
        log.round("MB-01", "S1", rnd, cards)
    log.shoe_end("MB-01", "S2", remaining=52 - 2 - 8)
    log.close("MB-01", "23:30")
    a = run(tmp_path, log)
    [back] = a.findings("shoe.reopened")  # one finding for the return, from its first round
    assert (back["severity"], back["shoe"], back["round"], back["observed"]["counted_in"]) \
        == ("major", "S1", 1, "S2")
    assert (back["observed"]["rounds"], back["observed"]["cards"]) == ([1, 2], 8)
    assert a.findings("shoe.composition") == []  # S2's count balances with them in it

def test_a_shoe_end_of_a_shoe_never_started_ends_nothing(tmp_path):
    log = Log()
    log.open("MB-01", "P1", "22:00")
    log.shoe_start("MB-01", "22:01", "S1")
    log.burn("MB-01", "S1", BURN)
    rounds = deal_rounds(DECK, 2, 3)
    log.round("MB-01", "S1", 1, rounds[0])
    end = log.shoe_end("MB-01", "SX", remaining=0)
    log.round("MB-01", "S1", 2, rounds[1])
    log.close("MB-01", "23:30")  # S1 never ended
    a = run(tmp_path, log)
    [lie] = a.findings("shoe.not_started")
    assert (lie["shoe"], lie["round"], lie["seq"]) == ("SX", None, end["seq"])
    assert lie["observed"]["events"] == ["shoe_end"] and lie["observed"]["rounds"] == []
    assert "a shoe_end (seq" in lie["message"]
    # S1 went on: round 2 is no return to it, and S1's missing shoe_end is still reported.
    assert a.findings("shoe.reopened") == []
    [unfinished] = a.findings("log.shoe_unfinished")
    assert unfinished["shoe"] == "S1"


def test_rounds_of_a_table_with_no_shoe_started_count_in_their_own_shoe(tmp_path):
    log = Log()
    log.open("MB-01", "P1", "22:00")
    for rnd, cards in enumerate(deal_rounds(DECK, 0, 2), start=1):
        log.round("MB-01", "S9", rnd, cards)
    log.close("MB-01", "23:30")
    a = run(tmp_path, log)
    [lie] = a.findings("shoe.")
    assert (lie["code"], lie["shoe"], lie["round"]) == ("shoe.not_started", "S9", 1)
    assert lie["observed"]["rounds"] == [1, 2] and lie["observed"]["counted_in"] == "S9"
    assert "rounds 1-2 (seq 2) name shoe S9" in lie["message"]
    assert "no shoe_start came before them at the table" in lie["message"]


def one_round_shoe() -> Log:
    """MB-01 opens, deals one round of shoe S1 and ends it."""
    log = Log()
    log.open("MB-01", "P1", "22:00")
    log.shoe_start("MB-01", "22:01", "S1")
    log.burn("MB-01", "S1", BURN)
    log.round("MB-01", "S1", 1, deal_rounds(DECK, 2, 1)[0])
    log.shoe_end("MB-01", "S1", remaining=8 * 52 - 6)
    return log


def test_rounds_after_their_shoe_ended_and_no_new_start(tmp_path):
    """The next shoe's shoe_start was never written (the events numbered on, no gap): its
    rounds name a shoe never started; the last shoe had ended, so they count on their own."""
    log = one_round_shoe()
    log.round("MB-01", "S2", 1, deal_rounds(DECK, 6, 1)[0])
    log.close("MB-01", "23:30")
    a = run(tmp_path, log)
    [lie] = a.findings("shoe.")
    assert (lie["code"], lie["shoe"]) == ("shoe.not_started", "S2")
    assert lie["observed"]["counted_in"] == "S2" and lie["observed"]["dealing_from"] is None
    assert "the table's last shoe, S1 (shoe_start seq 2), had ended" in lie["message"]


def test_a_shoe_start_lost_in_a_seq_gap_is_the_gaps_finding(tmp_path):
    log = one_round_shoe()
    start = log.shoe_start("MB-01", "22:30", "S2")
    log.burn("MB-01", "S2", BURN)
    log.round("MB-01", "S2", 1, deal_rounds(DECK, 2, 1)[0])
    log.shoe_end("MB-01", "S2", remaining=8 * 52 - 6)
    log.close("MB-01", "23:30")
    log.streams["table:MB-01"].remove(start)  # seq skips it: log.seq_gap says it is missing
    a = run(tmp_path, log)
    assert a.findings("shoe.not_started") == [] and a.findings("shoe.reopened") == []
    assert [f["code"] for f in a.findings("log.")] == ["log.seq_gap"]


def test_a_clean_night_of_several_shoes_has_no_shoe_label_finding(tmp_path):
    log = Log()
    log.open("MB-01", "P1", "22:00")
    for n in (1, 2, 3):
        shoe = f"S{n}"
        log.shoe_start("MB-01", f"22:{n}0", shoe)
        log.burn("MB-01", shoe, BURN)
        for rnd, cards in enumerate(deal_rounds(DECK, 2, 2), start=1):
            log.round("MB-01", shoe, rnd, cards)
        log.cut_card("MB-01", shoe, 2)
        log.shoe_end("MB-01", shoe, remaining=8 * 52 - 10)
    log.close("MB-01", "23:30")
    a = run(tmp_path, log)
    assert a.findings("shoe.not_started") == [] and a.findings("shoe.reopened") == []


def test_id_difference_names_the_characters_that_differ():
    assert id_difference(PHANTOM, REAL) == (
        "character 13 is 'l' (U+006C) where it has '1' (U+0031)")
    assert id_difference("MB-0l-1128-0l", REAL) == (
        "character 5 is 'l' (U+006C) where it has '1' (U+0031) and character 13 is 'l' "
        "(U+006C) where it has '1' (U+0031)")
    assert id_difference("S2", "S10") == "" and id_difference("ABCD", "WXYZ") == ""
