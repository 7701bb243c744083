"""The events digest of each piece computed while staging (ingest/stage.py,
`Staging.record_digests`), which the seal takes instead of reading the rows back: for every
way rows reach `events` (the fast path, the per-line path, a batch of small files, the
follower's pieces, lines rejected or skipped as duplicates after their insert) it is the
digest the rows in the database give (`ledger_rows.digests`, which `verify` computes)."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from helpers.db import AuditDb
from helpers.growing import first, table_night

from auditor.ingest import stage
from auditor.ingest.follow import Follower
from auditor.jobs import verify as verifying
from auditor.store import ledger_rows, runs

Key = tuple[int, int, int]


def grow(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


def staged(con: duckdb.DuckDBPyConnection) -> dict[Key, tuple[int, str]]:
    return {(s, a, b): (n, h) for s, a, b, n, h in con.execute(
        f"SELECT * FROM {ledger_rows.STAGED}").fetchall()}


def read_back(con: duckdb.DuckDBPyConnection) -> dict[Key, tuple[int, str]]:
    """Each piece's events digest from its rows in `events`, as `verify` computes it."""
    return {(r["source_id"], r["start_byte"], r["end_byte"]): (r["events_stored"],
                                                               r["events_sha256"])
            for r in ledger_rows.digests(con, ledger_rows.pieces(con, "true")).to_pylist()}


def events_per_piece(con: duckdb.DuckDBPyConnection) -> list[tuple[int, int]]:
    """(first_line, events) of each piece, as ingest counted them."""
    return con.execute("SELECT first_line, events FROM source_extents "
                       "ORDER BY source_id, first_line").fetchall()


def test_the_fast_paths_digest_is_the_one_its_rows_give(audit: AuditDb) -> None:
    audit.ingest_file(audit.write_bytes("MB-07.jsonl", first(200)))
    got = staged(audit.con)
    assert [n for n, _ in got.values()] == [200]
    assert got == read_back(audit.con)


def test_the_per_line_paths_digest_is_the_one_its_rows_give(audit: AuditDb) -> None:
    """Lines the fast path leaves to the per-line one (leading blanks, an escape, a CR, a
    trailing tab) between fast ones; a blank line, a line not JSON and one not UTF-8 give no
    event. The rows are staged out of line order (the fast ones first)."""
    lines = list(table_night()[:30])
    lines[3] = b"   " + lines[3]
    lines[6] = lines[6].rstrip(b"\n") + b" \t\n"
    lines[9] = b"\n"
    lines[12] = b"not json\n"
    lines[15] = lines[15].rstrip(b"\n") + b"\r\n"
    lines[18] = b'{"v":1,"type":"\xff"}\n'
    lines[21] = lines[21].replace(b'"MB-07"', b'"MB\\u002d07"', 1)
    audit.ingest_file(audit.write_bytes("MB-07.jsonl", b"".join(lines)))
    assert audit.scalar("SELECT count(*) FROM quarantine") == 2
    assert audit.scalar("SELECT raw FROM events WHERE line_no = 4").startswith("   {")
    assert audit.scalar("SELECT raw FROM events WHERE line_no = 7").endswith("} \t")
    assert audit.scalar("SELECT raw FROM events WHERE line_no = 22").count("\\u002d") == 1
    got = staged(audit.con)
    assert [n for n, _ in got.values()] == [27]
    assert got == read_back(audit.con)


def test_a_batch_of_small_files_has_each_pieces_own_digest(audit: AuditDb) -> None:
    paths = [audit.write_bytes(f"{t}.jsonl", b"".join(table_night(t)[:40 + 10 * i]))
             for i, t in enumerate(("MB-01", "MB-02", "MB-03"))]
    paths.append(audit.write_bytes("MB-04.jsonl", b"".join(table_night("MB-04")[:25])
                                   + b"not json\n" + b"".join(table_night("MB-04")[25:35])))
    audit.ingest(*paths)
    assert events_per_piece(audit.con) == [(1, 40), (1, 50), (1, 60), (1, 35)]
    got = staged(audit.con)
    assert sorted(n for n, _ in got.values()) == [35, 40, 50, 60]
    assert len({h for _, h in got.values()}) == 4
    assert got == read_back(audit.con)


