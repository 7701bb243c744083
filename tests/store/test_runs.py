"""One run lifecycle (auditor.store.runs.recorded) and one exit rule (auditor.store.outcome):
how a run is recorded whatever ends it, and which exit code the counts give."""

from __future__ import annotations

import datetime as dt
import json

import duckdb
import pytest

from auditor.errors import DatabaseBusy, UserError
from auditor.finding import Finding
from auditor.rules.codes import at_least
from auditor.store import findings, outcome, runs


def last_run(con: duckdb.DuckDBPyConnection) -> tuple[str, str, int, dict]:
    command, status, code, summary = con.execute(
        "SELECT command, status, exit_code, summary FROM runs ORDER BY id DESC LIMIT 1"
    ).fetchall()[0]
    return command, status, code, json.loads(summary)


def test_a_block_that_ends_is_done_with_what_it_gave(con: duckdb.DuckDBPyConnection) -> None:
    with runs.recorded(con, "ingest", {"paths": ["a"]}) as run:
        assert con.execute("SELECT status FROM runs WHERE id = ?", [run.id]).fetchall() == [
            ("running",)
        ]
        run.done(1, {"events": 3})
    assert last_run(con) == ("ingest", "done", 1, {"events": 3})
    with runs.recorded(con, "ack", {}):
        pass
    assert last_run(con) == ("ack", "done", 0, {})


@pytest.mark.parametrize(
    ("error", "status", "code", "summary"),
    [
        (UserError("no such pit"), "failed", 2, {"error": "no such pit"}),
        (DatabaseBusy("busy"), "failed", 4, {"error": "busy"}),
        (KeyboardInterrupt(), "interrupted", 130, {"error": "interrupted"}),
        (RuntimeError("Query interrupted"), "interrupted", 130, {"error": "interrupted"}),
        (ValueError("a bug"), "failed", 3, {"error": "ValueError('a bug')"}),
    ],
)
def test_an_exception_is_recorded_and_goes_on_up(
    con: duckdb.DuckDBPyConnection, error: BaseException, status: str, code: int, summary: dict
) -> None:
    with pytest.raises(type(error)), runs.recorded(con, "nightly", {}) as run:
        run.done(0, {"never": "kept"})
        raise error
    assert last_run(con) == ("nightly", status, code, summary)
    with pytest.raises(type(error)), runs.recorded(con, "notice add", {}, keep_error=False):
        raise error
    assert last_run(con) == ("notice add", status, code, {})


FULL = ('IO Error: Could not write file "/srv/audit.duckdb.tmp/duckdb_temp_30291_0.tmp": '
        "No space left on device")


def test_a_full_disk_under_duckdb_is_the_setups_sentence_and_exit_2(
    con: duckdb.DuckDBPyConnection,
) -> None:
    # What `verify` of a 10M-round day raised when its spill files filled the disk.
    with pytest.raises(UserError) as got, runs.recorded(con, "verify", {}):
        raise duckdb.IOException(FULL)
    said = ("/srv/audit.duckdb.tmp/duckdb_temp_30291_0.tmp: no space left on the device; "
            "free space there (a large check or audit spills temporary files beside the "
            "database, in DB.tmp) and run the command again")
    assert str(got.value) == said and got.value.exit_code == 2
    assert last_run(con) == ("verify", "failed", 2, {"error": said})
    # Other IO errors stay internal failures: they are not known to be the setup's.
    with pytest.raises(duckdb.IOException), runs.recorded(con, "verify", {}):
        raise duckdb.IOException("IO Error: Could not read checksum")
    assert last_run(con)[1:3] == ("failed", 3)


def test_the_exit_rule() -> None:
    assert outcome.exit_code() == 0
    assert outcome.exit_code(files=["ingested", "already_ingested"]) == 0
    assert outcome.exit_code(quarantined=1) == 1
    assert outcome.exit_code(failing=2) == 1
    assert outcome.exit_code(files=["ingested", "refused_altered"]) == 1
    assert outcome.exit_code(files=["empty"], quarantined=4, failing=1) == 2
    assert outcome.exit_code(files=["unreadable"]) == 2
    assert outcome.exit_code(problems=1, failing=1) == 2


def test_failing_findings_counted_as_each_command_counts_them(
    con: duckdb.DuckDBPyConnection, run_id: int
) -> None:
    """`audit` counts every row its run opened; `backfill` those of its run still standing;
    `nightly` also those standing in its gaming day, whoever recorded them."""
    start = dt.datetime(2026, 11, 29, 3, 0, tzinfo=dt.UTC)
    window = (start, start + dt.timedelta(hours=1))

    def plant(code: str, n: int, at: dt.datetime, run: int) -> None:
        found = Finding(code, n, "x", None, None, None, fingerprint=f"{code}|{n}", ts=at)
        findings.staged(con, "planted", [found])
        findings.record(con, run, "SELECT * FROM planted", staged=True)

    earlier = runs.start(con, "audit", {})
    plant("draw.player_missed", 1, start, earlier)  # critical, in the window, another run
    plant("settle.wrong_amount", 2, start - dt.timedelta(days=1), run_id)  # critical
    plant("announce.tie_missing", 3, start, run_id)  # minor
    plant("log.malformed", 4, start - dt.timedelta(days=1), run_id)  # major, then withdrawn
    findings.withdraw(con, run_id, "code = 'log.malformed'")
    graver = at_least("major")
    assert outcome.failing(con, run_id, graver, standing=False) == 2
    assert outcome.failing(con, run_id, graver) == 1
    assert outcome.failing(con, run_id, graver, window=window) == 2
    assert outcome.failing(con, run_id, at_least("info"), window=window) == 3
