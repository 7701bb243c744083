"""`audit_rounds` (a poll of `watch`) with no round read one by one makes no `late_seen`,
`round_excluded` or `round_proper` (auditor.audit.rounds.select_rounds): what an earlier
poll left in them is never read again, and the rounds it judges are judged whole, as a batch
audit judges them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from helpers.db import AuditDb, new_database

from auditor import config
from auditor.audit import run as audit_run
from auditor.audit.rounds import ROUND_TYPES
from auditor.store import runs

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
CONF = config.load(SAMPLE / "property.toml")


def _judged(audit_db: AuditDb) -> list[tuple]:
    return audit_db.con.execute(
        "SELECT table_id, shoe, round, events, last_seq, findings FROM round_audits "
        "ORDER BY ALL").fetchall()


def _current(audit_db: AuditDb) -> list[tuple]:
    return audit_db.con.execute(
        "SELECT code, table_id, shoe, round, message FROM current_findings "
        "WHERE round IS NOT NULL ORDER BY ALL").fetchall()


def test_a_poll_reads_nothing_an_earlier_poll_left_out(audit: AuditDb, tmp_path: Path) -> None:
    # The night judged by a batch audit in a database of its own: the reference.
    fresh = new_database(tmp_path / "batch.duckdb")
    batch = AuditDb(tmp_path, fresh, runs.start(fresh, "audit", {}))
    batch.ingest_file(SAMPLE / "2026-11-28_MB-01.jsonl")
    audit_run.audit(batch.con, batch.run_id, CONF, tables=False)
    found = {f[1:4] for f in _current(batch)}
    assert found

    audit.ingest_file(SAMPLE / "2026-11-28_MB-01.jsonl")
    con = audit.con
    ended = con.execute(
        "SELECT table_id, shoe, round FROM events WHERE type = 'round_end' "
        "ORDER BY seq").fetchall()
    keys = sorted(set(ended[:30]) | found)  # a poll's few: replayed, no verdict
    first = ended[0]
    # What a poll that read a round one by one leaves: an event of `first` left out (its
    # Banker payment: unpaid, were it left out here), the round among those read so.
    con.execute(
        "CREATE TEMP TABLE round_excluded AS SELECT table_id, shoe, round, seq, "
        "'after_end' AS why FROM events WHERE (table_id, shoe, round) = (?, ?, ?) "
        "AND type = 'pay' LIMIT 1", list(first))
    con.execute("CREATE TEMP TABLE late_seen AS SELECT ?::VARCHAR AS table_id, "
                "?::VARCHAR AS shoe, ?::BIGINT AS round", list(first))
    con.register("polled", pa.table({
        "table_id": [k[0] for k in keys], "shoe": [k[1] for k in keys],
        "round": pa.array([k[2] for k in keys], pa.int64())}))
    con.execute("CREATE TEMP TABLE poll_keys AS SELECT * FROM polled")
    con.unregister("polled")
    result = audit_run.audit_rounds(con, audit.run_id, CONF, "poll_keys", None)
    assert result.rounds == len(keys) < audit_run.VERDICT_MIN_ROUNDS
    judged = _judged(audit)
    [(n,)] = con.execute(
        f"SELECT count(*) FROM events WHERE (table_id, shoe, round) = (?, ?, ?) "
        f"AND type IN ({ROUND_TYPES})", list(first)).fetchall()
    assert [r[3] for r in judged if r[:3] == first] == [n]
    assert con.execute("SELECT count(*) FROM late_seen").fetchall() == [(1,)]  # left alone
    # The same records and findings as the batch audit's of these rounds.
    reference = {r[:3]: r for r in _judged(batch)}
    assert judged == [reference[k] for k in keys]
    assert _current(audit) == [f for f in _current(batch) if f[1:4] in set(keys)]