def test_the_followers_pieces_have_their_own_digests(audit: AuditDb) -> None:
    con = audit.con
    a, b = audit.dir / "MB-07.jsonl", audit.dir / "MB-08.jsonl"
    a.write_bytes(first(60))
    b.write_bytes(first(20, "MB-08"))
    follower = Follower(audit.run_id, [a, b])
    follower.poll(con)
    grow(a, first(75)[len(first(60)):])
    grow(b, first(50, "MB-08")[len(first(20, "MB-08")):] + b"not json\n")
    follower.poll(con)
    grow(a, first(76)[len(first(75)):])
    follower.poll(con)
    assert events_per_piece(con) == [(1, 60), (61, 15), (76, 1), (1, 20), (21, 30)]
    got = staged(con)
    assert len(got) == 5
    assert got == read_back(con)


def test_lines_rejected_or_skipped_after_their_insert_are_not_in_the_digest(
    audit: AuditDb,
) -> None:
    """A seq repeated in a file (the first line stands, the repeat is quarantined) and a
    resent file overlapping one ingested (its copies skipped as duplicates): the digest is
    over the rows that stay."""
    lines = list(table_night()[:50])
    audit.ingest_file(audit.write_bytes("MB-07.jsonl", b"".join(lines[:30])))
    again = lines[20:50]
    again.insert(15, again[14])  # line 16 repeats seq 35
    audit.ingest_file(audit.write_bytes("MB-07.resent.jsonl", b"".join(again)))
    assert events_per_piece(audit.con) == [(1, 30), (1, 20)]
    assert audit.scalar("SELECT duplicates FROM source_extents WHERE first_line = 1 "
                        "AND source_id = (SELECT max(source_id) FROM source_extents)") == 10
    assert audit.rows("SELECT line_no, reason FROM quarantine") == [
        {"line_no": 16, "reason": "seq 35 repeats in table MB-07 (first at line 15)"}]
    got = staged(audit.con)
    assert sorted(n for n, _ in got.values()) == [20, 30]
    assert got == read_back(audit.con)


def test_the_seal_seals_the_staged_digest_so_an_event_edited_before_it_is_caught(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    """The seal does not read the rows back: an event edited between its insert and the
    seal is sealed as ingest read it, and `verify` names the piece."""
    log = tmp_path / "MB-07.jsonl"
    log.write_bytes(first(40))
    with runs.recorded(con, "ingest", {}) as run:
        AuditDb(tmp_path, con, run.id).ingest_file(log)
        con.execute("UPDATE events SET raw = replace(raw, '\"seq\":7,', '\"seq\":7 ,') "
                    "WHERE line_no = 7")
    [(sha,)] = con.execute("SELECT events_sha256 FROM ingest_digests").fetchall()
    assert f'"events_sha256":"{sha}"' in con.execute(
        "SELECT data FROM ledger WHERE kind = 'piece'").fetchall()[0][0]
    found = verifying.verify(con)
    assert not found.ok
    assert [(p.what, p.table) for p in found.problems
            if "events_sha256" in p.detail] == [("changed", "source_extents")]


def test_rows_too_many_to_hold_are_read_back_by_the_seal(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stage, "HOLD_BYTES", 1000)
    log = tmp_path / "MB-07.jsonl"
    log.write_bytes(first(40))
    with runs.recorded(con, "ingest", {}) as run:
        AuditDb(tmp_path, con, run.id).ingest_file(log)
    assert staged(con) == {}
    [(events,)] = con.execute(
        "SELECT json_extract(data, '$.events_stored')::BIGINT FROM ledger "
        "WHERE kind = 'piece'").fetchall()
    assert events == 40
    assert verifying.verify(con).ok


def test_the_events_digest_is_the_one_docs_ledger_md_describes() -> None:
    """Worked from the format, not from the code: line numbers as 8 bytes big-endian; the
    lines' lengths as 4 bytes big-endian in one stream, their bytes in another; SHA-256 of
    each stream, then of the three digests one after the other. Chunks and slices (as a
    poll holds its rows) digest as the rows they hold."""
    texts = ['{"seq":3}', "", "h\u00e9llo \u2713", "x" * 300]
    numbers = [3, 4, 9, 12]
    encoded = [t.encode() for t in texts]
    want = hashlib.sha256(
        hashlib.sha256(b"".join(struct.pack(">q", n) for n in numbers)).digest()
        + hashlib.sha256(b"".join(struct.pack(">i", len(b)) for b in encoded)).digest()
        + hashlib.sha256(b"".join(encoded)).digest()
    ).hexdigest()
    lines = pa.array([0, *numbers], pa.int64())
    raw = pa.array(["skipped", *texts], pa.large_string())
    assert ledger_rows.events_digest([(lines.slice(1), raw.slice(1))]) == (4, want)
    halves = [(lines.slice(1, 2), raw.slice(1, 2)),
              (lines.slice(3), raw.cast(pa.string()).slice(3))]
    assert ledger_rows.events_digest(halves) == (4, want)
