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
from auditor.replay.sidebets import Observation
from auditor.replay.tables import MIN_UNDECLARED_ROUNDS
from auditor.rules.cards import RANKS
from auditor.simulate import lies, power, shoe_lies
from auditor.simulate.deal import Outcome, amount, qualifies, value
from auditor.simulate.generator import (
    Deviation,
    Night,
    NoticeChange,
    ShoePlan,
    TableNight,
    TableSpec,
    write_night,
)
from auditor.simulate.kinds import (
    KIND_CODES,
    shoe_kinds,
    table_kinds,
)
from auditor.simulate.layout import (
    DEFAULT_GAMES,
    SIM_DATE,
    carry_procedures,
    simulated_night,
    unnotify,
)
from auditor.simulate.orders import alternation_broken, order_plan, riffle, shows_order
from auditor.simulate.output import SimulationResult, prepare_out_dir, write_ground_truth

# A dealer pattern (DEALER_KINDS), planted only when asked (`simulate(error_prone_dealer=True)`):
# one dealer makes DEALER_FACTOR times the deviations of the others during the grave shift.
DEALER_FACTOR = 10
# A seat that counts (SIDE_BET_KINDS), planted only when asked (`simulate(counting_seat=True)`):
# at the first Dragon 7 table, seat COUNTING_SEAT wagers on the Banker every round of the grave
# shift, and on Dragon 7 by the true count of Jacobson's count (docs/side-bets.md): nothing
# below 2, COUNTER_STAKES[0] from 2, COUNTER_STAKES[1] from 4, its published betting point.
COUNTING_SEAT = 2
COUNTER_STAKES = (Decimal(10), Decimal(50))
# Jacobson's Dragon 7 tags by rank, written out here rather than read from
# rules/surveillance/side_bet_counts.toml: the simulator is a witness of its own.
DRAGON7_TAGS = {"A": 0, "2": 0, "3": 0, "4": -1, "5": -1, "6": -1, "7": -1, "8": 2, "9": 2,
                "T": 0, "J": 0, "Q": 0, "K": 0}
