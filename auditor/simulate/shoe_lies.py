"""Shoe lies (issue 28), planted only when asked: a shoe with a card too many whose log hides it.
The round in which the one copy too many came out is logged under another shoe id, and the
shoe's `shoe_end` says as many more cards were left as that round took, so that the shoe's
counts balance as logged. The audit must still find the shoe's composition (the card too
many, and the count in all that the raised `remaining` breaks) and name the lie:

- `phantom_shoe`: the round logged in a shoe id one character off the real one
  (`MB-01-1201-01` -> `MB-01-1201-0l`), a shoe never started (shoe.not_started);
- `earlier_shoe`: the round logged as the next round of the table's previous shoe, which had
  ended (shoe.reopened).

`plan` says which table and shoe each goes to; the table's player forces a card too many
into that shoe (kinds.SHOE_KINDS' extra_card) and `relabel` edits its lines at the end.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from auditor.rules.cards import parse_card
from auditor.simulate.generator import Night

# Look-alike characters for the phantom id's last character (the alphabet ids are held to).
LOOK_ALIKE = {"1": "l", "l": "1", "0": "O", "O": "0", "5": "S", "S": "5", "2": "Z", "Z": "2",
              "8": "B", "B": "8"}


@dataclass(frozen=True)
class Lie:
    """One shoe lie at one table: its kind and the number of the shoe (1 the first)."""

    kind: str
    shoe_no: int


def plan(night: Night, phantom_shoe: bool, earlier_shoe: bool) -> dict[str, list[Lie]]:
    """Table -> the lies it carries: the phantom shoe in the first banking table's first shoe,
    the return to an earlier shoe in the second shoe of the next banking table (the same
    table when there is one). A night of chemin de fer alone carries none."""
    banking = [s.table for s in night.tables if s.game in ("mini_baccarat", "punto_banco")]
    out: dict[str, list[Lie]] = {}
    if not banking:
        return out
    if phantom_shoe:
        out.setdefault(banking[0], []).append(Lie("phantom_shoe", 1))
    if earlier_shoe:
        out.setdefault(banking[min(1, len(banking) - 1)], []).append(Lie("earlier_shoe", 2))
    return out


def phantom_id(shoe: str) -> str:
    """The shoe id with its last character swapped for one that looks like it."""
    return shoe[:-1] + LOOK_ALIKE.get(shoe[-1], "l")


@dataclass(frozen=True)
class Relabelled:
    """What `relabel` did: the shoe lied about, the id the round now names and its number
    there, and whether the shoe's remaining was raised (it has a shoe_end saying how many)."""

    shoe: str
    label: str
    round: int
    remaining_raised: bool


def relabel(lines: list[str], shoe: str, kind: str) -> Relabelled | None:
    """In place: the round of `shoe` in which a card came out for the (decks + 1)th time,
    logged in another shoe (`kind`), and the shoe_end's remaining raised by its cards. None
    when no card came out too often, or `earlier_shoe` and no shoe came before."""
    events = [json.loads(line) for line in lines]
    [decks] = [e["decks"] for e in events if e["type"] == "shoe_start" and e["shoe"] == shoe]
    seen: dict[str, int] = {}
    at_round: int | None = None
    previous: str | None = None
    for e in events:
        if e["type"] == "shoe_start" and e["shoe"] != shoe and at_round is None:
            previous = e["shoe"]
        if e.get("shoe") != shoe or at_round is not None:
            continue
        cards = {"burn": e.get("cards", []), "card": [e.get("card")],
                 "face_up_in_shoe": [e.get("card"), *e.get("burned", [])]}.get(e["type"], [])
        for c in cards:
            key = str(parse_card(c))
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > decks and e["type"] == "card":
                at_round = e["round"]
    if at_round is None or (kind == "earlier_shoe" and previous is None):
        return None
    if kind == "earlier_shoe":
        assert previous is not None
        label = previous
        number = 1 + max(e["round"] for e in events
                         if e.get("shoe") == previous and e.get("round") is not None)
    else:
        label, number = phantom_id(shoe), at_round
    moved = 0
    for i, e in enumerate(events):
        if e.get("shoe") == shoe and e.get("round") == at_round and e["type"] != "cut_card":
            e["shoe"], e["round"] = label, number
            moved += e["type"] == "card"
            lines[i] = json.dumps(e, separators=(",", ":"))
    ends = [i for i, e in enumerate(events)
            if e["type"] == "shoe_end" and e.get("shoe") == shoe and "remaining" in e]
    for i in ends:
        events[i]["remaining"] += moved
        lines[i] = json.dumps(events[i], separators=(",", ":"))
    return Relabelled(shoe, label, number, bool(ends))
