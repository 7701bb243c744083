"""The live surveillance board: a Starlette app over the audit database, and a uvicorn server
for it in a thread (docs/board.md).

    app = create_app(con.cursor, property_config=conf, auth=Auth.local())
    handle = serve(app, "127.0.0.1", 8080)   # returns once it listens
    ...
    handle.stop()

The board reads findings as `bacc-audit findings` and `report` do (the standing state of
each, store/findings.py) and writes nothing but acknowledgements, through the function
`bacc-audit ack` uses. In `bacc-audit watch` it shares the writer's DuckDB connection: give
`create_app` a callable that returns a new cursor of it (`con.cursor`); every request and
every poll takes a cursor of its own and closes it. Given a path instead, the board opens the
database itself for as long as it runs (read-write, for the acknowledgements).

Pages: the feed (`/`), the floor (`/floor`), a finding (`/finding/ID`), a round (`/round`),
the login (`/login`). API: `/api/findings` (JSON Lines, `?since=` cursor), `/api/stream`
(Server-Sent Events), `/healthz`. Every asset is served from reports/templates/board/static.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import json
import logging
import socket
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
import duckdb
import jinja2
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from auditor import __version__
from auditor.board import feed, views
from auditor.board.auth import CSRF_COOKIE, SESSION_COOKIE, Auth, Identity, new_csrf_cookie
from auditor.board.feed import Cursors, Filters, Hub, ZoneCache, reading, snapshot
from auditor.board.settings import BoardSettings, is_loopback
from auditor.config import PropertyConfig
from auditor.errors import UserError
from auditor.report.render import environment
from auditor.rules.codes import REGISTRY, SEVERITIES
from auditor.rules.pack import PackCache
from auditor.shipped import shipped
from auditor.store import db, findings

log = logging.getLogger("auditor.board")

TEMPLATES = shipped("reports/templates") / "board"
STATIC = TEMPLATES / "static"
FEED_LIMIT = 200  # findings on the feed page as first served; the stream adds the rest
HEARTBEAT_SECONDS = 15.0  # a comment on an idle stream: proxies keep it open, and a gone
# client is noticed (a write to it fails)
FORM_BYTES = 64 * 1024
CURSOR_HEADER = "Bacc-Cursor"
FORWARDED = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto")
# Content-Security-Policy: nothing from anywhere but the board itself, no inline script.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

Database = Path | str | duckdb.DuckDBPyConnection | Cursors
T = TypeVar("T")


def _environment() -> jinja2.Environment:
    env = environment(TEMPLATES)  # the report's, with its money and time formatters
    # A record's RFC 3339 ts, already in the property's zone, as "MM-DD hh:mm:ss".
    env.filters["clock"] = lambda iso: f"{iso[5:10]} {iso[11:19]}"
    env.globals["severities"] = SEVERITIES
    env.globals["codes"] = sorted(REGISTRY)
    env.globals["version"] = __version__
    env.globals["one_day"] = dt.timedelta(days=1)
    return env


@dataclass
class Board:
    """What every request of one app shares: the database, the config, the access rule, the
    poller. Kept on `app.state.board`."""

    cursors: Cursors
    conf: PropertyConfig
    auth: Auth
    settings: BoardSettings
    hub: Hub
    zones: ZoneCache
    env: jinja2.Environment
    packs: PackCache = field(default_factory=PackCache)
    loop: asyncio.AbstractEventLoop | None = None
    opened: duckdb.DuckDBPyConnection | None = None  # the connection the board opened itself
    busy: int = 0  # reads and writes running in worker threads
    idle: threading.Condition = field(default_factory=threading.Condition)

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(cursor, zone, *args)` in a worker thread with a cursor of its own."""

        def work() -> T:
            with self.idle:
                self.busy += 1
            try:
                with reading(self.cursors) as con:
                    return fn(con, self.zones.get(con), *args)
            finally:
                with self.idle:
                    self.busy -= 1
                    self.idle.notify_all()

        return await anyio.to_thread.run_sync(work)

    def close_database(self, within: float = 10.0) -> None:
        """Close the connection the board opened, once no cursor of it is at work: DuckDB
        refuses to close a connection whose cursor is running a query."""
        if self.opened is None:
            return
        with self.idle:
            self.idle.wait_for(lambda: self.busy == 0, timeout=within)
        self.opened.close()
        self.opened = None


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
) -> Starlette:
    """The board as an ASGI app.

    `database`: a callable returning a new DuckDB cursor (or connection) for each use, which
    the board closes after it; a connection (its `.cursor` is used); or the path of an audit
    database, opened read-write while the app runs (between lifespan startup and shutdown).
    `auth`: who may see it (auth.Auth); default `Auth.local()`, no login, which `serve`
    allows on a loopback address only. `settings`: the `[board]` config (settings.py), for
    the root path and trusted proxies `serve` gives uvicorn. `poll_interval`: how often the
    one poller looks for new findings, in seconds.
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

    routes = [
        Route("/", feed_page, name="feed"),
        Route("/floor", floor_page, name="floor"),
        Route("/finding/{fid:str}", finding_page, name="finding"),
        Route("/finding/{fid:str}/ack", ack, methods=["POST"], name="ack"),
        Route("/round", round_page, name="round"),
        Route("/login", login, methods=["GET", "POST"], name="login"),
        Route("/logout", logout, methods=["POST"], name="logout"),
        Route("/api/findings", api_findings, name="api_findings"),
        Route("/api/stream", api_stream, name="api_stream"),
        Route("/healthz", healthz, name="healthz"),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.board = board
    return app


# -- access ---------------------------------------------------------------------------------


def _board(request: Request) -> Board:
    board: Board = request.app.state.board
    return board


def _base(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


def _route_path(request: Request) -> str:
    """The path inside the board (without the proxy's prefix), with its query."""
    path = request.scope["path"]
    base = _base(request)
    if base and path.startswith(base):
        path = path[len(base):] or "/"
    return path + (f"?{request.url.query}" if request.url.query else "")


def _host_is_local(request: Request) -> bool:
    """A login-less board answers only to a loopback Host: a web page elsewhere that points
    a name of its own at 127.0.0.1 (DNS rebinding) must not read the board."""
    host = request.headers.get("host", "")
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return is_loopback(name.strip("[]"))


def identify(request: Request) -> Identity | None:
    """Who is logged in: a bearer token, else the session cookie."""
    auth = _board(request).auth
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return auth.check_token(header[7:].strip())
    return auth.session_identity(request.cookies.get(SESSION_COOKIE))


def _refusal(request: Request, api: bool) -> Response | None:
    """None when the request may see the board; else the answer that refuses it."""
    board = _board(request)
    if not board.auth.required:
        if any(h in request.headers for h in FORWARDED):
            return _problem(
                request, 403, "This board has no login and is being reached through a proxy; "
                "set require_login = true and users or tokens in [board] (docs/board.md).", api,
            )
        if not _host_is_local(request):
            return _problem(request, 403, "This board without a login answers on this "
                            "machine only (a loopback host name).", api)
        return None
    if identify(request) is not None:
        return None
    if api:
        return JSONResponse(
            {"error": "log in: send Authorization: Bearer TOKEN"},
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="bacc-audit board"'},
        )
    target = urllib.parse.quote(_route_path(request), safe="")
    return RedirectResponse(f"{_base(request)}/login?next={target}", status_code=303)


def _problem(request: Request, status: int, message: str, api: bool) -> Response:
    if api:
        return JSONResponse({"error": message}, status_code=status)
    return _render(request, "error.html.j2", {"status": status, "message": message}, status)


Handler = Callable[[Request, Board, Identity | None], Awaitable[Response]]


def guarded(api: bool = False) -> Callable[[Handler], Callable[[Request], Awaitable[Response]]]:
    """An endpoint that shows nothing before the access rule lets the request in; a UserError
    (a bad filter, an unknown finding id) is its sentence with status 400."""

    def wrap(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            refused = _refusal(request, api)
            if refused is not None:
                return refused
            try:
                response = await handler(request, _board(request), identify(request))
            except UserError as e:
                response = _problem(request, 400, str(e), api)
            return _secured(response)

        return endpoint

    return wrap


def _secured(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def _same_origin(request: Request) -> bool:
    """The form was posted from a page of this board: its Origin (or, where a browser sends
    none, its Referer) is the board's own scheme, host and port."""
    own = f"{request.url.scheme}://{request.url.netloc}"
    origin = request.headers.get("origin")
    if origin is not None:
        return origin == own
    referer = request.headers.get("referer")
    return referer is not None and (referer == own or referer.startswith(own + "/"))


def _csrf_refusal(request: Request, form: dict[str, str]) -> Response | None:
    auth = _board(request).auth
    if _same_origin(request) and auth.csrf_ok(request.cookies.get(CSRF_COOKIE), form.get("csrf")):
        return None
    return _problem(
        request, 403, "Refused: the form did not come from a page of this board (cross-site "
        "request). Reload the page and submit it again.", False,
    )


async def _checked_form(request: Request) -> dict[str, str] | Response:
    """The posted form, or the response refusing it: unreadable (400) or cross-site."""
    try:
        form = await _form(request)
    except UserError as e:
        return _problem(request, 400, str(e), False)
    refused = _csrf_refusal(request, form)
    return form if refused is None else refused


async def _form(request: Request) -> dict[str, str]:
    """A URL-encoded form, at most FORM_BYTES (read without python-multipart)."""
    if request.headers.get("content-type", "").split(";")[0].strip() != (
        "application/x-www-form-urlencoded"
    ):
        raise UserError("the form must be sent as application/x-www-form-urlencoded")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_BYTES:
            raise UserError("the form is too large")
    parsed = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[-1] for k, v in parsed.items()}


def _render(
    request: Request, template: str, context: dict[str, Any], status: int = 200
) -> Response:
    """A page: its CSRF cookie set on first visit, and the token for its forms."""
    board = _board(request)
    cookie = request.cookies.get(CSRF_COOKIE)
    fresh = cookie is None
    cookie = cookie or new_csrf_cookie()
    base = _base(request)
    who = identify(request) if board.auth.required else None

    def url(path: str, *pairs: tuple[str, Any], **query: Any) -> str:
        items = [*pairs, *((k, v) for k, v in query.items() if v is not None)]
        return base + path + ("?" + urllib.parse.urlencode(items) if items else "")

    html = board.env.get_template(template).render(
        request=request,
        base=base,
        url=url,
        csrf=board.auth.csrf_token(cookie),
        who=who,
        login=board.auth.required,
        property=board.conf.name,
        **context,
    )
    response = HTMLResponse(html, status_code=status)
    if fresh:
        response.set_cookie(
            CSRF_COOKIE, cookie, httponly=True, samesite="strict", path=base or "/",
            secure=request.url.scheme == "https",
        )
    return _secured(response)


# -- pages ----------------------------------------------------------------------------------


def _feed_context(
    con: duckdb.DuckDBPyConnection, zone: dt.tzinfo, filters: Filters
) -> dict[str, Any]:
    with snapshot(con):
        cursor = feed.head(con)
        items = feed.standing(con, zone, filters, FEED_LIMIT)
        pits = [r[0] for r in con.execute(
            "SELECT DISTINCT pit FROM findings WHERE pit IS NOT NULL ORDER BY 1").fetchall()]
        tables = [r[0] for r in con.execute(
            "SELECT DISTINCT table_id FROM findings WHERE table_id IS NOT NULL ORDER BY 1"
        ).fetchall()]
    reviewed = views.acked_fingerprints(con)  # after: the ORM's session ends a transaction
    return {
        "cursor": cursor,
        "items": [{**c.record, "cursor": c.cursor, "ack": reviewed.get(c.record["fingerprint"])}
                  for c in items],
        "pits": pits,
        "tables": tables,
        "zone_name": str(zone),
    }


async def _filters(board: Board, request: Request) -> Filters:
    return await board.read(
        lambda con, zone: Filters.from_query(request.query_params, board.conf, zone)
    )


@guarded()
async def feed_page(request: Request, board: Board, who: Identity | None) -> Response:
    filters = await _filters(board, request)
    context = await board.read(_feed_context, filters)
    stream = [*filters.query(), ("since", str(context["cursor"]))]
    return _render(request, "feed.html.j2", {
        **context,
        "filters": filters,
        "filter_query": urllib.parse.urlencode(filters.query()),
        "stream_url": f"{_base(request)}/api/stream?{urllib.parse.urlencode(stream)}",
        "limit": FEED_LIMIT,
    })


@guarded()
async def floor_page(request: Request, board: Board, who: Identity | None) -> Response:
    asked = request.query_params.get("date")

    def read(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> dict[str, Any]:
        from auditor.config import parse_date

        day = parse_date(asked) if asked else views.floor_day(con, board.conf, zone)
        if day is None:
            return {"floor": None, "zone_name": str(zone)}
        return {"floor": views.floor(con, board.conf, zone, day), "zone_name": str(zone)}

    return _render(request, "floor.html.j2", await board.read(read))


def _resolve(con: duckdb.DuckDBPyConnection, fid: str) -> str:
    from auditor.store import acks

    return acks.resolve(con, fid)


async def _finding_response(
    request: Request, board: Board, fid: str, *, error: str | None = None,
    form: dict[str, str] | None = None, status: int = 200,
) -> Response:
    now = dt.datetime.now(dt.UTC)

    def read(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> dict[str, Any] | None:
        return views.finding_page(con, _resolve(con, fid), zone, board.packs, now)

    page = await board.read(read)
    if page is None:
        return _problem(request, 404, f"No finding {fid}.", False)
    return _render(request, "finding.html.j2", {
        **page,
        "error": error,
        "form": form or {},
        "acked": request.query_params.get("acked"),
        "now": now,
    }, status)


@guarded()
async def finding_page(request: Request, board: Board, who: Identity | None) -> Response:
    return await _finding_response(request, board, request.path_params["fid"])


@guarded()
async def round_page(request: Request, board: Board, who: Identity | None) -> Response:
    q = request.query_params
    table, shoe, rnd = q.get("table"), q.get("shoe"), q.get("round")
    if not table or shoe is None or not rnd or not rnd.isdigit():
        raise UserError("a round is named by table, shoe and round (a number)")
    now = dt.datetime.now(dt.UTC)
    page = await board.read(
        lambda con, zone: views.round_page(con, table, shoe, int(rnd), zone, board.packs, now)
    )
    if page is None:
        return _problem(request, 404, f"No round {rnd} of shoe {shoe} at {table}.", False)
    return _render(request, "round.html.j2", {**page, "now": now})


@guarded()
async def ack(request: Request, board: Board, who: Identity | None) -> Response:
    fid = request.path_params["fid"]
    form = await _checked_form(request)
    if isinstance(form, Response):
        return form
    by = who.name if who else form.get("name", "").strip()
    disposition = form.get("disposition", "").strip()
    note = form.get("note", "").strip()
    problems = []
    if not by:
        problems.append("type your name")
    if not disposition:
        problems.append("say what was decided")
    if len(by) > 100 or len(disposition) > 500 or len(note) > 2000:
        problems.append("shorten the text (name 100, disposition 500, note 2,000 characters)")
    if problems:
        return await _finding_response(
            request, board, fid, error="; ".join(problems).capitalize() + ".", form=form,
            status=400,
        )
    client = {"client": request.client.host if request.client else None,
              "login": who.via if who else "none (local)"}

    def write(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> dict[str, Any]:
        # A transaction of the writer's touching the same catalog can make DuckDB refuse
        # this one; the acknowledgement is tried again rather than lost.
        for attempt in range(3):
            try:
                return views.acknowledge(
                    con, fid, by=by, disposition=disposition, note=note, client=client
                )
            except duckdb.TransactionException:
                if attempt == 2:
                    raise
                time.sleep(0.1 * (attempt + 1))
        raise AssertionError("unreachable")

    try:
        done = await board.read(write)
    except UserError as e:
        return await _finding_response(request, board, fid, error=str(e), form=form,
                                       status=400)
    target = f"{_base(request)}/finding/{done['finding_id']}?acked={done['id']}"
    return RedirectResponse(target, status_code=303)


def _safe_next(target: str | None) -> str:
    """Only a path inside the board: `next=//elsewhere` must not send a login away."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


async def login(request: Request) -> Response:
    board = _board(request)
    base = _base(request)
    nxt = _safe_next(request.query_params.get("next"))
    if not board.auth.required:
        return RedirectResponse(base + nxt, status_code=303)
    if request.method == "GET":
        return _render(request, "login.html.j2", {"next": nxt, "error": None, "name": ""})
    form = await _checked_form(request)
    if isinstance(form, Response):
        return form
    nxt = _safe_next(form.get("next"))
    name, password, token = form.get("name", ""), form.get("password", ""), form.get("token", "")
    who = None
    if token.strip():
        who = board.auth.check_token(token)
    elif name.strip() and password:
        who = await anyio.to_thread.run_sync(board.auth.check_password, name, password)
    if who is None:
        await asyncio.sleep(0.5)  # slows a guesser down; a person does not notice
        return _render(request, "login.html.j2", {
            "next": nxt, "error": "Wrong name and password, or an unknown token.",
            "name": name,
        }, 401)
    response = RedirectResponse(base + nxt, status_code=303)
    response.set_cookie(
        SESSION_COOKIE, board.auth.session_value(who), max_age=board.auth.session_seconds,
        httponly=True, samesite="strict", path=base or "/",
        secure=request.url.scheme == "https",
    )
    return _secured(response)


async def logout(request: Request) -> Response:
    form = await _checked_form(request)
    if isinstance(form, Response):
        return form
    base = _base(request)
    response = RedirectResponse(f"{base}/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path=base or "/")
    return _secured(response)


# -- the API --------------------------------------------------------------------------------


def _cursor_param(text: str | None, what: str) -> int | None:
    if text is None or text.strip() == "":
        return None
    if not text.strip().isdigit():
        raise UserError(f"{what} is a cursor: a whole number, as a response's {CURSOR_HEADER} "
                        "header or a stream event's id gives it")
    return int(text.strip())


@guarded(api=True)
async def api_findings(request: Request, board: Board, who: Identity | None) -> Response:
    """Findings v1 as JSON Lines. Without `since`: the standing findings, exactly what
    `bacc-audit findings --format jsonl` writes with the same filters. With `since=CURSOR`:
    the findings stored after it, in the order stored (`withdrawn=1` adds the withdrawals,
    and a `status` field to every line). The `Bacc-Cursor` header is the cursor to ask
    with next time."""
    q = request.query_params
    since = _cursor_param(q.get("since"), "since")
    with_withdrawn = q.get("withdrawn", "") in ("1", "true", "yes")
    limit = _cursor_param(q.get("limit"), "limit")
    filters = await _filters(board, request)

    def read(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> tuple[list[dict], int]:
        with snapshot(con):
            top = feed.head(con)
            if since is None:
                return findings.select(
                    con, table=filters.table, pit=filters.pit, codes=list(filters.codes) or None,
                    min_severity=filters.severity, window=filters.window, zone=zone,
                    dealer=True,
                ), top
            rows: list[dict] = []
            delivered = since
            for c in feed.all_changes(con, since, top, zone, filters, with_withdrawn):
                if limit is not None and len(rows) >= limit:
                    return rows, delivered  # the next call goes on after the last one sent
                rows.append({**c.record, "status": c.status} if with_withdrawn else c.record)
                delivered = c.cursor
            return rows, max(top, since)

    rows, cursor = await board.read(read)
    body = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)
    nxt = urllib.parse.urlencode(_next_query(request, cursor))
    return Response(
        body,
        media_type="application/x-ndjson",
        headers={CURSOR_HEADER: str(cursor), "Link": f'<{_base(request)}/api/findings?{nxt}>; '
                 'rel="next"'},
    )


def _next_query(request: Request, cursor: int) -> list[tuple[str, str]]:
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "since"]
    return [*kept, ("since", str(cursor))]


@guarded(api=True)
async def api_stream(request: Request, board: Board, who: Identity | None) -> Response:
    """Server-Sent Events: one event per finding stored after the cursor (Last-Event-ID,
    else `since`, else now), `id:` its cursor; withdrawals as the event `withdrawn`."""
    start = _cursor_param(request.headers.get("last-event-id"), "Last-Event-ID")
    if start is None:
        start = _cursor_param(request.query_params.get("since"), "since")
    filters = await _filters(board, request)
    hub = board.hub
    sub = hub.subscribe(filters)

    async def events() -> AsyncIterator[str]:
        try:
            yield "retry: 2000\n\n"
            covered = sub.start
            if start is not None:
                # Catch up from the database to its head as read now; the poller had pushed
                # nothing past sub.start before we subscribed, so from here on its batches
                # hold whatever comes after, and the overlap is skipped by cursor.
                top = await board.read(lambda con, zone: feed.head(con))
                after = start
                while after < top:
                    caught = await board.read(
                        lambda con, zone, a=after: feed.changes(
                            con, a, zone, upto=top, filters=filters
                        )
                    )
                    for c in caught:
                        yield c.sse()
                    if len(caught) < feed.CHUNK:
                        break
                    after = caught[-1].cursor
                covered = max(start, top)
            while True:
                try:
                    batch = await asyncio.wait_for(sub.queue.get(), HEARTBEAT_SECONDS)
                except TimeoutError:
                    if sub not in hub.subscribers:
                        return
                    yield ": keep-alive\n\n"
                    continue
                if batch is None:
                    return
                for c in batch:
                    if c.cursor > covered and filters.matches(c):
                        yield c.sse()
                covered = max(covered, batch[-1].cursor)
        finally:
            hub.unsubscribe(sub)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def healthz(request: Request) -> Response:
    """Liveness for the proxy or a monitor, without a login: whether the poller is keeping
    up, and nothing of the findings."""
    hub = _board(request).hub
    age = None if hub.last_poll is None else round(time.time() - hub.last_poll, 3)
    stale = age is None or age > max(5.0, hub.interval * 20)
    body: dict[str, Any] = {"status": "stale" if stale else "ok", "last_poll_seconds_ago": age}
    if hub.error:
        body["warning"] = hub.error  # e.g. findings stored out of cursor order
    return _secured(JSONResponse(body, status_code=503 if stale else 200))


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
