"""The live board (auditor/board): its pages over the sample night, the JSON Lines API and its
exact cursor, the Server-Sent Events stream, acknowledgements from the form, CSRF and logins.

The sample night in two databases, each a copy of a build made once a run
(helpers/sample.built): without MB-01's log (`night`, 20 findings), so a test can store
MB-01's two planted findings (a missed Banker draw, round 72 of shoe MB-01-1128-01; a short
vigorish) while the board runs, and with it (`full`, 22 findings).
"""

from __future__ import annotations

import datetime as dt
import html
import json
import re
import shutil
import threading
import time
import urllib.parse
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import duckdb
import httpx2
import pytest
from helpers.pdfs import pdf_text
from helpers.sample import CONFIG, LOCAL, MB01, SHIFT, built, local_client, plain, store_mb01
from starlette.testclient import TestClient

from auditor import config
from auditor.board import feed
from auditor.board.api import CURSOR_HEADER
from auditor.board.app import create_app, serve
from auditor.board.auth import Auth, hash_password, token_sha256, verify_password
from auditor.board.settings import (
    BoardSettings,
    Token,
    load_settings,
    parse_listen,
    settings_from_table,
)
from auditor.errors import UserError
from auditor.rules.codes import REGISTRY
from auditor.store import acks, db, findings, runs
from auditor.store.filters import Filter


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built(tmp_path_factory, tmp_path_factory.mktemp("board") / "night.duckdb",
                 with_mb01=False)


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built(tmp_path_factory, tmp_path_factory.mktemp("board") / "full.duckdb",
                 with_mb01=True)


def copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / src.name
    shutil.copy2(src, dst)
    return dst


@pytest.fixture
def conf() -> config.PropertyConfig:
    return config.load(CONFIG)


