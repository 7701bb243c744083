"""The round replay on rounds written out by hand, each worked from the regulation and the pack.

Every amount below is computed in the comments from the pack's odds (house-option defaults:
Player and Banker 1 to 1, Tie 8 to 1, vigorish 5% half up to the cent, dragon 7 40 to 1,
panda 8 25 to 1, total cards 4 at 3 to 2, 5 or 6 at 2 to 1, super 6 Banker win with 6 at
1 to 2) and from N.J.A.C. 13:69F-7.10 (seed 000): announce, collect losers, then pay winners
and take vigorish by procedure 1-4, from the highest-numbered winning seat down.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from decimal import Decimal
from types import MappingProxyType

import pytest
from helpers.verdict import Witness, witness_after_the_module

from auditor.finding import Finding
from auditor.replay.round import (
    Event,
    TableContext,
    check_round,
    consistent_procedures,
)
from auditor.replay.settle import vigorish_owed
from auditor.rules.codes import REGISTRY
from auditor.rules.pack import Cited, RulePack, load_pack

NJ_MINI = load_pack("NJ", "mini_baccarat")
NJ_PUNTO = load_pack("NJ", "punto_banco")
NZ_MINI = load_pack("NZ", "mini_baccarat")
T0 = dt.datetime(2026, 11, 28, 22, 0, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
TOTAL_CARDS = ("tie", "total_cards_4", "total_cards_5", "total_cards_6")


def table(
    variant: str = "standard",
    procedure: int | None = 1,
    side_bets: tuple[str, ...] = ("tie",),
    pack: RulePack = NJ_MINI,
    game: str | None = None,
) -> TableContext:
    return TableContext(
        table="MB-07",
        pit="P3",
        game=game or pack.game,
        jurisdiction=pack.jurisdiction,
        variant=variant,
        procedure=procedure,
        seats=7,
        side_bets=side_bets,
        pack=pack,
    )


class Round:
    """A round written event by event as the table systems would log it (seq from 1)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.add("round_start")

    def add(self, type: str, **fields: object) -> Round:
        seq = len(self.events) + 1
        if "amount" in fields:
            fields["amount"] = Decimal(str(fields["amount"]))
        when = T0 + dt.timedelta(seconds=seq)
        self.events.append(Event(seq, type, when, f"MB-07.jsonl:{seq}", **fields))  # type: ignore[arg-type]
        return self

    def wager(self, seat: int, bet: str, amount: object) -> Round:
        return self.add("wager", seat=seat, bet=bet, amount=amount)

    def deal(self, player: str, banker: str) -> Round:
        """Cards in shoe order: P, B, P, B, then the Player's third, then the Banker's."""
        p, b = player.split(), banker.split()
        self.add("no_more_bets")
        for to, card in [("player", p[0]), ("banker", b[0]), ("player", p[1]), ("banker", b[1])]:
            self.card(to, card)
        for card in p[2:]:
            self.card("player", card)
        for card in b[2:]:
            self.card("banker", card)
        return self

    def card(self, to: str, card: str) -> Round:
        return self.add("card", to=to, card=card)

    def result(self, player: int, banker: int, winner: str) -> Round:
        return self.add("announce", kind="result", player=player, banker=banker, winner=winner)

    def announce(self, kind: str, **fields: object) -> Round:
        return self.add("announce", kind=kind, **fields)

    def collect(self, seat: int, bet: str, amount: object) -> Round:
        return self.add("collect", seat=seat, bet=bet, amount=amount)

    def pay(self, seat: int, bet: str, amount: object) -> Round:
        return self.add("pay", seat=seat, bet=bet, amount=amount)

    def push(self, seat: int, bet: str, amount: object) -> Round:
        return self.add("push", seat=seat, bet=bet, amount=amount)

    def vig(self, seat: int, amount: object, mode: str = "collect") -> Round:
        return self.add("vig", seat=seat, amount=amount, mode=mode)

    def end(self) -> list[Event]:
        self.add("round_end")
        return self.events


# Every round given to check_round here is also given to the fast verdict (once the module's
# tests have run):
# a round it calls clean must have no finding (tests/helpers/verdict.py).
WITNESS = Witness()
_verdict_witness = witness_after_the_module(WITNESS)


def findings(ctx: TableContext, events: list[Event]) -> list[Finding]:
    found = check_round(ctx, events)
    WITNESS.record(ctx, events, found)
    for f in found:
        assert f.code in REGISTRY, f.code
    return found


def codes(ctx: TableContext, events: list[Event]) -> list[str]:
    return [f.code for f in findings(ctx, events)]


# --- Worked example 1: standard variant, three Banker winners -----------------------------
#
# Cards: P 4d, B Qs, P Th, B 7c, P 2h.
# Player 4 + 0 = 4 draws (0-5 draw): 2h makes 6. Banker Q + 7 = 7 stands on any third card.
# Banker wins 7 to 6.
# Wagers: seat 7 Banker 100, seat 5 Banker 35, seat 3 Banker 250, seat 2 Player 50, seat 1 Tie 25.
# Losers: seat 2 Player 50 and seat 1 Tie 25 are collected first.
# Winners (1 to 1): seat 7 paid 100, seat 5 paid 35, seat 3 paid 250.
# Vigorish 5% of the winnings: seat 7 5.00, seat 5 1.75, seat 3 12.50.

