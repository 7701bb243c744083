"""The reports pages (`/reports`, `/reports/SLUG/vN`): the filed reports and their versions
(file, SHA-256, what changed, who signed), a filed PDF served as the archive holds it, the
sign-off from a version's page with the record `bacc-audit signoff` writes, and a report
rendered on demand byte for byte what `bacc-audit report` writes."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.desk import ORIGIN, csrf, desk_client, file_grave, run_args, words
from helpers.sample import CONFIG

from auditor.store import signoffs

ACKED = "Fc95f8bf836d2"  # draw.banker_missed at MB-01, acknowledged between the versions


@pytest.fixture(scope="module")
def filed(tmp_path_factory: pytest.TempPathFactory, sample_full: Path) -> tuple[Path, Path]:
    """The sample night with its grave shift filed twice: version 1, then (a finding
    acknowledged since) version 2."""
    where = tmp_path_factory.mktemp("filed")
    path, archive = where / "audit.duckdb", where / "archive"
    shutil.copy2(sample_full, path)
    file_grave(path, archive)
    file_grave(path, archive, ack=ACKED)
    return path, archive


@pytest.fixture
def filed_copy(filed: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of `filed` (database and archive, the paths on record kept)."""
    path, archive = filed
    dst = tmp_path / "audit.duckdb"
    shutil.copy2(path, dst)
    return dst, archive


def test_no_report_filed_yet_and_bad_names(night_copy: Path) -> None:
    with desk_client(night_copy) as c:
        page = c.get("/reports")
        assert page.status_code == 200 and "No report was filed from this database yet" in \
            page.text
        assert c.get("/reports/2026-11-28_grave/v1").status_code == 404
        assert c.get("/reports/..%2Fetc/v1").status_code == 404
        assert c.get("/reports/2026-11-28_grave/vx/pdf").status_code == 404
        assert c.get("/reports/render").status_code == 400
        nothing = c.get("/reports/render", params={"date": "2026-11-20"})
        assert nothing.status_code == 400 and "no rounds in the gaming day 2026-11-20" in \
            nothing.text


@pytest.mark.slow
def test_the_filed_versions_with_their_changes_and_files(filed_copy: tuple[Path, Path]) -> None:
    path, archive = filed_copy
    v1 = archive / "2026-11-28" / "2026-11-28_grave.pdf"
    v2 = archive / "2026-11-28" / "2026-11-28_grave.v2.pdf"
    sha1, sha2 = (hashlib.sha256(p.read_bytes()).hexdigest() for p in (v1, v2))
    with desk_client(path) as c:
        text = words(c.get("/reports").text)
        assert "2 versions await a sign-off" in text
        assert (f"2026-11-28_grave v1 (superseded) 2026-11-28_grave.pdf {sha1[:16]}…") in text
        assert (f"2026-11-28_grave v2 2026-11-28_grave.v2.pdf {sha2[:16]}…") in text
        assert "0 added, 0 withdrawn, 1 acknowledged not yet" in text
        page = c.get("/reports/2026-11-28_grave/v2")
        assert page.status_code == 200
        text = words(page.text)
        assert f"SHA-256 {sha2}" in text and "In the archive as filed" in text
        assert f"acknowledged {ACKED} draw.banker_missed MB-01" in text
        assert "Findings 21" in text and "the latest version" in text
        pdf = c.get("/reports/2026-11-28_grave/v2/pdf")
        assert pdf.status_code == 200 and pdf.headers["content-type"] == "application/pdf"
        assert pdf.content == v2.read_bytes()
        # A file changed in the archive is no longer that version: not served, not signable.
        v1.write_bytes(v1.read_bytes() + b"\n")
        try:
            gone = c.get("/reports/2026-11-28_grave/v1/pdf")
            assert gone.status_code == 409 and "changed since it was filed" in gone.text
            page = c.get("/reports/2026-11-28_grave/v1")
            assert "changed since it was filed" in page.text and "Sign off version" not in \
                page.text
        finally:
            v1.write_bytes(v1.read_bytes()[:-1])


@pytest.mark.slow
def test_a_sign_off_from_the_page_is_the_signoff_record(
    filed_copy: tuple[Path, Path], bacc_audit: Any
) -> None:
    path, archive = filed_copy
    v2 = archive / "2026-11-28" / "2026-11-28_grave.v2.pdf"
    sha2 = hashlib.sha256(v2.read_bytes()).hexdigest()
    form = {"title": "Compliance Officer", "note": "reviewed with surveillance"}
    with desk_client(path, login="v.watcher") as c:
        token = csrf(c, "/reports/2026-11-28_grave/v2")
        r = c.post("/reports/2026-11-28_grave/v2/signoff", headers=ORIGIN,
                   data={**form, "csrf": token})
        assert r.status_code == 403
    with desk_client(path, login="j.rivera") as c:
        token = csrf(c, "/reports/2026-11-28_grave/v2")
        assert c.post("/reports/2026-11-28_grave/v2/signoff", data={**form, "csrf": token},
                      headers={"Origin": "http://evil.example"}).status_code == 403
        untitled = c.post("/reports/2026-11-28_grave/v2/signoff", headers=ORIGIN,
                          data={"csrf": token, "title": " "})
        assert untitled.status_code == 400
        assert "say in what capacity (--title TITLE" in untitled.text
        r = c.post("/reports/2026-11-28_grave/v2/signoff", headers=ORIGIN,
                   data={**form, "csrf": token})
        assert r.status_code == 200
        assert (f"signoff 1: 2026-11-28_grave version 2 (SHA-256 {sha2}) signed off by "
                "j.rivera, Compliance Officer") in words(r.text)
        text = words(c.get("/reports").text)
        assert "1 version awaits a sign-off" in text
        assert "j.rivera, Compliance Officer" in text
    con = duckdb.connect(str(path), read_only=True)
    [s] = signoffs.list_signoffs(con)
    con.close()
    assert (s.slug, s.version, s.sha256, s.signer, s.note) == (
        "2026-11-28_grave", 2, sha2, "j.rivera", "reviewed with surveillance")
    [args] = [a for a in run_args(path, "signoff") if a.get("via") == "board"]
    assert (args["role"], args["login"], args["version"]) == ("officer", "password", 2)
    listed = bacc_audit("signoff", "list", "--db", str(path))
    assert listed.code == 0 and sha2 in listed.out and "by j.rivera, Compliance Officer" in \
        listed.out


