"""The planted shoe orders and procedure orders of `simulate` (auditor.simulate.planted):
where a night's shoe-order patterns go, the riffle that makes a weak shuffle, a break in the
alternation of an automated shuffler's batches, and what a round's payments show of the
procedure followed."""

from __future__ import annotations

import json
import random

from auditor.simulate.generator import Night


def order_plan(
    night: Night, shoe_twice: bool, unshuffled: bool
) -> dict[tuple[str, int], tuple[str, str]]:
    """(table, shoe number) -> (order kind, "TABLE#n" of the shoe it repeats, or "")."""
    manual = [s for s in night.tables
              if s.game in ("mini_baccarat", "punto_banco") and s.shuffle == "manual"]
    plan: dict[tuple[str, int], tuple[str, str]] = {}
    if not manual:
        return plan
    first = manual[0]
    if unshuffled:
        plan[(first.table, 2)] = ("weak_shuffle", "")
        if len(manual) > 1:
            plan[(manual[1].table, 1)] = ("pack_run", "")
    if shoe_twice:
        alike = [s for s in manual[1:] if (s.game, s.jurisdiction, s.decks)
                 == (first.game, first.jurisdiction, first.decks)]
        if alike:
            plan[(alike[-1].table, 2)] = ("shoe_twice", f"{first.table}#1")
    return plan


def riffle(cards: list[str], rng: random.Random) -> list[str]:
    """One riffle shuffle (Gilbert-Shannon-Reeds): cut near the middle (binomial), then drop
    cards from either half with chance proportional to what is left in it. Two of them leave
    about a quarter of the neighbouring pairs as they were."""
    cut = sum(rng.random() < 0.5 for _ in cards)
    left, right = cards[:cut], cards[cut:]
    out: list[str] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if rng.random() * (len(left) - i + len(right) - j) < len(left) - i:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out


def alternation_broken(batches: list[str]) -> bool:
    """Whether the last shoe's batch breaks the alternation of two batches: the previous
    shoe's batch, or not the batch of the shoe before that."""
    if len(batches) < 2:
        return False
    if batches[-1] == batches[-2]:
        return True
    return len(batches) >= 3 and batches[-1] != batches[-3]


def shows_order(lines: list[str], declared: int) -> str:
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
