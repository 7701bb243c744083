"""Procedure notices entered by hand (auditor.store.notices, `bacc-audit notice`): stored
append-only with who entered them, read back, and counted by the notice checks of
13:69F-7.10(c)3."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pypdf
import pytest
from helpers.tablelog import Log, TablePassDb, at
from typer.testing import CliRunner

from auditor.audit.load import load_notices
from auditor.cli.app import app
from auditor.cli.notice import notice_app
from auditor.errors import UserError
from auditor.store import db, notices
from auditor.store.notice_entry import parse_time

EST = dt.timezone(dt.timedelta(hours=-5))
SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
runner = CliRunner()


@pytest.fixture
def sample_db(sample_ingested: Path, tmp_path: Path) -> Path:
    """An audit database holding the sample night's logs (pits P1-P3, tables MB-01...): a
    copy of the session's (conftest.py)."""
    return Path(shutil.copy(sample_ingested, tmp_path / "a.duckdb"))


def add(con, **kw):
    args: dict[str, Any] = dict(pit="P1", procedure=2, effective=at("02:00"), recipient="division",
                given_at=at("01:00"), entered_by="ann", entered_at=at("05:00"))
    args.update(kw)
    return notices.add_notice(con, **args)


def test_notices_table_is_created_by_connect_once_the_module_is_imported(tmp_path):
    con = db.connect(tmp_path / "a.duckdb")
    names = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables")
             .fetchall()}
    assert "notices" in names


def test_a_notice_entered_by_hand_is_stored_with_who_and_when(tmp_path):
    con = db.connect(tmp_path / "a.duckdb")
    n = add(con, tables=" MB-01, MB-02,MB-01 ", note="letter in the binder")
    assert n.id == 1 and n.tables == "MB-01,MB-02"
    [back] = notices.list_notices(con)
    d = notices.as_dict(back)
    assert d["effective"] == "2026-11-29T07:00:00+00:00"
    assert d["given_at"] == "2026-11-29T06:00:00+00:00"
    assert d["entered_at"] == "2026-11-29T10:00:00+00:00"
    assert (d["tables"], d["entered_by"], d["written"]) == (["MB-01", "MB-02"], "ann", True)
    assert add(con, recipient="surveillance").id == 2


def test_notices_survive_reopening_the_database(tmp_path):
    path = tmp_path / "a.duckdb"
    con = db.connect(path)
    add(con)
    con.close()
    assert len(notices.list_notices(db.connect(path, read_only=True))) == 1


def test_list_notices_of_a_database_without_the_table_is_empty(tmp_path):
    import duckdb

    con = duckdb.connect(str(tmp_path / "bare.duckdb"))
    assert notices.list_notices(con) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"recipient": "pit boss"}, "recipient must be division or surveillance"),
        ({"procedure": 5}, "procedure must be 1, 2, 3 or 4"),
        ({"pit": "P 1"}, "pit id"),
        ({"tables": "MB 01"}, "table id"),
        ({"entered_by": " "}, "--by"),
        ({"effective": dt.datetime(2026, 11, 29, 2)}, "must carry a time zone"),
        ({"given_at": at("06:00")}, "after now"),
    ],
)
def test_a_notice_that_cannot_be_right_is_refused_with_a_sentence(tmp_path, change, message):
    con = db.connect(tmp_path / "a.duckdb")
    with pytest.raises(UserError, match=message):
        add(con, **change)
    assert notices.list_notices(con) == []


def test_times_on_the_command_line_with_an_offset_or_local_to_the_property():
    assert parse_time("2026-11-29T02:40:00-05:00", dt.UTC, "x") == at("02:40")
    assert parse_time("2026-11-29T07:40:00Z", EST, "x") == at("02:40")
    assert parse_time("2026-11-29 02:40", EST, "x") == at("02:40")
    with pytest.raises(UserError, match="is not a time"):
        parse_time("02:40 tomorrow", EST, "--given-at")


