"""`backfill --work-dir` where the folder cannot take the partitions, and a planned file that
is gone by the time its worker reads it (issue 31): one sentence and exit 2, the run's work
folder removed as the docs say, and every planned file counted."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.cli import Run
from helpers.mounts import run_mounted
from helpers.sample import SAMPLE

from auditor import config
from auditor.jobs.backfill import run_backfill
from auditor.store import db

BIN = Path(sys.executable).parent / "bacc-audit"
ADVICE = "choose another --work-dir (docs/scale-out.md: a folder every worker can write)"


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """Three tables' logs of the sample night."""
    folder = tmp_path / "logs"
    folder.mkdir()
    for name in ("2026-11-28_MB-01.jsonl", "2026-11-28_MB-02.jsonl.gz",
                 "2026-11-28_MB-03.jsonl.gz"):
        (folder / name).write_bytes((SAMPLE / name).read_bytes())
    return folder


def test_a_work_dir_that_is_a_file_is_refused_before_any_work(
    bacc_audit: Callable[..., Run], logs: Path, tmp_path: Path
) -> None:
    afile = tmp_path / "scratch"
    afile.write_text("notes\n")
    r = bacc_audit("backfill", logs, "--workers", "1", "--work-dir", afile, "--db",
                   tmp_path / "b.duckdb")
    assert (r.code, r.out) == (2, ""), r
    assert r.err == (f"error: --work-dir {afile}: cannot make the run's folder there (Not a "
                     f"directory); {ADVICE}\n")
    assert afile.read_text() == "notes\n" and not (tmp_path / "b.duckdb").exists()


@pytest.mark.slow
def test_a_read_only_work_dir_is_refused_before_any_work(logs: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    m = run_mounted(scratch, [BIN, "backfill", logs, "--workers", "1", "--work-dir", scratch,
                              "--db", tmp_path / "b.duckdb"], read_only=True)
    assert m.code == 2, m
    assert m.err == (f"error: --work-dir {scratch}: cannot make the run's folder there "
                     f"(Read-only file system); {ADVICE}\n")
    assert m.left == []


@pytest.mark.slow
def test_a_full_work_dir_stops_the_run_and_its_folder_is_removed(
    logs: Path, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch"
    m = run_mounted(scratch, [BIN, "backfill", logs, "--workers", "1", "--work-dir", scratch,
                              "--db", tmp_path / "b.duckdb"], size="256k")
    assert m.code == 2, m  # exit 3 with a traceback, and the folder left behind
    error = m.err.splitlines()[-1]
    assert error == (f"error: --work-dir {scratch}: a worker could not write its partition "
                     f"there (No space left on device); make room there, or {ADVICE}"), m.err
    assert "Traceback" not in m.err
    assert m.left == []  # the run's folder, and its .partial files, removed


@pytest.mark.slow
def test_a_planned_file_gone_before_its_worker_reads_it_is_counted(
    logs: Path, tmp_path: Path
) -> None:
    files = sorted(logs.iterdir())
    gone = files[1]
    kept = tmp_path / "kept.gz"

    def say(line: str) -> None:
        if line.startswith("backfill: 3 files"):  # planned: now it goes away
            gone.rename(kept)

    result, code = run_backfill(tmp_path / "b.duckdb", [logs], config.PropertyConfig(),
                                workers=1, say=say)
    assert kept.exists() and not gone.exists()
    # It said "2 files ... 0 unreadable" and exit 0.
    assert code == 2
    assert sorted((f["path"], f["status"]) for f in result.files) == [
        (str(files[0]), "ingested"), (str(gone), "unreadable"), (str(files[2]), "ingested")]
    [lost] = [f for f in result.files if f["status"] == "unreadable"]
    assert lost["message"] == f"{gone}: no such file or directory"
    con = db.connect(tmp_path / "b.duckdb", read_only=True)
    try:
        (status, exit_code), = con.execute(
            "SELECT status, exit_code FROM runs WHERE command = 'backfill'").fetchall()
        tables = {t for (t,) in con.execute("SELECT DISTINCT table_id FROM events").fetchall()}
    finally:
        con.close()
    assert (status, exit_code) == ("done", 2)
    assert tables == {"MB-01", "MB-03"}
