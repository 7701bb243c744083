"""Replay of one punto banco or mini-baccarat round: every deviation from the rule pack, with
the provision it breaks, as Finding values.

`check_round` is the reference the database-backed audit calls per round (and a vectorised
SQL path is tested against). It is pure: the round's events and the table's context in, the
findings out. A correct round gives [].
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from auditor.finding import Finding, fingerprint
from auditor.replay import order as order_rules
from auditor.replay.hands import (
    BANKER,
    PLAYER,
    TIE,
    DealError,
    Hands,
    Outcome,
    deal_error,
    outcome,
    required_draws,
)
from auditor.replay.irregular import listed_kinds, round_irregularities
from auditor.replay.model import Event, TableContext, round_end
from auditor.replay.settle import (
    COLLECT,
    PAY,
    PUSH,
    ZERO,
    Settlement,
    cents,
    expected_settlement,
    vigorish_owed,
)
from auditor.replay.text import DONE, hand_text, money, round_finding

__all__ = [
    "Event",
    "TableContext",
    "announcement_due",
    "check_round",
    "consistent_procedures",
    "in_round",
]

consistent_procedures = order_rules.consistent_procedures

SETTLE_TYPES = (COLLECT, PAY, PUSH)


@dataclass
class _Parts:
    """A round's events sorted by what the checks need, keeping event order within each."""

    events: Sequence[Event]
    cards: list[Event] = field(default_factory=list)
    announces: dict[str, list[Event]] = field(default_factory=lambda: defaultdict(list))
    wagers: list[Event] = field(default_factory=list)
    settlements: list[Event] = field(default_factory=list)  # collect, pay, push
    vigs: list[Event] = field(default_factory=list)
    irregularities: list[Event] = field(default_factory=list)
    void: bool = False

    @classmethod
    def of(cls, events: Sequence[Event]) -> _Parts:
        parts = cls(events)
        for e in events:
            t = e.type
            if t == "card":
                parts.cards.append(e)
            elif t == "wager":
                parts.wagers.append(e)
            elif t in SETTLE_TYPES:
                parts.settlements.append(e)
            elif t == "vig":
                parts.vigs.append(e)
            elif t == "announce":
                parts.announces[e.kind or ""].append(e)
            elif t == "void":
                parts.void = True
            elif t == "irregularity":
                parts.irregularities.append(e)
        return parts

    @property
    def end(self) -> Event | None:
        """The round_end event, where anything still missing shows (else the last event)."""
        return round_end(self.events)


def check_round(ctx: TableContext, events: Sequence[Event]) -> list[Finding]:
    """Every deviation in one round, `events` being its events in seq order (round_start to
    round_end).

    - A void round is only checked for every wager being returned (and no vigorish).
    - After a deal.order error the draw checks are skipped: the tables assume P, B, P, B.
    - An irregularity changes what is checked only when the pack lists its kind and the
      disposition for that kind (replay/irregular.py): a void round is checked as void, a
      redealt round on the cards after it, a card moved or taken out is moved or taken out;
      every other check runs on the hands that leaves. Any other irregularity leaves the
      cards as dealt, and one of a kind the pack does not list is irregularity.unknown_kind.
      Whether the disposition suited the cards is the table pass's irregularity.disposition.
    - Chemin de fer has its own replay; this returns [] for it.
    """
    if ctx.game == "chemin_de_fer":
        return []
    parts = _Parts.of(events)
    found: list[Finding] = []
    if parts.irregularities:
        found += _irregularities(ctx, parts)
    result: Outcome | None = None
    if not parts.void:
        hands = Hands.deal([(e.to or "", e.card or "") for e in parts.cards])
        error = deal_error(hands, ctx.pack.deal_order)
        if error is not None:
            found.append(_deal_order_finding(parts, hands, error))
        else:
            found += _draw_findings(ctx, parts, hands)
        if hands.complete:
            result = outcome(hands)
            found += _result_findings(parts, result)
            found += _announcement_findings(ctx, parts, result)
    expected = _expected_settlements(ctx, parts, result)
    found += _settlement_findings(parts, expected)
    found += _vigorish_findings(ctx, parts, expected, parts.void or result is not None)
    if not parts.void:
        found += _order_findings(ctx, parts)
    return found