PAYS_1: dict[int, object] = {7: 100, 5: 35, 3: 250}
VIGS_1: dict[int, object] = {7: "5.00", 5: "1.75", 3: "12.50"}
# The order of each procedure for seats 7, 5, 3 (7.10(b)1-4).
ORDERS_1 = {
    1: ["pay 7", "pay 5", "pay 3", "vig 7", "vig 5", "vig 3"],
    2: ["vig 7", "vig 5", "vig 3", "pay 7", "pay 5", "pay 3"],
    3: ["pay 7", "vig 7", "pay 5", "vig 5", "pay 3", "vig 3"],
    4: ["vig 7", "pay 7", "vig 5", "pay 5", "vig 3", "pay 3"],
}


def banker_wins_7_to_6(
    order: list[str] = ORDERS_1[1],
    pays: dict[int, object] = PAYS_1,
    vigs: dict[int, object] = VIGS_1,
    announce: tuple[int, int, str] | None = (6, 7, "banker"),
    collect_late: bool = False,
) -> list[Event]:
    r = Round()
    r.wager(7, "banker", 100).wager(5, "banker", 35).wager(3, "banker", 250)
    r.wager(2, "player", 50).wager(1, "tie", 25)
    r.deal(player="4d Th 2h", banker="Qs 7c")
    if announce:
        r.result(*announce)
    if not collect_late:
        r.collect(2, "player", 50).collect(1, "tie", 25)
    for step in order:
        kind, seat = step.split()
        if kind == "pay":
            r.pay(int(seat), "banker", pays[int(seat)])
        elif int(seat) in vigs:
            r.vig(int(seat), vigs[int(seat)])
    if collect_late:
        r.collect(2, "player", 50).collect(1, "tie", 25)
    return r.end()


def test_a_correct_round_gives_no_finding() -> None:
    assert findings(table(), banker_wins_7_to_6()) == []


@pytest.mark.parametrize("in_force", [1, 2, 3, 4])
@pytest.mark.parametrize("followed", [1, 2, 3, 4])
def test_three_banker_winners_paid_by_each_procedure(followed: int, in_force: int) -> None:
    events = banker_wins_7_to_6(order=ORDERS_1[followed])
    found = findings(table(procedure=in_force), events)
    if followed == in_force:
        assert found == []
    else:
        assert [f.code for f in found] == ["order.procedure_mismatch"]
        assert found[0].observed["consistent_procedures"] == [followed]
        assert found[0].expected == {"procedure": in_force, "order": ORDERS_1[in_force]}


def test_banker_win_of_100_pays_100_and_owes_5_vigorish() -> None:
    wrong = banker_wins_7_to_6(pays={**PAYS_1, 7: 95}, vigs={**VIGS_1, 7: "4.75"})
    found = findings(table(), wrong)
    assert [f.code for f in found] == ["settle.wrong_amount", "vig.wrong_amount"]
    assert found[0].expected["amount"] == "100.00"
    assert found[0].observed["amount"] == "95.00"
    assert found[1].expected == {"seat": 7, "vigorish": "5.00"}


def test_banker_win_of_35_pays_35_and_owes_1_75_vigorish() -> None:
    found = findings(table(), banker_wins_7_to_6(vigs={**VIGS_1, 5: "1.70"}))
    assert [f.code for f in found] == ["vig.wrong_amount"]
    assert found[0].expected == {"seat": 5, "vigorish": "1.75"}
    assert "Seat 5 owed 1.75 vigorish" in found[0].message


def test_vigorish_may_be_marked_instead_of_collected() -> None:
    r = (
        Round()
        .wager(3, "banker", 100)
        .deal(player="4d Th 2h", banker="Qs 7c")
        .result(6, 7, "banker")
    )
    events = r.pay(3, "banker", 100).vig(3, 5, mode="mark").end()
    assert findings(table(), events) == []


def test_vigorish_rounds_half_up_to_the_cent() -> None:
    # 5% of 10.10 is 0.505, half up 0.51.
    assert vigorish_owed(Decimal("10.10"), NJ_MINI.variant("standard")) == Decimal("0.51")
    r = Round().wager(3, "banker", "10.10").deal(player="4d Th 2h", banker="Qs 7c")
    events = r.result(6, 7, "banker").pay(3, "banker", "10.10").vig(3, "0.51").end()
    assert findings(table(), events) == []


# --- Worked example 2: two winning seats, one with a side wager (total cards) -----------------
#
# Same cards: 5 cards dealt, Banker wins 7 to 6. Table offers total card wagers.
# Wagers: seat 6 Banker 200 and Total Cards 5 10; seat 4 Player 100; seat 2 Banker 50 and
# Total Cards 4 25.
# Losers: seat 4 Player 100, seat 2 Total Cards 4 25.
# Seat 6's payment: Banker 200 (1 to 1) and Total Cards 5 10 at 2 to 1 = 20; vigorish 10.00.
# Seat 2's payment: Banker 50; vigorish 2.50.

ORDERS_2 = {
    1: ["pay 6", "pay 6 tc", "pay 2", "vig 6", "vig 2"],
    2: ["vig 6", "vig 2", "pay 6", "pay 6 tc", "pay 2"],
    3: ["pay 6", "pay 6 tc", "vig 6", "pay 2", "vig 2"],
    4: ["vig 6", "pay 6", "pay 6 tc", "vig 2", "pay 2"],
}


