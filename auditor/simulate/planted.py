"""Nights of any size with deviations planted at random, and the ground truth of the findings
they must raise, to measure what the audit catches and what it invents."""

from __future__ import annotations

import datetime as dt
import json
import random
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from auditor.config import PropertyConfig
from auditor.replay.shoes import ShoeRules, required_decks
from auditor.replay.tables import MIN_UNDECLARED_ROUNDS
from auditor.rules.cards import RANKS
from auditor.rules.pack import load_pack
from auditor.simulate.deal import Outcome, amount, panda8_due, qualifies, value
from auditor.simulate.generator import (
    Deviation,
    Night,
    NoticeChange,
    ShoePlan,
    TableNight,
    TableSpec,
    write_night,
)

# The deviation kinds the generator can plant, with the finding code the audit must raise.
BANKING_KINDS = {
    "banker_missed": "draw.banker_missed",
    "player_extra": "draw.player_extra",
    "player_missed": "draw.player_missed",
    "banker_extra": "draw.banker_extra",
    "deal_order": "deal.order",
    "wrong_winner": "result.misannounced",
    "tie_missing": "announce.tie_missing",
    "dragon_missing": "announce.dragon7_missing",
    "total_cards_missing": "announce.total_cards_missing",
    "total_cards_wrong": "announce.total_cards_wrong",
    "pay_short": "settle.wrong_amount",
    "push_collected": "settle.wrong_outcome",
    "unsettled": "settle.unsettled",
    "vig_short": "vig.wrong_amount",
    "vig_not_allowed": "vig.not_allowed",
    "vig_missing": "vig.missing",
    "collect_after_pay": "order.collect_after_pay",
    "procedure_order": "order.procedure_mismatch",
    "panda8_missing": "announce.panda8_missing",  # only where a (house) pack makes it due
    "irregular_disposition": "irregularity.disposition",  # NZ rule 12.2
}
CHEMIN_KINDS = {
    "partial_order": "chemin.priority",
    "over_bank": "chemin.over_bank",
    "late_wager": "chemin.late_wager",
    "option_not_allowed": "chemin.option",
    "commission_short": "chemin.commission",
    "suivi_not_entitled": "chemin.priority",
    "option_flipped": "chemin.option_not_followed",
    "bank_unlogged": "chemin.bank_pass",
    "unknown_irregularity": "irregularity.unknown_kind",
    "disposition_wrong_h": "irregularity.chemin_disposition",
}
# Shoe-level kinds: each one, independently, in a shoe with probability R.
SHOE_KINDS = {
    "few_decks": "shoe.too_few_decks",  # two decks fewer than the pack requires
    "extra_card": "shoe.composition",  # decks + 1 copies of one card early in the shoe
    "batch_repeated": "shoe.batch_not_alternated",  # the previous shoe's batch again
    "burn_wrong": "shoe.burn",  # one card short of, or one or two beyond, the burn
    "cut_misplaced": "shoe.cut_card",  # the cutting card 40-60 cards from the end
    "past_cut": "shoe.end_of_shoe",  # two rounds after the cutting card's instead of one
    "face_up_last": "shoe.void_required",  # a card face up in the last round, settled
}
# Table- and pit-level kinds: per NJ pit (the notices, one table changing alone) or per table
# (a run of rounds paid in another procedure's order), each with probability R.
PROCEDURE_KINDS = {
    "notice_missing": "procedure.notice_missing",  # the pit's change notified to one recipient
    "notice_late": "procedure.notice_late",  # its notices 20 minutes ahead
    "lone_change": "procedure.pit_inconsistent",  # one table changes a quarter in, notified
    "undeclared": "procedure.undeclared_change",  # three paying rounds in another order
}
# Log-level kinds: each one, independently, per table file with probability R.
LOG_KINDS = {
    "seq_skipped": "log.seq_gap",  # a seq number skipped before table_close
    "bad_line": "log.malformed",  # a round_start written first without its UTC offset
    "resent_changed": "log.altered",  # a second file resends events, one payout changed
    "night_cut": "log.table_unclosed",  # the night stops after its last round, unclosed
    "shoe_end_lost": "log.shoe_unfinished",  # a shoe_end never written, the next shoe follows
}
# A dealer pattern, planted only when asked (`simulate(error_prone_dealer=True)`): one dealer
# makes DEALER_FACTOR times the deviations of the others during the grave shift.
DEALER_KINDS = {"error_prone_dealer": "dealer.error_rate"}
DEALER_FACTOR = 10
# A seat that counts, planted only when asked (`simulate(counting_seat=True)`): at the first
# Dragon 7 table, seat COUNTING_SEAT wagers on the Banker every round of the grave shift, and
# on Dragon 7 by the true count of Jacobson's count (docs/side-bets.md): nothing below 2,
# COUNTER_STAKES[0] from 2, COUNTER_STAKES[1] from 4, its published betting point.
SIDE_BET_KINDS = {"counting_seat": "play.side_bet_counting"}
COUNTING_SEAT = 2
COUNTER_STAKES = (Decimal(10), Decimal(50))
# Jacobson's Dragon 7 tags by rank, written out here rather than read from
# rules/surveillance/side_bet_counts.toml: the simulator is a witness of its own.
DRAGON7_TAGS = {"A": 0, "2": 0, "3": 0, "4": -1, "5": -1, "6": -1, "7": -1, "8": 2, "9": 2,
                "T": 0, "J": 0, "Q": 0, "K": 0}