def in_round(
    found: Sequence[Finding],
    ctx: TableContext,
    shoe: str,
    round_: int,
    events: Sequence[Event],
    dealer: str | None = None,
) -> list[Finding]:
    """A round's findings placed in it, as the store keeps them: table, pit, shoe and round,
    the time of the event each points at (else the round's first), its source, the round's
    first and last seqs as evidence, the round's `dealer` (the caller knows the round's
    round_start and shoe_start; the events given here need not carry it), and the
    fingerprint code|table|shoe|round|seq|k, where k counts earlier findings of the same code
    at the same event. The dealer stays out of the fingerprint, which never changes."""
    seen: dict[tuple[str, int | None], int] = defaultdict(int)
    evidence = {"round_events": [events[0].seq, events[-1].seq]}
    out = []
    for f in found:
        k = seen[(f.code, f.seq)]
        seen[(f.code, f.seq)] += 1
        at = next((e for e in events if e.seq == f.seq), events[0])
        out.append(
            replace(
                f,
                fingerprint=fingerprint(f.code, ctx.table, shoe, round_, f.seq, k),
                table=ctx.table,
                pit=ctx.pit,
                shoe=shoe,
                round=round_,
                ts=at.ts,
                source=f.source or at.source,
                evidence=evidence,
                rule=ctx.pack.cite(f.code),
                dealer=dealer,
            )
        )
    return out


# --- helpers for messages ----------------------------------------------------------------


_BET_NAMES = {
    "player": "Player",
    "banker": "Banker",
    "tie": "Tie",
    "dragon7": "Dragon 7",
    "panda8": "Panda 8",
}


def _bet_name(bet: str | None) -> str:
    if bet is None:
        return "unnamed"
    if bet.startswith("total_cards_"):
        return f"Total Cards {bet.removeprefix('total_cards_')}"
    return _BET_NAMES.get(bet, bet)


def _winner_text(winner: str | None) -> str:
    if winner == TIE:
        return "a tie"
    return f"a {winner.title()} win" if winner else "no winner"


def _result_text(result: Outcome) -> str:
    if result.winner == TIE:
        return f"a tie at {result.player_count}"
    win, lose = (
        (result.player_count, result.banker_count)
        if result.winner == PLAYER
        else (result.banker_count, result.player_count)
    )
    return f"a {result.winner.title()} win, {win} to {lose}"


# --- irregularities ----------------------------------------------------------------------


def _irregularities(ctx: TableContext, parts: _Parts) -> list[Finding]:
    """Leave in `parts` the cards (and void or not) the round's irregularities make of it, by
    the dispositions the pack gives for their kinds; each irregularity of a kind the pack does
    not list is a finding."""
    effect = round_irregularities(ctx.pack, parts.events)
    parts.cards = list(effect.cards)
    parts.void = parts.void or effect.void
    kinds = sorted(listed_kinds(ctx.pack))
    listed = f"lists {', '.join(repr(k) for k in kinds)}" if kinds else "lists none"
    return [
        round_finding(
            "irregularity.unknown_kind",
            e,
            f"The dealer declared an irregularity of kind {e.kind!r}, which the rule pack "
            f"{ctx.pack.id} does not list ({listed}); its disposition {e.disposition!r} was "
            "not judged and changes nothing in the checks of the round.",
            {"kinds": kinds},
            {"kind": e.kind, "disposition": e.disposition, "card": e.card},
        )
        for e in effect.unknown
    ]


# --- deal and draws ----------------------------------------------------------------------


