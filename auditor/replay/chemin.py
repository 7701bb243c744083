"""Replay of one chemin de fer round: the wagers against the bank (N.J.A.C. 13:69F-4.7), the
drawing tableau with its option cells, settlement, the commission on the Banker's winnings,
the passing of the bank, and the irregularities of 13:69F-4.12, as Finding values.

Like `auditor.replay.round.check_round` it is pure: the table's context, the round's events
and a small `History` of the rounds before it at the table in, the findings out. The history
carries what one round cannot show by itself: who equalled and lost the Banker's previous
wager (banco suivi, 4.7(b)), who holds the bank, and a card kept for the next hand (4.12(g)).
A correct round gives [].
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from decimal import ROUND_DOWN, ROUND_HALF_UP, ROUND_UP, Decimal
from typing import Any

from auditor.finding import Finding
from auditor.replay.hands import BANKER, PLAYER, TIE, Hands, count, deal_error, value
from auditor.replay.model import Event, TableContext
from auditor.rules.draw import STOOD
from auditor.rules.pack import DRAW, OPTION, STAND, RulePack, RulePackError

__all__ = [
    "CheminEvent",
    "CheminRules",
    "History",
    "RoundFacts",
    "check_chemin_round",
    "replay_chemin_round",
    "round_facts",
]

ZERO = Decimal("0.00")
CENT = Decimal("0.01")
VOID = "void"
PAY, COLLECT, PUSH = "pay", "collect", "push"
SUIVI, SEUL, PARTIAL = "suivi", "seul", "partial"
_RANK = {SUIVI: 0, SEUL: 1, PARTIAL: 2}  # 4.7(b)-(d): the order of preference
_ROUNDING = {"exact_cents": ROUND_HALF_UP, "down_to_cent": ROUND_DOWN, "up_to_cent": ROUND_UP}

# --- The vocabulary of 4.12 dispositions: what each does to the round ----------------------
# Dispositions that make the round void: every wager returned, no commission.
HAND_ANNULLED, HAND_VOID = "hand_annulled", "hand_void"
# Dispositions that change how a hand counts.
BANKER_COUNT_ZERO, PLAYER_HIGHEST, BANKER_LOWEST = (
    "banker_count_zero",
    "player_highest",
    "banker_lowest",
)
# Dispositions that move the named card to the other hand.
BANKER_CARD, PLAYER_CARD = "banker_card", "player_card"
# Dispositions that take the named card out of the round.
NEXT_HAND_FIRST_CARD = "next_hand_first_card"
H_PROCEDURES = {1: "burn_value", 2: "burn_one_face_down", 3: "simulated_round"}
REMOVED = frozenset({NEXT_HAND_FIRST_CARD, "discarded", "burned", *H_PROCEDURES.values()})
VOIDING = frozenset({HAND_ANNULLED, HAND_VOID})
DISPOSITIONS = frozenset(
    {*VOIDING, BANKER_COUNT_ZERO, PLAYER_HIGHEST, BANKER_LOWEST, BANKER_CARD, PLAYER_CARD} | REMOVED
)
PROCEDURE_H = "procedure_h"  # in a pack's lists: the licensee's pre-selected 4.12(h) procedure

# Situations an irregularity is judged in (keys of a pack's irregularities.<kind> tables).
ANY = "any"
MUST_DRAW, MAY_DRAW, MUST_STAY = "banker_must_draw", "banker_option", "banker_must_stay"
CUT_IN, CUT_OUT = "cut_card_in", "cut_card_out"
# Kinds whose situation is the Banker's cell with the Dominant Player standing (4.12(e),(f)).
_AFTER_STAY = ("card_after_stay", "card_after_stay_card_called")
_UNDISCLOSED = "card_drawn_undisclosed"

_REQUIRED_KEYS = (
    "wagers.limit",
    "wagers.priority",
    "wagers.after_no_more_bets",
    "settlement.wagers_against_banker",
    "commission.rate",
    "commission.rounding",
)


# --- Values --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheminEvent(Event):
    """An Event with the fields only chemin de fer events carry (event log v1: `option` has
    `hand` and `choice`, `bank_pass` has `from_seat` and `to_seat`)."""

    hand: str | None = None
    choice: str | None = None
    from_seat: int | None = None
    to_seat: int | None = None

    @classmethod
    def from_record(cls, record: Mapping[str, Any], source: str) -> CheminEvent:
        base = Event.from_record(record, source)
        return cls(
            **{f.name: getattr(base, f.name) for f in fields(Event)},
            hand=record.get("hand"),
            choice=record.get("choice"),
            from_seat=record.get("from_seat"),
            to_seat=record.get("to_seat"),
        )


@dataclass(frozen=True)
class RoundFacts:
    """What a later round needs to know about this one.

    `winner` is "player", "banker", "tie", "void", or None when the cards could not be read.
    `equalled`: seats whose wagers against the bank equalled it (4.7(b)). `passes`: the bank
    passes logged after the bank was put up, (from_seat, to_seat), for the next round.
    `kept_card`: a card drawn in error kept as the first card of the next hand (4.12(g)).
    """

    shoe: str | None
    round: int | None
    banker_seat: int | None
    bank: Decimal | None
    winner: str | None
    equalled: tuple[int, ...] = ()
    passes: tuple[tuple[int, int], ...] = ()
    kept_card: str | None = None

    @property
    def counts_as_previous_wager(self) -> bool:
        """A stand off is not counted (4.7(b)); nor, by the same reasoning, a void hand."""
        return self.winner not in (TIE, VOID)


@dataclass(frozen=True)
class History:
    """The rounds before this one at the same table, as far as this round's checks need.

    `previous`: the round just before (any outcome). `counted`: the last round before this one
    that was not a stand off or void, None when unknown (then banco suivi is not judged).
    `cut_card_round`: the round of this round's shoe in which the cutting card came out, None
    if it has not (yet) come out or is unknown.
    """

    previous: RoundFacts | None = None
    counted: RoundFacts | None = None
    cut_card_round: int | None = None

    def after(self, facts: RoundFacts) -> History:
        """The history the next round at the table sees (cut card: the caller's to set)."""
        counted = facts if facts.counts_as_previous_wager else self.counted
        return History(facts, counted, self.cut_card_round)


@dataclass(frozen=True)
class CheminRules:
    """The chemin de fer rules of a pack, resolved once: the tableau cells, the commission,
    the bank passing and the irregularity dispositions (with "procedure_h" replaced by the
    disposition of the licensee's pre-selected 4.12(h) procedure)."""

    pack: str
    natural: tuple[bool, ...]
    player_cells: tuple[str, ...]  # by the Player's two-card count
    banker_cells: tuple[str, ...]  # banker_count * 11 + third-card value, column 10: stood
    commission_rate: Decimal
    commission_rounding: str
    pass_when_banker_loses: bool
    result_due: bool
    irregularities: Mapping[str, Mapping[str, tuple[str, ...]]]
    h_disposition: str

    @classmethod
    def of(cls, pack: RulePack) -> CheminRules:
        """Raises RulePackError when the pack lacks what the chemin de fer replay reads."""
        cached = _RULES.get((pack.id, pack.sha256))
        if cached is not None:
            return cached
        for key in _REQUIRED_KEYS:
            if key not in pack.entries:
                raise RulePackError(
                    pack.path, key, "is missing; the chemin de fer replay needs it."
                )
        draw = pack.draw

        def cell(mandatory: bool, option: bool) -> str:
            return OPTION if option else DRAW if mandatory else STAND

        player_opt = draw.player_option or (False,) * 10
        banker_opt = draw.banker_option or (False,) * 110
        h = pack.value("irregularity_options.h_procedure", 1)
        if h not in H_PROCEDURES:
            raise RulePackError(pack.path, "irregularity_options.h_procedure", "must be 1, 2 or 3.")
        h_disposition = H_PROCEDURES[h]
        after_cut = tuple(pack.value("irregularity_options.undisclosed_after_cut_card", ()))
        irregularities: dict[str, dict[str, tuple[str, ...]]] = {}
        for key, entry in pack.entries.items():
            if not key.startswith("irregularities."):
                continue
            kind = key.removeprefix("irregularities.")
            if not isinstance(entry.value, Mapping):
                raise RulePackError(pack.path, key, "must map situations to dispositions.")
            table: dict[str, tuple[str, ...]] = {}
            for situation, allowed in entry.value.items():
                names = tuple(h_disposition if d == PROCEDURE_H else d for d in allowed)
                unknown = sorted(set(names) - DISPOSITIONS)
                if unknown:
                    raise RulePackError(
                        pack.path,
                        f"{key}.{situation}",
                        f"names disposition {unknown[0]!r}, which the chemin de fer replay "
                        f"does not know ({', '.join(sorted(DISPOSITIONS))}).",
                    )
                table[situation] = names
            if kind == _UNDISCLOSED:
                table.setdefault(CUT_OUT, after_cut)
            irregularities[kind] = table
        rules = cls(
            pack=pack.id,
            natural=draw.natural,
            player_cells=tuple(cell(d, o) for d, o in zip(draw.player, player_opt, strict=True)),
            banker_cells=tuple(cell(d, o) for d, o in zip(draw.banker, banker_opt, strict=True)),
            commission_rate=Decimal(str(pack.value("commission.rate"))),
            commission_rounding=str(pack.value("commission.rounding")),
            pass_when_banker_loses=bool(pack.value("bank.pass_when_banker_loses", False)),
            result_due=pack.value("announcements.result") == "always",
            irregularities=irregularities,
            h_disposition=h_disposition,
        )
        _RULES[(pack.id, pack.sha256)] = rules
        return rules

    def player_cell(self, player_two: int, banker_two: int) -> str:
        """ "draw", "stand" or "option" for the Dominant Player; a natural in either hand
        stops both."""
        if self.natural[player_two] or self.natural[banker_two]:
            return STAND
        return self.player_cells[player_two]

    def banker_cell(self, player_two: int, banker_two: int, third: int | None) -> str:
        """The Banker's cell given the Player's third-card value (None: the Player stood)."""
        if self.natural[player_two] or self.natural[banker_two]:
            return STAND
        return self.banker_cells[banker_two * 11 + (STOOD if third is None else third)]

    def commission(self, winnings: Decimal) -> Decimal:
        """Rate x the Banker's winnings, rounded by the house option."""
        rounding = _ROUNDING.get(self.commission_rounding, ROUND_HALF_UP)
        return (winnings * self.commission_rate).quantize(CENT, rounding=rounding)


_RULES: dict[tuple[str, str], CheminRules] = {}


# --- The round sorted by what the checks need ----------------------------------------------


def _attr(e: Event, name: str) -> Any:
    return getattr(e, name, None)


@dataclass
class _Round:
    """A round's events by type, keeping event order within each."""

    events: Sequence[Event]
    banks: list[Event] = field(default_factory=list)
    bancos: list[Event] = field(default_factory=list)
    cards: list[Event] = field(default_factory=list)
    options: list[Event] = field(default_factory=list)
    settlements: list[Event] = field(default_factory=list)
    commissions: list[Event] = field(default_factory=list)
    passes: list[Event] = field(default_factory=list)
    irregularities: list[Event] = field(default_factory=list)
    results: list[Event] = field(default_factory=list)
    void_event: Event | None = None
    no_more_bets: int | None = None  # seq of the first "No more bets"

    @classmethod
    def of(cls, events: Sequence[Event]) -> _Round:
        r = cls(events)
        lists = {
            "bank": r.banks,
            "banco": r.bancos,
            "card": r.cards,
            "option": r.options,
            "commission": r.commissions,
            "bank_pass": r.passes,
            "irregularity": r.irregularities,
            PAY: r.settlements,
            COLLECT: r.settlements,
            PUSH: r.settlements,
        }
        for e in events:
            target = lists.get(e.type)
            if target is not None:
                target.append(e)
            elif e.type == "announce" and e.kind == "result":
                r.results.append(e)
            elif e.type == "void" and r.void_event is None:
                r.void_event = e
            elif e.type == "no_more_bets" and r.no_more_bets is None:
                r.no_more_bets = e.seq
        return r

    @property
    def end(self) -> Event | None:
        for e in reversed(self.events):
            if e.type == "round_end":
                return e
        return self.events[-1] if self.events else None

    @property
    def first_bank(self) -> Event | None:
        return self.banks[0] if self.banks else None

    @property
    def banker_seat(self) -> int | None:
        return None if self.first_bank is None else self.first_bank.seat

    def before_no_more_bets(self, e: Event) -> bool:
        return self.no_more_bets is None or e.seq < self.no_more_bets

    @property
    def bank(self) -> Decimal | None:
        """The Banker's wager: the last `bank` before "No more bets" (the first if none)."""
        before = [e for e in self.banks if self.before_no_more_bets(e)]
        chosen = before[-1] if before else self.first_bank
        return None if chosen is None or chosen.amount is None else chosen.amount

    @property
    def stakes(self) -> dict[int, Decimal]:
        """Each seat's wagers against the bank, summed, in the order seats first wagered."""
        out: dict[int, Decimal] = {}
        for e in self.bancos:
            out[e.seat or 0] = out.get(e.seat or 0, ZERO) + (e.amount or ZERO)
        return out


# --- Messages ------------------------------------------------------------------------------


def _finding(
    code: str, at: Event | None, message: str, expected: Any, observed: Any
) -> Finding:
    return Finding(
        code,
        None if at is None else at.seq,
        message,
        expected,
        observed,
        None if at is None else at.source,
    )


def _money(amount: Decimal | None) -> str | None:
    return None if amount is None else f"{amount:.2f}"


def _hand_text(name: str, cards: Sequence[str]) -> str:
    return f"{name} {' '.join(cards)} ({count(cards)})" if cards else f"{name} (no cards)"


def _banco_json(e: Event) -> dict[str, Any]:
    return {"seq": e.seq, "seat": e.seat, "kind": e.kind, "amount": _money(e.amount)}


# --- The check -----------------------------------------------------------------------------


def check_chemin_round(
    ctx: TableContext, events: Sequence[Event], history: History | None = None
) -> list[Finding]:
    """Every deviation in one chemin de fer round, `events` being its events in seq order
    (round_start to round_end, and any bank_pass logged with the round).

    - Wagers: priority (4.7(b)-(d)), the bank as the limit (4.7(a)), nothing after "No more
      bets" but the Banker's withdrawal of the uncovered part (4.7(e)).
    - Draws by the pack's tableau: an option declared on a mandatory cell is chemin.option, a
      declared option the cards do not follow chemin.option_not_followed, any other wrong
      draw draw.*. Skipped after a deal.order error and in rounds with an irregularity.
    - Settlement (4.7(g)) and the commission on the Banker's winnings, on the cards as the
      irregularity dispositions leave them; a void round returns every wager.
    - The bank: the Banker is who the bank was last passed to, and (house option) a Banker
      who lost passes it. Judged within a shoe.
    - Irregularities (4.12): the disposition against the pack's list for the situation.
    """
    return replay_chemin_round(ctx, events, history)[0]


def round_facts(ctx: TableContext, events: Sequence[Event]) -> RoundFacts:
    """What later rounds need from this one (see RoundFacts)."""
    return replay_chemin_round(ctx, events)[1]


def replay_chemin_round(
    ctx: TableContext, events: Sequence[Event], history: History | None = None
) -> tuple[list[Finding], RoundFacts]:
    """check_chemin_round and round_facts in one pass, for the audit's loop over rounds."""
    rules = CheminRules.of(ctx.pack)
    history = history or History()
    r = _Round.of(events)
    found: list[Finding] = []
    found += _priority_findings(ctx, r, history)
    found += _over_bank_findings(r)
    found += _late_findings(r)
    found += _bank_pass_findings(rules, r, history)
    found += _kept_card_findings(r, history)
    play = _play(ctx, rules, r, history, found)
    found += _result_findings(rules, r, play)
    found += _settlement_findings(r, play.winner)
    found += _commission_findings(rules, r, play.winner)
    return found, _facts(r, play)


def _facts(r: _Round, play: _Play) -> RoundFacts:
    """The round as the next rounds see it (banco suivi, the bank's holder, a kept card)."""
    bank, first_bank = r.bank, r.first_bank
    equalled = tuple(s for s, a in r.stakes.items() if bank is not None and a == bank)
    after = [e for e in r.passes if first_bank is not None and e.seq > first_bank.seq]
    head = r.events[0] if r.events else None
    return RoundFacts(
        shoe=None if head is None else head.shoe,
        round=None if head is None else head.round,
        banker_seat=r.banker_seat,
        bank=bank,
        winner=play.winner,
        equalled=equalled,
        passes=tuple((_attr(e, "from_seat") or 0, _attr(e, "to_seat") or 0) for e in after),
        kept_card=play.kept_card,
    )


# --- Wagers against the bank (4.7(a)-(e)) --------------------------------------------------


def _distance(seat: int, banker: int, seats: int) -> int:
    """Steps counterclockwise from the Banker: seat banker+1 (the Banker's right) is 1."""
    return (seat - banker) % max(seats, 1)


def _entitled(history: History, banker: int | None) -> tuple[int, ...] | None:
    """Seats entitled to banco suivi, or None when the history cannot tell.

    A participant who equalled and lost the Banker's immediately preceding wager (4.7(b)): the
    last counted round was won by the same Banker, and the participant's wagers equalled the
    bank. A bank that passed since belongs to another Banker, whose preceding wager is not it.
    """
    counted = history.counted
    if counted is None or counted.winner is None or banker is None:
        return None
    if counted.winner != BANKER or counted.banker_seat != banker:
        return ()
    return counted.equalled


def _priority_findings(ctx: TableContext, r: _Round, history: History) -> list[Finding]:
    """One chemin.priority finding per round, at the first departure, listing them all."""
    banker, bank = r.banker_seat, r.bank
    if banker is None:
        return []
    entitled = _entitled(history, banker)
    accepted = [e for e in r.bancos if r.before_no_more_bets(e)]
    departures: list[tuple[Event, str]] = []
    highest: Event | None = None  # the accepted wager of the lowest preference so far
    last_by_kind: dict[str, Event] = {}
    for e in accepted:
        seat, kind = e.seat or 0, e.kind or PARTIAL
        if seat == banker:
            departures.append(
                (
                    e,
                    f"seat {seat} is the Banker's own seat (4.7(a): the remaining "
                    "participants wager against the Banker)",
                )
            )
        if kind == SUIVI and entitled is not None and seat not in entitled:
            who = f"seat {', '.join(map(str, entitled))}" if entitled else "no participant"
            departures.append(
                (
                    e,
                    f"seat {seat} took banco suivi, but {who} equalled and lost "
                    "the Banker's preceding wager (4.7(b))",
                )
            )
        if kind in (SUIVI, SEUL) and bank is not None and e.amount is not None and e.amount < bank:
            departures.append(
                (
                    e,
                    f"seat {seat}'s banco {kind} of {_money(e.amount)} does not "
                    f"equal the bank of {_money(bank)} (4.7(b),(c))",
                )
            )
        if highest is not None and _RANK.get(kind, 2) < _RANK.get(highest.kind or PARTIAL, 2):
            departures.append(
                (
                    e,
                    f"seat {highest.seat}'s {highest.kind} wager was accepted "
                    f"before seat {seat}'s banco {kind} (4.7(b)-(d))",
                )
            )
        previous = last_by_kind.get(kind)
        if (
            kind in (SEUL, PARTIAL)
            and previous is not None
            and previous.seat != seat
            and _distance(seat, banker, ctx.seats)
            < _distance(previous.seat or 0, banker, ctx.seats)
        ):
            rule = "4.7(c)" if kind == SEUL else "4.7(d)"
            departures.append(
                (
                    e,
                    f"seat {seat}'s {kind} wager was accepted after seat "
                    f"{previous.seat}'s, though seat {seat} sits nearer "
                    f"counterclockwise from the Banker at seat {banker} ({rule})",
                )
            )
        last_by_kind[kind] = e
        if highest is None or _RANK.get(kind, 2) >= _RANK.get(highest.kind or PARTIAL, 2):
            highest = e
    if not departures:
        return []
    at, first = departures[0]
    return [
        _finding(
            "chemin.priority",
            at,
            f"Wagers against the Banker were not accepted in the order of priority: {first}"
            + (f" (and {len(departures) - 1} more)." if len(departures) > 1 else "."),
            {
                "order": [
                    "suivi",
                    "seul (nearest counterclockwise first)",
                    "partial (counterclockwise from the Banker's right)",
                ],
                "banker_seat": banker,
                "bank": _money(bank),
                "suivi_entitled": None if entitled is None else list(entitled),
            },
            {
                "wagers": [_banco_json(e) for e in accepted],
                "departures": [{"seq": e.seq, "problem": text} for e, text in departures],
            },
        )
    ]


def _over_bank_findings(r: _Round) -> list[Finding]:
    """4.7(a): individually or together, never more than the Banker's wager."""
    bank = r.bank
    if bank is None:
        return []
    total = ZERO
    for e in r.bancos:
        total += e.amount or ZERO
        if total > bank:
            everything = sum((b.amount or ZERO for b in r.bancos), ZERO)
            return [
                _finding(
                    "chemin.over_bank",
                    e,
                    f"Wagers against the bank total {_money(everything)}, more than the bank of "
                    f"{_money(bank)}; seat {e.seat}'s {_money(e.amount)} took them past it.",
                    {"bank": _money(bank), "max_total": _money(bank)},
                    {"total": _money(everything), "wagers": [_banco_json(b) for b in r.bancos]},
                )
            ]
    return []


def _late_findings(r: _Round) -> list[Finding]:
    """4.7(e): nothing made, raised or withdrawn after "No more bets", except the Banker
    withdrawing the part of the bank no wager covers."""
    if r.no_more_bets is None:
        return []
    found = []
    for e in r.bancos:
        if not r.before_no_more_bets(e):
            found.append(
                _finding(
                    "chemin.late_wager",
                    e,
                    f"Seat {e.seat}'s {e.kind} wager of {_money(e.amount)} against the bank was "
                    f'accepted after "No more bets".',
                    {"no_more_bets_seq": r.no_more_bets, "wagers_after": []},
                    _banco_json(e),
                )
            )
    bank = r.bank
    if bank is None:
        return found
    covered = min(
        bank,
        sum((e.amount or ZERO for e in r.bancos if r.before_no_more_bets(e)), ZERO),
    )
    for e in r.banks:
        if r.before_no_more_bets(e) or e.amount is None:
            continue
        if e.amount > bank:
            problem = f"raised the bank from {_money(bank)} to {_money(e.amount)}"
        elif e.amount < covered:
            problem = (
                f"cut the bank to {_money(e.amount)}, below the {_money(covered)} the "
                "wagers against it covered"
            )
        else:
            continue
        found.append(
            _finding(
                "chemin.late_wager",
                e,
                f'The Banker at seat {e.seat} {problem} after "No more bets"; only the '
                "uncovered part may be withdrawn.",
                {"bank_between": [_money(covered), _money(bank)]},
                {"seat": e.seat, "bank": _money(e.amount), "seq": e.seq},
            )
        )
    return found


# --- The bank passing ----------------------------------------------------------------------


def _bank_pass_findings(rules: CheminRules, r: _Round, history: History) -> list[Finding]:
    """The Banker of this round holds the bank by the passes logged since the previous round of
    the shoe; and, where the house passes the bank when the Banker loses, a losing Banker did
    not keep it. One finding per round, the first problem."""
    first_bank = r.first_bank
    if first_bank is None or first_bank.seat is None:
        return []
    banker = first_bank.seat
    prev = history.previous
    if prev is not None and (prev.shoe != (first_bank.shoe) or prev.banker_seat is None):
        prev = None  # a new shoe may start with any Banker; nothing to compare with
    passes = list(prev.passes) if prev is not None else []
    passes += [
        (_attr(e, "from_seat") or 0, _attr(e, "to_seat") or 0)
        for e in r.passes
        if e.seq < first_bank.seq
    ]
    holder = prev.banker_seat if prev is not None else None
    expected: dict[str, Any] = {"banker_seat": holder, "passes": passes}
    for src, dst in passes:
        if holder is not None and src != holder:
            return [
                _finding(
                    "chemin.bank_pass",
                    first_bank,
                    f"The bank was logged as passing from seat {src} to seat {dst}, but seat "
                    f"{holder} held it.",
                    {"from_seat": holder},
                    {"from_seat": src, "to_seat": dst},
                )
            ]
        holder = dst
    if holder is None:
        return []
    if banker != holder:
        text = (
            f"the bank last passed to seat {holder}"
            if passes
            else f"seat {holder} held it in round {prev.round if prev else '?'} and no "
            "bank_pass was logged"
        )
        return [
            _finding(
                "chemin.bank_pass",
                first_bank,
                f"Seat {banker} put up the bank, but {text}.",
                expected,
                {"banker_seat": banker},
            )
        ]
    if prev is not None and not passes and prev.winner == PLAYER and rules.pass_when_banker_loses:
        return [
            _finding(
                "chemin.bank_pass",
                first_bank,
                f"The Banker at seat {banker} lost round {prev.round} and kept the bank; at this "
                "table the bank passes when the Banker loses (house option).",
                {"bank_passes_from": banker},
                {"banker_seat": banker, "previous_round": prev.round, "previous_winner": PLAYER},
            )
        ]
    return []


def _kept_card_findings(r: _Round, history: History) -> list[Finding]:
    """4.12(g): a card kept for the next hand is that hand's first card."""
    prev = history.previous
    if prev is None or prev.kept_card is None or not r.cards:
        return []
    first = r.cards[0]
    if prev.shoe != first.shoe or first.card == prev.kept_card:
        return []
    return [
        _finding(
            "irregularity.chemin_disposition",
            first,
            f"{prev.kept_card}, drawn in error in round {prev.round}, was to be the first card of "
            f"this hand (4.12(g)), which began with {first.card}.",
            {"first_card": prev.kept_card},
            {"first_card": first.card},
        )
    ]


# --- The cards -----------------------------------------------------------------------------


@dataclass
class _Play:
    """The round's outcome as the checks need it: winner (None: unknown, "void": void),
    the counts, and a card kept for the next hand."""

    winner: str | None = None
    player: int | None = None
    banker: int | None = None
    hands: Hands | None = None
    kept_card: str | None = None


def _play(
    ctx: TableContext,
    rules: CheminRules,
    r: _Round,
    history: History,
    found: list[Finding],
) -> _Play:
    """Judge the deal, draws and irregularities (appending to `found`) and read the outcome."""
    if r.void_event is not None:
        kept = _irregularity_findings(ctx, rules, r, history, found)
        return _Play(winner=VOID, kept_card=kept)
    hands = Hands.deal([(e.to or "", e.card or "") for e in r.cards])
    if r.irregularities:
        kept = _irregularity_findings(ctx, rules, r, history, found)
        known = all((e.kind or "") in rules.irregularities for e in r.irregularities)
        play = _irregular_outcome(r) if known else _Play()
        play.kept_card = kept
        return play
    error = deal_error(hands, ctx.pack.deal_order)
    if error is not None:
        at = r.end if error.at is None else r.cards[error.at]
        found.append(
            _finding(
                "deal.order",
                at,
                f"Cards dealt out of order: {error.problem} "
                f"(cards went {', '.join(h.title() for h in hands.order) or 'nowhere'}).",
                {"first_four": list(ctx.pack.deal_order), "max_cards_per_hand": 3},
                {
                    "order": list(hands.order),
                    "player": list(hands.player),
                    "banker": list(hands.banker),
                },
            )
        )
    else:
        found += _draw_findings(rules, r, hands)
    if not hands.complete:
        return _Play(hands=hands)
    return _outcome(count(hands.player), count(hands.banker), hands)


def _outcome(player: int, banker: int, hands: Hands | None = None) -> _Play:
    winner = PLAYER if player > banker else BANKER if banker > player else TIE
    return _Play(winner=winner, player=player, banker=banker, hands=hands)


def _declared(r: _Round, hand: str) -> Event | None:
    for e in r.options:
        if _attr(e, "hand") == hand:
            return e
    return None


def _draw_findings(rules: CheminRules, r: _Round, hands: Hands) -> list[Finding]:
    """Mandatory cells must be followed and option cells may go either way (declared or not).
    A decision declared on a mandatory cell is chemin.option: minor when the cards follow the
    cell all the same, major when they follow the decision instead (the deviation, not the
    draw). One that agrees with the cell while the cards go against both is the draw finding."""
    p2, b2 = count(hands.player[:2]), count(hands.banker[:2])
    player_drew = len(hands.player) == 3
    third = value(hands.player[2]) if player_drew else None
    cards = {"player": list(hands.player), "banker": list(hands.banker)}
    found = []
    for hand, cell, drew, at_third in (
        (PLAYER, rules.player_cell(p2, b2), player_drew, 2),
        (BANKER, rules.banker_cell(p2, b2, third), len(hands.banker) == 3, 2),
    ):
        name = hand.title()
        own = hands.player if hand == PLAYER else hands.banker
        where = _hand_text(name, own[:2])
        if hand == BANKER:
            where += (
                f" after the Player's third card {hands.player[2]}"
                if player_drew
                else " with the Player standing"
            )
        declared = _declared(r, hand)
        choice = None if declared is None else _attr(declared, "choice")
        wants = None if choice is None else choice == "card"
        if cell == OPTION:
            if wants is not None and wants != drew:
                did = f"was given a third card, {own[at_third]}" if drew else "stood"
                found.append(
                    _finding(
                        "chemin.option_not_followed",
                        declared,
                        f'{where} declared "{choice}" at an option cell but {did}.',
                        {"hand": hand, "choice": choice, "third_card": wants},
                        {"third_card": drew, **cards},
                    )
                )
            continue
        required = cell == DRAW
        rule = "must draw" if required else "must stand"
        # A decision declared here: minor if the cards followed the cell all the same (the log
        # still shows a decision the rules do not give), major if they followed the decision.
        # One that agrees with the cell while the cards go against both is the draw finding.
        if wants is not None and (drew == required or wants != required):
            cell_kept = drew == required
            text = (
                f'{where} {rule}; "{choice}" was declared as if the rules gave an option, and '
                "the cards followed the rule."
                if cell_kept
                else f'{where} {rule}, but "{choice}" was declared as if the rules gave an '
                "option and the cards followed it."
            )
            option = _finding(
                "chemin.option",
                declared,
                text,
                {"hand": hand, "option": False, "third_card": required},
                {"hand": hand, "choice": choice, "third_card": drew, **cards},
            )
            found.append(replace(option, severity="minor") if cell_kept else option)
            continue
        if drew != required:
            if required:
                code, at = f"draw.{hand}_missed", r.end
                text = f"{where} had to draw a third card but stood."
            else:
                code = f"draw.{hand}_extra"
                at = [e for e in r.cards if e.to == hand][2]
                text = f"{where} had to stand but was given a third card, {own[2]}."
            found.append(
                _finding(
                    code,
                    at,
                    text,
                    {f"{hand}_third_card": required},
                    {f"{hand}_third_card": drew, **cards},
                )
            )
    return found


# --- Irregularities (4.12) -----------------------------------------------------------------


def _situation(
    rules: CheminRules, kind: str, r: _Round, irr: Event, history: History
) -> str | None:
    """Which of the pack's situations applies to an irregularity, None if the log cannot tell.

    (e), (f): the Banker's cell with the Dominant Player standing, from the first four cards.
    (g) undisclosed: whether the cutting card was out of the shoe (its cut_card round before
    this one); in the very round the cutting card came out the log cannot tell.
    """
    if kind in _AFTER_STAY:
        first = Hands.deal([(e.to or "", e.card or "") for e in r.cards[:4]])
        if len(first.player) < 2 or len(first.banker) < 2:
            return None
        cell = rules.banker_cell(count(first.player[:2]), count(first.banker[:2]), None)
        return {DRAW: MUST_DRAW, OPTION: MAY_DRAW}.get(cell, MUST_STAY)
    if kind == _UNDISCLOSED:
        cut, rnd = history.cut_card_round, irr.round
        if cut is None or rnd is None or cut > rnd:
            return CUT_IN
        return CUT_OUT if cut < rnd else None
    return ANY


def _irregularity_findings(
    ctx: TableContext,
    rules: CheminRules,
    r: _Round,
    history: History,
    found: list[Finding],
) -> str | None:
    """Each irregularity's disposition against the pack; returns a card kept for the next
    hand, if one was."""
    kept = None
    for irr in r.irregularities:
        kind, disposition = irr.kind or "", irr.disposition or ""
        if disposition == NEXT_HAND_FIRST_CARD and irr.card:
            kept = irr.card
        table = rules.irregularities.get(kind)
        if table is None:
            found.append(
                _finding(
                    "irregularity.unknown_kind",
                    irr,
                    f"The dealer declared an irregularity of kind {kind!r}, which the rule pack "
                    f"{rules.pack} does not list; its disposition {disposition!r} and the cards "
                    "of the round were not judged.",
                    {"kinds": sorted(rules.irregularities)},
                    {"kind": kind, "disposition": disposition, "card": irr.card},
                )
            )
            continue
        situation = _situation(rules, kind, r, irr, history)
        if situation is None:
            allowed = tuple(sorted({d for ds in table.values() for d in ds}))
        else:
            allowed = table.get(situation, table.get(ANY, ()))
        if disposition not in allowed:
            when = "" if situation in (None, ANY) else f" when {situation.replace('_', ' ')}"
            found.append(
                _finding(
                    "irregularity.chemin_disposition",
                    irr,
                    f"Irregularity {kind!r}{when} was resolved as {disposition!r}; the rules "
                    f"allow {' or '.join(repr(d) for d in allowed) or 'no disposition here'}.",
                    {"kind": kind, "situation": situation, "dispositions": list(allowed)},
                    {"disposition": disposition, "card": irr.card},
                )
            )
    return kept


def _irregular_outcome(r: _Round) -> _Play:
    """The counts the dispositions leave, applied in event order; unknown (winner None) when a
    disposition needs a card the log does not name or the hands cannot be read."""
    player: list[str] = []
    banker: list[str] = []
    zero_from: int | None = None
    highest = lowest = False
    cards_and_irregularities = [e for e in r.events if e.type in ("card", "irregularity")]
    for e in cards_and_irregularities:
        if e.type == "card":
            (player if e.to == PLAYER else banker).append(e.card or "")
            continue
        d = e.disposition or ""
        if d in VOIDING:
            return _Play(winner=VOID)
        if d == BANKER_COUNT_ZERO:
            zero_from = len(banker)
        elif d == PLAYER_HIGHEST:
            highest = True
        elif d == BANKER_LOWEST:
            lowest = True
        elif d in (BANKER_CARD, PLAYER_CARD) or d in REMOVED:
            if d in REMOVED and e.card not in player + banker:
                # A card found face up in the shoe (4.12(j)) or drawn in error and kept face
                # down (4.12(g)) need not have been logged as dealt to a hand.
                continue
            source = player if d == BANKER_CARD else banker if d == PLAYER_CARD else None
            holders = [source] if source is not None else [player, banker]
            holder = next((h for h in holders if e.card in h), None)
            if holder is None:
                return _Play()
            holder.reverse()
            holder.remove(e.card or "")
            holder.reverse()
            if d == BANKER_CARD:
                banker.append(e.card or "")
            elif d == PLAYER_CARD:
                player.append(e.card or "")
        else:
            return _Play()  # a disposition the replay does not know: not judged
    if len(player) < 2 or (zero_from is None and len(banker) < 2):
        return _Play()
    if highest:
        p = max(count(c) for n in (2, 3) for c in itertools.combinations(player, n))
    else:
        p = count(player)
    if zero_from is not None:
        b = count(banker[zero_from:])
    elif lowest:
        if len(banker) != 4:
            return _Play()
        b = min(count([*banker[:2], extra]) for extra in banker[2:])
    else:
        b = count(banker)
    return _outcome(p, b)


# --- Result, settlement, commission --------------------------------------------------------


def _result_findings(rules: CheminRules, r: _Round, play: _Play) -> list[Finding]:
    if play.winner in (None, VOID) or play.player is None or play.banker is None:
        return []
    want = {"player": play.player, "banker": play.banker, "winner": play.winner}
    if not r.results:
        if not rules.result_due:
            return []
        return [
            _finding(
                "result.misannounced",
                r.end,
                f"No result was announced; the cards make Player {play.player}, Banker "
                f"{play.banker}.",
                want,
                None,
            )
        ]
    found = []
    for e in r.results:
        got = {"player": e.player, "banker": e.banker, "winner": e.winner}
        if got != want:
            found.append(
                _finding(
                    "result.misannounced",
                    e,
                    f"Announced Player {e.player}, Banker {e.banker}, winner {e.winner}; the "
                    f"cards make Player {play.player}, Banker {play.banker}, winner "
                    f"{play.winner}.",
                    want,
                    got,
                )
            )
    return found


_DONE = {PAY: "paid", COLLECT: "collected", PUSH: "returned"}


def _expected(winner: str | None) -> str | None:
    """4.7(g): the participants win when the Player's hand is higher, lose when lower, and
    their wagers are void (returned) when the counts are equal or the hand is void."""
    return {PLAYER: PAY, BANKER: COLLECT, TIE: PUSH, VOID: PUSH}.get(winner or "")


def _settlement_findings(r: _Round, winner: str | None) -> list[Finding]:
    how = _expected(winner)
    by_seat: dict[int, list[Event]] = defaultdict(list)
    for e in r.settlements:
        by_seat[e.seat or 0].append(e)
    found = []
    stakes = r.stakes
    for seat, stake in stakes.items():
        settled = by_seat.get(seat, [])
        name = f"Seat {seat}'s {_money(stake)} wager against the bank"
        want = (
            None
            if how is None
            else {"seat": seat, "wager": _money(stake), "outcome": how, "amount": _money(stake)}
        )
        if not settled:
            found.append(
                _finding(
                    "settle.unsettled",
                    r.end,
                    f"{name} was never collected, paid or returned before the round ended.",
                    want,
                    {"seat": seat, "settlements": []},
                )
            )
            continue
        if how is None:
            continue
        seen = [{"type": e.type, "amount": _money(e.amount), "seq": e.seq} for e in settled]
        wrong = [e for e in settled if e.type != how]
        if wrong:
            did = " and ".join(sorted({_DONE[e.type] for e in settled}))
            found.append(
                _finding(
                    "settle.wrong_outcome",
                    wrong[0],
                    f"{name} should have been {_DONE[how]} {_money(stake)} (4.7(g)) but was {did}.",
                    want,
                    {"seat": seat, "settlements": seen},
                )
            )
            continue
        total = sum((e.amount or ZERO for e in settled), ZERO)
        if total != stake:
            found.append(
                _finding(
                    "settle.wrong_amount",
                    settled[-1],
                    f"{name} should have been {_DONE[how]} {_money(stake)} and was "
                    f"{_DONE[how]} {_money(total)}.",
                    want,
                    {"seat": seat, "outcome": how, "amount": _money(total)},
                )
            )
    for seat, settled in by_seat.items():
        if seat in stakes:
            continue
        found.append(
            _finding(
                "settle.wrong_outcome",
                settled[0],
                f"Seat {seat} had no wager against the bank but one was "
                f"{_DONE[settled[0].type]} ({_money(settled[0].amount)}).",
                None,
                {
                    "seat": seat,
                    "settlements": [
                        {"type": e.type, "amount": _money(e.amount), "seq": e.seq} for e in settled
                    ],
                },
            )
        )
    return found


def _commission_findings(rules: CheminRules, r: _Round, winner: str | None) -> list[Finding]:
    """The commission is the house option's rate of the Banker's winnings (the participants'
    losing wagers), taken from the Banker; none when the Banker did not win."""
    taken = sum((e.amount or ZERO for e in r.commissions), ZERO)
    banker = r.banker_seat
    others = [e for e in r.commissions if banker is not None and e.seat != banker]
    if others:
        e = others[0]
        return [
            _finding(
                "chemin.commission",
                e,
                f"Commission of {_money(e.amount)} was taken from seat {e.seat}; the Banker sits "
                f"at seat {banker}.",
                {"seat": banker},
                {"seat": e.seat, "amount": _money(e.amount), "seq": e.seq},
            )
        ]
    if winner is None:
        return []
    winnings = sum(r.stakes.values(), ZERO) if winner == BANKER else ZERO
    owed = rules.commission(winnings)
    if taken == owed:
        return []
    rate = f"{(rules.commission_rate * 100).normalize():f}%"
    if winner == BANKER:
        owes = f"The Banker won {_money(winnings)}; {rate} commission is {_money(owed)}"
    else:
        owes = "The Banker won nothing this round; no commission is due"
    at = r.commissions[0] if r.commissions else r.end
    return [
        _finding(
            "chemin.commission",
            at,
            f"{owes}, and {_money(taken)} was taken.",
            {"seat": banker, "winnings": _money(winnings), "commission": _money(owed)},
            {"commission": _money(taken), "seqs": [e.seq for e in r.commissions]},
        )
    ]