# Shoe orders, planted only when asked (`simulate(shoe_twice=True, unshuffled=True)`), each
# once a night at manual-shuffle banking tables (docs/shoe-integrity.md): a shoe dealt again,
# card for card, at another table; a shoe shuffled with two riffles only; the thirteen cards
# of one suit, ace to king, twenty cards into a shoe.
ORDER_KINDS = {
    "shoe_twice": "shoe.repeated_order",
    "weak_shuffle": "shoe.unshuffled",
    "pack_run": "shoe.unshuffled",
}
ORDER_MIN_DEALT = 40  # cards that must come out for a planted order to count as shown
WEAK_MIN_DEALT = 150  # of each shoe, for two riffles to show against the previous order
PLANTED_SHIFT = "grave"  # the default shifts' 22:00-06:00: the simulated night's first
MORNING_OPEN = "06:30"  # where the table's stream goes on after a night_cut: its next opening
KIND_CODES = (BANKING_KINDS | CHEMIN_KINDS | SHOE_KINDS | PROCEDURE_KINDS | LOG_KINDS
              | DEALER_KINDS | SIDE_BET_KINDS | ORDER_KINDS)
GAMES = ("mini_baccarat", "punto_banco", "chemin_de_fer", "nz")
DEFAULT_GAMES = ("mini_baccarat", "punto_banco", "chemin_de_fer")
SIM_DATE = dt.date(2026, 12, 1)  # the gaming day simulated unless one is given
SIM_OPENS = "22:00"
MAX_HOURS = 13  # the night runs 22:00 to at most 11:00 the next morning
PIT_SIZE = 4  # banking tables per pit (one procedure per pit)
MAX_PENDING = 8  # deviations waiting at a table for a round that shows them cleanly
# What a simulation writes into its folder, and all that `replace` may remove there.
OUTPUT_PATTERNS = ("*.jsonl", "*.jsonl.gz", "ground_truth.ndjson")


def _mini_specs(name: str, pit: str, procedure: int, k: int) -> TableSpec:
    """The k-th mini-baccarat layout, in turn: the sample night's four NJ layouts."""
    nj = dict(game="mini_baccarat", jurisdiction="NJ", seats=7, procedure=procedure)
    layouts = (
        dict(variant="standard", side_bets=("tie",)),
        dict(variant="no_vig_dragon7", side_bets=("tie", "dragon7", "panda8")),
        dict(variant="standard", side_bets=("tie", "total_cards_4", "total_cards_5",
                                             "total_cards_6")),
        dict(variant="standard", side_bets=("tie",), decks=6, shuffle="automated",
             batches=("red", "blue")),
    )
    return TableSpec(name, pit, **nj, **layouts[k % len(layouts)])  # type: ignore[arg-type]


def table_kinds(spec: TableSpec) -> tuple[str, ...]:
    """The deviation kinds the generator can plant at a table of this layout."""
    if spec.game == "chemin_de_fer":
        return tuple(CHEMIN_KINDS)
    pack = load_pack(spec.jurisdiction, spec.game)
    vig = bool(pack.variant(spec.variant).vigorish_rate)
    out = []
    for kind in BANKING_KINDS:
        if kind == "panda8_missing" and not panda8_due(pack, spec.variant):
            continue
        if kind == "irregular_disposition" and not pack.value("irregularities.player_extra_card"):
            continue
        if kind == "dragon_missing" and spec.variant != "no_vig_dragon7":
            continue
        if kind in ("total_cards_missing", "total_cards_wrong") and (
            "total_cards_5" not in spec.side_bets
        ):
            continue
        if kind in ("vig_short", "vig_missing", "procedure_order") and not vig:
            continue
        if kind == "vig_not_allowed" and vig:
            continue
        if kind == "procedure_order" and spec.procedure is None:
            continue
        out.append(kind)
    return tuple(out)


def shoe_kinds(spec: TableSpec) -> tuple[str, ...]:
    """The shoe-level kinds the generator can plant at a table of this layout."""
    rules = ShoeRules.of(load_pack(spec.jurisdiction, spec.game))
    out = ["few_decks", "extra_card"]
    if spec.shuffle == "automated" and rules.alternate_batches and len(spec.batches) > 1:
        out.append("batch_repeated")
    if rules.burn is not None and rules.burn.get("burn") == "card_value":
        out.append("burn_wrong")
    if rules.cut_from_end is not None:
        out.append("cut_misplaced")
    if rules.end_of_shoe == "finish_round_then_one_more":
        out.append("past_cut")
    if rules.face_up_rule and spec.game != "chemin_de_fer":
        out.append("face_up_last")
    return tuple(out)


