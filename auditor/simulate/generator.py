"""Event logs from really shuffled and dealt rounds, settled by code of its own (not the replay
engine's), so the generator and the audit are two independent witnesses of the rules."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from auditor.rules.draw import is_natural, player_draws
from auditor.rules.pack import load_pack
from auditor.simulate.deal import (
    Outcome,
    amount,
    deal,
    deal_chemin,
    hand_count,
    is_panda8,
    money,
    panda8_due,
    qualifies,
    shuffled_shoe,
    times,
    value,
    with_card_kept_aside,
)

STAKES = (25, 25, 50, 50, 100, 100, 100, 200, 250, 500, 1000)


@dataclass
class TableSpec:
    table: str
    pit: str
    game: str  # mini_baccarat, punto_banco, chemin_de_fer
    jurisdiction: str
    variant: str
    seats: int
    procedure: int | None
    side_bets: tuple[str, ...] = ()
    decks: int = 8
    shuffle: str = "manual"
    batches: tuple[str, ...] = ("red",)
    opens: str = "22:00"  # local time
    closes: str = "06:00"
    seconds_per_round: tuple[int, int] = (40, 75)
    gzip: bool = False


@dataclass
class Deviation:
    """A deviation to plant at the first qualifying round at or after `after` (local)."""

    table: str
    kind: str
    after: str
    code: str  # the finding code the audit must raise
    note: str
    planted: str = ""  # filled in: where it went


@dataclass
class NoticeChange:
    """A procedure change in a pit, with its written notices `lead_minutes` before."""

    pit: str
    tables: tuple[str, ...]
    procedure: int
    effective: str  # local time
    lead_minutes: int
    recipients: tuple[str, ...] = ("division", "surveillance")
    kind: str = ""  # simulate: the planted deviation this change carries, if any


@dataclass
class Night:
    date: dt.date  # the local date on which the night starts
    utc_offset: dt.timedelta
    tables: list[TableSpec]
    deviations: list[Deviation] = field(default_factory=list)
    changes: list[NoticeChange] = field(default_factory=list)
    truncated_line: str | None = None  # table whose log holds a half-written line
    seq_jump: tuple[str, int] | None = None  # (table, how many seq numbers are skipped)


class Stream:
    """One table's (or pit's) events in seq order, with their times."""

    def __init__(self, key: dict, offset: dt.timedelta, first_seq: int = 1) -> None:
        self.key = key
        self.tz = dt.timezone(offset)
        self.seq = first_seq - 1
        self.lines: list[str] = []
        self.last: dt.datetime | None = None  # the time of the last event written

    def emit(self, when: dt.datetime, event_type: str, **fields: object) -> dict:
        self.seq += 1
        self.last = when
        ts = when.astimezone(self.tz).isoformat(timespec="milliseconds")
        event = {"v": 1, "ts": ts, "type": event_type, **self.key, "seq": self.seq}
        event.update({k: v for k, v in fields.items() if v is not None})
        self.lines.append(json.dumps(event, separators=(",", ":")))
        return event


@dataclass
class ShoePlan:
    """How a shoe is made up and dealt: the regular way unless simulate plants a shoe-level
    deviation (fewer decks, a batch repeated, a wrong burn, the cutting card elsewhere, rounds
    dealt past it)."""

    decks: int
    batch: str
    burn_delta: int = 0  # cards burned beyond (or short of) what the exposed card calls for
    cut_left: int | None = None  # cards behind the cutting card; None: the house's 14-16
    rounds_after_cut: int = 1  # finish the round, then one more (the packs' house option)
    cards: list[str] | None = None  # the shoe's order when simulate plants one (not shuffled)


class TableNight:
    """Plays one table through the night."""

    def __init__(self, night: Night, spec: TableSpec, rng: random.Random) -> None:
        self.night, self.spec, self.rng = night, spec, rng
        self.pack = load_pack(spec.jurisdiction, spec.game)
        self.variant = self.pack.variant(spec.variant)
        self.out = Stream({"table": spec.table}, night.utc_offset)
        self.procedure = spec.procedure
        self.pending = [d for d in night.deviations if d.table == spec.table]
        self.dealers = [f"D{rng.randint(1000, 9999)}" for _ in range(4)]
        self.batch_index = 0
        self.bank_seat = 1
        self.bank = Decimal(1000)
        self.suivi_seat: int | None = None  # who equalled and lost the Banker's last wager
        self.chemin_rnd = 0  # the chemin de fer round being played, within its shoe
        # No counted chemin de fer round yet (ties do not count), or the last one's cards were
        # not judged: the audit cannot tell who is entitled to banco suivi.
        self.unjudged = True
        self.applied: list[NoticeChange] = []  # the procedure changes this table made
        self.round_is_last = False  # the round being played is the shoe's last
        self.cut_round: int | None = None  # the round of this shoe the cutting card came in
        self.face_up: tuple[str, list[str]] | None = None  # found face up before the cards
        self.other_order = False  # dealers pay in another procedure's order than declared

    def local(self, hhmm: str, next_day: bool = False) -> dt.datetime:
        h, m = map(int, hhmm.split(":"))
        day = self.night.date + dt.timedelta(days=1 if next_day else 0)
        return dt.datetime(
            day.year, day.month, day.day, h, m, tzinfo=dt.timezone(self.night.utc_offset)
        )

    def at(self, hhmm: str) -> dt.datetime:
        """Local hh:mm within the night (times before noon are the next morning)."""
        return self.local(hhmm, next_day=int(hhmm.split(":")[0]) < 12)

    def dealer(self, when: dt.datetime) -> str:
        return self.dealers[int((when - self.at(self.spec.opens)).total_seconds() // 3600) % 4]

    def run(self) -> list[str]:
        s = self.spec
        t = self.at(s.opens)
        end = self.at(s.closes)
        changes = [c for c in self.night.changes if s.table in c.tables]
        self.out.emit(
            t,
            "table_open",
            pit=s.pit,
            game=s.game,
            jurisdiction=s.jurisdiction,
            variant=s.variant,
            procedure=s.procedure,
            seats=s.seats,
            side_bets=list(s.side_bets),
            dealer=self.dealer(t),
            origin="tms",
        )
        shoe_no = 0
        while t < end:
            shoe_no += 1
            t = self.play_shoe(f"{s.table}-{self.night.date:%m%d}-{shoe_no:02d}", t, end, changes)
        self.out.emit(t, "table_close", dealer=self.dealer(t), origin="tms")
        return self.out.lines

    def apply_changes(
        self, t: dt.datetime, changes: list[NoticeChange], on_time: bool = False
    ) -> None:
        """A change takes effect between rounds: logged just before the first round played
        under it, after the last event of the round before (`on_time`: at its effective time,
        or at the last event if that came later)."""
        for c in changes:
            if t >= self.at(c.effective) and self.procedure != c.procedure:
                self.procedure = c.procedure
                self.applied.append(c)
                at = t - dt.timedelta(seconds=1)
                if on_time:
                    at = max(self.at(c.effective), self.out.last or at)
                self.out.emit(
                    at,
                    "procedure_change",
                    procedure=c.procedure,
                    dealer=self.dealer(at),
                    origin="pit",
                )

    def between_shoes(self, t: dt.datetime, changes: list[NoticeChange]) -> None:
        """A hook for simulate, before each shoe starts at `t` (nothing here)."""

    def plan_shoe(self, shoe_id: str) -> ShoePlan:
        """The regular shoe: the table's decks, its batches in turn."""
        s = self.spec
        batch = s.batches[self.batch_index % len(s.batches)]
        self.batch_index += 1
        return ShoePlan(s.decks, batch)

    def tamper(self, shoe_id: str, cards: list[str], pos: int) -> None:
        """A hook for simulate to change the shoe's cards after the burn (none here)."""

    def shoe_done(self, shoe_id: str, cards: list[str], pos: int, rnd: int) -> None:
        """A hook for simulate, called as the shoe ends (`pos` cards out, `rnd` rounds)."""

    def play_shoe(
        self, shoe_id: str, t: dt.datetime, end: dt.datetime, changes: list[NoticeChange]
    ) -> dt.datetime:
        s, rng = self.spec, self.rng
        self.between_shoes(t, changes)
        plan = self.plan_shoe(shoe_id)
        cards = shuffled_shoe(rng, plan.decks)  # drawn even when planted: the rest stays as it was
        if plan.cards is not None:
            cards = list(plan.cards)
        self.out.emit(
            t,
            "shoe_start",
            shoe=shoe_id,
            decks=plan.decks,
            shuffle=s.shuffle,
            batch=plan.batch,
            dealer=self.dealer(t),
            origin="shoe",
        )
        t += dt.timedelta(seconds=rng.randint(20, 40))
        exposed = value(cards[0])
        burn_n = 1 + (exposed if exposed else 10) + plan.burn_delta
        self.out.emit(
            t, "burn", shoe=shoe_id, cards=cards[:burn_n], dealer=self.dealer(t), origin="shoe"
        )
        pos = burn_n
        self.tamper(shoe_id, cards, pos)
        cut_at = len(cards) - rng.randint(14, 16)
        if plan.cut_left is not None:
            cut_at = len(cards) - plan.cut_left
        cut_seen = False
        self.cut_round = None
        rnd = 0
        after_cut = 0  # rounds played after the one the cutting card came out in
        while t < end:
            # A round starts on the table's pace, but never before the last one is over: a
            # stream's time never runs backwards (log.time_reversed).
            t = max(t + dt.timedelta(seconds=rng.randint(*s.seconds_per_round)),
                    self.after_last())
            self.apply_changes(t, changes)
            rnd += 1
            self.round_is_last = t >= end or (cut_seen and after_cut + 1 >= plan.rounds_after_cut)
            used = self.play_round(shoe_id, rnd, cards, pos, t)
            if used is None:
                rnd -= 1
                break
            pos += used
            if not cut_seen and pos >= cut_at:
                cut_seen = True
                self.cut_round = rnd
                self.out.emit(max(t, self.out.last or t), "cut_card", shoe=shoe_id, round=rnd,
                              origin="shoe")
            elif cut_seen:
                after_cut += 1
            if cut_seen and after_cut >= plan.rounds_after_cut:
                break
        self.shoe_done(shoe_id, cards, pos, rnd)
        t = _whole_second(max(t, self.out.last or t)) + dt.timedelta(seconds=30)
        self.out.emit(t, "shoe_end", shoe=shoe_id, remaining=len(cards) - pos, origin="shoe")
        return t + dt.timedelta(seconds=rng.randint(120, 300))

    def after_last(self) -> dt.datetime:
        """The earliest a new round may start: the whole second two seconds or more after the
        stream's last event (a procedure change between rounds is logged one second before
        the round)."""
        assert self.out.last is not None
        return _whole_second(self.out.last + dt.timedelta(seconds=2))

    def take_deviation(self, o: Outcome, t: dt.datetime) -> Deviation | None:
        for d in self.pending:
            if t >= self.at(d.after) and qualifies(self.pack, d.kind, o):
                self.pending.remove(d)
                return d
        return None

    def play_round(
        self, shoe_id: str, rnd: int, cards: list[str], pos: int, t: dt.datetime
    ) -> int | None:
        if self.spec.game == "chemin_de_fer":
            return self.chemin_play(shoe_id, rnd, cards, pos, t)
        o = deal(self.pack, cards, pos)
        if o is None:
            return None
        dev = self.take_deviation(o, t)
        kind = dev.kind if dev else ""
        if kind in ("banker_missed", "player_extra", "player_missed", "banker_extra"):
            o = deal(self.pack, cards, pos, kind)
            assert o is not None
        if kind == "irregular_disposition":  # a card to the Player in error, kept aside
            o = with_card_kept_aside(o, cards, pos)
        if dev:
            dev.planted = f"{self.spec.table} shoe {shoe_id} round {rnd}"
        self.banking_round(shoe_id, rnd, o, t, kind)
        return o.out_of_shoe

    # --- punto banco / mini-baccarat ---------------------------------------------------------

    def wagers(self, kind: str) -> list[tuple[int, str, Decimal]]:
        rng, s = self.rng, self.spec
        n = rng.randint(1, min(5, s.seats))
        seats = sorted(rng.sample(range(1, s.seats + 1), n))
        out = []
        for seat in seats:
            bet = rng.choices(("banker", "player", "tie"), (50, 42, 8))[0]
            out.append((seat, bet, Decimal(rng.choice(STAKES))))
            for side in s.side_bets:
                if side != "tie" and rng.random() < 0.12:
                    out.append((seat, side, Decimal(rng.choice((5, 10, 25)))))
        if kind in ("pay_short", "collect_after_pay"):
            # Two Player winners and a loser make the order observable.
            out = [
                (7 if s.seats >= 7 else s.seats, "player", Decimal(100)),
                (4, "player", Decimal(50)),
                (2, "banker", Decimal(100)),
            ]
        if kind in ("vig_short", "vig_not_allowed", "vig_missing"):
            out = [(5, "banker", Decimal(100)), (3, "player", Decimal(50))]
        if kind == "unsettled":  # the losing Tie wager is the one left unsettled
            out = [(6, "banker", Decimal(100)), (2, "tie", Decimal(50))]
        if kind == "procedure_order":  # two Banker winners: pay and vigorish orders differ
            out = [
                (7, "banker", Decimal(100)),
                (4, "banker", Decimal(50)),
                (2, "player", Decimal(100)),
            ]
        if kind == "push_collected":
            out = [(6, "banker", Decimal(200)), (1, "tie", Decimal(25))]
        if kind == "total_cards_missing":
            out.append((1, "total_cards_5", Decimal(10)))
        return out

    def settle(self, bet: str, stake: Decimal, o: Outcome) -> tuple[str, Decimal]:
        """('pay'|'collect'|'push', amount) for one wager, by the variant and paytables."""
        v = self.variant
        if bet in ("player", "banker"):
            if o.winner == "tie":
                return "push", stake
            if o.winner != bet:
                return "collect", stake
            if bet == "banker":
                for ex in v.banker_exceptions:
                    if ex.applies(o.banker_count, len(o.banker)):
                        return (
                            ("push", stake) if ex.pays is None else ("pay", times(stake, ex.pays))
                        )
            return "pay", times(stake, v.pays(bet))
        if bet == "tie":
            return (
                ("pay", times(stake, v.pays("tie"))) if o.winner == "tie" else ("collect", stake)
            )
        pays = self.pack.side_bets[bet].pays.value
        won = {
            "dragon7": o.winner == "banker" and len(o.banker) == 3 and o.banker_count == 7,
            "panda8": o.winner == "player" and len(o.player) == 3 and o.player_count == 8,
        }.get(bet, bet.startswith("total_cards_") and int(bet[-1]) == o.cards)
        return ("pay", times(stake, pays)) if won else ("collect", stake)

    def banking_round(self, shoe_id: str, rnd: int, o: Outcome, t: dt.datetime, kind: str) -> None:
        rng, s = self.rng, self.spec
        d = self.dealer(t)

        def emit(dt_s: float, event_type: str, **f: object) -> None:
            nonlocal t
            t += dt.timedelta(seconds=dt_s)
            origin = "shoe" if event_type == "card" else "tms"
            self.out.emit(t, event_type, shoe=shoe_id, round=rnd, dealer=d, origin=origin, **f)

        emit(0, "round_start")
        wagers = self.wagers(kind)
        for seat, bet, amt in wagers:
            emit(rng.uniform(0.5, 3), "wager", seat=seat, bet=bet, amount=amount(amt))
        emit(2, "no_more_bets")
        if self.face_up is not None:  # simulate: found face up, burned with its value
            card, burned = self.face_up
            self.face_up = None
            emit(1, "face_up_in_shoe", card=card, burned=burned)
        pi = bi = 0
        order = o.order
        if kind == "deal_order":  # the first two cards both to the Player
            order = ["player", "player", "banker", "banker", *order[4:]]
        for i, hand in enumerate(order):
            if i == 4 and o.kept_aside is not None:  # kept for the next round, wrongly
                emit(1.2, "card", to="player", card=o.kept_aside)
                emit(1, "irregularity", kind="player_extra_card", card=o.kept_aside,
                     disposition="next_round_first_card")
            card = o.player[pi] if hand == "player" else o.banker[bi]
            pi, bi = (pi + 1, bi) if hand == "player" else (pi, bi + 1)
            emit(1.2, "card", to=hand, card=card)
        winner = o.winner
        if kind == "wrong_winner":
            winner = "player"
        emit(
            2,
            "announce",
            kind="result",
            player=o.player_count,
            banker=o.banker_count,
            winner=winner,
        )
        if o.winner == "tie" and kind != "tie_missing":
            emit(0.5, "announce", kind="tie_hand")
        dragon = o.winner == "banker" and len(o.banker) == 3 and o.banker_count == 7
        if dragon and s.variant == "no_vig_dragon7" and kind != "dragon_missing":
            emit(0.5, "announce", kind="dragon_7")
        if panda8_due(self.pack, s.variant) and is_panda8(o) and kind != "panda8_missing":
            emit(0.5, "announce", kind="panda_8")
        if any(b.startswith("total_cards") for b in s.side_bets) and kind != "total_cards_missing":
            count = o.cards
            if kind == "total_cards_wrong":
                count += 1 if count < 6 else -1
            emit(0.5, "announce", kind="total_cards", count=count)
        # Settle: losers first, then winners by the procedure, pushes last.
        results = [(seat, bet, amt, *self.settle(bet, amt, o)) for seat, bet, amt in wagers]
        losers = [(seat, bet, amt) for seat, bet, _, how, amt in results if how == "collect"]
        pushes = [(seat, bet, amt) for seat, bet, _, how, amt in results if how == "push"]
        pays: dict[int, list[tuple[str, Decimal]]] = {}
        vigs: dict[int, Decimal] = {}
        short = kind == "pay_short"
        for seat, bet, stake, how, amt in results:
            if how != "pay":
                continue
            if short:  # the first payment is 10 short
                amt -= Decimal(10)
                short = False
            pays.setdefault(seat, []).append((bet, amt))
            if bet == "banker" and self.variant.vigorish_rate:
                rate = self.variant.vigorish_rate
                vigs[seat] = vigs.get(seat, Decimal(0)) + times(stake, rate)
        if kind == "vig_short":
            seat = max(vigs)
            vigs[seat] -= Decimal(1)
        if kind == "vig_missing":
            vigs.clear()
        if kind == "vig_not_allowed":
            for seat, bet, stake, how, _ in results:
                if bet == "banker" and how == "pay":
                    vigs[seat] = money(stake * Decimal("0.05"))
        if kind == "push_collected":  # the returned Banker wager is taken instead
            losers += [p for p in pushes if p[1] == "banker"]
            pushes = [p for p in pushes if p[1] != "banker"]
        if kind == "unsettled":
            losers = [x for x in losers if x[1] != "tie"]
        if kind != "collect_after_pay":
            for seat, bet, amt in sorted(losers, key=lambda x: -x[0]):
                emit(1.5, "collect", seat=seat, bet=bet, amount=amount(amt))
        procedure = self.procedure or 3
        if kind == "procedure_order" or self.other_order:
            procedure = {1: 3, 2: 4, 3: 1, 4: 2}[procedure]
        seats = sorted(set(pays) | set(vigs), reverse=True)

        def pay(seat: int) -> None:
            for bet, amt in pays.get(seat, []):
                emit(2, "pay", seat=seat, bet=bet, amount=amount(amt))

        def vig(seat: int) -> None:
            if seat in vigs:
                emit(
                    1.5,
                    "vig",
                    seat=seat,
                    amount=amount(vigs[seat]),
                    mode=rng.choice(("collect", "collect", "mark")),
                )

        if procedure == 1:
            for seat in seats:
                pay(seat)
            for seat in seats:
                vig(seat)
        elif procedure == 2:
            for seat in seats:
                vig(seat)
            for seat in seats:
                pay(seat)
        else:
            for seat in seats:
                (pay, vig)[procedure == 4](seat)
                (vig, pay)[procedure == 4](seat)
        if kind == "collect_after_pay":
            for seat, bet, amt in sorted(losers, key=lambda x: -x[0]):
                emit(1.5, "collect", seat=seat, bet=bet, amount=amount(amt))
        for seat, bet, amt in sorted(pushes, key=lambda x: -x[0]):
            emit(1, "push", seat=seat, bet=bet, amount=amount(amt))
        emit(3, "round_end")

    # --- chemin de fer -----------------------------------------------------------------------

    def chemin_play(
        self, shoe_id: str, rnd: int, cards: list[str], pos: int, t: dt.datetime
    ) -> int | None:
        """Deal a chemin de fer round by the pack's tableau (option cells decided at random),
        plant a pending chemin de fer deviation if the round qualifies, and log it."""
        choices = (self.rng.random() < 0.5, self.rng.random() < 0.5)
        o = deal_chemin(self.pack, cards, pos, *choices)
        if o is None:
            return None
        self.chemin_rnd = rnd
        dev = None
        for d in self.pending:
            if t >= self.at(d.after) and self.chemin_qualifies(d.kind, o):
                dev = d
                self.pending.remove(d)
                dev.planted = f"{self.spec.table} shoe {shoe_id} round {rnd}"
                break
        kind = dev.kind if dev else ""
        if kind == "option_not_allowed":  # the Player, who must draw, declares "stay"
            o = deal_chemin(self.pack, cards, pos, *choices, force_player=False)
            assert o is not None
        if kind == "option_flipped":  # the cards go against the Player's declared choice
            o.options = [(h, {"card": "stay", "stay": "card"}[c] if h == "player" else c)
                         for h, c in o.options]
        if kind == "bank_unlogged":  # the next seat puts up the bank; no bank_pass logged
            self.bank_seat = self.bank_seat % self.spec.seats + 1
            self.bank, self.suivi_seat = Decimal(1000), None
        self.chemin_round(shoe_id, rnd, o, t, kind)
        if kind == "unknown_irregularity":
            self.unjudged = True
        elif o.winner != "tie":
            self.unjudged = False
        return o.cards

    def chemin_qualifies(self, kind: str, o: Outcome) -> bool:
        """Whether a round lets a chemin de fer deviation show cleanly (and nothing else)."""
        p2, b2 = hand_count(o.player[:2]), hand_count(o.banker[:2])
        natural = is_natural(self.pack, p2) or is_natural(self.pack, b2)
        if kind == "option_not_allowed":
            return not natural and player_draws(self.pack, p2)
        if kind == "commission_short":
            return o.winner == "banker"
        if kind == "suivi_not_entitled":  # nobody is entitled, and the audit can tell
            return self.suivi_seat is None and not self.unjudged
        if kind == "option_flipped":
            return any(hand == "player" for hand, _ in o.options)
        if kind == "bank_unlogged":  # a previous round of the shoe says who holds the bank
            return self.chemin_rnd > 1
        return kind in ("partial_order", "over_bank", "late_wager", "unknown_irregularity",
                        "disposition_wrong_h")

    def chemin_wagers(self, kind: str) -> list[tuple[int, str, Decimal]]:
        """Wagers against the bank in the order of 13:69F-4.7(b)-(d): a banco suivi by the
        entitled participant, else a banco seul, else partial wagers counterclockwise from the
        Banker's right until the bank is covered; or the planted deviation's wagers."""
        rng, s, bank = self.rng, self.spec, self.bank
        others = [(self.bank_seat + k - 1) % s.seats + 1 for k in range(1, s.seats)]
        if kind == "over_bank":  # two partial wagers together 200 over the bank
            half = money(bank / 2)
            return [(others[0], "partial", half), (others[1], "partial", bank - half + 200)]
        if kind == "suivi_not_entitled":
            return [(others[rng.randrange(len(others))], "suivi", bank)]
        against: list[tuple[int, str, Decimal]] = []
        partial_only = kind in ("partial_order", "late_wager")
        if self.suivi_seat and not partial_only and rng.random() < 0.5:
            against.append((self.suivi_seat, "suivi", bank))
        elif not partial_only and rng.random() < 0.2:
            against.append((others[rng.randrange(len(others))], "seul", bank))
        else:
            left = bank
            for seat in others:
                if left <= 0 or rng.random() < 0.4:
                    continue
                amt = min(left, Decimal(rng.choice((50, 100, 200, 300))))
                against.append((seat, "partial", amt))
                left -= amt
            if len(against) < (2 if kind == "partial_order" else 1):  # the bank is >= 1000
                against = [(seat, "partial", Decimal(100)) for seat in others[:2]]
            if kind == "partial_order":  # the dealer takes the second seat's wager first
                against[0], against[1] = against[1], against[0]
        return against

    def chemin_round(
        self, shoe_id: str, rnd: int, o: Outcome, t: dt.datetime, kind: str = ""
    ) -> None:
        """A chemin de fer round: the bank, the wagers against it, the cards with the
        decisions declared at option cells, settlement, the commission on the Banker's
        winnings, and the bank passing counterclockwise when the Banker loses."""
        s = self.spec
        d = self.dealer(t)

        def emit(dt_s: float, event_type: str, **f: object) -> None:
            nonlocal t
            t += dt.timedelta(seconds=dt_s)
            self.out.emit(t, event_type, shoe=shoe_id, round=rnd, dealer=d, origin="tms", **f)

        emit(0, "round_start")
        emit(2, "bank", seat=self.bank_seat, amount=amount(self.bank))
        against = self.chemin_wagers(kind)
        late = against[-1:] if kind == "late_wager" else []
        for seat, how, amt in against[: len(against) - len(late)]:
            emit(2, "banco", seat=seat, kind=how, amount=amount(amt))
        emit(2, "no_more_bets")
        for seat, how, amt in late:  # accepted after "No more bets"
            emit(2, "banco", seat=seat, kind=how, amount=amount(amt))
        options = dict(o.options)
        pi = bi = 0
        for i, hand in enumerate(o.order):
            if i == 4 and "player" in options:
                emit(1, "option", hand="player", choice=options.pop("player"))
            if i >= 4 and hand == "banker" and "banker" in options:
                emit(1, "option", hand="banker", choice=options.pop("banker"))
            if hand == "player":
                emit(1.5, "card", to=hand, card=o.player[pi])
                pi += 1
            else:
                emit(1.5, "card", to=hand, card=o.banker[bi])
                bi += 1
        for hand in ("player", "banker"):  # decisions to stay, after the last card
            if hand in options:
                emit(1, "option", hand=hand, choice=options.pop(hand))
        if kind in CHEMIN_IRREGULARITIES:
            irr_kind, disposition = CHEMIN_IRREGULARITIES[kind]
            emit(1, "irregularity", kind=irr_kind, disposition=disposition)
        emit(
            2,
            "announce",
            kind="result",
            player=o.player_count,
            banker=o.banker_count,
            winner=o.winner,
        )
        if o.winner == "tie":
            emit(0.5, "announce", kind="tie_hand")
        won = Decimal(0)
        for seat, _, amt in against:
            if o.winner == "player":
                emit(1.5, "pay", seat=seat, bet="player", amount=amount(amt))
            elif o.winner == "banker":
                emit(1.5, "collect", seat=seat, bet="player", amount=amount(amt))
                won += amt
            else:
                emit(1, "push", seat=seat, bet="player", amount=amount(amt))
        commission = money(won * Decimal("0.05"))
        if kind == "commission_short":  # 4% taken instead of 5%
            commission = money(won * Decimal("0.04"))
        if won:
            emit(1.5, "commission", seat=self.bank_seat, amount=amount(commission))
        emit(2, "round_end")
        if o.winner == "player":
            nxt = self.bank_seat % s.seats + 1
            self.out.emit(
                t + dt.timedelta(seconds=2),
                "bank_pass",
                shoe=shoe_id,
                round=rnd,
                from_seat=self.bank_seat,
                to_seat=nxt,
                origin="tms",
            )
            self.bank_seat, self.bank, self.suivi_seat = nxt, Decimal(1000), None
        elif o.winner == "banker":
            full = [seat for seat, how, amt in against if amt == self.bank]
            self.suivi_seat = full[0] if full else None
            self.bank += won - commission
        # A stand off is not the Banker's preceding wager (4.7(b)): suivi_seat stays.