@pytest.mark.slow
def test_cli_notice_add_for_both_recipients_then_list_as_json(tmp_path, sample_db):
    path = sample_db
    config = tmp_path / "property.toml"
    config.write_text('[property]\ntime_zone = "America/New_York"\n')
    result = runner.invoke(notice_app, [
        "add", "--pit", "P2", "--procedure", "4", "--effective", "2026-11-29 03:00",
        "--recipient", "division", "--recipient", "surveillance",
        "--given-at", "2026-11-29 02:20", "--by", "J. Rivera", "--tables", "MB-03,MB-05",
        "--db", str(path), "--config", str(config),
    ])
    assert result.exit_code == 0, result.output
    assert "notice 1: pit P2 (tables MB-03,MB-05), procedure 4 from 2026-11-29 03:00:00" \
        in result.output
    listed = runner.invoke(notice_app, ["list", "--json", "--db", str(path)])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    assert [(r["recipient"], r["effective"], r["given_at"]) for r in rows] == [
        ("division", "2026-11-29T08:00:00+00:00", "2026-11-29T07:20:00+00:00"),
        ("surveillance", "2026-11-29T08:00:00+00:00", "2026-11-29T07:20:00+00:00"),
    ]
    table = runner.invoke(notice_app, ["list", "--db", str(path)])
    assert "2 notices entered by hand" in table.output
    done = db.connect(path, read_only=True).execute(
        "SELECT command, status FROM runs WHERE command <> 'ingest' ORDER BY id").fetchall()
    assert done == [("notice add", "done")]


@pytest.mark.slow
def test_cli_notice_add_not_written_is_stored_so(tmp_path, sample_db):
    path = sample_db
    result = runner.invoke(notice_app, [
        "add", "--pit", "P1", "--procedure", "2", "--effective", "2026-11-29T02:00:00-05:00",
        "--recipient", "surveillance", "--given-at", "2026-11-29T01:00:00-05:00",
        "--by", "ann", "--not-written", "--json", "--db", str(path),
    ])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["written"] is False


def test_cli_notice_add_with_a_bad_time_is_a_user_error(tmp_path):
    result = runner.invoke(notice_app, [
        "add", "--pit", "P1", "--procedure", "2", "--effective", "soon",
        "--recipient", "division", "--given-at", "2026-11-29 01:00", "--by", "ann",
        "--db", str(tmp_path / "a.duckdb"),
    ])
    assert isinstance(result.exception, UserError)
    assert "--effective 'soon' is not a time" in str(result.exception)


def test_notice_entered_by_hand_for_the_whole_pit_covers_every_table(tmp_path):
    log = Log()
    for t in ("MB-01", "MB-02"):
        log.open(t, "P1", "22:00", procedure=1)
        log.change(t, "02:00", 2)
    a = TablePassDb(tmp_path)
    a.ingest(log)
    a.run()
    assert [c for c, _ in a.codes("procedure.notice")] == ["procedure.notice_missing"] * 2
    for who in ("division", "surveillance"):
        add(a.con, recipient=who, given_at=at("01:30"))
    summary = a.run()
    assert summary["findings_withdrawn"] == 2
    assert a.findings("procedure.notice") == []


def test_notice_entered_by_hand_not_written_does_not_count(tmp_path):
    log = Log()
    log.open("MB-01", "P1", "22:00", procedure=1)
    log.change("MB-01", "02:00", 2)
    a = TablePassDb(tmp_path)
    a.ingest(log)
    add(a.con, recipient="division")
    add(a.con, recipient="surveillance", written=False)
    a.run()
    [f] = a.findings("procedure.notice")
    assert f["code"] == "procedure.notice_missing"
    assert f["observed"]["missing_recipients"] == ["surveillance"]
    assert "surveillance: not in writing" in f["message"]


def _add(path: Path, *args: str) -> Any:
    return runner.invoke(notice_app, [
        "add", "--procedure", "4", "--effective", "2026-11-29T03:00:00-05:00",
        "--recipient", "division", "--by", "Night Auditor", "--db", str(path), *args,
    ])


@pytest.mark.slow
def test_a_notice_for_an_unknown_pit_or_table_is_refused(tmp_path, sample_db):
    """Issue 15: `notice add` accepted pit P9 and table MB-99 with exit 0."""
    path = sample_db
    pit = _add(path, "--pit", "P9", "--given-at", "2026-11-29T02:20:00-05:00")
    assert isinstance(pit.exception, UserError)
    assert "pit 'P9' is in neither the logs nor the property config" in str(pit.exception)
    table = _add(path, "--pit", "P2", "--tables", "MB-99",
                 "--given-at", "2026-11-29T02:20:00-05:00")
    assert isinstance(table.exception, UserError)
    assert "table 'MB-99' is not in the logs" in str(table.exception)
    config = tmp_path / "property.toml"
    config.write_text('[property]\ntime_zone = "America/New_York"\n[procedures]\nP9 = 1\n')
    known = _add(path, "--pit", "P9", "--given-at", "2026-11-29T02:20:00-05:00",
                 "--config", str(config))  # a pit the config names is known
    assert known.exit_code == 0, known.output
    assert [n.pit for n in notices.list_notices(db.connect(path, read_only=True))] == ["P9"]


