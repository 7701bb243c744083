"""Files that grow (issue 14): a table's log ingested while it is written, then offered again,
loads only what it gained, whatever its name is by then; a last line without its newline waits
for it; only a change to bytes already ingested is `log.altered`; every piece is on the record
(`source_extents`) and checks against the file. Through `bacc-audit ingest`, `nightly`, and
the follower API (auditor.ingest.follow) the live `watch` command polls, including a follower
killed mid-poll, by an exception inside its transaction and by SIGKILL.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import os
import random
import shutil
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.db import AuditDb
from helpers.growing import (
    check_pieces,
    each_event_once,
    extents,
    first,
    malformed_fingerprint,
    rounds_touched,
    rows,
    start_follower,
    table_night,
)

import auditor.ingest.commit as commit_mod
import auditor.ingest.follow as follow_mod
import auditor.ingest.load as load_mod
import auditor.ingest.run as run_mod
from auditor import config
from auditor.ingest.follow import Follower, Position
from auditor.jobs import nightly
from auditor.store import db, runs

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_logs"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@contextmanager
def opened(dbp: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect(str(dbp), read_only=True)
    try:
        yield con
    finally:
        con.close()


def grow(path: Path, data: bytes) -> None:
    """Append to the file, as a table system does (same file, same inode)."""
    with path.open("ab") as fh:
        fh.write(data)


def codes(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute("SELECT code FROM findings ORDER BY id").fetchall()]


# --------------------------------------------------------------------------------------------
# bacc-audit ingest, run again over a file that grew
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_file_that_grew_loads_only_its_new_lines(bacc_audit: Any, tmp_path: Path) -> None:
    dbp = tmp_path / "audit.duckdb"
    log = tmp_path / "logs" / "MB-07.jsonl"
    log.parent.mkdir()
    e1, e2 = len(first(1000)), len(first(1500))
    log.write_bytes(first(1000))
    r = bacc_audit("ingest", log, "--db", dbp)
    assert (r.code, r.err) == (0, ""), r
    assert r.out.splitlines()[0] == f"{log}: 1000 events, 0 quarantined"

    grow(log, first(1500)[e1:])
    r = bacc_audit("ingest", log, "--db", dbp)
    assert (r.code, r.err) == (0, ""), r
    assert r.out.splitlines()[0] == (
        f"{log}: 500 events, 0 quarantined; continued from line 1,001 (the lines before it "
        "were ingested already)"
    )
    assert r.out.splitlines()[-1] == (
        "1 file: 1 ingested, 0 already ingested, 0 refused, 0 unreadable; 500 events loaded, "
        "0 lines quarantined"
    )

    r = bacc_audit("ingest", log, "--db", dbp)
    assert r.code == 0, r
    assert f"{log}: already ingested on " in r.out

    resolved = str(log.resolve())
    with opened(dbp) as con:
        assert each_event_once(con) == list(range(1, 1501))
        assert codes(con) == []  # no log.altered, no gap
        src = rows(con, "SELECT id, path, sha256, size, lines, events, status, note "
                        "FROM sources ORDER BY id")
        first_id = src[0]["id"]
        assert [{k: v for k, v in s.items() if k != "id"} for s in src] == [
            {"path": resolved, "sha256": sha(first(1000)), "size": e1, "lines": 1000,
             "events": 1000, "status": "ingested", "note": ""},
            {"path": resolved, "sha256": sha(first(1500)), "size": e2, "lines": 500,
             "events": 500, "status": "ingested",
             "note": f"continues {resolved} (source {first_id}) from byte {e1:,}, line 1,001"},
        ]
        assert [
            (x["source_id"], x["file_id"], x["start_byte"], x["end_byte"], x["first_line"],
             x["last_line"], x["events"], x["prefix_sha256"], x["waiting_bytes"])
            for x in extents(con)
        ] == [
            (first_id, first_id, 0, e1, 1, 1000, 1000, sha(first(1000)), 0),
            (src[1]["id"], first_id, e1, e2, 1001, 1500, 500, sha(first(1500)), 0),
        ]
        check_pieces(con)
        # The events of the second piece carry their line numbers in the file.
        assert con.execute(
            "SELECT min(line_no), max(line_no) FROM events WHERE source_id = ?", [src[1]["id"]]
        ).fetchall() == [(1001, 1500)]


@pytest.mark.slow
def test_a_last_line_without_its_newline_waits_for_it(bacc_audit: Any, tmp_path: Path) -> None:
    """The table system is still writing it: it is neither loaded nor quarantined, the summary
    and the manifest say it waits, and it loads whole once its newline is written."""
    dbp = tmp_path / "audit.duckdb"
    log = tmp_path / "MB-07.jsonl"
    e10 = len(first(10))
    log.write_bytes(first(11)[: e10 + 30])
    r = bacc_audit("ingest", log, "--db", dbp)
    assert (r.code, r.err) == (0, ""), r
    waits = ("line 11 has no newline yet (30 bytes so far): it waits for its newline and "
             "loads when the file is offered again")
    assert r.out.splitlines()[0] == f"{log}: 10 events, 0 quarantined; {waits}"
    with opened(dbp) as con:
        assert each_event_once(con) == list(range(1, 11))
        assert con.execute("SELECT count(*) FROM quarantine").fetchall() == [(0,)]
        assert codes(con) == []
        [x] = extents(con)
        assert (x["end_byte"], x["last_line"], x["waiting_bytes"]) == (e10, 10, 30)
        assert con.execute("SELECT note, size FROM sources").fetchall() == [(waits, e10 + 30)]

    r = bacc_audit("ingest", log, "--db", dbp)  # unchanged: nothing new, and it still waits
    assert r.code == 0, r
    assert r.out.splitlines()[0].endswith(f"; nothing new; {waits}")

    log.write_bytes(first(12))
    r = bacc_audit("ingest", log, "--db", dbp)
    assert (r.code, r.err) == (0, ""), r
    assert r.out.splitlines()[0] == (
        f"{log}: 2 events, 0 quarantined; continued from line 11 (the lines before it were "
        "ingested already)"
    )
    with opened(dbp) as con:
        assert each_event_once(con) == list(range(1, 13))
        assert [(x["first_line"], x["last_line"]) for x in extents(con)] == [(1, 10), (11, 12)]
        assert codes(con) == []
        check_pieces(con)


@pytest.mark.slow
def test_a_first_line_still_being_written_loads_nothing_yet(
    bacc_audit: Any, tmp_path: Path
) -> None:
    dbp = tmp_path / "audit.duckdb"
    log = tmp_path / "MB-07.jsonl"
    log.write_bytes(first(1)[:25])
    r = bacc_audit("ingest", log, "--db", dbp)
    assert (r.code, r.err) == (0, ""), r
    assert r.out.splitlines()[0] == (
        f"{log}: nothing to load yet; line 1 has no newline yet (25 bytes so far): it waits "
        "for its newline and loads when the file is offered again"
    )
    with opened(dbp) as con:
        assert con.execute("SELECT count(*) FROM sources").fetchall() == [(0,)]
    log.write_bytes(first(3))
    assert bacc_audit("ingest", log, "--db", dbp).code == 0
    with opened(dbp) as con:
        assert each_event_once(con) == [1, 2, 3]


@pytest.mark.slow
def test_a_file_finished_without_a_final_newline_loses_nothing(
    bacc_audit: Any, tmp_path: Path
) -> None:
    """A last line that is a whole JSON object cannot grow into another event: it is read
    (as ingest always did). If the file grows after all, what follows on that line is its
    rest (here nothing but its newline), and the next line is line 16."""
    dbp = tmp_path / "audit.duckdb"
    log = tmp_path / "MB-07.jsonl"
    done = first(15)[:-1]
    log.write_bytes(done)
    r = bacc_audit("ingest", log, "--db", dbp)
    assert r.out.splitlines()[0] == f"{log}: 15 events, 0 quarantined"
    grow(log, b"\n" + first(17)[len(first(15)):])
    r = bacc_audit("ingest", log, "--db", dbp)
    assert (r.code, r.err) == (0, ""), r
    assert r.out.splitlines()[0].startswith(f"{log}: 2 events, 0 quarantined; continued from "
                                            "line 15")
    with opened(dbp) as con:
        assert each_event_once(con) == list(range(1, 18))
        assert con.execute(
            "SELECT line_no FROM events WHERE seq IN (15, 16, 17) ORDER BY seq"
        ).fetchall() == [(15,), (16,), (17,)]
        assert [(x["start_byte"], x["end_byte"], x["first_line"], x["last_line"])
                for x in extents(con)] == [(0, len(done), 1, 15),
                                           (len(done), len(first(17)), 15, 17)]
        assert codes(con) == []
        check_pieces(con)


@pytest.mark.slow
def test_a_bad_last_line_without_newline_waits_and_is_said_until_it_ends(
    bacc_audit: Any, tmp_path: Path
) -> None:
    """Nothing is lost: the line is said in every summary while it waits, and quarantined
    like any bad line once its newline comes."""
    dbp = tmp_path / "audit.duckdb"
    log = tmp_path / "MB-07.jsonl"
    log.write_bytes(first(5) + b"not json")
    for _ in range(2):
        r = bacc_audit("ingest", log, "--db", dbp)
        assert (r.code, r.err) == (0, ""), r
        assert "line 6 has no newline yet (8 bytes so far)" in r.out.splitlines()[0]
    grow(log, b"\n")
    r = bacc_audit("ingest", log, "--db", dbp)
    assert r.code == 1, r
    assert r.err.splitlines() == [f"quarantined: {log}:6: not valid JSON"]
    with opened(dbp) as con:
        assert each_event_once(con) == [1, 2, 3, 4, 5]
        assert con.execute("SELECT line_no, reason, raw FROM quarantine").fetchall() == [
            (6, "not valid JSON", "not json")
        ]
        assert codes(con) == ["log.malformed"]
        assert con.execute("SELECT fingerprint FROM findings").fetchall() == [
            (malformed_fingerprint(log, 6, "not json"),)
        ]


# --------------------------------------------------------------------------------------------
# Renamed, rotated: recognised by content
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_rotated_file_is_recognised_by_its_content_and_a_new_one_is_new(
    bacc_audit: Any, tmp_path: Path
) -> None:
    """MB-07.log ingested at 1,000 lines, renamed MB-07.log.1 and grown to 1,500; a new
    MB-07.log begun with the events after them. Offered together: the 500 new lines of the
    old file, and the new file as a new source; nothing twice, nothing altered."""
    dbp = tmp_path / "audit.duckdb"
    spool = tmp_path / "spool"
    spool.mkdir()
    log, old = spool / "MB-07.log", spool / "MB-07.log.1"
    log.write_bytes(first(1000))
    assert bacc_audit("ingest", log, "--db", dbp).code == 0
    os.rename(log, old)
    grow(old, first(1500)[len(first(1000)):])
    log.write_bytes(first(1600)[len(first(1500)):])

    r = bacc_audit("ingest", old, log, "--db", dbp)
    assert (r.code, r.err) == (0, ""), r
    assert r.out.splitlines()[:2] == [
        f"{old}: 500 events, 0 quarantined; continued from line 1,001 (the lines before it "
        f"were ingested as {log.resolve()} already)",
        f"{log}: 100 events, 0 quarantined",
    ]
    with opened(dbp) as con:
        assert each_event_once(con) == list(range(1, 1601))
        assert codes(con) == []
        assert con.execute("SELECT sum(duplicates) FROM sources").fetchall() == [(0,)]
        x = extents(con)
        assert [(p["path"], p["first_line"], p["last_line"]) for p in x] == [
            (str(log.resolve()), 1, 1000),
            (str(old.resolve()), 1001, 1500),
            (str(log.resolve()), 1, 100),
        ]
        assert x[0]["file_id"] == x[1]["file_id"] != x[2]["file_id"]
        # The first piece's path now names the new file: check it against the old one.
        assert sha(old.read_bytes()[: x[0]["end_byte"]]) == x[0]["prefix_sha256"]
        assert sha(old.read_bytes()) == x[1]["prefix_sha256"]
        assert sha(log.read_bytes()) == x[2]["prefix_sha256"]


@pytest.mark.slow
def test_a_log_rotated_into_gzip_loads_only_the_events_it_adds(
    bacc_audit: Any, tmp_path: Path
) -> None:
    """A gzip file is read whole (it cannot grow); the events it shares with what was
    ingested are skipped as duplicates, as for any copy, and nothing is altered."""
    dbp = tmp_path / "audit.duckdb"
    log = tmp_path / "MB-07.jsonl"
    log.write_bytes(first(1000))
    assert bacc_audit("ingest", log, "--db", dbp).code == 0
    rotated = tmp_path / "MB-07.jsonl.1.gz"
    rotated.write_bytes(gzip.compress(first(1500), mtime=0))
    log.unlink()
    r = bacc_audit("ingest", rotated, "--db", dbp)
    assert (r.code, r.err) == (0, ""), r
    assert r.out.splitlines()[0] == (
        f"{rotated}: 500 events, 0 quarantined, 1000 already ingested from another file"
    )
    with opened(dbp) as con:
        assert each_event_once(con) == list(range(1, 1501))
        assert codes(con) == []


# --------------------------------------------------------------------------------------------
# What is still an alteration
# --------------------------------------------------------------------------------------------


def _changed_line(n: int) -> bytes:
    """Line n of the night with its dealer changed: a byte already ingested altered."""
    event = json.loads(table_night()[n - 1])
    event["dealer"] = "E99999"
    return (json.dumps(event, separators=(",", ":")) + "\n").encode()


@pytest.mark.slow
def test_a_changed_ingested_byte_is_still_altered_even_when_the_file_grew(
    bacc_audit: Any, tmp_path: Path
) -> None:
    dbp = tmp_path / "audit.duckdb"
    log = tmp_path / "MB-07.jsonl"
    log.write_bytes(first(1000))
    assert bacc_audit("ingest", log, "--db", dbp).code == 0
    lines = list(table_night()[:1500])
    lines[499] = _changed_line(500)
    log.write_bytes(b"".join(lines))
    r = bacc_audit("ingest", log, "--db", dbp)
    assert r.code == 1, r
    assert r.err.splitlines() == [
        f"error: {log}: refused: its content changed since it was ingested (sha256 "
        f"{sha(first(1000))[:12]}... then, {sha(log.read_bytes())[:12]}... now)"
    ]
    with opened(dbp) as con:
        assert each_event_once(con) == list(range(1, 1001))  # nothing of it loaded
        [(code, severity, status)] = con.execute(
            "SELECT code, severity, status FROM findings"
        ).fetchall()
        assert (code, severity, status) == ("log.altered", "critical", "open")
        assert con.execute("SELECT status FROM sources ORDER BY id").fetchall() == [
            ("ingested",), ("refused_altered",)
        ]


@pytest.mark.slow
def test_a_file_truncated_in_place_is_altered_and_a_new_empty_one_is_not(
    bacc_audit: Any, tmp_path: Path
) -> None:
    """The same file (device and inode) smaller than what was ingested lost ingested bytes:
    altered. A new file begun under the old name after a rotation (another inode) is empty,
    which is said, but alters nothing."""
    dbp = tmp_path / "audit.duckdb"
    log = tmp_path / "MB-07.jsonl"
    log.write_bytes(first(100))
    assert bacc_audit("ingest", log, "--db", dbp).code == 0
    with log.open("r+b") as fh:
        fh.truncate(len(first(80)))
    r = bacc_audit("ingest", log, "--db", dbp)
    assert r.code == 1, r
    assert r.err.startswith(f"error: {log}: refused: its content changed since it was ingested")

    other = tmp_path / "B.jsonl"
    other.write_bytes(first(50, "MB-08"))
    assert bacc_audit("ingest", other, "--db", dbp).code == 0
    os.rename(other, tmp_path / "B.jsonl.1")
    other.write_bytes(b"")
    r = bacc_audit("ingest", other, "--db", dbp)
    assert r.code == 2, r
    assert "empty file, no events to load" in r.err
    with opened(dbp) as con:
        assert codes(con) == ["log.altered"]


def test_a_database_from_before_pieces_continues_its_files_by_path(
    audit: AuditDb, db_path: Path
) -> None:
    """An existing database keeps working: its files are one piece each (found again by
    their path, as the head of their first line was not kept), and grow like any other."""
    log = audit.dir / "MB-07.jsonl"
    log.write_bytes(first(200))
    old = audit.ingest_file(log)
    audit.con.execute("DROP VIEW source_totals")
    audit.con.execute("DROP TABLE source_extents")
    audit.con.execute("DROP TABLE source_files")
    db.ensure_schema(audit.con)  # as `connect` does for an old database
    assert [(x["source_id"], x["file_id"], x["start_byte"], x["end_byte"], x["first_line"],
             x["last_line"], x["prefix_sha256"]) for x in extents(audit.con)] == [
        (old.source_id, old.source_id, 0, len(first(200)), 1, 200, sha(first(200)))
    ]
    assert audit.rows("SELECT id, head_sha256 FROM source_files") == [
        {"id": old.source_id, "head_sha256": None}
    ]
    grow(log, first(300)[len(first(200)):])
    r = audit.ingest_file(log)
    assert (r.status, r.events, r.first_line, r.last_line) == ("ingested", 100, 201, 300)
    assert each_event_once(audit.con) == list(range(1, 301))
    check_pieces(audit.con)


# --------------------------------------------------------------------------------------------
# Pieces are judged as the whole file would be
# --------------------------------------------------------------------------------------------


def _hostile_night() -> bytes:
    """300 lines of the night with a bad line, a repeated seq, a missing event, a blank line
    and a CRLF line end in it."""
    lines = list(table_night()[:300])
    lines[49] = b"not json\n"
    lines[149] = lines[19]  # seq 20 again, at line 150
    lines[199] = b"\n"  # seq 200 missing
    lines[249] = lines[249][:-1] + b"\r\n"
    return b"".join(lines)


def _judged(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """What ingest made of a file, in terms that do not depend on how it was cut."""
    return {
        "events": con.execute(
            "SELECT stream, seq, line_no, raw FROM events ORDER BY stream, seq"
        ).fetchall(),
        "quarantine": con.execute(
            "SELECT line_no, reason, raw FROM quarantine ORDER BY line_no"
        ).fetchall(),
        "findings": con.execute(
            "SELECT code, table_id, seq, message FROM current_findings ORDER BY ALL"
        ).fetchall(),
    }


@pytest.mark.slow
def test_a_file_ingested_in_pieces_is_judged_as_if_read_whole(
    tmp_path: Path
) -> None:
    """The same file cut at arbitrary bytes (inside lines too), through batch ingest and
    through the follower: the same events, quarantine and findings as one ingest of the
    whole file, and pieces that check against it."""
    data = _hostile_night()
    rng = random.Random(14)
    cuts = sorted(rng.sample(range(1, len(data)), 12))
    cuts.append(data.index(b"}\n", len(data) // 2) + 1)  # right after a whole object
    cuts = [*sorted(set(cuts)), len(data)]
    judged = []
    for how in ("whole", "batch", "follow"):
        folder = tmp_path / how
        folder.mkdir()
        con = db.connect(folder / "audit.duckdb")
        run_id = runs.start(con, "test", {})
        log = folder / "MB-07.jsonl"
        follower = Follower(run_id, [log])
        for cut in [len(data)] if how == "whole" else cuts:
            log.write_bytes(data[:cut])
            if how == "follow":
                follower.poll(con)
            else:
                load_mod.ingest_file(con, log, run_id)
        judged.append(_judged(con))
        check_pieces(con)
        if how != "whole":
            assert len(extents(con)) > 5
        con.close()
    whole, batch, follow = judged
    assert len(whole["events"]) == 297
    assert [q[:2] for q in whole["quarantine"]] == [
        (50, "not valid JSON"), (150, "seq 20 repeats in table MB-07 (first at line 20)")
    ]
    assert batch == whole
    assert follow == whole


# --------------------------------------------------------------------------------------------
# The follower
# --------------------------------------------------------------------------------------------


def _round_ends(lines: tuple[bytes, ...]) -> list[tuple[str, str, int]]:
    ends = [json.loads(x) for x in lines]
    return [(e["table"], e["shoe"], e["round"]) for e in ends if e["type"] == "round_end"]


def test_the_follower_loads_what_each_poll_finds(audit: AuditDb) -> None:
    con, log = audit.con, audit.dir / "MB-07.jsonl"
    log.write_bytes(first(100))
    follower = Follower(audit.run_id, [log])
    p = follower.poll(con)
    [f] = p.files
    assert (f.status, f.events, f.first_line, f.last_line) == ("ingested", 100, 1, 100)
    assert p.events == 100
    assert p.rounds_ended == _round_ends(table_night()[:100])
    assert p.types["table:MB-07"]["round_end"] == len(p.rounds_ended)
    assert sum(p.types["table:MB-07"].values()) == 100
    assert p.rounds_touched == rounds_touched(table_night()[:100])
    source = f.source_id

    grow(log, first(102)[len(first(100)):])
    p = follower.poll(con)
    [f] = p.files
    assert (f.events, f.first_line, f.last_line, f.source_id) == (2, 101, 102, source)
    assert f.message == f"{log}: 2 events, 0 quarantined (lines 101-102)"
    assert p.rounds_ended == _round_ends(table_night()[100:102])
    assert p.rounds_touched == rounds_touched(table_night()[100:102])

    p = follower.poll(con)  # nothing new: one stat
    assert (p.files, p.events, p.waiting) == ([], 0, {})

    line = table_night()[102]
    grow(log, line[:40])
    p = follower.poll(con)
    assert (p.files, p.waiting) == ([], {log: 40})
    assert follower.position(log) == Position(len(first(102)), 102, 40)
    grow(log, line[40:])
    p = follower.poll(con)
    assert [(f.first_line, f.last_line, f.events) for f in p.files] == [(103, 103, 1)]
    assert follower.position(log) == Position(len(first(103)), 103, 0)

    assert each_event_once(con) == list(range(1, 104))
    assert [(x["source_id"], x["first_line"], x["last_line"], x["events"])
            for x in extents(con)] == [
        (source, 1, 100, 100), (source, 101, 102, 2), (source, 103, 103, 1)
    ]
    check_pieces(con)
    # One `sources` row for the follower's file; the view sums its pieces.
    assert audit.scalar("SELECT count(*) FROM sources") == 1
    assert audit.rows(
        "SELECT pieces, end_byte, last_line, sha256, events FROM source_totals"
    ) == [{"pieces": 3, "end_byte": len(first(103)), "last_line": 103,
           "sha256": sha(first(103)), "events": 103}]
    assert audit.rows("SELECT min_seq, max_seq, events FROM stream_sources") == [
        {"min_seq": 1, "max_seq": 103, "events": 103}
    ]
    assert audit.findings() == []


@pytest.mark.slow
def test_the_follower_puts_bad_lines_and_gaps_on_the_record(audit: AuditDb) -> None:
    con, log = audit.con, audit.dir / "MB-07.jsonl"
    log.write_bytes(first(100))
    follower = Follower(audit.run_id, [log])
    follower.poll(con)
    lines = table_night()
    grow(log, lines[100] + b"not json\n" + lines[102])  # line 102 bad; seq 102 missing
    p = follower.poll(con)
    [f] = p.files
    assert (f.events, f.quarantined, f.first_line, f.last_line) == (2, 1, 101, 103)
    assert f.problems == [f"{log}:102: not valid JSON"]
    assert [(q["line_no"], q["reason"], q["raw"]) for q in audit.quarantine()] == [
        (102, "not valid JSON", "not json")
    ]
    resolved = str(log.resolve())
    malformed, gap = audit.findings()
    assert (malformed["code"], malformed["source"]) == ("log.malformed", f"{resolved}:102")
    # Its fingerprint is the one batch ingest gives the same line of the whole file.
    piece = extents(con)[-1]
    assert piece["prefix_sha256"] == sha(log.read_bytes())
    assert malformed["fingerprint"] == malformed_fingerprint(log, 102, "not json")
    assert malformed["message"] == (
        "Line 102 of MB-07.jsonl could not be read: not valid JSON; it is kept in quarantine"
    )
    assert (gap["code"], gap["seq"], gap["source"]) == ("log.seq_gap", 103, f"{resolved}:103")
    assert gap["message"] == "Table MB-07: seq 101 is followed by seq 103; 1 event is missing"
    assert gap["evidence"] == {"previous": f"{resolved}:101"}

    # A later line that fills the gap withdraws it, as for batch ingest.
    grow(log, lines[101])
    follower.poll(con)
    assert audit.current_findings("log.seq_gap") == []
    assert each_event_once(con) == list(range(1, 104))


def test_a_new_follower_goes_on_where_the_last_one_stopped(audit: AuditDb) -> None:
    con, log = audit.con, audit.dir / "MB-07.jsonl"
    log.write_bytes(first(100))
    before = Follower(audit.run_id, [log])
    [f] = before.poll(con).files
    grow(log, first(150)[len(first(100)):])
    after = Follower(audit.run_id, [log])  # a restart: state from the database
    [g] = after.poll(con).files
    resolved = str(log.resolve())
    assert (g.events, g.first_line, g.last_line) == (50, 101, 150)
    assert g.message == (
        f"{log}: 50 events, 0 quarantined; continued from line 101 (the lines before it were "
        "ingested already)"
    )
    assert audit.scalar("SELECT note FROM sources WHERE id = ?", g.source_id) == (
        f"continues {resolved} (source {f.source_id}) from byte {len(first(100)):,}, line 101"
    )
    grow(log, first(160)[len(first(150)):])
    [h] = after.poll(con).files
    assert (h.source_id, h.first_line, h.last_line) == (g.source_id, 151, 160)
    assert each_event_once(con) == list(range(1, 161))
    check_pieces(con)
    assert audit.findings() == []


@pytest.mark.parametrize("where", ["small piece", "first piece"])
def test_a_follower_failing_inside_its_transaction_loses_and_repeats_nothing(
    audit: AuditDb, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A crash anywhere in the transaction (here: as the pieces are recorded, its last
    step) leaves the database as before the poll; the next poll, or a new follower, loads
    the lines once."""
    con, log = audit.con, audit.dir / "MB-07.jsonl"
    follower = Follower(audit.run_id, [log])
    if where == "small piece":
        log.write_bytes(first(100))
        follower.poll(con)
    before = audit.counts() | {"pieces": len(extents(con))}
    log.write_bytes(first(102))

    def crash(*args: Any, **kw: Any) -> None:
        raise RuntimeError("killed")

    monkeypatch.setattr(commit_mod, "record_pieces", crash)  # both kinds of piece
    with pytest.raises(RuntimeError, match="killed"):
        follower.poll(con)
    assert audit.counts() | {"pieces": len(extents(con))} == before
    monkeypatch.undo()

    for f in (follower, Follower(audit.run_id, [log])):  # the same one, and a restart
        f.poll(con)
        assert each_event_once(con) == list(range(1, 103))
    check_pieces(con)
    assert audit.findings() == []


