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

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from auditor.finding import Finding
from auditor.replay.chemin_cards import Play, judge_cards, kept_card_findings
from auditor.replay.chemin_model import VOID, CheminRound, CheminRules, History, RoundFacts, attr
from auditor.replay.hands import BANKER, PLAYER, TIE
from auditor.replay.model import Event, TableContext
from auditor.replay.round import misannounced
from auditor.replay.settle import COLLECT, PAY, PUSH, ZERO
from auditor.replay.text import DONE, money, round_finding

__all__ = [
    "check_chemin_round",
    "replay_chemin_round",
    "round_facts",
]

SUIVI, SEUL, PARTIAL = "suivi", "seul", "partial"
_RANK = {SUIVI: 0, SEUL: 1, PARTIAL: 2}  # 4.7(b)-(d): the order of preference


# --- Messages ------------------------------------------------------------------------------


def _banco_json(e: Event) -> dict[str, Any]:
    return {"seq": e.seq, "seat": e.seat, "kind": e.kind, "amount": money(e.amount)}


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
    r = CheminRound.of(events)
    found: list[Finding] = []
    found += _priority_findings(ctx, r, history)
    found += _over_bank_findings(r)
    found += _late_findings(r)
    found += _bank_pass_findings(rules, r, history)
    found += kept_card_findings(r, history)
    play = judge_cards(ctx, rules, r, history, found)
    found += _result_findings(rules, r, play)
    found += _settlement_findings(r, play.winner)
    found += _commission_findings(rules, r, play.winner)
    return found, _facts(r, play)


def _facts(r: CheminRound, play: Play) -> RoundFacts:
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
        passes=tuple((attr(e, "from_seat") or 0, attr(e, "to_seat") or 0) for e in after),
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


def _priority_findings(ctx: TableContext, r: CheminRound, history: History) -> list[Finding]:
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
                    f"seat {seat}'s banco {kind} of {money(e.amount)} does not "
                    f"equal the bank of {money(bank)} (4.7(b),(c))",
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
        round_finding(
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
                "bank": money(bank),
                "suivi_entitled": None if entitled is None else list(entitled),
            },
            {
                "wagers": [_banco_json(e) for e in accepted],
                "departures": [{"seq": e.seq, "problem": text} for e, text in departures],
            },
        )
    ]


def _over_bank_findings(r: CheminRound) -> list[Finding]:
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
                round_finding(
                    "chemin.over_bank",
                    e,
                    f"Wagers against the bank total {money(everything)}, more than the bank of "
                    f"{money(bank)}; seat {e.seat}'s {money(e.amount)} took them past it.",
                    {"bank": money(bank), "max_total": money(bank)},
                    {"total": money(everything), "wagers": [_banco_json(b) for b in r.bancos]},
                )
            ]
    return []


