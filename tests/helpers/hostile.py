"""Hostile input for the fuzz suite (tests/ingest/test_fuzz.py small, bench/fuzz.py at full size):
every kind of bad line the format can have, mixed into files of good events, so a run can
check that each bad line is quarantined and each good one loaded, none lost, none twice.

A kind is a name and a function of a random generator that returns one line's bytes (no
newline). The format's rule violations come from the schema tests' REJECTED examples; the
rest break the line below the rules: not JSON, the wrong JSON, bytes that are not UTF-8, a
key given twice, a line too long to load.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from helpers.events import CARD, REJECTED, WAGER, changed, line

Kind = Callable[[random.Random], bytes]


def _json(e: dict[str, Any] | list[Any]) -> bytes:
    return json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _stray(rng: random.Random, e: dict[str, Any] = WAGER) -> dict[str, Any]:
    """`e` in a stream of its own with a seq of its own, so a bad line that is still an
    event never meets another line's seq (that would be a different kind of bad)."""
    return changed(e, table="FZ-BAD", seq=rng.randrange(10**6, 10**12))


def _cut(rng: random.Random) -> bytes:
    whole = _json(_stray(rng))
    return whole[: rng.randrange(1, len(whole) - 1)]


def _deep(rng: random.Random) -> bytes:
    n = rng.randrange(100, 5_000)
    return b"[" * n + b"]" * n


def _not_utf8(rng: random.Random) -> bytes:
    return _json(_stray(rng)).replace(b'"banker"', b'"bank\xff\xfe"')


def _long(limit: int) -> Kind:
    def make(rng: random.Random) -> bytes:
        pad = "x" * (limit + rng.randrange(1, 1_000))
        return _json(changed(_stray(rng), note=pad))

    return make


SYNTAX_KINDS: dict[str, Kind] = {
    "not_json": lambda rng: b"dealer error at seat " + str(rng.randrange(9)).encode(),
    "truncated_json": _cut,
    "trailing_garbage": lambda rng: _json(_stray(rng)) + b"}x",
    "two_objects_on_one_line": lambda rng: _json(_stray(rng)) + _json(_stray(rng, CARD)),
    "json_array": lambda rng: _json([_stray(rng)]),
    "json_string": lambda rng: b'"wager"',
    "json_number": lambda rng: str(rng.randrange(10**9)).encode(),
    "json_null": lambda rng: b"null",
    "empty_object": lambda rng: b"{}",
    "deeply_nested": _deep,
    "huge_seq": lambda rng: _json(changed(WAGER, seq=10**30 + rng.randrange(10))),
    "nul_byte": lambda rng: _json(_stray(rng))[:-1] + b',"note":"a\x00b"}',
    "not_utf8": _not_utf8,
    "duplicate_amount": lambda rng: _json(_stray(rng))[:-1] + b',"amount":"999999.00"}',
    "duplicate_seat": lambda rng: _json(_stray(rng))[:-1] + b',"seat":9}',
    "duplicate_type": lambda rng: _json(_stray(rng, CARD))[:-1] + b',"type":"pay"}',
}

def _fixed(e: dict[str, Any]) -> Kind:
    return lambda rng: _json(e)


RULE_KINDS: dict[str, Kind] = {name: _fixed(example) for name, (example, _) in REJECTED.items()}


def line_kinds(long_line_limit: int) -> dict[str, Kind]:
    """Every kind of bad line; `long_line` is just over `long_line_limit` bytes."""
    return {**SYNTAX_KINDS, **RULE_KINDS, "long_line": _long(long_line_limit)}


def good_event(table: str, seq: int) -> bytes:
    """A valid event of `table`'s stream with `seq` (a wager of round 1 of one shoe)."""
    return line(changed(WAGER, table=table, seq=seq, shoe=f"{table}-S1",
                        seat=1 + seq % 7)).encode("utf-8")


def hostile_file(
    rng: random.Random, table: str, good: int, bad: int, kinds: dict[str, Kind]
) -> tuple[bytes, list[int], dict[int, str]]:
    """A file of `good` events of `table` (seq 1..good) with `bad` bad lines among them,
    the kinds taken in turn from a shuffled list so each appears.

    Returns the bytes, the line numbers of the good lines and {line number: kind} of the bad.
    """
    names = list(kinds)
    rng.shuffle(names)
    slots = ["good"] * good + [names[i % len(names)] for i in range(bad)]
    rng.shuffle(slots)
    lines: list[bytes] = []
    good_at: list[int] = []
    bad_at: dict[int, str] = {}
    seq = 0
    for n, slot in enumerate(slots, start=1):
        if slot == "good":
            seq += 1
            lines.append(good_event(table, seq))
            good_at.append(n)
        else:
            lines.append(kinds[slot](rng))
            bad_at[n] = slot
    return b"\n".join(lines) + b"\n", good_at, bad_at