def simulated_night(
    tables: int,
    hours: float,
    seed: int,
    games: tuple[str, ...],
    rate: float = 0.0,
    day: dt.date = SIM_DATE,
) -> Night:
    """The tables (games in turn, NJ banking tables PIT_SIZE to a pit with one procedure,
    chemin de fer and NZ tables in pits of their own) and one procedure change per NJ pit at
    half time, with written notices 45 minutes before (on time).

    With `rate`, each NJ pit's change is, with probability `rate`, notified to the Division
    only (notice_missing) or 20 minutes ahead (notice_late); and, independently with
    probability `rate`, one table of a pit of two or more changes alone a quarter into the
    night, duly notified (lone_change: the pit is inconsistent until the others follow).
    The tables open at SIM_OPENS on `day` (local, UTC-05:00)."""
    if tables < 1:
        raise ValueError("tables must be at least 1")
    if not 0 < hours <= MAX_HOURS:
        raise ValueError(f"hours must be more than 0 and at most {MAX_HOURS}")
    unknown = [g for g in games if g not in GAMES]
    if unknown or not games:
        raise ValueError(f"unknown games {unknown}; choose among {', '.join(GAMES)}")
    rng = random.Random(f"{seed}:night")
    h0, m0 = map(int, SIM_OPENS.split(":"))
    close_min = h0 * 60 + m0 + round(hours * 60)
    closes = f"{close_min // 60 % 24:02d}:{close_min % 60:02d}"
    half = h0 * 60 + m0 + round(hours * 30)
    effective = f"{half // 60 % 24:02d}:{half % 60:02d}"
    prefix = {"mini_baccarat": "MB", "punto_banco": "PB", "chemin_de_fer": "CF", "nz": "NZ"}
    count: dict[str, int] = {}
    pits: dict[str, list[str]] = {}  # pit -> tables
    pit_procedure: dict[str, int] = {}
    specs: list[TableSpec] = []

    def pit_for(group: str) -> str:
        open_pits = [p for p in pits if p.startswith(group) and len(pits[p]) < PIT_SIZE]
        if open_pits:
            return open_pits[0]
        name = f"{group}{sum(p.startswith(group) for p in pits) + 1}"
        pits[name] = []
        return name

    for i in range(tables):
        game = games[i % len(games)]
        n = count[game] = count.get(game, 0) + 1
        name = f"{prefix[game]}-{n:02d}"
        if game in ("mini_baccarat", "punto_banco"):
            pit = pit_for("P")
            procedure = pit_procedure.setdefault(pit, rng.randint(1, 4))
            if game == "mini_baccarat":
                spec = _mini_specs(name, pit, procedure, n - 1)
            else:
                spec = TableSpec(name, pit, "punto_banco", "NJ", "standard", 12, procedure,
                                 ("tie",), seconds_per_round=(55, 90))
        elif game == "chemin_de_fer":
            pit = pit_for("C")
            spec = TableSpec(name, pit, "chemin_de_fer", "NJ", "standard", 9, None, (), decks=6,
                             seconds_per_round=(70, 110))
        else:
            pit = pit_for("Z")
            spec = TableSpec(name, pit, "mini_baccarat", "NZ", "standard", 7, None, ("tie",))
        spec.opens, spec.closes = SIM_OPENS, closes
        pits[pit].append(name)
        specs.append(spec)
    changes = [
        NoticeChange(pit, tuple(pits[pit]), rng.choice([p for p in (1, 2, 3, 4) if p != proc]),
                     effective, 45)
        for pit, proc in pit_procedure.items()
    ]
    dev = random.Random(f"{seed}:night:deviations")
    quarter = h0 * 60 + m0 + round(hours * 15)
    lone: list[NoticeChange] = []  # first: their notices come first in the pit's stream
    for c in changes:
        if dev.random() < rate:
            c.kind = dev.choice(("notice_missing", "notice_late"))
            if c.kind == "notice_missing":
                c.recipients = ("division",)
            else:
                c.lead_minutes = 20
        # The lone table must differ from the others for longer than the 3-minute changeover.
        if dev.random() < rate and len(c.tables) > 1 and half - quarter >= 10:
            lone.append(NoticeChange(
                c.pit, (dev.choice(c.tables),), c.procedure,
                f"{quarter // 60 % 24:02d}:{quarter % 60:02d}", 45, kind="lone_change",
            ))
    return Night(day, dt.timedelta(hours=-5), specs, [], lone + changes)