def _whole_second(t: dt.datetime) -> dt.datetime:
    """`t`, or the next whole second after it: rounds and shoes start on whole seconds."""
    return t + dt.timedelta(microseconds=-t.microsecond % 1_000_000)


# Planted chemin de fer irregularities: (kind, disposition), no card named. A kind the pack does
# not list (its cards are not judged), and a 4.12(h) procedure other than the pre-selected one
# (burn_value, the NJ pack's default), which leaves the cards as dealt.
CHEMIN_IRREGULARITIES = {
    "unknown_irregularity": ("shoe_dropped", "burned"),
    "disposition_wrong_h": ("card_drawn_disclosed", "burn_one_face_down"),
}


def notices(night: Night) -> list[str]:
    """Pit streams: the written notices of each planned procedure change."""
    streams: dict[str, Stream] = {}
    for c in night.changes:
        st = streams.setdefault(c.pit, Stream({"pit": c.pit}, night.utc_offset))
        tz = dt.timezone(night.utc_offset)
        h, m = map(int, c.effective.split(":"))
        day = night.date + dt.timedelta(days=1 if h < 12 else 0)
        eff = dt.datetime(day.year, day.month, day.day, h, m, tzinfo=tz)
        given = eff - dt.timedelta(minutes=c.lead_minutes)
        for who in c.recipients:
            st.emit(
                given,
                "procedure_notice",
                pit=c.pit,
                procedure=c.procedure,
                effective=eff.isoformat(),
                recipient=who,
                written=True,
                tables=list(c.tables),
                origin="pit",
            )
    return [line for st in streams.values() for line in st.lines]


