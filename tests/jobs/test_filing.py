"""Filing while watching (issue 33): `watch --file-reports` files each shift's report at the
shift's end plus its grace, in the logs' time, and a gaming day's last shift once the day is
closed; the PDFs it files are a batch `nightly`'s of the same logs, but for their time of
generation and each database's own ledger; started again, it files a shift again only when a
finding of the shift changed."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import pytest
from helpers.cli import Run
from helpers.pdfs import pdf_text, without_generation_time

from auditor.cli.watch import FILE_GRACE_MINUTES
from auditor.config import PropertyConfig, Shift
from auditor.jobs.filing import FILE_GRACE, FilingOptions, FilingThread, ShiftFiler
from auditor.jobs.nightly import run_nightly
from auditor.jobs.watch import Watch, WatchOptions
from auditor.report import attached
from auditor.simulate.feed import Line, night_schedule
from auditor.simulate.planted import simulate
from auditor.store import db, runs

DAY = dt.date(2026, 11, 20)
# A gaming day that ends at 01:00 and two short shifts before its end, so that a simulated
# night of four hours from 22:00 files two reports: one whose end is not the gaming day's
# (23:30, filed once the logs reach 00:00) and the day's last (filed once the day is closed by
# the logs, 01:30).
CONF = PropertyConfig(
    time_zone="America/New_York", gaming_day_start=dt.time(1),
    shifts=(Shift("day", dt.time(1), dt.time(22)), Shift("early", dt.time(22), dt.time(23, 30)),
            Shift("late", dt.time(23, 30), dt.time(1))),
)
ZONE = CONF.zone()
STEP = dt.timedelta(minutes=20)  # of the logs, written before each poll


def _fed_step_by_step(lines: list[Line], spool: Path, w: Watch, archive: Path,
                      settle: Callable[[], object] = lambda: None,
                      ) -> dict[str, tuple[dt.datetime, dt.datetime]]:
    """Write the night's lines STEP of log time at a time, a poll after each: no clock, so
    the test waits for nothing (`settle`: until the filings asked for are done). Returns,
    for each PDF filed, how far the logs written reached at the poll before it appeared and
    at the poll it appeared."""
    first = dt.datetime.fromisoformat(json.loads(lines[0].data)["ts"])
    spool.mkdir()
    handles: dict[str, BinaryIO] = {}
    seen: dict[str, tuple[dt.datetime, dt.datetime]] = {}
    i = 0
    upto = first
    before = reached = first
    try:
        while i < len(lines):
            upto += STEP
            while i < len(lines) and first + dt.timedelta(seconds=lines[i].at) < upto:
                line = lines[i]
                fh = handles.get(line.name) or handles.setdefault(
                    line.name, (spool / line.name).open("ab"))
                fh.write(line.data)
                reached = first + dt.timedelta(seconds=line.at)
                i += 1
            for fh in handles.values():
                fh.flush()
            w.step()
            settle()
            _note_filed(archive, spool, seen, (before, reached))
            before = reached
    finally:
        for fh in handles.values():
            fh.close()
    done = threading.Event()
    done.set()
    w.run(done)  # what is left, the last sweep and its filing
    settle()
    _note_filed(archive, spool, seen, (before, reached))
    return seen


def _note_filed(archive: Path, spool: Path, seen: dict[str, tuple[dt.datetime, dt.datetime]],
                when: tuple[dt.datetime, dt.datetime]) -> None:
    """The PDFs new in the archive, when, and the spool as it stood then (as-filed-NAME/):
    the logs each was filed from."""
    for pdf in archive.rglob("*.pdf"):
        if pdf.name not in seen:
            seen[pdf.name] = when
            shutil.copytree(spool, spool.parent / f"as-filed-{pdf.stem}")


@pytest.mark.slow
def test_a_watched_night_files_the_shift_reports_a_nightly_files(tmp_path: Path) -> None:
    r = simulate(tmp_path / "night", 2, 4, seed=3, deviation_rate=0.02,
                 games=("mini_baccarat", "punto_banco"), day=DAY)
    lines = night_schedule(r.files, r.later, 1.0)  # at: seconds of log time after the first
    spool, archive = tmp_path / "spool", tmp_path / "archive"
    con = db.connect(tmp_path / "live.duckdb")
    run_id = runs.start(con, "watch", {})
    w = Watch(con, spool, CONF, run_id,
              WatchOptions(rescan=0, sweep_every=0, sweep_share=1.0, seal_every=0))
    # As `watch --file-reports` files (auditor.jobs.service): on a cursor and in a thread of
    # its own, reading between two polls.
    cursor = con.cursor()
    cursor.execute("SET TimeZone = 'UTC'")
    filer = ShiftFiler(cursor, CONF, run_id, FilingOptions(archive), w.seal, writing=w.writing)
    with FilingThread(filer.after_sweep) as filing:
        w.after_sweep = filing.request
        seen = _fed_step_by_step(lines, spool, w, archive, settle=filing.drain)
    cursor.close()

    early, late = f"{DAY}_early.pdf", f"{DAY}_late.pdf"
    # Filed by the watch as the logs went (a poll each 20 minutes of them): `early`
    # (22:00-23:30) at the first poll whose logs reach 00:00, `late` (23:30-01:00, the day's
    # last) at the first whose logs reach 01:30, the day then closed.
    assert set(seen) == {early, late}
    next_day = DAY + dt.timedelta(days=1)
    for name, due in ((early, dt.time(0)), (late, dt.time(1, 30))):
        before, at = seen[name]
        assert before < dt.datetime.combine(next_day, due, ZONE) <= at, name
    assert [(x.shift, x.status, x.version) for x in filer.reports] == [
        ("early", "written", 1), ("late", "written", 1)]
    assert con.execute("SELECT gaming_day, how, run_id FROM closed_days").fetchall() == [
        (DAY, "watch", run_id)]
    assert con.execute(
        "SELECT slug, version, run_id FROM report_versions ORDER BY slug").fetchall() == [
        (f"{DAY}_early", 1, run_id), (f"{DAY}_late", 1, run_id)]
    con.close()

    # A batch nightly of the same logs, as they stood when each report was filed (a log
    # still being written is listed in the report as far as it was read), in the same spool
    # folder (the report names its files), into a database and an archive of its own.
    spool.rename(tmp_path / "spool-watched")
    for name, shift in ((early, "early"), (late, "late")):
        shutil.rmtree(spool, ignore_errors=True)
        shutil.copytree(tmp_path / f"as-filed-{Path(name).stem}", spool)
        batch = run_nightly(tmp_path / f"batch-{shift}.duckdb", spool, CONF, day=DAY,
                            archive=tmp_path / f"nightly-{shift}",
                            now=dt.datetime(2026, 12, 1, tzinfo=dt.UTC))
        assert (shift, "written", 1) in [(x.shift, x.status, x.version) for x in batch.reports]
        ours = archive / f"{DAY}" / name
        theirs = tmp_path / f"nightly-{shift}" / f"{DAY}" / name
        text = without_generation_time(pdf_text(ours))
        assert text == without_generation_time(pdf_text(theirs))
        assert len(text) > 2000
        said, told = attached.read_filed(ours), attached.read_filed(theirs)
        # What the report shows, but its time and ledger: the archive's own measure.
        assert said.content_sha256 is not None
        assert said.content_sha256 == told.content_sha256
        assert said.findings == told.findings and said.findings

    # Started again on the same database (the night's files now whole): nothing is filed
    # afresh. Then a line of the early shift delivered late, out of its order: its finding
    # lands in that shift, which is filed again as version 2; the late shift stays.
    shutil.rmtree(spool)
    (tmp_path / "spool-watched").rename(spool)
    con = db.connect(tmp_path / "live.duckdb")
    run_id = runs.start(con, "watch", {})
    w = Watch(con, spool, CONF, run_id, WatchOptions(rescan=0, sweep_every=0, sweep_share=1.0))
    filer = ShiftFiler(con, CONF, run_id, FilingOptions(archive), w.seal)
    w.after_sweep = filer.after_sweep
    w.step()  # its first poll sweeps (what a restart may have left)
    assert filer.reports == []
    table = spool / f"{DAY}_MB-01.jsonl"
    events = [json.loads(x) for x in table.read_bytes().splitlines()]
    end = next(e for e in events if e["type"] == "round_end"
               and dt.datetime.fromisoformat(e["ts"]) >= dt.datetime.combine(
                   DAY, dt.time(23), ZONE))
    late_card = {**end, "type": "card", "seq": events[-1]["seq"] + 1, "to": "banker",
                 "card": "5c"}
    with table.open("ab") as fh:
        fh.write((json.dumps(late_card) + "\n").encode())
    w.step()
    w.sweep()
    assert [(x.shift, x.status, x.version) for x in filer.reports] == [
        ("early", "new_version", 2)]
    v2 = attached.read_filed(archive / f"{DAY}" / f"{DAY}_early.v2.pdf").findings
    v1 = attached.read_filed(archive / f"{DAY}" / early).findings
    assert v1 is not None and v2 is not None
    shown = {fp for fp, *_ in v1}
    assert sorted(code for fp, code, _, _ in v2 if fp not in shown) == ["log.after_round_end"]
    assert sorted(p.name for p in (archive / f"{DAY}").iterdir()) == [
        early, f"{DAY}_early.v2.pdf", late]
    con.close()


def test_the_cli_default_grace_is_the_filings() -> None:
    assert dt.timedelta(minutes=FILE_GRACE_MINUTES) == FILE_GRACE


@pytest.mark.parametrize("grace", ["-1", "nan", "inf", "1441"])
def test_a_grace_that_is_no_time_is_refused_in_a_sentence(
    grace: str, tmp_path: Path, bacc_audit: Callable[..., Run]
) -> None:
    (tmp_path / "spool").mkdir()
    r = bacc_audit("watch", "--spool", tmp_path / "spool", "--db", tmp_path / "a.duckdb",
                   "--file-reports", "--file-grace", grace)
    assert (r.code, r.err) == (2, f"error: --file-grace {float(grace):g}: minutes from 0 to "
                                  "1440 past a shift's end\n")
    assert not (tmp_path / "a.duckdb").exists()


def test_an_archive_it_cannot_write_stops_the_watch_at_its_start(
    tmp_path: Path, bacc_audit: Callable[..., Run]
) -> None:
    """Not at the first shift's end, hours later: exit 2 at once, the run recorded failed."""
    (tmp_path / "spool").mkdir()
    (tmp_path / "file").write_text("not a folder")
    r = bacc_audit("watch", "--spool", tmp_path / "spool", "--db", tmp_path / "a.duckdb",
                   "--file-reports", "--archive", tmp_path / "file" / "archive")
    assert r.code == 2
    assert r.err == (f"error: {tmp_path / 'file' / 'archive'}: cannot write there (Not a "
                     "directory); point --archive (or BACC_AUDIT_ARCHIVE, or [property] "
                     "archive) at a folder this user can write to\n")
    con = db.connect(tmp_path / "a.duckdb", read_only=True)
    try:
        assert con.execute("SELECT command, status, exit_code FROM runs").fetchall() == [
            ("watch", "failed", 2)]
    finally:
        con.close()


