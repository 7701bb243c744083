"""The board in a real browser: Debian's chromium, driven by Playwright, headless.

The test serves the board on a free port over the sample night without MB-01's log, opens
the feed, then stores MB-01's findings the way `bacc-audit watch` does (ingest, audit) into the
same database, and watches the missed Banker draw arrive in the feed without a reload. It
opens that round's page (the cards in dealing order), acknowledges the finding through the
form, and finds the acknowledgement in the next report's PDF text.

One process holds the database (DuckDB admits one writer): the board reads through cursors of
the test's connection, as it does through the writer's in `watch`.

Chromium is Debian's (`apt-get install chromium`; .ci/run installs it): Playwright's own
browser downloads are not used. Without it the test is skipped, saying so.
"""

from __future__ import annotations

from pathlib import Path

from helpers.browser import MARKS, watched_page
from helpers.pdfs import pdf_text

from auditor import config
from auditor.audit.run import audit
from auditor.board.app import create_app, serve
from auditor.ingest.run import ingest
from auditor.report import gather, render
from auditor.store import acks, db, runs

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
CONFIG = SAMPLE / "property.toml"
MB01 = SAMPLE / "2026-11-28_MB-01.jsonl"

pytestmark = MARKS


def test_a_new_finding_arrives_live_its_round_shows_and_its_ack_reaches_the_report(
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    conf = config.load(CONFIG)
    con = db.connect(tmp_path / "audit.duckdb")
    logs = [f for f in sorted(SAMPLE.glob("2026-11-28_*")) if f != MB01]
    ingest(con, logs, runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), conf)
    app = create_app(con.cursor, property_config=conf, poll_interval=0.1)
    try:
        with serve(app, "127.0.0.1", 0) as board, sync_playwright() as pw:
            browser, page, problems, asked = watched_page(
                pw, viewport={"width": 1280, "height": 800})
            page.set_default_timeout(60_000)  # a machine shared by several runs is slow
            expect.set_options(timeout=15_000)

            page.goto(board.url + "/feed")
            expect(page.locator("#live")).to_have_text("live")
            items = page.locator("#feed li.item")
            expect(items).to_have_count(20)
            expect(page.locator("#feed", has_text="draw.banker_missed")).to_have_count(0)
            page.evaluate("window.sameDocument = true")  # gone if the page reloads

            # The writer stores MB-01's findings; the page is told, no reload.
            ingest(con, [MB01], runs.start(con, "ingest", {}))
            audit(con, runs.start(con, "audit", {}), conf)
            expect(items).to_have_count(22, timeout=5000)
            newest = items.first
            expect(newest.locator(".code")).to_have_text("vig.wrong_amount")
            missed = items.nth(1)
            expect(missed.locator(".code")).to_have_text("draw.banker_missed")
            expect(missed.locator(".table")).to_have_text("MB-01")
            expect(missed.locator(".message")).to_have_text(
                "Banker 9s 3d (2) had to draw a third card with the Player standing but stood."
            )
            assert page.evaluate("window.sameDocument") is True

            # Its round: the cards in dealing order.
            missed.locator(".round-link").click()
            expect(page.locator("h1")).to_have_text("MB-01 · shoe MB-01-1128-01 · round 72")
            faces = page.locator("#round-cards .card-box")
            expect(faces).to_have_count(4)
            assert [faces.nth(i).get_attribute("data-card") for i in range(4)] == [
                "8♦", "9♠", "9♦", "3♦",
            ]
            expect(page.locator("#round-cards .counts")).to_have_text("Player 7, Banker 2")

            # Acknowledge it from its page.
            page.locator(".finding .head a", has_text="draw.banker_missed").click()
            expect(page.locator("h1")).to_have_text("Finding Fc95f8bf836d2")
            page.fill("input[name=name]", "J. Rivera")
            page.fill("input[name=disposition]", "video reviewed: dealer error")
            page.fill("textarea[name=note]", "patron paid the difference")
            page.click("button:has-text('Record acknowledgement')")
            expect(page.locator(".notice")).to_have_text("Acknowledgement 1 recorded.")
            expect(page.locator(".review .by")).to_have_text("J. Rivera")

            assert problems == []
            assert all(u.startswith(board.url) for u in asked), "every asset is the board's"
            browser.close()

        (a,) = acks.list_acks(con)
        assert (a.reviewer, a.disposition) == ("J. Rivera", "video reviewed: dealer error")
        # The next report of the shift shows the acknowledgement beside the finding.
        reader = con.cursor()
        scope = gather.scope_for(conf, reader, shift="2026-11-28/grave", table="MB-01")
        pdf = render.write_report(reader, conf, scope, tmp_path / "grave.pdf")
        reader.close()
        text = pdf_text(pdf)
        assert "by J. Rivera: video reviewed: dealer error (patron paid the difference)" in text
    finally:
        con.close()
