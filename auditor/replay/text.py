"""How replay findings are worded: the one builder of a round finding, and the money, hands,
times and lists their sentences and evidence show. Spelled once, so every game's findings
read alike."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, overload

from auditor.finding import Finding
from auditor.replay.hands import count
from auditor.replay.model import Event
from auditor.replay.settle import COLLECT, PAY, PUSH

# What was done to a wager, by settlement type, for a sentence.
DONE = {PAY: "paid", COLLECT: "collected", PUSH: "returned"}


def round_finding(
    code: str, at: Event | None, message: str, expected: Any, observed: Any
) -> Finding:
    """A round finding pointing at event `at` (None: at no event). The audit places it in its
    round afterwards (round.in_round), so a check says only what it saw and where."""
    return Finding(
        code,
        None if at is None else at.seq,
        message,
        expected,
        observed,
        None if at is None else at.source,
    )


@overload
def money(amount: Decimal) -> str: ...
@overload
def money(amount: Decimal | None) -> str | None: ...
def money(amount: Decimal | None) -> str | None:
    """'100.00', as findings carry money (None stays None: an amount the log left out)."""
    return None if amount is None else f"{amount:.2f}"


def hand_text(name: str, cards: Sequence[str]) -> str:
    """'Player 4d Th 2h (6)'."""
    return f"{name} {' '.join(cards)} ({count(cards)})" if cards else f"{name} (no cards)"


def iso(ts: dt.datetime) -> str:
    """UTC RFC 3339, the form evidence carries (a report converts to the property's zone)."""
    return ts.astimezone(dt.UTC).isoformat()


def local(ts: dt.datetime, zone: dt.tzinfo) -> str:
    """A time for a sentence: `2026-11-29 03:00:00` in the property's zone."""
    return ts.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S")


def minutes(delta: dt.timedelta) -> str:
    """`20 minutes`, `29 minutes 59 seconds`."""
    total = int(delta.total_seconds())
    sign = "-" if total < 0 else ""
    m, s = divmod(abs(total), 60)
    text = f"{m} minute{'s' if m != 1 else ''}"
    if s:
        text += f" {s} second{'s' if s != 1 else ''}"
    return sign + text


def and_list(items: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
