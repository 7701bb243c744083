"""A shift at the officer's desk in a real browser (Debian's chromium, driven by Playwright,
headless, 1280 by 800), over a night fed the way the tables write it.

The sample night's logs, without the pit's notices file, are written into a spool line by
line (auditor.simulate.feed) while a `watch` follows it and serves its board from its own
connection: pit P1's three tables change procedure at 02:00 with no notice on record
(procedure.notice_missing). The officer then works the queue down to zero with one bulk
acknowledgement, enters the written notices given at 01:15 and sees the watch withdraw the
notice_missing findings, opens a dealer's p-chart, and, once the night's grave shift is filed
(as the nightly job files it), opens that filed version. Each step is checked on the page
and in the database; once the watch stops, `ack list`, `notice list` and `findings` read the
same from the terminal.

The night is the sample's, not a `simulate --live` one: its pit P1 changes procedure with its
notices in a file of their own, left out here so that an officer has a notice to enter. The
feed is the one `simulate --live` uses (tests/simulate/test_live_feed.py runs that command
beside a watch).

With BACC_SCREENSHOTS=FOLDER (e.g. docs/), a screenshot of each page is saved there as
board-queue.png, board-notices.png, board-dealer.png and board-report.png
(docs/board.md shows them).
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from helpers.browser import MARKS, watched_page
from helpers.cli import Run

from auditor import config
from auditor.board.app import create_app, serve
from auditor.jobs.archive import data_changed_at, report_shift
from auditor.jobs.verify import report_check
from auditor.jobs.watch import Watch, WatchOptions
from auditor.simulate.feed import Feed, schedule
from auditor.store import acks, db, notices, runs

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
CONFIG = SAMPLE / "property.toml"
pytestmark = MARKS
MISSING = ("SELECT table_id FROM current_findings WHERE code = 'procedure.notice_missing' "
           "ORDER BY table_id")


def _logs(tmp_path: Path) -> list[Path]:
    """The sample night as the table systems write it (plain), without the pit's notices."""
    out = tmp_path / "logs"
    out.mkdir()
    for src in sorted(SAMPLE.glob("2026-11-28_*.jsonl*")):
        if "pit-notices" in src.name:
            continue
        data = gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes()
        (out / src.name.removesuffix(".gz")).write_bytes(data)
    return sorted(out.iterdir())