@pytest.fixture
def shared(night: Path, tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A private copy of `night`, opened read-write as `watch` holds it."""
    con = db.connect(copy(night, tmp_path))
    try:
        yield con
    finally:
        con.close()


def export(con: duckdb.DuckDBPyConnection, **filters: Any) -> list[dict[str, Any]]:
    """What `bacc-audit findings --format jsonl` writes, as records."""
    zone = config.load(CONFIG).zone_for(con)
    return findings.select(con, zone=zone, **filters)


class Page(HTMLParser):
    """The parts of a board page the tests read: feed items (cursor, code, table, message),
    card faces in order, forms' hidden CSRF fields."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.items: list[dict[str, str]] = []
        self.cards: list[str] = []
        self.round_cards: list[str] = []
        self.csrf: list[str] = []
        self._field: str | None = None
        self._in_round_cards = 0
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "li" and "item" in classes and a.get("data-cursor"):
            self.items.append({"cursor": a["data-cursor"] or "", "code": "", "table": "",
                               "message": "", "sev": ""})
        elif tag == "div" and a.get("id") == "round-cards":
            self._in_round_cards = 1
        elif tag == "span" and "card-box" in classes:
            self.cards.append(a.get("data-card") or "")
            if self._in_round_cards:
                self.round_cards.append(a.get("data-card") or "")
        elif tag == "input" and a.get("name") == "csrf":
            self.csrf.append(a.get("value") or "")
        if self.items and tag in ("a", "span") and classes and classes[0] in (
            "code", "table", "message", "sev",
        ):
            self._field = classes[0]

    def handle_endtag(self, tag: str) -> None:
        if tag in ("a", "span"):
            self._field = None
        if tag == "div" and self._in_round_cards:
            self._in_round_cards = 0 if self.round_cards else 1

    def handle_data(self, data: str) -> None:
        if self._field and self.items:
            self.items[-1][self._field] += data.strip()


# -- pages --------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_feed_lists_the_real_findings_newest_stored_first(full: Path, conf: Any) -> None:
    con = duckdb.connect(str(full), read_only=True)
    expected = export(con)
    ids = dict(con.execute("SELECT fingerprint, max(id) FROM findings GROUP BY 1").fetchall())
    con.close()
    app = create_app(full, property_config=conf)
    with local_client(app) as client:
        r = client.get("/feed")
    assert r.status_code == 200
    items = Page(r.text).items
    assert len(items) == len(expected) == 22
    # Newest stored first: MB-01's two findings were stored last... and the order is the ids'.
    by_cursor = sorted(expected, key=lambda f: -ids[f["fingerprint"]])
    assert [(i["code"], i["table"], i["message"]) for i in items] == [
        (f["code"], f["table"] or f["pit"] or "", f["message"]) for f in by_cursor
    ]
    shown = {(i["code"], i["table"]): i["message"] for i in items}
    assert shown[("draw.banker_missed", "MB-01")] == (
        "Banker 9s 3d (2) had to draw a third card with the Player standing but stood."
    )
    assert shown[("settle.wrong_amount", "MB-04")] == (
        "Seat 7's 100.00 Player wager should have been paid 100.00 and was paid 90.00."
    )
    assert shown[("log.seq_gap", "NZ-01")] == (
        "Table NZ-01: seq 3218 is followed by seq 3222; 3 events are missing"
    )
    # Every asset the page asks for is the board's own: no CDN, no other host.
    assert not re.search(r'(src|href)="(https?:)?//', r.text)
    assert "Content-Security-Policy" in r.headers


def test_the_round_page_shows_the_cards_in_dealing_order(full: Path, conf: Any) -> None:
    # The planted missed Banker draw: the log's card events of round 72, in seq order.
    dealt = []
    for line in MB01.read_text().splitlines():
        e = json.loads(line)
        if (e.get("type"), e.get("shoe"), e.get("round")) == ("card", "MB-01-1128-01", 72):
            dealt.append((e["seq"], e["card"]))
    assert [c for _, c in sorted(dealt)] == ["8d", "9s", "9d", "3d"]
    app = create_app(full, property_config=conf)
    with local_client(app) as client:
        r = client.get("/round", params={"table": "MB-01", "shoe": "MB-01-1128-01", "round": 72})
        missing = client.get("/round", params={"table": "MB-01", "shoe": "x", "round": 1})
    assert r.status_code == 200, r.text
    page = Page(r.text)
    assert page.round_cards == ["8♦", "9♠", "9♦", "3♦"]
    text = html.unescape(r.text)
    assert "Player 7, Banker 2" in text
    assert "P #1146" in text and "B #1149" in text  # each card's hand and seq
    # The round's finding in full: the rule, its source line, the video deadline.
    assert "draw.banker_missed" in text
    assert "N.J.A.C. 13:69F-7.7, 7.8, 7.9 (the Banker's third card)" in text  # the citation
    assert REGISTRY["draw.banker_missed"].rule in text  # the rule in words, from the registry
    assert "/2026-11-28_MB-01.jsonl:1149" in text
    assert "pull the surveillance video by 2026-12-05 23:11" in text
    # Every event with the file and line it came from; money as decimals.
    assert "seat 2, player, 200.00" in text
    assert "/2026-11-28_MB-01.jsonl:1142" in text
    assert missing.status_code == 404


def test_the_finding_page_shows_expected_against_observed_rule_source_and_video(
    full: Path, conf: Any
) -> None:
    con = duckdb.connect(str(full), read_only=True)
    (fingerprint,) = con.execute(
        "SELECT fingerprint FROM findings WHERE code = 'vig.wrong_amount'").fetchall()[0]
    con.close()
    app = create_app(full, property_config=conf)
    with local_client(app) as client:
        r = client.get("/finding/Fc407b86fa0d7")  # vig.wrong_amount, MB-01 shoe 3 round 47
        by_fingerprint = client.get("/finding/" + urllib.parse.quote(fingerprint, safe=""))
        unknown = client.get("/finding/F000000000000")
    assert r.status_code == 200, r.text
    text = html.unescape(r.text)
    assert "Seat 5 owed 5.00 vigorish on its winning 100.00 Banker wager; 4.00 was marked." \
        in text
    expected = re.search(r'<pre class="expected">(.*?)</pre>', r.text, re.S)
    observed = re.search(r'<pre class="observed">(.*?)</pre>', r.text, re.S)
    assert expected and observed
    assert expected.group(1) == "seat: 5\nvigorish: 5.00"
    assert "4.00" in observed.group(1)
    assert "2026-11-28_MB-01.jsonl:" in text
    assert re.search(r"pull the surveillance video by 2026-12-06 01:31", text)
    assert len(Page(r.text).cards) >= 4  # the round's cards are on the finding's page too
    assert unknown.status_code == 404 and "no finding has the id F000000000000" in unknown.text
    assert by_fingerprint.status_code == 200 and "Finding Fc407b86fa0d7" in by_fingerprint.text


def test_the_floor_by_pit_and_table(full: Path, conf: Any) -> None:
    app = create_app(full, property_config=conf)
    with local_client(app) as client:
        r = client.get("/floor", params={"date": "2026-11-28"})
    assert r.status_code == 200
    text = html.unescape(r.text)
    assert "Floor, gaming day 2026-11-28" in text
    for pit in ("Pit P1", "Pit P2", "Pit P3"):
        assert pit in text
    row = re.search(r'<tr class="(\w+)" data-table="MB-01">(.*?)</tr>', r.text, re.S)
    assert row
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>",
                                                                  row.group(2), re.S)]
    # table, state, game, procedure (2 from 02:00), shoe, rounds, critical..info, acked, last.
    # MB-01 closed at 06:03, after the gaming day ended at 06:00: open as of that day's end.
    assert cells[0] == "MB-01" and cells[1] == row.group(1) == "open"
    assert cells[2].startswith("mini baccarat, standard")
    assert cells[3] == "2"
    assert cells[4].startswith("MB-01-1128-06")
    con = duckdb.connect(str(full), read_only=True)
    rounds = con.execute(
        "SELECT count(DISTINCT (shoe, round)) FROM events WHERE table_id = 'MB-01' "
        "AND type = 'round_start' AND ts >= ? AND ts < ?",  # the gaming day, 06:00 to 06:00
        ["2026-11-28 11:00:00+00", "2026-11-29 11:00:00+00"],
    ).fetchall()[0][0]
    con.close()
    assert cells[5] == f"{rounds:,}"
    assert cells[6:10] == ["1", "1", "0", "0"]  # the missed draw (critical), the vig (major)
    assert cells[11] == "11-29 05:59:59" or cells[11].startswith("11-29 05:")  # last event
    # The day after: MB-01 dealt one round past 06:00 and closed.
    with local_client(app) as client:
        after = client.get("/floor", params={"date": "2026-11-29"}).text
    assert re.search(r'<tr class="closed" data-table="MB-01">', after)


