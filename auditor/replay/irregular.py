"""Irregularities the dealer declared (`irregularity` events), judged against the dispositions
the table's rule pack allows: `irregularities.<kind>` maps each situation to its dispositions.

Only NZ rule 12.2 is in the packs so far (a third card dealt to the Player's hand when none is
authorised: the Banker's third card if the Banker must draw; else the first card of the next
round, "No bets this hand" if it was disclosed, or a reshuffle). A kind the pack does not list
is not judged (counted in the audit summary), never passed as correct.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from auditor.replay.hands import Hands, count, deal_error
from auditor.replay.tables import TableFinding, iso
from auditor.rules.pack import RulePack

PLAYER_EXTRA_CARD = "player_extra_card"
CODE = "irregularity.disposition"


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
             observed: Any) -> TableFinding:
    return TableFinding(
        code=CODE,
        fingerprint="|".join([CODE, irr.table, irr.shoe, str(irr.round), str(irr.seq), key]),
        table=irr.table, pit=irr.pit, shoe=irr.shoe, round=irr.round, seq=irr.seq, ts=irr.ts,
        message=message, expected=expected, observed=observed, source=irr.source,
        evidence={"tables": [irr.table], "pit": irr.pit, "shoe": irr.shoe,
                  "events": [{"table": irr.table, "shoe": irr.shoe, "round": irr.round,
                              "seq": irr.seq, "ts": iso(irr.ts), "type": "irregularity",
                              "source": irr.source}]},
    )


def judge_player_extra_card(
    irr: Irregularity, pack: RulePack, allowed: Mapping[str, Sequence[str]]
) -> list[TableFinding]:
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


JUDGES = {PLAYER_EXTRA_CARD: judge_player_extra_card}


def irregularity_findings(
    found: Sequence[Irregularity], pack_of: Mapping[str, RulePack | None]
) -> tuple[list[TableFinding], int]:
    """Findings for the irregularities a pack lists, and how many could not be judged."""
    out: list[TableFinding] = []
    unjudged = 0
    for irr in found:
        pack = pack_of.get(irr.table)
        allowed = None if pack is None else pack.value(f"irregularities.{irr.kind}")
        judge = JUDGES.get(irr.kind)
        if allowed is None or judge is None or pack is None:
            unjudged += 1
            continue
        out += judge(irr, pack, allowed)
    return out, unjudged