def write_night(
    night: Night,
    out_dir: Path,
    seed: int | str,
    make_table: Callable[[Night, TableSpec, random.Random, int], TableNight] | None = None,
) -> tuple[dict[str, Path], list[str]]:
    """Write one file per table and one for the pits' notices.

    `make_table(night, spec, rng, index)` builds each table's player (default: TableNight).
    Returns table -> path, and a sentence per log-level deviation planted (file and line).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    notes: list[str] = []
    for i, spec in enumerate(night.tables):
        rng = random.Random(f"{seed}:{i}:{spec.table}")
        player = make_table(night, spec, rng, i) if make_table else TableNight(night, spec, rng)
        lines = player.run()
        name = f"{night.date:%Y-%m-%d}_{spec.table}.jsonl" + (".gz" if spec.gzip else "")
        if night.seq_jump and night.seq_jump[0] == spec.table:
            k = len(lines) // 2
            lines, before = _jump_seq(lines, night.seq_jump[1])
            notes.append(
                f"`{name}` line {k + 1}: seq jumps from {before} to "
                f"{before + 1 + night.seq_jump[1]} ({night.seq_jump[1]} events missing) → "
                "`log.seq_gap`"
            )
        if night.truncated_line == spec.table:
            k = len(lines) // 3
            lines.insert(k, lines[k][: len(lines[k]) // 2])
            notes.append(
                f"`{name}` line {k + 1}: a half-written line (the writer restarted and wrote "
                "the whole event again on the next line) → `log.malformed`, kept in quarantine"
            )
        path = out_dir / name
        data = ("\n".join(lines) + "\n").encode()
        if spec.gzip:
            # mtime=0 keeps the bytes (and the hash) the same run after run.
            with (
                path.open("wb") as fh,
                gzip.GzipFile(filename="", fileobj=fh, mode="wb", mtime=0) as gz,
            ):
                gz.write(data)
        else:
            path.write_bytes(data)
        written[spec.table] = path
    pit_lines = notices(night)
    if pit_lines:
        path = out_dir / f"{night.date:%Y-%m-%d}_pit-notices.jsonl"
        path.write_text("\n".join(pit_lines) + "\n")
        written["pits"] = path
    return written, notes


def _jump_seq(lines: list[str], skip: int) -> tuple[list[str], int]:
    """From the middle of the file on, seq numbers jump by `skip`; returns the lines and the
    last seq before the jump."""
    k = len(lines) // 2
    out = lines[:k]
    for line in lines[k:]:
        e = json.loads(line)
        e["seq"] += skip
        out.append(json.dumps(e, separators=(",", ":")))
    return out, json.loads(lines[k - 1])["seq"]
