"""Irregularities the dealer declared (`irregularity` events) at mini-baccarat and punto banco
tables, against the rule pack: `irregularities.<kind>` maps each situation of a kind to the
dispositions allowed in it (chemin de fer has its own replay, auditor.replay.chemin).

Two parts, both pure:

- `round_irregularities`, for the round replay: what a round's irregularities change in what
  it checks. Only a kind the pack lists, resolved by a disposition the pack lists for it,
  changes anything (the round void, the cards dealt again, a card moved or taken out of the
  round); anything else leaves the cards as dealt for every check, and a kind the pack does
  not list is itself a finding (`irregularity.unknown_kind`). A declaration can thus never
  hide a draw or a settlement the rules do not allow.
- `irregularity_findings`, for the table pass: whether each disposition is one the pack allows
  in its situation (`irregularity.disposition`). NZ rule 12.2 (`player_extra_card`: a third
  card dealt to the Player's hand when none is authorised becomes the Banker's third card if
  the Banker must draw; else the first card of the next round, "No bets this hand" if it was
  disclosed, or a reshuffle) has a judge that reads its situation from the cards; any other
  listed kind is judged against the dispositions the pack lists for it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from auditor.finding import Finding, fingerprint
from auditor.replay.hands import BANKER, PLAYER, Hands, count, deal_error
from auditor.replay.model import Event
from auditor.replay.text import iso
from auditor.rules.pack import CHEMIN, RulePack

PLAYER_EXTRA_CARD = "player_extra_card"
CODE = "irregularity.disposition"
ANY = "any"  # the situation of a kind whose dispositions do not depend on the cards

# --- What a disposition does to the round it is declared in --------------------------------
# The dispositions the round replay applies at a mini-baccarat or punto banco table; a pack
# may list others (they are judged) but they change nothing in the round's checks.
# The round does not count: every wager is returned (as after a `void` event).
ROUND_VOID = "round_void"
# The cards dealt before the irregularity are set aside; the round is dealt again, and the
# cards after the `irregularity` event are its hands.
ROUND_REDEALT = "round_redealt"
# The named card leaves the Player's hand and is the Banker's third card (NZ rule 12.2).
BANKER_THIRD_CARD = "banker_third_card"
# The named card leaves the round (NZ rule 12.2: kept for the next round, disclosed and
# "No bets this hand", or the cards reshuffled before the next round).
CARD_OUT = frozenset({"next_round_first_card", "no_bets_this_hand", "reshuffled"})


def listed_kinds(pack: RulePack) -> dict[str, dict[str, tuple[str, ...]]]:
    """The pack's irregularities.<kind> tables: kind -> situation -> dispositions allowed."""
    return {
        name.removeprefix("irregularities."): {
            str(situation): tuple(str(d) for d in allowed)
            for situation, allowed in entry.value.items()
        }
        for name, entry in pack.entries.items()
        if name.startswith("irregularities.") and isinstance(entry.value, Mapping)
    }


