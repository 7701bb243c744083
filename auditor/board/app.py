"""The live surveillance board: a Starlette app over the audit database, and a uvicorn server
for it in a thread (docs/board.md).

    app = create_app(con.cursor, property_config=conf, auth=Auth.local())
    handle = serve(app, "127.0.0.1", 8080)   # returns once it listens
    ...
    handle.stop()

The board reads findings as `bacc-audit findings` and `report` do (the standing state of
each, store/findings.py) and writes nothing but acknowledgements and notices entered by hand,
through the functions `bacc-audit ack` and `notice` use. In `bacc-audit watch` it shares the
writer's DuckDB connection: give `create_app` a callable that returns a new cursor of it
(`con.cursor`); every request and every poll takes a cursor of its own and closes it. Given a
path instead, the board opens the database itself for as long as it runs (read-write, for
what it writes).

Pages: the work queue (`/`, bulk acknowledgement `POST /ack`), the feed (`/feed`), the floor
(`/floor`), a finding (`/finding/ID`), a round (`/round`), the notices (`/notices`, entered
and withdrawn), the dealers (`/dealers`), the filed reports (`/reports`), the login
(`/login`). API: `/api/findings` (JSON Lines, `?since=` cursor), `/api/stream` (Server-Sent
Events), `/healthz`. Every asset is served from reports/templates/board/static. The routes
table in `create_app` names each route's handler (pages.py and desk.py, api.py, streams.py)
and its access; what every route goes through (login, CSRF, errors) is router.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio.to_thread
import duckdb
import jinja2
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from auditor import __version__
from auditor.board import api, desk, pages, reports, router, streams
from auditor.board.auth import Auth
from auditor.board.feed import Cursors, Hub, ZoneCache
from auditor.board.router import Board
from auditor.board.settings import BoardSettings, is_loopback
from auditor.config import PropertyConfig
from auditor.errors import UserError
from auditor.report.render import environment
from auditor.rules.codes import REGISTRY, SEVERITIES
from auditor.shipped import shipped
from auditor.store import db

log = logging.getLogger("auditor.board")

TEMPLATES = shipped("reports/templates") / "board"
STATIC = TEMPLATES / "static"

Database = Path | str | duckdb.DuckDBPyConnection | Cursors


@functools.cache
def _environment() -> jinja2.Environment:
    """One a process (every app of the process shares its compiled templates): its additions
    are constants."""
    env = environment(TEMPLATES)  # the report's, with its money and time formatters
    # A record's RFC 3339 ts, already in the property's zone, as "MM-DD hh:mm:ss".
    env.filters["clock"] = lambda iso: f"{iso[5:10]} {iso[11:19]}"
    env.globals["severities"] = SEVERITIES
    env.globals["codes"] = sorted(REGISTRY)
    env.globals["version"] = __version__
    env.globals["one_day"] = dt.timedelta(days=1)
    return env


def _cursors_for(database: Database, board: dict[str, Any]) -> Cursors:
    if not isinstance(database, str | Path):
        if callable(database):
            return database
        # A connection, or what db.connect returns that answers like one: its cursors.
        of_connection: Cursors = database.cursor
        return of_connection
    path = Path(database)

    def cursor() -> duckdb.DuckDBPyConnection:
        con = board.get("con")
        if con is None:
            raise RuntimeError("the board's database is open only while the app runs")
        return con.cursor()

    board["path"] = path
    return cursor


def create_app(
    database: Database,
    *,
    property_config: PropertyConfig,
    auth: Auth | None = None,
    settings: BoardSettings | None = None,
    poll_interval: float = 0.15,
    report_check: router.ReportCheck | None = None,
    archive: Path | None = None,
) -> Starlette:
    """The board as an ASGI app.

    `database`: a callable returning a new DuckDB cursor (or connection) for each use, which
    the board closes after it; a connection (its `.cursor` is used); or the path of an audit
    database, opened read-write while the app runs (between lifespan startup and shutdown).
    `auth`: who may see it (auth.Auth); default `Auth.local()`, no login, which `serve`
    allows on a loopback address only. `settings`: the `[board]` config (settings.py), for
    the root path and trusted proxies `serve` gives uvicorn. `poll_interval`: how often the
    one poller looks for new findings, in seconds. `report_check(cursor)`: the check of the
    ledger a report rendered from the board prints on its cover, as `bacc-audit report`
    does (jobs.verify.report_check); without it the cover says "not checked". `archive`:
    the folder the shift reports are filed into (jobs.archive.archive_dir), whose versions
    the reports page lists beside those this database filed.
    """
    owned: dict[str, Any] = {}
    cursors = _cursors_for(database, owned)
    zones = ZoneCache(property_config)
    board = Board(
        cursors=cursors,
        conf=property_config,
        auth=auth or Auth.local(),
        settings=settings or BoardSettings(),
        hub=Hub(cursors, zones, poll_interval),
        zones=zones,
        env=_environment(),
        report_check=report_check,
        archive=archive,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if "path" in owned:
            owned["con"] = board.opened = db.connect(owned["path"])
        board.loop = asyncio.get_running_loop()
        await board.hub.start()
        task = asyncio.create_task(board.hub.run())
        try:
            yield
        finally:
            board.hub.close()
            await asyncio.gather(task, return_exceptions=True)  # it ends after its read
            owned["con"] = None
            await anyio.to_thread.run_sync(board.close_database)

    # Every route and its access: a page or the API behind the access rule (router.page,
    # router.api), or open to anyone (router.public: the login, the logout, the health check).
    routes = [
        Route("/", router.page(desk.queue_page), name="queue"),
        Route("/ack", router.page(desk.bulk_ack), methods=["POST"], name="bulk_ack"),
        Route("/feed", router.page(pages.feed_page), name="feed"),
        Route("/floor", router.page(pages.floor_page), name="floor"),
        Route("/notices", router.page(desk.notices_page), name="notices"),
        Route("/dealers", router.page(desk.dealers_page), name="dealers"),
        Route("/reports", router.page(reports.reports_page), name="reports"),
        Route("/reports/render", router.page(reports.render_report), name="report_render"),
        Route("/reports/{slug:str}/v{number:str}", router.page(reports.version_page),
              name="report_version"),
        Route("/reports/{slug:str}/v{number:str}/pdf", router.page(reports.version_pdf),
              name="report_pdf"),
        Route("/reports/{slug:str}/v{number:str}/signoff", router.page(reports.version_signoff),
              methods=["POST"], name="report_signoff"),
        Route("/dealers/{dealer:str}", router.page(desk.dealers_page), name="dealer"),
        Route("/notices", router.page(desk.notice_add), methods=["POST"], name="notice_add"),
        Route("/notices/{nid:str}/withdraw", router.page(desk.notice_withdraw),
              methods=["POST"], name="notice_withdraw"),
        Route("/finding/{fid:str}", router.page(pages.finding_page), name="finding"),
        Route("/finding/{fid:str}/ack", router.page(pages.ack), methods=["POST"], name="ack"),
        Route("/round", router.page(pages.round_page), name="round"),
        Route("/login", router.public(pages.login), methods=["GET", "POST"], name="login"),
        Route("/logout", router.public(pages.logout), methods=["POST"], name="logout"),
        Route("/api/findings", router.api(api.api_findings), name="api_findings"),
        Route("/api/stream", router.api(streams.api_stream), name="api_stream"),
        Route("/healthz", router.public(api.healthz), name="healthz"),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(
        routes=routes, lifespan=lifespan,
        exception_handlers={404: router.not_found, 405: router.not_found},
    )
    app.state.board = board
    return app


# -- serving --------------------------------------------------------------------------------


class BoardServer:
    """A running board: uvicorn in a thread of its own. `stop()` ends the streams, then the
    server, and waits for the thread."""

    def __init__(
        self, app: Starlette, server: uvicorn.Server, thread: threading.Thread, host: str,
        port: int,
    ) -> None:
        self.app = app
        self.server = server
        self.thread = thread
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def nudge(self) -> None:
        """Have the board read the new findings now (Hub.nudge), from any thread: what
        the writer calls after a commit that stored findings."""
        board: Board = self.app.state.board
        if board.loop is not None and not board.loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended between check and call
                board.loop.call_soon_threadsafe(board.hub.nudge)

    def stop(self, timeout: float = 10.0) -> None:
        board: Board = self.app.state.board
        if board.loop is not None and not board.loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended between check and call
                board.loop.call_soon_threadsafe(board.hub.close)
        self.server.should_exit = True
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise RuntimeError(f"the board at {self.url} did not stop within {timeout:g} s")

    def __enter__(self) -> BoardServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(
    app: Starlette,
    host: str | None = None,
    port: int | None = None,
    *,
    log_level: str = "warning",
    started_within: float = 10.0,
) -> BoardServer:
    """Serve `app` on host:port (default: the `[board]` listen address; port 0 picks a free
    one) in a daemon thread, and return once it accepts connections.

    A board without a login is served on a loopback address only; anywhere else is a
    UserError, as is a port already taken. The root path and the proxies whose
    X-Forwarded-For and -Proto are believed come from the app's `[board]` settings.
    """
    board: Board = app.state.board
    host = host if host is not None else board.settings.host
    port = port if port is not None else board.settings.port
    if not board.auth.required and not is_loopback(host):
        raise UserError(
            f"the board would listen on {host} without a login; give [board] users or tokens "
            "in the property config (docs/board.md), or listen on 127.0.0.1"
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise UserError(f"the board cannot listen on {host}:{port} ({e.strerror})") from None
    bound = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level=log_level,
        lifespan="on",
        root_path=board.settings.root_path,
        proxy_headers=True,
        forwarded_allow_ips=list(board.settings.trusted_proxies),
        timeout_graceful_shutdown=3,
        access_log=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="bacc-audit-board", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + started_within
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError(f"the board did not start on {host}:{bound}")
        time.sleep(0.01)
    return BoardServer(app, server, thread, host, bound)
