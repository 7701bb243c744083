"""The database-backed audit over the sample night: exactly the planted deviations."""

from __future__ import annotations

import datetime as dt
import re
import shutil
from pathlib import Path

import duckdb
import pytest

from auditor import config
from auditor.audit.run import audit
from auditor.ingest.run import ingest
from auditor.rules.codes import REGISTRY
from auditor.simulate.planted import simulate
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
    assert rows[0][3].endswith("2026-11-28_MB-02.jsonl.gz:2470")
    assert rows[1][2] == 3222


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
def _first_part_audited(
    tmp_path: Path, lines: list[str], cut: int
) -> tuple[duckdb.DuckDBPyConnection, Path]:
    """CF-01's lines before `cut` ingested and audited into a new database; the rest written
    to a second file, not ingested yet."""
    con = db.connect(tmp_path / "cf.duckdb")
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("\n".join(lines[:cut]) + "\n")
    second.write_text("\n".join(lines[cut:]) + "\n")
    ingest(con, [first], runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.PropertyConfig(), tables=False)
    return con, second


def test_a_chemin_de_fer_round_audited_alone_still_knows_the_rounds_before(tmp_path):
    """A rerun that replays only the last rounds reads back the rounds audited before, so a
    banco suivi is judged against the Banker's preceding wager, not guessed."""
    lines = (SAMPLE / "2026-11-28_CF-01.jsonl").read_text().splitlines()
    planted = [(s, r) for c, t, s, r in planted_rounds() if c == "chemin.priority"]
    shoe, rnd = max(planted)  # the banco suivi nobody was entitled to
    cut = next(i for i, line in enumerate(lines)
               if f'"shoe":"{shoe}","round":{rnd},' in line and '"round_start"' in line)
    con, second = _first_part_audited(tmp_path, lines, cut)
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


def test_a_card_changed_into_no_card_in_a_round_read_back_is_refused_by_name(tmp_path):
    """The chemin de fer history reads back rounds audited before: a card of theirs changed
    since into no card is refused as the replay refuses it, not an internal error."""
    from auditor.errors import UserError

    lines = (SAMPLE / "2026-11-28_CF-01.jsonl").read_text().splitlines()
    cut = max(i for i, line in enumerate(lines) if '"round_start"' in line)
    con, second = _first_part_audited(tmp_path, lines, cut)
    seq = con.execute("SELECT max(seq) FROM events WHERE type = 'card'").fetchall()[0][0]
    con.execute("UPDATE events SET card = '1s' WHERE seq = ? AND type = 'card'", [seq])
    ingest(con, [second], runs.start(con, "ingest", {}))
    with pytest.raises(UserError, match=rf"^table CF-01 seq {seq} \(.*first\.jsonl:\d+\): the "
                       "events table holds the card '1s', which ingest never stores"):
        audit(con, runs.start(con, "audit", {}), config.PropertyConfig(), tables=False)


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
def test_a_rerun_of_everything_on_the_same_logs_and_config_writes_no_finding_row(tmp_path):
    """`audit --rerun all` with nothing changed: every round replayed again, and not one
    finding withdrawn and opened again. shoe.void_required names its shoe's last round but is
    the table pass's; the rerun's round replay withdrew it, and the table pass opened it again
    (found by the issue 30 helper)."""
    r = simulate(tmp_path / "night", 2, 2, seed=2, deviation_rate=0.1, games=("mini_baccarat",))
    assert {"code": "shoe.void_required", "table": "MB-01"} in [
        {k: d[k] for k in ("code", "table")} for d in r.deviations]
    con = db.connect(tmp_path / "a.duckdb")
    ingest(con, list(r.files), runs.start(con, "ingest", {}))
    first = audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    standing = "SELECT code, fingerprint FROM current_findings ORDER BY ALL"
    before = con.execute(standing).fetchall()
    assert first.rounds > 100 and [c for c, _ in before].count("shoe.void_required") == 1
    everything = (dt.datetime(2000, 1, 1, tzinfo=dt.UTC), dt.datetime(2100, 1, 1, tzinfo=dt.UTC))
    again = audit(con, runs.start(con, "audit", {}), config.PropertyConfig(), rerun=everything)
    assert again.rounds == first.rounds
    written = con.execute("SELECT status, code FROM findings WHERE run_id = ? ORDER BY ALL",
                          [again.run_id]).fetchall()
    assert written == []
    assert con.execute(standing).fetchall() == before
    con.close()


