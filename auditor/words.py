"""How the commands and the nightly summary count things in their sentences (a base module,
so every stage that writes sentences can use it)."""

from __future__ import annotations

import datetime as dt


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 line`, `2 lines`, `1,024 files`: "1 lines quarantined" reads as a slip, and a
    compliance officer reading the summary should not have to forgive the tool its grammar.
    `plural` for the nouns that take more than an s."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def duration(delta: dt.timedelta) -> str:
    """'2 seconds', '14 minutes 11 seconds', '4 hours 58 minutes', '28 days 20 hours' (seconds
    dropped past an hour, minutes past a day): how far a stamp is off, in words an officer
    reads at a glance rather than a count of seconds."""
    total = int(abs(delta.total_seconds()))
    d, rest = divmod(total, 86400)
    h, rest = divmod(rest, 3600)
    m, sec = divmod(rest, 60)
    if d:
        parts = [(d, "day"), (h, "hour")]
    else:
        parts = [(h, "hour"), (m, "minute")] + ([(sec, "second")] if not h else [])
    text = " ".join(f"{n} {unit}{'s' if n != 1 else ''}" for n, unit in parts if n)
    return text or "0 seconds"