@pytest.mark.slow
def test_filters_by_severity_code_pit_and_table(full: Path, conf: Any) -> None:
    con = duckdb.connect(str(full), read_only=True)
    cases: list[tuple[dict[str, str], dict[str, Any]]] = [
        ({"severity": "critical"}, {"min_severity": "critical"}),
        ({"code": "chemin.*"}, {"codes": ["chemin.*"]}),
        ({"pit": "P2"}, {"pit": "P2"}),
        ({"table": "MB-04"}, {"table": "MB-04"}),
        ({"severity": "major", "code": "draw.*", "pit": "P1"},
         {"min_severity": "major", "codes": ["draw.*"], "pit": "P1"}),
    ]
    wanted = [export(con, **f) for _, f in cases]
    con.close()
    app = create_app(full, property_config=conf)
    with local_client(app) as client:
        for (query, _), want in zip(cases, wanted, strict=True):
            items = Page(client.get("/feed", params=query).text).items
            assert sorted((i["code"], i["table"]) for i in items) == sorted(
                (f["code"], f["table"] or f["pit"] or "") for f in want
            ), query
            api = client.get("/api/findings", params=query)
            assert [json.loads(x) for x in api.text.splitlines()] == want, query
        assert {i["sev"] for i in Page(client.get("/feed?severity=critical").text).items} == {
            "critical"
        }
        assert len(Page(client.get("/feed?code=chemin.*").text).items) == 6
        bad = client.get("/api/findings", params={"severity": "grave"})
        typo = client.get("/feed", params={"code": "draw.banker_miss"})
    assert bad.status_code == 400 and "severity must be one of" in bad.json()["error"]
    assert typo.status_code == 400 and "no such finding code" in typo.text


def test_filters_in_sql_and_in_python_agree(full: Path) -> None:
    """The poller's in-memory filter and the database's pick the same rows."""
    con = duckdb.connect(str(full), read_only=True)
    zone = config.load(CONFIG).zone_for(con)
    every = feed.changes(con, 0, zone, limit=1000)
    day = config.load(CONFIG).shift_window(dt.date(2026, 11, 28), "grave", zone)
    for f in (
        Filter(severity="major"),
        Filter(codes=("chemin.*", "log.*")),
        Filter(pit="P1", severity="critical"),
        Filter(table="CF-01"),
        Filter(window=(day[0], day[0] + dt.timedelta(hours=3))),
    ):
        in_sql = [c.cursor for c in feed.changes(con, 0, zone, filters=f, limit=1000)]
        assert in_sql == [c.cursor for c in every if f.matches(c.record, c.at)], f
        assert in_sql, f
    con.close()


# -- the JSON API and its cursor -----------------------------------------------------------