def _deal_order_finding(parts: _Parts, hands: Hands, error: DealError) -> Finding:
    at = parts.end if error.at is None else parts.cards[error.at]
    return round_finding(
        "deal.order",
        at,
        f"Cards dealt out of order: {error.problem} "
        f"(cards went {', '.join(h.title() for h in hands.order) or 'nowhere'}).",
        {"first_four": [PLAYER, BANKER, PLAYER, BANKER], "max_cards_per_hand": 3},
        {"order": list(hands.order), "player": list(hands.player), "banker": list(hands.banker)},
    )


def _draw_findings(ctx: TableContext, parts: _Parts, hands: Hands) -> list[Finding]:
    required = required_draws(ctx.pack.draw, hands)
    cards = {"player": list(hands.player), "banker": list(hands.banker)}
    found = []
    player_drew = len(hands.player) == 3
    banker_drew = len(hands.banker) == 3
    p2 = hand_text("Player", hands.player[:2])
    b2 = hand_text("Banker", hands.banker[:2])
    if required.player != player_drew:
        if required.player:
            code, at = "draw.player_missed", parts.cards[-1]
            text = f"{p2} had to draw a third card ({b2}) but stood."
        else:
            code, at = "draw.player_extra", _third_card(parts, PLAYER)
            text = f"{p2} had to stand ({b2}) but was given a third card, {hands.player[2]}."
        found.append(
            round_finding(
                code,
                at,
                text,
                {"player_third_card": required.player},
                {"player_third_card": player_drew, **cards},
            )
        )
    if required.banker != banker_drew:
        after = (
            f"after the Player's third card {hands.player[2]}"
            if player_drew
            else "with the Player standing"
        )
        if required.banker:
            code, at = "draw.banker_missed", parts.cards[-1]
            text = f"{b2} had to draw a third card {after} but stood."
        else:
            code, at = "draw.banker_extra", _third_card(parts, BANKER)
            text = f"{b2} had to stand {after} but was given a third card, {hands.banker[2]}."
        found.append(
            round_finding(
                code,
                at,
                text,
                {"banker_third_card": required.banker},
                {"banker_third_card": banker_drew, **cards},
            )
        )
    return found


def _third_card(parts: _Parts, hand: str) -> Event:
    return [e for e in parts.cards if e.to == hand][2]


# --- result and announcements ------------------------------------------------------------


def misannounced(
    announced: Sequence[Event],
    want: dict[str, Any],
    end: Event | None,
    none_said: str,
    wrong: Callable[[Event], str],
) -> list[Finding]:
    """result.misannounced, in both games alike: one at the round's `end` (`none_said`) when no
    result was announced, else one per announcement that is not `want` (`wrong(e)`)."""
    if not announced:
        return [round_finding("result.misannounced", end, none_said, want, None)]
    found = []
    for e in announced:
        got = {"player": e.player, "banker": e.banker, "winner": e.winner}
        if got != want:
            found.append(round_finding("result.misannounced", e, wrong(e), want, got))
    return found


def _result_findings(parts: _Parts, result: Outcome) -> list[Finding]:
    want = {"player": result.player_count, "banker": result.banker_count, "winner": result.winner}
    found = misannounced(
        parts.announces.get("result", []),
        want,
        parts.end,
        f"No result was announced; the cards make {_result_text(result)}.",
        lambda e: f"Announced Player {e.player}, Banker {e.banker}, {_winner_text(e.winner)}; "
        f"the cards make Player {result.player_count}, Banker "
        f"{result.banker_count}, {_winner_text(result.winner)}.",
    )
    if result.winner != TIE:
        for e in parts.announces.get("tie_hand", []):
            found.append(
                round_finding(
                    "result.misannounced",
                    e,
                    f'"Tie Hand" was announced but the cards make {_result_text(result)}.',
                    want,
                    {"announce": "tie_hand"},
                )
            )
    return found


# Announcement kind -> the code raised when it is due and missing.
_MISSING_CODE = {
    "result": "result.misannounced",
    "tie_hand": "announce.tie_missing",
    "dragon_7": "announce.dragon7_missing",
    "total_cards": "announce.total_cards_missing",
    "panda_8": "announce.panda8_missing",
}
_SPOKEN = {
    "tie_hand": '"Tie Hand"',
    "dragon_7": '"dragon 7"',
    "panda_8": '"panda 8"',
    "total_cards": "the number of cards",
}


