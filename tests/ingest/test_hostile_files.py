"""One bad file is that file's problem (issue 20, part 1).

- A file name that is not UTF-8 loads like any other; it is shown and recorded escaped
  (`x_\\xff.jsonl`), and `unescape_path` gives the real name back. A newline in a name is
  escaped too, so each problem stays one line.
- A gzip file that inflates past its limit is refused alone, while reading; a compressed
  file's decompressed size decides whether it is batched as a small file.
- A line over MAX_LINE_BYTES is streamed through and quarantined as its length, SHA-256 and
  first bytes; the rest of the file loads.

Each test feeds exactly its input and checks that the other files load and nothing is lost.
The limits are monkeypatched low: no big file is written here.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.cli import Run
from helpers.db import AuditDb
from helpers.events import contract_lines

import auditor.ingest.batch as batch_mod
import auditor.ingest.load as load_mod
import auditor.ingest.reader as reader_mod
from auditor.errors import EXIT_FINDINGS, EXIT_INPUT, EXIT_INTERNAL, EXIT_OK
from auditor.ingest.paths import escape_path, unescape_path

L = contract_lines()  # 15 valid lines of table MB-07, seq 1-15
ODD = os.fsdecode(b"x_\xff.jsonl")  # a name with a byte that is not UTF-8
SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"


def table_lines(table: str) -> list[str]:
    """The contract's 15 lines as another table's stream, so files do not overlap."""
    return [x.replace("MB-07", table) for x in L]


def write(path: Path, lines: list[str], *, gz: bool = False) -> Path:
    data = "".join(x + "\n" for x in lines).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


def gzip_of_zeros(n: int) -> bytes:
    return gzip.compress(b"\0" * n, compresslevel=9, mtime=0)


def rows(db_path: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


# --------------------------------------------------------------------------------------------
# names
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        (os.fsdecode(b"x_\xff.jsonl"), "x_\\xff.jsonl"),
        (os.fsdecode(b"caf\xc3\xa9_\xe9.jsonl"), "caf\u00e9_\\xe9.jsonl"),  # UTF-8 é, then a byte
        ("two\nlines.jsonl", "two\\nlines.jsonl"),
        ("cr\r\ttab.jsonl", "cr\\r\\ttab.jsonl"),
        ("esc\x1b[31m.jsonl", "esc\\x1b[31m.jsonl"),
        ("nel\x85 ls\u2028.jsonl", "nel\\u0085 ls\\u2028.jsonl"),
        ("back\\slash.jsonl", "back\\\\slash.jsonl"),
        ("looks\\xffescaped.jsonl", "looks\\\\xffescaped.jsonl"),  # the text, not a byte
        ("plain MB-01 \u00e9\U0001f0a1.jsonl", "plain MB-01 \u00e9\U0001f0a1.jsonl"),
    ],
)
def test_escape_path_is_one_printable_line_and_reverses_exactly(name: str, shown: str) -> None:
    assert escape_path(Path("/spool") / name) == f"/spool/{shown}"
    assert shown.isprintable() and len(shown.splitlines()) == 1
    assert shown.encode("utf-8")  # storable: no surrogate left
    assert unescape_path(shown) == Path(name)
    assert os.fsencode(unescape_path(shown)) == os.fsencode(name)


@pytest.mark.slow
def test_a_name_that_is_not_utf8_loads_beside_the_good_files_shown_and_stored_escaped(
    bacc_audit: Callable[..., Run], tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    for i, name in enumerate(("a.jsonl", "b.jsonl", "c.jsonl.gz")):
        write(spool / name, table_lines(f"T{i}"), gz=name.endswith(".gz"))
    odd = write(spool / ODD, [*table_lines("T9"), "{oops"])  # line 16 is bad
    dbp = tmp_path / "audit.duckdb"

    r = bacc_audit("ingest", spool, "--db", dbp)

    shown = f"{spool}/x_\\xff.jsonl"
    assert r.code == EXIT_FINDINGS, r  # a quarantined line, nothing worse
    assert f"{shown}: 15 events, 1 quarantined\n" in r.out
    problems = [x for x in r.err.splitlines() if x.startswith("quarantined: ")]
    assert problems == [f"quarantined: {shown}:16: not valid JSON"]
    assert "4 files: 4 ingested, 0 already ingested, 0 refused, 0 unreadable; 60 events" in r.out
    by_path = {
        p: (status, events, quarantined)
        for p, status, events, quarantined in rows(
            dbp, "SELECT path, status, events, quarantined FROM sources"
        )
    }
    real = tmp_path.resolve() / "spool"
    assert by_path == {
        f"{real}/a.jsonl": ("ingested", 15, 0),
        f"{real}/b.jsonl": ("ingested", 15, 0),
        f"{real}/c.jsonl.gz": ("ingested", 15, 0),
        f"{real}/x_\\xff.jsonl": ("ingested", 15, 1),
    }
    assert rows(dbp, "SELECT stream, count(*) FROM events GROUP BY ALL ORDER BY ALL") == [
        (f"table:{t}", 15) for t in ("T0", "T1", "T2", "T9")
    ]
    # The examiner gets the real name, and the file, back from what the database says.
    [(stored, sha)] = rows(dbp, "SELECT path, sha256 FROM sources WHERE quarantined = 1")
    assert os.fsencode(unescape_path(stored)) == os.fsencode(real) + b"/x_\xff.jsonl"
    assert unescape_path(stored).read_bytes() == odd.read_bytes()
    assert hashlib.sha256(odd.read_bytes()).hexdigest() == sha
    assert rows(dbp, "SELECT line_no, reason, raw FROM quarantine") == [
        (16, "not valid JSON", "{oops")
    ]
    assert rows(dbp, "SELECT source FROM findings WHERE code = 'log.malformed'") == [
        (f"{stored}:16",)
    ]

    again = bacc_audit("ingest", spool, "--db", dbp, "--json")
    assert again.code == EXIT_OK, again
    summary = json.loads(again.out)
    assert [(f["path"], f["status"]) for f in summary["files"]] == [
        (f"{spool}/a.jsonl", "already_ingested"),
        (f"{spool}/b.jsonl", "already_ingested"),
        (f"{spool}/c.jsonl.gz", "already_ingested"),
        (shown, "already_ingested"),
    ]
    assert rows(dbp, "SELECT count(*) FROM sources") == [(4,)]


@pytest.mark.slow
def test_a_newline_in_a_name_keeps_every_problem_on_one_line(
    bacc_audit: Callable[..., Run], tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    write(spool / "good.jsonl", table_lines("T1"))
    write(spool / "two\nlines.jsonl", ["{oops", *table_lines("T2"), "[1]"])
    write(spool / "not\rgzip.jsonl.gz", table_lines("T3"))  # plain text under a .gz name
    missing = tmp_path / "gone\nfile.jsonl"
    dbp = tmp_path / "audit.duckdb"

    r = bacc_audit("ingest", spool, missing, "--db", dbp)

    assert r.code == EXIT_INPUT, r
    two, gz = f"{spool}/two\\nlines.jsonl", f"{spool}/not\\rgzip.jsonl.gz"
    assert r.err.splitlines() == [
        f"error: {tmp_path}/gone\\nfile.jsonl: no such file or directory",
        f"error: {gz}: not a gzip file (it does not start with the gzip signature)",
        f"quarantined: {two}:1: not valid JSON",
        f"quarantined: {two}:17: not a JSON object",
    ]
    out = r.out.splitlines()
    assert f"{spool}/good.jsonl: 15 events, 0 quarantined" in out
    assert f"{two}: 15 events, 2 quarantined" in out
    assert rows(dbp, "SELECT count(*) FROM events") == [(30,)]
    assert rows(dbp, "SELECT count(*), min(line_no), max(line_no) FROM quarantine") == [
        (2, 1, 17)
    ]
    messages = rows(dbp, "SELECT message FROM findings WHERE code = 'log.malformed'")
    assert all("\n" not in m and "two\\nlines.jsonl" in m for (m,) in messages), messages


# --------------------------------------------------------------------------------------------
# decompression
# --------------------------------------------------------------------------------------------


@pytest.fixture
def low_inflation(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Limits scaled down about 1000 times, and a spy on what gzip inflates."""
    monkeypatch.setattr(reader_mod, "INFLATE_FLOOR", 64 << 10)
    monkeypatch.setattr(reader_mod, "CHUNK_BYTES", 16 << 10)
    inflated = {"bytes": 0}
    real_read = gzip.GzipFile.read

    def read(self: gzip.GzipFile, size: int = -1) -> bytes:
        data = real_read(self, size)
        inflated["bytes"] += len(data)
        return data

    monkeypatch.setattr(gzip.GzipFile, "read", read)
    return inflated


