"""What a careless user types into the commands (issue 31): dates at the ends of the
calendar, outputs that are no file, a folder with no database, ids a digit short, names in
the wrong case, a code looked up on its own. Each gets a sentence and exit 2 (or does what
was meant), never "internal error" (exit 3) or a traceback, and leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.cli import Run
from helpers.fuzz import run_bounded
from helpers.mounts import run_mounted
from helpers.sample import CONFIG, SAMPLE, SHIFT, built

from auditor.report import render
from auditor.store import db
from auditor.store.findings import short_id

SHORT = "2026-11-28/swing"  # the sample's shortest report to render: 5 pages (grave 15)

RANGE = "a gaming day must be from 1900-01-01 to 9998-12-31"
BIN = Path(sys.executable).parent / "bacc-audit"
Cli = Callable[..., Run]


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built(tmp_path_factory, tmp_path_factory.mktemp("odd") / "night.duckdb",
                 with_mb01=True)


def without_progress(err: str) -> str:
    """stderr less the report's progress lines, which a loaded machine adds once the render
    has taken 30 s (auditor/cli/progress.py): they are not what these tests check."""
    return re.sub(r"(?m)^report: \d+% .*\n", "", err)


def said(r: Run, code: int, words: str) -> None:
    """Exit `code` with one sentence on stderr saying `words`, and no traceback."""
    assert r.code == code, r
    assert words in r.err, r.err
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err
    if code == 2:
        assert r.err.startswith("error: ") and r.err.count("\n") == 1, r.err


@pytest.mark.parametrize("args", [
    ["findings", "--date", "9999-12-31"],
    ["findings", "--shift", "9999-12-31/grave"],
    ["findings", "--date", "0001-01-01"],
    ["report", "--date", "9999-12-31"],
    ["report", "--shift", "9999-12-31/grave"],
    ["dealers", "--date", "9999-12-31"],
    ["dealers", "--shift", "0001-01-01/day"],
    ["dealers", "--from", "2026-11-28", "--to", "9999-12-31"],
    ["audit", "--rerun", "2026-11-28..9999-12-31"],
])
def test_dates_at_the_ends_of_the_calendar_are_refused_with_the_range(
    bacc_audit: Cli, night: Path, args: list[str]
) -> None:
    said(bacc_audit(*args, "--db", night, "--config", CONFIG), 2, RANGE)


def test_the_last_and_first_days_in_range_are_answered(bacc_audit: Cli, night: Path) -> None:
    r = bacc_audit("findings", "--date", "9998-12-31", "--db", night, "--format", "jsonl")
    assert (r.code, r.out) == (0, "")
    r = bacc_audit("dealers", "--date", "1900-01-01", "--db", night, "--format", "jsonl")
    assert (r.code, r.out) == (0, "")
    said(bacc_audit("report", "--date", "9998-12-31", "--db", night), 2,
         "no rounds in the gaming day 9998-12-31")


@pytest.mark.slow
def test_a_report_that_cannot_go_where_asked_says_so_and_leaves_nothing(
    bacc_audit: Cli, night: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = ["report", "--shift", SHORT, "--db", night, "--config", CONFIG]
    real_render = render.render_pdf

    def no_render(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("rendered for a place that takes no report")

    # Said before the render (a large day's takes minutes), not after it.
    monkeypatch.setattr(render, "render_pdf", no_render)
    # /proc takes no new file: a traceback before.
    said(bacc_audit(*base, "--out", "/proc/x.pdf"), 2,
         "/proc/x.pdf: cannot write the report there (No such file or directory)")
    sock_path = tmp_path / "s.pdf"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock_path))
        said(bacc_audit(*base, "--out", sock_path), 2, f"{sock_path}: not a file")
        assert sock_path.is_socket()
    monkeypatch.setattr(render, "render_pdf", real_render)
    # A folder: the report goes into it under its own name (it left .sim.partial behind).
    folder = tmp_path / "sim"
    folder.mkdir()
    r = bacc_audit(*base, "--out", folder)
    assert (r.code, r.out.strip()) == (0, str(folder / "2026-11-28_swing.pdf")), r
    assert sorted(p.name for p in folder.iterdir()) == ["2026-11-28_swing.pdf"]
    assert (folder / "2026-11-28_swing.pdf").read_bytes()[:5] == b"%PDF-"
    assert not list(tmp_path.glob("**/*.partial"))


@pytest.mark.slow
def test_a_report_to_a_device_or_a_pipe_is_written_through_it(
    night: Path, tmp_path: Path
) -> None:
    """Renamed over, /dev/full (as root) became a file holding a PDF; /dev/stdout the same."""
    base = [str(BIN), "report", "--shift", SHORT, "--db", str(night), "--config", str(CONFIG)]
    full = subprocess.run([*base, "--out", "/dev/full"], capture_output=True, text=True,
                          timeout=300)
    assert full.returncode == 2, full.stderr
    assert without_progress(full.stderr) == (
        "error: /dev/full: cannot write the report there (No space left on device); choose "
        "another --out, in a folder this user may write to\n")
    assert Path("/dev/full").is_char_device()
    piped = tmp_path / "piped.pdf"
    with piped.open("wb") as fh:
        done = subprocess.run([*base, "--out", "/dev/stdout"], stdout=fh,
                              stderr=subprocess.PIPE, timeout=300)
    assert done.returncode == 0, done.stderr
    data = piped.read_bytes()
    assert data[:5] == b"%PDF-" and data.rstrip().endswith(b"%%EOF")  # no path after it
    assert Path("/dev/stdout").is_symlink()


@pytest.mark.slow
def test_a_report_on_a_full_disk_leaves_no_partial_file(night: Path, tmp_path: Path) -> None:
    folder = tmp_path / "small"
    m = run_mounted(folder, [BIN, "report", "--shift", SHORT, "--db", night, "--config",
                             CONFIG, "--out", folder / "r.pdf"], size="32k")  # the PDF 56k
    assert m.code == 2, m
    assert without_progress(m.err) == (
        f"error: {folder / 'r.pdf'}: cannot write the report there (No space left on device); "
        "choose another --out, in a folder this user may write to\n")
    assert m.left == []  # no .r.pdf.partial


def test_audit_where_there_is_no_database_creates_none(bacc_audit: Cli, tmp_path: Path) -> None:
    for args in (["audit"], ["ack", "F000000000000", "--by", "x", "--disposition", "y"],
                 ["verify"], ["verify", "--fast"]):  # `verify` once said an empty one held
        said(bacc_audit(*args), 2, "bacc-audit.duckdb: no audit database here yet; run "
             "`bacc-audit ingest` first (or name another with --db / BACC_AUDIT_DB)")
        assert not (tmp_path / "bacc-audit.duckdb").exists()


@pytest.mark.slow
def test_an_id_a_digit_short_gets_the_closest(bacc_audit: Cli, night: Path) -> None:
    rows = [json.loads(x) for x in bacc_audit(
        "findings", "--db", night, "--format", "jsonl", "--code", "draw.banker_missed").out
        .splitlines()]
    fid = rows[0]["id"]
    assert fid == short_id(rows[0]["fingerprint"])
    for typed in (fid[:-1], fid + "0", fid[1:], fid.lower()[:-1]):
        r = bacc_audit("ack", typed, "--by", "j.rivera", "--disposition", "video", "--db", night)
        said(r, 2, f"did you mean {fid}?")


@pytest.mark.slow
def test_a_pit_or_table_in_the_wrong_case_gets_the_right_one(
    bacc_audit: Cli, night: Path
) -> None:
    said(bacc_audit("findings", "--pit", "p1", "--db", night), 2,
         "--pit p1: no such pit in this database; did you mean P1? (it holds P1, P2, P3)")
    said(bacc_audit("report", "--shift", SHIFT, "--pit", "P9", "--db", night), 2,
         "--pit P9: no such pit in this database (it holds P1, P2, P3)")
    said(bacc_audit("report", "--shift", SHIFT, "--table", "mb-01", "--db", night), 2,
         "--table mb-01: no such table in this database; did you mean MB-01?")
    r = bacc_audit("findings", "--pit", "P1", "--db", night, "--format", "jsonl")
    assert r.code == 0 and {json.loads(x)["pit"] for x in r.out.splitlines()} == {"P1"}


def test_codes_looks_one_code_up(bacc_audit: Cli) -> None:
    r = bacc_audit("codes", "draw.banker_missed")
    assert r.code == 0, r
    assert r.out.splitlines()[0] == ("draw.banker_missed  (critical)  Banker hand did not draw "
                                     "a third card it had to draw")
    assert "nj-mini_baccarat: N.J.A.C. 13:69F-7.7" in r.out
    assert "vig." not in r.out
    r = bacc_audit("codes", "--json", "VIG.*")
    assert sorted(c["code"] for c in json.loads(r.out)) == [
        "vig.missing", "vig.not_allowed", "vig.wrong_amount"]
    said(bacc_audit("codes", "draw.banker_miss"), 2,
         "draw.banker_miss: no such finding code; did you mean draw.banker_missed?")


def test_dealers_shows_above_the_limit_apart_from_flagged(bacc_audit: Cli, night: Path) -> None:
    r = bacc_audit("dealers", "--date", "2026-11-28", "--db", night, "--config", CONFIG)
    assert r.code == 0, r
    header = next(x for x in r.out.splitlines() if "dealer" in x and "rounds" in x)
    assert "above limit" in header and "flagged" in header
    records = [json.loads(x) for x in bacc_audit(
        "dealers", "--date", "2026-11-28", "--db", night, "--config", CONFIG, "--format",
        "jsonl").out.splitlines()]
    above = [d for d in records if d["above_limit"] and not d["flagged"]]
    assert above, "the sample night has a dealer above the limit with few rounds"
    for d in above:
        line = next(x for x in r.out.splitlines() if f" {d['dealer']} " in x)
        assert " above " in line and "FLAGGED" not in line
    assert (f"{len(above)} dealer{'s' if len(above) > 1 else ''} above the limit but not "
            "flagged: too few rounds") in r.out.replace("\n", " ")


@pytest.mark.slow
def test_a_bulk_writer_beside_watch_is_told_how_to_work_with_it(
    night: Path, tmp_path: Path
) -> None:
    """watch never finishes: "try again when it has finished" was advice to wait forever."""
    spool = tmp_path / "spool"
    spool.mkdir()
    work = tmp_path / "live.duckdb"
    work.write_bytes(night.read_bytes())
    watch = subprocess.Popen([BIN, "watch", "--spool", spool, "--db", work, "--poll", "0.1"],
                             stderr=subprocess.PIPE, text=True)
    try:
        assert watch.stderr is not None
        while "following" not in (line := watch.stderr.readline()):
            assert line, "watch ended before it followed the spool"
        for args in (["ingest", spool], ["audit"], ["nightly", "--spool", spool]):
            r = subprocess.run([BIN, *map(str, args), "--db", work], capture_output=True,
                               text=True, timeout=120)
            assert r.returncode == 4, r
            assert r.stderr == (
                f"error: {work}: database busy: bacc-audit watch (PID {watch.pid}) has it open "
                "for writing; watch runs until it is stopped, and ingests and audits what "
                "arrives in its spool itself: put logs into its spool rather than ingesting "
                "them, and have it file the shift PDFs (`watch --file-reports`) or make one "
                "with `bacc-audit report` (served by watch); or stop watch (SIGTERM), run "
                "this, and start it again, which goes on where it stopped (docs/live.md)\n"
            ), r.stderr
    finally:
        watch.terminate()
        watch.communicate(timeout=60)
    assert watch.returncode == 0


@pytest.mark.slow
def test_no_internal_error_ends_a_command_given_odd_paths(
    bacc_audit: Cli, night: Path, tmp_path: Path
) -> None:
    """Paths that are folders, devices, missing or unreadable, wherever a command takes one."""
    folder = tmp_path / "a folder"
    folder.mkdir()
    cases: list[tuple[list[str | Path], str]] = [
        (["findings", "--db", folder], "is a folder, not an audit database"),
        (["findings", "--db", "/dev/null"], "not an audit database"),
        (["findings", "--db", night, "--config", folder], "is a folder; --config takes"),
        (["findings", "--db", night, "--config", "/dev/null"], ""),
        (["report", "--shift", SHIFT, "--db", night, "--out", tmp_path / "no" / "x.txt"],
         "the report is PDF or HTML"),
        (["ingest", tmp_path / "missing.jsonl", "--db", tmp_path / "new.duckdb"],
         "no such file or directory"),
    ]
    for args, words in cases:
        r = bacc_audit(*args)
        assert r.code in (0, 1, 2), (args, r)
        assert "Traceback" not in r.err and "internal error" not in r.err, (args, r.err)
        assert words in r.err, (args, r.err)
    assert os.path.exists("/dev/null") and not Path("/dev/null").is_file()


@pytest.mark.parametrize("args,words", [
    (["findings", "--db", "/"], "--db /: names a folder, not the audit database file"),
    (["findings", "--db", "."], "--db .: names a folder, not the audit database file"),
    (["findings", "--db", "pipe.duckdb"], "pipe.duckdb: not a file (a named pipe, a socket or a "
     "device), so not an audit database"),
    (["findings", "--config", "pipe.toml"], "pipe.toml: not a file (a named pipe, a socket or a "
     "device); --config takes the config file"),
    (["simulate", "--hours", "1", "--tables", "10000", "--out", "sim"],
     "--tables 10,000: at most 9,999 tables a simulated night"),
    (["backfill", "x.jsonl", "--workers", "100000"],
     "--workers 100,000: a local cluster of more than 4 worker processes a core only slows it"),
    (["odds", "--jurisdiction", "../../etc", "--game", "x"],
     "there is no rule pack for ../../etc x"),
    (["odds", "--jurisdiction", "a" * 300, "--game", "x"], "there is no rule pack for aaa"),
    (["ingest", "pipe.toml", "--db", "n" * 300 + ".duckdb"],
     "cannot read the audit database (File name too long)"),
    (["nightly", "--spool", ".", "--db", "n" * 300 + ".duckdb"],
     "cannot read the audit database (File name too long)"),
])
def test_what_the_fuzz_test_found_is_one_sentence(
    bacc_audit: Cli, tmp_path: Path, args: list[str], words: str
) -> None:
    """Found by tests/cli/test_fuzz_commands.py: a pipe as the database or the config (an
    open that waited for a writer), a folder as --db, a simulated night or a local cluster
    too big to finish, a pack name that is a path or too long for the system."""
    os.mkfifo(tmp_path / "pipe.duckdb")
    os.mkfifo(tmp_path / "pipe.toml")
    r = run_bounded(bacc_audit, args, seconds=30)
    assert r.code == 2, (args, r)
    said(Run(r.code, r.out, r.err), 2, words)
    assert not (tmp_path / "sim").exists()


def test_doctor_and_ingest_name_a_path_too_long(bacc_audit: Cli) -> None:
    """Found by the fuzz test at another size: `doctor --db` and `ingest` given a name longer
    than the system takes ended in an internal error."""
    long = "n" * 300
    r = bacc_audit("doctor", "--db", f"{long}.duckdb")
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err
    assert f"FAIL {long}.duckdb: cannot be opened (File name too long)" in r.out + r.err
    r = bacc_audit("ingest", f"{long}.jsonl", "--db", "new.duckdb")
    assert r.code == 2, r
    assert f"error: {long}.jsonl: cannot read (File name too long)" in r.err, r.err


def test_verify_against_a_path_too_long_or_missing_says_so(bacc_audit: Cli) -> None:
    """Found by bench/odd_input.py at --examples 40: `verify --against` a name longer than the
    system takes was an internal error."""
    long = "n" * 300
    for name, why in ((f"{long}.pdf", "File name too long"),
                      ("gone.pdf", "No such file or directory")):
        r = bacc_audit("verify", "--against", name, "--db", "a.duckdb")
        assert r.code == 2, r
        assert r.err == (f"error: {name}: cannot be read ({why}); name a filed report PDF or "
                         "the archive folder\n"), r.err


def test_the_environments_thread_count_is_set_or_refused(
    tmp_path: Path, bacc_audit: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BACC_AUDIT_THREADS caps DuckDB's threads in every command (a shared machine); what is
    not a whole number of threads is one sentence and exit 2, before any work."""
    path = tmp_path / "audit.duckdb"
    for bad in ("0", "two", "-1", "2000"):
        monkeypatch.setenv("BACC_AUDIT_THREADS", bad)
        r = bacc_audit("ingest", str(SAMPLE), "--db", path)
        assert r.code == 2, r
        assert f"BACC_AUDIT_THREADS={bad}: not a number of threads" in r.err, r.err
    monkeypatch.setenv("BACC_AUDIT_THREADS", "3")
    con = db.connect(path)
    try:
        assert db.single(con, "SELECT current_setting('threads')")[0] == 3
    finally:
        con.close()