def announcement_due(when: str, ctx: TableContext, result: Outcome) -> bool:
    """Whether an announcement the pack requires `when` is due in this round."""
    if when == "always":
        return True
    if when == "tie":
        return result.winner == TIE
    if when == "total_card_wagers_offered":
        return ctx.total_card_wagers_offered
    if when == "dragon7_hand":
        return result.dragon7
    if when == "panda8_hand":
        return result.panda8
    raise ValueError(f"unknown announcement condition {when!r}")


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _why_due(kind: str, result: Outcome) -> str:
    if kind == "tie_hand":
        return f"Player and Banker tie at {result.player_count}"
    if kind == "dragon_7":
        return "the Banker wins with a three-card 7 (dragon 7)"
    if kind == "panda_8":
        return "the Player wins with a three-card 8 (panda 8)"
    return f"total card wagers are offered and {result.total_cards} cards were dealt"


def _announcement_findings(ctx: TableContext, parts: _Parts, result: Outcome) -> list[Finding]:
    found = []
    for kind, rule in ctx.pack.announcements.items():
        if kind == "result" or (rule.variants is not None and ctx.variant not in rule.variants):
            continue
        if announcement_due(rule.value, ctx, result) and not parts.announces.get(kind):
            expected: dict[str, Any] = {"announce": kind}
            if kind == "total_cards":
                expected["count"] = result.total_cards
            found.append(
                round_finding(
                    _MISSING_CODE[kind],
                    parts.end,
                    f"{_sentence(_why_due(kind, result))}, but {_SPOKEN[kind]} was not announced.",
                    expected,
                    None,
                )
            )
    for e in parts.announces.get("total_cards", []):
        if e.count != result.total_cards:
            found.append(
                round_finding(
                    "announce.total_cards_wrong",
                    e,
                    f"{e.count} cards were announced; {result.total_cards} were dealt.",
                    {"count": result.total_cards},
                    {"count": e.count},
                )
            )
    return found


# --- settlement --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Wager:
    """All wagers of one seat on one bet in the round, summed, and what they should bring."""

    seat: int
    bet: str
    stake: Decimal
    expected: Settlement | None  # None: outcome unknown, or a wager the pack cannot settle


def _expected_settlements(
    ctx: TableContext, parts: _Parts, result: Outcome | None
) -> dict[tuple[int, str], _Wager]:
    stakes: dict[tuple[int, str], Decimal] = {}
    for e in parts.wagers:
        key = (e.seat or 0, e.bet or "")
        stakes[key] = stakes.get(key, ZERO) + (e.amount or ZERO)
    wagers = {}
    for key, stake in stakes.items():
        if parts.void:
            expected: Settlement | None = Settlement(PUSH, stake)
        elif result is None:
            expected = None
        else:
            expected = expected_settlement(key[1], stake, result, ctx.rules, ctx.pack)
        wagers[key] = _Wager(key[0], key[1], stake, expected)
    return wagers


def _settled_json(events: Sequence[Event]) -> list[dict[str, Any]]:
    return [{"type": e.type, "amount": money(e.amount or ZERO), "seq": e.seq} for e in events]


