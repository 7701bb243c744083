"""The fast path of ingest (auditor/ingest/fast.py) against the per-line path alone.

The same files go through both, each into a fresh database: events, quarantine, manifest,
stream ranges and findings must be identical, row for row, on files that mix good events
with every kind of bad line (tests/helpers/hostile.py), with the forms the fast path leaves
to the per-line path (escapes, `-0`, amounts as `1.500` or `1e3`, leap seconds, extra
fields, spaced JSON, CR line ends...), and with what the hypothesis property test draws.
Each test also checks that the fast path did take the bulk of the lines, so a fast path
that refused everything could not pass.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import random
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from helpers.db import set_chunk_bytes
from helpers.drawn import build, ingest_settings, line_specs
from helpers.events import ACCEPTED, REJECTED, VALID_EVENTS, changed, encode_lines, line
from helpers.hostile import hostile_file, line_kinds
from hypothesis import given
from hypothesis import strategies as st

from auditor.ingest import fast, lines, reader, run
from auditor.simulate.generator import Night, TableNight, TableSpec
from auditor.store import db, runs

LONG = 4_096  # the line limit set here, so a "long line" stays small
ROOT = Path(__file__).resolve().parents[2]


def _text(e: dict[str, Any], spaced: bool = False) -> str:
    return json.dumps(e, separators=(", ", ": ") if spaced else (",", ":"), ensure_ascii=False)


def _edges(table: str, first_seq: int) -> list[bytes]:
    """Lines whose form the fast path leaves to the per-line path, or that it must judge
    exactly as the per-line path does: some good, some bad. Each in `table` (or its pit),
    with a seq of its own from `first_seq`, so none is refused for another's seq."""
    seqs = iter(range(first_seq, first_seq + 1_000))

    def t(e: dict[str, Any], spaced: bool = False, **kw: Any) -> str:
        kw.setdefault("seq", next(seqs))
        e = changed(e, **kw)
        if e.get("table") == VALID_EVENTS["wager"]["table"]:
            e["table"] = table
        if e.get("pit") == VALID_EVENTS["procedure_notice"]["pit"]:
            e["pit"] = f"{table}-P"
        return _text(e, spaced)

    wager, card = VALID_EVENTS["wager"], VALID_EVENTS["card"]
    burn, opened = VALID_EVENTS["burn"], VALID_EVENTS["table_open"]
    notice = VALID_EVENTS["procedure_notice"]

    def w(**kw: Any) -> str:
        return t(wager, **kw)

    amounts = (
        "-0", "-0.00", "1.500", "1e3", "1.0E7", "5.5", "0.07", "12345678901234567",
        "1234567890123456.78", '"1e3"', '"+5"', '".5"', '"5."', '" 5"', '"5.50"', "5 ", "NaN",
    )
    times = (
        "2026-11-29t03:00:00z", "2016-12-31T23:59:60Z", "2026-02-30T03:00:00Z",
        "2028-02-29T03:00:00Z", "2026-02-29T03:00:00Z", "2000-02-29T03:00:00Z",
        "1900-02-29T03:00:00Z", "2026-11-28 22:14:03-05:00", "2026-11-28T22:14:03.1234567-05:00",
        "2026-11-28T22:14:03+14:00", "2026-11-28T22:14:03-00:00", "2026-04-31T01:00:00Z",
        "0000-01-01T00:00:00Z", "9999-12-31T23:59:59-05:00",
    )
    texts = [
        # escapes: a good shoe, a type, a table and a key the per-line path reads as written
        w(shoe="S1").replace('"S1"', '"S\\u0031"'),
        w().replace('"type":"wager"', '"type":"w\\u0061ger"'),
        w().replace(f'"table":"{table}"', f'"table":"{table}\\u0031"'),
        w().replace('"amount":', '"\\u0061mount":'),
        w(note='say "hi"'),
        # minus zero, and the bounds of whole numbers
        t(VALID_EVENTS["shoe_end"]).replace('"remaining":14', '"remaining":-0'),
        w().replace('"seat":3', '"seat":-0'),
        w(seq=999_999_999_999_999),
        w(seq=1_000_000_000_000_000),
        # amounts as written
        *(w().replace('"amount":100', f'"amount":{a}') for a in amounts),
        w().replace('"amount":100', '"amount" : 100'),
        # times
        *(w(ts=x) for x in times),
        # labels, ids, cards
        w(dealer=10422), w(dealer=""), w(origin=""), w(table=12345),
        w(shoe="S1\u200b"), w(shoe="S1").replace('"S1"', '"S1\\u200b"'), w(shoe="S 1"),
        w(shoe="x" * 64), w(shoe="x" * 65), w(shoe="S\u0131"), w(dealer="E\u00a01"),
        w(dealer="E-1.b_2"), w(dealer=-7), t(VALID_EVENTS["shoe_start"], batch="r\u200ded"),
        t(VALID_EVENTS["shoe_start"], batch="B.2"),
        t(card, card="10H"), t(card, card="ts"), t(card, card="5"),
        t(burn, cards=["10s", "qh", "2D"]), t(burn, cards=["10s", None]),
        t(opened, side_bets=[]), t(opened, side_bets=[""]), t(opened, side_bets=[None]),
        # fields on a type that does not define them, fields the format does not know
        w(card="5s"), t(card, amount=-5), t(card, amount="x"),
        w(terminal="T-12"), w(meta={"amount": -1}), w(meta={"amount": 100}), w(extra=None),
        w(meta=[1, {"amount": "1.505"}]),
        w().replace('"seat":3', '"seat":3,"x":1,"x":2'),
        w().replace('"seat":3', '"seat":3,"seat":null'),
        # spacing, the version, whitespace around the line
        t(wager, spaced=True), w(v=1.0), w(v=True), "  " + w(), w() + " \t",
        # pit events
        t(notice, tables=[table, "MB-08"]), t(notice, tables=[table, "MB 08"]),
        t(notice, pit=7),
        t(VALID_EVENTS["void"], reason="carte retournée ✓"),
    ]
    return [x.encode("utf-8") for x in texts]


