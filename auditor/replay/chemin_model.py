"""The values chemin de fer's replay works on: its events, what a round leaves for the rounds
after it (RoundFacts, History), the pack's chemin de fer rules resolved once (CheminRules, with
the vocabulary of 13:69F-4.12 dispositions), and a round's events sorted by what the checks
need (CheminRound). Pure, like the rest of replay/.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import Any

from auditor.replay.hands import TIE
from auditor.replay.model import Event, round_end
from auditor.replay.settle import COLLECT, PAY, PUSH, ROUNDING, ZERO, share
from auditor.rules.draw import STOOD
from auditor.rules.pack import DRAW, OPTION, STAND, RulePack, RulePackError

VOID = "void"

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
AFTER_STAY = ("card_after_stay", "card_after_stay_card_called")
UNDISCLOSED = "card_drawn_undisclosed"

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
            if kind == UNDISCLOSED:
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
        rounding = self.commission_rounding
        return share(winnings, self.commission_rate,
                     rounding if rounding in ROUNDING else "exact_cents")


_RULES: dict[tuple[str, str], CheminRules] = {}


# --- The round sorted by what the checks need ----------------------------------------------


def attr(e: Event, name: str) -> Any:
    """A field only some events carry (CheminEvent's), None on a plain Event."""
    return getattr(e, name, None)


@dataclass
class CheminRound:
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
    def of(cls, events: Sequence[Event]) -> CheminRound:
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
        return round_end(self.events)

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

