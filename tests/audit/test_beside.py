"""`run.beside`: a pass on a cursor of its own, in a thread, while another runs (the audit's
shoe-integrity pass beside its table pass)."""

from __future__ import annotations

import threading
import time

import duckdb
import pytest

from auditor.audit.run import beside
from auditor.store import db


@pytest.fixture
def con(tmp_path):
    c = db.connect(tmp_path / "a.duckdb")
    yield c
    c.close()


def test_the_work_runs_in_its_own_transaction_with_the_connections_time_zone(con):
    """The block's uncommitted row is not the work's to see, and the work reads times in
    UTC as the connection does (a cursor does not inherit the session's setting)."""
    con.execute("CREATE TABLE t (x INTEGER)")
    con.execute("BEGIN TRANSACTION")
    con.execute("INSERT INTO t VALUES (1)")
    with beside(con, lambda cur: (
            cur.execute("SELECT count(*) FROM t").fetchall(),
            cur.execute("SELECT current_setting('TimeZone')").fetchall())) as work:
        pass
    con.execute("COMMIT")
    assert work.result() == ([(0,)], [("UTC",)])
    assert con.execute("SELECT count(*) FROM t").fetchall() == [(1,)]


def test_the_work_is_over_and_its_cursor_closed_when_the_block_ends(con):
    done = threading.Event()
    kept: list[duckdb.DuckDBPyConnection] = []

    def work(cur: duckdb.DuckDBPyConnection) -> int:
        kept.append(cur)
        time.sleep(0.2)
        done.set()
        return 7

    with beside(con, work) as f:
        assert not done.is_set()
    assert done.is_set() and f.result() == 7
    with pytest.raises(duckdb.ConnectionException):
        kept[0].execute("SELECT 1")


def test_the_blocks_error_comes_first_and_the_works_from_its_result(con):
    finished = threading.Event()

    def failing(cur: duckdb.DuckDBPyConnection) -> None:
        time.sleep(0.1)
        finished.set()
        raise ValueError("the work's")

    with pytest.raises(KeyError), beside(con, failing):
        raise KeyError("the block's")
    assert finished.is_set()  # waited for, though the block failed first
    with beside(con, failing) as f:
        pass
    with pytest.raises(ValueError, match="the work's"):
        f.result()