def _accepted_and_rejected(table: str, first_seq: int) -> list[bytes]:
    """The schema tests' accepted and rejected examples, in `table`'s stream (or their pit's),
    each with a seq of its own from `first_seq` unless the example is about its seq."""
    out = []
    examples = [*ACCEPTED.values(), *(e for e, _ in REJECTED.values())]
    for i, e in enumerate(examples):
        e = dict(e)
        if e.get("table") == VALID_EVENTS["wager"]["table"]:
            e["table"] = table
        if e.get("pit") == VALID_EVENTS["procedure_notice"]["pit"]:
            e["pit"] = f"{table}-P"
        if isinstance(e.get("seq"), int) and e["seq"] in (1, 2):
            e["seq"] = first_seq + i
        out.append(line(e).encode())
    return out


def _night(table: str, seed: int) -> list[bytes]:
    """A simulated table's night, as the table systems write it."""
    night = Night(dt.date(2026, 11, 28), dt.timedelta(hours=-5), [])
    spec = TableSpec(table, "P1", "mini_baccarat", "NJ", "standard", 7, 1,
                     ("tie", "dragon7", "panda8"), opens="20:00", closes="22:00")
    return [x.encode() for x in TableNight(night, spec, random.Random(seed)).run()]


def snapshot(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[Any, ...]]]:
    """Everything ingest wrote that does not depend on the clock."""
    def rows(sql: str) -> list[tuple[Any, ...]]:
        return con.execute(sql).fetchall()

    return {
        "events": rows("SELECT * FROM events ORDER BY source_id, line_no"),
        "quarantine": rows("SELECT * FROM quarantine ORDER BY source_id, line_no"),
        "sources": rows("SELECT * EXCLUDE (ingested_at) FROM sources ORDER BY id"),
        "stream_sources": rows("SELECT * FROM stream_sources ORDER BY ALL"),
        # A finding about a file with no event in it is dated when ingest ran; what a
        # log.future_stamp says names its delivery (its place and first event do not).
        "findings": rows(
            "SELECT * EXCLUDE (id, recorded_at, ts, message, expected, observed, evidence), "
            "CASE WHEN ts < now() - INTERVAL 1 DAY THEN ts END AS ts, "
            "CASE WHEN code <> 'log.future_stamp' THEN "
            "[message, expected::VARCHAR, observed::VARCHAR, evidence::VARCHAR] END AS said "
            "FROM findings ORDER BY fingerprint, status"
        ),
    }


class Counted:
    """Counts the lines the fast path accepted and those it left to the per-line path."""

    def __init__(self, mp: pytest.MonkeyPatch) -> None:
        self.typed = 0
        self.slow = 0
        real = fast.split_block

        def split(*a: Any) -> fast.Split:
            s = real(*a)
            self.typed += s.typed.num_rows if s.typed is not None else 0
            self.slow += len(s.slow)
            return s

        mp.setattr(fast, "split_block", split)


def both_paths(
    paths: list[Path], setup: Callable[[pytest.MonkeyPatch], None] = lambda mp: None
) -> Iterator[tuple[str, dict[str, list[tuple[Any, ...]]], Counted]]:
    """Ingest `paths` with the fast path and with the per-line path alone, each into a fresh
    database; yields (name, snapshot, counts) for each."""
    for enabled in (True, False):
        con = db.connect(":memory:")
        try:
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(fast, "ENABLED", enabled)
                mp.setattr(reader, "MAX_LINE_BYTES", LONG)
                setup(mp)
                counted = Counted(mp)
                run.ingest(con, paths, runs.start(con, "parity", {}))
            yield ("fast" if enabled else "per-line"), snapshot(con), counted
        finally:
            con.close()