def _late_findings(r: CheminRound) -> list[Finding]:
    """4.7(e): nothing made, raised or withdrawn after "No more bets", except the Banker
    withdrawing the part of the bank no wager covers."""
    if r.no_more_bets is None:
        return []
    found = []
    for e in r.bancos:
        if not r.before_no_more_bets(e):
            found.append(
                round_finding(
                    "chemin.late_wager",
                    e,
                    f"Seat {e.seat}'s {e.kind} wager of {money(e.amount)} against the bank was "
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
            problem = f"raised the bank from {money(bank)} to {money(e.amount)}"
        elif e.amount < covered:
            problem = (
                f"cut the bank to {money(e.amount)}, below the {money(covered)} the "
                "wagers against it covered"
            )
        else:
            continue
        found.append(
            round_finding(
                "chemin.late_wager",
                e,
                f'The Banker at seat {e.seat} {problem} after "No more bets"; only the '
                "uncovered part may be withdrawn.",
                {"bank_between": [money(covered), money(bank)]},
                {"seat": e.seat, "bank": money(e.amount), "seq": e.seq},
            )
        )
    return found


# --- The bank passing ----------------------------------------------------------------------


def _bank_pass_findings(rules: CheminRules, r: CheminRound, history: History) -> list[Finding]:
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
        (attr(e, "from_seat") or 0, attr(e, "to_seat") or 0)
        for e in r.passes
        if e.seq < first_bank.seq
    ]
    holder = prev.banker_seat if prev is not None else None
    expected: dict[str, Any] = {"banker_seat": holder, "passes": passes}
    for src, dst in passes:
        if holder is not None and src != holder:
            return [
                round_finding(
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
            round_finding(
                "chemin.bank_pass",
                first_bank,
                f"Seat {banker} put up the bank, but {text}.",
                expected,
                {"banker_seat": banker},
            )
        ]
    if prev is not None and not passes and prev.winner == PLAYER and rules.pass_when_banker_loses:
        return [
            round_finding(
                "chemin.bank_pass",
                first_bank,
                f"The Banker at seat {banker} lost round {prev.round} and kept the bank; at this "
                "table the bank passes when the Banker loses (house option).",
                {"bank_passes_from": banker},
                {"banker_seat": banker, "previous_round": prev.round, "previous_winner": PLAYER},
            )
        ]
    return []


# --- Result, settlement, commission --------------------------------------------------------


def _result_findings(rules: CheminRules, r: CheminRound, play: Play) -> list[Finding]:
    if play.winner in (None, VOID) or play.player is None or play.banker is None:
        return []
    if not r.results and not rules.result_due:
        return []
    return misannounced(
        r.results,
        {"player": play.player, "banker": play.banker, "winner": play.winner},
        r.end,
        f"No result was announced; the cards make Player {play.player}, Banker "
        f"{play.banker}.",
        lambda e: f"Announced Player {e.player}, Banker {e.banker}, winner {e.winner}; the "
        f"cards make Player {play.player}, Banker {play.banker}, winner {play.winner}.",
    )


def _expected(winner: str | None) -> str | None:
    """4.7(g): the participants win when the Player's hand is higher, lose when lower, and
    their wagers are void (returned) when the counts are equal or the hand is void."""
    return {PLAYER: PAY, BANKER: COLLECT, TIE: PUSH, VOID: PUSH}.get(winner or "")


def _settlement_findings(r: CheminRound, winner: str | None) -> list[Finding]:
    how = _expected(winner)
    by_seat: dict[int, list[Event]] = defaultdict(list)
    for e in r.settlements:
        by_seat[e.seat or 0].append(e)
    found = []
    stakes = r.stakes
    for seat, stake in stakes.items():
        settled = by_seat.get(seat, [])
        name = f"Seat {seat}'s {money(stake)} wager against the bank"
        want = (
            None
            if how is None
            else {"seat": seat, "wager": money(stake), "outcome": how, "amount": money(stake)}
        )
        if not settled:
            found.append(
                round_finding(
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
        seen = [{"type": e.type, "amount": money(e.amount), "seq": e.seq} for e in settled]
        wrong = [e for e in settled if e.type != how]
        if wrong:
            did = " and ".join(sorted({DONE[e.type] for e in settled}))
            found.append(
                round_finding(
                    "settle.wrong_outcome",
                    wrong[0],
                    f"{name} should have been {DONE[how]} {money(stake)} (4.7(g)) but was {did}.",
                    want,
                    {"seat": seat, "settlements": seen},
                )
            )
            continue
        total = sum((e.amount or ZERO for e in settled), ZERO)
        if total != stake:
            found.append(
                round_finding(
                    "settle.wrong_amount",
                    settled[-1],
                    f"{name} should have been {DONE[how]} {money(stake)} and was "
                    f"{DONE[how]} {money(total)}.",
                    want,
                    {"seat": seat, "outcome": how, "amount": money(total)},
                )
            )
    for seat, settled in by_seat.items():
        if seat in stakes:
            continue
        found.append(
            round_finding(
                "settle.wrong_outcome",
                settled[0],
                f"Seat {seat} had no wager against the bank but one was "
                f"{DONE[settled[0].type]} ({money(settled[0].amount)}).",
                None,
                {
                    "seat": seat,
                    "settlements": [
                        {"type": e.type, "amount": money(e.amount), "seq": e.seq} for e in settled
                    ],
                },
            )
        )
    return found


def _commission_findings(rules: CheminRules, r: CheminRound, winner: str | None) -> list[Finding]:
    """The commission is the house option's rate of the Banker's winnings (the participants'
    losing wagers), taken from the Banker; none when the Banker did not win."""
    taken = sum((e.amount or ZERO for e in r.commissions), ZERO)
    banker = r.banker_seat
    others = [e for e in r.commissions if banker is not None and e.seat != banker]
    if others:
        e = others[0]
        return [
            round_finding(
                "chemin.commission",
                e,
                f"Commission of {money(e.amount)} was taken from seat {e.seat}; the Banker sits "
                f"at seat {banker}.",
                {"seat": banker},
                {"seat": e.seat, "amount": money(e.amount), "seq": e.seq},
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
        owes = f"The Banker won {money(winnings)}; {rate} commission is {money(owed)}"
    else:
        owes = "The Banker won nothing this round; no commission is due"
    at = r.commissions[0] if r.commissions else r.end
    return [
        round_finding(
            "chemin.commission",
            at,
            f"{owes}, and {money(taken)} was taken.",
            {"seat": banker, "winnings": money(winnings), "commission": money(owed)},
            {"commission": money(taken), "seqs": [e.seq for e in r.commissions]},
        )
    ]
