"""How the commands and the nightly summary count things in their sentences (a base module,
so every stage that writes sentences can use it)."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 line`, `2 lines`, `1,024 files`: "1 lines quarantined" reads as a slip, and a
    compliance officer reading the summary should not have to forgive the tool its grammar.
    `plural` for the nouns that take more than an s."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