def assert_same(
    paths: list[Path], setup: Callable[[pytest.MonkeyPatch], None] = lambda mp: None
) -> tuple[dict[str, list[tuple[Any, ...]]], Counted]:
    (_, fast_snap, counted), (_, slow_snap, slow_counted) = both_paths(paths, setup)
    assert slow_counted.typed == 0
    for table in fast_snap:
        got, want = fast_snap[table], slow_snap[table]
        assert len(got) == len(want), table
        for a, b in zip(got, want, strict=True):
            assert a == b, (table, a, b)
    return fast_snap, counted


def _mixed_file(rng: random.Random, table: str, seed: int) -> tuple[bytes, int]:
    """A night of `table` with the edges, the schema examples and every hostile kind
    scattered through it; returns the bytes and the number of night lines."""
    night = _night(table, seed)
    hostile, _, _ = hostile_file(rng, f"{table}-H", good=5, bad=2 * len(line_kinds(LONG)),
                                 kinds=line_kinds(LONG))
    extra = _edges(f"{table}-E", 10_000) + _accepted_and_rejected(f"{table}-A", 20_000)
    extra += hostile.splitlines()
    lines = list(night)
    for x in extra:
        lines.insert(rng.randrange(len(lines) + 1), x)
    for _ in range(3):
        lines.insert(rng.randrange(len(lines) + 1), rng.choice([b"", b"  ", b"\t"]))
    return b"\n".join(lines) + b"\n", len(night)


@pytest.mark.slow
# 90,000-byte blocks: 5 to a 450 kB file, each longer than the longest line (8.5 kB), so
# lines cross block ends (4 per file); a block costs each path one plan of the staging
# SELECT (~0.35 s of CPU), so smaller blocks only slow the test: 30,000-byte blocks took
# 90 s of CPU here against 41 s (tiny blocks: test_ingest's chunk tests).
@pytest.mark.parametrize("block", [None, 90_000], ids=["whole", "small_blocks"])
def test_fast_and_per_line_paths_write_the_same_rows(tmp_path: Path, block: int | None) -> None:
    rng = random.Random(20261201)
    paths = []
    night_lines = 0
    for i, form in enumerate(("plain", "gzip", "crlf", "bom")):
        data, n = _mixed_file(rng, f"PX-{i}", seed=i)
        night_lines += n
        if form == "crlf":
            data = data.replace(b"\n", b"\r\n")
        if form == "bom":
            data = b"\xef\xbb\xbf" + data
        name = f"night-{i}.jsonl" + (".gz" if form == "gzip" else "")
        path = tmp_path / name
        path.write_bytes(gzip.compress(data, mtime=0) if form == "gzip" else data)
        paths.append(path)

    def setup(mp: pytest.MonkeyPatch) -> None:
        if block:
            set_chunk_bytes(mp, block)

    snap, counted = assert_same(paths, setup)
    # Most of each night went the fast way, although one line in ten is planted.
    assert counted.typed >= night_lines * 0.6, (counted.typed, night_lines)
    assert counted.slow > 0
    events = len(snap["events"])
    assert events > night_lines and len(snap["quarantine"]) > 150


@pytest.mark.slow
def test_parity_for_files_that_load_alone_and_in_a_batch(tmp_path: Path) -> None:
    """Small files go in one statement for many files; big ones alone (`SMALL_FILE`)."""
    rng = random.Random(7)
    paths = []
    for i in range(5):
        data, _ = _mixed_file(rng, f"PB-{i}", seed=100 + i)
        path = tmp_path / f"t{i}.jsonl"
        path.write_bytes(data)
        paths.append(path)
    big = paths[0].stat().st_size

    def setup(mp: pytest.MonkeyPatch) -> None:
        mp.setattr(reader, "SMALL_FILE", big)  # the first loads alone, the rest batch

    _, counted = assert_same(paths, setup)
    assert counted.typed > 0


@pytest.mark.slow
def test_parity_on_the_shipped_sample_night() -> None:
    paths = sorted((ROOT / "sample_logs").rglob("*.jsonl*"))
    assert paths
    snap, counted = assert_same(paths)
    assert counted.typed > 0.95 * len(snap["events"])


def test_fast_path_keeps_each_line_exactly(tmp_path: Path) -> None:
    """Evidence: each event's `raw` is its line's bytes, less the line end, for LF and CRLF."""
    night = _night("EX-1", 3)
    data = b"\n".join(night[:40]) + b"\n" + b"\r\n".join(night[40:80]) + b"\r\n"
    path = tmp_path / "mixed-ends.jsonl"
    path.write_bytes(data)
    con = db.connect(":memory:")
    run.ingest(con, [path], runs.start(con, "raw", {}))
    got = con.execute("SELECT line_no, raw FROM events ORDER BY line_no").fetchall()
    want = [(i + 1, x.decode()) for i, x in enumerate(night[:80])]
    assert got == want


