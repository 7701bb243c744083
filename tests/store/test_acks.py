"""Acknowledgements: a reviewer's decision on a finding, recorded append-only, refused for a
fingerprint no finding has, and shown beside the finding in the shift report."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.shared import copy_of, once

from auditor import config
from auditor.audit.run import audit
from auditor.errors import UserError
from auditor.ingest.run import ingest
from auditor.report import gather, render
from auditor.store import acks, db, findings, runs

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
CONFIG = SAMPLE / "property.toml"
SHIFT = "2026-11-28/grave"


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One table's night (MB-01, with its planted missed Banker draw), ingested and audited
    once a run; this module's copy."""

    def make(folder: Path) -> None:
        con = db.connect(folder / "audit.duckdb")
        ingest(con, [SAMPLE / "2026-11-28_MB-01.jsonl"], runs.start(con, "ingest", {}))
        audit(con, runs.start(con, "audit", {}), config.load(CONFIG))
        con.close()

    built = once(tmp_path_factory, "acks-mb01", make)
    return copy_of(built / "audit.duckdb", tmp_path_factory.mktemp("acks") / "audit.duckdb")


@pytest.fixture
def dbp(audited: Path, tmp_path: Path) -> Path:
    """A private copy, so each test starts with no acknowledgements."""
    copy = tmp_path / "audit.duckdb"
    shutil.copy2(audited, copy)
    return copy


def fingerprint(path: Path, code: str) -> str:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(
            "SELECT fingerprint FROM current_findings WHERE code = ? ORDER BY id LIMIT 1", [code]
        ).fetchall()[0][0]
    finally:
        con.close()


def count(path: Path, sql: str) -> Any:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(sql).fetchall()[0][0]
    finally:
        con.close()


@pytest.mark.slow
def test_an_acknowledgement_records_who_decided_what(dbp: Path, bacc_audit: Any) -> None:
    fp = fingerprint(dbp, "draw.banker_missed")
    r = bacc_audit(
        "ack", fp, "--by", "J. Rivera", "--disposition", "video reviewed: dealer error",
        "--note", "patron paid the difference", "--db", dbp,
    )
    assert r.code == 0, r
    assert r.out.strip() == f"ack 1: {fp} by J. Rivera: video reviewed: dealer error"
    listed = bacc_audit("ack", "--list", "--json", "--db", dbp)
    assert listed.code == 0, listed
    (row,) = json.loads(listed.out)
    assert (row["fingerprint"], row["by"], row["disposition"], row["note"]) == (
        fp, "J. Rivera", "video reviewed: dealer error", "patron paid the difference",
    )
    # A writing command, so it is a run like the others.
    assert count(dbp, "SELECT command || ' ' || status FROM runs ORDER BY id DESC") == "ack done"


@pytest.mark.slow
def test_ack_list_reads_as_notice_list_and_ack_dash_dash_list_stays_its_alias(
    dbp: Path, bacc_audit: Any
) -> None:
    fp = fingerprint(dbp, "draw.banker_missed")
    none = bacc_audit("ack", "list", "--db", dbp)
    assert (none.code, none.out) == (0, "0 acknowledgements\n"), none
    r = bacc_audit("ack", fp, "--by", "J. Rivera", "--disposition", "ok", "--db", dbp)
    assert r.code == 0, r
    listed = bacc_audit("ack", "list", "--db", dbp)
    assert listed.code == 0, listed
    assert listed.out.splitlines()[1:] == ["    by J. Rivera: ok", "1 acknowledgement"]
    assert listed.out.startswith("ack 1 ") and fp in listed.out.splitlines()[0]
    assert bacc_audit("ack", "--list", "--db", dbp).out == listed.out
    as_json = bacc_audit("ack", "list", "--json", "--db", dbp)
    assert [row["fingerprint"] for row in json.loads(as_json.out)] == [fp]