def two_seats_with_total_cards(order: list[str], count: int | None = 5) -> list[Event]:
    r = Round()
    r.wager(6, "banker", 200).wager(6, "total_cards_5", 10).wager(4, "player", 100)
    r.wager(2, "banker", 50).wager(2, "total_cards_4", 25)
    r.deal(player="4d Th 2h", banker="Qs 7c").result(6, 7, "banker")
    if count is not None:
        r.announce("total_cards", count=count)
    r.collect(4, "player", 100).collect(2, "total_cards_4", 25)
    steps = {
        "pay 6": lambda: r.pay(6, "banker", 200),
        "pay 6 tc": lambda: r.pay(6, "total_cards_5", 20),
        "pay 2": lambda: r.pay(2, "banker", 50),
        "vig 6": lambda: r.vig(6, "10.00"),
        "vig 2": lambda: r.vig(2, "2.50"),
    }
    for step in order:
        steps[step]()
    return r.end()


@pytest.mark.parametrize("procedure", [1, 2, 3, 4])
def test_a_seat_payment_includes_its_side_wagers(procedure: int) -> None:
    events = two_seats_with_total_cards(ORDERS_2[procedure])
    assert findings(table(procedure=procedure, side_bets=TOTAL_CARDS), events) == []
    pays_and_vigs = [(e.type, e.seat or 0) for e in events if e.type in ("pay", "vig")]
    assert consistent_procedures(pays_and_vigs, vig_charged=True) == {procedure}


def test_a_seat_payment_split_by_its_vigorish_fits_no_procedure() -> None:
    events = two_seats_with_total_cards(["pay 6", "vig 6", "pay 6 tc", "pay 2", "vig 2"])
    found = findings(table(procedure=3, side_bets=TOTAL_CARDS), events)
    assert [f.code for f in found] == ["order.procedure_mismatch"]
    assert found[0].observed["consistent_procedures"] == []


def test_total_card_wager_of_10_on_5_cards_pays_20() -> None:
    events = two_seats_with_total_cards(ORDERS_2[1])
    wrong = [
        replace(e, amount=Decimal(10)) if e.bet == "total_cards_5" and e.type == "pay" else e
        for e in events
    ]
    found = findings(table(side_bets=TOTAL_CARDS), wrong)
    assert [f.code for f in found] == ["settle.wrong_amount"]
    assert found[0].expected["amount"] == "20.00"


def test_total_cards_missing_when_total_card_wagers_are_offered() -> None:
    ctx = table(side_bets=TOTAL_CARDS)
    assert codes(ctx, two_seats_with_total_cards(ORDERS_2[1], count=None)) == [
        "announce.total_cards_missing"
    ]
    assert codes(ctx, two_seats_with_total_cards(ORDERS_2[1], count=5)) == []


def test_total_cards_announced_with_the_wrong_number() -> None:
    ctx = table(side_bets=TOTAL_CARDS)
    found = findings(ctx, two_seats_with_total_cards(ORDERS_2[1], count=4))
    assert [f.code for f in found] == ["announce.total_cards_wrong"]
    assert (found[0].expected, found[0].observed) == ({"count": 5}, {"count": 4})


def test_no_total_cards_announcement_is_due_without_total_card_wagers() -> None:
    r = Round().wager(3, "player", 100).deal(player="4d Th 2h", banker="Qs 7c")
    events = r.result(6, 7, "banker").collect(3, "player", 100).end()
    assert codes(table(side_bets=("tie",)), events) == []


# --- Single winning seat: procedures 1 and 3 coincide, and so do 2 and 4 -------------------


def one_banker_winner(vig_first: bool) -> list[Event]:
    # Seat 3 Banker 100 wins 7 to 6: paid 100, vigorish 5.00.
    r = Round().wager(3, "banker", 100).deal(player="4d Th 2h", banker="Qs 7c")
    r.result(6, 7, "banker")
    if vig_first:
        return r.vig(3, 5).pay(3, "banker", 100).end()
    return r.pay(3, "banker", 100).vig(3, 5).end()


@pytest.mark.parametrize(
    ("vig_first", "fits"), [(False, {1, 3}), (True, {2, 4})], ids=["pay_then_vig", "vig_then_pay"]
)
def test_with_one_winning_seat_1_is_3_and_2_is_4(vig_first: bool, fits: set[int]) -> None:
    events = one_banker_winner(vig_first)
    pays_and_vigs = [(e.type, e.seat or 0) for e in events if e.type in ("pay", "vig")]
    assert consistent_procedures(pays_and_vigs, vig_charged=True) == fits
    for procedure in (1, 2, 3, 4):
        expected = [] if procedure in fits else ["order.procedure_mismatch"]
        assert codes(table(procedure=procedure), events) == expected


# --- Worked example 3: no-vigorish dragon 7 variant ---------------------------------------
#
# Cards: P 3h, B Kd, P 2c, B 2s, P 8s, B 5h.
# Player 3 + 2 = 5 draws: 8s makes 13, count 3. Banker K + 2 = 2 draws on any third card:
# 5h makes 7. The Banker wins 7 to 3 with three cards: a dragon 7 hand (13:69F-7.3(i)).
# Wagers: seat 6 Banker 100, seat 4 Dragon 7 10, seat 3 Player 50, seat 2 Tie 25, seat 1 Banker 20.
# Banker wagers push (returned: seat 6 100, seat 1 20); Dragon 7 at 40 to 1 pays 400;
# Player and Tie lose. No vigorish (7.10(b)5). "dragon 7" is announced (7.10(a)).

DRAGON_TABLE = ("tie", "dragon7", "panda8")