@pytest.mark.slow
def test_a_follower_killed_with_sigkill_anywhere_loses_and_repeats_nothing(
    tmp_path: Path,
) -> None:
    """A follower in another process, killed at random moments while the file grows (in
    pieces that cut lines in two); each time a new one takes over. In the end every event is
    loaded exactly once and the pieces check against the file."""
    dbp, log = tmp_path / "audit.duckdb", tmp_path / "MB-07.jsonl"
    data = first(3000)
    rng = random.Random(9)
    log.write_bytes(data[:2000])
    at = 2000
    for _ in range(4):
        child = start_follower(dbp, log)
        deadline = time.monotonic() + rng.uniform(0.5, 2.0)
        while time.monotonic() < deadline and at < len(data):
            step = rng.randint(1, 6000)
            grow(log, data[at : at + step])
            at += step
            time.sleep(rng.uniform(0, 0.05))
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        for stream in (child.stdout, child.stderr):
            if stream:
                stream.close()
    grow(log, data[at:])
    con = db.connect(dbp)
    try:
        follower = Follower(runs.start(con, "test", {}), [log])
        follower.poll(con)
        assert follower.poll(con).events == 0
        assert each_event_once(con) == list(range(1, 3001))
        assert con.execute("SELECT count(*) FROM quarantine").fetchall() == [(0,)]
        assert codes(con) == []
        check_pieces(con)
    finally:
        con.close()