def allowed_anywhere(situations: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """Every disposition a kind's table allows in some situation, in the pack's order."""
    return tuple(dict.fromkeys(d for allowed in situations.values() for d in allowed))


# --- The round replay: what a round's irregularities leave to check ------------------------


@dataclass(frozen=True)
class RoundIrregularities:
    """A round's cards as its irregularities' dispositions leave them, for the round replay.

    `cards`: the card events the hands are made of, in shoe order (a card moved to the Banker
    keeps its event, with `to` changed); `void`: a disposition made the round void; `unknown`:
    the irregularity events of kinds the pack does not list.
    """

    cards: tuple[Event, ...]
    void: bool
    unknown: tuple[Event, ...]


def round_irregularities(pack: RulePack, events: Sequence[Event]) -> RoundIrregularities:
    """Apply, in event order, the dispositions of `events`' irregularities to its cards.

    A disposition has an effect only when the pack lists the irregularity's kind and lists the
    disposition for that kind (in any situation: whether it was the right one for the cards is
    the table pass's `irregularity.disposition`). A card to move or take out must be named by
    the event and found where the disposition takes it from; otherwise, and for any other
    irregularity, the cards stay as dealt and the round gets every check on them.
    """
    kinds = listed_kinds(pack)
    cards: list[Event] = []
    void = False
    unknown: list[Event] = []
    for e in events:
        if e.type == "card":
            cards.append(e)
            continue
        if e.type != "irregularity":
            continue
        situations = kinds.get(e.kind or "")
        if situations is None:
            unknown.append(e)
            continue
        disposition = e.disposition or ""
        if disposition not in allowed_anywhere(situations):
            continue
        if disposition == ROUND_VOID:
            void = True
        elif disposition == ROUND_REDEALT:
            cards = []
        elif e.card is not None and (disposition == BANKER_THIRD_CARD or disposition in CARD_OUT):
            hands = (PLAYER,) if disposition == BANKER_THIRD_CARD else (PLAYER, BANKER)
            at = next((i for i in range(len(cards) - 1, -1, -1)
                       if cards[i].card == e.card and cards[i].to in hands), None)
            if at is None:
                continue  # not where the disposition takes it from: nothing moves
            if disposition == BANKER_THIRD_CARD:
                cards[at] = replace(cards[at], to=BANKER)
            else:
                del cards[at]
    return RoundIrregularities(tuple(cards), void, tuple(unknown))


# --- The table pass: each disposition against the pack --------------------------------------


@dataclass(frozen=True)
class Irregularity:
    """One irregularity event with its round's cards and the next round's first card."""

    table: str
    pit: str | None
    shoe: str
    round: int
    seq: int
    ts: dt.datetime
    source: str
    kind: str
    disposition: str
    card: str | None
    cards: tuple[tuple[str, str], ...]  # the round's (to, card) in shoe order
    next_first_card: str | None  # the first card of the next round of the shoe, if any


def _finding(irr: Irregularity, key: str, message: str, expected: Any,
             observed: Any) -> Finding:
    return Finding(
        code=CODE,
        fingerprint=fingerprint(CODE, irr.table, irr.shoe, irr.round, irr.seq, key),
        table=irr.table, pit=irr.pit, shoe=irr.shoe, round=irr.round, seq=irr.seq, ts=irr.ts,
        message=message, expected=expected, observed=observed, source=irr.source,
        evidence={"tables": [irr.table], "pit": irr.pit, "shoe": irr.shoe,
                  "events": [{"table": irr.table, "shoe": irr.shoe, "round": irr.round,
                              "seq": irr.seq, "ts": iso(irr.ts), "type": "irregularity",
                              "source": irr.source}]},
    )


def judge_player_extra_card(
    irr: Irregularity, pack: RulePack, allowed: Mapping[str, Sequence[str]]
) -> list[Finding]:
    """NZ rule 12.2. The first four cards decide: if either hand has a natural or the Player's
    two cards stand, no third card was authorised; then the Banker's own draw (the pack's
    tableau for a Player who stood) says whether the card becomes the Banker's third card
    (`banker_must_draw`) or is kept for the next round / voided / reshuffled
    (`banker_must_stand`). A card kept for the next round must be that round's first card."""
    first = Hands.deal(irr.cards[:4])
    if len(first.order) < 4 or deal_error(first, pack.deal_order) is not None:
        return []
    draw = pack.draw
    p2, b2 = count(first.player), count(first.banker)
    natural = draw.natural[p2] or draw.natural[b2]
    where = f"{irr.table} shoe {irr.shoe} round {irr.round}"
    hands = {"player": list(first.player), "banker": list(first.banker)}
    if not natural and draw.player[p2]:
        return [_finding(
            irr, "entitled",
            f"{where}: a third card to the Player was declared an irregularity, but the "
            f"Player's hand ({p2}) was entitled to one (rule 9.4).",
            {"player_third_card": True}, {"kind": irr.kind, **hands},
        )]
    must_draw = not natural and draw.banker[b2 * 11 + 10]
    situation = "banker_must_draw" if must_draw else "banker_must_stand"
    ok = tuple(allowed.get(situation, ()))
    banker = f"the Banker's hand ({b2}) {'must draw' if must_draw else 'must stand'}"
    if irr.disposition not in ok:
        return [_finding(
            irr, "disposition",
            f"{where}: the card dealt to the Player in error ({irr.card or 'unnamed'}) was "
            f"resolved as {irr.disposition!r}; {banker}, so the rules allow "
            f"{' or '.join(repr(d) for d in ok)}.",
            {"dispositions": list(ok), "banker": situation},
            {"disposition": irr.disposition, "card": irr.card, **hands},
        )]
    if (irr.disposition == "next_round_first_card" and irr.card is not None
            and irr.next_first_card is not None and irr.next_first_card != irr.card):
        return [_finding(
            irr, "next_round",
            f"{where}: {irr.card}, dealt to the Player in error, was to be the first card of "
            f"the next round, which began with {irr.next_first_card}.",
            {"next_round_first_card": irr.card},
            {"next_round_first_card": irr.next_first_card},
        )]
    return []


def judge_listed(
    irr: Irregularity, pack: RulePack, allowed: Mapping[str, Sequence[str]]
) -> list[Finding]:
    """A kind the pack lists and no judge here reads the situation of: the disposition must be
    one the pack allows for the kind, in situation `any` when it has one, else in some
    situation (a disposition no situation allows is wrong whatever the cards)."""
    ok = tuple(allowed[ANY]) if ANY in allowed else allowed_anywhere(allowed)
    if irr.disposition in ok:
        return []
    where = f"{irr.table} shoe {irr.shoe} round {irr.round}"
    return [_finding(
        irr, "disposition",
        f"{where}: irregularity {irr.kind!r} was resolved as {irr.disposition!r}; the rule "
        f"pack {pack.id} allows {' or '.join(repr(d) for d in ok) or 'no disposition'}.",
        {"kind": irr.kind, "dispositions": list(ok)},
        {"disposition": irr.disposition, "card": irr.card},
    )]


JUDGES = {PLAYER_EXTRA_CARD: judge_player_extra_card}


def irregularity_findings(
    found: Sequence[Irregularity], pack_of: Mapping[str, RulePack | None]
) -> tuple[list[Finding], int]:
    """Findings for the irregularities of kinds a pack lists, and how many were not judged
    here: no usable pack, a kind the pack does not list (the round replay reports it as
    irregularity.unknown_kind), or a chemin de fer table (judged by its own replay)."""
    out: list[Finding] = []
    unjudged = 0
    for irr in found:
        pack = pack_of.get(irr.table)
        allowed = None if pack is None or pack.game == CHEMIN else listed_kinds(pack).get(
            irr.kind)
        if pack is None or allowed is None:
            unjudged += 1
            continue
        out += JUDGES.get(irr.kind, judge_listed)(irr, pack, allowed)
    return out, unjudged
