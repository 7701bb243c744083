"""The desk at the keyboard, on a tablet and while findings arrive, in a real browser (Debian's
chromium driven by Playwright, headless), over the sample night (docs/board.md, "Keyboard,
tablets, and findings that arrive").

- The queue worked with the keyboard alone: Tab reaches the skip link, the box that ticks
  every row, each row's box in the table's order and then the acknowledgement's fields and
  button; every stop shows its focus ring; Space ticks, Enter submits.
- At a tablet's 820x1180 and 1180x820 and at 1280x800, no page of the desk scrolls sideways
  and every form control lies within the screen (a wide table scrolls inside the page).
- Findings stored while the queue and the feed are open move no row already on screen.

With BACC_SCREENSHOTS=FOLDER, the queue at 820x1180 is saved there as board-tablet.png.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from helpers.browser import MARKS, screenshot_folder, watched_page
from helpers.sample import CONFIG, build, store_mb01

from auditor import config
from auditor.board.app import create_app, serve
from auditor.jobs.archive import data_changed_at, report_shift
from auditor.store import acks, db, runs

pytestmark = MARKS
FOCUSED = """() => {
    const el = document.activeElement;
    const style = getComputedStyle(el);
    return {tag: el.tagName, id: el.id, name: el.getAttribute("name") || "",
            value: el.value || "", text: (el.textContent || "").trim(),
            ring: style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2};
}"""
# Where the page scrolls sideways, and each visible form control or link not within the
# screen, unless a container that scrolls sideways holds it (a wide table).
OUTSIDE = """() => {
    const doc = document.documentElement;
    const out = [];
    for (const el of document.querySelectorAll("a, button, input, select, textarea")) {
        const r = el.getBoundingClientRect();
        if ((r.width === 0 && r.height === 0) || el.classList.contains("skip")
            || el.type === "hidden") {
            continue;
        }
        let p = el.parentElement;
        let scrolls = false;
        while (p && p !== document.body) {
            const s = getComputedStyle(p);
            if ((s.overflowX === "auto" || s.overflowX === "scroll")
                && p.scrollWidth > p.clientWidth) {
                scrolls = true;
                break;
            }
            p = p.parentElement;
        }
        if (!scrolls && (r.left < 0 || r.right > doc.clientWidth + 0.5)) {
            out.push(el.outerHTML.slice(0, 100));
        }
    }
    return {wide: doc.scrollWidth - doc.clientWidth, outside: out};
}"""
BOXES = """(rows) => rows.map(r => {
    const b = r.getBoundingClientRect();
    return [r.dataset.id || r.dataset.cursor, Math.round(b.top * 10) / 10, Math.round(b.left)];
})"""
VIEWPORTS = [(820, 1180), (1180, 820), (1280, 800)]


@contextmanager
def desk(path: Path, width: int = 1280, height: int = 800) -> Iterator[tuple[Any, Any, Any]]:
    """A board over the database at `path` and a chromium page of it: (board, page, con)."""
    from playwright.sync_api import expect, sync_playwright

    con = db.connect(path)
    app = create_app(con.cursor, property_config=config.load(CONFIG), poll_interval=0.1)
    try:
        with serve(app, "127.0.0.1", 0) as board, sync_playwright() as pw:
            browser, page, problems, asked = watched_page(
                pw, viewport={"width": width, "height": height})
            page.set_default_timeout(60_000)  # a machine shared by several runs is slow
            expect.set_options(timeout=15_000)
            yield board, page, con
            assert problems == []
            assert all(u.startswith(board.url) for u in asked), "every asset is the board's"
            browser.close()
    finally:
        con.close()


def tab_until(page: Any, found: Callable[[dict], bool], most: int = 150) -> dict:
    """Press Tab until the focused element is `found`; what it is."""
    for _ in range(most):
        page.keyboard.press("Tab")
        now = page.evaluate(FOCUSED)
        if found(now):
            return now
    raise AssertionError("Tab never reached it")


def test_the_queue_worked_with_the_keyboard_alone(night_copy: Path) -> None:
    from playwright.sync_api import expect

    with desk(night_copy) as (board, page, con):
        page.goto(board.url + "/")
        rows = page.locator("#queue tbody tr")
        expect(rows).to_have_count(17)
        ids = rows.evaluate_all("rows => rows.map(r => r.dataset.id)")
        stops: list[dict] = []
        while not stops or stops[-1]["tag"] != "BUTTON" or "Acknowledge" not in stops[-1]["text"]:
            page.keyboard.press("Tab")
            stops.append(page.evaluate(FOCUSED))
            assert len(stops) < 200, [s["tag"] + s["id"] + s["name"] for s in stops[-5:]]
        assert stops[0]["text"] == "Skip to the page"
        where = {(s["id"] or s["name"] + s["value"]): i for i, s in enumerate(stops)}
        boxes = [where["finding" + i] for i in ids]
        assert boxes == sorted(boxes), "each row's box in the table's order"
        assert where["all-rows"] < boxes[0]
        assert boxes[-1] < where["name"] < where["disposition"] < where["note"] < len(stops) - 1
        assert [s for s in stops if not s["ring"]] == [], "every stop shows its focus ring"

        # Space on the head's box ticks every row, again unticks them.
        page.goto(board.url + "/")
        tab_until(page, lambda s: s["id"] == "all-rows")
        page.keyboard.press("Space")
        expect(page.locator("#queue tbody input:checked")).to_have_count(17)
        page.keyboard.press("Space")
        expect(page.locator("#queue tbody input:checked")).to_have_count(0)
        # The first and third rows ticked, the form filled and sent, keys only.
        tab_until(page, lambda s: s["value"] == ids[0])
        page.keyboard.press("Space")
        tab_until(page, lambda s: s["value"] == ids[2])
        page.keyboard.press("Space")
        tab_until(page, lambda s: s["name"] == "name")
        page.keyboard.type("J. Rivera")
        tab_until(page, lambda s: s["name"] == "disposition")
        page.keyboard.type("dealer retrained")
        tab_until(page, lambda s: s["tag"] == "BUTTON" and "Acknowledge" in s["text"])
        page.keyboard.press("Enter")
        expect(page.locator("#done")).to_have_text("2 acknowledgements recorded.")
        expect(rows).to_have_count(15)
        stored = acks.list_acks(con)
        assert sorted(acks.as_dict(a)["finding_id"] for a in stored) == sorted(
            [ids[0], ids[2]])
        assert {(a.reviewer, a.disposition) for a in stored} == {
            ("J. Rivera", "dealer retrained")}


def test_no_page_scrolls_sideways_on_a_tablet_or_at_1280x800(night_copy: Path) -> None:
    conf = config.load(CONFIG)
    con = db.connect(night_copy)  # a filed version, for its page
    filed = report_shift(con, conf, dt.date(2026, 11, 28), "grave",
                         night_copy.parent / "archive", data_changed_at(con), lambda _: None,
                         runs.start(con, "nightly", {}))
    con.close()
    assert filed.version == 1
    pages = ["/", "/?all=1", "/feed", "/floor?date=2026-11-28", "/notices?date=2026-11-28",
             "/dealers?date=2026-11-28&shift_name=grave", "/dealers/D5839?date=2026-11-28",
             "/reports", "/reports/2026-11-28_grave/v1", "/finding/Fc95f8bf836d2",
             "/round?table=MB-01&shoe=MB-01-1128-01&round=72"]
    shots = screenshot_folder()
    with desk(night_copy) as (board, page, _):
        for width, height in VIEWPORTS:
            page.set_viewport_size({"width": width, "height": height})
            for path in pages:
                page.goto(board.url + path)
                got = page.evaluate(OUTSIDE)
                assert got == {"wide": 0, "outside": []}, (width, height, path, got)
                if shots and (width, path) == (820, "/"):
                    page.screenshot(path=str(shots / "board-tablet.png"))
            # The bulk acknowledgement's button is on the page and can be pressed.
            page.goto(board.url + "/")
            button = page.locator("button:has-text('Acknowledge ticked findings')")
            button.scroll_into_view_if_needed()
            box = button.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width


def test_rows_on_screen_do_not_move_when_findings_arrive(tmp_path: Path) -> None:
    """The queue counts what arrived in its header line and lists it on a reload; the feed
    puts it at the top, and a reader scrolled into the feed keeps the rows on screen where
    they were. MB-01's log, stored while the three pages are open (the queue, the feed at
    its top, the feed scrolled), brings 2 findings."""
    from playwright.sync_api import expect

    path = build(tmp_path / "audit.duckdb", with_mb01=False)
    with desk(path, 1280, 800) as (board, queue, con):
        feeds = {}
        for scrolled in (False, True):
            feed = queue.context.browser.new_page(viewport={"width": 1280, "height": 800})
            feed.goto(board.url + "/feed")
            expect(feed.locator("#live")).to_have_text("live")
            expect(feed.locator("#feed li.item")).to_have_count(20)
            if scrolled:
                feed.evaluate("window.scrollTo(0, 300)")
            items = feed.locator("#feed li.item")
            feeds[scrolled] = (items, items.evaluate_all(BOXES))
        queue.bring_to_front()
        queue.goto(board.url + "/")
        rows = queue.locator("#queue tbody tr")
        expect(rows).to_have_count(15)
        queue_before = rows.evaluate_all(BOXES)
        counts_before = queue.locator("#counts").bounding_box()

        store_mb01(con)
        expect(queue.locator("#news")).to_have_text("2 new findings: reload")
        assert rows.evaluate_all(BOXES) == queue_before
        assert queue.locator("#counts").bounding_box() == counts_before
        for scrolled, (feed_items, feed_before) in feeds.items():
            expect(feed_items).to_have_count(22)
            after = {key: (top, left) for key, top, left in feed_items.evaluate_all(BOXES)}
            moved = {round(after[k][0] - top) for k, top, _ in feed_before}
            assert {after[k][1] - left for k, _, left in feed_before} == {0}
            if scrolled:  # the 20 rows that were there stay where they were on screen (the
                # page scrolls by whole pixels: within one)
                assert moved <= {-1, 0, 1}, moved
            else:  # at the top, the feed is a ticker: the new ones come in above the others
                assert len(moved) == 1 and moved.pop() > 40, moved
        queue.click("#news a")
        expect(rows).to_have_count(17)
        # MB-01's missed Banker draw in its place: the second critical by video deadline.
        expect(rows.nth(1).locator(".code")).to_have_text("draw.banker_missed")
        expect(rows.nth(1)).to_have_attribute("data-id", "Fc95f8bf836d2")
