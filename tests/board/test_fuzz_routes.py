"""Every route of the board and every query parameter over odd values (issue 31), at a small
size (bench/odd_input.py runs the same at a large one): never a 500; a refusal is a page of
the board (HTML), or JSON under /api/; a stream that is accepted starts as one.

The board runs under uvicorn as in `watch --web`, once without a login (on loopback) and
once asking for one, and is asked as a stranger would: odd paths, methods, parameters and
a Last-Event-ID header (tests/helpers/fuzz.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from helpers.fuzz import board_request, examples, tally
from helpers.sample import CONFIG, built
from hypothesis import HealthCheck, example, given, settings

from auditor import config
from auditor.board.app import BoardServer, create_app, serve
from auditor.board.auth import Auth, hash_password, token_sha256
from auditor.board.settings import settings_from_table

pytestmark = pytest.mark.slow

EXAMPLES = examples(60)  # a few seconds a board; bench/odd_input.py asks thousands
TOKEN = "tok-0f8e2d4c6b1a39578e0d2c4b6a8f1e3d"


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built(tmp_path_factory, tmp_path_factory.mktemp("fuzzboard") / "night.duckdb",
                 with_mb01=True)


@pytest.fixture(scope="module", params=["local", "login"])
def board(request: pytest.FixtureRequest, night: Path,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoardServer]:
    path = tmp_path_factory.mktemp("served") / "board.duckdb"
    path.write_bytes(night.read_bytes())
    conf = config.load(CONFIG)
    if request.param == "local":
        app = create_app(path, property_config=conf)
    else:
        settings = settings_from_table({
            "require_login": True,
            "users": [{"name": "j.rivera", "password_hash": hash_password("pw", 1000)}],
            "tokens": [{"name": "case-system", "sha256": token_sha256(TOKEN)}],
        }, "test.toml")
        app = create_app(path, property_config=conf, settings=settings,
                         auth=Auth.for_host(settings, "127.0.0.1"))
    with serve(app, "127.0.0.1", 0) as server:
        yield server


def ask(board: BoardServer, method: str, path: str, params: list[tuple[str, str]],
        headers: dict[str, str]) -> tuple[int, str, str]:
    """(status, content type, the start of the body); a stream is left after its head."""
    sent = {k.encode(): v.encode("utf-8") for k, v in headers.items()}
    query = httpx2.QueryParams(tuple(params))
    with httpx2.Client(base_url=board.url, timeout=30) as http:
        request = http.build_request(method, path, params=query, headers=sent)
        response = http.send(request, stream=True)
        try:
            kind = response.headers.get("content-type", "")
            if kind.startswith("text/event-stream"):
                return response.status_code, kind, ""
            return response.status_code, kind, response.read()[:2000].decode("utf-8", "replace")
        finally:
            response.close()


ROUTES = {"/", "/floor", "/round", "/login", "/logout", "/healthz", "/api/findings",
          "/api/stream", "/finding/", "//", "/floor/"}


def route_of(path: str) -> str:
    """The route a path asks for, its odd segment left out (the bench counts by route)."""
    if path in ROUTES:
        return path
    if path.startswith("/finding/"):
        return "/finding/…/ack" if path.endswith("/ack") else "/finding/…"
    for prefix in ("/static/", "/api/"):
        if path.startswith(prefix):
            return prefix + "…"
    return "/…"


def judge(method: str, path: str, status: int, kind: str, body: str) -> None:
    assert status != 500 and (status < 500 or (path == "/healthz" and status == 503)), status
    if status < 400 or method == "HEAD":
        return
    if path.startswith("/api/"):
        assert kind == "application/json" and '"error"' in body, (status, kind, body)
    else:
        assert kind.startswith("text/html") and "bacc-audit" in body, (status, kind, body)


@pytest.mark.parametrize("authorized", [False, True], ids=["stranger", "token"])
def test_no_route_answers_500_to_odd_requests(board: BoardServer, authorized: bool) -> None:
    ids = ["Fc95f8bf836d2", "F6ff51cc008a3", "MB-01", "MB-01-1128-01"]

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(request=board_request(ids))
    # The requests of the issue, which answered 500, always asked.
    @example(request=("GET", "/api/findings", [("since", "²")], {}))
    @example(request=("GET", "/api/findings", [("limit", "²")], {}))
    @example(request=("GET", "/api/stream", [("since", "²")], {}))
    @example(request=("GET", "/round", [("table", "MB-01"), ("shoe", "x"), ("round", "²")], {}))
    @example(request=("GET", "/floor", [("date", "9999-12-31")], {}))
    @example(request=("GET", "/", [("date", "0001-01-01")], {}))
    @example(request=("GET", "/api/findings", [("shift", "9999-12-31/grave")], {}))
    def check(request: tuple[str, str, list[tuple[str, str]], dict[str, str]]) -> None:
        method, path, params, headers = request
        if authorized:
            headers = {**headers, "Authorization": f"Bearer {TOKEN}"}
        try:
            t0 = time.monotonic()
            status, kind, body = ask(board, method, path, params, headers)
        except (httpx2.InvalidURL, httpx2.LocalProtocolError):
            return  # a path or a header (a newline in it) the client itself will not send
        tally({"route": route_of(path), "method": method, "status": status,
               "seconds": round(time.monotonic() - t0, 3)})
        judge(method, path, status, kind, body)

    check()