class SimTableNight(TableNight):
    """A table whose rounds each get a deviation with probability `rate`, of a kind chosen at
    random among the table's kinds; one the round's cards cannot show cleanly waits for the
    next round that can (`deal.qualifies`, `chemin_qualifies`). Shoe-, table- and log-level kinds
    are drawn per shoe and per table (see `simulate`). `planted` is the ground truth: where
    the audit must find each deviation, keyed as its finding is."""

    def __init__(self, night: Night, spec: TableSpec, rng: random.Random, dev_rng: random.Random,
                 rate: float, ends_rng: random.Random | None = None) -> None:
        super().__init__(night, spec, rng)
        self.dev_rng, self.rate = dev_rng, rate
        # The stream-end kinds draw from their own generator, so that adding them left every
        # other deviation of a seed where it was.
        self.ends_rng = ends_rng or random.Random(f"{spec.table}:ends")
        self.kinds = table_kinds(spec)
        self.shoe_kinds = shoe_kinds(spec)
        self.shoe_rules = ShoeRules.of(self.pack)
        self.rounds = 0
        self.planted: list[dict] = []
        # procedure_order rounds since the last round that shows the declared procedure (two
        # Banker winners and their vigorish): three in a row would be an undeclared change.
        self.order_streak = 0
        self.last_wagers: list[tuple[int, str, Decimal]] = []
        self.this_shoe: set[str] = set()  # the shoe-level kinds planted in the shoe dealt
        self.batches: list[str] = []  # the batches of this opening's shoes, in turn
        self.extra_last = -1  # where the last copy of the duplicated card lies in the shoe
        # An undeclared change: after `undeclared_at` rounds, the dealers pay in another
        # procedure's order until three rounds with several winners showed it (`stretch`).
        vig = bool(self.variant.vigorish_rate) and spec.procedure is not None
        self.undeclared_at = (
            dev_rng.randint(1, 60) if vig and dev_rng.random() < rate else None
        )
        self.stretch: list[tuple[str, int]] | None = None
        self.stretch_declared: int | None = None
        self.resent: list[str] = []  # events sent again, one changed (log.altered)
        # The error-prone dealer's (see `simulate`): until when their rate is multiplied.
        self.bad_dealer: str | None = None
        self.bad_until: dt.datetime | None = None
        # The counting seat's (see `simulate`): its seat, until when it plays, and its count
        # of the shoe: the running count, the cards accounted for, those burned unseen.
        self.counter_seat: int | None = None
        self.counter_until: dt.datetime | None = None
        self.counter_rc, self.counter_upto, self.counter_tc = 0, 0, 0.0
        self.counter_unseen: set[int] = set()
        self.counting = False  # the counter plays the round being dealt
        # Planted shoe orders (see `simulate`): shoe number -> kind; the night's shoes as
        # dealt, shared by every table ("TABLE#n" -> cards, cards out); the shoe to repeat.
        self.order_kinds: dict[int, str] = {}
        self.library: dict[str, tuple[list[str], int]] = {}
        self.twice_of = ""
        self.shoe_count = 0
        self.order_now = ""
        self.previous: tuple[list[str], int] | None = None
        self.order_rng = random.Random(f"{spec.table}:order")

    def truth(self, kind: str, shoe: str | None = None, rnd: int | None = None,
              table: str | None = "") -> None:
        """One line of ground truth; `table` None for a finding that names no table."""
        self.planted.append({"code": KIND_CODES[kind],
                             "table": self.spec.table if table == "" else table,
                             "shoe": shoe, "round": rnd, "kind": kind})

    # --- shoes ---------------------------------------------------------------------------

    def between_shoes(self, t: dt.datetime, changes: list[NoticeChange]) -> None:
        """A change due during the break between shoes is logged when it fell due: logged at
        the next round, it could lag the pit's other tables by more than the changeover."""
        self.apply_changes(t, changes, on_time=True)

    def plan_shoe(self, shoe_id: str) -> ShoePlan:
        """Draw the shoe-level kinds for this shoe; those seen at its start go in the ground
        truth now, those that need its end in `shoe_done`."""
        self.shoe_count += 1
        self.order_now = self.order_kinds.get(self.shoe_count, "")
        if self.order_now:
            return self.plan_order(shoe_id)
        plan = super().plan_shoe(shoe_id)
        drawn = {k for k in self.shoe_kinds if self.dev_rng.random() < self.rate}
        if not self.batches:
            drawn.discard("batch_repeated")  # the first shoe of the opening has no previous
        self.this_shoe = drawn
        if "few_decks" in drawn:
            plan.decks = max(1, required_decks(self.spec.shuffle, self.shoe_rules)[0] - 2)
            self.truth("few_decks", shoe_id)
        if "batch_repeated" in drawn:  # and the batch the shoe skipped is the next one's
            plan.batch = self.batches[-1]
            self.batch_index -= 1
        if self.spec.shuffle == "automated" and self.shoe_rules.alternate_batches:
            self.batches.append(plan.batch)
            if _alternation_broken(self.batches):
                self.truth("batch_repeated", shoe_id)
        if "burn_wrong" in drawn:
            plan.burn_delta = self.dev_rng.choice((-1, 1, 2))
            self.truth("burn_wrong", shoe_id)
        if "cut_misplaced" in drawn:
            plan.cut_left = self.dev_rng.randint(40, 60)
        if "past_cut" in drawn:
            plan.rounds_after_cut = 2
        return plan

    def plan_order(self, shoe_id: str) -> ShoePlan:
        """A planted order's shoe: no other shoe-level kind in it. shoe_twice takes the order
        of the shoe it repeats; weak_shuffle the previous shoe's after two riffles."""
        self.this_shoe = set()
        plan = TableNight.plan_shoe(self, shoe_id)
        if self.order_now == "shoe_twice" and self.twice_of in self.library:
            plan.cards = list(self.library[self.twice_of][0])
        elif self.order_now == "weak_shuffle" and self.previous is not None:
            plan.cards = _riffle(_riffle(self.previous[0], self.order_rng), self.order_rng)
        elif self.order_now != "pack_run":
            self.order_now = ""  # nothing to repeat: a regular shoe
        if plan.cards is not None:
            plan.decks = len(plan.cards) // 52
        return plan

    def tamper(self, shoe_id: str, cards: list[str], pos: int) -> None:
        """extra_card: every copy of the first card dealt, and one more in place of another
        card, within the next 40 cards, so that the audit sees them all come out. pack_run:
        one copy of each spade, ace to king, from the 21st card dealt on (swapped into place,
        so the shoe keeps its cards)."""
        self.extra_last = -1
        if self.order_now == "pack_run":
            at = pos + 20
            for k, rank in enumerate(RANKS):
                j = next(i for i in range(at + k, len(cards)) if cards[i] == rank + "s")
                cards[at + k], cards[j] = cards[j], cards[at + k]
        if "extra_card" not in self.this_shoe:
            return
        x, window = cards[pos], range(pos, min(len(cards), pos + 40))
        free = [i for i in window if cards[i] != x]
        self.dev_rng.shuffle(free)
        for i in range(window.stop, len(cards)):
            if cards[i] == x:
                j = free.pop()
                cards[i], cards[j] = cards[j], cards[i]
        cards[free.pop()] = x
        self.extra_last = max(i for i, c in enumerate(cards) if c == x)

    def shoe_done(self, shoe_id: str, cards: list[str], pos: int, rnd: int) -> None:
        """Ground truth for what the shoe's end shows: the duplicated card (if it came out),
        the misplaced cutting card (if it came out), a round past the allowed last one; a
        planted order that came out far enough to show."""
        self.order_truth(shoe_id, cards, pos)
        if 0 <= self.extra_last < pos:
            self.truth("extra_card", shoe_id)
        if "cut_misplaced" in self.this_shoe and self.cut_round is not None:
            self.truth("cut_misplaced", shoe_id, self.cut_round)
        if "past_cut" in self.this_shoe and self.cut_round is not None and (
            rnd >= self.cut_round + 2
        ):
            self.truth("past_cut", shoe_id, self.cut_round + 2)

    def order_truth(self, shoe_id: str, cards: list[str], pos: int) -> None:
        burn = 1 + (value(cards[0]) or 10)
        dealt = pos - burn
        if self.order_now == "shoe_twice":
            _, source_pos = self.library[self.twice_of]
            if min(pos, source_pos) - burn >= ORDER_MIN_DEALT:
                self.truth("shoe_twice", shoe_id)
        elif self.order_now == "weak_shuffle" and self.previous is not None:
            before = self.previous[1] - 1 - (value(self.previous[0][0]) or 10)
            if min(dealt, before) >= WEAK_MIN_DEALT:
                self.truth("weak_shuffle", shoe_id)
        elif self.order_now == "pack_run" and dealt >= 20 + len(RANKS):
            self.truth("pack_run", shoe_id)
        self.library[f"{self.spec.table}#{self.shoe_count}"] = (list(cards), pos)
        self.previous = (list(cards), pos)

    # --- rounds --------------------------------------------------------------------------

    def take_deviation(self, o: Outcome, t: dt.datetime) -> Deviation | None:
        for d in self.pending:
            if d.kind == "procedure_order" and (
                self.order_streak >= MIN_UNDECLARED_ROUNDS - 1 or self.stretch is not None
            ):
                continue
            if qualifies(self.pack, d.kind, o):
                self.pending.remove(d)
                return d
        return None

    def wagers(self, kind: str) -> list[tuple[int, str, Decimal]]:
        self.last_wagers = super().wagers(kind)
        if self.counting and not kind:  # a planted round's wagers are left as they are
            self.last_wagers = self.counter_wagers(self.last_wagers)
        return self.last_wagers

    def counter_wagers(
        self, regular: list[tuple[int, str, Decimal]]
    ) -> list[tuple[int, str, Decimal]]:
        """The regular wagers with the counting seat's in place of any at its seat: the
        Banker, and Dragon 7 by the true count (COUNTER_STAKES)."""
        seat = self.counter_seat
        mine = [(seat, "banker", Decimal(25))] if seat is not None else []
        if seat is not None and self.counter_tc >= 2:
            stake = COUNTER_STAKES[1] if self.counter_tc >= 4 else COUNTER_STAKES[0]
            mine.append((seat, "dragon7", stake))
        return sorted([w for w in regular if w[0] != seat] + mine, key=lambda w: w[0])

    def counter_count(self, rnd: int, cards: list[str], pos: int) -> None:
        """The counting seat's true count before the round that starts at `pos`: the exposed
        burn card and every card dealt since, not those burned unseen, over the decks left."""
        if rnd == 1:  # the burn is all that came out: its first card is the one shown
            self.counter_rc, self.counter_upto, self.counter_unseen = (
                DRAGON7_TAGS[cards[0][0]], pos, set())
        for i in range(self.counter_upto, pos):
            if i not in self.counter_unseen:
                self.counter_rc += DRAGON7_TAGS[cards[i][0]]
        self.counter_upto = pos
        self.counter_tc = self.counter_rc * 52 / max(len(cards) - pos, 1)

    def banking_round(self, shoe_id: str, rnd: int, o: Outcome, t: dt.datetime, kind: str) -> None:
        if self.stretch is not None and self.procedure != self.stretch_declared:
            self.stretch_cut_short()  # a declared change ends the run against the old one
        if (self.stretch is None and self.undeclared_at is not None
                and self.rounds >= self.undeclared_at and self.order_streak == 0
                and kind != "procedure_order"):
            self.undeclared_at = None
            self.stretch, self.stretch_declared = [], self.procedure
        self.other_order = self.stretch is not None
        first = len(self.out.lines)
        super().banking_round(shoe_id, rnd, o, t, kind)
        self.other_order = False
        if self.stretch is not None:
            shows = _shows_order(self.out.lines[first:], self.stretch_declared or 3)
            if shows == "other":
                self.stretch.append((shoe_id, rnd))
            elif shows == "declared":  # several winners, yet both orders agree: the run breaks
                self.stretch_cut_short()
                self.stretch, self.stretch_declared = [], self.procedure
            if self.stretch is not None and len(self.stretch) >= MIN_UNDECLARED_ROUNDS:
                self.truth("undeclared", *self.stretch[0])
                self.stretch = None
                self.order_streak = MIN_UNDECLARED_ROUNDS - 1  # wait for the declared order
            return
        if kind == "procedure_order":
            self.order_streak += 1
        elif not kind and o.winner == "banker" and self.variant.vigorish_rate:
            vig_seats = {seat for seat, bet, _ in self.last_wagers if bet == "banker"}
            if len(vig_seats) >= 2:
                self.order_streak = 0

    def stretch_cut_short(self) -> None:
        """Fewer than three rounds in the other order: each is a procedure mismatch."""
        for shoe_id, rnd in self.stretch or []:
            self.truth("procedure_order", shoe_id, rnd)
        self.stretch = None
        self.order_streak = MIN_UNDECLARED_ROUNDS - 1

    def play_round(
        self, shoe_id: str, rnd: int, cards: list[str], pos: int, t: dt.datetime
    ) -> int | None:
        rate = self.rate
        if self.bad_dealer is not None and self.bad_until is not None and (
            t < self.bad_until and self.dealer(t) == self.bad_dealer
        ):
            rate = min(1.0, rate * DEALER_FACTOR)
        # One draw a round either way: a night without the pattern keeps its bytes.
        if self.dev_rng.random() < rate and len(self.pending) < MAX_PENDING:
            kind = self.dev_rng.choice(self.kinds)
            self.pending.append(
                Deviation(self.spec.table, kind, self.spec.opens, KIND_CODES[kind], "")
            )
        waiting = list(self.pending)
        self.counting = self.counter_seat is not None and (
            self.counter_until is None or t < self.counter_until)
        if self.counting:
            self.counter_count(rnd, cards, pos)
        burned = 0
        if "face_up_last" in self.this_shoe and self.round_is_last:
            # 4.12(j): found face up and burned with its value; the last round must be void.
            burned = 1 + value(cards[pos])
            if pos + burned + 6 <= len(cards):
                self.counter_unseen.update(range(pos + 1, pos + burned))
                self.face_up = (cards[pos], cards[pos + 1:pos + burned])
                self.this_shoe.discard("face_up_last")
                self.truth("face_up_last", shoe_id, rnd)
            else:
                burned = 0
        used = super().play_round(shoe_id, rnd, cards, pos + burned, t)
        if used is not None:
            self.rounds += 1
        for d in waiting:
            if d.planted:
                self.truth(d.kind, shoe_id, rnd)
        return None if used is None else used + burned

    # --- the file ------------------------------------------------------------------------

    def run(self) -> list[str]:
        """The table's lines, with the log-level deviations drawn for it."""
        lines = super().run()
        if self.stretch is not None:
            self.stretch_cut_short()
        lost_end = self.ends_rng.random() < self.rate
        cut = self.ends_rng.random() < self.rate
        if lost_end:
            lines = self.lose_shoe_end(lines)
        if cut:
            cut = self.cut_night(lines)
        rng = self.dev_rng
        if rng.random() < self.rate:  # seq jumps before table_close: outside every shoe
            close = json.loads(lines[-1])
            close["seq"] += 1
            lines[-1] = json.dumps(close, separators=(",", ":"))
            self.truth("seq_skipped")
            # Before a cut night's morning opening, the jump may hold the missing close:
            # log.seq_gap reports the missing events, and the unclosed night is not judged.
            cut = False
        if cut:
            self.truth("night_cut", table=self.spec.table)
        if rng.random() < self.rate:
            starts = [i for i, line in enumerate(lines) if '"type":"round_start"' in line]
            if starts:
                i = rng.choice(starts)
                bad = json.loads(lines[i])
                bad["ts"] = bad["ts"][:-6]  # the UTC offset cut off: rejected
                lines.insert(i, json.dumps(bad, separators=(",", ":")))
                self.truth("bad_line", bad["shoe"], bad["round"])
        if rng.random() < self.rate:
            pays = [i for i, line in enumerate(lines) if '"type":"pay"' in line]
            if pays:
                i = rng.choice(pays)
                changed = json.loads(lines[i])
                changed["amount"] = amount(Decimal(str(changed["amount"])) + 10)
                self.resent = [*lines[max(0, i - 2):i],
                               json.dumps(changed, separators=(",", ":")), *lines[i + 1:i + 3]]
                self.truth("resent_changed", table=None)
        return lines


    def lose_shoe_end(self, lines: list[str]) -> list[str]:
        """shoe_end_lost: the shoe_end of a shoe other than the last is never written (the
        events after it numbered on without a gap), so the next shoe_start follows its last
        round. A table with one shoe has nothing to lose."""
        ends = [i for i, line in enumerate(lines) if '"type":"shoe_end"' in line][:-1]
        if not ends:
            return lines
        i = self.ends_rng.choice(ends)
        self.truth("shoe_end_lost", json.loads(lines[i])["shoe"])
        out = lines[:i]
        for line in lines[i + 1:]:
            e = json.loads(line)
            e["seq"] -= 1
            out.append(json.dumps(e, separators=(",", ":")))
        return out

    def cut_night(self, lines: list[str]) -> bool:
        """night_cut: the table's log stops after the night's last round, its shoe_end and
        table_close never written, and goes on (seq numbered on) with the table's next opening
        the next morning, which shows the night is over. In place; False when the night does
        not end on a round (a last shoe with no round: nothing is cut then)."""
        if len(lines) < 3 or '"type":"round_end"' not in lines[-3]:
            return False
        first, last = json.loads(lines[0]), json.loads(lines[-3])
        t = self.local(MORNING_OPEN, next_day=True)
        first.update(ts=t.isoformat(timespec="milliseconds"), seq=last["seq"] + 1,
                     dealer=self.dealer(t))
        first.pop("procedure", None)
        if self.procedure is not None:  # the procedure in force at the end of the night
            first["procedure"] = self.procedure
        lines[-2:] = [json.dumps(first, separators=(",", ":"))]
        return True