@pytest.mark.slow
def test_api_findings_is_the_cli_jsonl_export(
    full: Path, conf: Any, bacc_audit: Any
) -> None:
    cli = bacc_audit("findings", "--db", full, "--config", CONFIG, "--format", "jsonl")
    cli_major = bacc_audit("findings", "--db", full, "--config", CONFIG, "--format", "jsonl",
                           "--severity", "major", "--code", "chemin.*", "--shift", SHIFT)
    assert cli.code == 0 and cli_major.code == 0
    app = create_app(full, property_config=conf)
    with local_client(app) as client:
        r = client.get("/api/findings")
        major = client.get("/api/findings", params={"severity": "major", "code": "chemin.*",
                                                    "shift": SHIFT})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/x-ndjson")
    assert r.text == cli.out  # byte for byte: the same records, fingerprint and id included
    assert major.text == cli_major.out and len(major.text.splitlines()) == 6
    records = [json.loads(x) for x in r.text.splitlines()]
    assert len(records) == 22
    assert all(f["fingerprint"] and f["id"] == acks.short_id(f["fingerprint"]) for f in records)
    assert r.headers[CURSOR_HEADER] == "22"  # the latest row of the findings table


@pytest.mark.slow
def test_since_gives_exactly_the_findings_stored_after_the_cursor(
    shared: duckdb.DuckDBPyConnection, conf: Any
) -> None:
    app = create_app(shared, property_config=conf)  # the writer's connection: its cursors
    with local_client(app) as client:
        first = client.get("/api/findings")
        c0 = int(first.headers[CURSOR_HEADER])
        assert len(first.text.splitlines()) == 20 and c0 == 20
        assert client.get(f"/api/findings?since={c0}").text == ""

        store_mb01(shared)  # the writer stores MB-01's findings while the board runs
        new = client.get(f"/api/findings?since={c0}")
        c1 = int(new.headers[CURSOR_HEADER])
        got = [json.loads(x) for x in new.text.splitlines()]
        rows = shared.execute(
            "SELECT id, fingerprint FROM findings WHERE id > ? ORDER BY id", [c0]
        ).fetchall()
        assert [f["fingerprint"] for f in got] == [fp for _, fp in rows]
        assert [(f["code"], f["shoe"], f["round"]) for f in got] == [
            ("draw.banker_missed", "MB-01-1128-01", 72),
            ("vig.wrong_amount", "MB-01-1128-03", 47),
        ]
        assert c1 == rows[-1][0]
        # The same records as the export gives for these findings.
        exported = {f["fingerprint"]: f for f in export(shared)}
        assert got == [exported[f["fingerprint"]] for f in got]
        # Nothing twice, nothing left: after the new cursor there is nothing.
        assert client.get(f"/api/findings?since={c1}").text == ""
        # Paged with limit: the cursor of each page continues exactly after it.
        page1 = client.get(f"/api/findings?since={c0}&limit=1")
        page2 = client.get(f"/api/findings?since={page1.headers[CURSOR_HEADER]}&limit=1")
        assert [json.loads(x)["code"] for x in page1.text.splitlines()] == ["draw.banker_missed"]
        assert [json.loads(x)["code"] for x in page2.text.splitlines()] == ["vig.wrong_amount"]
        assert page2.headers[CURSOR_HEADER] == str(c1)
        # A withdrawal is a new row: left out by default, given with withdrawn=1.
        run = runs.start(shared, "test", {})
        findings.withdraw(shared, run, f"fingerprint = {db.q(got[1]['fingerprint'])}")
        assert client.get(f"/api/findings?since={c1}").text == ""
        w = client.get(f"/api/findings?since={c1}&withdrawn=1")
        (line,) = [json.loads(x) for x in w.text.splitlines()]
        assert (line["fingerprint"], line["status"]) == (got[1]["fingerprint"], "withdrawn")
        assert int(w.headers[CURSOR_HEADER]) == c1 + 1
        assert "since=" in w.headers["link"]
        assert client.get("/api/findings?since=abc").status_code == 400


def _events(url: str, want: int, headers: dict[str, str] | None = None,
            opened: threading.Event | None = None) -> list[tuple[float, dict[str, str]]]:
    """The first `want` events of a stream (with the time each arrived), read as EventSource
    reads them: `field: value` lines, a blank line ends an event."""
    got: list[tuple[float, dict[str, str]]] = []
    with httpx2.Client(timeout=10) as http, http.stream("GET", url, headers=headers) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        event: dict[str, str] = {}
        for line in r.iter_lines():
            if line == "":
                if opened is not None:
                    opened.set()  # the first block (retry:) has come: the stream is open
                if "data" in event:
                    got.append((time.monotonic(), event))
                    if len(got) == want:
                        return got
                event = {}
                continue
            key, _, value = line.partition(":")
            event[key] = value.removeprefix(" ")
    return got


