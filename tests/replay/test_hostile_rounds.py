"""Rounds written so that one line hides a deviation (issue 20).

An `irregularity` event used to switch off the deal and draw checks of a mini-baccarat or punto
banco round whatever its kind: a planted missed draw vanished behind `"kind": "anything"`. Now
only a kind the rule pack lists, resolved by a disposition the pack lists for it, changes what
is checked (a void round, a round dealt again, a card moved or taken out), and that disposition
is judged; anything else leaves every check in place and an unlisted kind is a finding itself.
Each round below is worked by hand from the pack's tableau (Player and Banker draw on 0-5 and
stand on 6-7 with the Player standing; naturals 8-9).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType

import pytest
from helpers.tablelog import Log, TablePassDb
from helpers.verdict import Witness, witness_after_the_module

from auditor.audit.run import audit
from auditor.config import PropertyConfig
from auditor.finding import Finding
from auditor.replay.irregular import Irregularity, irregularity_findings
from auditor.replay.model import Event, TableContext
from auditor.replay.round import check_round
from auditor.rules.codes import REGISTRY
from auditor.rules.pack import Cited, RulePack, load_pack
from auditor.store import runs

NJ_MINI = load_pack("NJ", "mini_baccarat")
NJ_PUNTO = load_pack("NJ", "punto_banco")
NZ_MINI = load_pack("NZ", "mini_baccarat")
T0 = dt.datetime(2026, 11, 28, 22, 0, tzinfo=dt.timezone(dt.timedelta(hours=-5)))


def house_pack(**kinds: dict[str, tuple[str, ...]]) -> RulePack:
    """NJ mini-baccarat with irregularity kinds of a house's own (as a property's pack would
    list them), each kind -> situation -> dispositions."""
    entries = dict(NJ_MINI.entries)
    for kind, table in kinds.items():
        key = f"irregularities.{kind}"
        entries[key] = Cited(key, MappingProxyType(table), citation="house rule (test)")
    return replace(NJ_MINI, entries=MappingProxyType(entries))


# A house whose rules void a round when the shoe is dropped, and deal a misdealt round again.
HOUSE = house_pack(shoe_dropped={"any": ("round_void",)}, misdeal={"any": ("round_redealt",)})


def table(pack: RulePack = NJ_MINI) -> TableContext:
    return TableContext("MB-07", "P3", pack.game, pack.jurisdiction, "standard",
                        1 if pack.procedures else None, 7, ("tie",), pack)


class Round:
    """A round event by event, seq from 1."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.add("round_start")

    def add(self, type_: str, **fields: object) -> Round:
        seq = len(self.events) + 1
        if "amount" in fields:
            fields["amount"] = Decimal(str(fields["amount"]))
        self.events.append(Event(seq, type_, T0 + dt.timedelta(seconds=seq),
                                 f"MB-07.jsonl:{seq}", **fields))  # type: ignore[arg-type]
        return self

    def cards(self, *pairs: str) -> Round:
        """'P2c', 'B4h', ...: the hand's initial and the card, in shoe order."""
        for p in pairs:
            self.add("card", to={"P": "player", "B": "banker"}[p[0]], card=p[1:])
        return self

    def irregularity(self, kind: str, disposition: str, card: str | None = None) -> Round:
        return self.add("irregularity", kind=kind, disposition=disposition, card=card)

    def result(self, player: int, banker: int, winner: str) -> Round:
        return self.add("announce", kind="result", player=player, banker=banker, winner=winner)

    def settle(self, how: str, seat: int, bet: str, amount: object) -> Round:
        return self.add(how, seat=seat, bet=bet, amount=amount)

    def end(self) -> list[Event]:
        return self.add("round_end").events

    def seq_of(self, type_: str) -> int:
        return next(e.seq for e in self.events if e.type == type_)


# Every round given to check_round here is also given to the fast verdict (once the module's
# tests have run):
# a round it calls clean must have no finding (tests/helpers/verdict.py).
WITNESS = Witness()
_verdict_witness = witness_after_the_module(WITNESS)


def findings(ctx: TableContext, events: list[Event]) -> list[Finding]:
    found = check_round(ctx, events)
    WITNESS.record(ctx, events, found)
    assert all(f.code in REGISTRY for f in found)
    return found


# The missed draw used throughout: Player 2c 3d = 5 must draw but stands; Banker 4h 2s = 6
# stands with the Player standing; Banker wins 6 to 5, seat 3's Player 100 is collected.
MISSED_DRAW = ("P2c", "B4h", "P3d", "B2s")


def missed_draw_round(*irregularity: str) -> Round:
    r = Round().add("wager", seat=3, bet="player", amount=100).add("no_more_bets")
    r.cards(*MISSED_DRAW)
    if irregularity:
        r.irregularity(*irregularity)
    return r.result(5, 6, "banker").settle("collect", 3, "player", 100)


# --- a kind the pack does not list -----------------------------------------------------------


