"""The fuzz suite at a small size (bench/fuzz.py runs it at full size): files that mix good
events with every kind of bad line (tests/helpers/hostile.py), read whole and in small
blocks, plain and gzip. Every bad line is quarantined with a reason and a `log.malformed`
finding, every good line is one event, and nothing is lost or counted twice.
"""

from __future__ import annotations

import gzip
import os
import random

import pytest
from helpers.db import AuditDb, set_chunk_bytes
from helpers.hostile import hostile_file, line_kinds

from auditor.ingest import reader
from auditor.ingest.paths import unescape_path

LONG = 4_096  # the line limit these tests set, so a "long line" stays small


@pytest.fixture
def kinds(monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setattr(reader, "MAX_LINE_BYTES", LONG)
    return line_kinds(LONG)


@pytest.mark.slow
@pytest.mark.parametrize("block", [None, 700], ids=["whole", "small_blocks"])
def test_every_bad_line_is_quarantined_and_every_good_line_loaded(
    audit: AuditDb, monkeypatch: pytest.MonkeyPatch, kinds: dict, block: int | None
) -> None:
    if block:
        set_chunk_bytes(monkeypatch, block)
    rng = random.Random(20261201)
    planted = {}
    paths = []
    for i, gz in enumerate((False, True, False)):
        table = f"FZ-{i}"
        data, good_at, bad_at = hostile_file(rng, table, good=40, bad=2 * len(kinds),
                                             kinds=kinds)
        name = f"night_{table}.jsonl" + (".gz" if gz else "")
        paths.append(audit.write_bytes(name, gzip.compress(data, mtime=0) if gz else data))
        planted[table] = (good_at, bad_at)

    result = audit.ingest(*paths)

    assert [f.status for f in result.files] == ["ingested"] * 3
    for path, f in zip(paths, result.files, strict=True):
        good_at, bad_at = planted[path.name.split("_")[1].split(".")[0]]
        assert (f.events, f.quarantined, f.duplicates) == (len(good_at), len(bad_at), 0)
        assert f.lines == len(good_at) + len(bad_at)
        source = audit.scalar("SELECT id FROM sources WHERE path = ?", str(path.resolve()))
        loaded = [r["line_no"] for r in audit.events("source_id = ?", source)]
        assert sorted(loaded) == good_at
        held = {
            r["line_no"]: r["reason"]
            for r in audit.rows("SELECT line_no, reason FROM quarantine WHERE source_id = ?",
                                source)
        }
        assert sorted(held) == sorted(bad_at)  # each bad line, once, at its own number
        assert all(reason for reason in held.values())
        seqs = [r["seq"] for r in audit.events("source_id = ?", source)]
        assert sorted(seqs) == list(range(1, len(good_at) + 1))
    assert len(audit.findings("log.malformed")) == sum(len(b) for _, b in planted.values())
    assert audit.findings("log.seq_gap") == []


# Alone in a file as well as among the others: the kinds the reader, not the staging SELECT,
# judges (a line too long, bytes that are not UTF-8, nesting too deep for the parser).
ALONE = ("long_line", "not_utf8", "deeply_nested")


@pytest.mark.slow
def test_every_kind_is_planted_and_each_gets_its_own_reason(
    audit: AuditDb, kinds: dict
) -> None:
    """One line of each kind, one after another in a file: each line is quarantined with a
    reason that names what is wrong, and a rule violation names the field it breaks. A
    line's reason is its own (the staging SELECT judges each row by itself), so the file
    gives each kind the reason a file of that line alone gives: checked here for ALONE, and
    for all 84 kinds when this test was changed from one file per kind (85 s of CPU, as
    each such file loads alone, against 1 s for the one file)."""
    rng = random.Random(7)
    made = {name: make(rng) for name, make in kinds.items()}
    together = audit.write_bytes("every-kind.jsonl", b"\n".join(made.values()) + b"\n")
    alone = {name: audit.write_bytes(f"{name}.jsonl", made[name] + b"\n") for name in ALONE}
    result = audit.ingest(together, *alone.values())
    outcome = {f.path.name: (f.status, f.lines, f.events, f.quarantined) for f in result.files}
    assert outcome.pop(together.name) == ("ingested", len(made), 0, len(made))
    assert outcome == {path.name: ("ingested", 1, 0, 1) for path in alone.values()}

    def reasons(path) -> dict[int, str]:
        return {r["line_no"]: r["reason"] for r in audit.rows(
            "SELECT q.line_no, q.reason FROM quarantine q JOIN sources s ON s.id = q.source_id "
            "WHERE s.path = ?", str(path.resolve()))}

    by_line = reasons(together)
    assert sorted(by_line) == list(range(1, len(made) + 1))  # each line, once, at its number
    reason = dict(zip(made, (by_line[n] for n in sorted(by_line)), strict=True))
    assert all(reason.values())
    for name, path in alone.items():
        assert reasons(path) == {1: reason[name]}, name
    assert "given twice" in reason["duplicate_amount"]
    assert "amount" in reason["duplicate_amount"]
    assert "type" in reason["duplicate_type"]
    assert "UTF-8" in reason["not_utf8"]
    assert str(LONG) in reason["long_line"] or "long" in reason["long_line"]
    assert reason["not_json"] == "not valid JSON"
    assert "seq" in reason["huge_seq"]
    assert len(audit.findings("log.malformed")) == len(made) + len(ALONE)


@pytest.mark.slow
def test_a_night_of_hostile_files_loads_every_good_file_and_refuses_only_the_bad_ones(
    audit: AuditDb, monkeypatch: pytest.MonkeyPatch, kinds: dict
) -> None:
    """File-level kinds beside good files in one ingest: names that are not UTF-8 or hold a
    newline, a gzip bomb (limits set low), a .gz that is not gzip, a gzip cut short. Each
    bad file is refused alone with one sentence; every other file loads whole."""
    monkeypatch.setattr(reader, "INFLATE_FLOOR", 64 << 10)
    monkeypatch.setattr(reader, "MAX_INFLATE_RATIO", 10)
    rng = random.Random(11)
    folder = audit.dir / "spool"
    folder.mkdir()
    good: dict[str, tuple[int, int]] = {}
    for raw_name in (b"odd_\xff\xfe.jsonl", b"two\nlines.jsonl", b"plain.jsonl"):
        data, good_at, bad_at = hostile_file(rng, f"FZ-{len(good)}", good=30, bad=len(kinds),
                                             kinds=kinds)
        path = folder / os.fsdecode(raw_name)
        path.write_bytes(data)
        good[path.name] = (len(good_at), len(bad_at))
    (folder / "bomb.jsonl.gz").write_bytes(gzip.compress(b"\0" * (4 << 20), mtime=0))
    (folder / "fake.jsonl.gz").write_bytes(b"not gzip at all\n")
    whole = gzip.compress(hostile_file(rng, "FZ-9", 30, 0, kinds)[0], mtime=0)
    (folder / "cut.jsonl.gz").write_bytes(whole[: len(whole) // 2])

    result = audit.ingest(folder)

    by_name = {os.fsdecode(unescape_path(str(f.path))).rsplit("/", 1)[-1]: f
               for f in result.files}
    for shown, (events, quarantined) in good.items():
        f = by_name[shown]
        assert (f.status, f.events, f.quarantined) == ("ingested", events, quarantined)
    for refused in ("bomb.jsonl.gz", "fake.jsonl.gz", "cut.jsonl.gz"):
        f = by_name[refused]
        assert f.status == "unreadable" and f.events == 0, refused
        assert "\n" not in f.message and f.message, refused
    assert audit.scalar("SELECT count(*) FROM events") == sum(e for e, _ in good.values())
    assert {r["path"].rsplit("/", 1)[-1] for r in audit.sources()} == {
        "odd_\\xff\\xfe.jsonl", "two\\nlines.jsonl", "plain.jsonl"
    }