def _order_plan(
    night: Night, shoe_twice: bool, unshuffled: bool
) -> dict[tuple[str, int], tuple[str, str]]:
    """(table, shoe number) -> (order kind, "TABLE#n" of the shoe it repeats, or "")."""
    manual = [s for s in night.tables
              if s.game in ("mini_baccarat", "punto_banco") and s.shuffle == "manual"]
    plan: dict[tuple[str, int], tuple[str, str]] = {}
    if not manual:
        return plan
    first = manual[0]
    if unshuffled:
        plan[(first.table, 2)] = ("weak_shuffle", "")
        if len(manual) > 1:
            plan[(manual[1].table, 1)] = ("pack_run", "")
    if shoe_twice:
        alike = [s for s in manual[1:] if (s.game, s.jurisdiction, s.decks)
                 == (first.game, first.jurisdiction, first.decks)]
        if alike:
            plan[(alike[-1].table, 2)] = ("shoe_twice", f"{first.table}#1")
    return plan


def _riffle(cards: list[str], rng: random.Random) -> list[str]:
    """One riffle shuffle (Gilbert-Shannon-Reeds): cut near the middle (binomial), then drop
    cards from either half with chance proportional to what is left in it. Two of them leave
    about a quarter of the neighbouring pairs as they were."""
    cut = sum(rng.random() < 0.5 for _ in cards)
    left, right = cards[:cut], cards[cut:]
    out: list[str] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if rng.random() * (len(left) - i + len(right) - j) < len(left) - i:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out