def dragon_7_round(banker_seat_6: str = "push", announce_dragon: bool = True) -> list[Event]:
    r = Round()
    r.wager(6, "banker", 100).wager(4, "dragon7", 10).wager(3, "player", 50)
    r.wager(2, "tie", 25).wager(1, "banker", 20)
    r.deal(player="3h 2c 8s", banker="Kd 2s 5h").result(3, 7, "banker")
    if announce_dragon:
        r.announce("dragon_7")
    r.collect(3, "player", 50).collect(2, "tie", 25)
    if banker_seat_6 == "pay":  # in seat order, so only the wrong outcome shows
        r.pay(6, "banker", 100)
    r.pay(4, "dragon7", 400)
    if banker_seat_6 == "push":
        r.push(6, "banker", 100)
    return r.push(1, "banker", 20).end()


def test_banker_wager_in_dragon7_variant_pushes_on_three_card_7() -> None:
    ctx = table("no_vig_dragon7", procedure=3, side_bets=DRAGON_TABLE)
    assert findings(ctx, dragon_7_round()) == []
    found = findings(ctx, dragon_7_round(banker_seat_6="pay"))
    assert [f.code for f in found] == ["settle.wrong_outcome"]
    assert found[0].expected == {
        "seat": 6,
        "bet": "banker",
        "wager": "100.00",
        "outcome": "push",
        "amount": "100.00",
    }


def test_dragon_7_side_wager_of_10_pays_400() -> None:
    ctx = table("no_vig_dragon7", procedure=3, side_bets=DRAGON_TABLE)
    wrong = [
        replace(e, amount=Decimal(410)) if e.bet == "dragon7" and e.type == "pay" else e
        for e in dragon_7_round()
    ]
    found = findings(ctx, wrong)
    assert [f.code for f in found] == ["settle.wrong_amount"]
    assert (found[0].expected["amount"], found[0].observed["amount"]) == ("400.00", "410.00")


def test_dragon_7_hand_must_be_announced_in_the_dragon7_variant() -> None:
    ctx = table("no_vig_dragon7", procedure=3, side_bets=DRAGON_TABLE)
    assert codes(ctx, dragon_7_round(announce_dragon=False)) == ["announce.dragon7_missing"]
    assert codes(ctx, dragon_7_round(announce_dragon=True)) == []


def test_banker_wager_in_standard_variant_is_paid_on_three_card_7() -> None:
    # Same cards at a standard table: Banker 100 pays 100 less 5.00 vigorish; no "dragon 7".
    r = Round().wager(6, "banker", 100).wager(3, "player", 50)
    r.deal(player="3h 2c 8s", banker="Kd 2s 5h").result(3, 7, "banker")
    events = r.collect(3, "player", 50).pay(6, "banker", 100).vig(6, 5).end()
    assert findings(table("standard"), events) == []


# Panda 8 at the dragon 7 table, two Player winners.
# Cards: P 2c, B Kh, P 3c, B 7h, P 3d. Player 2 + 3 = 5 draws: 3d makes 8. Banker K + 7 = 7
# stands on any third card. The Player wins 8 to 7 with three cards (a panda 8).
# Wagers: seat 7 Player 100, seat 5 Player 25 and Panda 8 10, seat 2 Banker 500, seat 1 Dragon 7 5.
# Losers: seat 2 Banker 500, seat 1 Dragon 7 5. Seat 7 paid 100; seat 5 paid 25 and
# Panda 8 10 at 25 to 1 = 250. Without vigorish every procedure is the same: seat 7, then 5.


def panda_8_round(seats_descending: bool = True) -> list[Event]:
    r = Round()
    r.wager(7, "player", 100).wager(5, "player", 25).wager(5, "panda8", 10)
    r.wager(2, "banker", 500).wager(1, "dragon7", 5)
    r.deal(player="2c 3c 3d", banker="Kh 7h").result(8, 7, "player")
    r.collect(2, "banker", 500).collect(1, "dragon7", 5)
    if seats_descending:
        r.pay(7, "player", 100).pay(5, "player", 25).pay(5, "panda8", 250)
    else:
        r.pay(5, "player", 25).pay(5, "panda8", 250).pay(7, "player", 100)
    return r.end()


@pytest.mark.parametrize("procedure", [1, 2, 3, 4])
def test_without_vigorish_all_procedures_pay_seats_in_descending_order(procedure: int) -> None:
    ctx = table("no_vig_dragon7", procedure=procedure, side_bets=DRAGON_TABLE)
    assert findings(ctx, panda_8_round()) == []
    found = findings(ctx, panda_8_round(seats_descending=False))
    assert [f.code for f in found] == ["order.procedure_mismatch"]
    assert found[0].observed["consistent_procedures"] == []


def test_panda_8_side_wager_of_10_pays_250() -> None:
    ctx = table("no_vig_dragon7", side_bets=DRAGON_TABLE)
    wrong = [
        replace(e, amount=Decimal(25)) if e.bet == "panda8" and e.type == "pay" else e
        for e in panda_8_round()
    ]
    found = findings(ctx, wrong)
    assert [f.code for f in found] == ["settle.wrong_amount"]
    assert found[0].expected["amount"] == "250.00"


def test_panda8_missing_only_where_the_pack_requires_the_announcement() -> None:
    # No NJ or NZ text requires "panda 8"; a pack that does makes it due.
    ctx = table("no_vig_dragon7", side_bets=DRAGON_TABLE)
    assert codes(ctx, panda_8_round()) == []
    due = Cited("announcements.panda_8", "panda8_hand", citation="house rule (test)")
    pack = replace(
        NJ_MINI, announcements=MappingProxyType({**NJ_MINI.announcements, "panda_8": due})
    )
    ctx = table("no_vig_dragon7", side_bets=DRAGON_TABLE, pack=pack)
    assert codes(ctx, panda_8_round()) == ["announce.panda8_missing"]


