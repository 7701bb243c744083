"""The follower's staged rows judged in Python (auditor.ingest.staged_rows) answer what the
statements they replace answered, in the same order: on random rows (good, rejected, named
or not, duplicates, missing stamps, seqs and keys, streams with a highest seq before them),
each question asked both ways of the same `Staging`."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb
import pytest
from helpers.db import AuditDb

from auditor.ingest import follow, log_findings, stage

STREAMS = ["table:MB-01", "table:MB-02", "pit:P1", None]
TYPES = ["round_start", "wager", "card", "round_end", "cut_card", "table_open", "bank_pass"]
RAWS = [
    '{"table": "MB-01", "seq": 5}',  # names its event
    '{"pit": "P1", "seq": 3}',
    '{"table": "MB-01", "seq": 7.0}',  # a seq not written as the format writes it
    '{"table": 12345, "seq": 2}',
    "not json",
]
NOW = dt.datetime.now(dt.UTC)


def _rows(rnd: random.Random, n: int) -> list[tuple[Any, ...]]:
    seqs: list[int | None] = list(rnd.sample(range(1, 400), n))
    out = []
    for i, seq in enumerate(seqs):
        rejected = rnd.choice([None, None, None, "bad line"])
        type_ = rnd.choice(TYPES)
        if rnd.random() < 0.1 and type_ != "round_end":
            seq = None
        ts = None if rnd.random() < 0.1 else NOW + dt.timedelta(
            seconds=rnd.choice([-3600, -5, 0, 30, 299, 301, 900]) + rnd.random())
        key = [rnd.choice(["MB-01", "MB-02", None]), rnd.choice(["S1", "S2", None]),
               rnd.choice([1, 2, 3, None])]
        if rnd.random() < 0.6:
            key = ["MB-01", "S1", rnd.choice([1, 2])]
        out.append((rnd.choice([1, 2, 3]), i + 1, rnd.choice(STREAMS), seq, ts, type_,
                    *key, rejected, rnd.choice(RAWS) if rejected else '{"ok": 1}'))
    return out


def _stage(con: duckdb.DuckDBPyConnection, rnd: random.Random, n: int) -> stage.Staging:
    con.execute("DELETE FROM stream_sources")
    for stream in STREAMS[:3]:
        if rnd.random() < 0.7:
            con.execute("INSERT INTO stream_sources VALUES (?, ?, ?, ?, ?)",
                        [stream, rnd.choice([7, 8]), 1, rnd.randrange(0, 300), 10])
    rows = stage.Staging(con, [1, 2, 3], staged=True)
    rows.began = dt.datetime.now(dt.UTC)
    con.executemany(
        f"INSERT INTO {rows.table} (source_id, line_no, stream, seq, ts, type, table_id, shoe, "
        "round, rejected, raw) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", _rows(rnd, n))
    if rnd.random() < 0.4:
        con.execute("CREATE OR REPLACE TEMP TABLE dups AS SELECT line_no FROM staged "
                    "WHERE rejected IS NULL USING SAMPLE 30 PERCENT (bernoulli)")
        rows.dups = True
    rows._changed()
    return rows


@contextmanager
def _rolled_back(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """A transaction undone after the test, with the staging's tables."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    finally:
        con.execute("ROLLBACK")
        con.execute("DROP TABLE IF EXISTS staged; DROP TABLE IF EXISTS dups")


def _in_sql(rows: stage.Staging) -> None:
    """The rows forgotten and not read again: every question goes to DuckDB, as before."""
    rows._changed()
    rows._summary_read = True


def _asked(con: duckdb.DuckDBPyConnection, rows: stage.Staging, named: bool) -> dict[str, Any]:
    counts, per_stream = rows.tally()
    types, touched = follow._loaded(con, rows)
    return {
        "problems": rows.problems(),
        "ranges": rows.ranges(named=named),
        "counts": counts,
        "per_stream": {k: list(v.items()) for k, v in per_stream.items()},
        "types": types,
        "touched": sorted(touched, key=repr),
    }