def test_a_followed_file_that_shrinks_is_altered(audit: AuditDb) -> None:
    con, log = audit.con, audit.dir / "MB-07.jsonl"
    log.write_bytes(first(100))
    follower = Follower(audit.run_id, [log])
    follower.poll(con)
    with log.open("r+b") as fh:
        fh.truncate(len(first(90)))
    p = follower.poll(con)
    [f] = p.files
    assert f.status == "refused_altered"
    assert f.message.startswith(f"{log}: refused: its content changed since it was ingested")
    [altered] = audit.findings("log.altered")
    assert altered["severity"] == "critical"
    assert follower.poll(con).files == []  # said once; judged again only if it changes
    assert each_event_once(con) == list(range(1, 101))


def followed_then_changed(audit: AuditDb, log: Path, seq: int) -> Follower:
    """`log` of 100 lines loaded by a new follower, then line `seq`'s seq made 99 in place
    (same size, same inode)."""
    log.write_bytes(first(100))
    follower = Follower(audit.run_id, [log])
    follower.poll(audit.con)
    with log.open("r+b") as fh:
        fh.seek(first(100).index(b'"seq":%d,' % seq))
        fh.write(b'"seq":99,')
    return follower


def test_the_follower_catches_ingested_bytes_changed_in_place(audit: AuditDb) -> None:
    """Same size, same inode, a seq changed in line 21: no stat tells, but the follower hashes
    again what it ingested, a few MiB a poll, and judges the file again whole."""
    con, log = audit.con, audit.dir / "MB-07.jsonl"
    follower = followed_then_changed(audit, log, 21)
    p = follower.poll(con)
    [f] = p.files
    assert f.status == "refused_altered"
    assert f.message.startswith(f"{log}: refused: its content changed since it was ingested")
    assert [x["code"] for x in audit.findings()] == ["log.altered"]
    assert each_event_once(con) == list(range(1, 101))