# --- Worked example 4: super 6 (no vigorish; unverified variant of 7.3(e)) -----------------
#
# Cards: P 2c, B 4h, P 3d, B 2h, P Td. Player 2 + 3 = 5 draws: Td (0) keeps 5.
# Banker 4 + 2 = 6 with a Player third card of 0 stands (6 draws only on 6 or 7).
# The Banker wins 6 to 5: a Banker win with 6 pays 1 to 2.
# Wagers: seat 5 Banker 35 -> 17.50; seat 3 Banker 100 -> 50.00; seat 1 Player 25 collected.


def super_6_round(seat_3_paid: object = "50.00") -> list[Event]:
    r = Round().wager(5, "banker", 35).wager(3, "banker", 100).wager(1, "player", 25)
    r.deal(player="2c 3d Td", banker="4h 2h").result(5, 6, "banker")
    return r.collect(1, "player", 25).pay(5, "banker", "17.50").pay(3, "banker", seat_3_paid).end()


def test_super6_banker_win_with_6_pays_1_to_2() -> None:
    ctx = table("super6", procedure=2)
    assert findings(ctx, super_6_round()) == []
    found = findings(ctx, super_6_round(seat_3_paid=100))
    assert [f.code for f in found] == ["settle.wrong_amount"]
    assert (found[0].expected["amount"], found[0].observed["amount"]) == ("50.00", "100.00")


def test_super6_banker_win_with_7_pays_1_to_1() -> None:
    # Cards of example 1: Banker wins with 7, so seat 3's Banker 100 pays 100; no vigorish.
    r = Round().wager(3, "banker", 100).deal(player="4d Th 2h", banker="Qs 7c")
    events = r.result(6, 7, "banker").pay(3, "banker", 100).end()
    assert findings(table("super6"), events) == []


# --- Worked example 5: a tie ---------------------------------------------------------------
#
# Cards: P 4h, B 9h, P 4c, B 9c. Player 4 + 4 = 8 and Banker 9 + 9 = 18, count 8: both
# naturals, neither hand draws. Tie at 8: "Tie Hand" is announced (7.10(a)).
# Wagers: seat 4 Tie 25 at 8 to 1 pays 200; seat 2 Banker 100 and seat 1 Player 50 are returned.


def tie_round(tie_hand: bool = True, banker: str = "push") -> list[Event]:
    r = Round().wager(4, "tie", 25).wager(2, "banker", 100).wager(1, "player", 50)
    r.deal(player="4h 4c", banker="9h 9c").result(8, 8, "tie")
    if tie_hand:
        r.announce("tie_hand")
    if banker == "collect":
        r.collect(2, "banker", 100)
    r.pay(4, "tie", 200)
    if banker == "push":
        r.push(2, "banker", 100)
    return r.push(1, "player", 50).end()


def test_tie_wager_of_25_pays_200_and_player_and_banker_wagers_are_returned() -> None:
    assert findings(table(), tie_round()) == []


def test_tie_missing_when_the_counts_are_equal() -> None:
    found = findings(table(), tie_round(tie_hand=False))
    assert [f.code for f in found] == ["announce.tie_missing"]
    assert found[0].seq == tie_round(tie_hand=False)[-1].seq  # shows at round end


def test_push_collected_is_a_wrong_outcome_in_nz() -> None:
    ctx = table(procedure=None, pack=NZ_MINI)
    assert findings(ctx, tie_round()) == []
    found = findings(ctx, tie_round(banker="collect"))
    assert [f.code for f in found] == ["settle.wrong_outcome"]
    assert found[0].expected["outcome"] == "push"
    assert found[0].observed["settlements"][0]["type"] == "collect"


# --- Third-card rules ----------------------------------------------------------------------


def one_wager(
    player: str, banker: str, result: tuple[int, int, str], bet: str = "player"
) -> list[Event]:
    """A round with seat 1's 100 wager on `bet`, settled correctly for `result`."""
    r = Round().wager(1, bet, 100).deal(player=player, banker=banker).result(*result)
    if result[2] != bet:
        return r.collect(1, bet, 100).end()
    r.pay(1, bet, 100)
    return (r.vig(1, 5) if bet == "banker" else r).end()


def test_player_with_5_draws() -> None:
    # Player 2 + 3 = 5 must draw. Banker 4 + 2 = 6.
    # Faulty: Player stands on 5; Banker 6 with the Player standing stands; Banker wins 6 to 5.
    stood = one_wager("2s 3h", "4c 2d", (5, 6, "banker"), bet="banker")
    found = findings(table(), stood)
    assert [f.code for f in found] == ["draw.player_missed"]
    assert found[0].expected == {"player_third_card": True}
    # Correct: Player draws 9c: 5 + 9 = 14, count 4; Banker 6 stands on a third card of 9.
    assert codes(table(), one_wager("2s 3h 9c", "4c 2d", (4, 6, "banker"), bet="banker")) == []


def test_player_with_7_stands() -> None:
    # Player 3 + 4 = 7 stands; Banker K + 6 = 6 stands with the Player standing. Player wins 7-6.
    assert codes(table(), one_wager("3s 4h", "Kc 6d", (7, 6, "player"))) == []
    # Faulty: a third card 2c (count 9). Banker 6 stands on a Player third card of 2 too, so only
    # the Player's extra card is reported.
    found = findings(table(), one_wager("3s 4h 2c", "Kc 6d", (9, 6, "player")))
    assert [f.code for f in found] == ["draw.player_extra"]
    assert found[0].seq == 8  # the extra card


