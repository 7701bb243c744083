"""What a careless or hostile visitor types into the board's addresses (issue 31): every
odd number, date, id and path is answered with a sentence and the status that says what
went wrong (400 for a malformed value, 404 for what does not exist, 409 for a cursor the
database never gave out), as a page or as JSON as the route serves, never a 500.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.sample import CONFIG, built, local_client, plain
from starlette.testclient import TestClient

from auditor import config
from auditor.audit.run import audit
from auditor.board.api import CURSOR_HEADER
from auditor.board.app import create_app
from auditor.ingest.run import ingest
from auditor.store import db, runs
from auditor.store.findings import short_id

RANGE = "a gaming day must be from 1900-01-01 to 9998-12-31"


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built(tmp_path_factory, tmp_path_factory.mktemp("odd") / "full.duckdb",
                 with_mb01=True)


@pytest.fixture(scope="module")
def client(full: Path) -> Iterator[TestClient]:
    app = create_app(full, property_config=config.load(CONFIG))
    with local_client(app, raise_server_exceptions=False) as c:
        yield c


def is_page(r: Any, status: int, words: str) -> None:
    """An HTML page of the board with this status, saying `words`."""
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("text/html")
    text = plain(r.text)
    assert words in text, text[:600]
    assert "The feed" in text and "times in America/New_York" in text


def is_json(r: Any, status: int, words: str) -> None:
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["content-type"] == "application/json"
    assert words in r.json()["error"], r.json()


def test_a_superscript_two_is_not_a_number(client: TestClient) -> None:
    # `"²".isdigit()` is True and `int("²")` fails: each was a 500.
    is_json(client.get("/api/findings?since=²"), 400, "since is a cursor: a whole number")
    is_json(client.get("/api/findings?limit=²"), 400, "limit is the most lines to answer")
    is_json(client.get("/api/stream?since=²"), 400, "since is a cursor: a whole number")
    is_json(client.get("/api/stream", headers={b"Last-Event-ID": "²".encode()}), 400,
            "Last-Event-ID is a cursor")
    is_page(client.get("/round?table=MB-01&shoe=MB-01-1128-01&round=²"), 400,
            "a round is named by table, shoe and round (a whole number)")
    # Digits past a BIGINT, and past what int() reads at all, are refused the same way.
    is_json(client.get("/api/findings?since=" + "9" * 19), 400, "since is a cursor")
    is_json(client.get("/api/findings?since=" + "9" * 5000), 400, "since is a cursor")
    is_page(client.get("/round?table=MB-01&shoe=MB-01-1128-01&round=" + "9" * 40), 400,
            "a round is named by")
    # A real round still reads.
    assert client.get("/round?table=MB-01&shoe=MB-01-1128-01&round=72").status_code == 200


@pytest.mark.parametrize("day", ["9999-12-31", "0001-01-01"])
def test_dates_at_the_ends_of_the_calendar_are_refused_with_the_range(
    client: TestClient, day: str
) -> None:
    is_page(client.get(f"/floor?date={day}"), 400, f"'{day}' is out of range: {RANGE}")
    is_page(client.get(f"/?date={day}"), 400, RANGE)
    is_json(client.get(f"/api/findings?date={day}"), 400, RANGE)
    is_json(client.get(f"/api/findings?shift={day}/grave"), 400, RANGE)
    is_json(client.get(f"/api/stream?date={day}"), 400, RANGE)
    # The last and first days in range are answered: nothing was dealt then.
    assert client.get("/api/findings?date=9998-12-31").text == ""
    assert client.get("/api/findings?shift=1900-01-01/grave").text == ""
    floor = client.get("/floor?date=9998-12-31")
    assert floor.status_code == 200 and "9998-12-31" in plain(floor.text)


def test_an_unknown_finding_is_not_found_with_the_closest_id(client: TestClient) -> None:
    found = client.get("/api/findings?code=draw.banker_missed").json()
    short, fid = found["id"], found["fingerprint"]
    assert client.get(f"/finding/{short}").status_code == 200
    # One digit short, as the user typed it: not found, and the real one named.
    is_page(client.get(f"/finding/{short[:-1]}"), 404, f"did you mean {short}?")
    is_page(client.get("/finding/F000000000000"), 404, "no finding has the id F000000000000")
    is_page(client.get("/finding/zzzz"), 404, "'zzzz' is neither a finding id")
    is_page(client.get("/finding/" + fid.replace("|", "%7C")[:-2] + "xx"), 404,
            "no finding has the fingerprint")
    # Acknowledging one that does not exist: the same 404, and nothing stored.
    page = client.get(f"/finding/{short}")
    csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    r = client.post("/finding/F000000000000/ack", data={
        "csrf": csrf, "name": "j.rivera", "disposition": "video reviewed"},
        headers={"Origin": "http://127.0.0.1"})
    is_page(r, 404, "no finding has the id F000000000000")


def test_an_unknown_address_is_a_page_of_the_board_or_json(client: TestClient) -> None:
    is_page(client.get("/nope"), 404, "No page /nope here.")
    is_page(client.get("/finding"), 404, "No page /finding here.")
    is_json(client.get("/api/nope"), 404, "No /api/nope here: the API is /api/findings")
    r = client.post("/floor")
    is_page(r, 405, "POST is not how /floor is asked for.")
    assert sorted(r.headers["allow"].split(", ")) == ["GET", "HEAD"]
    is_json(client.delete("/api/findings"), 405, "DELETE is not how /api/findings")
    # Every answer carries the board's headers, the refusals too.
    assert "default-src 'self'" in client.get("/nope").headers["content-security-policy"]


def test_a_cursor_past_the_newest_finding_is_a_conflict_not_silence(
    client: TestClient,
) -> None:
    head = int(client.get("/api/findings").headers[CURSOR_HEADER])
    assert head == 22
    # At the head: nothing new, and the same cursor back.
    r = client.get(f"/api/findings?since={head}")
    assert (r.status_code, r.text, r.headers[CURSOR_HEADER]) == (200, "", "22")
    # Past it: this database never gave that cursor out (restored from a copy, another
    # board): 409 and a sentence, no cursor to go on with.
    r = client.get("/api/findings?since=999999")
    is_json(r, 409, "since 999999 is past the newest finding (cursor 22)")
    assert CURSOR_HEADER not in r.headers
    is_json(client.get("/api/stream?since=23"), 409, "since 23 is past the newest finding")
    is_json(client.get("/api/stream", headers={"Last-Event-ID": "500"}), 409,
            "Last-Event-ID 500 is past the newest finding (cursor 22)")


def _edited(full: Path, tmp_path: Path, update: str) -> tuple[Path, str]:
    """A copy of `full` changed by the SQL `update`, as an editor of the file (or an earlier
    bacc-audit) could leave it, and the fingerprint of its MB-01 draw.banker_missed finding
    (round 72 of shoe MB-01-1128-01)."""
    edited = Path(shutil.copy(full, tmp_path / "edited.duckdb"))
    con = duckdb.connect(str(edited))
    try:
        [(fingerprint,)] = con.execute(
            "SELECT fingerprint FROM current_findings WHERE code = 'draw.banker_missed' "
            "AND table_id = 'MB-01' AND shoe = 'MB-01-1128-01' AND round = 72").fetchall()
        con.execute(update)
    finally:
        con.close()
    return edited, fingerprint


def test_a_stamp_past_the_year_9999_in_the_database_is_shown_as_stored_never_a_500(
    full: Path, client: TestClient, tmp_path: Path
) -> None:
    """A database loaded by an earlier bacc-audit (ingest now quarantines such a line), or
    edited since, may hold a stamp no datetime holds. The round page, the floor and the
    dealers' page were 500s; now the round shows the stamp as stored, and the floor opens
    on the day it opened on before the edit."""
    edited, fingerprint = _edited(
        full, tmp_path, "UPDATE events SET ts = TIMESTAMPTZ '10000-01-01 00:00:00+00' "
        "WHERE table_id = 'MB-01' AND shoe = 'MB-01-1128-01' AND round = 72")
    before = plain(client.get("/floor").text)
    app = create_app(edited, property_config=config.load(CONFIG))
    with local_client(app, raise_server_exceptions=False) as c:
        page = c.get("/round?table=MB-01&shoe=MB-01-1128-01&round=72")
        assert page.status_code == 200, page.text[:300]
        text = plain(page.text)
        assert "started at no time a clock can show" in text
        assert text.count("10000-01-01 00:00:00+00") >= 6  # each of its events' time
        assert "draw.banker_missed" in text  # its finding and cards still shown
        assert c.get(f"/finding/{short_id(fingerprint)}").status_code == 200
        assert c.get("/round?table=MB-01&shoe=MB-01-1128-01&round=71").status_code == 200
        for path in ("/", "/feed", "/floor", "/dealers", "/notices", "/reports",
                     "/api/findings"):
            assert c.get(path).status_code == 200, path
        day = re.search(r"gaming day \d{4}-\d\d-\d\d", before)
        assert day is not None and day.group(0) in plain(c.get("/floor").text)


def test_a_findings_time_no_clock_can_show_is_a_sentence_naming_it_not_a_500(
    full: Path, tmp_path: Path
) -> None:
    """A finding's row edited to a time past the year 9999: the pages and the API that show
    it say which finding and why, with 409 (the database's state, not the request); the
    pages that do not show it still answer."""
    edited, fingerprint = _edited(
        full, tmp_path, "UPDATE findings SET ts = TIMESTAMPTZ '10000-01-01 00:00:00+00' "
        "WHERE code = 'draw.banker_missed' AND table_id = 'MB-01'")
    said = (f"finding {short_id(fingerprint)}: its time is stored as 10000-01-01 00:00:00+00, "
            "which no clock can show")
    app = create_app(edited, property_config=config.load(CONFIG))
    with local_client(app, raise_server_exceptions=False) as c:
        is_json(c.get("/api/findings"), 409, said)
        is_json(c.get("/api/findings?since=0"), 409, said)
        for path in ("/", "/feed", f"/finding/{short_id(fingerprint)}",
                     "/round?table=MB-01&shoe=MB-01-1128-01&round=72"):
            is_page(c.get(path), 409, said)
        for path in ("/floor", "/dealers", "/notices", "/reports",
                     "/round?table=MB-01&shoe=MB-01-1128-01&round=71"):
            assert c.get(path).status_code == 200, path


def test_a_notices_time_no_clock_can_show_is_a_sentence_naming_where(
    full: Path, tmp_path: Path
) -> None:
    """A procedure notice's effective time edited past the year 9999: the notices page was a
    500; now 409 with the table, column and row."""
    edited, _ = _edited(
        full, tmp_path, "UPDATE events SET effective = TIMESTAMPTZ '10000-01-01 00:00:00+00' "
        "WHERE type = 'procedure_notice'")
    app = create_app(edited, property_config=config.load(CONFIG))
    with local_client(app, raise_server_exceptions=False) as c:
        is_page(c.get("/notices"), 409,
                "the audit database holds 10000-01-01 00:00:00+00 in events.effective (row ")
        assert c.get("/floor").status_code == 200


@pytest.mark.slow
def test_times_are_in_the_logs_zone_from_the_first_log_on(tmp_path: Path) -> None:
    """A board started on an empty database, with no time zone in the config: it shows UTC
    while there is nothing, and the logs' own offset as soon as the first log is in (it
    kept the UTC it had guessed for a minute: +00:00 times, then -05:00)."""
    con = db.connect(tmp_path / "new.duckdb")
    app = create_app(con, property_config=config.PropertyConfig())
    try:
        with local_client(app) as c:
            empty = c.get("/api/findings")
            assert (empty.status_code, empty.text) == (200, "")
            assert "times in UTC" in plain(c.get("/").text)
            logs = sorted(CONFIG.parent.glob("2026-11-28_*"))
            ingest(con, logs, runs.start(con, "ingest", {}))
            audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
            got = [json.loads(x) for x in c.get("/api/findings").text.splitlines()]
            assert len(got) == 22
            assert {f["ts"][-6:] for f in got} == {"-05:00"}
            assert "times in UTC-05:00" in plain(c.get("/").text)
            assert "times in UTC-05:00" in plain(c.get(f"/finding/{got[0]['id']}").text)
    finally:
        con.close()