def test_the_follower_follows_a_rotation(audit: AuditDb) -> None:
    """The file is renamed with lines the follower has not seen yet, and a new file begins
    under its name: the new file is a new source, and the renamed one, once followed under
    its new name, goes on from its last piece."""
    con, log = audit.con, audit.dir / "MB-07.jsonl"
    old = audit.dir / "MB-07.jsonl.1"
    log.write_bytes(first(100))
    follower = Follower(audit.run_id, [log])
    [f] = follower.poll(con).files
    grow(log, first(120)[len(first(100)):])
    os.rename(log, old)
    log.write_bytes(first(130)[len(first(120)):])
    follower.follow(old)
    p = follower.poll(con)
    by_path = {x.path: x for x in p.files}
    assert (by_path[log].events, by_path[log].first_line, by_path[log].last_line) == (10, 1, 10)
    assert by_path[log].file_id != f.file_id
    assert (by_path[old].events, by_path[old].first_line, by_path[old].last_line) == (
        20, 101, 120
    )
    assert by_path[old].file_id == f.file_id
    assert each_event_once(con) == list(range(1, 131))
    assert audit.findings() == []
    grow(old, first(121)[len(first(120)):])  # a late line of the old file
    grow(log, first(131)[len(first(130)):])
    p = follower.poll(con)
    assert sorted((x.path.name, x.first_line) for x in p.files) == [
        ("MB-07.jsonl", 11), ("MB-07.jsonl.1", 121)
    ]