def test_a_later_acknowledgement_is_a_new_row_and_the_latest_stands(dbp: Path) -> None:
    fp = fingerprint(dbp, "draw.banker_missed")
    con = db.connect(dbp)
    try:
        first = acks.add_ack(con, fp, by="J. Rivera", disposition="under review", run_id=1)
        second = acks.add_ack(
            con, fp, by="M. Chen", disposition="dealer retrained", run_id=2,
            note="see incident 2026-118",
        )
        rows = acks.list_acks(con)
        latest = acks.latest_acks(con)
    finally:
        con.close()
    assert [(a.id, a.reviewer, a.disposition) for a in rows] == [
        (first.id, "J. Rivera", "under review"),
        (second.id, "M. Chen", "dealer retrained"),
    ]
    assert list(latest) == [fp]
    assert (latest[fp].id, latest[fp].reviewer, latest[fp].note) == (
        second.id, "M. Chen", "see incident 2026-118",
    )
    assert latest[fp].recorded_at.tzinfo is not None


@pytest.mark.slow
def test_an_unknown_fingerprint_is_refused_with_exit_2_and_nothing_recorded(
    dbp: Path, bacc_audit: Any
) -> None:
    fp = fingerprint(dbp, "draw.banker_missed")
    runs_before = count(dbp, "SELECT count(*) FROM runs")
    typo = fp.replace("banker", "bankr")
    r = bacc_audit("ack", typo, "--by", "J. Rivera", "--disposition", "ok", "--db", dbp)
    assert r.code == 2, r
    assert r.err.startswith(f"error: no finding has the fingerprint {typo!r}; did you mean ")
    assert repr(fp) in r.err
    assert count(dbp, "SELECT count(*) FROM acknowledgements") == 0
    assert count(dbp, "SELECT count(*) FROM runs") == runs_before


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--by", "J. Rivera"], "give the finding and the review"),
        (["FP", "--disposition", "ok"], "give the finding and the review"),
        (["FP", "--by", " ", "--disposition", "ok"], "say who reviewed the finding"),
        (["FP", "--by", "J. Rivera", "--disposition", ""], "say what was decided"),
        (["FP", "--list"], "ack list takes no fingerprint"),
        (["list", "--by", "J. Rivera"], "ack list takes no fingerprint, --by"),
        (["list", "--list"], "give ack list or ack --list, not both"),
    ],
)
def test_an_incomplete_acknowledgement_is_a_usage_error(
    dbp: Path, bacc_audit: Any, args: list[str], says: str
) -> None:
    fp = fingerprint(dbp, "draw.banker_missed")
    r = bacc_audit("ack", *[fp if a == "FP" else a for a in args], "--db", dbp)
    assert r.code == 2, r
    assert says in r.err
    assert count(dbp, "SELECT count(*) FROM acknowledgements") == 0


def test_a_database_from_before_acknowledgements_reads_as_none(dbp: Path) -> None:
    con = duckdb.connect(str(dbp))
    con.execute("DROP TABLE acknowledgements")
    con.close()
    con = db.connect(dbp, read_only=True)
    try:
        assert acks.latest_acks(con) == {}
        assert acks.list_acks(con) == []
    finally:
        con.close()


def test_add_ack_refuses_an_unknown_fingerprint(dbp: Path) -> None:
    con = db.connect(dbp)
    try:
        with pytest.raises(UserError, match="no finding has the fingerprint 'nothing'"):
            acks.add_ack(con, "nothing", by="J. Rivera", disposition="ok", run_id=1)
    finally:
        con.close()


