"""A poll hands `watch` the rows it committed as the fast path typed them (`Poll.rows`,
`Staging.straight`), so a round that ends is replayed from them (auditor.audit.round_rows):
every such row is in `events` with those values; a line the per-line path takes is not
among them, and a poll whose checks rejected a line hands none."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa

from auditor.ingest import stage
from auditor.ingest.follow import Follower
from auditor.store import db, runs

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs" / "2026-11-28_MB-01.jsonl"
COLUMNS = ["source_id", "line_no", "stream", "seq", "ts", "type", "table_id", "shoe", "round",
           "card", "to_hand", "seat", "bet", "amount", "dealer"]


def _in_events(con, t: pa.Table) -> pa.Table:
    keys = pa.table({"source_id": t.column("source_id"), "line_no": t.column("line_no")})
    con.register("asked", keys)
    try:
        return con.sql(f"SELECT {', '.join('e.' + c for c in COLUMNS)} FROM events e "
                       "SEMI JOIN asked USING (source_id, line_no) "
                       "ORDER BY source_id, line_no").to_arrow_table()
    finally:
        con.unregister("asked")


def test_a_polls_rows_are_its_typed_rows_as_committed(tmp_path):
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    odd = json.loads(lines[120])
    odd["ts"] = odd["ts"][:23]  # no offset: the per-line path's to judge
    lines[120] = (json.dumps(odd) + "\n").encode()
    again = json.loads(lines[160])
    again["seq"] = json.loads(lines[159])["seq"]  # a seq used twice in the file
    lines[160] = (json.dumps(again) + "\n").encode()
    con = db.connect(tmp_path / "a.duckdb")
    follower = Follower(runs.start(con, "watch", {}))
    target = tmp_path / "spool" / SAMPLE.name
    target.parent.mkdir()
    target.write_bytes(b"")
    follower.follow(target)
    handed = []
    for part in (lines[:100], lines[100:140], lines[140:150], lines[150:170]):
        with target.open("ab") as fh:
            fh.write(b"".join(part))
        poll = follower.poll(con)
        handed.append(pa.concat_tables(poll.rows) if poll.rows else None)
    first, mixed, plain, rejected = handed
    assert first is None  # a file's first piece loads the batch way
    assert rejected is None  # the repeated seq was rejected: nothing is handed
    assert plain is not None and plain.column("line_no").to_pylist() == list(range(141, 151))
    assert mixed is not None
    assert mixed.column("line_no").to_pylist() == [n for n in range(101, 141) if n != 121]
    for t in (mixed, plain):
        t = t.sort_by([("source_id", "ascending"), ("line_no", "ascending")])
        assert t.select(COLUMNS).equals(_in_events(con, t))
        assert sum(a is not None for a in t.column("amount").to_pylist()) > 0
    # the per-line path judged the odd line (quarantined: a time needs its offset), and the
    # repeated seq
    assert [n for n, in con.execute("SELECT line_no FROM quarantine ORDER BY 1").fetchall()
            ] == [121, 161]
    con.close()


def test_rows_go_to_events_by_name_when_its_columns_are_in_another_order(tmp_path):
    """Rows typed in Arrow go to `events` by position only where its columns are in the order
    this version makes them; a database whose table was made otherwise gets them by name."""
    path = tmp_path / "a.duckdb"
    made = duckdb.connect(str(path))
    made.execute(db.EVENTS_DDL)
    made.execute("ALTER TABLE events RENAME TO made")
    made.execute("CREATE TABLE events AS "  # line_no before source_id
                 "SELECT line_no, source_id, * EXCLUDE (line_no, source_id) FROM made")
    made.execute("DROP TABLE made")
    made.close()
    con = db.connect(path)
    follower = Follower(runs.start(con, "watch", {}))
    target = tmp_path / "spool" / SAMPLE.name
    target.parent.mkdir()
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    target.write_bytes(b"".join(lines[:50]))
    follower.follow(target)
    follower.poll(con)
    with target.open("ab") as fh:
        fh.write(b"".join(lines[50:60]))
    poll = follower.poll(con)
    rows = con.execute("SELECT source_id, line_no, seq FROM events WHERE line_no > 50 "
                       "ORDER BY line_no").fetchall()
    sid = poll.rows[0].column("source_id")[0].as_py()
    assert rows == [(sid, n, json.loads(lines[n - 1])["seq"]) for n in range(51, 61)]
    assert not stage._in_order(con)
    con.close()