@pytest.mark.slow
def test_a_backlog_loads_over_several_polls_cut_at_line_ends(
    audit: AuditDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follow_mod, "POLL_BYTES", 5000)
    con, log = audit.con, audit.dir / "MB-07.jsonl"
    log.write_bytes(first(10))
    follower = Follower(audit.run_id, [log])
    follower.poll(con)
    grow(log, first(200)[len(first(10)):])
    loaded = []
    while p := follower.poll(con).events:
        loaded.append(p)
    assert len(loaded) > 5 and sum(loaded) == 190
    assert each_event_once(con) == list(range(1, 201))
    data = log.read_bytes()
    assert all(data[x["end_byte"] - 1 : x["end_byte"]] == b"\n" for x in extents(con))
    check_pieces(con)


def test_a_followed_path_that_disappears_is_let_go(audit: AuditDb) -> None:
    con, log = audit.con, audit.dir / "MB-07.jsonl"
    log.write_bytes(first(10))
    follower = Follower(audit.run_id, [log])
    follower.poll(con)
    log.unlink()
    assert follower.poll(con).gone == [log]
    assert follower.poll(con).gone == []
    log.write_bytes(first(12))  # back, the same content grown: goes on
    [f] = follower.poll(con).files
    assert (f.first_line, f.last_line) == (11, 12)