@pytest.mark.slow  # two reports rendered
def test_a_line_stamped_a_century_ahead_neither_files_nor_hides_the_reports(tmp_path: Path
                                                                             ) -> None:
    """MB-03's close stamped 2126, read with the night: taken as how far the logs reach, it
    made the gaming day to file a century away (DAYS_BACK from there), so the night's shifts
    were never filed. Now the night's two reports are filed once its own logs pass them,
    as without the line, and the stamp is its own finding."""
    from helpers.tablelog import Log

    natural = [("player", "2c"), ("banker", "9d"), ("player", "3c"), ("banker", "Kd")]
    log = Log()
    log.open("MB-01", "P1", "22:00")
    log.shoe_start("MB-01", "22:01", "S1")
    log.burn("MB-01", "S1", ["Ac", "Kd"])
    for n, when in enumerate(("22:10", "23:40"), start=1):
        log.round("MB-01", "S1", n, natural, [("pay", 3), ("vig", 3)], when=when,
                  after_cards=[("announce", {"kind": "result", "player": 5, "banker": 9,
                                             "winner": "banker"})])
    log.shoe_end("MB-01", "S1")
    log.close("MB-01", "00:50")
    log.open("MB-02", "P1", "22:05")
    log.close("MB-02", "01:35")  # the logs past the day's end (01:00) by its grace
    log.open("MB-03", "P1", "22:06")
    forged = log.close("MB-03", "22:30")
    forged["ts"] = "2126-11-28T22:30:00-05:00"
    spool, archive = tmp_path / "spool", tmp_path / "archive"
    spool.mkdir()
    for table in ("MB-01", "MB-02", "MB-03"):
        log.write(spool / f"2026-11-28_{table}.jsonl", [f"table:{table}"])
    con = db.connect(tmp_path / "live.duckdb")
    run_id = runs.start(con, "watch", {})
    w = Watch(con, spool, CONF, run_id, WatchOptions(rescan=0, sweep_every=1e9, idle_sweep=1e9))
    filer = ShiftFiler(con, CONF, run_id, FilingOptions(archive), w.seal)
    w.after_sweep = filer.after_sweep
    w.step()
    w.sweep()
    assert [(x.path.name if x.path else None, x.status) for x in filer.reports] == [
        ("2026-11-28_early.pdf", "written"), ("2026-11-28_late.pdf", "written")]
    assert con.execute("SELECT code, table_id FROM current_findings "
                       "WHERE code LIKE 'log.%'").fetchall() == [("log.future_stamp", "MB-03")]
    con.close()
