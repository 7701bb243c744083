"""Every kind of entry a spool can hold is accounted for (issue 31): a log is ingested, a
link to a folder is followed once, and anything named like a log that is no file to read (a
link to nothing, a link loop, a named pipe, a socket) or a folder that cannot be listed is
said in a sentence and makes the run's exit 2, while the good files still load. A named
pipe never makes ingest wait for a writer that will not come."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import Run
from helpers.sample import CONFIG, MB01

from auditor import config
from auditor.errors import UserError
from auditor.ingest import paths
from auditor.ingest.run import ingest
from auditor.jobs.watch import Watch, WatchOptions
from auditor.store import db, runs

BIN = Path(sys.executable).parent / "bacc-audit"
MB01_EVENTS = 7569  # sample_logs/2026-11-28_MB-01.jsonl: one event a line
PIPE = "a named pipe (FIFO), not a log file: ingest reads a log twice, to hash it and to load it"


@pytest.fixture
def spool(tmp_path: Path) -> Iterator[Path]:
    """MB-01's log, a folder of another log reached through a link, and beside them a link to
    nothing, a link loop, a named pipe and a socket, all named *.jsonl; a link back up."""
    s = tmp_path / "spool"
    s.mkdir()
    shutil.copy(MB01, s / MB01.name)
    other = tmp_path / "elsewhere"
    other.mkdir()
    first = b"".join(MB01.read_bytes().splitlines(True)[:40])
    (other / "short.jsonl").write_bytes(first.replace(b'"table":"MB-01"', b'"table":"MB-09"'))
    (s / "linked").symlink_to(other)
    (s / "back").symlink_to(s)  # a loop of folders
    (s / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    (s / "loop.jsonl").symlink_to(s / "loop.jsonl")
    os.mkfifo(s / "pipe.jsonl")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(s / "sock.jsonl"))
        yield s


def expected_problems(s: Path) -> list[str]:
    return [
        f"{s / 'back'}: a link back to a folder already read; not read twice",
        f"{s / 'gone.jsonl'}: a symbolic link to {s.parent / 'nowhere.jsonl'}, which does not "
        "exist; nothing to ingest",
        f"{s / 'loop.jsonl'}: a loop of symbolic links; nothing to ingest",
        f"{s / 'pipe.jsonl'}: {PIPE}; write what comes through the pipe to a file, and ingest "
        "that",
        f"{s / 'sock.jsonl'}: a socket, not a log file; nothing to ingest",
    ]


def test_ingest_says_every_entry_it_cannot_read_and_loads_the_rest(
    bacc_audit: Callable[..., Run], spool: Path, tmp_path: Path
) -> None:
    r = bacc_audit("ingest", spool, "--db", tmp_path / "a.duckdb")
    assert r.code == 2, r  # before: exit 0, the four entries passed over without a word
    errors = [x.removeprefix("error: ") for x in r.err.splitlines()]
    assert sorted(errors) == expected_problems(spool)
    assert "2 files: 2 ingested" in r.out and f"{MB01_EVENTS + 40:,} events loaded" in r.out
    con = db.connect(tmp_path / "a.duckdb", read_only=True)
    ingested = sorted(p for (p,) in con.execute("SELECT path FROM sources").fetchall())
    summary = con.execute("SELECT summary FROM runs WHERE command = 'ingest'").fetchall()
    con.close()
    assert ingested == sorted([str(spool / MB01.name), str(tmp_path / "elsewhere" /
                                                           "short.jsonl")])
    assert sorted(json.loads(summary[0][0])["errors"]) == expected_problems(spool)


@pytest.mark.slow
def test_a_named_pipe_given_by_name_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "live.jsonl"
    os.mkfifo(fifo)
    r = subprocess.run([BIN, "ingest", fifo, "--db", tmp_path / "a.duckdb"],
                       capture_output=True, text=True, timeout=60)  # it waited forever
    assert r.returncode == 2, r
    assert f"error: {fifo}: {PIPE}" in r.stderr


def test_a_file_that_becomes_a_pipe_after_it_was_listed_is_unreadable_not_waited_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hostile user swaps a delivered log for a pipe between the listing and the read."""
    fifo = tmp_path / "swapped.jsonl"
    os.mkfifo(fifo)
    monkeypatch.setattr(paths, "not_a_log", lambda path: None)  # the listing saw a file
    con = db.connect(tmp_path / "a.duckdb")
    try:
        result = ingest(con, [fifo], runs.start(con, "ingest", {}))
    finally:
        con.close()
    [f] = result.files
    assert (f.status, f.message) == (
        "unreadable", f"{fifo}: cannot read (a named pipe (FIFO), not a log file)")
    assert result.exit_code() == 2


@pytest.mark.slow
def test_nightly_names_them_as_problems(
    bacc_audit: Callable[..., Run], spool: Path, tmp_path: Path
) -> None:
    r = bacc_audit("nightly", "--spool", spool, "--db", tmp_path / "n.duckdb", "--archive",
                   tmp_path / "archive", "--config", CONFIG, "--date", "2026-11-28")
    assert r.code == 2, r
    said = [x.removeprefix("problem: ") for x in r.out.splitlines() if x.startswith("problem")]
    assert sorted(said) == expected_problems(spool), r.out