def _settlement_findings(
    parts: _Parts, wagers: dict[tuple[int, str], _Wager]
) -> list[Finding]:
    by_wager: dict[tuple[int, str], list[Event]] = defaultdict(list)
    for e in parts.settlements:
        by_wager[(e.seat or 0, e.bet or "")].append(e)
    found = []
    for key, w in wagers.items():
        settled = by_wager.get(key, [])
        name = f"Seat {w.seat}'s {money(w.stake)} {_bet_name(w.bet)} wager"
        if not settled:
            found.append(
                round_finding(
                    "settle.unsettled",
                    parts.end,
                    f"{name} was never collected, paid or returned before the round ended.",
                    None if w.expected is None else _settlement_json(w, w.expected),
                    {"seat": w.seat, "bet": w.bet, "settlements": []},
                )
            )
            continue
        if w.expected is None:
            continue
        how, amount = w.expected
        wrong = [e for e in settled if e.type != how]
        if wrong:
            did = " and ".join(sorted({DONE[e.type] for e in settled}))
            found.append(
                round_finding(
                    "settle.wrong_outcome",
                    wrong[0],
                    f"{name} should have been {DONE[how]} {money(amount)} but was {did}.",
                    _settlement_json(w, w.expected),
                    {"seat": w.seat, "bet": w.bet, "settlements": _settled_json(settled)},
                )
            )
            continue
        total = sum((e.amount or ZERO for e in settled), ZERO)
        if total != amount:
            found.append(
                round_finding(
                    "settle.wrong_amount",
                    settled[-1],
                    f"{name} should have been {DONE[how]} {money(amount)} "
                    f"and was {DONE[how]} {money(total)}.",
                    _settlement_json(w, w.expected),
                    {"seat": w.seat, "bet": w.bet, "outcome": how, "amount": money(total)},
                )
            )
    for key, settled in by_wager.items():
        if key in wagers:
            continue
        seat, bet = key
        found.append(
            round_finding(
                "settle.wrong_outcome",
                settled[0],
                f"Seat {seat} had no {_bet_name(bet)} wager but one was "
                f"{DONE[settled[0].type]} ({money(settled[0].amount or ZERO)}).",
                None,
                {"seat": seat, "bet": bet, "settlements": _settled_json(settled)},
            )
        )
    return found


def _settlement_json(w: _Wager, s: Settlement) -> dict[str, Any]:
    return {
        "seat": w.seat,
        "bet": w.bet,
        "wager": money(w.stake),
        "outcome": s.how,
        "amount": money(s.amount),
    }


# --- vigorish ----------------------------------------------------------------------------


def _vigorish_findings(
    ctx: TableContext, parts: _Parts, wagers: dict[tuple[int, str], _Wager], known: bool
) -> list[Finding]:
    """Vigorish per seat: rate x the winnings of its winning Banker wager, collected or marked
    (both count); none at all in a variant without vigorish. `known`: whether the round's
    outcome could be read (else only vig.not_allowed can be judged)."""
    vigs: dict[int, list[Event]] = defaultdict(list)
    for e in parts.vigs:
        vigs[e.seat or 0].append(e)
    variant = ctx.rules
    if not variant.vig_charged.value:
        return [
            round_finding(
                "vig.not_allowed",
                taken[0],
                f"Vigorish of {money(_sum(taken))} was {_vig_verb(taken)} at seat {seat}; "
                f"this table's variant ({variant.name}) charges none.",
                {"seat": seat, "vigorish": money(ZERO)},
                {"seat": seat, "vigorish": money(_sum(taken)), "seqs": [e.seq for e in taken]},
            )
            for seat, taken in vigs.items()
        ]
    if not known:
        return []
    banker = {
        seat: w
        for (seat, bet), w in wagers.items()
        if bet == BANKER and w.expected is not None and w.expected.how == PAY
    }
    found = []
    for seat in sorted(set(banker) | set(vigs), reverse=True):
        w = banker.get(seat)
        owed = vigorish_owed(w.expected.amount, variant) if w and w.expected else cents(ZERO)
        taken = vigs.get(seat, [])
        owes = (
            f"Seat {seat} owed {money(owed)} vigorish on its winning {money(w.stake)} "
            "Banker wager"
            if w
            else f"Seat {seat} had no winning Banker wager and owed no vigorish"
        )
        if not taken:
            if owed > 0:
                found.append(
                    round_finding(
                        "vig.missing",
                        _pay_event(parts, seat) or parts.end,
                        f"{owes}; none was collected or marked.",
                        {"seat": seat, "vigorish": money(owed)},
                        {"seat": seat, "vigorish": None},
                    )
                )
            continue
        got = _sum(taken)
        if got != owed:
            found.append(
                round_finding(
                    "vig.wrong_amount",
                    taken[0],
                    f"{owes}; {money(got)} was {_vig_verb(taken)}.",
                    {"seat": seat, "vigorish": money(owed)},
                    {"seat": seat, "vigorish": money(got), "seqs": [e.seq for e in taken]},
                )
            )
    return found