@pytest.mark.slow
def test_a_report_rendered_on_the_board_is_the_report_commands_bytes(
    night_copy: Path, tmp_path: Path, bacc_audit: Any
) -> None:
    out = tmp_path / "grave.pdf"
    r = bacc_audit("report", "--shift", "2026-11-28/grave", "--db", str(night_copy),
                   "--config", str(CONFIG), "--out", str(out))
    assert r.code == 0, r.err
    with desk_client(night_copy) as c:
        page = c.get("/reports/render", params={"date": "2026-11-28", "shift_name": "grave"})
        assert page.status_code == 200 and page.headers["content-type"] == "application/pdf"
        assert page.headers["content-disposition"] == 'inline; filename="2026-11-28_grave.pdf"'
    assert page.content == out.read_bytes()


@pytest.mark.slow
def test_the_archives_versions_are_listed_though_another_database_filed_them(
    filed: tuple[Path, Path], night_copy: Path, tmp_path: Path
) -> None:
    """A database that filed nothing (a new one, or the board of another machine) given the
    archive lists its versions as the nightly job numbers them, each with the SHA-256 of the
    file and what changed as the PDFs themselves say; it serves them and does not sign them
    off. Only the archive's own files are read: a link out of it, a file of another day's
    name, a folder that is not a gaming day are not listed."""
    _, filed_archive = filed
    archive = tmp_path / "archive"
    shutil.copytree(filed_archive, archive, symlinks=True)
    day = archive / "2026-11-28"
    outside = tmp_path / "outside.pdf"
    outside.write_bytes(b"%PDF-1.4 not the archive's\n")
    (day / "2026-11-28_swing.pdf").symlink_to(outside)
    shutil.copy2(day / "2026-11-28_grave.pdf", day / "2026-11-27_grave.pdf")
    (archive / "notes").mkdir()
    shutil.copy2(day / "2026-11-28_grave.pdf", archive / "notes" / "2026-11-28_day.pdf")
    v1, v2 = day / "2026-11-28_grave.pdf", day / "2026-11-28_grave.v2.pdf"
    sha1, sha2 = (hashlib.sha256(p.read_bytes()).hexdigest() for p in (v1, v2))
    with desk_client(night_copy, archive=archive) as c:
        text = words(c.get("/reports").text)
        assert f"every other version the archive ( {archive} ) holds" in text
        assert text.count("in the archive, not filed from this database") == 2
        assert f"2026-11-28_grave v1 (superseded) 2026-11-28_grave.pdf {sha1[:16]}…" in text
        assert f"2026-11-28_grave v2 2026-11-28_grave.v2.pdf {sha2[:16]}…" in text
        assert "0 added, 0 withdrawn, 1 acknowledged" in text
        for name in ("2026-11-28_swing", "2026-11-27_grave", "2026-11-28_day"):
            assert name not in text
        page = c.get("/reports/2026-11-28_grave/v2")
        text = words(page.text)
        assert f"SHA-256 {sha2}" in text and "Findings 21" in text
        assert "no run of this database filed it" in text
        assert "This database did not file this version" in text
        assert "Sign off version" not in text
        assert c.get("/reports/2026-11-28_grave/v2/pdf").content == v2.read_bytes()
        assert c.get("/reports/2026-11-28_swing/v1").status_code == 404
        token = csrf(c, "/")  # the version's page has no form to take it from
        refused = c.post("/reports/2026-11-28_grave/v2/signoff", headers=ORIGIN, data={
            "csrf": token, "by": "J. Rivera", "title": "Compliance Officer"})
        assert refused.status_code == 400
        assert "not a version of a report this database filed" in words(refused.text)
    # Without the archive, the same database lists nothing.
    with desk_client(night_copy) as c:
        assert "No report was filed from this database yet" in c.get("/reports").text


def test_a_filing_time_no_clock_can_show_is_a_sentence_naming_where(
    filed_copy: tuple[Path, Path]
) -> None:
    """A filed version's time edited past the year 9999: the reports page and the version's
    page were 500s; now 409 naming the table, column and row. Other pages still answer."""
    path, _ = filed_copy
    con = duckdb.connect(str(path))
    con.execute("UPDATE report_versions SET filed_at = TIMESTAMPTZ '10000-01-01 00:00:00+00' "
                "WHERE version = 1")
    con.close()
    said = ("the audit database holds 10000-01-01 00:00:00+00 in report_versions.filed_at "
            "(row 0), outside the years 1 to 9999 in UTC")
    with desk_client(path) as c:
        for page in ("/reports", "/reports/2026-11-28_grave/v2"):
            r = c.get(page)
            assert r.status_code == 409, (page, r.status_code, r.text[:300])
            assert said in words(r.text), words(r.text)[:600]
        assert c.get("/floor").status_code == 200