@pytest.mark.slow
def test_a_notice_given_after_the_change_it_announces_needs_late(tmp_path, sample_db):
    """Issue 15: a notice given at 04:20 for a 03:00 change was accepted as it was."""
    path = sample_db
    refused = _add(path, "--pit", "P2", "--given-at", "2026-11-29T04:20:00-05:00")
    assert isinstance(refused.exception, UserError)
    assert "after the time it announces" in str(refused.exception)
    assert "--late" in str(refused.exception)
    late = _add(path, "--pit", "P2", "--given-at", "2026-11-29T04:20:00-05:00", "--late")
    assert late.exit_code == 0, late.output
    [n] = notices.list_notices(db.connect(path, read_only=True))
    assert n.given_at > n.effective


@pytest.mark.slow
def test_a_withdrawn_notice_stays_on_record_and_no_longer_counts(tmp_path, sample_db):
    path = sample_db
    assert _add(path, "--pit", "P2", "--given-at", "2026-11-29T02:20:00-05:00").exit_code == 0
    gone = runner.invoke(notice_app, ["withdraw", "1", "--by", "Compliance Officer",
                                      "--reason", "typed for the wrong night", "--db", str(path)])
    assert gone.exit_code == 0, gone.output
    assert "notice 1 withdrawn by Compliance Officer" in gone.output
    again = runner.invoke(notice_app, ["withdraw", "1", "--by", "x", "--reason", "y",
                                       "--db", str(path)])
    assert isinstance(again.exception, UserError)
    assert "already withdrawn" in str(again.exception)
    missing = runner.invoke(notice_app, ["withdraw", "7", "--by", "x", "--reason", "y",
                                         "--db", str(path)])
    assert "there is no notice 7" in str(missing.exception)
    listed = json.loads(runner.invoke(notice_app, ["list", "--json", "--db", str(path)]).output)
    assert listed[0]["withdrawn"]["by"] == "Compliance Officer"
    assert listed[0]["withdrawn"]["reason"] == "typed for the wrong night"
    con = db.connect(path, read_only=True)
    assert len(notices.list_notices(con)) == 1 and notices.list_notices(con, False) == []
    assert not [n for n in load_notices(con) if n.key.startswith("hand:")]


@pytest.mark.slow
def test_the_report_marks_a_notice_entered_by_hand_with_who_and_when(tmp_path, sample_db):
    """Issue 15's case: a notice typed in for pit P2 (02:20) against the logged one (02:40);
    the PDF says it was entered by hand and by whom, beside the logged notice."""
    path = sample_db
    config = SAMPLE / "property.toml"
    first = runner.invoke(app, ["audit", "--db", str(path), "--config", str(config)])
    # notice_late x 2
    assert "tables, pits, shoes, dealers and seats: 2 new findings" in first.output
    added = runner.invoke(notice_app, [
        "add", "--pit", "P2", "--procedure", "4", "--effective", "2026-11-29 03:00",
        "--recipient", "division", "--recipient", "surveillance",
        "--given-at", "2026-11-29 02:20", "--by", "Night Auditor", "--db", str(path),
        "--config", str(config), "--note", "copy in the pit binder",
    ])
    assert added.exit_code == 0, added.output
    audited = runner.invoke(app, ["audit", "--db", str(path), "--config", str(config)])
    assert audited.exit_code in (0, 1), audited.output
    assert "tables, pits, shoes, dealers and seats: 0 new findings, 2 withdrawn" in audited.output
    assert "3,241 rounds audited" not in audited.output  # nothing else was replayed
    out = tmp_path / "grave.pdf"
    r = runner.invoke(app, ["report", "--db", str(path), "--config", str(config),
                            "--shift", "2026-11-28/grave", "--out", str(out)])
    assert r.exit_code == 0, r.output
    text = re.sub(r"\s+", " ", " ".join(p.extract_text() for p in pypdf.PdfReader(out).pages))
    # Issue 30: when it was entered in the page's local time (not UTC ISO), and its note.
    con = db.connect(path, read_only=True)
    entered = {r.id: r.entered_at for r in notices.list_notices(con)}
    con.close()
    for i in (1, 2):
        local = entered[i].astimezone(ZoneInfo("America/New_York"))
        assert (f"entered by hand by Night Auditor at {local:%Y-%m-%d %H:%M} (notice {i}): "
                "copy in the pit binder") in text
    assert "+00:00" not in text
    # The two findings it withdrew, listed with the notices the logs carry (02:40).
    cleared = text.split("Findings withdrawn because of notices entered by hand")[1]
    assert cleared.count("procedure.notice_late") == 2
    assert "MB-03" in cleared and "MB-05" in cleared
    assert "division 02:40" in cleared and "surveillance 02:40" in cleared
    con = db.connect(path, read_only=True)
    because = con.execute(
        "SELECT json_extract_string(evidence, '$.withdrawn_because.hand_notices') FROM findings "
        "WHERE status = 'withdrawn' ORDER BY table_id"
    ).fetchall()
    assert because == [('["hand:1","hand:2"]',)] * 2


