"""How the report writes values, for the PDF and for the board alike: money, percentages,
times in the property's zone, a finding's evidence, card faces and point counts.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from auditor.rules.cards import parse_card

# Every time to the second in the report, in the scope's zone with its abbreviation: a shift
# crosses midnight (so the date) and can cross a DST change (so the zone).
LOCAL_TIME = "%Y-%m-%d %H:%M:%S %Z"
# A whole JSON string value that is a timestamp (the evidence stores them in UTC).
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
# The appendix is fixed-width text in blocks: weasyprint lays out 10,000 table rows in about
# a minute and a half, the same lines as preformatted blocks of 100 in a few seconds.
APPENDIX_BLOCK = 100
LISTING_ROWS = 150  # past this many tables, changes or sources, fixed-width lines, not a table
SUITS = {"s": ("♠", "black"), "c": ("♣", "black"), "h": ("♥", "red"), "d": ("♦", "red")}


def local_time(ts: str | dt.datetime, zone: dt.tzinfo) -> str:
    """A time as the report writes it: LOCAL_TIME in the scope's zone."""
    when = dt.datetime.fromisoformat(ts) if isinstance(ts, str) else ts
    return when.astimezone(zone).strftime(LOCAL_TIME)


def money(x: Any) -> str:
    """A decimal amount with thousands separators and cents, as stored: never a float."""
    return "" if x is None else f"{Decimal(x):,.2f}"


def pct(x: float | None, n: int = 2) -> str:
    """A fraction as a percentage; `n/a` where there is none (no handle, no pack)."""
    return "n/a" if x is None else f"{x * 100:.{n}f}%"


def evidence_text(value: Any, zone: dt.tzinfo) -> str:
    """A finding's expected or observed evidence as an officer reads it: `key: value` lines,
    nested records indented, lists of records numbered, times in the scope's zone (the
    message above it uses local time; the stored evidence is UTC). The attached JSONL and CSV
    keep the evidence exactly as stored."""
    return "\n".join(_evidence_lines(value, zone))


def _evidence_lines(value: Any, zone: dt.tzinfo) -> list[str]:
    if isinstance(value, dict) and value:
        out: list[str] = []
        for k, v in value.items():
            if _inline(v):
                out.append(f"{k}: {_evidence_value(v, zone)}")
            else:
                out.append(f"{k}:")
                out.extend("  " + line for line in _evidence_lines(v, zone))
        return out
    if isinstance(value, list) and not _inline(value):
        out = []
        for i, item in enumerate(value, 1):
            head = f"{i}. "
            sub = _evidence_lines(item, zone)
            out.append(head + sub[0])
            out.extend(" " * len(head) + line for line in sub[1:])
        return out
    return [_evidence_value(value, zone)]


def _inline(value: Any) -> bool:
    """Fits on its key's line: a scalar, an empty container, or a list of plain scalars."""
    if isinstance(value, dict):
        return not value
    if isinstance(value, list):
        return all(
            not isinstance(v, dict | list) and not (isinstance(v, str) and "," in v)
            for v in value
        )
    return True


def _evidence_value(value: Any, zone: dt.tzinfo) -> str:
    if value is None or value == [] or value == {}:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ", ".join(_evidence_value(v, zone) for v in value)
    if isinstance(value, str) and ISO_TIME.fullmatch(value):
        return local_time(value, zone)
    return str(value)


def card_face(card: str, hand: str, seq: int) -> dict[str, str]:
    """A card (`Ts`, normalised) as the templates draw it: rank, suit symbol and colour."""
    rank = "10" if card[0] == "T" else card[0]
    symbol, colour = SUITS[card[1]]
    return {"rank": rank, "suit": symbol, "colour": colour, "hand": hand, "seq": str(seq)}


def point_counts(cards: list[tuple[int, str, str]], values: Mapping[str, int]) -> str:
    """`Player 7, Banker 3` for a round's cards (seq, hand, card); empty without cards."""
    if not cards or not values:
        return ""
    p = sum(values[c[0]] for _, h, c in cards if h == "player") % 10
    b = sum(values[c[0]] for _, h, c in cards if h == "banker") % 10
    return f"Player {p}, Banker {b}"


def card_faces(cards: list[tuple[int, str, str]]) -> list[dict[str, str]]:
    """Card faces in dealing order, for any row: a card text the face cannot show (an old
    row written before cards were normalised) is shown as it is."""
    out = []
    for seq, hand, card in cards:
        try:
            c = parse_card(card)
            out.append(card_face(str(c), hand, seq))
        except (ValueError, KeyError, IndexError):
            out.append({"rank": card, "suit": "", "colour": "black", "hand": hand,
                        "seq": str(seq)})
    return out


def listing(lines: list[str]) -> list[str]:
    """Fixed-width lines in blocks of APPENDIX_BLOCK: a PDF table of thousands of rows takes
    minutes and gigabytes to lay out, a preformatted block a fraction of that."""
    return ["\n".join(lines[i : i + APPENDIX_BLOCK]) for i in range(0, len(lines), APPENDIX_BLOCK)]
