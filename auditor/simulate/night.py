"""Generate event log v1 files for a night at a property: real shuffled shoes, wagers,
settlements by the rule pack, dealer rotations and procedure notices, with chosen deviations.

The sample night in `sample_logs/` is written by `write_sample_night`; every deviation it
plants is listed, with the finding code the audit must raise, in `sample_logs/README.md`.
The generator settles rounds with its own straightforward code (not the replay engine's),
so the two are independent witnesses of the rules.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from pathlib import Path

from auditor.replay.shoes import FACE_UP_RULE_JURISDICTIONS, ShoeRules, required_decks
from auditor.replay.tables import MIN_UNDECLARED_ROUNDS
from auditor.rules.cards import RANKS, SUITS, rank_value
from auditor.rules.draw import banker_draws, is_natural, player_draws
from auditor.rules.pack import RulePack, load_pack

CENT = Decimal("0.01")
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


def _shoe(rng: random.Random, decks: int) -> list[str]:
    cards = [r + s for r in RANKS for s in SUITS] * decks
    rng.shuffle(cards)
    return cards


def _value(card: str) -> int:
    return rank_value(card[0])


def _money(x: Decimal | Fraction | int) -> Decimal:
    if isinstance(x, Fraction):
        x = Decimal(x.numerator) / Decimal(x.denominator)
    return Decimal(x).quantize(CENT, rounding=ROUND_HALF_UP)


def _times(stake: Decimal, odds: Fraction) -> Decimal:
    return _money(Fraction(stake) * odds)


def _amount(x: Decimal) -> int | str:
    """Whole amounts as JSON numbers, cents as strings (both are valid v1)."""
    return int(x) if x == x.to_integral_value() else str(x)


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
class Outcome:
    player: list[str]
    banker: list[str]
    order: list[str]  # hand of each card in shoe order
    player_count: int
    banker_count: int
    winner: str
    options: list[tuple[str, str]] = field(default_factory=list)  # chemin de fer decisions

    @property
    def cards(self) -> int:
        return len(self.player) + len(self.banker)


def _count(cards: list[str]) -> int:
    return sum(_value(c) for c in cards) % 10


def deal(pack: RulePack, shoe: list[str], pos: int, deviation: str = "") -> Outcome | None:
    """The round the next cards make under the pack's tables, with an optional draw error."""
    if pos + 6 > len(shoe):
        return None
    p, b = [shoe[pos], shoe[pos + 2]], [shoe[pos + 1], shoe[pos + 3]]
    order = ["player", "banker", "player", "banker"]
    nxt = pos + 4
    pc, bc = _count(p), _count(b)
    if not (is_natural(pack, pc) or is_natural(pack, bc)):
        third: int | None = None
        p_draws = player_draws(pack, pc)
        if deviation in ("player_extra", "player_missed"):
            p_draws = not p_draws
        if p_draws:
            p.append(shoe[nxt])
            order.append("player")
            third = _value(shoe[nxt])
            nxt += 1
        b_draws = banker_draws(pack, bc, third)
        if deviation in ("banker_missed", "banker_extra"):
            b_draws = not b_draws
        if b_draws:
            b.append(shoe[nxt])
            order.append("banker")
    pc, bc = _count(p), _count(b)
    winner = "player" if pc > bc else "banker" if bc > pc else "tie"
    return Outcome(p, b, order, pc, bc, winner)


def _qualifies(pack: RulePack, kind: str, o: Outcome, spec: TableSpec) -> bool:
    """Whether a round's cards let the deviation show cleanly (and nothing else with it)."""
    pc2 = _count(o.player[:2])
    bc2 = _count(o.banker[:2])
    natural = is_natural(pack, pc2) or is_natural(pack, bc2)
    if kind == "banker_missed":
        return not natural and len(o.banker) == 3 and not player_draws(pack, pc2)
    if kind == "player_extra":
        return not natural and len(o.player) == 2 and bc2 == 7
    if kind == "player_missed":  # the Banker's decision is the same with the Player standing
        return (
            not natural
            and len(o.player) == 3
            and banker_draws(pack, bc2, None) == (len(o.banker) == 3)
        )
    if kind == "banker_extra":
        return not natural and len(o.banker) == 2
    if kind == "unsettled":  # the Tie wager loses and is left on the layout
        return o.winner != "tie"
    if kind in ("tie_missing", "push_collected"):
        return o.winner == "tie"
    if kind == "dragon_missing":
        return o.winner == "banker" and len(o.banker) == 3 and o.banker_count == 7
    if kind in ("vig_short", "vig_not_allowed", "vig_missing", "wrong_winner",
                "procedure_order"):
        return o.winner == "banker" and not (len(o.banker) == 3 and o.banker_count == 7)
    if kind in ("pay_short", "collect_after_pay", "total_cards_missing"):
        return o.winner == "player"
    if kind == "panda8_missing":
        return _is_panda8(o)
    if kind == "irregular_disposition":  # both stand on two cards: no third card authorised
        return not natural and len(o.player) == 2 and len(o.banker) == 2
    return True


