"""The versions the nightly job files, as issue 29's user met them: a log of gaming day 11-28
delivered with the 11-29 run adds a critical and a major finding to 11-28, and the run files
11-28's grave shift again as version 2 naming the two and names the day in its summary; a
run that dies before filing it leaves it for the next; an archive of v1 and v2 given to
another database built from the same logs gets v3 naming v2, what changed since read from
v2's own attachments; a rerun on an unchanged database files nothing, signatures or not.
Every PDF here is signed with the test's own key and validated by pyHanko.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pypdf
import pytest
from helpers.keys import KeyFiles, make_key, signing_config
from helpers.nights import continue_streams, seq_tops
from helpers.pdfs import pdf_text

from auditor import config
from auditor.jobs import nightly
from auditor.report import signing
from auditor.simulate.planted import simulate
from auditor.store.findings import short_id

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_logs"
LATE = "2026-11-28_MB-01.jsonl"  # its table's findings: one critical, one major
DAY1, DAY2 = config.parse_date("2026-11-28"), config.parse_date("2026-11-29")

pytestmark = pytest.mark.slow  # every test here runs the nightly job over the sample night


@dataclass
class Late:
    dir: Path
    key: KeyFiles
    config: Path
    spool1: Path  # the sample night but for LATE
    spool2: Path  # a night of 11-29, and LATE, delivered late
    db: Path
    archive: Path
    first: nightly.NightlyResult  # --date 11-28 over spool1
    second: nightly.NightlyResult  # --date 11-29 over spool2
    v1: bytes  # 11-28 grave as the first run filed it

    @property
    def grave(self) -> Path:
        return self.archive / "2026-11-28" / "2026-11-28_grave.pdf"


def _run(db: Path, spool: Path, conf: Path, archive: Path, day: Any) -> nightly.NightlyResult:
    return nightly.run_nightly(db, spool, config.load(conf), day=day, archive=archive)


@pytest.fixture(scope="module")
def late(tmp_path_factory: pytest.TempPathFactory) -> Late:
    base = tmp_path_factory.mktemp("late")
    key = make_key(base / "key")
    conf = signing_config(base / "bacc-audit.toml", key, base=SAMPLE / "property.toml")
    spool1, spool2 = base / "spool1", base / "spool2"
    spool1.mkdir()
    for f in sorted(SAMPLE.glob("*.jsonl*")):
        if f.name != LATE:
            shutil.copy2(f, spool1 / f.name)
    simulate(base / "night2", tables=1, hours=1, seed=3, deviation_rate=0, day=DAY2)
    continue_streams(base / "night2", seq_tops(sorted(SAMPLE.glob("*.jsonl*"))))
    shutil.copytree(base / "night2", spool2, ignore=shutil.ignore_patterns("ground_truth*"))
    shutil.copy2(SAMPLE / LATE, spool2 / LATE)
    db, archive = base / "audit.duckdb", base / "archive"
    first = _run(db, spool1, conf, archive, DAY1)
    v1 = (archive / "2026-11-28" / "2026-11-28_grave.pdf").read_bytes()
    second = _run(db, spool2, conf, archive, DAY2)
    return Late(base, key, conf, spool1, spool2, db, archive, first, second, v1)


def _page1(pdf: Path) -> str:
    return pdf_text(pdf, pages=1)


def _attached_findings(pdf: Path) -> list[dict[str, Any]]:
    data = pypdf.PdfReader(pdf).attachments["findings.jsonl"][0]
    return [json.loads(line) for line in data.splitlines()]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _late_findings(db: Path) -> list[tuple[str, str, str]]:
    """(short id, code, severity) of the findings read from the late log."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT fingerprint, code, severity FROM current_findings "
            f"WHERE source LIKE '%/{LATE}:%' ORDER BY code"
        ).fetchall()
    finally:
        con.close()
    return [(short_id(fp), code, sev) for fp, code, sev in rows]