@pytest.mark.slow
def test_watch_says_each_once(spool: Path, tmp_path: Path) -> None:
    told: list[str] = []
    con = db.connect(tmp_path / "w.duckdb")
    try:
        w = Watch(con, spool, config.load(CONFIG), runs.start(con, "watch", {}),
                  WatchOptions(rescan=0), say=told.append)
        for _ in range(3):
            w.step()
        assert sorted(x for x in told if not x.startswith("new finding")) == \
            expected_problems(spool)
        assert sorted(w.stats.problems) == expected_problems(spool)
        assert con.execute("SELECT count(*) FROM events").fetchall()[0][0] == MB01_EVENTS + 40
    finally:
        con.close()


@pytest.mark.slow
def test_a_folder_that_cannot_be_listed_is_said(tmp_path: Path) -> None:
    """Run as another user where the tests run as root, whom permissions do not stop."""
    top = Path(tempfile.mkdtemp(prefix="bacc-spool-", dir="/tmp"))
    try:
        os.chmod(top, 0o777)
        s = top / "spool"
        s.mkdir(mode=0o755)
        shutil.copy(MB01, s / MB01.name)
        os.chmod(s / MB01.name, 0o644)
        locked = s / "locked"
        locked.mkdir()
        (locked / "hidden.jsonl").write_bytes(MB01.read_bytes()[:2000])
        os.chmod(locked, 0o000)
        args = [str(BIN), "ingest", str(s), "--db", str(top / "a.duckdb")]
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("running as root, and no setpriv(1) to run as another user")
            as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            probe = subprocess.run([*as_nobody, str(BIN), "--help"], capture_output=True,
                                   text=True, timeout=120, cwd=top)
            if probe.returncode != 0:  # a checkout in a private folder (mktemp -d: 0700)
                pytest.skip(f"another user cannot run {BIN} here: {probe.stderr.strip()[:200]}")
            args = [*as_nobody, *args]
        r = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=top)
        assert r.returncode == 2, r
        assert (f"error: {locked}: cannot list the folder (Permission denied); the logs in it "
                "are not read") in r.stderr
        assert f"{MB01_EVENTS:,} events loaded" in r.stdout
    finally:
        os.chmod(top / "spool" / "locked", 0o700)
        shutil.rmtree(top)


def test_a_folder_removed_while_the_spool_is_walked_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by bench/odd_input.py (`nightly --spool /` while another process removed a
    folder of logs): the folder listed, then gone before it was read, was an internal error."""
    shutil.copy(MB01, tmp_path / MB01.name)
    gone = tmp_path / "removed meanwhile"
    real_walk = os.walk

    def walk(top: str | Path, **kw: Any) -> Iterator[tuple[str, list[str], list[str]]]:
        yield from real_walk(top, **kw)
        yield str(gone), [], ["2026-11-28_MB-09.jsonl"]

    monkeypatch.setattr(paths.os, "walk", walk)
    logs, errors = paths.logs_in(tmp_path)
    assert logs == [tmp_path / MB01.name]
    assert errors == [f"{gone}: cannot list the folder (No such file or directory); the logs "
                      "in it are not read"]


def test_a_folder_of_more_folders_than_a_spool_holds_is_refused_not_walked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bacc_audit: Callable[..., Run]
) -> None:
    """Issue 31: `ingest /` read the whole machine (the fuzz bench stopped it at 60 s). Past
    MAX_FOLDERS folders the walk stops: one sentence, exit 2, nothing loaded."""
    monkeypatch.setattr(paths, "MAX_FOLDERS", 5)
    for i in range(6):
        (tmp_path / "logs" / f"day-{i}").mkdir(parents=True)
    shutil.copy(MB01, tmp_path / "logs" / "day-0" / MB01.name)
    with pytest.raises(UserError) as e:
        paths.logs_in(tmp_path / "logs")
    assert str(e.value) == (f"{tmp_path / 'logs'}: more than 5 folders under it, not read; "
                            "name the folder (or the files) that hold the logs")
    assert paths.logs_in(tmp_path / "logs" / "day-0") == ([tmp_path / "logs" / "day-0" /
                                                           MB01.name], [])
    # Through the command (bench/odd_input.py walks `/` at the real bound): exit 2, a sentence.
    dbp = tmp_path / "a.duckdb"
    r = bacc_audit("ingest", tmp_path / "logs", "--db", dbp)
    assert r.code == 2, r
    assert r.err == (f"error: {tmp_path / 'logs'}: more than 5 folders under it, not read; "
                     "name the folder (or the files) that hold the logs\n")
    con = db.connect(dbp, read_only=True)
    try:  # the refused run is on record, and nothing was loaded
        assert con.execute("SELECT count(*) FROM events").fetchall() == [(0,)]
        assert con.execute("SELECT command, exit_code FROM runs").fetchall() == [("ingest", 2)]
    finally:
        con.close()
