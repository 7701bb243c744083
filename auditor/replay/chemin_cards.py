"""Chemin de fer's cards: the deal and the drawing tableau with its option cells (chemin.option,
chemin.option_not_followed, draw.*, deal.order), the irregularities of 13:69F-4.12 against the
pack, and the outcome the cards leave once the dispositions are applied.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from auditor.finding import Finding
from auditor.replay.chemin_model import (
    AFTER_STAY,
    ANY,
    BANKER_CARD,
    BANKER_COUNT_ZERO,
    BANKER_LOWEST,
    CUT_IN,
    CUT_OUT,
    MAY_DRAW,
    MUST_DRAW,
    MUST_STAY,
    NEXT_HAND_FIRST_CARD,
    PLAYER_CARD,
    PLAYER_HIGHEST,
    REMOVED,
    UNDISCLOSED,
    VOID,
    VOIDING,
    CheminRound,
    CheminRules,
    History,
    attr,
)
from auditor.replay.hands import BANKER, PLAYER, TIE, Hands, count, deal_error, value
from auditor.replay.model import Event, TableContext
from auditor.replay.text import hand_text, round_finding
from auditor.rules.pack import DRAW, OPTION


def kept_card_findings(r: CheminRound, history: History) -> list[Finding]:
    """4.12(g): a card kept for the next hand is that hand's first card."""
    prev = history.previous
    if prev is None or prev.kept_card is None or not r.cards:
        return []
    first = r.cards[0]
    if prev.shoe != first.shoe or first.card == prev.kept_card:
        return []
    return [
        round_finding(
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
class Play:
    """The round's outcome as the checks need it: winner (None: unknown, "void": void),
    the counts, and a card kept for the next hand."""

    winner: str | None = None
    player: int | None = None
    banker: int | None = None
    hands: Hands | None = None
    kept_card: str | None = None


def judge_cards(
    ctx: TableContext,
    rules: CheminRules,
    r: CheminRound,
    history: History,
    found: list[Finding],
) -> Play:
    """Judge the deal, draws and irregularities (appending to `found`) and read the outcome."""
    if r.void_event is not None:
        kept = _irregularity_findings(ctx, rules, r, history, found)
        return Play(winner=VOID, kept_card=kept)
    hands = Hands.deal([(e.to or "", e.card or "") for e in r.cards])
    if r.irregularities:
        kept = _irregularity_findings(ctx, rules, r, history, found)
        known = all((e.kind or "") in rules.irregularities for e in r.irregularities)
        play = _irregular_outcome(r) if known else Play()
        play.kept_card = kept
        return play
    error = deal_error(hands, ctx.pack.deal_order)
    if error is not None:
        at = r.end if error.at is None else r.cards[error.at]
        found.append(
            round_finding(
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
        return Play(hands=hands)
    return _outcome(count(hands.player), count(hands.banker), hands)


def _outcome(player: int, banker: int, hands: Hands | None = None) -> Play:
    winner = PLAYER if player > banker else BANKER if banker > player else TIE
    return Play(winner=winner, player=player, banker=banker, hands=hands)


def _declared(r: CheminRound, hand: str) -> Event | None:
    for e in r.options:
        if attr(e, "hand") == hand:
            return e
    return None


def _draw_findings(rules: CheminRules, r: CheminRound, hands: Hands) -> list[Finding]:
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
        where = hand_text(name, own[:2])
        if hand == BANKER:
            where += (
                f" after the Player's third card {hands.player[2]}"
                if player_drew
                else " with the Player standing"
            )
        declared = _declared(r, hand)
        choice = None if declared is None else attr(declared, "choice")
        wants = None if choice is None else choice == "card"
        if cell == OPTION:
            if wants is not None and wants != drew:
                did = f"was given a third card, {own[at_third]}" if drew else "stood"
                found.append(
                    round_finding(
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
            option = round_finding(
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
                round_finding(
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
    rules: CheminRules, kind: str, r: CheminRound, irr: Event, history: History
) -> str | None:
    """Which of the pack's situations applies to an irregularity, None if the log cannot tell.

    (e), (f): the Banker's cell with the Dominant Player standing, from the first four cards.
    (g) undisclosed: whether the cutting card was out of the shoe (its cut_card round before
    this one); in the very round the cutting card came out the log cannot tell.
    """
    if kind in AFTER_STAY:
        first = Hands.deal([(e.to or "", e.card or "") for e in r.cards[:4]])
        if len(first.player) < 2 or len(first.banker) < 2:
            return None
        cell = rules.banker_cell(count(first.player[:2]), count(first.banker[:2]), None)
        return {DRAW: MUST_DRAW, OPTION: MAY_DRAW}.get(cell, MUST_STAY)
    if kind == UNDISCLOSED:
        cut, rnd = history.cut_card_round, irr.round
        if cut is None or rnd is None or cut > rnd:
            return CUT_IN
        return CUT_OUT if cut < rnd else None
    return ANY


def _irregularity_findings(
    ctx: TableContext,
    rules: CheminRules,
    r: CheminRound,
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
                round_finding(
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
                round_finding(
                    "irregularity.chemin_disposition",
                    irr,
                    f"Irregularity {kind!r}{when} was resolved as {disposition!r}; the rules "
                    f"allow {' or '.join(repr(d) for d in allowed) or 'no disposition here'}.",
                    {"kind": kind, "situation": situation, "dispositions": list(allowed)},
                    {"disposition": disposition, "card": irr.card},
                )
            )
    return kept


def _irregular_outcome(r: CheminRound) -> Play:
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
            return Play(winner=VOID)
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
                return Play()
            holder.reverse()
            holder.remove(e.card or "")
            holder.reverse()
            if d == BANKER_CARD:
                banker.append(e.card or "")
            elif d == PLAYER_CARD:
                player.append(e.card or "")
        else:
            return Play()  # a disposition the replay does not know: not judged
    if len(player) < 2 or (zero_from is None and len(banker) < 2):
        return Play()
    if highest:
        p = max(count(c) for n in (2, 3) for c in itertools.combinations(player, n))
    else:
        p = count(player)
    if zero_from is not None:
        b = count(banker[zero_from:])
    elif lowest:
        if len(banker) != 4:
            return Play()
        b = min(count([*banker[:2], extra]) for extra in banker[2:])
    else:
        b = count(banker)
    return _outcome(p, b)
