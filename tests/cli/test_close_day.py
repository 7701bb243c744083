"""`bacc-audit close-day DATE` (issue 28): a gaming day recorded closed by hand, so that the
next audit judges the ends of its tables' logs from that record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.tablelog import DECK, Log, deal_rounds

from auditor.store import db

BURN = ["Ac", "Kd"]


def _cut_night(path: Path) -> Path:
    """MB-01's log stops after round 2 at about 22:04 (no shoe_end, no table_close); MB-02
    opens and closes by 05:30: nothing in the database reaches the 06:00 end of the day."""
    log = Log()
    log.open("MB-01", "P1", "22:00")
    log.shoe_start("MB-01", "22:01", "S1")
    log.burn("MB-01", "S1", BURN)
    for rnd, cards in enumerate(deal_rounds(DECK, 2, 2), start=1):
        log.round("MB-01", "S1", rnd, cards)
    log.open("MB-02", "P1", "22:00")
    log.close("MB-02", "05:30")
    return log.write(path)


def _unclosed(dbp: Path) -> list[tuple[Any, ...]]:
    con = db.connect(dbp, read_only=True)
    try:
        return con.execute(
            "SELECT code, table_id FROM current_findings WHERE code LIKE 'log.%'").fetchall()
    finally:
        con.close()


def _closed(dbp: Path) -> list[tuple[Any, ...]]:
    con = db.connect(dbp, read_only=True)
    try:
        return con.execute(
            "SELECT gaming_day::VARCHAR, how, run_id FROM closed_days ORDER BY closed_at"
        ).fetchall()
    finally:
        con.close()


@pytest.mark.slow
def test_close_day_records_the_day_and_the_next_audit_judges_its_log_ends(
    bacc_audit: Any, tmp_path: Path
) -> None:
    dbp = tmp_path / "a.duckdb"
    assert bacc_audit("ingest", _cut_night(tmp_path / "night.jsonl"), "--db", dbp).code == 0
    bacc_audit("audit", "--db", dbp)
    assert _unclosed(dbp) == []  # the night may still be being delivered
    assert _closed(dbp) == []
    r = bacc_audit("close-day", "2026-11-28", "--db", dbp)
    assert r.code == 0, r
    [(day, how, run_id)] = _closed(dbp)
    assert (day, how) == ("2026-11-28", "close-day")
    assert r.out == (f"gaming day 2026-11-28 closed (run {run_id}); the next audit judges the "
                     "ends of its tables' logs\n")
    assert bacc_audit("audit", "--db", dbp).code == 1  # a new major finding
    assert _unclosed(dbp) == [("log.table_unclosed", "MB-01")]
    # Closed once: again, it says so and records nothing.
    again = bacc_audit("close-day", "2026-11-28", "--db", dbp)
    assert again.code == 0, again
    assert again.out.startswith(
        f"gaming day 2026-11-28 was closed already, by close-day (run {run_id}) at ")
    assert len(_closed(dbp)) == 1


def test_close_day_refuses_a_day_not_over_and_a_bad_date(bacc_audit: Any, tmp_path: Path) -> None:
    dbp = tmp_path / "a.duckdb"
    assert bacc_audit("ingest", _cut_night(tmp_path / "night.jsonl"), "--db", dbp).code == 0
    early = bacc_audit("close-day", "2999-01-01", "--db", dbp)
    assert early.code == 2
    assert early.err.startswith(
        "error: gaming day 2999-01-01 is not over until 2999-01-02 06:00 ")
    assert "it cannot be closed before it ends" in early.err
    bad = bacc_audit("close-day", "28/11/2026", "--db", dbp)
    assert bad.code == 2
    assert bad.err == "error: a date must look like 2026-11-28, not '28/11/2026'\n"
    assert _closed(dbp) == []