@pytest.mark.realtime
def test_the_stream_pushes_each_new_finding_within_a_second_and_resumes_exactly(
    shared: duckdb.DuckDBPyConnection, conf: Any
) -> None:
    app = create_app(shared.cursor, property_config=conf, poll_interval=0.1)
    with serve(app, "127.0.0.1", 0) as board:
        opened = threading.Event()
        live: list[tuple[float, dict[str, str]]] = []
        reader = threading.Thread(
            target=lambda: live.extend(_events(board.url + "/api/stream", 2, opened=opened))
        )
        reader.start()
        assert opened.wait(5)
        time.sleep(0.2)  # the poller has seen the head as it was
        store_mb01(shared)
        stored = time.monotonic()
        reader.join(10)
        rows = shared.execute(
            "SELECT id, fingerprint FROM findings WHERE id > 20 ORDER BY id").fetchall()
        assert [(int(e["id"]), json.loads(e["data"])["fingerprint"]) for _, e in live] == rows
        assert all("event" not in e for _, e in live)  # plain messages: EventSource.onmessage
        assert live[0][0] - stored < 1.0, "a stored finding reaches the stream within 1 s"
        exported = {f["fingerprint"]: f for f in export(shared)}
        assert [json.loads(e["data"]) for _, e in live] == [exported[fp] for _, fp in rows]

        # Reconnecting with Last-Event-ID gives what came after it, once; filters apply.
        again = _events(board.url + "/api/stream", 1, {"Last-Event-ID": str(rows[0][0])})
        assert [int(e["id"]) for _, e in again] == [rows[1][0]]
        vig = _events(board.url + "/api/stream?since=0&code=vig.wrong_amount", 1)
        assert [(int(e["id"]), json.loads(e["data"])["code"]) for _, e in vig] == [
            (rows[1][0], "vig.wrong_amount")
        ]
        # A withdrawal is the named event `withdrawn`, with its own cursor.
        findings.withdraw(shared, runs.start(shared, "test", {}),
                          f"fingerprint = {db.q(rows[0][1])}")
        (gone,) = _events(board.url + f"/api/stream?since={rows[1][0]}", 1)
        assert gone[1]["event"] == "withdrawn" and int(gone[1]["id"]) == rows[1][0] + 1
        assert json.loads(gone[1]["data"])["fingerprint"] == rows[0][1]
        assert httpx2.get(board.url + "/healthz").json()["status"] == "ok"


def test_a_stream_from_now_starts_at_the_head_though_the_poller_read_it_long_ago(
    shared: duckdb.DuckDBPyConnection, conf: Any
) -> None:
    """With no stream open a nudge reads nothing (feed.Hub.nudge: `watch` nudges every
    poll), so the poller's head may be old when a stream from now opens: what was stored
    before it opened is not sent to it."""
    app = create_app(shared.cursor, property_config=conf, poll_interval=60)
    with serve(app, "127.0.0.1", 0) as board:
        hub = app.state.board.hub
        before = hub.polls
        store_mb01(shared)  # the poller does not see these: no stream, no interval yet
        board.nudge()
        time.sleep(0.3)
        assert hub.polls == before and hub.head == 20
        opened = threading.Event()
        live: list[tuple[float, dict[str, str]]] = []
        reader = threading.Thread(
            target=lambda: live.extend(_events(board.url + "/api/stream", 1, opened=opened)))
        reader.start()
        assert opened.wait(5)
        (first, _), *_ = shared.execute(
            "SELECT id, fingerprint FROM findings WHERE id > 20 ORDER BY id").fetchall()
        findings.withdraw(shared, runs.start(shared, "test", {}), f"id = {first}")
        board.nudge()  # a stream is open: the poller reads now
        reader.join(10)
        top = shared.execute("SELECT max(id) FROM findings").fetchall()[0][0]
        assert [(int(e["id"]), e.get("event")) for _, e in live] == [(top, "withdrawn")]
        assert hub.polls > before


# -- acknowledgements, CSRF -------------------------------------------------------------------


def _csrf(client: TestClient, path: str) -> str:
    page = client.get(path)
    assert page.status_code == 200, page.text
    return Page(page.text).csrf[-1]