# --------------------------------------------------------------------------------------------
# nightly
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_nightly_over_a_log_still_being_written_then_complete(tmp_path: Path) -> None:
    """The first run meets a table's log half written (its last line cut); the second, the
    log complete: the rest loads, nothing is altered, and the events are those of one clean
    run over the complete spool."""
    conf = config.load(SAMPLE / "property.toml")
    spool, archive = tmp_path / "spool", tmp_path / "archive"
    spool.mkdir()
    for f in sorted(SAMPLE.glob("*.jsonl*")):
        shutil.copy2(f, spool / f.name)
    log = spool / "2026-11-28_MB-01.jsonl"
    whole = log.read_bytes()
    cut = whole.index(b"\n", len(whole) // 2) + 60
    log.write_bytes(whole[:cut])
    dbp = tmp_path / "audit.duckdb"
    day = dt.date(2026, 11, 28)
    first_run = nightly.run_nightly(dbp, spool, conf, day=day, archive=archive)
    [mb01] = [f for f in first_run.ingested.files if f.path == log]
    assert mb01.status == "ingested" and mb01.waiting == 60 - 1
    log.write_bytes(whole)
    second = nightly.run_nightly(dbp, spool, conf, day=day, archive=archive)
    [mb01] = [f for f in second.ingested.files if f.path == log]
    assert (mb01.status, mb01.waiting) == ("ingested", 0)
    assert mb01.message.startswith(f"{log}: ")
    assert "continued from line" in mb01.message

    clean = tmp_path / "clean.duckdb"
    con = db.connect(clean)
    run_mod.ingest(con, [SAMPLE], runs.start(con, "test", {}))
    con.close()
    what = "SELECT count(*), sum(hash(stream, seq, raw)) FROM events"
    with opened(dbp) as con, opened(clean) as ref:
        assert con.execute(what).fetchall() == ref.execute(what).fetchall()
        assert con.execute(
            "SELECT count(*) FROM findings WHERE code = 'log.altered'"
        ).fetchall() == [(0,)]


def test_the_check_of_ingested_bytes_charges_each_file_it_opens(
    audit: AuditDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each file opened to hash again what was ingested costs VERIFY_OPEN of the poll's
    VERIFY_BYTES (500 small files were 500 opens a poll): with 1,000 bytes a poll left after
    the open, a change at line 90 is caught once the check reaches it, a poll at a time,
    and not before."""
    monkeypatch.setattr(follow_mod, "VERIFY_BYTES", follow_mod.VERIFY_OPEN + 1000)
    con, log = audit.con, audit.dir / "MB-07.jsonl"
    follower = followed_then_changed(audit, log, 90)
    at = first(100).index(b'"seq":90,')
    polls = 1
    while not (files := follower.poll(con).files):
        polls += 1
        assert polls <= at // 1000 + 2
    assert polls >= at // 1000  # a thousand bytes a poll, the first poll's included
    assert [f.status for f in files] == ["refused_altered"]
    assert [x["code"] for x in audit.findings()] == ["log.altered"]