def test_a_late_log_files_its_own_day_again_naming_the_two_new_findings(late: Late) -> None:
    first = {r.shift: r for r in late.first.reports}
    assert (first["grave"].status, first["grave"].version) == ("written", 1)
    new = _late_findings(late.db)
    assert [(code, sev) for _, code, sev in new] == [
        ("draw.banker_missed", "critical"), ("vig.wrong_amount", "major")
    ]
    summary = late.second.summary()
    assert summary["gaming_day"] == "2026-11-29"
    why = ("2 new findings (1 critical, 1 major) since its reports were filed, from "
           f"{LATE}")
    [again] = summary["refiled"]
    assert {k: again[k] for k in ("gaming_day", "why", "findings_new", "findings_withdrawn",
                                  "sources")} == {
        "gaming_day": "2026-11-28", "why": why,
        "findings_new": {"critical": 1, "major": 1}, "findings_withdrawn": 0,
        "sources": [LATE],
    }
    v2 = late.grave.with_name("2026-11-28_grave.v2.pdf")
    reports = {r["shift"]: r for r in again["reports"]}
    assert (reports["grave"]["status"], reports["grave"]["version"]) == ("new_version", 2)
    assert reports["grave"]["path"] == str(v2)
    assert reports["grave"]["sha256"] == _sha(v2.read_bytes())
    assert (reports["swing"]["status"], reports["day"]["status"]) == ("unchanged", "skipped")
    lines = nightly.summary_lines(late.second)
    assert f"gaming day 2026-11-28 filed again: {why}" in lines
    assert any(re.fullmatch(rf"  grave +new_version v2 +3,097 rounds  {re.escape(str(v2))}", x)
               for x in lines), lines
    # The filed version 1 is untouched; version 2 names it and the two findings.
    assert late.grave.read_bytes() == late.v1
    page = _page1(v2)
    assert "Version 2 of this report. Version 1 (2026-11-28_grave.pdf, SHA-256 " in page
    assert _sha(late.v1) in page.replace(" ", "")
    assert "Changed since version 1: 2 findings added, 0 withdrawn, 0 acknowledged." in page
    for fid, code, _ in new:
        assert f"added: {fid} {code} at MB-01" in page
    assert len(_attached_findings(v2)) == len(_attached_findings(late.grave)) + 2
    for pdf in (late.grave, v2):
        status = signing.signature_status(pdf, late.key.ca_pem)
        assert status.ok, status.problem


def test_a_rerun_on_an_unchanged_database_files_nothing_though_every_pdf_is_signed(
    late: Late,
) -> None:
    before = {p: p.read_bytes() for p in late.archive.rglob("*.pdf")}
    again = _run(late.db, late.spool2, late.config, late.archive, DAY2)
    assert [(r.shift, r.status) for r in again.reports] == [
        ("day", "unchanged"), ("swing", "skipped"), ("grave", "unchanged")
    ]
    assert again.refiled == []
    assert {p: p.read_bytes() for p in late.archive.rglob("*.pdf")} == before
    assert again.signature["signed"] and again.signature["subject"] == late.key.subject
    unsigned = {(u["slug"], u["version"], u["superseded"]) for u in again.unsigned}
    assert unsigned == {
        ("2026-11-28_grave", 1, True), ("2026-11-28_grave", 2, False),
        ("2026-11-28_swing", 1, False), ("2026-11-29_day", 1, False),
        ("2026-11-29_grave", 1, False),
    }


