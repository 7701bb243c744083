"""The database-backed audit over the sample night: exactly the planted deviations."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from auditor import config
from auditor.audit.run import audit
from auditor.ingest.run import ingest
from auditor.rules.codes import REGISTRY
from auditor.store import db, runs

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
# Findings about one round: banking rounds and chemin de fer coups alike.
ROUND_CODES = [c.code for c in REGISTRY.values() if c.scope in ("round", "chemin")]
LOG_CODES = [c.code for c in REGISTRY.values() if c.scope == "log"]


def planted_rounds() -> set[tuple[str, str, str, int]]:
    """(code, table, shoe, round) from sample_logs/README.md's table of round deviations."""
    text = (SAMPLE / "README.md").read_text()
    section = text.split("## Planted deviations in rounds")[1].split("##")[0]
    found = set()
    for code, table, shoe, rnd in re.findall(
        r"\| `([\w.]+)` \| (\S+) shoe (\S+) round (\d+) \|", section
    ):
        found.add((code, table, shoe, int(rnd)))
    return found


@pytest.fixture(scope="module")
def audited(sample_audited, tmp_path_factory):
    """The sample night ingested and audited under the default config (conftest.py): a copy."""
    shared, result = sample_audited
    path = tmp_path_factory.mktemp("audit") / "audit.duckdb"
    shutil.copy(shared, path)
    con = db.connect(path)
    yield con, result
    con.close()


@pytest.mark.slow
def test_sample_night_gives_exactly_the_planted_round_deviations(audited):
    con, _ = audited
    rows = con.execute(
        "SELECT code, table_id, shoe, round FROM current_findings WHERE list_contains(?, code)",
        [ROUND_CODES],
    ).fetchall()
    expected = planted_rounds()
    assert len(expected) == 18
    assert {t for _, t, _, _ in expected} >= {"CF-01"}
    assert set(rows) == expected
    assert len(rows) == len(expected)


def test_sample_night_log_level_findings(audited):
    con, _ = audited
    rows = con.execute(
        "SELECT code, table_id, seq, source FROM current_findings WHERE list_contains(?, code) "
        "ORDER BY code",
        [LOG_CODES],
    ).fetchall()
    assert [(c, t) for c, t, _, _ in rows] == [("log.malformed", None), ("log.seq_gap", "NZ-01")]
    assert rows[0][3].endswith("2026-11-28_MB-02.jsonl.gz:2480")
    assert rows[1][2] == 3224


def test_every_round_is_audited_chemin_de_fer_included(audited):
    con, result = audited
    n_rounds = con.execute(
        "SELECT count(DISTINCT (table_id, shoe, round)) FROM events WHERE type = 'round_start'"
    ).fetchall()[0][0]
    assert result.rounds == n_rounds
    assert dict(result.skipped) == {}


def test_chemin_de_fer_findings_point_at_their_events(audited):
    con, _ = audited
    rows = con.execute(
        "SELECT code, seq, source, rule FROM current_findings WHERE table_id = 'CF-01' "
        "ORDER BY seq"
    ).fetchall()
    assert [r[0] for r in rows] == [
        "chemin.priority", "chemin.over_bank", "chemin.late_wager", "chemin.option",
        "chemin.commission", "chemin.priority",
    ]
    for _, seq, source, rule in rows:
        assert seq is not None and source.startswith(str(SAMPLE / "2026-11-28_CF-01.jsonl:"))
        assert rule


@pytest.mark.slow
def test_a_chemin_de_fer_round_audited_alone_still_knows_the_rounds_before(tmp_path):
    """A rerun that replays only the last rounds reads back the rounds audited before, so a
    banco suivi is judged against the Banker's preceding wager, not guessed."""
    lines = (SAMPLE / "2026-11-28_CF-01.jsonl").read_text().splitlines()
    planted = [(s, r) for c, t, s, r in planted_rounds() if c == "chemin.priority"]
    shoe, rnd = max(planted)  # the banco suivi nobody was entitled to
    cut = next(i for i, line in enumerate(lines)
               if f'"shoe":"{shoe}","round":{rnd},' in line and '"round_start"' in line)
    con = db.connect(tmp_path / "cf.duckdb")
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("\n".join(lines[:cut]) + "\n")
    second.write_text("\n".join(lines[cut:]) + "\n")
    ingest(con, [first], runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.PropertyConfig(), tables=False)
    ingest(con, [second], runs.start(con, "ingest", {}))
    again = audit(con, runs.start(con, "audit", {}), config.PropertyConfig(), tables=False)
    assert 0 < again.rounds < 200
    assert again.by_code["chemin.priority"] == 1
    assert (
        con.execute(
            "SELECT count(*) FROM current_findings WHERE code = 'chemin.priority' AND shoe = ? "
            "AND round = ?", [shoe, rnd]
        ).fetchall()[0][0]
        == 1
    )


