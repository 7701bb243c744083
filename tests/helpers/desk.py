"""The officer's desk as tests use it (tests/board/test_desk_*.py): a board with a viewer's and
an officer's login, logging a test client in, the CSRF token of a page, and the run records
the board's writes leave."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
from starlette.testclient import TestClient

from auditor import config
from auditor.board.app import create_app
from auditor.board.auth import Auth, hash_password
from auditor.board.settings import BoardSettings, settings_from_table
from helpers.logins import PASSWORD, csrf_of
from helpers.sample import CONFIG, LOCAL

ORIGIN = {"Origin": LOCAL}


def role_settings() -> BoardSettings:
    """A board behind a proxy (a login on loopback) with a viewer and an officer. The hashes
    take 1,000 iterations: a login costs a millisecond in a test."""
    return settings_from_table({
        "require_login": True,
        "users": [
            {"name": "v.watcher", "password_hash": hash_password(PASSWORD, 1000),
             "role": "viewer"},
            {"name": "j.rivera", "password_hash": hash_password(PASSWORD, 1000),
             "role": "officer"},
        ],
    }, "test.toml")


@contextmanager
def desk_client(path: Path, login: str | None = None,
                archive: Path | None = None) -> Iterator[TestClient]:
    """A test client of a board over the database at `path`: without a login (this
    machine), or with `login` (v.watcher, the viewer; j.rivera, the officer) logged in;
    with `archive`, the reports' archive it lists.
    Its reports print the ledger check `bacc-audit report` prints, as under `watch`."""
    from auditor.jobs.verify import report_check

    conf = config.load(CONFIG)
    settings = role_settings() if login else None
    app = create_app(path, property_config=conf,
                     auth=Auth.for_host(settings) if settings else None, settings=settings,
                     report_check=lambda cur: report_check(cur)[0], archive=archive)
    with TestClient(app, base_url=LOCAL, follow_redirects=False) as c:
        if login is not None:
            token = csrf(c, "/login")
            r = c.post("/login", data={"csrf": token, "name": login, "password": PASSWORD,
                                       "next": "/"}, headers=ORIGIN)
            assert r.status_code == 303, r.text
        yield c


def csrf(client: TestClient, path: str) -> str:
    page = client.get(path)
    assert page.status_code == 200, page.text
    return csrf_of(page.text)


def run_args(path: Path, command: str) -> list[dict[str, Any]]:
    """The arguments of every run of `command` in the database at `path`, oldest first."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.execute(
            "SELECT args FROM runs WHERE command = ? ORDER BY id", [command]).fetchall()
    finally:
        con.close()
    return [json.loads(a) for (a,) in rows]


def cells(page: str, cls: str) -> list[str]:
    """The text of every `<td class="CLS ...">` of a page, in order, tags stripped."""
    found = re.findall(rf'<td class="{cls}[^"]*"[^>]*>(.*?)</td>', page, re.S)
    return [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", c)).strip() for c in found]


def words(page: str) -> str:
    """A page's text with every tag a space (table cells stay apart), spaces collapsed."""
    import html

    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page))).strip()


def file_grave(path: Path, archive: Path, ack: str | None = None) -> None:
    """File the sample night's grave shift report into `archive` as the nightly job does
    (jobs.archive.report_shift); with `ack`, acknowledge that finding first, so the filing
    is the next version and says what changed."""
    import datetime as dt

    from auditor.jobs.archive import data_changed_at, report_shift
    from auditor.store import acks, db, runs

    con = db.connect(path)
    try:
        if ack:
            acks.acknowledge(con, ack, by="J. Rivera", disposition="video reviewed: dealer error")
        report_shift(con, config.load(CONFIG), dt.date(2026, 11, 28), "grave", archive,
                     data_changed_at(con), lambda _: None, runs.start(con, "nightly", {}))
    finally:
        con.close()