def test_a_run_that_dies_before_filing_the_earlier_day_leaves_it_for_the_next(
    late: Late, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The late findings are recorded, then the run dies: the next run, which records
    nothing new, still files 11-28 again (its findings changed since it was filed). The
    archive was moved after 11-28 was filed (a new mount, say): the database's record of
    that filing names the old folder, and the day is still found filed by it."""
    db, archive = tmp_path / "audit.duckdb", tmp_path / "archive"
    _run(db, late.spool1, late.config, tmp_path / "old-archive", DAY1)
    (tmp_path / "old-archive").rename(archive)

    def dies(*args: Any, **kw: Any) -> list:
        raise RuntimeError("the machine went down here")

    monkeypatch.setattr(nightly, "changed_days", dies)
    with pytest.raises(RuntimeError):
        _run(db, late.spool2, late.config, archive, DAY2)
    monkeypatch.undo()
    assert not (archive / "2026-11-28" / "2026-11-28_grave.v2.pdf").exists()
    after = _run(db, late.spool2, late.config, archive, DAY2)
    assert after.recorded == (0, 0)  # nothing new this run
    [again] = after.refiled
    assert (again.day, again.opened) == (DAY1, {"critical": 1, "major": 1})
    grave = {r.shift: r for r in again.reports}["grave"]
    assert (grave.status, grave.version) == ("new_version", 2)


def test_an_archive_given_to_another_database_gets_v3_naming_v2(
    late: Late, tmp_path: Path, bacc_audit: Any
) -> None:
    """Issue 29: v3 said "Version 2 ... what changed since version 1 is not known". Now the
    versions follow the archive's files: the other database, built from the same logs,
    compares with v2 as its own attachments show it."""
    v2 = late.grave.with_name("2026-11-28_grave.v2.pdf")
    other = tmp_path / "other.duckdb"
    for spool in (late.spool1, late.spool2):
        assert bacc_audit("ingest", spool, "--db", other).code in (0, 1)
    assert bacc_audit("audit", "--db", other, "--config", late.config).code == 1
    same = tmp_path / "same.duckdb"
    shutil.copy2(other, same)  # the same logs, and nothing else
    # An officer of the other database acknowledges one finding of the shift.
    listed = bacc_audit("findings", "--db", other, "--config", late.config, "--shift",
                        "2026-11-28/grave", "--format", "jsonl")
    finding = json.loads(listed.out.splitlines()[0])
    assert bacc_audit("ack", finding["id"], "--by", "A. Officer", "--disposition",
                      "reviewed on video", "--db", other).code == 0
    moved = tmp_path / "archive"
    shutil.copytree(late.archive, moved)
    result = _run(other, late.spool2, late.config, moved, DAY1)
    grave = {r.shift: r for r in result.reports}["grave"]
    v3 = moved / "2026-11-28" / "2026-11-28_grave.v3.pdf"
    assert (grave.status, grave.version, grave.path) == ("new_version", 3, v3)
    page = _page1(v3)
    assert "Version 3 of this report. Version 2 (2026-11-28_grave.v2.pdf, SHA-256 " in page
    assert _sha(v2.read_bytes()) in page.replace(" ", "")
    # Against v2 (not v1, which lacks the late log's two findings): only the acknowledgement.
    assert "Changed since version 2: 0 findings added, 0 withdrawn, 1 acknowledged." in page
    assert f"acknowledged: {finding['id']} {finding['code']}" in page
    assert "not known" not in page
    assert signing.signature_status(v3, late.key.ca_pem).ok

    # The database built from the same logs and nothing else shows what v2 shows: nothing
    # new is filed, and v2 is on its record from now on.
    kept = tmp_path / "kept"
    shutil.copytree(late.archive, kept)
    unchanged = _run(same, late.spool2, late.config, kept, DAY1)
    grave = {r.shift: r for r in unchanged.reports}["grave"]
    assert (grave.status, grave.version) == ("unchanged", 2)
    con = duckdb.connect(str(same), read_only=True)
    try:
        assert con.execute("SELECT version, sha256 FROM report_versions WHERE slug = "
                           "'2026-11-28_grave'").fetchall() == [(2, _sha(v2.read_bytes()))]
    finally:
        con.close()
    # A file somebody left under the next version's name, that says nothing of itself: the
    # version after it says what changed since is not known, and why.
    stray = kept / "2026-11-28" / "2026-11-28_grave.v3.pdf"
    stray.write_bytes(b"%PDF-1.7\n% not a report\n")
    after = _run(same, late.spool2, late.config, kept, DAY1)
    grave = {r.shift: r for r in after.reports}["grave"]
    assert (grave.status, grave.version) == ("new_version", 4)
    assert stray.read_bytes() == b"%PDF-1.7\n% not a report\n"
    page = _page1(kept / "2026-11-28" / "2026-11-28_grave.v4.pdf")
    assert (
        "What changed since version 3 is not known: it carries no list of its findings "
        "(findings.jsonl with their fingerprints) to compare with." in page
    )
