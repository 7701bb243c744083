"""`bacc-audit signoff` and the signing key at the command line: a sign-off of a filed
version is on the record (its table, its run) and on the next version's first page;
`nightly` and `report` list the filed versions no sign-off names; a PDF that is not a filed
version is refused with a sentence; a signing key that will not open stops `report`,
`nightly` and `doctor` with one sentence and exit 2.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import duckdb
import pytest
from helpers.keys import KeyFiles, make_key, signing_config
from helpers.pdfs import pdf_text

from auditor.errors import EXIT_FINDINGS, EXIT_INPUT
from auditor.report import signing
from auditor.simulate.planted import simulate

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "sample_logs" / "property.toml"
DAY = "2026-11-28"
SIGNER, TITLE, NOTE = "Dana Whitfield", "Compliance Officer", "video of MB-01 reviewed"

pytestmark = pytest.mark.slow  # each test files reports with the nightly job


@dataclass
class Filed:
    dir: Path
    key: KeyFiles
    config: Path
    spool: Path
    db: Path
    archive: Path

    @property
    def v1(self) -> Path:
        return self.archive / DAY / f"{DAY}_grave.pdf"


@pytest.fixture
def filed(tmp_path: Path, bacc_audit: Any) -> Filed:
    """A small night (one table, an hour) filed by nightly, signed with the test's key."""
    key = make_key(tmp_path / "key")
    conf = signing_config(tmp_path / "bacc-audit.toml", key, base=CONFIG)
    simulate(tmp_path / "spool", tables=1, hours=1, seed=7, deviation_rate=0.05,
             day=dt.date(2026, 11, 28))
    (tmp_path / "spool" / "ground_truth.ndjson").unlink()
    f = Filed(tmp_path, key, conf, tmp_path / "spool", tmp_path / "audit.duckdb",
              tmp_path / "archive")
    r = _nightly(bacc_audit, f)
    assert r.code == EXIT_FINDINGS, r
    assert [(x["shift"], x["status"]) for x in json.loads(r.out)["reports"]] == [
        ("day", "skipped"), ("swing", "skipped"), ("grave", "written")
    ]
    return f