@pytest.mark.parametrize(("pack", "kinds"), [
    (NJ_MINI, []), (NJ_PUNTO, []), (NZ_MINI, ["player_extra_card"]),
])
def test_unknown_kind_is_reported_and_the_missed_draw_behind_it_too(pack, kinds) -> None:
    r = missed_draw_round("anything", "anything")
    found = findings(table(pack), r.end())
    assert [f.code for f in found] == ["irregularity.unknown_kind", "draw.player_missed"]
    unknown, missed = found
    assert unknown.seq == r.seq_of("irregularity")
    assert unknown.expected == {"kinds": kinds}
    assert unknown.observed == {"kind": "anything", "disposition": "anything", "card": None}
    assert missed.expected == {"player_third_card": True}
    assert missed.observed == {"player_third_card": False, "player": ["2c", "3d"],
                               "banker": ["4h", "2s"]}


def test_without_the_line_the_same_round_gives_the_draw_alone() -> None:
    assert [f.code for f in findings(table(), missed_draw_round().end())] == [
        "draw.player_missed"
    ]


def test_a_listed_kind_at_another_table_is_unknown_here() -> None:
    # player_extra_card is NZ rule 12.2; the NJ pack lists no irregularity at all.
    r = missed_draw_round("player_extra_card", "banker_third_card", "3d")
    assert [f.code for f in findings(table(NJ_MINI), r.end())] == [
        "irregularity.unknown_kind", "draw.player_missed"
    ]


# --- a listed kind whose disposition leaves the round standing (NZ rule 12.2) ---------------


def nz_round(extra: str, disposition: str, *more: str) -> Round:
    """Player 3c 3d = 6 stands, `extra` dealt to the Player in error and declared."""
    r = Round().add("wager", seat=1, bet="player", amount=100).add("no_more_bets")
    return r.cards("P3c", "B7h", "P3d", "BKc", f"P{extra}").irregularity(
        "player_extra_card", disposition, extra).cards(*more)


def test_card_kept_for_the_next_round_leaves_every_check_on_the_hands() -> None:
    # Banker 7h Kc = 7 must stand: 8c out of the round is a disposition 12.2 allows.
    ok = nz_round("8c", "next_round_first_card").result(6, 7, "banker")
    assert findings(table(NZ_MINI), ok.settle("collect", 1, "player", 100).end()) == []
    # The Banker, who had to stand, is given 5d as well: 7 + 5 = 2, the Player wins 6 to 2.
    extra = nz_round("8c", "next_round_first_card", "B5d").result(6, 2, "player")
    [f] = findings(table(NZ_MINI), extra.settle("pay", 1, "player", 100).end())
    assert f.code == "draw.banker_extra"
    assert f.seq == next(e.seq for e in extra.events if e.card == "5d")
    assert f.observed == {"banker_third_card": True, "player": ["3c", "3d"],
                          "banker": ["7h", "Kc", "5d"]}


def test_card_given_to_the_banker_is_settled_in_the_bankers_hand() -> None:
    # Banker 2h Kc = 2 must draw: 4h becomes its third card, 2 + 4 = 6, a tie at 6.
    def round_(extra_to_banker: bool) -> Round:
        r = Round().add("wager", seat=1, bet="player", amount=100).add("no_more_bets")
        r.cards("P3c", "B2h", "P3d", "BKc", "P4h").irregularity(
            "player_extra_card", "banker_third_card", "4h")
        if extra_to_banker:
            r.result(6, 6, "tie").add("announce", kind="tie_hand")
            return r.settle("push", 1, "player", 100)
        # Settled as if 4h had stayed with the Player: 3 + 3 + 4 = 0 against 2.
        return r.result(0, 2, "banker").settle("collect", 1, "player", 100)

    assert findings(table(NZ_MINI), round_(True).end()) == []
    found = findings(table(NZ_MINI), round_(False).end())
    assert [f.code for f in found] == [
        "result.misannounced", "announce.tie_missing", "settle.wrong_outcome"
    ]
    assert found[0].expected == {"player": 6, "banker": 6, "winner": "tie"}
    assert found[2].expected["outcome"] == "push"


def test_a_disposition_the_pack_does_not_give_for_the_kind_changes_nothing() -> None:
    # 'round_void' is no NZ 12.2 disposition: the round is checked on the cards as dealt.
    r = missed_draw_round("player_extra_card", "round_void", "3d")
    assert [f.code for f in findings(table(NZ_MINI), r.end())] == ["draw.player_missed"]


# --- a listed kind whose disposition voids or redeals the round (a house pack) --------------


def test_a_round_the_pack_voids_is_checked_as_void() -> None:
    def voided(how: str) -> list[Event]:
        r = Round().add("wager", seat=3, bet="player", amount=100).add("no_more_bets")
        r.cards(*MISSED_DRAW).irregularity("shoe_dropped", "round_void")
        return r.settle(how, 3, "player", 100).end()

    # The missed draw is not the round's any more: it does not count.
    assert findings(table(HOUSE), voided("push")) == []
    [f] = findings(table(HOUSE), voided("collect"))
    assert f.code == "settle.wrong_outcome" and f.expected["outcome"] == "push"