PLANTED_SHIFT = "grave"  # the default shifts' 22:00-06:00: the simulated night's first
MORNING_OPEN = "06:30"  # where the table's stream goes on after a night_cut: its next opening
MAX_PENDING = 8  # deviations waiting at a table for a round that shows them cleanly


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
        self.shoe_lies: list[shoe_lies.Lie] = []  # shoe_lies.py, see `simulate`
        self.lies: lies.TableLies | None = None  # the logs' lies planted here (issue 28)
        # Every round as the dealers' chart counts it, and the counting seat's rounds as the
        # side-bet test reads them: what the ground truth judges the patterns by (power.py).
        self.dealt: list[power.Dealt] = []
        self.counter_series: list[Observation] = []

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
        if any(lie.shoe_no == self.shoe_count for lie in self.shoe_lies):
            drawn.add("extra_card")  # the card too many a shoe lie hides
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
            if alternation_broken(self.batches):
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
            plan.cards = riffle(riffle(self.previous[0], self.order_rng), self.order_rng)
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
        """A planted order goes in the ground truth when the cards the shoe dealt show it to
        the audit's own tests (auditor.replay.integrity, on the cards as the audit reads
        them: those dealt, not the burn), else it is left to power.placement_gaps to say."""
        seen = power.seen_codes(cards, pos)
        if self.order_now == "shoe_twice":
            source, source_pos = self.library[self.twice_of]
            if power.repeat_shown(power.seen_codes(source, source_pos), seen):
                self.truth("shoe_twice", shoe_id)
        elif self.order_now == "weak_shuffle" and self.previous is not None:
            if power.kept_shown(power.seen_codes(*self.previous), seen, len(cards) // 52):
                self.truth("weak_shuffle", shoe_id)
        elif self.order_now == "pack_run" and power.pack_run_shown(seen):
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
            shows = shows_order(self.out.lines[first:], self.stretch_declared or 3)
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
            self.dealt.append(power.Dealt(t, self.dealer(t), self.spec.table, shoe_id, rnd))
            seen = self.counting and self.counter_seat is not None and power.counter_observation(
                shoe_id, rnd, t, self.counter_tc, self.last_wagers, self.counter_seat)
            if seen:
                self.counter_series.append(seen)
        for d in waiting:
            if d.planted:
                self.truth(d.kind, shoe_id, rnd)
        return None if used is None else used + burned

    # --- the file ------------------------------------------------------------------------

    def run(self) -> list[str]:
        """The table's lines, with the log-level deviations drawn for it."""
        lines = super().run()
        if self.lies is not None:  # before the others, which number the lines as they are
            lines = self.lies.in_stream(lines)
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
        self.tell_lies(lines)
        if self.lies is not None:
            self.lies.after_night(lines, self.night.date)
        return lines

    def tell_lies(self, lines: list[str]) -> None:
        """The shoe lies asked for (shoe_lies), last, over the file as it will be written."""
        for lie in self.shoe_lies:
            shoe = f"{self.spec.table}-{self.night.date:%m%d}-{lie.shoe_no:02d}"
            if not any(d["kind"] == "extra_card" and d["shoe"] == shoe for d in self.planted):
                continue  # the card too many did not come out: nothing to hide
            done = shoe_lies.relabel(lines, shoe, lie.kind)
            if done is not None:
                self.truth(lie.kind, done.label, done.round)
                if done.remaining_raised:
                    self.truth("remaining_raised", shoe)


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
        # Its next opening: MORNING_OPEN, or half an hour after a night that went on past it
        # (an opening logged before the night's last round would run the stream's time back).
        t = max(self.local(MORNING_OPEN, next_day=True),
                dt.datetime.fromisoformat(last["ts"]) + dt.timedelta(minutes=30))
        first.update(ts=t.isoformat(timespec="milliseconds"), seq=last["seq"] + 1,
                     dealer=self.dealer(t))
        first.pop("procedure", None)
        if self.procedure is not None:  # the procedure in force at the end of the night
            first["procedure"] = self.procedure
        lines[-2:] = [json.dumps(first, separators=(",", ":"))]
        return True


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
    phantom_shoe: bool = False,
    shoe_reopened: bool = False,
    lying: bool = False,
    unnotified_change: bool = False,
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
    (`2026-12-01/grave`) when the audit's p-chart flags the dealer on the night's own counts
    (DealerRate.flagged); else a not_planted line says the dealer is below its power (a
    night of two hours or more at a rate of 0.02 or more shows it; docs/dealers.md). Off by
    default: without it a seed writes the bytes it always did.

    With `counting_seat`, seat COUNTING_SEAT of the first table with Dragon 7 wagers (the
    second mini-baccarat table: a night of two mini-baccarat tables or more) counts the shoe
    during the grave shift: it wagers on the Banker every round, and on Dragon 7 by the true
    count of Jacobson's count (COUNTER_STAKES; it sits out the rounds that carry a planted
    deviation), and the ground truth has one play.side_bet_counting line (shoe and round
    null) naming the `table`, `seat`, `bet` and `shift` when the audit's test of the seat's
    rounds flags it (sidebets.seat_test; a night of an hour or more, docs/side-bets.md).
    Off by default, like the dealer pattern; without a Dragon 7 table, or below the test's
    power, a not_planted line says so.

    With `shoe_twice`, the second shoe of the last manual-shuffle banking table like the
    first (same game, jurisdiction and decks) is dealt in the order of the first table's
    first shoe (shoe.repeated_order). With `unshuffled`, the first such table's second shoe is
    its first shoe after two riffles (weak_shuffle), and the first shoe of the next such table
    has the spades, ace to king, from its 21st card dealt (pack_run); both shoe.unshuffled.
    Each goes in the ground truth (table and shoe, round null) where the cards dealt show it
    to the audit's own tests (power.py: a night of two hours or more), else a not_planted
    line says why, as it does when the night has no such tables. Off by default, like the
    dealer pattern.

    With `phantom_shoe` and `shoe_reopened`, the shoe lies of issue 28 (shoe_lies.py): the
    first shoe of the first banking table, and the second shoe of the next (the same table
    when there is one), get a card too many (extra_card), and the round it came out in is
    logged in a phantom shoe id one character off (shoe.not_started) or as the next round
    of the table's previous shoe (shoe.reopened), the shoe's remaining raised by its cards
    (remaining_raised, shoe.composition). The ground truth has the extra_card line, the lie's
    (table, the shoe id named, the round) and remaining_raised's. A night of two hours or more
    reaches a second shoe; a lie with nothing to hide is a not_planted line. Off by default,
    like the dealer pattern.

    With `lying`, the logs lie (issue 28, auditor.simulate.lies): one table each, a round's
    deviation made up after the round ended or after the table closed, a change stamped later
    than the round after it, a card and the pit's notices delivered after the night was
    audited (the result's `later` files, `*.jsonl.later`: ingest and audit the folder, then
    them); the ground truth holds both the finding that names each lie and the deviation it
    tried to hide, with its `severity`. Off by default.

    With `unnotified_change`, the first NJ pit's half-time change (another than the one the
    lies are built on) is made with no written notice at all (layout.unnotify): a
    procedure.notice_missing line, kind notice_missing, per table that makes it, which a
    notice entered by hand answers (`bacc-audit notice add`, the board). Without such a
    change, or with no table reaching it, a not_planted line says so. Off by default.

    `out_dir` must be new or empty (see `prepare_out_dir`; `replace` clears a previous
    simulation's files first)."""
    return simulate_night(Path(out_dir), NightSettings(
        tables, hours, seed, deviation_rate, tuple(games), day,
        error_prone_dealer, counting_seat, shoe_twice, unshuffled, phantom_shoe,
        shoe_reopened, lying, unnotified_change,
    ), replace)


def simulate_night(out: Path, settings: NightSettings, replace: bool = False) -> SimulationResult:
    """`simulate` once its arguments are gathered: the night laid out, the folder made
    ready, every table played and written, then the files resent and the ground truth."""
    check_settings(settings)
    prepare_out_dir(out, replace)  # after the arguments are known good: nothing removed else
    result = play_night(out, settings)
    write_ground_truth(out, result.deviations + result.not_planted)
    return result


def check_settings(settings: NightSettings) -> None:
    """ValueError, saying why, for settings no night can be laid out by."""
    if not 0 <= settings.deviation_rate <= 1:
        raise ValueError("deviation_rate must be between 0 and 1")
    simulated_night(settings.tables, settings.hours, settings.seed, settings.games,
                    settings.deviation_rate, settings.day)


def play_night(out: Path, settings: NightSettings) -> SimulationResult:
    """Every table of the night played and written into `out` (each stream from seq 1), the
    files resent and the later ones; the result's deviations are the night's ground truth,
    not yet written (its `ground_truth` is where it goes)."""
    started = time.perf_counter()
    key = settings.key
    night = simulated_night(settings.tables, settings.hours, key,
                            settings.games, settings.deviation_rate, settings.day)
    carry_procedures(night, dict(settings.opening))
    plan = lies.plan(night) if settings.lying else None
    unnotified = (unnotify(night, plan.change if plan else None)
                  if settings.unnotified_change else None)
    cast = _Cast(night, settings, plan)
    written, _ = write_night(night, out, key, cast.make)
    files = _files(night, written, cast.players, out)
    later: list[Path] = []
    if plan is not None:
        made = any(plan.change in p.applied for p in cast.players)
        extra, later = plan.files(out, night, made)
        files += extra
    events = sum(len(f.read_text().splitlines()) for f in files)
    deviations, gaps = _ground_truth(night, cast)
    if settings.unnotified_change and not any(unnotified in p.applied for p in cast.players):
        gaps.append(power.not_planted("notice_missing", power.NO_PLACE["notice_missing"]
                                      if unnotified is None else
                                      f"pit {unnotified.pit}: no table reached its change at "
                                      f"{unnotified.effective}"))
    if plan is not None:
        deviations += plan.truth(deviations)
    return SimulationResult(
        files, out / "ground_truth.ndjson", len(night.tables),
        sum(p.rounds for p in cast.players), events, deviations, time.perf_counter() - started,
        later, gaps,
    )


@dataclass(frozen=True)
class NightSettings:
    """A planted night as `simulate` takes it: its size, seed, rate, games and day, and the
    patterns asked for beyond the round, shoe, table and log deviations."""

    tables: int
    hours: float
    seed: int = 1
    deviation_rate: float = 0.0
    games: tuple[str, ...] = DEFAULT_GAMES
    day: dt.date = SIM_DATE
    error_prone_dealer: bool = False
    counting_seat: bool = False
    shoe_twice: bool = False
    unshuffled: bool = False
    phantom_shoe: bool = False
    shoe_reopened: bool = False
    lying: bool = False
    unnotified_change: bool = False
    # A day after the first of a simulated history (auditor.simulate.history): its cards,
    # deviations and notices drawn anew from the seed and this salt (the day), the tables'
    # dealers kept from the first day's draw, so that a dealer's record spans the days.
    salt: str = ""
    opening: tuple[tuple[str, int], ...] = ()  # (table, procedure in force the day before)

    @property
    def key(self) -> int | str:
        """What the night's random draws are seeded by: the seed, and the salt if any."""
        return f"{self.seed}/{self.salt}" if self.salt else self.seed


class _Cast:
    """The night's players: a SimTableNight per table, with the patterns the settings ask for
    placed at their tables (the error-prone dealer, the counting seat, the planted shoe
    orders, which share one library of the night's shoes)."""

    def __init__(self, night: Night, settings: NightSettings,
                 plan: lies.Plan | None = None) -> None:
        self.settings = settings
        self.plan = plan
        self.players: list[SimTableNight] = []
        banking = [s.table for s in night.tables if s.game in ("mini_baccarat", "punto_banco")]
        self.bad_table = banking[0] if settings.error_prone_dealer and banking else None
        self.counter_table = next(
            (s.table for s in night.tables if "dragon7" in s.side_bets
             and s.game != "chemin_de_fer"), None) if settings.counting_seat else None
        self.order_at = order_plan(night, settings.shoe_twice, settings.unshuffled)
        self.shoe_lies = shoe_lies.plan(night, settings.phantom_shoe, settings.shoe_reopened)
        self.library: dict[str, tuple[list[str], int]] = {}  # every table's shoes, shared
        self.shift_label, self.shift_end = "", None  # type: tuple[str, dt.datetime | None]
        if self.bad_table is not None or self.counter_table is not None:
            zone = dt.timezone(night.utc_offset)
            self.shift_end = PropertyConfig().shift_window(night.date, PLANTED_SHIFT, zone)[1]
            self.shift_label = f"{night.date:%Y-%m-%d}/{PLANTED_SHIFT}"

    def make(self, night: Night, spec: TableSpec, rng: random.Random, i: int) -> TableNight:
        """write_night's maker of table `i`'s player."""
        seed = self.settings.seed
        key = self.settings.key
        dev_rng = random.Random(f"{key}:{i}:{spec.table}:deviations")
        ends_rng = random.Random(f"{key}:{i}:{spec.table}:ends")
        player = SimTableNight(night, spec, rng, dev_rng, self.settings.deviation_rate, ends_rng)
        if self.settings.salt:  # the table's dealers as the first day drew them
            roster = random.Random(f"{seed}:{i}:{spec.table}")
            player.dealers = [f"D{roster.randint(1000, 9999)}" for _ in player.dealers]
        if spec.table == self.bad_table:
            player.bad_dealer, player.bad_until = player.dealers[0], self.shift_end
        if spec.table == self.counter_table:
            player.counter_seat, player.counter_until = COUNTING_SEAT, self.shift_end
        player.library = self.library
        player.shoe_lies = self.shoe_lies.get(spec.table, [])
        if self.plan is not None and spec.table in self.plan.tables:
            player.lies = self.plan.tables[spec.table]
            player.pending[:0] = player.lies.deviations(spec.opens)
        for (table, shoe_no), (kind, source) in self.order_at.items():
            if table == spec.table:
                player.order_kinds[shoe_no] = kind
                player.twice_of = source or player.twice_of
        self.players.append(player)
        return player


def _files(night: Night, written: dict[str, Path], players: list[SimTableNight],
           out: Path) -> list[Path]:
    """The logs in the result's order: one per table, the pits' notices, then the files
    resent (written here, each after its table's file in name order)."""
    files = [written[s.table] for s in night.tables] + ([written["pits"]] if "pits" in written
                                                        else [])
    for p in players:
        if p.resent:
            path = out / f"{night.date:%Y-%m-%d}_{p.spec.table}.resent.jsonl"
            path.write_text("\n".join(p.resent) + "\n")
            files.append(path)
    return files


def _ground_truth(night: Night, cast: _Cast) -> tuple[list[dict], list[dict]]:
    """Every planted deviation, keyed as its finding is: the tables' own, the pits' changes,
    then the dealer and counting-seat patterns where the audit's own tests detect them at the
    night's size; and a not_planted line for each pattern asked for that was not planted or
    is below detection (auditor.simulate.power)."""
    players, settings = cast.players, cast.settings
    deviations = [d for p in players for d in p.planted] + _notice_truth(night, players)
    patterns: list[dict] = []
    if settings.error_prone_dealer and cast.bad_table is None:
        patterns.append(power.not_planted("error_prone_dealer",
                                          power.NO_PLACE["error_prone_dealer"]))
    counts = power.shift_counts(night.date, dt.timezone(night.utc_offset),
                                [r for p in players for r in p.dealt], deviations)
    patterns += [power.dealer_line(p.bad_dealer, cast.shift_label, counts)
                 for p in players if p.bad_dealer is not None]
    if settings.counting_seat and cast.counter_table is None:
        patterns.append(power.not_planted("counting_seat", power.NO_PLACE["counting_seat"]))
    patterns += [power.counting_line(p.spec.table, p.counter_seat, cast.shift_label,
                                     p.counter_series)
                 for p in players if p.counter_seat is not None]
    asked = [k for k, on in (("shoe_twice", settings.shoe_twice),
                             ("weak_shuffle", settings.unshuffled),
                             ("pack_run", settings.unshuffled),
                             ("phantom_shoe", settings.phantom_shoe),
                             ("earlier_shoe", settings.shoe_reopened)) if on]
    placed = [(t, kind, n) for (t, n), (kind, _) in cast.order_at.items()]
    placed += [(t, lie.kind, lie.shoe_no) for t, ls in cast.shoe_lies.items() for lie in ls]
    gaps = power.placement_gaps(asked, placed, {(d["table"], d["kind"]) for d in deviations})
    deviations += [d for d in patterns if "code" in d]
    return deviations, [d for d in patterns if "code" not in d] + gaps


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