def _nightly(bacc_audit: Any, f: Filed, *more: str) -> Any:
    return bacc_audit("nightly", "--spool", f.spool, "--date", DAY, "--archive", f.archive,
                      "--db", f.db, "--config", f.config, "--json", *more)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rows(db: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_a_signoff_is_on_the_record_and_on_the_next_versions_cover(
    filed: Filed, bacc_audit: Any
) -> None:
    sha = _sha(filed.v1)
    r = bacc_audit("signoff", filed.v1, "--by", SIGNER, "--title", TITLE, "--note", NOTE,
                   "--db", filed.db)
    assert r.code == 0, r
    assert r.out.strip() == (
        f"signoff 1: {DAY}_grave version 1 (SHA-256 {sha}) signed off by {SIGNER}, {TITLE}"
    )
    [(slug, version, row_sha, path, signer, title, note, at, run_id)] = _rows(
        filed.db, "SELECT slug, version, sha256, path, signer, title, note, recorded_at, "
        "run_id FROM signoffs"
    )
    assert (slug, version, row_sha, path, signer, title, note) == (
        f"{DAY}_grave", 1, sha, str(filed.v1.resolve()), SIGNER, TITLE, NOTE
    )
    assert abs(at - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=5)
    assert _rows(filed.db, f"SELECT command, status, exit_code FROM runs WHERE id = {run_id}") \
        == [("signoff", "done", 0)]
    listed = json.loads(bacc_audit("signoff", "list", "--json", "--db", filed.db).out)
    assert [(x["slug"], x["version"], x["sha256"], x["by"], x["title"], x["note"])
            for x in listed] == [(f"{DAY}_grave", 1, sha, SIGNER, TITLE, NOTE)]
    text = bacc_audit("signoff", "list", "--db", filed.db).out.splitlines()
    assert text[1:] == [f"    by {SIGNER}, {TITLE} ({NOTE})", "1 sign-off"]
    assert text[0].startswith("signoff 1 ") and text[0].endswith(f"{DAY}_grave v1  {sha}")

    # New evidence: an acknowledgement. The next version lists the sign-off of version 1.
    finding = json.loads(bacc_audit("findings", "--db", filed.db, "--config", filed.config,
                                    "--shift", f"{DAY}/grave", "--format", "jsonl"
                                    ).out.splitlines()[0])
    assert bacc_audit("ack", finding["id"], "--by", SIGNER, "--disposition", "paid",
                      "--db", filed.db).code == 0
    r = _nightly(bacc_audit, filed)
    summary = json.loads(r.out)
    grave = {x["shift"]: x for x in summary["reports"]}["grave"]
    v2 = filed.v1.with_name(f"{DAY}_grave.v2.pdf")
    assert (grave["status"], grave["version"], grave["path"]) == ("new_version", 2, str(v2))
    page = pdf_text(v2, pages=1)
    local = at.astimezone(ZoneInfo("America/New_York"))
    assert "Sign-offs on record of the versions before this one (bacc-audit signoff):" in page
    assert (f"1 {sha[:16]}… {SIGNER} {TITLE} {local:%Y-%m-%d %H:%M:%S %Z} {NOTE}"
            in page), page
    assert signing.signature_status(v2, filed.key.ca_pem).ok
    # Version 1 is signed off; version 2 awaits one, and nightly says so.
    assert [(u["slug"], u["version"], u["sha256"], u["superseded"])
            for u in summary["unsigned_versions"]] == [(f"{DAY}_grave", 2, _sha(v2), False)]
    text_lines = bacc_audit("nightly", "--spool", filed.spool, "--date", DAY, "--archive",
                            filed.archive, "--db", filed.db, "--config", filed.config
                            ).out.splitlines()  # a rerun, for the text summary
    assert any(re.fullmatch(r"  grave +unchanged +v2 .*", x) for x in text_lines), text_lines
    assert f"sign-off: 1 filed version awaits a sign-off: {DAY}_grave v2" in text_lines
    assert f"signed with the certificate of {filed.key.subject}" in text_lines
    # So does report, for the gaming day it renders.
    out = filed.dir / "out.pdf"
    r = bacc_audit("report", "--shift", f"{DAY}/grave", "--out", out, "--db", filed.db,
                   "--config", filed.config, "--json")
    assert r.code == 0, r
    said = json.loads(r.out)
    assert (said["path"], said["signed"]) == (str(out), True)
    assert [(u["slug"], u["version"]) for u in said["unsigned_versions"]] == [
        (f"{DAY}_grave", 2)
    ]
    assert f"sign-off, gaming day {DAY}: 1 filed version awaits a sign-off: {DAY}_grave v2" \
        in r.err
    assert signing.signature_status(out, filed.key.ca_pem).ok


def test_a_pdf_that_is_not_a_filed_version_is_refused(filed: Filed, bacc_audit: Any) -> None:
    out = filed.dir / "copy.pdf"
    assert bacc_audit("report", "--shift", f"{DAY}/grave", "--out", out, "--db", filed.db,
                      "--config", filed.config).code == 0
    changed = filed.dir / "changed.pdf"
    data = bytearray(filed.v1.read_bytes())
    data[500] ^= 0x01
    changed.write_bytes(bytes(data))
    for pdf in (out, changed):
        r = bacc_audit("signoff", pdf, "--by", SIGNER, "--title", TITLE, "--db", filed.db)
        assert r.code == EXIT_INPUT, r
        assert r.err.strip() == (
            f"error: {pdf}: not a version of a report this database filed (no filed version "
            f"has its SHA-256, {_sha(pdf)}); sign off the PDF as it lies in the archive, "
            "unchanged"
        )
    r = bacc_audit("signoff", filed.dir / "nowhere.pdf", "--by", SIGNER, "--title", TITLE,
                   "--db", filed.db)
    assert (r.code, r.err.strip()) == (EXIT_INPUT, f"error: {filed.dir / 'nowhere.pdf'}: "
                                       "no such file")
    r = bacc_audit("signoff", filed.v1, "--by", SIGNER, "--db", filed.db)
    assert (r.code, r.err.strip()) == (
        EXIT_INPUT, "error: give the PDF and who signs it off: bacc-audit signoff REPORT.pdf "
        "--by NAME --title TITLE [--note TEXT] (or bacc-audit signoff list)"
    )
    r = bacc_audit("signoff", filed.v1, "--by", " ", "--title", TITLE, "--db", filed.db)
    assert (r.code, r.err.strip()) == (EXIT_INPUT, "error: say who signs off (--by NAME)")
    assert _rows(filed.db, "SELECT count(*) FROM signoffs") == [(0,)]
    assert _rows(filed.db, "SELECT count(*) FROM runs WHERE command = 'signoff'") == [(0,)]


def test_a_signing_key_that_will_not_open_is_one_sentence_and_exit_2(
    filed: Filed, bacc_audit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = signing_config(filed.dir / "bad.toml", filed.key, base=CONFIG,
                         password_env="BACC_AUDIT_TEST_PW")
    out = filed.dir / "never.pdf"
    monkeypatch.delenv("BACC_AUDIT_TEST_PW", raising=False)
    r = bacc_audit("report", "--shift", f"{DAY}/grave", "--out", out, "--db", filed.db,
                   "--config", bad)
    assert (r.code, r.err.strip().splitlines()[-1]) == (
        EXIT_INPUT, "error: [signing] password_env names BACC_AUDIT_TEST_PW, which is not set "
        "here, so the signing key cannot be opened; set it where the job starts (e.g. its "
        "systemd unit's EnvironmentFile=)"
    )
    assert not out.exists()
    monkeypatch.setenv("BACC_AUDIT_TEST_PW", "not the password")
    wrong = f"error: {filed.key.p12}: the password from environment variable " \
        "BACC_AUDIT_TEST_PW does not open this PKCS#12 file"
    r = bacc_audit("report", "--shift", f"{DAY}/grave", "--out", out, "--db", filed.db,
                   "--config", bad)
    assert (r.code, r.err.strip().splitlines()[-1]) == (EXIT_INPUT, wrong)
    before = sorted(p.name for p in filed.archive.rglob("*.pdf"))
    shutil.rmtree(filed.archive / DAY)  # a night to file, with a key that will not open
    r = bacc_audit("nightly", "--spool", filed.spool, "--date", DAY, "--archive",
                   filed.archive, "--db", filed.db, "--config", bad)
    assert (r.code, r.err.strip().splitlines()[-1]) == (EXIT_INPUT, wrong)
    assert sorted(p.name for p in filed.archive.rglob("*.pdf")) == []
    assert before == [f"{DAY}_grave.pdf"]
    [(status, code, summary)] = _rows(
        filed.db, "SELECT status, exit_code, summary FROM runs WHERE command = 'nightly' "
        "ORDER BY id DESC LIMIT 1")
    assert (status, code, json.loads(summary)["error"]) == ("failed", 2, wrong[7:])
    # doctor says the same, and passes the good key.
    r = bacc_audit("doctor", "--db", filed.db, "--config", bad)
    assert r.code == EXIT_INPUT
    assert f"FAIL signing key: {wrong[7:]}" in r.out.splitlines()
    r = bacc_audit("doctor", "--db", filed.db, "--config", filed.config)
    line = next(x for x in r.out.splitlines() if "signing key" in x)
    assert line.startswith(f"ok   signing key {filed.key.p12}: opens, certificate of "
                           f"{filed.key.subject} valid until ")
    assert line.endswith(f"chains to {filed.key.ca_pem}; a PDF signed with it validates")


def test_signoff_list_refuses_a_signoff_time_no_clock_can_show(
    filed: Filed, bacc_audit: Any
) -> None:
    """`signoff list` was an internal error (exit 3) over a sign-off whose time was edited
    past the year 9999; now exit 2 naming the table, column and row."""
    assert bacc_audit("signoff", filed.v1, "--by", SIGNER, "--title", TITLE,
                      "--db", filed.db).code == 0
    con = duckdb.connect(str(filed.db))
    con.execute("UPDATE signoffs SET recorded_at = TIMESTAMPTZ '10000-01-01 00:00:00+00'")
    con.close()
    r = bacc_audit("signoff", "list", "--db", filed.db)
    assert r.code == EXIT_INPUT, r
    assert "the audit database holds 10000-01-01 00:00:00+00 in signoffs.recorded_at (row 0), " \
           "outside the years 1 to 9999 in UTC, which no clock can show" in r.err, r.err
    assert "Traceback" not in r.err