def test_banker_with_5_draws_when_player_third_card_is_4() -> None:
    # Player 2 + 2 = 4 draws 4s: 8. Banker 5 + K = 5; Player's third card 4 -> Banker draws.
    # Faulty: Banker stands on 5, Player wins 8 to 5.
    assert codes(table(), one_wager("2c 2d 4s", "5h Kh", (8, 5, "player"))) == [
        "draw.banker_missed"
    ]
    # Correct: Banker draws Ac: 6. Player wins 8 to 6.
    assert codes(table(), one_wager("2c 2d 4s", "5h Kh Ac", (8, 6, "player"))) == []


def test_banker_with_3_stands_when_player_third_card_is_8() -> None:
    # Player 4 + K = 4 draws 8h: 12, count 2. Banker 3 + K = 3; third card 8 -> Banker stands.
    assert codes(table(), one_wager("4c Kd 8h", "3s Kh", (2, 3, "banker"), bet="banker")) == []
    # Faulty: Banker draws Ac: 4. Banker wins either way.
    assert codes(table(), one_wager("4c Kd 8h", "3s Kh Ac", (2, 4, "banker"), bet="banker")) == [
        "draw.banker_extra"
    ]


def test_a_natural_stops_both_hands() -> None:
    # Player 5 + 3 = 8, a natural; Banker 2 + 3 = 5 must not draw.
    assert codes(table(), one_wager("5c 3d", "2h 3h", (8, 5, "player"))) == []
    assert codes(table(), one_wager("5c 3d", "2h 3h 2s", (8, 7, "player"))) == ["draw.banker_extra"]
    # Banker 9 + K = 9, a natural; Player 2 + K = 2 must not draw.
    assert codes(table(), one_wager("2c Kd 4s", "9h Kh", (6, 9, "banker"), bet="banker")) == [
        "draw.player_extra"
    ]


def test_banker_is_judged_against_the_player_third_card_actually_dealt() -> None:
    # Player 2 + 3 = 5 wrongly stands. With the Player standing, Banker 4 + K = 4 draws (0-5):
    # 5s makes 9. The Banker played its hand right from what was on the layout.
    events = one_wager("2s 3h", "4c Kd 5s", (5, 9, "banker"), bet="banker")
    assert codes(table(), events) == ["draw.player_missed"]


# --- Deal order ----------------------------------------------------------------------------


def test_first_four_cards_go_player_banker_player_banker() -> None:
    r = Round().wager(1, "banker", 100).add("no_more_bets")
    for to, card in [("player", "4d"), ("player", "Th"), ("banker", "Qs"), ("banker", "7c")]:
        r.card(to, card)
    # Player 4, Banker 7 as dealt; draws are not judged after a deal-order error.
    events = r.result(4, 7, "banker").pay(1, "banker", 100).vig(1, 5).end()
    found = findings(table(), events)
    assert [f.code for f in found] == ["deal.order"]
    assert found[0].seq == 5  # the second card (seq 4 is the first), which went to the Player
    assert found[0].observed["order"] == ["player", "player", "banker", "banker"]


def test_a_hand_gets_at_most_three_cards() -> None:
    r = Round().wager(1, "player", 100).deal(player="2c 2d 4s Ah", banker="5h Kh")
    events = r.result(9, 5, "player").pay(1, "player", 100).end()
    found = findings(table(), events)
    assert [f.code for f in found] == ["deal.order"]
    assert "4th card" in found[0].message


def test_the_player_third_card_comes_before_the_banker_third_card() -> None:
    r = Round().wager(1, "player", 100).add("no_more_bets")
    for to, card in [("player", "2c"), ("banker", "5h"), ("player", "2d"), ("banker", "Kh")]:
        r.card(to, card)
    r.card("banker", "Ac").card("player", "4s")
    events = r.result(8, 6, "player").pay(1, "player", 100).end()
    assert codes(table(), events) == ["deal.order"]


# --- Result announcement -------------------------------------------------------------------


def test_result_misannounced_when_the_winner_differs() -> None:
    found = findings(table(), banker_wins_7_to_6(announce=(6, 7, "player")))
    assert [f.code for f in found] == ["result.misannounced"]
    assert found[0].expected == {"player": 6, "banker": 7, "winner": "banker"}
    assert found[0].observed == {"player": 6, "banker": 7, "winner": "player"}


def test_result_misannounced_when_a_count_differs() -> None:
    assert codes(table(), banker_wins_7_to_6(announce=(5, 7, "banker"))) == ["result.misannounced"]


def test_result_misannounced_when_no_result_is_announced() -> None:
    found = findings(table(), banker_wins_7_to_6(announce=None))
    assert [f.code for f in found] == ["result.misannounced"]
    assert found[0].observed is None


def test_tie_hand_announced_on_a_banker_win_is_a_misannouncement() -> None:
    r = Round().wager(3, "banker", 100).deal(player="4d Th 2h", banker="Qs 7c")
    r.result(6, 7, "banker").announce("tie_hand")
    assert codes(table(), r.pay(3, "banker", 100).vig(3, 5).end()) == ["result.misannounced"]


# --- Settlement ----------------------------------------------------------------------------


