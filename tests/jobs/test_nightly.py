"""The nightly job: one run files the PDFs of the shifts with rounds and exits on the night's
findings; a rerun adds nothing; a second run at the same time steps aside with exit 5; a run
killed (SIGKILL) anywhere leaves a consistent database that the next run completes to exactly
what one clean run produces; the systemd units and the cron line say what they must.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pypdf
import pytest
from helpers.pdfs import pdf_text

from auditor import config
from auditor.audit.run import audit
from auditor.errors import EXIT_FINDINGS, EXIT_INPUT, EXIT_LOCKED, UserError
from auditor.ingest.run import ingest
from auditor.jobs import nightly
from auditor.jobs.archive import archive_dir, archive_path
from auditor.jobs.lock import LockInfo, NightlyLocked, lock_holder, lock_path
from auditor.simulate.planted import simulate
from auditor.store import db, runs

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_logs"
CONFIG = SAMPLE / "property.toml"
DAY = dt.date(2026, 11, 28)
DEPLOY = ROOT / "deploy"


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


@dataclass
class Night:
    """A spool holding a copy of the sample night, and one clean nightly run over it."""

    dir: Path
    spool: Path
    db: Path
    archive: Path
    result: nightly.NightlyResult

    def pdf(self, shift: str) -> Path:
        return self.archive / "2026-11-28" / f"2026-11-28_{shift}.pdf"


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Night:
    base = tmp_path_factory.mktemp("nightly")
    spool = base / "spool"
    spool.mkdir()
    for f in sorted(SAMPLE.glob("*.jsonl*")):
        shutil.copy2(f, spool / f.name)
    db_path, archive = base / "audit.duckdb", base / "archive"
    result = nightly.run_nightly(
        db_path, spool, config.load(CONFIG), day=DAY, archive=archive
    )
    return Night(base, spool, db_path, archive, result)


def scalar(db_path: Path, sql: str) -> Any:
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return con.execute(sql).fetchall()[0][0]
    finally:
        con.close()


def state(db_path: Path) -> dict[str, Any]:
    """What a clean run must leave in the database, in terms that do not depend on ids or
    clock times (a crashed transaction may still have used up sequence values)."""
    con = duckdb.connect(str(db_path), read_only=True)
    try:

        def q(sql: str) -> list[tuple]:
            return con.execute(sql).fetchall()

        return {
            "events": q("SELECT count(*), sum(hash(stream, seq, raw)) FROM events")[0],
            "sources_ingested": sorted(
                q(
                    "SELECT path, sha256, lines, events, quarantined, duplicates FROM sources "
                    "WHERE status = 'ingested'"
                )
            ),
            "quarantine": sorted(
                q("SELECT s.sha256, q.line_no, q.reason FROM quarantine q "
                  "JOIN sources s ON s.id = q.source_id")
            ),
            "current_findings": sorted(r[0] for r in q("SELECT fingerprint FROM current_findings")),
            "findings_rows_by_status": sorted(
                q("SELECT status, count(*) FROM findings GROUP BY ALL")
            ),
            "rounds_audited": q(
                "SELECT count(*) FROM (SELECT DISTINCT table_id, shoe, round FROM round_audits)"
            )[0][0],
        }
    finally:
        con.close()


def assert_consistent(db_path: Path, archive: Path) -> None:
    """What must hold after a crash at any point, before anything repairs it."""
    con = duckdb.connect(str(db_path), read_only=True)
    try:

        def n(sql: str) -> int:
            return con.execute(sql).fetchall()[0][0]

        # Every event belongs to a file recorded as ingested, with the counts it was
        # recorded with: no half-loaded file.
        assert n(
            "SELECT count(*) FROM events WHERE source_id NOT IN "
            "(SELECT id FROM sources WHERE status = 'ingested')"
        ) == 0
        assert n(
            "SELECT count(*) FROM sources s WHERE status = 'ingested' AND events <> "
            "(SELECT count(*) FROM events e WHERE e.source_id = s.id)"
        ) == 0
        assert n(
            "SELECT count(*) FROM sources s WHERE status = 'ingested' AND quarantined <> "
            "(SELECT count(*) FROM quarantine q WHERE q.source_id = s.id)"
        ) == 0
        assert n("SELECT count(*) FROM events WHERE rejected IS NOT NULL") == 0
        assert n(
            "SELECT count(*) FROM (SELECT stream, seq FROM events GROUP BY ALL "
            "HAVING count(*) > 1)"
        ) == 0
        # No round audited twice by one transaction's leftovers, no finding open twice.
        assert n(
            "SELECT count(*) FROM (SELECT table_id, shoe, round, run_id FROM round_audits "
            "GROUP BY ALL HAVING count(*) > 1)"
        ) == 0
        assert n(
            "SELECT count(*) FROM (SELECT fingerprint, run_id FROM findings "
            "GROUP BY ALL HAVING count(*) > 1)"
        ) == 0
        listed = runs.listing(con)
    finally:
        con.close()
    # The killed run's row still says 'running'; the listing shows it interrupted, unless
    # the lock says its process is alive.
    last = listed[-1]
    assert (last["recorded_status"], last["status"]) == ("running", "interrupted")
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        assert runs.listing(con, live={last["id"]})[-1]["status"] == "running"
    finally:
        con.close()
    assert_whole_pdfs(archive)


def assert_whole_pdfs(archive: Path) -> None:
    """Every PDF under its final name is a whole PDF."""
    for pdf in archive.rglob("*.pdf"):
        data = pdf.read_bytes()
        assert data.startswith(b"%PDF-") and b"%%EOF" in data[-64:], pdf
        assert len(pypdf.PdfReader(pdf).pages) > 0, pdf


# --------------------------------------------------------------------------------------------
# one run, a rerun
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_nightly_files_a_pdf_for_each_shift_with_rounds_and_skips_the_empty_one(
    night: Night,
) -> None:
    r = night.result
    assert [(s.shift, s.status) for s in r.reports] == [
        ("day", "skipped"),
        ("swing", "written"),
        ("grave", "written"),
    ]
    assert r.reports[0].reason == "no rounds in this shift" and r.reports[0].path is None
    assert sorted(p.relative_to(night.archive) for p in night.archive.rglob("*")) == [
        Path("2026-11-28"),
        Path("2026-11-28/2026-11-28_grave.pdf"),
        Path("2026-11-28/2026-11-28_swing.pdf"),
    ]
    for shift in ("swing", "grave"):
        assert f"{shift} shift of gaming day 2026-11-28" in pdf_text(night.pdf(shift))


@pytest.mark.slow
def test_nightly_exits_1_on_the_nights_major_findings_and_says_what_it_did(night: Night) -> None:
    r = night.result
    s = r.summary()
    assert r.exit_code == EXIT_FINDINGS and s["exit_code"] == EXIT_FINDINGS
    assert r.problems == []
    assert s["files_by_status"] == {"ingested": 9}
    assert s["events"] == scalar(night.db, "SELECT count(*) FROM events")
    # Planted deviations of the sample night (sample_logs/README.md) stand in the day.
    assert s["findings"]["by_severity"]["critical"] >= 4
    assert s["findings"]["at_or_above_fail_on"] > 0
    lines = nightly.summary_lines(r)
    assert "  day      skipped: no rounds in this shift" in lines
    assert lines[-1].startswith("exit 1: ") and "at or above major" in lines[-1]


@pytest.mark.slow
def test_the_run_is_recorded_with_files_rounds_findings_exit_code_and_rule_packs(
    night: Night,
) -> None:
    con = duckdb.connect(str(night.db), read_only=True)
    try:
        row = next(r for r in runs.listing(con) if r["id"] == night.result.run_id)
    finally:
        con.close()
    assert (row["command"], row["status"], row["exit_code"]) == ("nightly", "done", 1)
    assert row["tool_version"]
    summary = row["summary"]
    assert len(summary["files"]) == 9
    assert summary["rounds_audited"] == night.result.audited.rounds > 0
    assert summary["findings"]["standing_in_gaming_day"] == sum(
        night.result.by_severity.values()
    )
    assert summary["rule_packs"] == runs.rule_pack_hashes()
    assert "nj-mini_baccarat.toml" in summary["rule_packs"]
    assert row["args"]["rule_packs"] == summary["rule_packs"]
    assert row["counts"]["files"] == 9 and row["counts"]["pdfs"] == 2


@pytest.mark.slow
def test_a_rerun_adds_nothing_and_rewrites_the_same_pdf_bytes(
    night: Night, bacc_audit: Any
) -> None:
    before = state(night.db)
    findings_rows = scalar(night.db, "SELECT count(*) FROM findings")
    pdfs = {s: night.pdf(s).read_bytes() for s in ("swing", "grave")}
    r = bacc_audit(
        "nightly", "--spool", night.spool, "--date", "2026-11-28", "--archive", night.archive,
        "--db", night.db, "--config", CONFIG, "--json",
    )
    assert r.code == EXIT_FINDINGS, r
    s = json.loads(r.out)
    assert s["files_by_status"] == {"already_ingested": 9}
    assert (s["events"], s["rounds_audited"], s["findings_new"]) == (0, 0, 0)
    assert [(x["shift"], x["status"]) for x in s["reports"]] == [
        ("day", "skipped"), ("swing", "unchanged"), ("grave", "unchanged"),
    ]
    assert state(night.db) == before
    assert scalar(night.db, "SELECT count(*) FROM findings") == findings_rows
    assert {s: night.pdf(s).read_bytes() for s in ("swing", "grave")} == pdfs


@pytest.mark.slow
def test_runs_lists_the_nightly_runs(night: Night, bacc_audit: Any) -> None:
    r = bacc_audit("runs", "--db", night.db, "--json")
    assert r.code == 0, r
    rows = json.loads(r.out)
    assert rows[0]["command"] == "nightly" and rows[0]["status"] == "done"
    assert rows[0]["counts"]["files"] == 9
    text = bacc_audit("runs", "--db", night.db)
    assert text.code == 0 and "nightly" in text.out and "done" in text.out


# --------------------------------------------------------------------------------------------
# which gaming day, and input errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now_local", "day"),
    [
        ("2026-11-29T06:30", "2026-11-28"),  # the timer: the night just ended
        ("2026-11-29T05:59", "2026-11-27"),  # before 06:00 the 28th has not ended
        ("2026-11-29T06:00", "2026-11-28"),  # it ends at 06:00 exactly
        ("2026-03-08T06:30", "2026-03-07"),  # spring forward in the night (a 23-hour day)
        ("2026-11-01T06:30", "2026-10-31"),  # fall back in the night (a 25-hour day)
    ],
)
def test_the_default_gaming_day_is_the_latest_that_has_ended(now_local: str, day: str) -> None:
    conf = config.load(CONFIG)
    zone = conf.zone(None)
    now = dt.datetime.fromisoformat(now_local).replace(tzinfo=zone)
    assert nightly.last_ended_gaming_day(conf, zone, now) == dt.date.fromisoformat(day)


@pytest.mark.slow
def test_a_missing_spool_exits_2_and_is_recorded(tmp_path: Path, bacc_audit: Any) -> None:
    dbp = tmp_path / "a.duckdb"
    r = bacc_audit("nightly", "--spool", tmp_path / "nowhere", "--db", dbp, "--json")
    assert r.code == EXIT_INPUT, r
    assert "the spool is not a folder" in json.loads(r.out)["error"]
    assert r.err.startswith(f"error: {tmp_path / 'nowhere'}: the spool is not a folder")
    assert scalar(dbp, "SELECT status || ' ' || exit_code FROM runs") == "failed 2"


@pytest.mark.slow
def test_a_day_with_no_rounds_at_all_exits_2(night: Night, tmp_path: Path) -> None:
    db_copy = tmp_path / "copy.duckdb"
    shutil.copy2(night.db, db_copy)
    r = nightly.run_nightly(
        db_copy, night.spool, config.load(CONFIG), day=dt.date(2026, 11, 20),
        archive=tmp_path / "archive",
    )
    assert r.exit_code == EXIT_INPUT
    assert [x.status for x in r.reports] == ["skipped"] * 3
    assert "no rounds in gaming day 2026-11-20" in r.problems[0]
    assert not (tmp_path / "archive").exists() or not any((tmp_path / "archive").rglob("*.pdf"))


# --------------------------------------------------------------------------------------------
# one run at a time
# --------------------------------------------------------------------------------------------


HOLD_LOCK = textwrap.dedent(
    """
    import fcntl, json, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "run_id": 99, "since": "then"}).encode(), 0)
    print("locked", flush=True)
    time.sleep(120)
    """
)


@pytest.mark.slow
def test_a_second_run_is_refused_with_exit_5_while_the_lock_is_held(
    night: Night, bacc_audit: Any
) -> None:
    lock = lock_path(night.db)
    runs_before = scalar(night.db, "SELECT count(*) FROM runs")
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(lock)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"
        assert lock_holder(night.db) == LockInfo(child.pid, 99, "then")
        r = bacc_audit(
            "nightly", "--spool", night.spool, "--db", night.db, "--config", CONFIG, "--json"
        )
        assert r.code == EXIT_LOCKED == 5, r
        assert json.loads(r.out)["exit_code"] == 5
        assert "another nightly run holds the lock: nightly run 99 " in r.err
        assert f"(process {child.pid}, since then)" in r.err
        with pytest.raises(NightlyLocked):
            nightly.run_nightly(night.db, night.spool, config.load(CONFIG), day=DAY)
    finally:
        child.kill()
        child.wait()
    # The refused runs touched nothing; the kernel released the lock with the process.
    assert scalar(night.db, "SELECT count(*) FROM runs") == runs_before
    assert lock_holder(night.db) is None


# --------------------------------------------------------------------------------------------
# crash safety: SIGKILL at one point after another, then a clean run
# --------------------------------------------------------------------------------------------

# The children: each sets one crash point, then runs the nightly job as the CLI would. A hook
# that never fires lets the child exit normally, and the test says which point did not fire.
# They are forked, one a point, by a process that imported the job's modules once (the
# imports are most of a child's start); each child is still a process of its own, killed
# by SIGKILL. The server reads "POINT NTH" lines and answers each with the child's exit code
# (negative: the signal that killed it); the child's stderr goes to DIR/POINT.err.
CRASH_SCRIPT = textwrap.dedent(
    """
    import datetime as dt, os, signal, sys, traceback
    from pathlib import Path
    import auditor.audit.run, auditor.store.runs, auditor.audit.table_pass
    import auditor.ingest.lines, auditor.ingest.log_findings, auditor.ingest.reader
    import auditor.report.render, weasyprint
    from auditor import config
    from auditor.jobs import nightly

    db, spool, archive, conf, errors = sys.argv[1:]

    def crash(point, nth):
        calls = [0]

        def die():
            os.kill(os.getpid(), signal.SIGKILL)

        def due():
            calls[0] += 1
            return calls[0] == nth

        def wrap(module, name, after):
            original = getattr(module, name)
            def hooked(*args, **kw):
                if not after and due():
                    die()
                result = original(*args, **kw)
                if after and due():
                    die()
                return result
            setattr(module, name, hooked)

        if point == "ingest-mid-file":  # blocks of 256 KiB: killed between a file's blocks
            auditor.ingest.reader.CHUNK_BYTES = 256 << 10
            wrap(auditor.ingest.lines, "read_rows", after=False)
        elif point == "ingest-before-commit":  # a batch's rows and manifest written, no COMMIT
            auditor.ingest.reader.CHUNK_BYTES = 256 << 10  # about a file a batch
            wrap(auditor.ingest.log_findings, "record_seq_gaps", after=True)
        elif point == "replay-before-commit":  # findings and round_audits written, no COMMIT
            wrap(auditor.audit.run, "_store", after=True)
        elif point == "table-pass-before-commit":
            wrap(auditor.audit.table_pass, "_store", after=True)
        elif point == "between-table-pass-and-supersede":
            wrap(auditor.audit.table_pass, "supersede_round_mismatches", after=False)
        elif point == "render-half-written":  # half the PDF in the .partial file
            real_fsync = os.fsync
            def fsync(fd):
                if os.readlink(f"/proc/self/fd/{fd}").endswith((".partial", ".pdf")) and due():
                    os.ftruncate(fd, os.fstat(fd).st_size // 2)
                    die()
                real_fsync(fd)
            os.fsync = fsync
        elif point == "render-before-rename":  # a whole .partial, not yet renamed
            real_replace = os.replace
            def replace(src, dst, *args, **kw):
                if str(dst).endswith(".pdf") and due():
                    die()
                return real_replace(src, dst, *args, **kw)
            os.replace = replace
        elif point == "before-run-record":  # all done but the run's final record
            wrap(auditor.store.runs, "finish", after=False)
        else:
            raise SystemExit(f"unknown crash point {point}")

        nightly.run_nightly(Path(db), Path(spool), config.load(conf),
                            day=dt.date(2026, 11, 28), archive=Path(archive))
        print(f"crash point {point} #{nth} never fired", file=sys.stderr)

    for request in sys.stdin:
        point, nth = request.split()
        pid = os.fork()
        if pid:
            print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
            continue
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # stdout is the server's answers
        os.dup2(os.open(os.path.join(errors, point + ".err"), os.O_WRONLY | os.O_CREAT), 2)
        try:
            crash(point, int(nth))
            code = 0
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stderr.flush()
        os._exit(code)
    """
)

# (where, which call): in this order each run picks up what the killed one left.
CRASH_POINTS = [
    ("ingest-mid-file", 6),  # CF-01 is 3 blocks: the 3rd block of MB-01, 2 already inserted
    ("ingest-before-commit", 2),  # one batch commits, the next dies before its COMMIT
    ("replay-before-commit", 1),
    ("table-pass-before-commit", 1),
    ("between-table-pass-and-supersede", 1),
    ("render-half-written", 1),  # the swing shift's PDF
    ("render-before-rename", 2),  # swing renamed, grave's .partial whole but not renamed
    ("before-run-record", 1),
]


@pytest.mark.slow
def test_a_run_killed_anywhere_is_completed_by_the_next_to_what_one_clean_run_produces(
    night: Night, tmp_path: Path
) -> None:
    db_path, archive = tmp_path / "crash.duckdb", tmp_path / "archive"
    script = tmp_path / "crash_server.py"
    script.write_text(CRASH_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for k in ("BACC_AUDIT_DB", "BACC_AUDIT_CONFIG", "SOURCE_DATE_EPOCH"):
        env.pop(k, None)
    killed = 0
    server = subprocess.Popen(
        [sys.executable, str(script), str(db_path), str(night.spool), str(archive),
         str(CONFIG), str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        for point, nth in CRASH_POINTS:
            server.stdin.write(f"{point} {nth}\n")
            server.stdin.flush()
            # One line an answer, read whole: nothing waits in the pipe's buffer meanwhile.
            assert select.select([server.stdout], [], [], 120)[0], (point, "no answer in 120 s")
            code = int(server.stdout.readline() or "0")
            err = tmp_path / f"{point}.err"
            assert code == -signal.SIGKILL, (point, code, err.read_text() if err.exists() else "")
            killed += 1
            assert_consistent(db_path, archive)
            if point == "render-half-written":
                partials = list(archive.rglob(".*.partial"))
                assert [p.name for p in partials] == [".2026-11-28_swing.pdf.partial"]
                assert not (archive / "2026-11-28" / "2026-11-28_swing.pdf").exists()
        server.stdin.close()
        assert server.wait(60) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(30)
    clean = nightly.run_nightly(db_path, night.spool, config.load(CONFIG), day=DAY,
                                archive=archive)
    assert clean.exit_code == night.result.exit_code
    assert len(clean.interrupted_runs) == killed
    assert state(db_path) == state(night.db)
    # Every PDF under its final name, whole, and no temporary file left behind.
    assert list(archive.rglob("*.partial")) == []
    assert sorted(p.name for p in archive.rglob("*.pdf")) == [
        "2026-11-28_grave.pdf",
        "2026-11-28_swing.pdf",
    ]
    assert_whole_pdfs(archive)
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        statuses = [r["status"] for r in runs.listing(con)]
    finally:
        con.close()
    assert statuses == ["interrupted"] * killed + ["done"]


# --------------------------------------------------------------------------------------------
# scheduling: the systemd units and the cron line
# --------------------------------------------------------------------------------------------


def unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A systemd unit file as {section: {key: [values in order]}} (keys may repeat)."""
    out: dict[str, dict[str, list[str]]] = {}
    section: dict[str, list[str]] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = out.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        section.setdefault(key.strip(), []).append(value.strip())
    return out


@pytest.fixture
def units(tmp_path: Path) -> Iterator[tuple[dict, dict]]:
    yield unit(DEPLOY / "bacc-audit-nightly.service"), unit(DEPLOY / "bacc-audit-nightly.timer")


def test_the_service_runs_the_nightly_job_as_its_own_user_with_its_environment(
    units: tuple[dict, dict],
) -> None:
    service, _ = units
    s = service["Service"]
    assert s["Type"] == ["oneshot"]
    assert s["User"] == ["bacc-audit"]
    assert re.fullmatch(r"/\S+/bacc-audit nightly( .*)?", s["ExecStart"][0])
    env = dict(e.split("=", 1) for e in s["Environment"])
    assert set(env) >= {
        "BACC_AUDIT_DB", "BACC_AUDIT_CONFIG", "BACC_AUDIT_SPOOL", "BACC_AUDIT_ARCHIVE"
    }
    assert all(v.startswith("/") for v in env.values())
    # It writes its database, lock and archive, so those must be writable under
    # ProtectSystem=strict.
    writable = s["ReadWritePaths"][0].split()
    for var in ("BACC_AUDIT_DB", "BACC_AUDIT_ARCHIVE"):
        assert any(env[var].startswith(w) for w in writable), var
    assert s["SuccessExitStatus"] == ["1"]
    assert "Install" not in service  # started by the timer only


def test_the_timer_runs_daily_after_the_gaming_day_and_catches_up_missed_runs(
    units: tuple[dict, dict],
) -> None:
    _, timer = units
    t = timer["Timer"]
    assert t["Persistent"] == ["true"]
    assert re.fullmatch(r"\*-\*-\* 06:30:00( \S+)?", t["OnCalendar"][0])
    assert t["Unit"] == ["bacc-audit-nightly.service"]
    assert timer["Install"]["WantedBy"] == ["timers.target"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_analyze_verifies_the_units(tmp_path: Path) -> None:
    # verify also checks that ExecStart exists; the installed path does not exist here.
    text = (DEPLOY / "bacc-audit-nightly.service").read_text()
    exec_start = unit(DEPLOY / "bacc-audit-nightly.service")["Service"]["ExecStart"][0]
    binary = exec_start.split()[0]
    (tmp_path / "bacc-audit-nightly.service").write_text(text.replace(binary, "/bin/true"))
    shutil.copy2(DEPLOY / "bacc-audit-nightly.timer", tmp_path)
    shutil.copy2(DEPLOY / "bacc-audit-alert@.service", tmp_path)
    r = subprocess.run(
        ["systemd-analyze", "verify", str(tmp_path / "bacc-audit-nightly.timer"),
         str(tmp_path / "bacc-audit-nightly.service"),
         str(tmp_path / "bacc-audit-alert@bacc-audit-nightly.service.service")],
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, r.stderr


def test_a_failed_run_starts_the_alert_template_which_reports_the_failed_units_journal(
    units: tuple[dict, dict],
) -> None:
    service, _ = units
    assert service["Unit"]["OnFailure"] == ["bacc-audit-alert@%n.service"]
    alert = unit(DEPLOY / "bacc-audit-alert@.service")
    s = alert["Service"]
    assert s["Type"] == ["oneshot"]
    (cmd,) = s["ExecStart"]
    # The failed unit's name (%i) reaches journalctl; "$$" is systemd's literal "$".
    assert cmd.endswith(" sh %i") and 'journalctl -u "$$1"' in cmd, cmd
    assert "systemd-cat -t bacc-audit-alert -p err" in cmd
    assert "Install" not in alert  # started by OnFailure= only


def test_the_cron_log_rotates_by_rename_and_create_for_the_job_user() -> None:
    text = (DEPLOY / "bacc-audit.logrotate").read_text()
    lines = [x.strip() for x in text.splitlines() if x.strip() and not x.lstrip().startswith("#")]
    cron = (DEPLOY / "bacc-audit.cron").read_text()
    log = re.search(r">> (\S+) 2>&1$", cron.strip()).group(1)  # type: ignore[union-attr]
    assert lines[0] == f"{log} {{" and lines[-1] == "}"
    body = lines[1:-1]
    assert "create 0640 bacc-audit bacc-audit" in body
    assert "copytruncate" not in body  # could lose lines written between copy and truncate
    assert {"missingok", "notifempty", "delaycompress", "su bacc-audit bacc-audit"} <= set(body)


@pytest.mark.skipif(shutil.which("logrotate") is None, reason="no logrotate")
def test_logrotate_accepts_the_config(tmp_path: Path) -> None:
    log = tmp_path / "nightly.log"
    log.write_text("x\n")
    conf = (DEPLOY / "bacc-audit.logrotate").read_text().replace(
        "/var/log/bacc-audit/nightly.log", str(log)
    )
    conf = re.sub(r"(?m)^\s*(su|create) .*$", "", conf)  # no bacc-audit user here
    (tmp_path / "conf").write_text(conf)
    r = subprocess.run(
        ["logrotate", "-d", "-s", str(tmp_path / "state"), str(tmp_path / "conf")],
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, r.stderr


def test_the_cron_line_uses_flock_n_on_its_own_lock_and_the_same_environment() -> None:
    text = (DEPLOY / "bacc-audit.cron").read_text()
    lines = [x for x in text.splitlines() if x.strip() and not x.startswith("#")]
    env = dict(x.split("=", 1) for x in lines if re.match(r"^[A-Z_]+=", x))
    assert set(env) >= {
        "BACC_AUDIT_DB", "BACC_AUDIT_CONFIG", "BACC_AUDIT_SPOOL", "BACC_AUDIT_ARCHIVE"
    }
    (job,) = [x for x in lines if not re.match(r"^[A-Z_]+=", x)]
    minute, hour, dom, month, dow, user, command = job.split(None, 6)
    assert (minute, hour, dom, month, dow, user) == ("30", "6", "*", "*", "*", "bacc-audit")
    m = re.search(r"flock -n (?:-E \d+ )?(\S+) (\S+/bacc-audit) nightly", command)
    assert m, command
    # The job takes <db>.lock itself: flock(1) on the same file would lock the job out.
    assert m.group(1) != str(lock_path(Path(env["BACC_AUDIT_DB"])))


# A measured figure: minutes, seconds, hours of run time, or memory.
FIGURE = re.compile(r"\b\d[\d,.]*[ -]?(?:minutes?|min|seconds?|hours?|GB|MB)\b", re.I)


def test_measured_figures_live_only_in_docs_benchmarks() -> None:
    """A figure restated elsewhere drifts from the measured one (the service once said 15
    minutes while the README said 26): deploy/ and the README's status and scheduling
    paragraphs point at docs/benchmarks.md instead."""
    for f in sorted(DEPLOY.iterdir()):  # the comments: settings (AccuracySec=1min) are no figures
        comments = [x for x in f.read_text().splitlines() if x.lstrip().startswith("#")]
        assert not FIGURE.search("\n".join(comments)), f
    assert "docs/benchmarks.md" in (DEPLOY / "bacc-audit-nightly.service").read_text()
    readme = (ROOT / "README.md").read_text()
    status = readme.split("**Status.**", 1)[1].split("\n\n", 1)[0]
    scheduling = readme.split("## Scheduling the nightly job", 1)[1].split("\n## ", 1)[0]
    for part in (status.replace("30-minute written notices", ""), scheduling):
        prose = re.sub(r"`[^`]*`", "", part)  # settings in code (`3GB`) are no figures
        assert not FIGURE.search(prose), FIGURE.search(prose)
    assert "[docs/benchmarks.md](docs/benchmarks.md)" in status


def test_the_archive_comes_from_the_option_else_the_config_else_the_default(
    tmp_path: Path,
) -> None:
    conf_file = tmp_path / "etc" / "property.toml"
    conf_file.parent.mkdir()
    conf_file.write_text('[property]\ntime_zone = "America/New_York"\narchive = "pdfs"\n')
    conf = config.load(conf_file)
    assert archive_dir(conf, None) == tmp_path / "etc" / "pdfs"  # beside the config
    assert archive_dir(conf, tmp_path / "x") == tmp_path / "x"
    assert archive_dir(config.PropertyConfig(), None) == Path("reports/archive")
    assert archive_path(Path("a"), DAY, "2026-11-28_grave") == Path(
        "a/2026-11-28/2026-11-28_grave.pdf"
    )
    conf_file.write_text("[property]\narchive = 3\n")
    with pytest.raises(UserError, match=r"property\.archive must be a folder path"):
        config.load(conf_file)


@pytest.mark.slow
def test_an_archive_that_cannot_be_written_exits_2_naming_it_and_is_recorded(
    night: Night, tmp_path: Path, bacc_audit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only archive folder is the setup's problem: one sentence, exit 2, no traceback.
    The kernel's answer (EROFS) is stood in for: chmod does not stop root, who may run this."""
    import errno

    from auditor.report import render

    def refuse(path: Path, data: bytes) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr(render, "write_whole", refuse)
    db_copy = tmp_path / "copy.duckdb"
    shutil.copy2(night.db, db_copy)
    archive = tmp_path / "ro"
    r = bacc_audit(
        "nightly", "--spool", night.spool, "--db", db_copy, "--archive", archive,
        "--date", "2026-11-28", "--config", CONFIG,
    )
    assert r.code == EXIT_INPUT, r
    pdf = archive / "2026-11-28" / "2026-11-28_swing.pdf"  # the first shift with rounds
    assert r.err.splitlines()[-1] == (
        f"error: {pdf}: cannot write there (Read-only file system); point --archive (or "
        "BACC_AUDIT_ARCHIVE, or [property] archive) at a folder this user can write to"
    )
    assert "Traceback" not in r.err and "please report it" not in r.err
    assert scalar(db_copy, "SELECT status || ' ' || exit_code FROM runs ORDER BY id DESC") == (
        "failed 2"
    )


@pytest.mark.slow
def test_an_empty_file_in_the_spool_is_a_problem_of_the_night(
    night: Night, tmp_path: Path
) -> None:
    db_copy = tmp_path / "copy.duckdb"
    shutil.copy2(night.db, db_copy)
    spool = tmp_path / "spool"
    shutil.copytree(night.spool, spool)
    (spool / "2026-11-28_MB-09.jsonl").write_bytes(b"")
    r = nightly.run_nightly(
        db_copy, spool, config.load(CONFIG), day=DAY, archive=night.archive
    )
    assert r.exit_code == EXIT_INPUT
    [problem] = r.problems
    assert problem.startswith(f"{spool / '2026-11-28_MB-09.jsonl'}: empty file, no events")
    lines = nightly.summary_lines(r)
    assert any(x.startswith("  EMPTY ") for x in lines), lines
    assert "1 empty;" in next(x for x in lines if x.startswith("ingest:"))


# --------------------------------------------------------------------------------------------
# --file-ingested: ingested files leave the spool for ARCHIVE/evidence/DAY
# --------------------------------------------------------------------------------------------

NAMES = sorted(f.name for f in SAMPLE.glob("*.jsonl*"))
# The tests that ingest afresh under --file-ingested: a plain log, a gzipped one and the pit's
# notices (the whole night's nine files render a report twice as long, in each such test).
FEW = ["2026-11-28_MB-01.jsonl", "2026-11-28_MB-02.jsonl.gz", "2026-11-28_pit-notices.jsonl"]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def night_copy(night: Night, tmp_path: Path) -> tuple[Path, Path, Path]:
    """The clean night's database and a copy of its spool and archive: every file already
    ingested, every report filed (a run files none again: the file tests render no PDF)."""
    db_copy, spool, archive = tmp_path / "copy.duckdb", tmp_path / "spool", tmp_path / "archive"
    shutil.copy2(night.db, db_copy)
    shutil.copytree(night.spool, spool)
    shutil.copytree(night.archive, archive)
    return db_copy, spool, archive


def run_filing(db_path: Path, spool: Path, archive: Path, how: str) -> nightly.NightlyResult:
    return nightly.run_nightly(
        db_path, spool, config.load(CONFIG), day=DAY, archive=archive, file_ingested=how
    )


def filed(result: nightly.NightlyResult) -> dict[str, tuple[str, str, str]]:
    """{file name: (status, filed, now_at)} from the run's JSON summary."""
    return {
        Path(f["path"]).name: (f["status"], f["filed"], f["now_at"])
        for f in json.loads(json.dumps(result.summary()))["files"]
    }


@pytest.mark.slow
def test_move_files_each_ingested_file_into_the_evidence_folder_of_its_gaming_day(
    tmp_path: Path,
) -> None:
    spool, archive, db_path = tmp_path / "spool", tmp_path / "archive", tmp_path / "a.duckdb"
    spool.mkdir()
    for name in FEW:
        shutil.copy2(SAMPLE / name, spool / name)
    r = run_filing(db_path, spool, archive, "move")
    assert r.exit_code == EXIT_FINDINGS
    evidence = archive / "evidence" / "2026-11-28"
    assert list(spool.iterdir()) == []
    assert sorted(p.name for p in evidence.iterdir()) == FEW
    assert all(sha(evidence / n) == sha(SAMPLE / n) for n in FEW)
    assert filed(r) == {n: ("ingested", "moved", str(evidence / n)) for n in FEW}
    s = r.summary()
    assert s["file_ingested"] == "move"
    assert s["files"][0]["path"] == str(spool / FEW[0])  # where it was delivered
    # The manifest keeps the delivered path, the evidence of where the file came from.
    assert scalar(db_path, "SELECT list(path ORDER BY path) FROM sources") == [
        str((spool / n).resolve()) for n in FEW
    ]
    recorded = json.loads(
        scalar(db_path, "SELECT summary FROM runs WHERE command = 'nightly' ORDER BY id DESC")
    )
    assert recorded["files"][0]["now_at"] == str(evidence / FEW[0])
    lines = nightly.summary_lines(r)
    assert f"filed (move) into {archive / 'evidence'}: 3 moved, 0 linked, 0 already there, " \
        "0 left in the spool" in lines


@pytest.mark.slow
def test_a_file_still_being_written_stays_in_the_spool(tmp_path: Path) -> None:
    """A file whose last line has no newline yet is ingested up to it and not moved: the
    table system is still writing it."""
    spool, archive, db_path = tmp_path / "spool", tmp_path / "archive", tmp_path / "a.duckdb"
    spool.mkdir()
    for name in FEW:
        shutil.copy2(SAMPLE / name, spool / name)
    growing = spool / "2026-11-28_MB-01.jsonl"
    half = b'{"v":1,"ts":"2026-11-29T05:59:59-05:00","type":"ann'
    growing.write_bytes(growing.read_bytes() + half)
    r = run_filing(db_path, spool, archive, "move")
    now = filed(r)
    status, action, where = now[growing.name]
    assert (status, action, where) == ("ingested", "kept", str(growing))
    assert growing.read_bytes().endswith(half)
    assert sorted(p.name for p in spool.iterdir()) == [growing.name]
    assert all(now[n][1] == "moved" for n in FEW if n != growing.name)


@pytest.mark.slow
def test_a_changed_redelivery_after_a_move_is_still_refused_as_altered(tmp_path: Path) -> None:
    spool, archive, db_path = tmp_path / "spool", tmp_path / "archive", tmp_path / "a.duckdb"
    spool.mkdir()
    for name in FEW:
        shutil.copy2(SAMPLE / name, spool / name)
    run_filing(db_path, spool, archive, "move")
    moved = archive / "evidence" / "2026-11-28" / "2026-11-28_MB-01.jsonl"
    before = sha(moved)
    lines = moved.read_text().splitlines(keepends=True)
    event = json.loads(lines[0])
    event["dealer"] = "D9999"  # an ingested event, changed
    changed = json.dumps(event) + "\n" + "".join(lines[1:])
    # The same name again (caught by its path), and the same events under a new name (caught
    # by their streams' seqs): both stay in the spool, and the evidence file is untouched.
    (spool / "2026-11-28_MB-01.jsonl").write_text(changed)
    (spool / "resent_MB-01.jsonl").write_text(changed)
    r = run_filing(db_path, spool, archive, "move")
    assert {n: (f[0], f[1]) for n, f in filed(r).items()} == {
        "2026-11-28_MB-01.jsonl": ("refused_altered", "kept"),
        "resent_MB-01.jsonl": ("refused_altered", "kept"),
    }
    [same_name] = [f for f in r.ingested.files if f.path.name == "2026-11-28_MB-01.jsonl"]
    assert "its content changed since it was ingested" in same_name.message
    assert sorted(p.name for p in spool.iterdir()) == [
        "2026-11-28_MB-01.jsonl", "resent_MB-01.jsonl"
    ]
    assert (spool / "2026-11-28_MB-01.jsonl").read_text() == changed
    assert sha(moved) == before
    assert sorted(p.name for p in moved.parent.iterdir()) == FEW
    assert scalar(db_path, "SELECT count(*) FROM findings WHERE code = 'log.altered'") == 2


@pytest.mark.slow
def test_link_hard_links_the_very_file_that_was_delivered_and_empties_the_spool(
    night: Night, tmp_path: Path
) -> None:
    db_copy, spool, archive = night_copy(night, tmp_path)
    inodes = {p.name: p.stat().st_ino for p in spool.iterdir()}
    r = run_filing(db_copy, spool, archive, "link")
    evidence = archive / "evidence" / "2026-11-28"
    assert list(spool.iterdir()) == []
    assert {p.name: p.stat().st_ino for p in evidence.iterdir()} == inodes  # not a copy
    assert filed(r) == {n: ("already_ingested", "linked", str(evidence / n)) for n in NAMES}


@pytest.mark.slow
def test_keep_is_the_default_and_leaves_the_spool_as_it_was(night: Night, tmp_path: Path) -> None:
    db_copy, spool, archive = night_copy(night, tmp_path)
    r = nightly.run_nightly(db_copy, spool, config.load(CONFIG), day=DAY, archive=archive)
    assert sorted(p.name for p in spool.iterdir()) == NAMES
    assert not (archive / "evidence").exists()
    assert filed(r) == {n: ("already_ingested", "kept", str(spool / n)) for n in NAMES}
    assert r.summary()["file_ingested"] == "keep"
    assert not any(x.startswith("filed (") for x in nightly.summary_lines(r))


@pytest.mark.slow
def test_refused_and_empty_files_stay_in_the_spool_for_a_person_to_review(
    night: Night, tmp_path: Path
) -> None:
    db_copy, spool, archive = night_copy(night, tmp_path)
    mb01 = spool / "2026-11-28_MB-01.jsonl"
    mb01.write_text(mb01.read_text().replace('"dealer":"D2092"', '"dealer":"D9999"', 1))
    (spool / "2026-11-28_MB-09.jsonl").write_bytes(b"")
    r = run_filing(db_copy, spool, archive, "move")
    got = filed(r)
    assert got["2026-11-28_MB-01.jsonl"] == ("refused_altered", "kept", str(mb01))
    assert got["2026-11-28_MB-09.jsonl"] == (
        "empty", "kept", str(spool / "2026-11-28_MB-09.jsonl")
    )
    assert sorted(p.name for p in spool.iterdir()) == [
        "2026-11-28_MB-01.jsonl", "2026-11-28_MB-09.jsonl"
    ]
    evidence = archive / "evidence" / "2026-11-28"
    assert sorted(p.name for p in evidence.iterdir()) == [
        n for n in NAMES if n != "2026-11-28_MB-01.jsonl"
    ]


@pytest.mark.slow
def test_a_name_clash_gets_a_suffix_and_the_same_bytes_are_not_stored_twice(
    night: Night, tmp_path: Path
) -> None:
    db_copy, spool, archive = night_copy(night, tmp_path)
    evidence = archive / "evidence" / "2026-11-28"
    evidence.mkdir(parents=True)
    (evidence / "2026-11-28_MB-01.jsonl").write_bytes(b"other bytes\n")
    (evidence / "2026-11-28_MB-02.jsonl.gz").write_bytes(b"other bytes\n")
    shutil.copy2(spool / "2026-11-28_CF-01.jsonl", evidence / "2026-11-28_CF-01.jsonl")
    r = run_filing(db_copy, spool, archive, "move")
    got = filed(r)
    assert got["2026-11-28_MB-01.jsonl"] == (
        "already_ingested", "moved", str(evidence / "2026-11-28_MB-01.2.jsonl")
    )
    assert got["2026-11-28_MB-02.jsonl.gz"] == (
        "already_ingested", "moved", str(evidence / "2026-11-28_MB-02.2.jsonl.gz")
    )
    assert got["2026-11-28_CF-01.jsonl"] == (
        "already_ingested", "duplicate", str(evidence / "2026-11-28_CF-01.jsonl")
    )
    assert (evidence / "2026-11-28_MB-01.jsonl").read_bytes() == b"other bytes\n"  # untouched
    assert sha(evidence / "2026-11-28_MB-01.2.jsonl") == sha(SAMPLE / "2026-11-28_MB-01.jsonl")
    assert list(spool.iterdir()) == []
    assert sorted(p.name for p in evidence.iterdir()) == sorted(
        [*NAMES, "2026-11-28_MB-01.2.jsonl", "2026-11-28_MB-02.2.jsonl.gz"]
    )
    assert "0 already there" not in " ".join(nightly.summary_lines(r))


@pytest.mark.slow
def test_an_unknown_file_ingested_choice_exits_2(night: Night, bacc_audit: Any) -> None:
    r = bacc_audit(
        "nightly", "--spool", night.spool, "--db", night.db, "--date", "2026-11-28",
        "--config", CONFIG, "--file-ingested", "copy",
    )
    assert r.code == EXIT_INPUT, r
    assert r.err.splitlines()[-1] == (
        "error: --file-ingested must be one of keep, move, link, not 'copy'"
    )


@pytest.mark.slow
def test_a_changed_report_is_a_new_version_beside_the_one_filed(
    night: Night, tmp_path: Path, bacc_audit: Any
) -> None:
    """Issue 15: rerunning nightly after new evidence replaced the shift's PDF someone may
    have signed. Now the first stays as filed; the changed report is version 2 beside it,
    saying on its first page what changed and the first version's SHA-256."""
    db_copy, archive = tmp_path / "copy.duckdb", tmp_path / "archive"
    shutil.copy2(night.db, db_copy)
    shutil.copytree(night.archive, archive)
    grave = archive / "2026-11-28" / "2026-11-28_grave.pdf"
    signed = grave.read_bytes()

    def rerun() -> dict[str, Any]:
        r = bacc_audit("nightly", "--spool", night.spool, "--date", "2026-11-28", "--archive",
                       archive, "--db", db_copy, "--config", CONFIG, "--json")
        assert r.code == EXIT_FINDINGS, r
        return {x["shift"]: x for x in json.loads(r.out)["reports"]}

    # In an archive the database has not filed into, the PDFs there are taken as version 1
    # when they are what the database would file now.
    moved = rerun()
    assert [(moved[s]["status"], moved[s]["version"]) for s in ("swing", "grave")] == [
        ("unchanged", 1), ("unchanged", 1)
    ]
    listed = bacc_audit("findings", "--db", db_copy, "--config", CONFIG, "--shift",
                        "2026-11-28/grave", "--format", "jsonl")
    finding = json.loads(listed.out.splitlines()[0])
    acked = bacc_audit("ack", finding["fingerprint"], "--by", "Compliance Officer",
                       "--disposition", "reviewed on video", "--db", db_copy)
    assert acked.code == 0, acked
    reports = rerun()
    assert (reports["grave"]["status"], reports["grave"]["version"]) == ("new_version", 2)
    assert reports["swing"]["status"] == "unchanged"
    assert grave.read_bytes() == signed  # the filed version, untouched
    v2 = grave.with_name("2026-11-28_grave.v2.pdf")
    assert reports["grave"]["path"] == str(v2)
    assert reports["grave"]["sha256"] == hashlib.sha256(v2.read_bytes()).hexdigest()
    first_page = pdf_text(v2, pages=1)
    assert "Version 2 of this report. Version 1 (2026-11-28_grave.pdf, SHA-256 " in first_page
    assert hashlib.sha256(signed).hexdigest() in first_page.replace(" ", "")
    assert "0 findings added, 0 withdrawn, 1 acknowledged" in first_page
    assert f"acknowledged: {finding['id']} {finding['code']}" in first_page
    again = rerun()  # nothing new: nothing filed
    assert (again["grave"]["status"], again["grave"]["version"]) == ("unchanged", 2)
    assert sorted(p.name for p in grave.parent.iterdir()) == [
        "2026-11-28_grave.pdf", "2026-11-28_grave.v2.pdf", "2026-11-28_swing.pdf",
    ]
    recorded = scalar(db_copy, "SELECT list(version ORDER BY version) FROM report_versions "
                      f"WHERE slug = '2026-11-28_grave' AND path LIKE '{archive.resolve()}/%'")
    assert recorded == [1, 2]


@pytest.mark.slow
def test_a_night_cut_at_a_round_boundary_is_reported_in_its_own_nights_pdf(
    tmp_path: Path,
) -> None:
    """Issue 28: `log.table_unclosed` was judged only once the database held an event after
    the gaming day's end, so the nightly of that day (with only that day's logs) never
    reported it. Eight tables, each file cut after a round_end: `nightly --date D` records D
    closed before its audit, and D's grave shift PDF carries a finding for every table."""
    day = dt.date(2026, 11, 20)
    sim = simulate(tmp_path / "sim", 8, 2, seed=11, day=day)
    spool = tmp_path / "spool"
    spool.mkdir()
    cut_after: dict[str, int] = {}
    for f in sim.files:
        lines = f.read_text().splitlines(keepends=True)
        if '"type":"table_open"' in lines[0]:
            ends = [i for i, line in enumerate(lines) if '"type":"round_end"' in line]
            keep = ends[len(ends) * 3 // 4]  # three quarters through the night, at a round end
            cut_after[json.loads(lines[0])["table"]] = json.loads(lines[keep])["seq"]
            lines = lines[: keep + 1]
        (spool / f.name).write_text("".join(lines))
    assert len(cut_after) == 8
    # Audited without the day closed: the night may still be being delivered, nothing said.
    con = db.connect(tmp_path / "plain.duckdb")
    ingest(con, [spool], runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    assert con.execute(
        "SELECT count(*) FROM current_findings WHERE code = 'log.table_unclosed'"
    ).fetchone() == (0,)
    con.close()
    archive = tmp_path / "archive"
    result = nightly.run_nightly(tmp_path / "audit.duckdb", spool, config.PropertyConfig(),
                                 day=day, archive=archive)
    assert result.day_closed == "closed by this run"
    assert "gaming day 2026-11-20: closed by this run" in nightly.summary_lines(result)
    pdf = archive / "2026-11-20" / "2026-11-20_grave.pdf"
    reader = pypdf.PdfReader(pdf)
    [jsonl] = reader.attachments["findings.jsonl"]
    found = [json.loads(line) for line in jsonl.decode().splitlines()]
    unclosed = {f["table"]: f for f in found if f["code"] == "log.table_unclosed"}
    assert set(unclosed) == set(cut_after)
    for table, f in unclosed.items():
        assert (f["severity"], f["seq"]) == ("major", cut_after[table])
    text = " ".join(p.extract_text() for p in reader.pages)
    assert "log.table_unclosed" in text
    con = duckdb.connect(str(tmp_path / "audit.duckdb"), read_only=True)
    assert con.execute("SELECT gaming_day::VARCHAR, how, run_id FROM closed_days").fetchall() \
        == [("2026-11-20", "nightly", result.run_id)]
    con.close()