@pytest.mark.parametrize("seed", range(40))
def test_the_staged_rows_judged_in_python_answer_as_the_statements(
    audit: AuditDb, seed: int
) -> None:
    rnd = random.Random(seed)
    con = audit.con
    with _rolled_back(con):
        rows = _stage(con, rnd, rnd.choice([1, 5, 40, 120]))
        named = rnd.random() < 0.5
        in_python = _asked(con, rows, named)
        assert rows._summary is not None  # read once, and used
        _in_sql(rows)
        in_sql = _asked(con, rows, named)
        # Ranges of two sources in one stream from one seq are in no order in SQL.
        ranges = [sorted(x.pop("ranges"), key=repr) for x in (in_python, in_sql)]
        assert ranges[0] == ranges[1]
        assert in_python == in_sql
        assert bool(in_python["types"]) == any(c.events for c in in_python["counts"].values())
        # Told no row is stamped ahead: the statement finds none.
        rows._changed()
        if rows.none_ahead(log_findings.AHEAD_TOLERANCE):
            [(ahead,)] = con.execute(
                f"SELECT count(*) FROM ({rows.kept_sql}) "
                f"WHERE ts > now() + {log_findings.AHEAD_SQL}").fetchall()
            assert ahead == 0


def test_the_ranges_in_python_come_by_stream_then_lowest_seq(audit: AuditDb) -> None:
    con = audit.con
    con.execute("BEGIN TRANSACTION")
    rows = _stage(con, random.Random(7), 120)
    got = rows.ranges(named=True)
    con.execute("ROLLBACK")
    keys = [((r.stream is None, r.stream or ""), (r.lo_named is None, r.lo_named or 0))
            for r in got]
    assert keys == sorted(keys) and len(got) > 5


def test_a_row_stamped_ahead_is_left_to_the_statement(audit: AuditDb) -> None:
    """A row stamped six minutes after now: not known to be none ahead (the statement is
    asked, and finds it); every stamp a minute before now: known."""
    con = audit.con
    for minutes, known in ((6, False), (-1, True)):
        con.execute("BEGIN TRANSACTION")
        rows = stage.Staging(con, [1], staged=True)
        rows.began = dt.datetime.now(dt.UTC)
        con.execute(
            f"INSERT INTO {rows.table} (source_id, line_no, stream, seq, ts, type, raw) "
            "VALUES (1, 1, 'table:MB-01', 1, ?, 'card', '{}'), "
            "(1, 2, 'table:MB-01', 2, ?, 'card', '{}')",
            [dt.datetime.now(dt.UTC) - dt.timedelta(minutes=2),
             dt.datetime.now(dt.UTC) + dt.timedelta(minutes=minutes)])
        rows._changed()
        assert rows.none_ahead(log_findings.AHEAD_TOLERANCE) is known
        con.execute("ROLLBACK")
        con.execute("DROP TABLE IF EXISTS staged")


@pytest.mark.parametrize("seed", range(8))
def test_rows_held_in_arrow_read_as_the_statement_reads_them(audit: AuditDb, seed: int) -> None:
    """A poll's rows typed in Arrow are not put in `staged` unless a statement needs them:
    their summary (with their streams' highest seqs) is the one SUMMARY_SQL reads once they
    are, and keeping them puts the same rows in `events`."""
    rnd = random.Random(seed)
    con = audit.con
    with _rolled_back(con):
        _stage(con, rnd, 40)
        good = con.sql("SELECT * FROM staged WHERE rejected IS NULL "
                       "ORDER BY source_id, line_no").to_arrow_table()
        con.execute("DROP TABLE staged")
        held = stage.Staging(con, [1, 2, 3], staged=True)
        held._pending = good
        from_arrow = held._rows_read()
        assert from_arrow is not None and len(from_arrow) == good.num_rows > 0
        assert any(r.top is not None for r in from_arrow)
        assert not held._staged_made
        held._ready()  # a statement asks: the rows go to `staged`, as inserted before
        in_sql = stage.staged_rows.read(con.execute(stage.staged_rows.SUMMARY_SQL).fetchall())
        key = lambda r: (r.source_id, r.line_no)  # noqa: E731
        assert sorted(from_arrow, key=key) == sorted(in_sql or [], key=key)
        before = con.execute("SELECT count(*) FROM events").fetchall()[0][0]
        held.keep(False)
        kept = con.sql(
            "SELECT * FROM events ORDER BY source_id, line_no OFFSET ?", params=[before]
        ).to_arrow_table()
        assert kept.equals(good)


def test_rows_held_in_arrow_go_to_events_without_staged(audit: AuditDb) -> None:
    con = audit.con
    with _rolled_back(con):
        _stage(con, random.Random(3), 20)
        good = con.sql("SELECT * FROM staged WHERE rejected IS NULL").to_arrow_table()
        con.execute("DROP TABLE staged")
        held = stage.Staging(con, [1, 2, 3], staged=True)
        held._pending = good
        assert held.ranges() and held.problems() == {}
        held.keep(False)
        assert not held._staged_made
        [(n,)] = con.execute("SELECT count(*) FROM events WHERE source_id IN (1, 2, 3)").fetchall()
        assert n == good.num_rows > 0