def test_a_redealt_round_is_checked_on_the_new_deal() -> None:
    def redealt(*cards: str) -> Round:
        r = Round().add("wager", seat=3, bet="player", amount=100).add("no_more_bets")
        return r.cards("P5c", "P6d").irregularity("misdeal", "round_redealt").cards(*cards)

    # The first two cards both went to the Player: set aside, not a deal.order finding.
    good = redealt("P9c", "B5h", "PKd", "BKc").result(9, 5, "player")
    assert findings(table(HOUSE), good.settle("pay", 3, "player", 100).end()) == []
    bad = redealt(*MISSED_DRAW).result(5, 6, "banker")
    found = findings(table(HOUSE), bad.settle("collect", 3, "player", 100).end())
    assert [f.code for f in found] == ["draw.player_missed"]
    assert found[0].observed["player"] == ["2c", "3d"]


def test_void_is_only_what_the_pack_gives_for_that_kind() -> None:
    # 'round_redealt' is the house's misdeal disposition, not a dropped shoe's: no effect.
    r = missed_draw_round("shoe_dropped", "round_redealt")
    assert [f.code for f in findings(table(HOUSE), r.end())] == ["draw.player_missed"]


def irregularity(kind: str, disposition: str) -> Irregularity:
    return Irregularity("MB-07", "P3", "S1", 4, 40, T0, "MB-07.jsonl:40", kind, disposition,
                        None, (("player", "2c"), ("banker", "4h"), ("player", "3d"),
                               ("banker", "2s")), None)


def test_the_voiding_disposition_is_judged_against_the_pack() -> None:
    pack_of: dict[str, RulePack | None] = {"MB-07": HOUSE}
    assert irregularity_findings([irregularity("shoe_dropped", "round_void")], pack_of) == ([], 0)
    [f], unjudged = irregularity_findings(
        [irregularity("shoe_dropped", "round_redealt")], pack_of)
    assert (f.code, f.round, f.seq, unjudged) == ("irregularity.disposition", 4, 40, 0)
    assert f.expected == {"kind": "shoe_dropped", "dispositions": ["round_void"]}
    assert f.observed == {"disposition": "round_redealt", "card": None}
    # A kind the pack does not list is the round replay's finding, not judged here.
    assert irregularity_findings([irregularity("anything", "round_void")], pack_of) == ([], 1)


# --- the same rounds through ingest and the whole audit ------------------------------------


def audited(tmp_path: Path, jurisdiction: str, cards: list[tuple[str, str]],
            after_cards: list[tuple[str, dict]], moves: list[tuple[str, int]]) -> list[str]:
    """One shoe of one round at a table that opens and closes, ingested and audited (the SQL
    replay hands rounds with an irregularity to the reference); every standing code."""
    log = Log()
    log.open("MB-01", "P1", "22:00", jurisdiction=jurisdiction,
             procedure=1 if jurisdiction == "NJ" else None)
    log.shoe_start("MB-01", "22:01", "S1")
    log.burn("MB-01", "S1", ["3h", "Kc", "8s", "2d"])  # 3 exposed: three more burned
    log.round("MB-01", "S1", 1, cards, moves, after_cards=after_cards)
    log.shoe_end("MB-01", "S1")
    log.close("MB-01", "23:00")
    a = TablePassDb(tmp_path)
    a.ingest(log)
    audit(a.con, runs.start(a.con, "audit", {}), PropertyConfig())
    return [f["code"] for f in a.findings()]


@pytest.mark.slow
def test_audit_reports_the_unknown_kind_and_the_draw_it_would_have_hidden(tmp_path) -> None:
    # Player 2c 3d = 5 stands; Banker 4h 2s = 6 wins; seat 3's Banker 100 paid, 5 vigorish.
    codes = audited(
        tmp_path, "NJ", [("player", "2c"), ("banker", "4h"), ("player", "3d"), ("banker", "2s")],
        [("irregularity", {"kind": "anything", "disposition": "anything"}),
         ("announce", {"kind": "result", "player": 5, "banker": 6, "winner": "banker"})],
        [("pay", 3), ("vig", 3)],
    )
    assert sorted(codes) == ["draw.player_missed", "irregularity.unknown_kind"]


def test_audit_judges_a_listed_kind_and_checks_the_hands_it_leaves(tmp_path) -> None:
    # NZ 12.2: Player 3c 3d = 6 stands, Banker 2h Kc = 2 must draw, so 8c dealt to the Player
    # had to become the Banker's third card; it was kept for the next round instead and the
    # Banker drew 5d: 2 + 5 = 7 beats 6. The hands as left are right: only the disposition.
    codes = audited(
        tmp_path, "NZ",
        [("player", "3c"), ("banker", "2h"), ("player", "3d"), ("banker", "Kc"),
         ("player", "8c")],
        [("irregularity", {"kind": "player_extra_card", "card": "8c",
                           "disposition": "next_round_first_card"}),
         ("card", {"to": "banker", "card": "5d"}),
         ("announce", {"kind": "result", "player": 6, "banker": 7, "winner": "banker"})],
        [("pay", 3), ("vig", 3)],
    )
    assert codes == ["irregularity.disposition"]
