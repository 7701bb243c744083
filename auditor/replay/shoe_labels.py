"""Which shoe a round was dealt from, when the log says another (issue 28): the shoe a table
deals from is the one its last shoe_start began, until that shoe's shoe_end. Events that name
a shoe no shoe_start began (`shoe.not_started`), or a shoe the table had left for one it
started since (`shoe.reopened`), are findings of their own, and their cards still count in
the shoe the table was dealing from: a round relabelled to a look-alike shoe id cannot take
its cards out of the real shoe's composition and counts.

Pure: `auditor.audit.load.load_shoes` classifies the events (in SQL for the rounds, with
`misfiled_kind` for the few shoe events) and hangs each `Misfiled` on the shoe it counts in.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from auditor.finding import Finding, fingerprint
from auditor.replay.shoes import Misfiled, Shoe
from auditor.replay.text import and_list
from auditor.words import count

NOT_STARTED, REOPENED = "not_started", "reopened"


def misfiled_kind(label: str, started: dict[str, int], current_seq: int | None,
                  gap_since_current: bool) -> str | None:
    """How events naming shoe `label` stand against the stream before them: `started` holds
    each shoe's last shoe_start seq so far at the table, `current_seq` the table's last
    shoe_start. None where they are in order, or where events are missing (a seq gap since
    that shoe_start, which may hold the missing shoe_start: log.seq_gap reports it). The SQL
    of load_rounds says the same of rounds."""
    if gap_since_current:
        return None
    if label not in started:
        return NOT_STARTED
    if current_seq is not None and started[label] < current_seq:
        return REOPENED
    return None


def id_difference(label: str, other: str) -> str:
    """Where two ids of one length differ, in a few characters, as a reader checks it:
    "character 13 is 'l' (U+006C) where it has '1' (U+0031)"; "" for ids unlike enough."""
    if len(label) != len(other) or label == other:
        return ""
    at = [i for i, (a, b) in enumerate(zip(label, other, strict=True)) if a != b]
    if len(at) > 2:
        return ""
    return and_list([f"character {i + 1} is {label[i]!r} (U+{ord(label[i]):04X}) where it has "
                     f"{other[i]!r} (U+{ord(other[i]):04X})" for i in at])


def label_findings(shoes: Sequence[Shoe]) -> list[Finding]:
    """shoe.not_started and shoe.reopened over the Misfiled events of `shoes` (any tables):
    one finding per shoe named, kind and stretch of the stream (the shoe_start it came
    after), listing its rounds and events."""
    by_key = {(s.table, s.shoe): s for s in shoes}
    groups: dict[tuple[str, str, str, int | None], list[Misfiled]] = defaultdict(list)
    home: dict[tuple[str, str, str, int | None], Shoe] = {}
    for s in shoes:
        for m in s.misfiled:
            key = (m.table, m.label, m.kind, m.current_seq)
            groups[key].append(m)
            home[key] = s
    out = []
    for key in sorted(groups, key=lambda k: (k[0], min(m.seq for m in groups[k]))):
        items = sorted(groups[key], key=lambda m: m.seq)
        out.append(_finding(items, home[key], by_key))
    return out


def _finding(items: list[Misfiled], home: Shoe,
             by_key: dict[tuple[str, str], Shoe]) -> Finding:
    first, last = items[0], items[-1]
    table, label, kind = first.table, first.label, first.kind
    code = f"shoe.{kind}"
    rounds = [m.round for m in items if m.type == "round" and m.round is not None]
    others = [m for m in items if m.type != "round"]
    what = _what(rounds, others)
    cards = sum(m.cards for m in items)
    current = by_key.get((table, first.current)) if first.current is not None else None
    counted = first.counted_in
    if counted != label:
        counts = (f"the table was dealing from shoe {counted} (shoe_start seq "
                  f"{first.current_seq}): their {count(cards, 'card')} are counted in that shoe")
        differs = id_difference(label, counted)
        if differs:
            counts += f"; {label} is not {counted}: {differs}"
    elif first.current is not None:
        counts = (f"the table's last shoe, {first.current} (shoe_start seq "
                  f"{first.current_seq}), had ended, so they are counted in a shoe of their "
                  "own whose decks no shoe_start gave")
    else:
        counts = ("no shoe_start came before them at the table, so they are counted in a shoe "
                  "of their own whose decks no shoe_start gave")
    if kind == "not_started":
        verb = "names" if len(items) == 1 else "name"
        message = (f"{table}: {what} (seq {first.seq}) {verb} shoe {label}, which no "
                   f"shoe_start at {table} began; {counts}.")
    else:
        earlier = by_key.get((table, label))
        began = (f" (shoe_start seq {earlier.start.seq})"
                 if earlier is not None and earlier.start is not None else "")
        message = (f"{table} went back to shoe {label}{began} with {what} (seq {first.seq}) "
                   f"after shoe {first.current} was started (seq {first.current_seq}), with no "
                   f"new shoe_start of {label}; {counts}.")
    cited: list[dict[str, Any]] = [m.as_json() for m in dict.fromkeys([first, last])]
    if current is not None and current.start is not None:
        cited.append(current.start.as_json())
    return Finding(
        code=code,
        fingerprint=fingerprint(code, table, label, first.seq, last.seq),
        table=table,
        pit=home.pit,
        shoe=label,
        round=first.round,
        seq=first.seq,
        ts=first.ts,
        message=message,
        expected={"shoe_start_of": label, "before_seq": first.seq}
        if kind == "not_started" else {"shoe": first.current, "or_shoe_start_of": label},
        observed={"rounds": rounds, "events": [m.type for m in others],
                  "first_seq": first.seq, "last_seq": last.seq, "cards": cards,
                  "dealing_from": first.current if not first.current_ended else None,
                  "counted_in": counted},
        source=first.source,
        evidence={"tables": [table], "pit": home.pit, "shoe": label, "counted_in": counted,
                  "events": cited},
    )


def _what(rounds: list[int], others: Sequence[Misfiled]) -> str:
    """'round 6', 'rounds 6-9', 'rounds 6, 9 and a shoe_end', 'a shoe_end'."""
    parts = []
    if rounds:
        run = rounds == list(range(rounds[0], rounds[0] + len(rounds)))
        if len(rounds) == 1:
            parts.append(f"round {rounds[0]}")
        elif run:
            parts.append(f"rounds {rounds[0]}-{rounds[-1]}")
        else:
            parts.append("rounds " + and_list([str(r) for r in rounds]))
    parts += [f"a {m.type}" for m in others]
    return and_list(parts)
