"""Files that grow, for tests/ingest/test_growing.py: a simulated table's log as bytes one line
at a time, the pieces the database recorded (`source_extents`) checked against the files
they came from, and a follower in a child process that the test can kill.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import random
import subprocess
import sys
import textwrap
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from auditor.ingest.paths import unescape_path
from auditor.simulate.generator import Night, TableNight, TableSpec


def rounds_touched(
    lines: list[bytes] | tuple[bytes, ...],
) -> dict[tuple[str, str, int], dt.datetime]:
    """Each round the log lines name, with the earliest stamp among its lines: what a poll
    that loads them says in Poll.rounds_touched."""
    out: dict[tuple[str, str, int], dt.datetime] = {}
    for e in map(json.loads, lines):
        if "shoe" in e and "round" in e:
            k, ts = (e["table"], e["shoe"], e["round"]), dt.datetime.fromisoformat(e["ts"])
            out[k] = min(out.get(k, ts), ts)
    return out


@cache
def table_night(table: str = "MB-07", seed: int = 7) -> tuple[bytes, ...]:
    """A whole simulated night of one mini-baccarat table: one line (with its newline) per
    event, seqs 1, 2, 3, ... in order."""
    night = Night(dt.date(2026, 11, 28), dt.timedelta(hours=-5), [])
    spec = TableSpec(table, "P3", "mini_baccarat", "NJ", "standard", 7, 1, ("tie",),
                     opens="18:00", closes="23:00")
    lines = TableNight(night, spec, random.Random(f"{table}:{seed}")).run()
    return tuple((x + "\n").encode() for x in lines)


def first(n: int, table: str = "MB-07") -> bytes:
    """The table's first `n` lines."""
    lines = table_night(table)
    assert n <= len(lines), f"the simulated night has {len(lines)} lines, not {n}"
    return b"".join(lines[:n])


def rows(con: duckdb.DuckDBPyConnection, sql: str, *params: Any) -> list[dict[str, Any]]:
    cur = con.execute(sql, list(params))
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def extents(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """The pieces recorded, oldest first, without their clock times."""
    return rows(
        con,
        "SELECT source_id, file_id, path, start_byte, end_byte, first_line, last_line, "
        "prefix_sha256, events, quarantined, duplicates, waiting_bytes FROM source_extents "
        "ORDER BY ingested_at, source_id, start_byte",
    )


def check_pieces(con: duckdb.DuckDBPyConnection, files: dict[str, bytes] | None = None) -> None:
    """What an auditor checks: each file's pieces follow one another byte for byte (each
    starts where the one before ended, from 0), and the SHA-256 of the file's first
    `end_byte` bytes is the one recorded, for every piece. `files` gives the bytes of a path
    that changed since (else the file is read)."""
    by_file: dict[int, list[dict[str, Any]]] = {}
    for x in extents(con):
        by_file.setdefault(x["file_id"], []).append(x)
    for file_id, pieces in by_file.items():
        pieces.sort(key=lambda x: x["start_byte"])
        assert pieces[0]["start_byte"] == 0, (file_id, pieces[0])
        for a, b in itertools.pairwise(pieces):
            assert b["start_byte"] == a["end_byte"], (file_id, a, b)
        for x in pieces:
            data = (files or {}).get(x["path"])
            if data is None:
                data = unescape_path(x["path"]).read_bytes()
            assert hashlib.sha256(data[: x["end_byte"]]).hexdigest() == x["prefix_sha256"], x


def each_event_once(con: duckdb.DuckDBPyConnection) -> list[int]:
    """The seqs of table MB-07 in the events table, checking none is there twice."""
    seqs = [r[0] for r in con.execute(
        "SELECT seq FROM events WHERE stream = 'table:MB-07' ORDER BY seq"
    ).fetchall()]
    assert len(seqs) == len(set(seqs)), "an event was loaded twice"
    return seqs


# A child process that follows one file and polls until it is killed; it prints "polled N"
# after each poll that loaded something, so the test knows it is at work.
FOLLOWER_CHILD = """
import sys
from pathlib import Path
from auditor.ingest.follow import Follower
from auditor.store import db, runs

con = db.connect(Path(sys.argv[1]))
follower = Follower(runs.start(con, "watch", {}), [Path(sys.argv[2])])
print("ready", flush=True)
n = 0
while True:
    p = follower.poll(con)
    if p.events:
        n += p.events
        print(f"polled {n}", flush=True)
"""


def start_follower(db_path: Path, log: Path) -> subprocess.Popen[str]:
    """The child follower, started and ready (it has opened the database)."""
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(FOLLOWER_CHILD), str(db_path), str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    if line.strip() != "ready":
        child.kill()
        _, err = child.communicate(timeout=30)
        raise AssertionError(f"the follower did not start: {err}")
    return child


def malformed_fingerprint(path: Path, line_no: int, raw: str) -> str:
    """log.malformed's fingerprint for line `line_no` (text `raw`) of a plain file: the
    SHA-256 of the file's first line, the line number, the start of the line's own SHA-256."""
    first = path.read_bytes().split(b"\n", 1)[0].rstrip(b" \t\r")
    head = hashlib.sha256(first).hexdigest()
    return f"log.malformed|{head}|{line_no}|{hashlib.sha256(raw.encode()).hexdigest()[:16]}"