@pytest.mark.slow
def test_withdrawing_the_hand_notice_brings_the_findings_back_and_the_report_shows_it(
    tmp_path, sample_db
):
    path = sample_db
    config = SAMPLE / "property.toml"
    audit = ["audit", "--db", str(path), "--config", str(config)]
    runner.invoke(app, audit)
    runner.invoke(notice_app, [
        "add", "--pit", "P2", "--procedure", "4", "--effective", "2026-11-29 03:00",
        "--recipient", "division", "--recipient", "surveillance",
        "--given-at", "2026-11-29 02:20", "--by", "Night Auditor",
        "--db", str(path), "--config", str(config),
    ])
    assert "0 new findings, 2 withdrawn" in runner.invoke(app, audit).output
    for n in ("1", "2"):
        gone = runner.invoke(notice_app, ["withdraw", n, "--by", "Compliance Officer",
                                          "--reason", "no such letter in the binder",
                                          "--db", str(path)])
        assert gone.exit_code == 0, gone.output
    again = runner.invoke(app, audit)
    assert "tables, pits, shoes, dealers and seats: 2 new findings, 0 withdrawn" in again.output
    con = db.connect(path, read_only=True)
    back = con.execute(
        "SELECT table_id FROM current_findings WHERE code = 'procedure.notice_late' "
        "ORDER BY table_id").fetchall()
    con.close()
    assert back == [("MB-03",), ("MB-05",)]  # open again, under the same fingerprints
    out = tmp_path / "grave.pdf"
    r = runner.invoke(app, ["report", "--db", str(path), "--config", str(config),
                            "--shift", "2026-11-28/grave", "--out", str(out)])
    assert r.exit_code == 0, r.output
    text = re.sub(r"\s+", " ", " ".join(p.extract_text() for p in pypdf.PdfReader(out).pages))
    section = text.split("Notices entered by hand and withdrawn (not counted)")[1]
    assert "Compliance Officer" in section and "no such letter in the binder" in section
    assert "Findings withdrawn because of notices entered by hand" not in text


# --- local times a daylight-saving change makes ambiguous or skips (issue 28) ---------------

NY = ZoneInfo("America/New_York")


def test_a_local_time_the_clocks_pass_twice_is_refused_with_both_readings():
    with pytest.raises(UserError) as e:
        parse_time("2026-11-01 01:40", NY, "--given-at")
    assert str(e.value) == (
        "--given-at 2026-11-01 01:40 happens twice in America/New_York (the clocks go back "
        "that night): write 2026-11-01 01:40-04:00 (EDT) or 2026-11-01 01:40-05:00 (EST)"
    )
    # Either reading, written with its offset, is one moment.
    assert parse_time("2026-11-01 01:40-05:00", NY, "x") == dt.datetime(
        2026, 11, 1, 6, 40, tzinfo=dt.UTC)
    # The hours around it are no problem.
    assert parse_time("2026-11-01 02:06", NY, "x") == dt.datetime(
        2026, 11, 1, 7, 6, tzinfo=dt.UTC)


def test_a_local_time_the_clocks_skip_is_refused_not_moved_an_hour():
    """Issue 28: "2026-03-08 02:30", which never happens in New York, was stored as 03:30
    EDT."""
    with pytest.raises(UserError) as e:
        parse_time("2026-03-08 02:30", NY, "--effective")
    assert str(e.value) == (
        "--effective 2026-03-08 02:30 does not exist in America/New_York (the clocks go "
        "forward over it that night): write the moment meant with its offset, "
        "2026-03-08 01:30-05:00 (EST) or 2026-03-08 03:30-04:00 (EDT)"
    )