def _until(check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_a_shift_at_the_desk(tmp_path: Path, bacc_audit: Callable[..., Run]) -> None:
    from playwright.sync_api import expect, sync_playwright

    shots = os.environ.get("BACC_SCREENSHOTS")
    conf = config.load(CONFIG)
    con = db.connect(tmp_path / "audit.duckdb")
    spool = tmp_path / "spool"
    spool.mkdir()
    watch = Watch(con, spool, conf, runs.start(con, "watch", {}),
                  WatchOptions(poll=0.02, rescan=0.05, sweep_every=0.5, sweep_share=1.0))
    stop = threading.Event()
    watching = threading.Thread(target=watch.run, args=(stop,), name="watch")
    app = create_app(con.cursor, property_config=conf, poll_interval=0.1,
                     report_check=lambda cur: report_check(cur)[0])

    def read(sql: str) -> list[tuple]:
        cur = con.cursor()
        try:
            return cur.execute(sql).fetchall()
        finally:
            cur.close()

    try:
        with serve(app, "127.0.0.1", 0) as board, sync_playwright() as pw:
            feed = Feed(schedule(_logs(tmp_path), speed=6000.0), spool).start()
            watching.start()
            assert feed.join(120), "the feed did not finish"
            _until(lambda: [t for (t,) in read(MISSING)] == ["MB-01", "MB-02", "MB-03",
                                                             "MB-05", "PB-01"])
            # ... and the watch's last sweeps done: no finding stored for 3 s.
            heads: list[int] = []

            def settled() -> bool:
                heads.append(read("SELECT count(*) FROM findings")[0][0])
                return len(heads) > 15 and heads[-1] == heads[-16]

            _until(settled)
            browser, page, problems, asked = watched_page(
                pw, viewport={"width": 1280, "height": 800})
            page.set_default_timeout(60_000)  # a machine shared by several runs is slow
            expect.set_options(timeout=15_000)

            # 1. The queue: what needs action, counted by severity.
            page.goto(board.url + "/")
            rows = page.locator("#queue tbody tr")
            needing = read("SELECT count(*) FROM current_findings "
                           "WHERE severity IN ('critical', 'major')")[0][0]
            critical = read("SELECT count(*) FROM current_findings "
                            "WHERE severity = 'critical'")[0][0]
            assert needing >= 17 + 3 and critical >= 4  # the batch night's, P1's missing notices
            expect(rows).to_have_count(needing)
            expect(page.locator("#counts .count[data-severity=critical] .n")).to_have_text(
                str(critical))
            expect(rows.first.locator(".sev")).to_have_text("critical")
            if shots:
                page.screenshot(path=str(Path(shots) / "board-queue.png"))
            # ... worked down to zero with one bulk acknowledgement.
            page.check("#all-rows")
            page.fill("input[name=name]", "J. Rivera")
            page.fill("input[name=disposition]", "video reviewed: dealer error")
            page.fill("textarea[name=note]", "one briefing for the pit")
            page.click("button:has-text('Acknowledge ticked findings')")
            expect(page.locator("#done")).to_have_text(f"{needing} acknowledgements recorded.")
            expect(page.locator("#empty")).to_have_text("Nothing needs action.")
            expect(page.locator("#counts .count[data-severity=major] .n")).to_have_text("0")
            cur = con.cursor()
            stored = acks.list_acks(cur)
            cur.close()
            assert len(stored) == needing and len({a.run_id for a in stored}) == 1
            assert {(a.reviewer, a.note) for a in stored} == {
                ("J. Rivera", "one briefing for the pit")}

            # 2. Notices: P1's written notices of 01:15, entered by hand; the watch's next
            # sweep withdraws the three notice_missing of P1.
            page.click("nav >> text=Notices")
            expect(page.locator("#notice-findings")).to_contain_text("procedure.notice_missing")
            page.fill("input[name=by]", "J. Rivera")
            page.select_option("select[name=pit]", "P1")
            page.select_option("select[name=procedure]", "2")
            page.fill("input[name=effective]", "2026-11-29 02:00")
            page.fill("input[name=given_at]", "2026-11-29 01:15")
            page.fill("textarea[name=note]", "letters in the pit binder")
            page.click("button:has-text('Enter notice')")
            expect(page.locator("#done")).to_contain_text(
                "notice 1: pit P1 (the whole pit), procedure 2 from 2026-11-29 02:00:00, "
                "written notice to division given 2026-11-29 01:15:00; entered by J. Rivera")
            _until(lambda: [t for (t,) in read(MISSING)] == ["MB-03", "MB-05"])
            page.goto(board.url + "/notices?date=2026-11-28")
            # MB-01's change, with the two notices entered by hand that now count for it.
            mb01 = page.locator("#changes tbody tr", has_text="MB-01")
            expect(mb01).to_contain_text("division 01:15 (46 min), entered by hand by J. Rivera")
            expect(page.locator("#cleared tbody tr")).to_have_count(3)
            withdrawn = page.locator("#notice-findings tr.withdrawn")
            expect(withdrawn).to_have_count(3)
            expect(withdrawn.first.locator(".code")).to_have_text("procedure.notice_missing")
            expect(page.locator("#hand tbody tr")).to_have_count(2)
            cur = con.cursor()
            assert [n.recipient for n in notices.list_notices(cur)] == [
                "division", "surveillance"]
            cur.close()
            if shots:
                page.screenshot(path=str(Path(shots) / "board-notices.png"), full_page=True)

            # 3. A dealer's chart, and their findings one click away.
            page.goto(board.url + "/dealers?date=2026-11-28&shift_name=grave")
            page.click("#by-dealer >> text=D5839")
            expect(page.locator("h1")).to_have_text(
                "Dealer D5839 · grave shift of gaming day 2026-11-28")
            expect(page.locator("#chart-period svg")).to_have_count(1)
            expect(page.locator("#by-dealer tbody tr")).to_have_count(1)
            expect(page.locator("#by-dealer tbody tr td").nth(1)).to_have_text("58")
            if shots:
                page.screenshot(path=str(Path(shots) / "board-dealer.png"))
            page.click("#dealer-findings")
            expect(page.locator("#feed li.item .code")).to_have_count(2)

            # 4. The night over, its grave shift filed as the nightly job files it; the
            # filed version on the board, its SHA-256 that of the file.
            stop.set()
            watching.join(120)
            filed = report_shift(con, conf, dt.date(2026, 11, 28), "grave",
                                 tmp_path / "archive", data_changed_at(con), lambda _: None,
                                 runs.start(con, "nightly", {}))
            assert filed.path is not None
            page.goto(board.url + "/reports")
            page.click("#versions >> text=v1")
            expect(page.locator("h1")).to_have_text("Report 2026-11-28_grave · version 1")
            sha = hashlib.sha256(filed.path.read_bytes()).hexdigest()
            expect(page.locator("#sha")).to_have_text(sha)
            expect(page.locator("#file-state")).to_contain_text("as filed")
            if shots:
                page.screenshot(path=str(Path(shots) / "board-report.png"))
            # The PDF the link opens, hashed in the browser: the filed file's bytes.
            got = page.evaluate("""async () => {
                const r = await fetch(document.getElementById("open-pdf").href);
                const digest = await crypto.subtle.digest("SHA-256", await r.arrayBuffer());
                return [r.status, Array.from(new Uint8Array(digest),
                                             b => b.toString(16).padStart(2, "0")).join("")];
            }""")
            assert got == [200, sha]

            assert problems == []
            assert all(u.startswith(board.url) for u in asked), "every asset is the board's"
            browser.close()
    finally:
        stop.set()
        if watching.is_alive():
            watching.join(120)
        con.close()
    _the_commands_read_what_the_board_wrote(tmp_path / "audit.duckdb", bacc_audit)


def _the_commands_read_what_the_board_wrote(path: Path, bacc_audit: Callable[..., Run]) -> None:
    """The shift's work seen from the terminal: `ack list`, `notice list` and `findings`
    over the database the board wrote, once the watch is stopped."""
    r = bacc_audit("ack", "list", "--json", "--db", path)
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert len(rows) >= 20 and len({a["run_id"] for a in rows}) == 1
    assert {(a["by"], a["disposition"], a["note"]) for a in rows} == {
        ("J. Rivera", "video reviewed: dealer error", "one briefing for the pit")}
    r = bacc_audit("notice", "list", "--json", "--db", path, "--config", CONFIG)
    assert r.code == 0, r.err
    assert [(n["pit"], n["recipient"]) for n in json.loads(r.out)] == [
        ("P1", "division"), ("P1", "surveillance")]
    r = bacc_audit("findings", "--db", path, "--config", CONFIG, "--format", "jsonl",
                   "--code", "procedure.notice_missing")
    assert r.code == 0, r.err
    assert sorted(json.loads(line)["table"] for line in r.out.splitlines()) == [
        "MB-03", "MB-05"]