@pytest.mark.slow
def test_a_round_replayed_after_its_fault_is_corrected_withdraws_the_finding(tmp_path):
    """A file cut in the middle of a round (before its round_end) leaves the round looking
    unsettled; the next file, which goes on with its payments and its round_end, makes the
    round replay, and the finding that the whole round no longer shows is withdrawn by a new
    row, not deleted. (A round judged after its round_end keeps its findings: see
    tests/audit/test_late_events.py.)"""
    night = (SAMPLE / "2026-11-28_MB-01.jsonl").read_text().splitlines()
    end = next(i for i, line in enumerate(night) if '"round":2,' in line and "round_end" in line)
    cut = next(i for i, line in enumerate(night) if '"round":2,' in line
               and '"type":"pay"' in line)
    con = db.connect(tmp_path / "a.duckdb")
    # The first file stops before round 2's payments: the round looks unsettled.
    first = tmp_path / "first.jsonl"
    first.write_text("\n".join(night[:cut]) + "\n")
    ingest(con, [first], runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    standing = con.execute(
        "SELECT code FROM current_findings WHERE round = 2 AND code LIKE 'settle.%'"
    ).fetchall()
    assert ("settle.unsettled",) in standing
    second = tmp_path / "second.jsonl"
    second.write_text("\n".join(night[cut:end + 1]) + "\n")
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
    assert con.execute("SELECT count(*) FROM current_findings WHERE code LIKE 'log.%'"
                       ).fetchall() == [(0,)]


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


def test_a_stamp_no_audit_can_read_is_a_sentence_and_exit_2(sample_audited, tmp_path, bacc_audit):
    """A database an earlier bacc-audit loaded with a stamp past the year 9999 in UTC (ingest
    quarantines such a line now): `audit` ended in "internal error: date value out of
    range"; now it names the line and says what to do, and records the run as failed."""
    path = tmp_path / "old.duckdb"
    shutil.copy(sample_audited[0], path)
    con = db.connect(path)
    seq, line = con.execute("SELECT seq, line_no FROM events WHERE table_id = 'MB-01' AND "
                            "type = 'round_start' ORDER BY seq DESC LIMIT 1").fetchall()[0]
    con.execute("UPDATE events SET ts = TIMESTAMPTZ '10000-01-01 04:59:59+00' "
                "WHERE table_id = 'MB-01' AND seq = ?", [seq])
    con.close()
    r = bacc_audit("audit", "--db", path)
    assert r.code == 2, r
    log = Path(__file__).resolve().parents[2] / "sample_logs" / "2026-11-28_MB-01.jsonl"
    assert r.err.splitlines()[-1] == (
        f"error: {log}:{line}: table MB-01 seq {seq} (round_start) is stamped "
        "10000-01-01 04:59:59+00, outside the years 1 to 9999 in UTC, which no audit can "
        "read: this database was loaded by an earlier bacc-audit (ingest now quarantines "
        "such lines) or edited since (bacc-audit verify says which); ingest its logs into a "
        "new database")
    con = db.connect(path, read_only=True)
    assert con.execute("SELECT status, exit_code FROM runs ORDER BY id DESC LIMIT 1"
                       ).fetchall() == [("failed", 2)]
    con.close()


@pytest.mark.parametrize("card", ["Qx", None])
def test_a_card_changed_in_the_database_into_no_card_is_a_sentence_and_exit_2(
    tmp_path, bacc_audit, card
):
    """Ingest stores only cards. A card column changed since into text no card reads ended
    the audit in "internal error: ... connection has an open result" (the replay's error
    hidden behind the events still streaming); now it names the row and its line, says what
    to do, records the run as failed and keeps no part of the audit."""
    log, seq, line, r = _edited_and_audited(tmp_path, bacc_audit, "card", 40, "card", card)
    held = "the card 'Qx'" if card else "a card event without its card"
    assert r.err.splitlines()[-1] == (
        f"error: table MB-01 seq {seq} ({log}:{line}): the events table holds {held}, which "
        "ingest never stores, so the row was changed after ingest; run `bacc-audit verify` "
        "to compare it with its line")



def _edited_and_audited(tmp_path, bacc_audit, kind: str, offset: int, column: str, value):
    """MB-01's night ingested, one `kind` event's `column` set to `value` in the database,
    then `audit`: refused (exit 2, the run recorded failed, no round audited). Returns the
    log, the event's seq and line, and the command's result."""
    log = (Path(__file__).resolve().parents[2] / "sample_logs" / "2026-11-28_MB-01.jsonl")
    path = tmp_path / "a.duckdb"
    con = db.connect(path)
    ingest(con, [log], runs.start(con, "ingest", {}))
    seq, line = con.execute("SELECT seq, line_no FROM events WHERE table_id = 'MB-01' AND "
                            "type = ? ORDER BY seq LIMIT 1 OFFSET ?", [kind, offset]).fetchall()[0]
    con.execute(f"UPDATE events SET {column} = ? WHERE table_id = 'MB-01' AND seq = ?",
                [value, seq])
    con.close()
    r = bacc_audit("audit", "--db", path)
    assert r.code == 2, r
    con = db.connect(path, read_only=True)
    assert con.execute("SELECT status, exit_code FROM runs ORDER BY id DESC LIMIT 1"
                       ).fetchall() == [("failed", 2)]
    assert con.execute("SELECT count(*) FROM round_audits").fetchall() == [(0,)]
    con.close()
    return log, seq, line, r


def test_an_event_without_its_seq_in_the_database_is_a_sentence_and_exit_2(tmp_path, bacc_audit):
    """Ingest quarantines a line without a seq. A seq emptied in the database since ended
    the audit in "internal error: Constraint Error: NOT NULL constraint failed:
    ordered_times.seq" (the stream's order is worked out from it); now it names the line."""
    log, _, line, r = _edited_and_audited(tmp_path, bacc_audit, "wager", 30, "seq", None)
    assert r.err.splitlines()[-1] == (
        f"error: {log}:{line}: the events table holds a wager event of table MB-01 without its "
        "seq, which ingest never stores, so the row was changed after ingest; run `bacc-audit "
        "verify` to compare it with its line")