def _alternation_broken(batches: list[str]) -> bool:
    """Whether the last shoe's batch breaks the alternation of two batches: the previous
    shoe's batch, or not the batch of the shoe before that."""
    if len(batches) < 2:
        return False
    if batches[-1] == batches[-2]:
        return True
    return len(batches) >= 3 and batches[-1] != batches[-3]


def _shows_order(lines: list[str], declared: int) -> str:
    """What a round's payments (its `lines`) say of the procedure followed: "none" with fewer
    than two seats paid or charged vigorish, or no vigorish (every procedure looks alike);
    else "declared" when they are in the declared procedure's order, "other" when not."""
    moves = [(e["type"], e["seat"]) for e in map(json.loads, lines) if e["type"] in ("pay", "vig")]
    seats = sorted({seat for _, seat in moves}, reverse=True)
    if len(seats) < 2 or not any(kind == "vig" for kind, _ in moves):
        return "none"

    def at(seat: int, kind: str) -> list[tuple[str, int]]:
        return [m for m in moves if m == (kind, seat)]

    first, then = ("vig", "pay") if declared in (2, 4) else ("pay", "vig")
    if declared in (1, 2):  # all of one kind, seat by seat, then all of the other
        want = [m for seat in seats for m in at(seat, first)]
        want += [m for seat in seats for m in at(seat, then)]
    else:  # seat by seat, both kinds
        want = [m for seat in seats for m in at(seat, first) + at(seat, then)]
    return "declared" if moves == want else "other"