@pytest.mark.slow
def test_notice_add_refuses_an_ambiguous_time_and_the_notice_missing_stands(
    tmp_path, bacc_audit
):
    """Issue 28: in America/New_York "2026-11-01 01:40" was stored as 01:40 EDT; a notice
    given 01:40 EST, 26 minutes before a 02:06 EST change, counted as 86 minutes ahead and
    withdrew the notice_missing."""
    opened = dt.datetime(2026, 10, 31, 22, 0, tzinfo=NY)
    change = dt.datetime(2026, 11, 1, 2, 6, tzinfo=NY)  # after the clocks went back: EST
    lines = [
        {"v": 1, "ts": opened.isoformat(), "type": "table_open", "table": "MB-01",
         "seq": 1, "pit": "P1", "game": "mini_baccarat", "jurisdiction": "NJ",
         "variant": "standard", "procedure": 1, "seats": 7, "side_bets": []},
        {"v": 1, "ts": change.isoformat(), "type": "procedure_change", "table": "MB-01",
         "seq": 2, "procedure": 2},
        {"v": 1, "ts": (change + dt.timedelta(hours=1)).isoformat(), "type": "table_close",
         "table": "MB-01", "seq": 3},
    ]
    log = tmp_path / "2026-10-31_MB-01.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in lines))
    config = tmp_path / "property.toml"
    config.write_text('[property]\ntime_zone = "America/New_York"\n')
    dbp = tmp_path / "a.duckdb"
    common = ("--db", dbp, "--config", config)
    assert bacc_audit("ingest", log, "--db", dbp).code == 0
    assert bacc_audit("audit", *common).code == 1
    missing = "SELECT code FROM current_findings WHERE code LIKE 'procedure.notice%'"
    assert db.connect(dbp, read_only=True).execute(missing).fetchall() == [
        ("procedure.notice_missing",)]
    def notice(given_at: str) -> Any:
        return bacc_audit("notice", "add", "--pit", "P1", "--procedure", "2",
                          "--effective", "2026-11-01 02:06", "--recipient", "division",
                          "--recipient", "surveillance", "--given-at", given_at,
                          "--by", "J. Smith", *common)

    refused = notice("2026-11-01 01:40")
    assert refused.code == 2
    assert refused.err.strip() == (
        "error: --given-at 2026-11-01 01:40 happens twice in America/New_York (the clocks go "
        "back that night): write 2026-11-01 01:40-04:00 (EDT) or 2026-11-01 01:40-05:00 (EST)"
    )
    assert notices.list_notices(db.connect(dbp, read_only=True)) == []
    bacc_audit("audit", *common)
    assert db.connect(dbp, read_only=True).execute(missing).fetchall() == [
        ("procedure.notice_missing",)]
    # Written with its offset (EST), the notice is what it was: 26 minutes ahead, late.
    given = notice("2026-11-01 01:40-05:00")
    assert given.code == 0, given.err
    assert bacc_audit("audit", *common).code == 1  # a new finding
    [(code, message)] = db.connect(dbp, read_only=True).execute(
        "SELECT code, message FROM current_findings WHERE code LIKE 'procedure.notice%'"
    ).fetchall()
    assert code == "procedure.notice_late" and "26 minutes" in message


def test_a_time_error_of_notice_add_is_said_in_local_time():
    """Not in UTC with microseconds: the officer typed local times."""
    with pytest.raises(UserError) as e:
        notices.add_notice(  # refused before the database is touched
            None,  # type: ignore[arg-type]
            pit="P1", procedure=2, effective=dt.datetime(2026, 11, 29, 2, tzinfo=NY),
            recipient="division", given_at=dt.datetime(2026, 11, 29, 4, 20, tzinfo=NY),
            entered_by="ann", entered_at=dt.datetime(2026, 11, 29, 5, tzinfo=NY),
        )
    assert str(e.value) == (
        "the notice is said to be given at 2026-11-29 04:20 EST, after the time it "
        "announces (2026-11-29 02:00 EST): such a notice is late whatever it says; enter it "
        "with --late to record it as given late"
    )


@pytest.mark.slow
def test_a_refused_notice_shows_the_times_as_typed(tmp_path, sample_db):
    """Issue 31: a local time typed in came back in the error as UTC with microseconds
    (`2026-11-29T09:20:00+00:00`), which the user did not recognise as what they typed."""
    path = sample_db
    config = tmp_path / "property.toml"
    config.write_text('[property]\ntime_zone = "America/New_York"\n')
    late = _add(path, "--pit", "P2", "--given-at", "2026-11-29 04:20", "--config", str(config))
    assert isinstance(late.exception, UserError)
    assert str(late.exception).startswith(
        "the notice is said to be given at 2026-11-29 04:20 EST, after the time it "
        "announces (2026-11-29 03:00 EST)"), late.exception
    future = _add(path, "--pit", "P2", "--given-at", "2099-01-02 03:04", "--config", str(config))
    assert isinstance(future.exception, UserError)
    said = str(future.exception)
    assert said.startswith("the notice is said to be given at 2099-01-02 03:04 EST, "
                           "after now ("), said
    now = re.search(r"after now \(([^)]*)\)", said)
    assert now and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? E[SD]T", now[1]), said
