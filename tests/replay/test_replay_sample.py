"""The round replay over the whole sample night: it must find exactly the round deviations the
generator planted (sample_logs/README.md, "Planted deviations in rounds") and nothing else.
Chemin de fer tables go through their own replay (auditor.replay.chemin), round after round
with the table's history, as the audit does.

The logs are read directly here (not through ingest), so this test depends only on the files,
the rule packs and the replay.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from auditor.finding import Finding
from auditor.replay.chemin import replay_chemin_round
from auditor.replay.chemin_model import CheminEvent, History
from auditor.replay.round import Event, TableContext, check_round
from auditor.rules.codes import REGISTRY
from auditor.rules.pack import RulePack, load_pack

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
RoundKey = tuple[str, str, int]  # (table, shoe, round)


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        yield from enumerate(fh, start=1)


def read_events(path: Path) -> tuple[list[tuple[dict, str]], list[int]]:
    """(record, "file:line") for every JSON line, and the numbers of the lines that are not."""
    events, broken = [], []
    for number, line in read_lines(path):
        if not line.strip():
            continue
        try:
            events.append((json.loads(line), f"{path.name}:{number}"))
        except json.JSONDecodeError:
            broken.append(number)
    return events, broken


@cache
def pack_for(jurisdiction: str, game: str) -> RulePack:
    return load_pack(jurisdiction, game)


def rounds_of(
    records: list[tuple[dict, str]], chemin: bool = False
) -> Iterator[tuple[TableContext, list[Event]]]:
    """Each round of each table (of the chemin de fer tables if `chemin`, of the others if
    not), with the table's context as it stood at the round's start: table_open, then any
    procedure_change before the round. A chemin de fer round ends with the bank_pass logged
    after its round_end, if any."""
    by_table: dict[str, list[tuple[dict, str]]] = defaultdict(list)
    for record, source in records:
        if "table" in record:
            by_table[record["table"]].append((record, source))
    for table, stream in by_table.items():
        stream.sort(key=lambda item: item[0]["seq"])
        is_chemin = any(
            r["type"] == "table_open" and r["game"] == "chemin_de_fer" for r, _ in stream
        )
        if is_chemin != chemin:
            continue
        ctx: TableContext | None = None
        current: list[Event] = []
        for record, source in stream:
            kind = record["type"]
            if chemin and current and (record.get("shoe"), record.get("round")) != (
                current[0].shoe,
                current[0].round,
            ):
                assert ctx is not None
                yield ctx, current
                current = []
            if kind == "table_open":
                ctx = TableContext(
                    table=table,
                    pit=record["pit"],
                    game=record["game"],
                    jurisdiction=record["jurisdiction"],
                    variant=record["variant"],
                    procedure=record.get("procedure"),
                    seats=record["seats"],
                    side_bets=tuple(record["side_bets"]),
                    pack=pack_for(record["jurisdiction"], record["game"]),
                )
            elif kind == "procedure_change":
                assert ctx is not None
                ctx = replace(ctx, procedure=record["procedure"])
            elif "round" in record and kind != "cut_card":
                assert ctx is not None, f"{source}: round event before table_open"
                if chemin:
                    current.append(CheminEvent.from_record(record, source))
                    continue
                current.append(Event.from_record(record, source))
                if kind == "round_end":
                    yield ctx, current
                    current = []
        if chemin and current:
            assert ctx is not None
            yield ctx, current
        else:
            assert not current, f"{table}: a round without round_end"


def planted() -> set[tuple[str, str, str, int]]:
    """(code, table, shoe, round) from the README's table of planted round deviations."""
    text = (SAMPLE / "README.md").read_text()
    section = text.split("## Planted deviations in rounds", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w.]+)` \| (\S+) shoe (\S+) round (\d+) \|", section, re.M)
    return {(code, table, shoe, int(rnd)) for code, table, shoe, rnd in rows}


@pytest.fixture(scope="module")
def sample_findings() -> tuple[list[tuple[RoundKey, Finding]], int]:
    found: list[tuple[RoundKey, Finding]] = []
    rounds = 0
    for path in sorted(SAMPLE.glob("*.jsonl*")):
        records, broken = read_events(path)
        # The one planted half-written line; the event is written again on the next line.
        assert len(broken) <= 1, f"{path.name}: lines {broken} are not JSON"
        for ctx, events in rounds_of(records):
            rounds += 1
            key = (ctx.table, events[0].shoe or "", events[0].round or 0)
            found += [(key, f) for f in check_round(ctx, events)]
        cut_cards = {
            r["shoe"]: r["round"] for r, _ in records if r.get("type") == "cut_card"
        }
        history = History()
        for ctx, events in rounds_of(records, chemin=True):
            rounds += 1
            key = (ctx.table, events[0].shoe or "", events[0].round or 0)
            history = History(history.previous, history.counted, cut_cards.get(key[1]))
            chemin_found, facts = replay_chemin_round(ctx, events, history)
            found += [(key, f) for f in chemin_found]
            history = history.after(facts)
    return found, rounds


def test_the_readme_lists_eighteen_planted_round_deviations() -> None:
    assert len(planted()) == 18
    assert sum(1 for _, table, _, _ in planted() if table == "CF-01") == 6


@pytest.mark.slow
def test_the_sample_night_has_thousands_of_rounds(sample_findings) -> None:
    _, rounds = sample_findings
    assert rounds > 2500


def test_replay_finds_exactly_the_planted_round_deviations(sample_findings) -> None:
    found, _ = sample_findings
    got = [(f.code, *key) for key, f in found]
    details = "\n".join(f"{key} {f.code} seq {f.seq}: {f.message}" for key, f in found)
    assert sorted(got) == sorted(planted()), details


def test_every_sample_finding_has_a_registered_code_and_points_at_an_event(
    sample_findings,
) -> None:
    found, _ = sample_findings
    for _, f in found:
        assert f.code in REGISTRY
        assert f.seq is not None and f.source is not None
        json.dumps([f.expected, f.observed])