@dataclass
class SimulationResult:
    files: list[Path]  # the event logs (one per table, the pits' notices, then files resent)
    ground_truth: Path
    tables: int
    rounds: int
    events: int
    deviations: list[dict]  # as in ground_truth.ndjson
    seconds: float = 0.0

    @property
    def rounds_per_second(self) -> float:
        return self.rounds / self.seconds if self.seconds else 0.0


def prepare_out_dir(out: Path, replace: bool = False) -> list[Path]:
    """Make `out` ready for a simulation: a new or empty folder, else refused (ValueError),
    because logs of two nights side by side would be ingested as one and the ground truth
    would describe only the newer. With `replace`, first remove what a simulation writes
    there (OUTPUT_PATTERNS, not in subfolders) and keep everything else; returns what went."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file; --out takes a folder to write the logs into")
    if not out.is_dir():
        return []
    if not replace:
        if any(out.iterdir()):
            raise ValueError(
                f"{out} is not empty: simulated logs would mix with what is there; choose an "
                "empty or new folder, or add --replace to remove the logs and ground truth "
                "already there (other files are kept)"
            )
        return []
    removed = sorted(
        {p for pattern in OUTPUT_PATTERNS for p in out.glob(pattern)
         if p.is_file() or p.is_symlink()}
    )
    for p in removed:
        p.unlink()
    return removed


def simulate(
    out_dir: Path | str,
    tables: int,
    hours: float,
    seed: int = 1,
    deviation_rate: float = 0.0,
    games: tuple[str, ...] | list[str] = DEFAULT_GAMES,
    *,
    day: dt.date = SIM_DATE,
    replace: bool = False,
    error_prone_dealer: bool = False,
    counting_seat: bool = False,
    shoe_twice: bool = False,
    unshuffled: bool = False,
) -> SimulationResult:
    """Write event log v1 files for `tables` tables open `hours` hours from 22:00 on `day`
    (the games in turn; 'nz' is NZ mini-baccarat), with the procedure changes and their
    notices, and
    `ground_truth.ndjson`: one line per finding the planted deviations must raise (code,
    table, shoe, round, kind), keyed as the finding is: null where it names no table, shoe or
    round. The same arguments write the same bytes. The ground truth is JSON Lines under
    another suffix, so `bacc-audit ingest DIR` takes only the logs.

    `deviation_rate` R is the probability of each deviation where it can happen:
    - round-level kinds (BANKING_KINDS, CHEMIN_KINDS): per round; a kind the round's cards
      cannot show cleanly waits for the next round that can (at most MAX_PENDING waiting);
    - shoe-level kinds (SHOE_KINDS): each one, independently, per shoe; those that need the
      shoe's end (the cutting card, rounds after it, the last round) count only where the
      night reaches it, and a repeated batch also breaks the alternation at the next shoe;
    - procedure kinds (PROCEDURE_KINDS): per NJ pit, its half-time change badly notified,
      and one table changing alone a quarter in; per table with procedures and vigorish, one
      undeclared change (three rounds with several winners paid in another order; cut short
      by the night's end or a declared change, they stay procedure mismatches);
    - log-level kinds (LOG_KINDS): each one per table file. A resent file is written as
      DATE_TABLE.resent.jsonl, after its table's file in name order. A cut night's file ends
      with the table's next opening at MORNING_OPEN the next morning, the event that shows
      its gaming day is over.
    announce.panda8_missing is planted only where the rule pack makes "panda 8" due (no
    shipped pack does; point BACC_AUDIT_RULES at packs that do).

    With `error_prone_dealer`, the first dealer of the first mini-baccarat or punto banco
    table gets DEALER_FACTOR times the round-level rate while dealing in the gaming day's
    grave shift (22:00-06:00, the default shifts), and the ground truth has one
    dealer.error_rate line (table, shoe and round null) naming `dealer` and `shift`
    (`2026-12-01/grave`). Off by default: without it a seed writes the bytes it always did.
    The pattern needs rounds to show against: a night of two hours or more at a rate of 0.02
    or more (docs/dealers.md).

    With `counting_seat`, seat COUNTING_SEAT of the first table with Dragon 7 wagers (the
    second mini-baccarat table: a night of two mini-baccarat tables or more) counts the shoe
    during the grave shift: it wagers on the Banker every round, and on Dragon 7 by the true
    count of Jacobson's count (COUNTER_STAKES; it sits out the rounds that carry a planted
    deviation), and the ground truth has one play.side_bet_counting line (shoe and round
    null) naming the `table`, `seat`, `bet` and `shift`. Off by default, like the dealer
    pattern; without a Dragon 7 table nothing is planted. Found on a night of an hour or more
    (docs/side-bets.md).

    With `shoe_twice`, the second shoe of the last manual-shuffle banking table like the
    first (same game, jurisdiction and decks) is dealt in the order of the first table's
    first shoe (shoe.repeated_order). With `unshuffled`, the first such table's second shoe is
    its first shoe after two riffles (weak_shuffle), and the first shoe of the next such table
    has the spades, ace to king, from its 21st card dealt (pack_run); both shoe.unshuffled.
    Each goes in the ground truth (table and shoe, round null) where enough of the shoe came
    out to show it (ORDER_MIN_DEALT, WEAK_MIN_DEALT): a night of two hours or more. Off by
    default, like the dealer pattern.

    `out_dir` must be new or empty (see `prepare_out_dir`; `replace` clears a previous
    simulation's files first)."""
    if not 0 <= deviation_rate <= 1:
        raise ValueError("deviation_rate must be between 0 and 1")
    started = time.perf_counter()
    out = Path(out_dir)
    night = simulated_night(tables, hours, seed, tuple(games), deviation_rate, day)
    prepare_out_dir(out, replace)  # after the arguments are known good: nothing removed else
    players: list[SimTableNight] = []
    banking = [s.table for s in night.tables if s.game in ("mini_baccarat", "punto_banco")]
    bad_table = banking[0] if error_prone_dealer and banking else None
    counter_table = next((s.table for s in night.tables if "dragon7" in s.side_bets
                          and s.game != "chemin_de_fer"), None) if counting_seat else None
    order_at = _order_plan(night, shoe_twice, unshuffled)
    library: dict[str, tuple[list[str], int]] = {}  # every table's shoes, shared
    shift_label, shift_end = "", None
    if bad_table is not None or counter_table is not None:
        zone = dt.timezone(night.utc_offset)
        shift_end = PropertyConfig().shift_window(night.date, PLANTED_SHIFT, zone)[1]
        shift_label = f"{night.date:%Y-%m-%d}/{PLANTED_SHIFT}"

    def make(night: Night, spec: TableSpec, rng: random.Random, i: int) -> TableNight:
        dev_rng = random.Random(f"{seed}:{i}:{spec.table}:deviations")
        ends_rng = random.Random(f"{seed}:{i}:{spec.table}:ends")
        player = SimTableNight(night, spec, rng, dev_rng, deviation_rate, ends_rng)
        if spec.table == bad_table:
            player.bad_dealer, player.bad_until = player.dealers[0], shift_end
        if spec.table == counter_table:
            player.counter_seat, player.counter_until = COUNTING_SEAT, shift_end
        player.library = library
        for (table, shoe_no), (kind, source) in order_at.items():
            if table == spec.table:
                player.order_kinds[shoe_no] = kind
                player.twice_of = source or player.twice_of
        players.append(player)
        return player

    written, _ = write_night(night, out, seed, make)
    files = [written[s.table] for s in night.tables] + ([written["pits"]] if "pits" in written
                                                        else [])
    for p in players:
        if p.resent:
            path = out / f"{night.date:%Y-%m-%d}_{p.spec.table}.resent.jsonl"
            path.write_text("\n".join(p.resent) + "\n")
            files.append(path)
    events = sum(len(f.read_text().splitlines()) for f in files)
    deviations = [d for p in players for d in p.planted] + _notice_truth(night, players)
    deviations += [
        {"code": DEALER_KINDS["error_prone_dealer"], "table": None, "shoe": None, "round": None,
         "kind": "error_prone_dealer", "dealer": p.bad_dealer, "shift": shift_label}
        for p in players if p.bad_dealer is not None
    ]
    deviations += [
        {"code": SIDE_BET_KINDS["counting_seat"], "table": p.spec.table, "shoe": None,
         "round": None, "kind": "counting_seat", "seat": p.counter_seat, "bet": "dragon7",
         "shift": shift_label}
        for p in players if p.counter_seat is not None
    ]
    truth = out / "ground_truth.ndjson"
    truth.write_text("".join(json.dumps(d, separators=(",", ":")) + "\n" for d in deviations))
    return SimulationResult(
        files, truth, len(night.tables), sum(p.rounds for p in players), events, deviations,
        time.perf_counter() - started,
    )


def _notice_truth(night: Night, players: list[SimTableNight]) -> list[dict]:
    """Ground truth of the planted pit changes: a badly notified change at each table that
    made it; the pit inconsistent (a finding naming no table) when its lone table changed."""
    out = []
    for c in night.changes:
        if not c.kind:
            continue
        made: list[str | None] = [p.spec.table for p in players if c in p.applied]
        if c.kind == "lone_change":
            made = [None] if made else []
        out += [{"code": KIND_CODES[c.kind], "table": table, "shoe": None, "round": None,
                 "kind": c.kind} for table in made]
    return out