def _is_panda8(o: Outcome) -> bool:
    return o.winner == "player" and len(o.player) == 3 and o.player_count == 8


def _panda8_due(pack: RulePack, variant: str) -> bool:
    """Whether the pack makes "panda 8" due at this variant (no shipped pack does; a house
    pack may)."""
    rule = pack.announcements.get("panda_8")
    return rule is not None and rule.value == "panda8_hand" and (
        rule.variants is None or variant in rule.variants
    )


def _with_player_card(o: Outcome, card: str) -> Outcome:
    """The round with one more card dealt to the Player (an irregularity left in the hand:
    the replay settles a round with an irregularity on the cards as dealt)."""
    player = [*o.player, card]
    pc = _count(player)
    winner = "player" if pc > o.banker_count else "banker" if o.banker_count > pc else "tie"
    return Outcome(player, o.banker, [*o.order, "player"], pc, o.banker_count, winner)


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
        cards = _shoe(rng, plan.decks)
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
        exposed = _value(cards[0])
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
            t += dt.timedelta(seconds=rng.randint(*s.seconds_per_round))
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
                self.out.emit(t, "cut_card", shoe=shoe_id, round=rnd, origin="shoe")
            elif cut_seen:
                after_cut += 1
            if cut_seen and after_cut >= plan.rounds_after_cut:
                break
        self.shoe_done(shoe_id, cards, pos, rnd)
        t += dt.timedelta(seconds=30)
        self.out.emit(t, "shoe_end", shoe=shoe_id, remaining=len(cards) - pos, origin="shoe")
        return t + dt.timedelta(seconds=rng.randint(120, 300))

    def take_deviation(self, o: Outcome, t: dt.datetime) -> Deviation | None:
        for d in self.pending:
            if t >= self.at(d.after) and _qualifies(self.pack, d.kind, o, self.spec):
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
        if kind == "irregular_disposition":  # a card to the Player in error, kept there
            o = _with_player_card(o, cards[pos + o.cards])
        if dev:
            dev.planted = f"{self.spec.table} shoe {shoe_id} round {rnd}"
        self.banking_round(shoe_id, rnd, o, t, kind)
        return o.cards

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
                            ("push", stake) if ex.pays is None else ("pay", _times(stake, ex.pays))
                        )
            return "pay", _times(stake, v.pays(bet))
        if bet == "tie":
            return (
                ("pay", _times(stake, v.pays("tie"))) if o.winner == "tie" else ("collect", stake)
            )
        pays = self.pack.side_bets[bet].pays.value
        won = {
            "dragon7": o.winner == "banker" and len(o.banker) == 3 and o.banker_count == 7,
            "panda8": o.winner == "player" and len(o.player) == 3 and o.player_count == 8,
        }.get(bet, bet.startswith("total_cards_") and int(bet[-1]) == o.cards)
        return ("pay", _times(stake, pays)) if won else ("collect", stake)

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
            emit(rng.uniform(0.5, 3), "wager", seat=seat, bet=bet, amount=_amount(amt))
        emit(2, "no_more_bets")
        if self.face_up is not None:  # simulate: found face up, burned with its value
            card, burned = self.face_up
            self.face_up = None
            emit(1, "face_up_in_shoe", card=card, burned=burned)
        pi = bi = 0
        order = o.order
        if kind == "deal_order":  # the first two cards both to the Player
            order = ["player", "player", "banker", "banker", *order[4:]]
        for hand in order:
            card = o.player[pi] if hand == "player" else o.banker[bi]
            pi, bi = (pi + 1, bi) if hand == "player" else (pi, bi + 1)
            emit(1.2, "card", to=hand, card=card)
        if kind == "irregular_disposition":  # resolved as if the Banker had to draw
            emit(1, "irregularity", kind="player_extra_card", card=o.player[2],
                 disposition="banker_third_card")
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
        if _panda8_due(self.pack, s.variant) and _is_panda8(o) and kind != "panda8_missing":
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
                vigs[seat] = vigs.get(seat, Decimal(0)) + _times(stake, rate)
        if kind == "vig_short":
            seat = max(vigs)
            vigs[seat] -= Decimal(1)
        if kind == "vig_missing":
            vigs.clear()
        if kind == "vig_not_allowed":
            for seat, bet, stake, how, _ in results:
                if bet == "banker" and how == "pay":
                    vigs[seat] = _money(stake * Decimal("0.05"))
        if kind == "push_collected":  # the returned Banker wager is taken instead
            losers += [p for p in pushes if p[1] == "banker"]
            pushes = [p for p in pushes if p[1] != "banker"]
        if kind == "unsettled":
            losers = [x for x in losers if x[1] != "tie"]
        if kind != "collect_after_pay":
            for seat, bet, amt in sorted(losers, key=lambda x: -x[0]):
                emit(1.5, "collect", seat=seat, bet=bet, amount=_amount(amt))
        procedure = self.procedure or 3
        if kind == "procedure_order" or self.other_order:
            procedure = {1: 3, 2: 4, 3: 1, 4: 2}[procedure]
        seats = sorted(set(pays) | set(vigs), reverse=True)

        def pay(seat: int) -> None:
            for bet, amt in pays.get(seat, []):
                emit(2, "pay", seat=seat, bet=bet, amount=_amount(amt))

        def vig(seat: int) -> None:
            if seat in vigs:
                emit(
                    1.5,
                    "vig",
                    seat=seat,
                    amount=_amount(vigs[seat]),
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
                emit(1.5, "collect", seat=seat, bet=bet, amount=_amount(amt))
        for seat, bet, amt in sorted(pushes, key=lambda x: -x[0]):
            emit(1, "push", seat=seat, bet=bet, amount=_amount(amt))
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
        p2, b2 = _count(o.player[:2]), _count(o.banker[:2])
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
            half = _money(bank / 2)
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
        emit(2, "bank", seat=self.bank_seat, amount=_amount(self.bank))
        against = self.chemin_wagers(kind)
        late = against[-1:] if kind == "late_wager" else []
        for seat, how, amt in against[: len(against) - len(late)]:
            emit(2, "banco", seat=seat, kind=how, amount=_amount(amt))
        emit(2, "no_more_bets")
        for seat, how, amt in late:  # accepted after "No more bets"
            emit(2, "banco", seat=seat, kind=how, amount=_amount(amt))
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
                emit(1.5, "pay", seat=seat, bet="player", amount=_amount(amt))
            elif o.winner == "banker":
                emit(1.5, "collect", seat=seat, bet="player", amount=_amount(amt))
                won += amt
            else:
                emit(1, "push", seat=seat, bet="player", amount=_amount(amt))
        commission = _money(won * Decimal("0.05"))
        if kind == "commission_short":  # 4% taken instead of 5%
            commission = _money(won * Decimal("0.04"))
        if won:
            emit(1.5, "commission", seat=self.bank_seat, amount=_amount(commission))
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


# Planted chemin de fer irregularities: (kind, disposition), no card named. A kind the pack does
# not list (its cards are not judged), and a 4.12(h) procedure other than the pre-selected one
# (burn_value, the NJ pack's default), which leaves the cards as dealt.
CHEMIN_IRREGULARITIES = {
    "unknown_irregularity": ("shoe_dropped", "burned"),
    "disposition_wrong_h": ("card_drawn_disclosed", "burn_one_face_down"),
}


def deal_chemin(
    pack: RulePack,
    shoe: list[str],
    pos: int,
    player_choice: bool,
    banker_choice: bool,
    force_player: bool | None = None,
) -> Outcome | None:
    """The round the next cards make under a chemin de fer pack's tableau: mandatory cells
    are followed, option cells decided by `player_choice` / `banker_choice` (True: card) and
    recorded in `options`; `force_player` overrides the Player's decision (a planted
    deviation), declared as if it were an option."""
    if pos + 6 > len(shoe):
        return None
    tables = pack.draw
    p, b = [shoe[pos], shoe[pos + 2]], [shoe[pos + 1], shoe[pos + 3]]
    order = ["player", "banker", "player", "banker"]
    options: list[tuple[str, str]] = []
    nxt = pos + 4
    pc, bc = _count(p), _count(b)
    if not (is_natural(pack, pc) or is_natural(pack, bc)):
        p_draws = player_draws(pack, pc)
        if tables.player_option and tables.player_option[pc]:
            p_draws = player_choice
            options.append(("player", "card" if p_draws else "stay"))
        if force_player is not None:
            p_draws = force_player
            options = [("player", "card" if p_draws else "stay")]
        third: int | None = None
        if p_draws:
            p.append(shoe[nxt])
            order.append("player")
            third = _value(shoe[nxt])
            nxt += 1
        cell = bc * 11 + (10 if third is None else third)
        b_draws = banker_draws(pack, bc, third)
        if tables.banker_option and tables.banker_option[cell]:
            b_draws = banker_choice
            options.append(("banker", "card" if b_draws else "stay"))
        if b_draws:
            b.append(shoe[nxt])
            order.append("banker")
    pc, bc = _count(p), _count(b)
    winner = "player" if pc > bc else "banker" if bc > pc else "tie"
    return Outcome(p, b, order, pc, bc, winner, options)


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
    seed: int,
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


def sample_night() -> Night:
    """The sample property's night of 28 November 2026 (US Eastern, UTC-05:00)."""
    nj_mini = dict(game="mini_baccarat", jurisdiction="NJ", seats=7)
    tables = [
        TableSpec("MB-01", "P1", variant="standard", procedure=1, **nj_mini),
        TableSpec(
            "MB-02", "P1", variant="standard", procedure=1, side_bets=("tie",), gzip=True, **nj_mini
        ),
        TableSpec(
            "PB-01",
            "P1",
            "punto_banco",
            "NJ",
            "standard",
            12,
            1,
            ("tie",),
            seconds_per_round=(55, 90),
            gzip=True,
        ),
        TableSpec(
            "MB-03",
            "P2",
            variant="no_vig_dragon7",
            procedure=3,
            side_bets=("tie", "dragon7", "panda8"),
            gzip=True,
            **nj_mini,
        ),
        TableSpec(
            "MB-04",
            "P2",
            variant="standard",
            procedure=3,
            side_bets=("tie", "total_cards_4", "total_cards_5", "total_cards_6"),
            opens="20:00",
            closes="02:00",
            gzip=True,
            **nj_mini,
        ),
        TableSpec(
            "MB-05",
            "P2",
            variant="standard",
            procedure=3,
            side_bets=("tie",),
            decks=6,
            shuffle="automated",
            batches=("red", "blue"),
            gzip=True,
            **nj_mini,
        ),
        TableSpec(
            "CF-01",
            "P3",
            "chemin_de_fer",
            "NJ",
            "standard",
            9,
            None,
            (),
            decks=6,
            opens="23:00",
            closes="04:00",
            seconds_per_round=(70, 110),
        ),
        TableSpec(
            "NZ-01",
            "P3",
            "mini_baccarat",
            "NZ",
            "standard",
            7,
            None,
            ("tie",),
            opens="22:30",
            closes="05:30",
            gzip=True,
        ),
    ]
    deviations = [
        Deviation(
            "MB-01",
            "banker_missed",
            "23:10",
            "draw.banker_missed",
            "Banker should have drawn a third card and stood; the round was announced "
            "and settled from the cards dealt.",
        ),
        Deviation(
            "PB-01",
            "player_extra",
            "00:20",
            "draw.player_extra",
            "Player with 6 or 7 was given a third card (Banker had 7 and stood).",
        ),
        Deviation(
            "MB-02",
            "tie_missing",
            "22:40",
            "announce.tie_missing",
            'Tie round with no "Tie Hand" announcement.',
        ),
        Deviation(
            "MB-03",
            "dragon_missing",
            "22:00",
            "announce.dragon7_missing",
            'Dragon 7 at the no-vigorish table and no "dragon 7" announcement.',
        ),
        Deviation(
            "MB-01",
            "vig_short",
            "01:30",
            "vig.wrong_amount",
            "Vigorish of 4.00 taken on a winning 100 Banker wager (5.00 due).",
        ),
        Deviation(
            "MB-03",
            "vig_not_allowed",
            "03:10",
            "vig.not_allowed",
            "Vigorish of 5.00 taken on a Banker win at the no-vigorish table.",
        ),
        Deviation(
            "PB-01",
            "wrong_winner",
            "02:40",
            "result.misannounced",
            "Banker won but the result was announced as a Player win "
            "(wagers were settled correctly).",
        ),
        Deviation(
            "MB-04",
            "pay_short",
            "21:15",
            "settle.wrong_amount",
            "A winning 100 Player wager was paid 90.",
        ),
        Deviation(
            "MB-05",
            "collect_after_pay",
            "23:45",
            "order.collect_after_pay",
            "The losing Banker wager was collected after the winners were paid.",
        ),
        Deviation(
            "MB-04",
            "procedure_order",
            "00:30",
            "order.procedure_mismatch",
            "Procedure 3 in force; the dealer paid both Banker winners, then took both "
            "vigorish (procedure 1's order).",
        ),
        Deviation(
            "MB-04",
            "total_cards_missing",
            "01:05",
            "announce.total_cards_missing",
            "Total card wagers offered and the number of cards not announced.",
        ),
        Deviation(
            "CF-01",
            "partial_order",
            "23:20",
            "chemin.priority",
            "Partial wagers against the bank accepted out of counterclockwise order: the "
            "wager of the second participant counterclockwise from the Banker's right was "
            "taken before the first's (13:69F-4.7(d)).",
        ),
        Deviation(
            "CF-01",
            "over_bank",
            "23:50",
            "chemin.over_bank",
            "Two partial wagers together 200 more than the bank (13:69F-4.7(a)).",
        ),
        Deviation(
            "CF-01",
            "late_wager",
            "00:30",
            "chemin.late_wager",
            'A partial wager accepted after "No more bets" (13:69F-4.7(e)).',
        ),
        Deviation(
            "CF-01",
            "option_not_allowed",
            "01:10",
            "chemin.option",
            'The Dominant Player, who had to draw, declared "stay" and stood.',
        ),
        Deviation(
            "CF-01",
            "commission_short",
            "01:50",
            "chemin.commission",
            "Commission of 4% taken on the Banker's winnings (5% due).",
        ),
        Deviation(
            "CF-01",
            "suivi_not_entitled",
            "02:40",
            "chemin.priority",
            "A banco suivi accepted from a participant who had not equalled and lost the "
            "Banker's preceding wager (13:69F-4.7(b)).",
        ),
        Deviation(
            "NZ-01",
            "push_collected",
            "03:30",
            "settle.wrong_outcome",
            "On a tie the Banker wager was collected instead of returned.",
        ),
    ]
    changes = [
        NoticeChange("P1", ("MB-01", "MB-02", "PB-01"), 2, "02:00", 45),
        NoticeChange("P2", ("MB-03", "MB-04", "MB-05"), 4, "03:00", 20),
    ]
    return Night(
        dt.date(2026, 11, 28),
        dt.timedelta(hours=-5),
        tables,
        deviations,
        changes,
        truncated_line="MB-02",
        seq_jump=("NZ-01", 3),
    )


SAMPLE_SEED = 20261128


def write_sample(out_dir: Path, seed: int = SAMPLE_SEED) -> list[Path]:
    """Write the sample night and its README (the list of planted deviations)."""
    night = sample_night()
    written, notes = write_night(night, out_dir, seed)
    missing = [d for d in night.deviations if not d.planted]
    if missing:
        raise RuntimeError(f"no qualifying round for {[(d.table, d.kind) for d in missing]}")
    (out_dir / "README.md").write_text(_sample_readme(night, written, notes))
    return sorted(written.values())


def _offset(delta: dt.timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _change_line(night: Night, c: NoticeChange) -> str:
    """One procedure change, and which of its tables were still open to change."""
    specs = {s.table: s for s in night.tables}
    eff = _local(night, c.effective)
    changing = [t for t in c.tables if _local(night, specs[t].closes) > eff]
    text = (
        f"- Pit {c.pit} ({', '.join(c.tables)}): procedure {c.procedure} from {c.effective}, "
        f"written notices to {' and '.join(c.recipients)} {c.lead_minutes} minutes before"
    )
    if c.lead_minutes >= 30:
        return text + " (on time: no finding)"
    closed = sorted(set(c.tables) - set(changing))
    note = f" ({', '.join(closed)} had closed and did not change)" if closed else ""
    return text + f" → `procedure.notice_late` at {' and '.join(changing)}{note}"


def _local(night: Night, hhmm: str) -> dt.datetime:
    """hh:mm of the night as a local time (before noon: the next morning)."""
    h, m = map(int, hhmm.split(":"))
    day = night.date + dt.timedelta(days=1 if h < 12 else 0)
    return dt.datetime(day.year, day.month, day.day, h, m, tzinfo=dt.timezone(night.utc_offset))


def _sample_readme(night: Night, written: dict[str, Path], notes: list[str]) -> str:
    rows = "\n".join(
        f"| {s.table} | {s.pit} | {s.game} | {s.jurisdiction} | {s.variant} | "
        f"{s.procedure or '-'} | {s.decks}{' x2 batches' if s.shuffle == 'automated' else ''} |"
        f" {', '.join(s.side_bets) or '-'} | {s.opens}-{s.closes} | `{written[s.table].name}` |"
        for s in night.tables
    )
    devs = "\n".join(f"| `{d.code}` | {d.planted} | {d.note} |" for d in night.deviations)
    changes = "\n".join(_change_line(night, c) for c in night.changes)
    return f"""# Sample logs: the night of {night.date:%d %B %Y}

Generated by `make sample` (`python -m auditor.simulate.night sample_logs`, seed {SAMPLE_SEED});
do not edit by hand, regenerate. Times are local (UTC{_offset(night.utc_offset)}). Every shoe
is really shuffled, every round is dealt by the rule pack's third-card tables and settled by
its payouts, except the deviations planted below. An audit of these files must find
exactly these deviations and nothing else.

## Tables

| table | pit | game | rules | variant | procedure | decks | side wagers | hours | file |
|---|---|---|---|---|---|---|---|---|---|
{rows}

Pit notices (`procedure_notice`) are in `{written["pits"].name}`.

## Planted deviations in rounds

| code | where | what happened |
|---|---|---|
{devs}

## Planted deviations in the logs

{chr(10).join("- " + n for n in notes)}

## Procedure changes

{changes}
"""


# --- simulate: a night of N tables with deviations planted at random ---------------------------

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
}
KIND_CODES = BANKING_KINDS | CHEMIN_KINDS | SHOE_KINDS | PROCEDURE_KINDS | LOG_KINDS
GAMES = ("mini_baccarat", "punto_banco", "chemin_de_fer", "nz")
DEFAULT_GAMES = ("mini_baccarat", "punto_banco", "chemin_de_fer")
SIM_DATE = dt.date(2026, 12, 1)
SIM_OPENS = "22:00"
MAX_HOURS = 13  # the night runs 22:00 to at most 11:00 the next morning
PIT_SIZE = 4  # banking tables per pit (one procedure per pit)
MAX_PENDING = 8  # deviations waiting at a table for a round that shows them cleanly


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
        if kind == "panda8_missing" and not _panda8_due(pack, spec.variant):
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
    if spec.jurisdiction in FACE_UP_RULE_JURISDICTIONS and spec.game != "chemin_de_fer":
        out.append("face_up_last")
    return tuple(out)


def simulated_night(
    tables: int, hours: float, seed: int, games: tuple[str, ...], rate: float = 0.0
) -> Night:
    """The tables (games in turn, NJ banking tables PIT_SIZE to a pit with one procedure,
    chemin de fer and NZ tables in pits of their own) and one procedure change per NJ pit at
    half time, with written notices 45 minutes before (on time).

    With `rate`, each NJ pit's change is, with probability `rate`, notified to the Division
    only (notice_missing) or 20 minutes ahead (notice_late); and, independently with
    probability `rate`, one table of a pit of two or more changes alone a quarter into the
    night, duly notified (lone_change: the pit is inconsistent until the others follow)."""
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
    return Night(SIM_DATE, dt.timedelta(hours=-5), specs, [], lone + changes)


class SimTableNight(TableNight):
    """A table whose rounds each get a deviation with probability `rate`, of a kind chosen at
    random among the table's kinds; one the round's cards cannot show cleanly waits for the
    next round that can (`_qualifies`, `chemin_qualifies`). Shoe-, table- and log-level kinds
    are drawn per shoe and per table (see `simulate`). `planted` is the ground truth: where
    the audit must find each deviation, keyed as its finding is."""

    def __init__(self, night: Night, spec: TableSpec, rng: random.Random, dev_rng: random.Random,
                 rate: float) -> None:
        super().__init__(night, spec, rng)
        self.dev_rng, self.rate = dev_rng, rate
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

    def tamper(self, shoe_id: str, cards: list[str], pos: int) -> None:
        """extra_card: every copy of the first card dealt, and one more in place of another
        card, within the next 40 cards, so that the audit sees them all come out."""
        self.extra_last = -1
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
        the misplaced cutting card (if it came out), a round past the allowed last one."""
        if 0 <= self.extra_last < pos:
            self.truth("extra_card", shoe_id)
        if "cut_misplaced" in self.this_shoe and self.cut_round is not None:
            self.truth("cut_misplaced", shoe_id, self.cut_round)
        if "past_cut" in self.this_shoe and self.cut_round is not None and (
            rnd >= self.cut_round + 2
        ):
            self.truth("past_cut", shoe_id, self.cut_round + 2)

    # --- rounds --------------------------------------------------------------------------

    def take_deviation(self, o: Outcome, t: dt.datetime) -> Deviation | None:
        for d in self.pending:
            if d.kind == "procedure_order" and (
                self.order_streak >= MIN_UNDECLARED_ROUNDS - 1 or self.stretch is not None
            ):
                continue
            if _qualifies(self.pack, d.kind, o, self.spec):
                self.pending.remove(d)
                return d
        return None

    def wagers(self, kind: str) -> list[tuple[int, str, Decimal]]:
        self.last_wagers = super().wagers(kind)
        return self.last_wagers

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
        if self.dev_rng.random() < self.rate and len(self.pending) < MAX_PENDING:
            kind = self.dev_rng.choice(self.kinds)
            self.pending.append(
                Deviation(self.spec.table, kind, self.spec.opens, KIND_CODES[kind], "")
            )
        waiting = list(self.pending)
        burned = 0
        if "face_up_last" in self.this_shoe and self.round_is_last:
            # 4.12(j): found face up and burned with its value; the last round must be void.
            burned = 1 + _value(cards[pos])
            if pos + burned + 6 <= len(cards):
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
        rng = self.dev_rng
        if rng.random() < self.rate:  # seq jumps before table_close: outside every shoe
            close = json.loads(lines[-1])
            close["seq"] += 1
            lines[-1] = json.dumps(close, separators=(",", ":"))
            self.truth("seq_skipped")
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
                changed["amount"] = _amount(Decimal(str(changed["amount"])) + 10)
                self.resent = [*lines[max(0, i - 2):i],
                               json.dumps(changed, separators=(",", ":")), *lines[i + 1:i + 3]]
                self.truth("resent_changed", table=None)
        return lines


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


def simulate(
    out_dir: Path | str,
    tables: int,
    hours: float,
    seed: int = 1,
    deviation_rate: float = 0.0,
    games: tuple[str, ...] | list[str] = DEFAULT_GAMES,
) -> SimulationResult:
    """Write event log v1 files for `tables` tables open `hours` hours from 22:00 (the games
    in turn; 'nz' is NZ mini-baccarat), with the procedure changes and their notices, and
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
      DATE_TABLE.resent.jsonl, after its table's file in name order.
    announce.panda8_missing is planted only where the rule pack makes "panda 8" due (no
    shipped pack does; point BACC_AUDIT_RULES at packs that do)."""
    if not 0 <= deviation_rate <= 1:
        raise ValueError("deviation_rate must be between 0 and 1")
    started = time.perf_counter()
    out = Path(out_dir)
    night = simulated_night(tables, hours, seed, tuple(games), deviation_rate)
    players: list[SimTableNight] = []

    def make(night: Night, spec: TableSpec, rng: random.Random, i: int) -> TableNight:
        dev_rng = random.Random(f"{seed}:{i}:{spec.table}:deviations")
        players.append(SimTableNight(night, spec, rng, dev_rng, deviation_rate))
        return players[-1]

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
        made = [p.spec.table for p in players if c in p.applied]
        if c.kind == "lone_change":
            made = [None] if made else []
        out += [{"code": KIND_CODES[c.kind], "table": table, "shoe": None, "round": None,
                 "kind": c.kind} for table in made]
    return out


if __name__ == "__main__":
    import sys

    for p in write_sample(Path(sys.argv[1] if len(sys.argv) > 1 else "sample_logs")):
        print(p)