@pytest.mark.slow
def test_an_ack_from_the_form_is_stored_and_shows_in_the_report_pdf(
    full: Path, tmp_path: Path, conf: Any, bacc_audit: Any
) -> None:
    dbp = copy(full, tmp_path)
    app = create_app(dbp, property_config=conf)
    fid = "Fc95f8bf836d2"  # draw.banker_missed, MB-01 round 72
    with local_client(app) as client:
        token = _csrf(client, f"/finding/{fid}")
        r = client.post(
            f"/finding/{fid}/ack",
            data={"csrf": token, "name": "J. Rivera",
                  "disposition": "video reviewed: dealer error", "note": "patron paid"},
            headers={"Origin": LOCAL},
        )
        assert r.status_code == 303, r.text
        assert r.headers["location"] == f"/finding/{fid}?acked=1"
        shown = plain(client.get(r.headers["location"]).text)
        assert "Acknowledgement 1 recorded." in shown
        assert "J. Rivera: video reviewed: dealer error (patron paid)" in shown
        missing = client.post(f"/finding/{fid}/ack", data={"csrf": token, "name": "",
                                                           "disposition": "x"},
                              headers={"Origin": LOCAL})
        assert missing.status_code == 400 and "Type your name" in missing.text
    # The app has stopped and closed the database: read it as the CLI does.
    con = db.connect(dbp, read_only=True)
    (a,) = acks.list_acks(con)
    run = runs.listing(con, command="ack")[-1]
    con.close()
    assert (a.reviewer, a.disposition, a.note) == ("J. Rivera", "video reviewed: dealer error",
                                                   "patron paid")
    assert a.fingerprint == "draw.banker_missed|MB-01|MB-01-1128-01|72|1149|0"
    assert run["status"] == "done" and run["args"]["via"] == "board"
    listed = bacc_audit("ack", "list", "--json", "--db", dbp)
    assert json.loads(listed.out)[0]["by"] == "J. Rivera"
    out = tmp_path / "grave.pdf"
    r2 = bacc_audit("report", "--shift", SHIFT, "--table", "MB-01", "--db", dbp, "--config",
                    CONFIG, "--out", out)
    assert r2.code == 0, r2.err
    text = pdf_text(out)
    assert "by J. Rivera: video reviewed: dealer error (patron paid)" in text


def test_a_cross_site_ack_is_refused(full: Path, tmp_path: Path, conf: Any) -> None:
    dbp = copy(full, tmp_path)
    app = create_app(dbp, property_config=conf)
    fid = "Fc95f8bf836d2"
    form = {"name": "Mallory", "disposition": "no action needed"}
    with local_client(app) as client:
        token = _csrf(client, f"/finding/{fid}")
        attempts = [
            ({**form}, {"Origin": LOCAL}),  # no token
            ({**form, "csrf": "0" * 64}, {"Origin": LOCAL}),  # a made-up token
            ({**form, "csrf": token}, {"Origin": "http://evil.example"}),  # another site
            ({**form, "csrf": token}, {}),  # neither Origin nor Referer
            ({**form, "csrf": token}, {"Referer": "http://evil.example/x"}),
        ]
        for data, headers in attempts:
            r = client.post(f"/finding/{fid}/ack", data=data, headers=headers)
            assert r.status_code == 403, (data, headers)
            assert "cross-site request" in r.text
        # Without the CSRF cookie (a browser on another site sends none with SameSite=Strict).
        client.cookies.clear()
        r = client.post(f"/finding/{fid}/ack", data={**form, "csrf": token},
                        headers={"Origin": LOCAL})
        assert r.status_code == 403
        # The same form from the page itself goes through: the refusals were for CSRF only.
        token = _csrf(client, f"/finding/{fid}")
        ok = client.post(f"/finding/{fid}/ack", data={**form, "csrf": token},
                         headers={"Referer": f"{LOCAL}/finding/{fid}"})
        assert ok.status_code == 303
    con = db.connect(dbp, read_only=True)
    assert [a.reviewer for a in acks.list_acks(con)] == ["Mallory"]
    con.close()


# -- access -----------------------------------------------------------------------------------


PASSWORD = "correct horse battery staple"
TOKEN = "tok-3c5b9a1e7d0f42b8a6c1e9f3b2d7a4c0"


def login_settings() -> BoardSettings:
    return settings_from_table({
        "listen": "0.0.0.0:8080",
        "users": [{"name": "j.rivera", "password_hash": hash_password(PASSWORD, 1000)}],
        "tokens": [{"name": "case-system", "sha256": token_sha256(TOKEN)}],
    }, "test.toml")