@pytest.mark.slow
def test_tables_audited_in_small_batches_give_the_same_audit(audited, tmp_path, monkeypatch):
    """A big day is replayed a few tables at a time; the batches must not change a thing."""
    con, whole = audited
    monkeypatch.setattr(db, "BATCH_EVENTS", 9_000)  # about one table a batch
    small = db.connect(tmp_path / "small.duckdb")
    ingest(small, [SAMPLE], runs.start(small, "ingest", {}))
    batches = db.table_batches(small)
    first, last = batches[0], batches[-1]
    assert first is not None and last is not None
    assert len(batches) >= 7 and first[0] == "CF-01" and last[1] == "PB-01"
    result = audit(small, runs.start(small, "audit", {}), config.PropertyConfig())
    findings_sql = (
        "SELECT code, table_id, shoe, round, seq, message FROM current_findings ORDER BY ALL"
    )
    assert small.execute(findings_sql).fetchall() == con.execute(findings_sql).fetchall()
    assert (result.rounds, result.findings_new, dict(result.by_code)) == (
        whole.rounds, whole.findings_new, dict(whole.by_code)
    )
    audits_sql = "SELECT table_id, shoe, round, events, findings FROM round_audits ORDER BY ALL"
    assert small.execute(audits_sql).fetchall() == con.execute(audits_sql).fetchall()
    # The table pass too: the same shoes, rounds and counts, batch by batch.
    assert result.tables == whole.tables | {"run_id": result.run_id}
    assert result.tables["shoes"] > 20 and result.tables["rounds_with_payout_order"] > 1000
    small.close()


@pytest.mark.slow
def test_rerun_adds_nothing(audited):
    con, _ = audited
    before = con.execute("SELECT count(*) FROM findings").fetchall()[0][0]
    again = audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    assert again.rounds == 0
    assert again.findings_new == 0
    assert con.execute("SELECT count(*) FROM findings").fetchall()[0][0] == before


@pytest.mark.slow
def test_a_round_replayed_after_its_fault_is_corrected_withdraws_the_finding(tmp_path):
    """A later file with more events of a round makes the round replay; a finding that the
    fuller round no longer shows is withdrawn by a new row, not deleted."""
    night = (SAMPLE / "2026-11-28_MB-01.jsonl").read_text().splitlines()
    cut = next(i for i, line in enumerate(night) if '"round":2,' in line and "round_end" in line)
    con = db.connect(tmp_path / "a.duckdb")
    # The first file holds rounds 1-2 without round 2's payments: they look unsettled.
    lines = night[: cut + 1]
    round2 = [i for i, line in enumerate(lines) if '"round":2,' in line]
    pays = [i for i in round2 if '"type":"pay"' in lines[i]]
    assert pays, "round 2 of MB-01 has a payment to leave out"
    first = tmp_path / "first.jsonl"
    first.write_text("\n".join(line for i, line in enumerate(lines) if i not in pays) + "\n")
    ingest(con, [first], runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    standing = con.execute(
        "SELECT code FROM current_findings WHERE round = 2 AND code LIKE 'settle.%'"
    ).fetchall()
    assert ("settle.unsettled",) in standing
    second = tmp_path / "second.jsonl"
    second.write_text("\n".join(lines[i] for i in pays) + "\n")
    ingest(con, [second], runs.start(con, "ingest", {}))
    again = audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    assert again.rounds >= 1
    assert again.findings_withdrawn >= 1
    assert (
        con.execute(
            "SELECT count(*) FROM current_findings WHERE round = 2 AND code LIKE 'settle.%'"
        ).fetchall()[0][0]
        == 0
    )
    assert (
        con.execute(
            "SELECT count(*) FROM findings WHERE round = 2 AND status = 'withdrawn'"
        ).fetchall()[0][0]
        >= 1
    )


@pytest.mark.slow
def test_cli_audit_exit_code_follows_fail_on(tmp_path, monkeypatch):
    from auditor.cli import app as cli

    dbfile = tmp_path / "c.duckdb"
    shutil.copy(SAMPLE / "2026-11-28_MB-01.jsonl", tmp_path / "mb01.jsonl")
    con = db.connect(dbfile)
    ingest(con, [tmp_path / "mb01.jsonl"], runs.start(con, "ingest", {}))
    con.close()

    def run(*args: str) -> int:
        monkeypatch.setattr("sys.argv", ["bacc-audit", *args])
        with pytest.raises(SystemExit) as e:
            cli.main()
        return int(e.value.code or 0)

    # MB-01 holds a missed Banker draw (critical) and a short vigorish (major).
    assert run("audit", "--db", str(dbfile), "--fail-on", "critical") == 1
    # Rerun: no new findings, so nothing at or above the threshold in this run.
    assert run("audit", "--db", str(dbfile)) == 0
    assert run("audit", "--db", str(dbfile), "--fail-on", "bogus") == 2