def test_settle_wrong_outcome_when_a_loser_is_paid() -> None:
    # Banker wins 7 to 6: seat 5's Banker 100 is paid 100 (vigorish 5.00), seat 2's Player 50
    # loses. Faulty: seat 2 is paid 50 instead (in seat order, so only the outcome is wrong).
    r = Round().wager(5, "banker", 100).wager(2, "player", 50)
    r.deal(player="4d Th 2h", banker="Qs 7c").result(6, 7, "banker")
    events = r.pay(5, "banker", 100).pay(2, "player", 50).vig(5, 5).end()
    found = findings(table(), events)
    assert [f.code for f in found] == ["settle.wrong_outcome"]
    assert found[0].expected["outcome"] == "collect"
    assert "should have been collected 50.00 but was paid" in found[0].message


def test_a_loser_paid_out_of_turn_also_breaks_the_order() -> None:
    # The dealer pays seat 2's losing Player wager where it should have been collected: that
    # payment comes before seat 1's collection and before the higher seats' payments.
    events = [
        replace(e, type="pay") if e.type == "collect" and e.bet == "player" else e
        for e in banker_wins_7_to_6()
    ]
    assert codes(table(), events) == [
        "settle.wrong_outcome",
        "order.collect_after_pay",
        "order.procedure_mismatch",
    ]


def test_settle_wrong_outcome_when_a_winner_is_collected() -> None:
    events = [
        replace(e, type="collect") if e.type == "pay" and e.seat == 3 else e
        for e in banker_wins_7_to_6()
    ]
    # The collection of seat 3 comes after payments started; seat 3 still owes vigorish
    # on the win it should have had.
    assert codes(table(), events) == ["settle.wrong_outcome", "order.collect_after_pay"]


def test_settle_wrong_outcome_for_a_settlement_without_a_wager() -> None:
    events = banker_wins_7_to_6()
    after_result = next(i for i, e in enumerate(events) if e.kind == "result") + 1
    extra = Event(98, "collect", T0, "MB-07.jsonl:98", seat=6, bet="player", amount=Decimal(20))
    events = [*events[:after_result], extra, *events[after_result:]]
    found = findings(table(), events)
    assert [f.code for f in found] == ["settle.wrong_outcome"]
    assert found[0].expected is None
    assert found[0].seq == 98


def test_settle_unsettled_when_a_wager_stays_on_the_layout() -> None:
    events = [e for e in banker_wins_7_to_6() if not (e.type == "collect" and e.bet == "tie")]
    found = findings(table(), events)
    assert [f.code for f in found] == ["settle.unsettled"]
    assert found[0].seq == events[-1].seq  # shows at round end
    assert "Seat 1's 25.00 Tie wager" in found[0].message


def test_wagers_of_one_seat_on_one_bet_are_settled_together() -> None:
    # Seat 3 bets Banker 60 then 40 more: one 100 wager, paid 100, vigorish 5.00.
    r = Round().wager(3, "banker", 60).wager(3, "banker", 40)
    r.deal(player="4d Th 2h", banker="Qs 7c").result(6, 7, "banker")
    assert findings(table(), r.pay(3, "banker", 100).vig(3, 5).end()) == []


# --- Vigorish ------------------------------------------------------------------------------


def test_vig_missing_on_a_winning_banker_wager() -> None:
    found = findings(table(), banker_wins_7_to_6(vigs={7: "5.00", 3: "12.50"}))
    assert [f.code for f in found] == ["vig.missing"]
    assert found[0].expected == {"seat": 5, "vigorish": "1.75"}


def test_vig_wrong_amount_on_a_seat_that_owes_none() -> None:
    events = banker_wins_7_to_6(order=[*ORDERS_1[1], "vig 2"], vigs={**VIGS_1, 2: "2.50"})
    found = findings(table(), events)
    assert [f.code for f in found] == ["vig.wrong_amount"]
    assert found[0].expected == {"seat": 2, "vigorish": "0.00"}


def test_vig_not_allowed_in_a_no_vigorish_variant() -> None:
    # Dragon 7 table, Banker wins 7 to 6 with two cards: Banker 100 pays 100, no vigorish.
    r = (
        Round()
        .wager(5, "banker", 100)
        .deal(player="4d Th 2h", banker="Qs 7c")
        .result(6, 7, "banker")
    )
    clean = r.pay(5, "banker", 100).end()
    ctx = table("no_vig_dragon7", procedure=4, side_bets=DRAGON_TABLE)
    assert findings(ctx, clean) == []
    r = (
        Round()
        .wager(5, "banker", 100)
        .deal(player="4d Th 2h", banker="Qs 7c")
        .result(6, 7, "banker")
    )
    found = findings(ctx, r.vig(5, 5).pay(5, "banker", 100).end())
    # Only the vigorish is reported: without vigorish the procedures order payments alone.
    assert [f.code for f in found] == ["vig.not_allowed"]


# --- Order ---------------------------------------------------------------------------------


def test_losers_are_collected_before_winners_are_paid() -> None:
    found = findings(table(), banker_wins_7_to_6(collect_late=True))
    assert [f.code for f in found] == ["order.collect_after_pay"]
    assert [c["seat"] for c in found[0].observed["late_collections"]] == [2, 1]


def test_nz_sets_no_procedure_but_collects_losers_first() -> None:
    ctx = table(procedure=None, pack=NZ_MINI)
    ascending = banker_wins_7_to_6(order=["pay 3", "vig 3", "pay 7", "vig 7", "pay 5", "vig 5"])
    assert findings(ctx, ascending) == []
    assert codes(ctx, banker_wins_7_to_6(collect_late=True)) == ["order.collect_after_pay"]


