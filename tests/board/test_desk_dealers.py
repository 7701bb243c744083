"""The dealers pages (`/dealers`, `/dealers/NAME`): the report's "By dealer" p-chart beside the
last 30 gaming days and the trend, the same numbers as the report's section, and each
dealer's findings one click away (the feed filtered by dealer)."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
from helpers.desk import cells, desk_client, words
from helpers.sample import CONFIG

from auditor import config
from auditor.report.basis import read_basis
from auditor.report.gather import scope_for
from auditor.report.history import section_dealers


def test_the_shifts_dealers_are_the_reports_numbers(night_copy: Path) -> None:
    con = duckdb.connect(str(night_copy), read_only=True)
    conf = config.load(CONFIG)
    basis = read_basis(con, conf, scope_for(conf, con, shift="2026-11-28/grave"))
    report = section_dealers(basis)
    con.close()
    with desk_client(night_copy) as c:
        page = c.get("/dealers", params={"date": "2026-11-28", "shift_name": "grave"})
        assert page.status_code == 200
        text = words(page.text)
        assert "Dealers · grave shift of gaming day 2026-11-28" in text
        assert "against the period's 5.5 per 1,000 (17 of 3,097 rounds)" in text
        names = cells(page.text, "dealer")
        assert names == [r.dealer for r in report["dealers"]] and len(names) == 32
        # D5839's line: this shift, then the last 30 gaming days.
        assert "D5839 58 1 17.2 34.6 117 2 17.1 26.3" in text
        assert page.text.count("<svg") == 2  # the shift's p-chart and the 30 days'
        assert 'aria-label="Error rounds per 1,000 by dealer, grave shift of gaming day ' \
            '2026-11-28"' in page.text
        assert "2026-11-28 3,218 18 5.6" in text  # the trend's day
        whole = c.get("/dealers", params={"date": "2026-11-28"})
        assert "Dealers · gaming day 2026-11-28" in words(whole.text)


def test_a_dealers_page_links_to_their_findings(night_copy: Path) -> None:
    with desk_client(night_copy) as c:
        page = c.get("/dealers/D5839", params={"date": "2026-11-28", "shift_name": "grave"})
        assert page.status_code == 200
        assert cells(page.text, "dealer") == ["D5839"]
        link = re.search(r'id="dealer-findings" href="([^"]+)"', page.text)
        assert link and link.group(1) == "/feed?dealer=D5839"
        feed = c.get(link.group(1))
        codes = re.findall(r'class="code" href="[^"]+">([^<]+)<', feed.text)
        assert sorted(codes) == ["announce.total_cards_missing", "settle.wrong_amount"]
        queue = c.get("/", params={"dealer": "D5839", "all": "1"})
        assert cells(queue.text, "code") == ["settle.wrong_amount", "announce.total_cards_missing"]
        assert cells(queue.text, "dealer") == ["D5839", "D5839"]
        nobody = c.get("/dealers/D0000", params={"date": "2026-11-28"})
        assert "D0000 dealt no round in the gaming day 2026-11-28." in words(nobody.text)
        none = c.get("/dealers", params={"date": "2026-11-20"})
        assert none.status_code == 200 and "no rounds in the gaming day 2026-11-20" in none.text
