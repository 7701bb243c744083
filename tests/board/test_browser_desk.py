"""A shift at the officer's desk in a real browser (Debian's chromium, driven by Playwright,
headless, 1280 by 800), over a night fed the way the tables write it.

`bacc-audit simulate --live SPOOL --speed 2000` (the command, in a process of its own, as an
operator types it in a second terminal) feeds a night of two mini-baccarat tables, 22:00 to
23:00, into a spool while a `watch` follows it and serves its board from its own connection.
The night has deviations planted, and pit P1 changes to procedure 2 at 22:30 with no notice
given to anyone (`--unnotified-change`: procedure.notice_missing at both tables).

The officer works the queue down to zero with one bulk acknowledgement, opens a finding,
enters the written notices given at 21:45 and sees the watch withdraw both notice_missing,
opens a dealer's p-chart; once the watch is stopped, `bacc-audit nightly` files the grave
shift and the officer opens that filed version. A viewer's login cannot acknowledge (403).
Each step is checked on the page and by the commands a terminal user runs: `ack list`,
`notice list`, `findings`, `nightly --json`.

With BACC_SCREENSHOTS=FOLDER (e.g. docs/), a screenshot of each page is saved there as
board-queue.png, board-finding.png, board-notices.png, board-dealers.png,
board-dealer.png, board-reports.png and board-report.png (docs/board.md shows them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers.browser import MARKS, screenshot_folder, watched_page
from helpers.cli import ENVIRONMENT, Run
from helpers.desk import role_settings
from helpers.logins import PASSWORD

from auditor import config
from auditor.board.app import create_app, serve
from auditor.board.auth import Auth
from auditor.jobs.verify import report_check
from auditor.jobs.watch import Watch, WatchOptions
from auditor.store import db, runs

pytestmark = MARKS
BACC_AUDIT = Path(sys.executable).with_name("bacc-audit")
NIGHT = ("--tables", "2", "--hours", "1", "--games", "mini_baccarat", "--seed", "7",
         "--deviation-rate", "0.03", "--unnotified-change", "--date", "2026-11-28")
PROPERTY = """[property]
name = "Harbor Point Casino (demo)"
time_zone = "America/New_York"
gaming_day_start = "06:00"
"""
MISSING = ("SELECT table_id FROM current_findings WHERE code = 'procedure.notice_missing' "
           "ORDER BY table_id")
NEEDING = "SELECT count(*) FROM current_findings WHERE severity IN ('critical', 'major')"


def until(check: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def simulate_live(spool: Path, out: Path, speed: int) -> subprocess.Popen[str]:
    """`bacc-audit simulate --live SPOOL --speed N` in a process of its own: terminal 2."""
    env = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT}
    return subprocess.Popen(
        [str(BACC_AUDIT), "simulate", "--live", str(spool), "--out", str(out), *NIGHT,
         "--speed", str(speed)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_a_shift_at_the_desk(tmp_path: Path, bacc_audit: Callable[..., Run]) -> None:
    from playwright.sync_api import expect, sync_playwright

    shots = screenshot_folder()

    def shot(page: Any, name: str, **options: Any) -> None:
        if shots:
            page.screenshot(path=str(shots / f"board-{name}.png"), **options)

    conf_path = tmp_path / "property.toml"
    conf_path.write_text(PROPERTY)
    conf = config.load(conf_path)
    path = tmp_path / "audit.duckdb"
    con = db.connect(path)
    spool = tmp_path / "spool"
    watch = Watch(con, spool, conf, runs.start(con, "watch", {}),
                  WatchOptions(poll=0.02, rescan=0.05, sweep_every=0.5, sweep_share=1.0))
    stop = threading.Event()
    watching = threading.Thread(target=watch.run, args=(stop,), name="watch")
    spool.mkdir()
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
            watching.start()
            feeder = simulate_live(spool, tmp_path / "night", 2000)
            out, err = feeder.communicate(timeout=300)
            assert feeder.returncode == 0, err
            lines = sum(len(p.read_bytes().splitlines()) for p in spool.iterdir())
            assert f"fed {lines:,} lines into {spool}" in out
            assert "at 2000 times the logged pace" in err
            until(lambda: [t for (t,) in read(MISSING)] == ["MB-01", "MB-02"])
            heads: list[int] = []

            def settled() -> bool:  # the watch's last sweeps done: no finding stored for 3 s
                heads.append(read("SELECT count(*) FROM findings")[0][0])
                return len(heads) > 15 and heads[-1] == heads[-16]

            until(settled)
            browser, page, problems, asked = watched_page(
                pw, viewport={"width": 1280, "height": 800})
            page.set_default_timeout(60_000)  # a machine shared by several runs is slow
            expect.set_options(timeout=15_000)

            # 1. The queue: what needs action, gravest first, counted by severity: the
            # night's 2 critical (a missed Player draw, a resent file altered) and 6 major.
            page.goto(board.url + "/")
            rows = page.locator("#queue tbody tr")
            assert read(NEEDING) == [(8,)]
            expect(rows).to_have_count(8)
            expect(page.locator("#counts .count[data-severity=critical] .n")).to_have_text("2")
            expect(page.locator("#counts .count[data-severity=major] .n")).to_have_text("6")
            assert rows.locator(".sev").all_text_contents() == ["critical"] * 2 + ["major"] * 6
            missing = rows.filter(has_text="procedure.notice_missing")
            expect(missing).to_have_count(2)
            shot(page, "queue")

            # A finding's page, one click away.
            missing.first.locator(".code a").click()
            expect(page.locator("h1")).to_have_text("Finding Ffa33c6946921")
            expect(page.locator(".finding .head")).to_contain_text("procedure.notice_missing")
            shot(page, "finding")
            page.go_back()

            # ... worked down to zero with one bulk acknowledgement.
            page.check("#all-rows")
            page.fill("input[name=name]", "J. Rivera")
            page.fill("input[name=disposition]", "video reviewed: dealer error")
            page.fill("textarea[name=note]", "one briefing for the pit")
            page.click("button:has-text('Acknowledge ticked findings')")
            expect(page.locator("#done")).to_have_text("8 acknowledgements recorded.")
            expect(page.locator("#empty")).to_have_text("Nothing needs action.")
            expect(page.locator("#counts .count[data-severity=major] .n")).to_have_text("0")

            # 2. Notices: nobody had been told of P1's change; the written notices the pit
            # boss gave at 21:45, entered by hand, make the watch withdraw both findings.
            page.click("nav >> text=Notices")
            expect(page.locator("#notice-findings .code")).to_have_text(
                ["procedure.notice_missing"] * 2)
            expect(page.locator("#changes tbody tr", has_text="MB-01")).to_contain_text("none")
            page.fill("input[name=by]", "J. Rivera")
            page.select_option("select[name=pit]", "P1")
            page.select_option("select[name=procedure]", "2")
            page.fill("input[name=effective]", "2026-11-28 22:30")
            page.fill("input[name=given_at]", "2026-11-28 21:45")
            page.fill("textarea[name=note]", "letters in the pit binder")
            page.click("button:has-text('Enter notice')")
            expect(page.locator("#done")).to_contain_text(
                "notice 1: pit P1 (the whole pit), procedure 2 from 2026-11-28 22:30:00, "
                "written notice to division given 2026-11-28 21:45:00; entered by J. Rivera")
            until(lambda: read(MISSING) == [])
            page.goto(board.url + "/notices?date=2026-11-28")
            expect(page.locator("#changes tbody tr", has_text="MB-01")).to_contain_text(
                "division 21:45 (45 min), entered by hand by J. Rivera")
            withdrawn = page.locator("#notice-findings tr.withdrawn")
            expect(withdrawn).to_have_count(2)
            expect(withdrawn.locator(".status")).to_have_text(["withdrawn"] * 2)
            expect(page.locator("#cleared tbody tr")).to_have_count(2)
            expect(page.locator("#hand tbody tr")).to_have_count(2)
            shot(page, "notices", full_page=True)

            # 3. The dealers' p-chart of the grave shift, and a dealer's findings one click
            # away: D1788 dealt 63 rounds, 2 with a finding.
            page.goto(board.url + "/dealers?date=2026-11-28&shift_name=grave")
            expect(page.locator("#chart-period svg")).to_have_count(1)
            expect(page.locator("#by-dealer tbody tr")).to_have_count(4)
            shot(page, "dealers", full_page=True)
            page.click("#by-dealer >> text=D1788")
            expect(page.locator("h1")).to_have_text(
                "Dealer D1788 · grave shift of gaming day 2026-11-28")
            expect(page.locator("#by-dealer tbody tr td").nth(1)).to_have_text("63")
            expect(page.locator("#by-dealer tbody tr td").nth(2)).to_have_text("2")
            shot(page, "dealer")
            page.click("#dealer-findings")
            expect(page.locator("#feed li.item .code")).to_have_text(
                ["result.misannounced", "vig.not_allowed"])
            assert problems == []
            assert all(u.startswith(board.url) for u in asked), "every asset is the board's"
            browser.close()
    finally:
        stop.set()
        if watching.is_alive():
            watching.join(120)
        con.close()

    # What the board wrote, read from the terminal once the watch is stopped.
    r = bacc_audit("ack", "list", "--json", "--db", path)
    assert r.code == 0, r.err
    acked = json.loads(r.out)
    assert len(acked) == 8 and len({a["run_id"] for a in acked}) == 1
    assert {(a["by"], a["disposition"], a["note"]) for a in acked} == {
        ("J. Rivera", "video reviewed: dealer error", "one briefing for the pit")}
    r = bacc_audit("notice", "list", "--json", "--db", path, "--config", conf_path)
    assert r.code == 0, r.err
    assert [(n["pit"], n["procedure"], n["recipient"]) for n in json.loads(r.out)] == [
        ("P1", 2, "division"), ("P1", 2, "surveillance")]
    r = bacc_audit("findings", "--db", path, "--config", conf_path, "--format", "jsonl",
                   "--code", "procedure.*")
    assert r.code == 0, r.err
    assert [json.loads(line)["code"] for line in r.out.splitlines()] == [
        "procedure.undeclared_change"]

    # 4. The night over, `nightly` files the grave shift (the day and swing shifts dealt no
    # round); the resent file the spool still holds is refused as altered once more, and
    # every critical finding is acknowledged: exit 0 under --fail-on critical:unacknowledged.
    r = bacc_audit("nightly", "--spool", spool, "--db", path, "--config", conf_path,
                   "--archive", tmp_path / "archive", "--date", "2026-11-28", "--json",
                   "--fail-on", "critical:unacknowledged")
    summary = json.loads(r.out)
    assert (r.code, summary["files_by_status"]) == (
        0, {"already_ingested": 2, "refused_altered": 1}), r.err
    filed = [s for s in summary["reports"] if s["status"] == "written"]
    assert [(s["shift"], s["version"], s["rounds"]) for s in filed] == [("grave", 1, 128)]
    _the_filed_version_and_a_viewer(path, conf, tmp_path / "archive", filed[0], shot)


def _the_filed_version_and_a_viewer(path: Path, conf: config.PropertyConfig, archive: Path,
                                    filed: dict, shot: Callable[..., None]) -> None:
    """The filed version on the board (given the archive, as `watch --web` gives it), its
    SHA-256 the one `nightly` printed and the PDF's bytes hashed in the browser; then a
    viewer's login, which reads and cannot acknowledge."""
    from playwright.sync_api import expect, sync_playwright

    con = db.connect(path)
    officer = create_app(con.cursor, property_config=conf, archive=archive)
    settings = role_settings()
    viewer = create_app(con.cursor, property_config=conf, settings=settings,
                        auth=Auth.for_host(settings))
    try:
        with serve(officer, "127.0.0.1", 0) as board, serve(viewer, "127.0.0.1", 0) as seen, \
                sync_playwright() as pw:
            browser, page, problems, _ = watched_page(pw, viewport={"width": 1280, "height": 800})
            page.set_default_timeout(60_000)
            page.goto(board.url + "/reports")
            expect(page.locator("#versions tbody tr")).to_have_count(1)
            expect(page.locator("#versions .sha")).to_have_text(filed["sha256"][:16] + "…")
            shot(page, "reports")
            page.click("#versions >> text=v1")
            expect(page.locator("h1")).to_have_text("Report 2026-11-28_grave · version 1")
            expect(page.locator("#sha")).to_have_text(filed["sha256"])
            expect(page.locator("#file-state")).to_contain_text("as filed")
            shot(page, "report")
            got = page.evaluate("""async () => {
                const r = await fetch(document.getElementById("open-pdf").href);
                const digest = await crypto.subtle.digest("SHA-256", await r.arrayBuffer());
                return [r.status, Array.from(new Uint8Array(digest),
                                             b => b.toString(16).padStart(2, "0")).join("")];
            }""")
            assert got == [200, filed["sha256"]]

            # A viewer reads the queue (nothing to tick) and an acknowledgement posted
            # anyway, with the page's own CSRF token, is refused.
            page.goto(seen.url + "/login")
            page.fill("input[name=name]", "v.watcher")
            page.fill("input[name=password]", PASSWORD)
            page.click("button:has-text('Log in')")
            expect(page.locator("header .who")).to_contain_text("v.watcher (viewer)")
            page.goto(seen.url + "/?all=1")
            expect(page.locator("#queue input[type=checkbox]")).to_have_count(0)
            status = page.evaluate("""async () => {
                const form = new FormData();
                form.append("csrf", document.querySelector("input[name=csrf]").value);
                form.append("finding", "Fe56643a469ae");
                form.append("disposition", "no action needed");
                const r = await fetch("/ack", {method: "POST", body: form});
                return [r.status, await r.text()];
            }""")
            assert status[0] == 403 and "role viewer" in status[1]
            assert problems == []
            browser.close()
        cur = con.cursor()
        assert cur.execute("SELECT count(*) FROM acknowledgements").fetchone() == (8,)
        cur.close()
    finally:
        con.close()