def test_split_block_sends_only_the_bad_lines_around_it_to_the_per_line_path() -> None:
    """One bad line in many: the reader refuses the block, the block is cut down, and the
    per-line path gets the bad line with at most LEAF_LINES neighbours."""
    night = _night("SB-1", 4)[:2_000]
    night[1_234] = b'{"v":1,"seq":8.5}'
    block = b"\n".join(night) + b"\n"
    split = fast.split_block(block, lines.line_ends(block), 1)
    assert split.typed is not None
    assert 1_234 in split.slow.tolist()
    assert len(split.slow) <= fast.LEAF_LINES
    assert split.typed.num_rows + len(split.slow) == 2_000
    typed_lines = split.typed.column("line_no").to_pylist()
    assert 1_235 not in typed_lines and typed_lines[:3] == [1, 2, 3]
    seqs = split.typed.column("seq").to_pylist()
    assert seqs[:3] == [1, 2, 3]
    assert split.typed.schema.field("amount").type == pa.decimal128(18, 2)


def test_a_block_read_in_many_chunks_gives_the_rows_of_one_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pyarrow parses a block in chunks of READ_BLOCK bytes on its threads: the rows, their
    order and the lines left to the per-line path are those of the block read whole, bad
    lines in several chunks included. READ_BLOCK holds the longest line a block can have."""
    assert fast.READ_BLOCK > reader.MAX_LINE_BYTES
    night = _night("CH-1", 4)[:2_000]
    assert len(night) == 2_000
    for at in (17, 1_000, 1_999):
        night[at] = b'{"v":1,"seq":8.5}'
    block = b"\n".join(night) + b"\n"
    ends = lines.line_ends(block)
    whole = fast.split_block(block, ends, 1)
    monkeypatch.setattr(fast, "READ_BLOCK", 16_384)  # about 90 lines a chunk: 22 chunks
    chunked = fast.split_block(block, ends, 1)
    assert whole.typed is not None and chunked.typed is not None
    assert chunked.typed.num_rows == whole.typed.num_rows > 1_900
    assert chunked.typed.equals(whole.typed)
    assert chunked.slow.tolist() == whole.slow.tolist()
    assert {18, 1_001, 2_000} <= {int(i) + 1 for i in whole.slow}


@pytest.mark.slow
def test_a_form_the_reader_never_takes_costs_the_per_line_path_and_no_more(
    tmp_path: Path,
) -> None:
    """A system that writes the dealer as a number on every line: the reader refuses every
    piece, so each line is judged by the per-line path (and accepted: a dealer may be a
    number), and cutting the pieces down stops early instead of reading each line alone."""
    night = [json.loads(x) for x in _night("DN-1", 5)]
    lines = [line(changed(e, dealer=10422)).encode() for e in night]
    path = tmp_path / "numbers.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    calls = []
    real = fast.pj.read_json

    def counted(*a: Any, **kw: Any) -> pa.Table:
        calls.append(1)
        return real(*a, **kw)

    def setup(mp: pytest.MonkeyPatch) -> None:
        mp.setattr(fast.pj, "read_json", counted)

    snap, counted_rows = assert_same([path], setup)
    assert counted_rows.typed == 0 and len(snap["events"]) == len(lines)
    # Cut down at most twice at each level: far fewer reads than lines.
    assert len(calls) < len(lines) / 10, (len(calls), len(lines))


@pytest.mark.slow
@ingest_settings
@given(
    specs=st.lists(line_specs, min_size=1, max_size=12),
    edges=st.lists(st.integers(0, 200), max_size=6),
    crlf=st.booleans(),
    chunk=st.sampled_from([None, 700]),
)
def test_parity_property(
    tmp_path_factory: pytest.TempPathFactory,
    specs: list[Any],
    edges: list[int],
    crlf: bool,
    chunk: int | None,
) -> None:
    """What the property test of ingest draws, with edges mixed in: the same rows either way."""
    raw_lines, _ = build(specs)
    pool = _edges("PP-E", 5_000) + _accepted_and_rejected("PP-A", 6_000)
    for k in edges:
        raw_lines.insert(k % (len(raw_lines) + 1), pool[k % len(pool)])
    workdir = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    path = workdir / "night.jsonl"
    path.write_bytes(encode_lines(raw_lines, newline=b"\r\n" if crlf else b"\n"))

    def setup(mp: pytest.MonkeyPatch) -> None:
        if chunk:
            set_chunk_bytes(mp, chunk)

    assert_same([path], setup)