def test_punto_banco_uses_the_same_procedures() -> None:
    ctx = table(procedure=3, pack=NJ_PUNTO)
    assert codes(ctx, banker_wins_7_to_6(order=ORDERS_1[3])) == []
    assert codes(ctx, banker_wins_7_to_6(order=ORDERS_1[2])) == ["order.procedure_mismatch"]


def test_procedure_mismatch_shows_where_the_order_departs() -> None:
    events = banker_wins_7_to_6(order=ORDERS_1[1])
    found = findings(table(procedure=3), events)
    second_pay = [e for e in events if e.type == "pay"][1]
    assert found[0].seq == second_pay.seq  # procedure 3 wanted seat 7's vigorish here
    assert "Procedure 3 is in force" in found[0].message


# --- consistent_procedures on its own ------------------------------------------------------


def test_no_payment_fits_every_procedure() -> None:
    assert consistent_procedures([], vig_charged=True) == {1, 2, 3, 4}


def test_pushes_and_collections_are_ignored() -> None:
    steps = [("collect", 1), ("pay", 5), ("push", 6), ("vig", 5), ("push", 2)]
    assert consistent_procedures(steps, vig_charged=True) == {1, 3}


def test_without_vigorish_only_the_seat_order_of_payments_counts() -> None:
    assert consistent_procedures([("pay", 6), ("vig", 6), ("pay", 2)], False) == {1, 2, 3, 4}
    assert consistent_procedures([("pay", 2), ("pay", 6)], vig_charged=False) == frozenset()


def test_player_winners_alone_fit_every_procedure_in_a_vigorish_variant() -> None:
    assert consistent_procedures([("pay", 7), ("pay", 4)], vig_charged=True) == {1, 2, 3, 4}


# --- Void rounds, irregularities, chemin de fer -----------------------------------------------


def void_round(seat_3: str = "push") -> list[Event]:
    r = Round().wager(3, "banker", 100).wager(1, "player", 50).add("void", reason="cut_card")
    getattr(r, seat_3)(3, "banker", 100)
    return r.push(1, "player", 50).end()


def test_a_void_round_returns_every_wager() -> None:
    # No cards and no result: only the return of the wagers is checked.
    assert findings(table(), void_round()) == []
    found = findings(table(), void_round(seat_3="collect"))
    assert [f.code for f in found] == ["settle.wrong_outcome"]
    assert found[0].expected["outcome"] == "push"


def test_an_irregularity_the_pack_does_not_list_leaves_every_check_in_place() -> None:
    # Player 3 + 4 = 7 must stand but gets 2c, declared an irregularity of a kind the NJ pack
    # does not list: that is a finding, and so is the extra card. The round is still settled
    # on the cards as dealt: Player 9, Banker 6, the Player wager paid.
    r = Round().wager(1, "player", 100).deal(player="3s 4h 2c", banker="Kc 6d")
    r.add("irregularity", kind="card_dealt_in_error", card="2c", disposition="kept")
    r.result(9, 6, "player")
    found = findings(table(), r.pay(1, "player", 100).end())
    assert [f.code for f in found] == ["irregularity.unknown_kind", "draw.player_extra"]
    assert found[0].seq == 9 and found[0].observed == {
        "kind": "card_dealt_in_error", "disposition": "kept", "card": "2c"
    }
    assert found[1].seq == 8  # the 2c
    r = Round().wager(1, "player", 100).deal(player="3s 4h 2c", banker="Kc 6d")
    r.add("irregularity", kind="card_dealt_in_error", card="2c", disposition="kept")
    r.result(9, 6, "player")
    assert codes(table(), r.collect(1, "player", 100).end()) == [
        "irregularity.unknown_kind", "draw.player_extra", "settle.wrong_outcome"
    ]


def test_nz_card_dealt_to_the_player_in_error_is_taken_out_before_the_draw_checks() -> None:
    # NZ rule 12.2: Player 3 + 4 = 7 stands, Banker K + 6 = 6 must stand, so 2c dealt to the
    # Player in error is kept for the next round: Player 7 beats Banker 6 on two cards each.
    r = Round().wager(1, "player", 100).deal(player="3s 4h 2c", banker="Kc 6d")
    r.add("irregularity", kind="player_extra_card", card="2c",
          disposition="next_round_first_card")
    r.result(7, 6, "player")
    assert codes(table(pack=NZ_MINI, procedure=None), r.pay(1, "player", 100).end()) == []


def test_chemin_de_fer_is_not_replayed_here() -> None:
    ctx = table(procedure=None, pack=NJ_PUNTO, game="chemin_de_fer")
    assert check_round(ctx, banker_wins_7_to_6(announce=None)) == []


def test_event_from_a_log_line_normalises_card_and_amount() -> None:
    record = {
        "v": 1,
        "ts": "2026-11-28T22:00:42-05:00",
        "type": "card",
        "table": "MB-07",
        "seq": 7,
        "shoe": "S1",
        "round": 1,
        "to": "player",
        "card": "10S",
    }
    e = Event.from_record(record, "night.jsonl:7")
    assert (e.card, e.ts.utcoffset(), e.source) == ("Ts", dt.timedelta(hours=-5), "night.jsonl:7")
    pay = Event.from_record({**record, "type": "pay", "card": None, "amount": "125.50"}, "x:1")
    assert pay.amount == Decimal("125.50")
