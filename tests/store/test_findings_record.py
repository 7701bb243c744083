"""Recording findings that are already standing, withdrawn, or new (store/findings.py).

A finding is standing when the latest row of its fingerprint is open (`current_findings`).
Staged findings (a poll's, a pass's) are held against the rows of their own fingerprints
only, not the view's window over every finding; both ways must answer alike."""

from __future__ import annotations

import datetime as dt

import duckdb

from auditor.finding import Finding
from auditor.store import findings

WHEN = dt.datetime(2026, 12, 1, 23, 0, tzinfo=dt.UTC)


def _found(*keys: int) -> list[Finding]:
    return [
        Finding(code="draw.player_missed", message=f"round {k}", table="MB-01", shoe="S1",
                round=k, seq=10 * k, ts=WHEN, fingerprint=f"fp-{k}", expected={"draw": True},
                observed={"draw": False}, source=f"mb01.jsonl:{k}")
        for k in keys
    ]


def _rows(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    return con.execute("SELECT fingerprint, status FROM findings ORDER BY id").fetchall()


def _standing(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute(
        "SELECT fingerprint FROM current_findings ORDER BY fingerprint").fetchall()]


def test_a_standing_finding_is_not_recorded_twice_and_a_withdrawn_one_opens_again(
    con: duckdb.DuckDBPyConnection, run_id: int
) -> None:
    assert findings.record_staged(con, run_id, "found", _found(1, 2)) == 2
    assert findings.record_staged(con, run_id, "found", _found(1, 2, 3)) == 1
    assert _standing(con) == ["fp-1", "fp-2", "fp-3"]
    assert findings.withdraw(con, run_id, "fingerprint = 'fp-2'") == 1
    assert _standing(con) == ["fp-1", "fp-3"]
    # fp-2's latest row is withdrawn: found again, it opens again; fp-1 and fp-3 stand
    assert findings.record_staged(con, run_id, "found", _found(1, 2, 3)) == 1
    assert _rows(con) == [("fp-1", "open"), ("fp-2", "open"), ("fp-3", "open"),
                          ("fp-2", "withdrawn"), ("fp-2", "open")]
    assert _standing(con) == ["fp-1", "fp-2", "fp-3"]
    # the same findings given as SQL (not staged) are judged by the view: nothing new
    con.execute("CREATE TEMP TABLE again AS SELECT * EXCLUDE (severity, rule) FROM found")
    assert findings.record(con, run_id, "SELECT * FROM again") == 0
    assert len(_rows(con)) == 5
