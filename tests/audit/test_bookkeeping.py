"""The audit's record of what it judged (round_audits) is trusted to skip rounds: a row
forged there must not hide a round's deviation without a trace (store/derived.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
from helpers.sample import SAMPLE

MB01 = SAMPLE / "2026-11-28_MB-01.jsonl"
CONFIG = SAMPLE / "property.toml"
# MB-01's planted draw error (sample_logs/README.md): its round, event count and last seq
ROUND = ("MB-01", "MB-01-1128-01", 72)
EVENTS, LAST_SEQ = 12, 1153


def _sql(path: Path, statement: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(path))
    try:
        return con.execute(statement, params or []).fetchall()
    finally:
        con.close()


def _forge(path: Path, run: int) -> None:
    """A round_audits row saying round 72 was judged, clean, on all its events."""
    _sql(path, "INSERT INTO round_audits VALUES (?, ?, ?, ?, ?, 0, ?, now())",
         [*ROUND, EVENTS, LAST_SEQ, run])


def _draw_findings(path: Path) -> list[tuple[Any, ...]]:
    return _sql(path, "SELECT code, round FROM current_findings WHERE code LIKE 'draw.%'")


def test_the_round_forged_as_judged_is_still_judged_or_the_audit_refuses(
    tmp_path: Path, bacc_audit: Any
) -> None:
    db = tmp_path / "a.duckdb"
    assert bacc_audit("ingest", "--db", db, MB01).code == 0
    clean = tmp_path / "clean.duckdb"
    clean.write_bytes(db.read_bytes())
    assert bacc_audit("audit", "--db", clean, "--config", CONFIG).code == 1
    assert _draw_findings(clean) == [("draw.banker_missed", 72)]
    assert _sql(clean, "SELECT events, last_seq FROM round_audits WHERE table_id = ? AND "
                "shoe = ? AND round = ?", list(ROUND)) == [(EVENTS, LAST_SEQ)]

    # under the ingest run, which ended having judged no round: the audit refuses
    [(ingest_run,)] = _sql(db, "SELECT max(id) FROM runs")
    forged = tmp_path / "forged.duckdb"
    forged.write_bytes(db.read_bytes())
    _forge(forged, ingest_run)
    r = bacc_audit("audit", "--db", forged, "--config", CONFIG)
    assert r.code == 2, r
    assert (f"round_audits: 1 row stands under run {ingest_run}, for which the ledger sealed no "
            "digest") in r.err, r.err
    v = bacc_audit("verify", "--db", forged)
    assert v.code == 1 and f"inserted: round_audits rows of run {ingest_run}: 1 row stands" \
        in v.out, v.out

    # under the id the audit's run is about to take: that run trusts it (it is its own), but
    # its start sealed the row it found, so verify and the next audit name it
    ahead = tmp_path / "ahead.duckdb"
    ahead.write_bytes(db.read_bytes())
    _forge(ahead, ingest_run + 1)
    assert bacc_audit("audit", "--db", ahead, "--config", CONFIG).code == 1
    assert _draw_findings(ahead) == []  # hidden from this one audit...
    v = bacc_audit("verify", "--db", ahead)
    assert v.code == 1, v
    assert (f"inserted: round_audits rows of run {ingest_run + 1} (leaf ") in v.out, v.out
    assert "rows stand, the ledger sealed a digest of 1\n" in v.out, v.out
    r = bacc_audit("audit", "--db", ahead, "--config", CONFIG)
    assert r.code == 2 and "for which the ledger sealed a digest of 1:" in r.err, r


def test_the_digests_dropped_with_a_row_forged_are_not_taken_in_again(
    tmp_path: Path, bacc_audit: Any
) -> None:
    """Dropping run_derived must not make the next seal take in, as a new database's, the
    rows it finds: whether anything was digested is the ledger's to say."""
    db = tmp_path / "a.duckdb"
    assert bacc_audit("ingest", "--db", db, MB01).code == 0
    [(ingest_run,)] = _sql(db, "SELECT max(id) FROM runs")
    _sql(db, "DROP TABLE run_derived")
    _forge(db, ingest_run)
    r = bacc_audit("audit", "--db", db, "--config", CONFIG)
    assert r.code == 2, r
    assert f"round_audits: 1 row stands under run {ingest_run}, for which the ledger sealed no " \
        "digest" in r.err, r.err
    assert _sql(db, "SELECT tab FROM run_derived") == []  # nothing taken in
    v = bacc_audit("verify", "--db", db)
    assert v.code == 1, v
    assert "missing: run_derived (runs before) of run 1 (leaf 1): the digest of a run's " \
        "derived rows sealed here is gone" in v.out, v.out
    assert f"inserted: round_audits rows of run {ingest_run}: 1 row stands" in v.out, v.out