@pytest.mark.slow
@pytest.mark.parametrize("trailer", ["true", "lying"])
def test_a_gzip_bomb_is_refused_alone_while_reading_and_the_other_files_load(
    bacc_audit: Callable[..., Run],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    low_inflation: dict[str, int],
    trailer: str,
) -> None:
    """A bomb whose gzip trailer states its size goes alone; one whose trailer lies (says
    100 bytes) is offered with the small files and set aside once it holds SMALL_FILE."""
    monkeypatch.setattr(reader_mod, "SMALL_FILE", 32 << 10)
    spool = tmp_path / "spool"
    write(spool / "a.jsonl", table_lines("T1"))
    write(spool / "c.jsonl.gz", table_lines("T3"), gz=True)
    bomb = gzip_of_zeros(8 << 20)  # 8 MiB of zeros in about 8 KB
    if trailer == "lying":
        bomb = bomb[:-4] + (100).to_bytes(4, "little")
    (spool / "b.jsonl.gz").write_bytes(bomb)
    cap = 100 * len(bomb)
    assert 64 << 10 < cap < 8 << 20
    dbp = tmp_path / "audit.duckdb"

    r = bacc_audit("ingest", spool, "--db", dbp)

    assert r.code == EXIT_INPUT, r
    assert r.err.splitlines() == [
        f"error: {spool}/b.jsonl.gz: not loaded: it decompresses to more than {cap:,} bytes, "
        f"the limit for a gzip file of {len(bomb):,} bytes (100 times its size, at least 64 "
        "KiB, at most 16 GiB); it may be a decompression bomb, and nothing of it was loaded"
    ]
    assert "3 files: 2 ingested, 0 already ingested, 0 refused, 1 unreadable; 30 events" in r.out
    assert rows(dbp, "SELECT path, events FROM sources ORDER BY path") == [
        (f"{tmp_path.resolve()}/spool/a.jsonl", 15),
        (f"{tmp_path.resolve()}/spool/c.jsonl.gz", 15),
    ]
    assert rows(dbp, "SELECT count(*) FROM events") == [(30,)]
    assert rows(dbp, "SELECT count(*) FROM quarantine") == [(0,)]
    # Never inflated whole: the reads stop one block past the cap (the other .gz, and for the
    # lying trailer the SMALL_FILE read before the bomb was set aside, come on top).
    assert low_inflation["bytes"] <= cap + (16 << 10) + (64 << 10) < 8 << 20