def _sum(events: Sequence[Event]) -> Decimal:
    return sum((e.amount or ZERO for e in events), ZERO)


def _vig_verb(events: Sequence[Event]) -> str:
    modes = sorted({e.mode or "collect" for e in events})
    return " and ".join("marked" if m == "mark" else "collected" for m in modes)


def _pay_event(parts: _Parts, seat: int) -> Event | None:
    for e in parts.settlements:
        if e.type == PAY and e.seat == seat and e.bet == BANKER:
            return e
    return None


# --- order of collections, payments and vigorish -----------------------------------------


def _order_findings(ctx: TableContext, parts: _Parts) -> list[Finding]:
    """Losers first (13:69F-7.10(b); NZ rule 10.2), then the procedure in force, if any."""
    found = []
    moves = [e for e in parts.events if e.type in (COLLECT, PAY, "vig")]
    first_paid = next((i for i, e in enumerate(moves) if e.type != COLLECT), None)
    if first_paid is not None:
        late = [e for e in moves[first_paid:] if e.type == COLLECT]
        if late:
            paid = moves[first_paid]
            what = "paid" if paid.type == PAY else "charged vigorish"
            found.append(
                round_finding(
                    "order.collect_after_pay",
                    late[0],
                    f"Seat {late[0].seat}'s losing {money(late[0].amount or ZERO)} "
                    f"{_bet_name(late[0].bet)} wager was collected after seat {paid.seat} "
                    f"was {what}; losing wagers are collected first.",
                    {"collect_before_seq": paid.seq},
                    {
                        "late_collections": [
                            {
                                "seat": e.seat,
                                "bet": e.bet,
                                "amount": money(e.amount or ZERO),
                                "seq": e.seq,
                            }
                            for e in late
                        ]
                    },
                )
            )
    procedure = ctx.procedure
    if procedure is None or procedure not in ctx.pack.procedures:
        return found
    charged = bool(ctx.rules.vig_charged.value)
    pays_and_vigs = [(e.type, e.seat or 0) for e in moves if e.type != COLLECT]
    fits = order_rules.consistent_procedures(pays_and_vigs, charged)
    if procedure in fits:
        return found
    observed = order_rules.steps(pays_and_vigs, charged)
    required = order_rules.required_order(procedure, observed)
    step_events = _step_events(moves, charged)
    at = step_events[order_rules.first_departure(observed, required)]
    fit_text = (
        f"fits procedure {', '.join(map(str, sorted(fits)))}" if fits else "fits no procedure"
    )
    found.append(
        round_finding(
            "order.procedure_mismatch",
            at,
            f"Procedure {procedure} is in force, but the dealer {_steps_text(observed)} "
            f"({fit_text}); procedure {procedure} requires: {_steps_text(required)}.",
            {"procedure": procedure, "order": _steps_json(required)},
            {"order": _steps_json(observed), "consistent_procedures": sorted(fits)},
        )
    )
    return found


def _step_events(moves: Sequence[Event], charged: bool) -> list[Event]:
    """The first event of each step, aligned with order.steps()."""
    out: list[Event] = []
    last: tuple[str, int] | None = None
    for e in moves:
        if e.type == COLLECT or (e.type == "vig" and not charged):
            continue
        key = (e.type, e.seat or 0)
        if key != last:
            out.append(e)
            last = key
    return out


def _steps_json(steps: Sequence[tuple[str, int]]) -> list[str]:
    return [f"{kind} {seat}" for kind, seat in steps]


def _steps_text(steps: Sequence[tuple[str, int]]) -> str:
    return ", ".join(
        f"paid seat {seat}" if kind == order_rules.PAY else f"took vigorish at seat {seat}"
        for kind, seat in steps
    )