@pytest.mark.slow
def test_off_loopback_nothing_shows_before_a_login(full: Path, tmp_path: Path, conf: Any) -> None:
    settings = login_settings()
    auth = Auth.for_host(settings)
    assert auth.required and not Auth.for_host(settings, "127.0.0.1").required
    dbp = copy(full, tmp_path)
    app = create_app(dbp, property_config=conf, auth=auth, settings=settings)
    with TestClient(app, base_url="http://board.casino.example", follow_redirects=False) as c:
        for path in ("/", "/floor", "/finding/Fc95f8bf836d2",
                     "/round?table=MB-01&shoe=MB-01-1128-01&round=72"):
            r = c.get(path)
            assert r.status_code == 303 and r.headers["location"].startswith("/login?next="), path
            assert "draw.banker_missed" not in r.text
        api = c.get("/api/findings")
        assert api.status_code == 401 and api.headers["www-authenticate"].startswith("Bearer")
        assert c.get("/api/stream").status_code == 401
        assert c.get("/healthz").status_code == 200  # for the proxy's health check
        assert c.get("/static/board.css").status_code == 200
        # Another system: a bearer token.
        bearer = c.get("/api/findings", headers={"Authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 200 and len(bearer.text.splitlines()) == 22
        assert c.get("/api/findings", headers={"Authorization": "Bearer nope"}).status_code == 401
        # A person: name and password, through the login form (itself CSRF-checked).
        origin = {"Origin": "http://board.casino.example"}
        token = _csrf(c, "/login?next=/finding/Fc95f8bf836d2")
        wrong = c.post("/login", data={"csrf": token, "name": "j.rivera", "password": "guess",
                                       "next": "/"}, headers=origin)
        assert wrong.status_code == 401 and "Wrong name and password" in wrong.text
        forged = c.post("/login", data={"csrf": "x", "name": "j.rivera", "password": PASSWORD},
                        headers=origin)
        assert forged.status_code == 403
        ok = c.post("/login", data={"csrf": token, "name": "j.rivera", "password": PASSWORD,
                                    "next": "/finding/Fc95f8bf836d2"}, headers=origin)
        assert ok.status_code == 303 and ok.headers["location"] == "/finding/Fc95f8bf836d2"
        page = c.get("/finding/Fc95f8bf836d2")
        assert page.status_code == 200 and "As <strong>j.rivera</strong>" in page.text
        # The ack records the logged-in user, whatever name the form carries.
        r = c.post("/finding/Fc95f8bf836d2/ack", headers=origin, data={
            "csrf": Page(page.text).csrf[-1], "name": "someone else",
            "disposition": "dealer retrained"})
        assert r.status_code == 303
        # Log out: the session is gone.
        out = c.post("/logout", data={"csrf": Page(page.text).csrf[0]}, headers=origin)
        assert out.status_code == 303
        assert c.get("/").status_code == 303
        # The token works in the login form too; its name is who acknowledges.
        token = _csrf(c, "/login")
        assert c.post("/login", data={"csrf": token, "token": TOKEN}, headers=origin
                      ).status_code == 303
        assert "case-system" in c.get("/").text
        # An open redirect is not a login's next.
        assert _next_of(c, token, origin, "//evil.example/") == "/"
    con = db.connect(dbp, read_only=True)
    assert [a.reviewer for a in acks.list_acks(con)] == ["j.rivera"]
    con.close()


def _next_of(c: TestClient, token: str, origin: dict[str, str], target: str) -> str:
    r = c.post("/login", data={"csrf": token, "token": TOKEN, "next": target}, headers=origin)
    return r.headers["location"]


def test_a_board_without_login_stays_on_this_machine(full: Path, conf: Any) -> None:
    app = create_app(full, property_config=conf)
    with pytest.raises(UserError, match="without a login"):
        serve(app, "0.0.0.0", 0)
    with pytest.raises(UserError, match="names no one to log in"):
        Auth.for_host(BoardSettings(), "0.0.0.0")
    with pytest.raises(UserError, match="names no one to log in"):
        Auth.for_host(BoardSettings(require_login=True), "127.0.0.1")
    with local_client(app) as client:
        assert client.get("/").status_code == 200
        # Reached through a proxy (X-Forwarded-For): every request comes from 127.0.0.1,
        # so the loopback rule says nothing about who is asking.
        proxied = client.get("/", headers={"X-Forwarded-For": "203.0.113.9"})
        assert proxied.status_code == 403 and "require_login" in proxied.text
    # A name of another site pointed at 127.0.0.1 (DNS rebinding) is not this machine.
    with TestClient(app, base_url="http://rebind.example:8080") as other:
        assert other.get("/").status_code == 403
        assert other.get("/api/findings").status_code == 403


def test_behind_a_proxy_links_carry_the_root_path(full: Path, conf: Any) -> None:
    settings = settings_from_table({"require_login": True, "root_path": "/bacc", "tokens": [
        {"name": "case-system", "sha256": token_sha256(TOKEN)}]})
    app = create_app(full, property_config=conf, auth=Auth.for_host(settings), settings=settings)
    # The browser's paths carry the prefix; the proxy passes them on (uvicorn puts the
    # root path before the path it was given, which is what the test client sends here).
    with TestClient(app, base_url="https://board.casino.example", root_path="/bacc",
                    follow_redirects=False) as c:
        r = c.get("/bacc/")
        assert r.headers["location"] == "/bacc/login?next=%2F"
        token = _csrf(c, "/bacc/login")
        assert c.cookies.get("bacc_board_csrf")
        ok = c.post("/bacc/login", data={"csrf": token, "token": TOKEN, "next": "/floor"},
                    headers={"Origin": "https://board.casino.example"})
        assert ok.headers["location"] == "/bacc/floor"
        assert "secure" in ok.headers["set-cookie"].lower()
        assert "path=/bacc" in ok.headers["set-cookie"].lower()
        page = c.get("/bacc/").text
        assert 'href="/bacc/static/board.css"' in page
        assert 'href="/bacc/finding/F' in page
        assert 'data-stream="/bacc/api/stream?since=22"' in page


# -- settings and credentials -----------------------------------------------------------------


def test_board_settings_from_the_property_config(tmp_path: Path) -> None:
    path = tmp_path / "bacc-audit.toml"
    digest = token_sha256(TOKEN)
    path.write_text(
        '[property]\nname = "Harbor Point"\n\n[board]\nlisten = "0.0.0.0:8443"\n'
        'require_login = true\nroot_path = "/board"\ntrusted_proxies = ["10.0.0.5"]\n'
        "session_hours = 8\n\n[[board.users]]\nname = \"j.rivera\"\n"
        f'password_hash = "{hash_password(PASSWORD, 1000)}"\n\n'
        f'[[board.tokens]]\nname = "case-system"\nsha256 = "{digest}"\n'
    )
    s = load_settings(config.load(path))
    assert (s.host, s.port, s.require_login, s.root_path) == ("0.0.0.0", 8443, True, "/board")
    assert s.trusted_proxies == ("10.0.0.5",) and s.session_hours == 8
    assert s.users[0].name == "j.rivera" and verify_password(PASSWORD, s.users[0].password_hash)
    assert s.tokens == (Token("case-system", digest),)
    assert load_settings(config.PropertyConfig()) == BoardSettings()
    refused: list[tuple[dict[str, Any], str]] = [
        ({"requre_login": True}, "did you mean 'require_login'"),
        ({"users": [{"name": "a", "password_hash": "hunter2"}]}, "never the password"),
        ({"tokens": [{"name": "a", "sha256": TOKEN}]}, "never the token"),
        ({"root_path": "board/"}, "root_path must be a path"),
        ({"listen": "8080"}, "HOST:PORT"),
        ({"users": {"name": "a"}}, "array of tables"),
        ({"trusted_proxies": ["proxy.local"]}, "not an IP address"),
    ]
    for table, message in refused:
        with pytest.raises(UserError, match=re.escape(message)):
            settings_from_table(table, "t.toml")
    assert parse_listen("[::1]:9000") == ("::1", 9000)


def test_sessions_and_csrf_tokens_are_signed() -> None:
    settings = login_settings()
    auth = Auth.for_host(settings)
    who = auth.check_password("j.rivera", PASSWORD)
    assert who is not None and who.name == "j.rivera"
    assert auth.check_password("j.rivera", "nope") is None
    assert auth.check_password("nobody", PASSWORD) is None
    value = auth.session_value(who)
    assert auth.session_identity(value) == who
    body, _, mac = value.rpartition(".")
    assert auth.session_identity(body + "." + "0" * len(mac)) is None
    assert auth.session_identity(value, now=time.time() + 13 * 3600) is None  # expired
    other = Auth.for_host(settings)  # another start of the board: another key
    assert other.session_identity(value) is None
    assert auth.csrf_ok("cookie", auth.csrf_token("cookie"))
    assert not auth.csrf_ok("cookie", other.csrf_token("cookie"))
    assert not auth.csrf_ok(None, auth.csrf_token("cookie"))


@pytest.mark.slow
def test_a_stream_that_falls_behind_is_ended_not_left_with_a_gap(
    shared: duckdb.DuckDBPyConnection,
) -> None:
    """A page that stops reading fills its queue; the poller then ends its stream with
    nothing after the last batch it got, so the client's Last-Event-ID resumes exactly."""
    import asyncio

    hub = feed.Hub(shared.cursor, feed.ZoneCache(config.load(CONFIG)), queue_size=1)

    async def scenario() -> list[Any]:
        await hub.start()
        sub = hub.subscribe(Filter())
        store_mb01(shared)
        await hub.poll()  # one batch: the queue is full
        findings.withdraw(shared, runs.start(shared, "test", {}), "code = 'vig.wrong_amount'")
        await hub.poll()  # no room: the stream is ended, its unsent batch dropped
        assert sub.overflowed and sub not in hub.subscribers
        return [sub.queue.get_nowait() for _ in range(sub.queue.qsize())]

    assert asyncio.run(scenario()) == [None]
    assert hub.head == 23 and hub.error is None