def test_a_bulk_acknowledgement_refused_midway_by_a_busy_writer_records_each_finding_once(
    dbp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB refuses the second finding's write once (another writer's transaction): that
    finding alone is tried again, and each finding ends with exactly one acknowledgement,
    all in one `ack` run."""
    con = db.connect(dbp)
    try:
        prints = [r[0] for r in con.execute(
            "SELECT fingerprint FROM current_findings ORDER BY id LIMIT 3").fetchall()]
        assert len(prints) == 3
        real, calls = acks.add_ack, []

        def busy_once(*a: Any, **kw: Any) -> Any:
            calls.append(a[1])
            if len(calls) == 2:
                raise duckdb.TransactionException("Catalog write-write conflict")
            return real(*a, **kw)

        monkeypatch.setattr(acks, "add_ack", busy_once)
        done = acks.acknowledge_all(con, prints, by="J. Rivera", disposition="reviewed")
        assert calls == [prints[0], prints[1], prints[1], prints[2]]
        rows = con.execute(
            "SELECT fingerprint, run_id FROM acknowledgements ORDER BY id").fetchall()
        assert [fp for fp, _ in rows] == prints
        assert {run for _, run in rows} == {done[0].run_id}
    finally:
        con.close()


# --------------------------------------------------------------------------------------------
# the report shows them
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_report_shows_the_standing_acknowledgement_beside_its_finding(dbp: Path) -> None:
    fp = fingerprint(dbp, "draw.banker_missed")
    when = dt.datetime(2026, 11, 29, 14, 5, tzinfo=dt.UTC)
    con = db.connect(dbp)
    try:
        acks.add_ack(con, fp, by="J. Rivera", disposition="under review", run_id=1,
                     recorded_at=when - dt.timedelta(hours=1))
        acks.add_ack(con, fp, by="M. Chen", disposition="dealer retrained", run_id=1,
                     note="incident 2026-118", recorded_at=when)
    finally:
        con.close()
    con = db.connect(dbp, read_only=True)
    try:
        conf = config.load(CONFIG)
        scope = gather.scope_for(conf, con, shift=SHIFT)
        context = gather.gather(con, conf, scope)
        again = gather.gather(con, conf, scope)
    finally:
        con.close()
    by_fp = {f["fingerprint"]: f for f in context["findings"]}
    ack = by_fp[fp]["ack"]
    assert (ack["by"], ack["disposition"], ack["note"]) == (
        "M. Chen", "dealer retrained", "incident 2026-118",
    )
    assert ack["at"] == when and ack["at"].utcoffset() == dt.timedelta(hours=-5)
    assert all(f["ack"] is None for f in context["findings"] if f["fingerprint"] != fp)

    html = render.render_html(context)
    assert html == render.render_html(again)  # times from the database: deterministic
    line = (
        "Acknowledged 2026-11-29 09:05 by M. Chen: dealer retrained (incident 2026-118)"
    )
    assert html.count(line) == 1  # the finding's meta line
    assert (
        "[acknowledged 2026-11-29 09:05 by M. Chen: dealer retrained (incident 2026-118)]"
        in re.sub(r"\s+", " ", html)  # its appendix line (wrapped under its message)
    )
    assert "under review" not in html  # only the standing one

    # The attachments stay findings format v1.
    jsonl, csv_bytes = render.attachments_data(context)
    assert all("ack" not in json.loads(x) for x in jsonl.decode().splitlines())
    assert b"ack" not in csv_bytes.splitlines()[0]


# --------------------------------------------------------------------------------------------
# short ids (issue 19): what the table view and the PDF show, and what `ack` takes
# --------------------------------------------------------------------------------------------

BANKER_MISSED = "draw.banker_missed|MB-01|MB-01-1128-01|72|1149|0"
BANKER_MISSED_ID = "Fc95f8bf836d2"  # F + sha256(fingerprint)[:12], worked out by hand once


def test_a_finding_id_is_f_and_12_hex_digits_of_the_sha256_of_its_fingerprint(
    dbp: Path,
) -> None:
    assert findings.short_id(BANKER_MISSED) == BANKER_MISSED_ID
    assert fingerprint(dbp, "draw.banker_missed") == BANKER_MISSED
    # The SQL `ack` looks ids up with gives the same id as Python, for every finding.
    con = duckdb.connect(str(dbp), read_only=True)
    try:
        rows = con.execute(
            f"SELECT fingerprint, {findings.SHORT_ID_SQL} FROM findings"
        ).fetchall()
    finally:
        con.close()
    assert len(rows) == 3
    assert all(sql_id == findings.short_id(fp) for fp, sql_id in rows), rows


@pytest.mark.slow
@pytest.mark.parametrize("given", [BANKER_MISSED_ID, BANKER_MISSED_ID.lower(), "FC95F8BF836D2"])
def test_ack_by_short_id_records_the_full_fingerprint(
    dbp: Path, bacc_audit: Any, given: str
) -> None:
    r = bacc_audit("ack", given, "--by", "J. Rivera", "--disposition", "ok", "--db", dbp)
    assert r.code == 0, r
    assert r.out.strip() == f"ack 1: {BANKER_MISSED} by J. Rivera: ok"
    assert count(dbp, "SELECT fingerprint FROM acknowledgements") == BANKER_MISSED
    assert count(dbp, "SELECT count(*) FROM acknowledgements") == 1
    listed = bacc_audit("ack", "list", "--db", dbp)
    assert listed.out.splitlines()[0].endswith(f" UTC  {BANKER_MISSED_ID}  {BANKER_MISSED}")
    (row,) = json.loads(bacc_audit("ack", "list", "--json", "--db", dbp).out)
    assert (row["finding_id"], row["fingerprint"]) == (BANKER_MISSED_ID, BANKER_MISSED)


@pytest.mark.slow
def test_an_unknown_short_id_is_refused_with_exit_2_and_the_closest_ids(
    dbp: Path, bacc_audit: Any
) -> None:
    typo = BANKER_MISSED_ID[:-1] + "3"
    runs_before = count(dbp, "SELECT count(*) FROM runs")
    r = bacc_audit("ack", typo.lower(), "--by", "J. Rivera", "--disposition", "ok", "--db", dbp)
    assert r.code == 2, r
    assert r.err.strip() == (
        f"error: no finding has the id {typo}; did you mean {BANKER_MISSED_ID}? "
        "(`bacc-audit findings` shows each finding's id in its first column)"
    )
    assert count(dbp, "SELECT count(*) FROM acknowledgements") == 0
    assert count(dbp, "SELECT count(*) FROM runs") == runs_before


@pytest.mark.slow
def test_something_neither_an_id_nor_a_fingerprint_is_refused_with_exit_2(
    dbp: Path, bacc_audit: Any
) -> None:
    r = bacc_audit("ack", "Fc95f8bf8", "--by", "J. Rivera", "--disposition", "ok", "--db", dbp)
    assert r.code == 2, r
    assert r.err.startswith(
        "error: 'Fc95f8bf8' is neither a finding id (F and 12 hex digits, e.g. F50d858e0985e) "
        "nor a fingerprint"
    ), r.err
    assert count(dbp, "SELECT count(*) FROM acknowledgements") == 0


def test_an_id_that_names_two_findings_is_refused(
    dbp: Path, bacc_audit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No two of these fingerprints share an id, so the SQL is made to give all one id: the
    refusal for the collision the docs allow for."""
    monkeypatch.setattr(acks, "SHORT_ID_SQL", "'F000000000000'")
    r = bacc_audit("ack", "F000000000000", "--by", "J. Rivera", "--disposition", "ok",
                   "--db", dbp)
    assert r.code == 2, r
    assert r.err.startswith("error: the id F000000000000 names 3 findings (")
    assert r.err.rstrip().endswith("give the full fingerprint instead")
    assert repr(BANKER_MISSED) in r.err
    assert count(dbp, "SELECT count(*) FROM acknowledgements") == 0


def test_the_report_shows_each_findings_id_in_its_heading_and_appendix_line(dbp: Path) -> None:
    """The officer reads the PDF and acks from it, so the id the command takes is printed."""
    con = db.connect(dbp, read_only=True)
    try:
        conf = config.load(CONFIG)
        context = gather.gather(con, conf, gather.scope_for(conf, con, shift=SHIFT))
    finally:
        con.close()
    html = render.render_html(context)
    assert (
        "· draw.banker_missed · Banker hand did not draw a third card it had to draw · "
        f"{BANKER_MISSED_ID}</div>"
    ) in html
    (line,) = [x for x in "\n".join(context["appendix_blocks"]).splitlines()
               if "draw.banker_missed" in x]
    assert f"    1149  {BANKER_MISSED_ID}  Banker 9s 3d (2) had to draw" in line