def test_a_gzip_file_is_batched_by_its_decompressed_size(
    audit: AuditDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compressed to a few hundred bytes but over SMALL_FILE once inflated: loaded alone."""
    monkeypatch.setattr(reader_mod, "SMALL_FILE", 2000)
    small = audit.write("a.jsonl", table_lines("T1")[:3])  # about 500 bytes
    big = audit.write("b.jsonl.gz", table_lines("T2"), gz=True)  # about 3 KB of text
    assert small.stat().st_size < 2000 and big.stat().st_size < 2000
    alone: list[Path] = []
    batched: list[list[Path]] = []
    real_alone, real_batch = load_mod.ingest_alone, batch_mod.prepare_batch

    def spy_alone(con: Any, o: Any, *a: Any) -> Any:
        alone.append(o.path)
        return real_alone(con, o, *a)

    def spy_batch(offers: Any, *a: Any) -> Any:
        batched.append([o.path for o in offers])
        return real_batch(offers, *a)

    monkeypatch.setattr(load_mod, "ingest_alone", spy_alone)
    monkeypatch.setattr(batch_mod, "prepare_batch", spy_batch)

    result = audit.ingest(small, big)

    assert (alone, batched) == ([big], [[small]])
    assert [(f.status, f.events) for f in result.files] == [("ingested", 3), ("ingested", 15)]


# --------------------------------------------------------------------------------------------
# long lines
# --------------------------------------------------------------------------------------------

LIMIT = 1000
HEAD = 64


@pytest.mark.slow
@pytest.mark.parametrize(
    ("how", "chunk", "gz"),
    [
        ("alone", 256, False),  # the line spans many reads: streamed through
        ("alone", None, True),  # the line sits inside one block
        ("batch", 256, True),
        ("batch", None, False),
    ],
)
def test_a_line_over_the_limit_is_quarantined_by_length_hash_and_head(
    audit: AuditDb, monkeypatch: pytest.MonkeyPatch, how: str, chunk: int | None, gz: bool
) -> None:
    monkeypatch.setattr(reader_mod, "MAX_LINE_BYTES", LIMIT)
    monkeypatch.setattr(reader_mod, "LONG_LINE_HEAD", HEAD)
    if chunk:
        monkeypatch.setattr(reader_mod, "CHUNK_BYTES", chunk)
    long_line = '{"v":1,"type":"wager","note":"x' + "\u00e9" * 3000 + '"}'  # 6,033 bytes
    data = long_line.encode()
    lines = [*L[:3], long_line, *L[3:], '{"v":1,"pad":"' + "x" * 2000]  # no final newline
    path = audit.dir / ("log.jsonl.gz" if gz else "log.jsonl")
    text = "\n".join(lines).encode()
    path.write_bytes(gzip.compress(text, mtime=0) if gz else text)
    other = audit.write("other.jsonl", table_lines("T2"))

    if how == "alone":
        results = [audit.ingest_file(path), audit.ingest_file(other)]
    else:
        results = audit.ingest(path, other).files

    last = ('{"v":1,"pad":"' + "x" * 2000).encode()
    expected = [(4, data), (17, last)]
    reasons = [
        f"line too long: {len(b):,} bytes, over the limit of 1,000 (sha256 "
        f"{hashlib.sha256(b).hexdigest()}); only its first 64 bytes are kept"
        for _, b in expected
    ]
    heads = ['{"v":1,"type":"wager","note":"x' + "\u00e9" * 16, '{"v":1,"pad":"' + "x" * 50]
    assert [(q["line_no"], q["reason"], q["raw"]) for q in audit.quarantine()] == [
        (4, reasons[0], heads[0]),  # 64 bytes cut inside an é: the half character is left out
        (17, reasons[1], heads[1]),
    ]
    r = results[0]
    assert (r.status, r.lines, r.events, r.quarantined) == ("ingested", 17, 15, 2)
    assert r.problems == [f"{path}:4: {reasons[0]}", f"{path}:17: {reasons[1]}"]
    assert (results[1].status, results[1].events) == ("ingested", 15)
    mine = audit.events(
        "source_id = (SELECT id FROM sources WHERE path = ?)", str(path.resolve())
    )
    # Line numbers after the long line hold: line n + 1 carries contract line n.
    assert [(e["line_no"], e["seq"]) for e in mine] == [(n, n) for n in (1, 2, 3)] + [
        (n + 1, n) for n in range(4, 16)
    ]
    assert [e["raw"] for e in mine] == L
    assert [(f["source"], f["observed"]["reason"]) for f in audit.findings("log.malformed")] == [
        (f"{path.resolve()}:{n}", reason)
        for (n, _), reason in zip(expected, reasons, strict=True)
    ]


def test_a_long_line_is_never_held_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks stay under the limit plus one read, however long the line."""
    monkeypatch.setattr(reader_mod, "MAX_LINE_BYTES", LIMIT)
    path = tmp_path / "one.jsonl"
    path.write_bytes(L[0].encode() + b"\n" + b"z" * 200_000 + b"\n" + L[1].encode() + b"\n")
    blocks = list(reader_mod.iter_blocks(path, 512))
    assert max(len(b.data) for b in blocks) <= LIMIT + 512
    assert b"".join(b.data for b in blocks) == (L[0] + "\n\n" + L[1] + "\n").encode()
    [long_line] = [x for b in blocks for x in b.long_lines]
    z = b"z" * 200_000
    assert (long_line.line_no, long_line.length, long_line.sha256) == (
        2, 200_000, hashlib.sha256(z).hexdigest()
    )
    assert long_line.head == z[:4096]


# --------------------------------------------------------------------------------------------
# the nightly job
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_nightly_with_a_name_that_is_not_utf8_files_the_pdfs_and_loads_every_file(
    bacc_audit: Callable[..., Run], tmp_path: Path
) -> None:
    spool, archive, dbp = tmp_path / "spool", tmp_path / "archive", tmp_path / "audit.duckdb"
    spool.mkdir()
    good = sorted(SAMPLE.glob("*.jsonl*"))
    for f in good:
        (spool / f.name).write_bytes(f.read_bytes())
    write(spool / ODD, table_lines("ZZ-09"))

    r = bacc_audit(
        "nightly", "--spool", spool, "--date", "2026-11-28", "--archive", archive,
        "--db", dbp, "--config", SAMPLE / "property.toml", "--json",
    )

    assert r.code not in (EXIT_INTERNAL, EXIT_INPUT), r
    assert r.code == EXIT_FINDINGS  # the sample night's own findings
    summary = json.loads(r.out)
    assert summary["files_by_status"] == {"ingested": len(good) + 1}
    odd = [f for f in summary["files"] if f["path"] == f"{spool}/x_\\xff.jsonl"]
    assert [(f["status"], f["events"]) for f in odd] == [("ingested", 15)]
    assert rows(dbp, "SELECT count(*) FROM events WHERE stream = 'table:ZZ-09'") == [(15,)]
    day = archive / "2026-11-28"
    assert sorted(p.name for p in day.iterdir()) == [
        "2026-11-28_grave.pdf",
        "2026-11-28_swing.pdf",
    ]
    assert all(p.read_bytes().startswith(b"%PDF-") for p in day.iterdir())
    assert summary["pdfs"] == 2
