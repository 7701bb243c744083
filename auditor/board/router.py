"""What every route of the board goes through, written once: the state the app shares
(Board), who is asking and whether they may (login, loopback, proxies), the CSRF check of a
posted form, errors as sentences, pages rendered with their CSRF cookie, and the security
headers. The routes table is in app.py; the handlers in pages.py, api.py and streams.py.
"""

from __future__ import annotations

import asyncio
import functools
import http
import threading
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
import duckdb
import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from auditor.board.auth import CSRF_COOKIE, SESSION_COOKIE, Auth, Identity, new_csrf_cookie
from auditor.board.feed import Cursors, Hub, ZoneCache, reading
from auditor.board.settings import OFFICER, BoardSettings, is_loopback
from auditor.board.throttle import Throttle
from auditor.config import PropertyConfig
from auditor.errors import UserError
from auditor.rules.pack import PackCache
from auditor.store.filters import Filter

FORM_BYTES = 64 * 1024
FORWARDED = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto")
# Content-Security-Policy: nothing from anywhere but the board itself, no inline script.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

T = TypeVar("T")
ReportCheck = Callable[[duckdb.DuckDBPyConnection], "dict[str, Any] | None"]


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
    # The check of the ledger a report's cover prints (jobs.verify.report_check, given by
    # whoever serves the board: the board's stage cannot call it); None: "not checked".
    report_check: ReportCheck | None = None
    # The archive the shift reports are filed into, whose versions the reports page lists
    # beside those this database filed; None: only those.
    archive: Path | None = None
    throttle: Throttle = field(default_factory=Throttle)
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


def board_of(request: Request) -> Board:
    """The Board of the app serving `request`."""
    board: Board = request.app.state.board
    return board


def base_path(request: Request) -> str:
    """The prefix the proxy serves the board under ("" without one)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def _route_path(request: Request) -> str:
    """The path inside the board (without the proxy's prefix), with its query."""
    path = request.scope["path"]
    base = base_path(request)
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
    auth = board_of(request).auth
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return auth.check_token(header[7:].strip())
    return auth.session_identity(request.cookies.get(SESSION_COOKIE))


def _refusal(request: Request, api: bool) -> Response | None:
    """None when the request may see the board; else the answer that refuses it."""
    board = board_of(request)
    if not board.auth.required:
        if any(h in request.headers for h in FORWARDED):
            return problem(
                request, 403, "This board has no login and is being reached through a proxy; "
                "set require_login = true and users or tokens in [board] (docs/board.md).", api,
            )
        if not _host_is_local(request):
            return problem(request, 403, "This board without a login answers on this "
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
    return RedirectResponse(f"{base_path(request)}/login?next={target}", status_code=303)


def problem(request: Request, status: int, message: str, api: bool) -> Response:
    """A refusal or an error as a sentence: the error page, or {"error": ...} for the API."""
    if api:
        return JSONResponse({"error": message}, status_code=status)
    return render(request, "error.html.j2", {
        "status": status, "reason": http.HTTPStatus(status).phrase, "message": message,
    }, status)


class Refused(UserError):
    """A request the board answers with a sentence and a status of its own: 404 for a
    finding or round that does not exist, 409 for a cursor past the newest finding. A plain
    UserError (a malformed value) is 400."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def whole_number(text: str | None) -> int | None:
    """A whole number typed into a query or header: ASCII digits, at most 18 (a BIGINT).
    None when not given or not one (`str.isdigit` takes "²", which `int` refuses)."""
    if text is None:
        return None
    text = text.strip()
    if not 0 < len(text) <= 18 or not text.isascii() or not text.isdigit():
        return None
    return int(text)


Handler = Callable[[Request, Board, Identity | None], Awaitable[Response]]
Endpoint = Callable[[Request], Awaitable[Response]]


class Answered(Exception):
    """A request ended early with an answer of its own (a refused form); the route returns it."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def page(handler: Handler) -> Endpoint:
    """A page route: shown to nobody the access rule refuses (a login page redirect, or 403)."""
    return _guarded(handler, api=False)


def api(handler: Handler) -> Endpoint:
    """An API route: as a page, but refused in JSON (401 with WWW-Authenticate, or 403)."""
    return _guarded(handler, api=True)


def _guarded(handler: Handler, api: bool) -> Endpoint:
    """The access rule first; then a UserError (a bad filter, an unknown finding id) is its
    sentence with status 400, and every answer carries the security headers."""

    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        refused = _refusal(request, api)
        if refused is not None:
            return refused
        try:
            response = await handler(request, board_of(request), identify(request))
        except UserError as e:
            response = problem(request, getattr(e, "status", 400), str(e), api)
        except Answered as a:
            response = a.response
        return secured(response)

    return endpoint


def public(handler: Handler) -> Endpoint:
    """A route anyone may reach (the login and logout forms, the health check): no access
    rule, and the handler secures what it answers; a refused form is the answer."""

    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request, board_of(request), identify(request))
        except Answered as a:
            return a.response

    return endpoint


async def not_found(request: Request, exc: Exception) -> Response:
    """No such page (404), or not with this method (405): a page of the board saying so,
    or {"error": ...} under /api/, as every other refusal."""
    status = getattr(exc, "status_code", 404)
    path = request.scope["path"][len(base_path(request)):]
    api = path.startswith("/api/")
    if status == 405:
        message = f"{request.method} is not how {path} is asked for."
    elif api:
        message = f"No {path} here: the API is /api/findings and /api/stream (docs/board.md)."
    else:
        message = (f"No page {path} here. The board's pages are the feed, the floor, a "
                   "finding's page and a round's (linked from the feed).")
    response = problem(request, status, message, api)
    allow = (getattr(exc, "headers", None) or {}).get("Allow")
    if allow:
        response.headers["Allow"] = allow
    return secured(response)


def secured(response: Response) -> Response:
    """The response with the board's security headers (those it does not set itself)."""
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


async def form(request: Request) -> dict[str, str]:
    """The posted form, once it is shown to come from a page of this board (its origin, and
    the token of the page's CSRF cookie); else Answered with the refusal: unreadable (400)
    or cross-site (403). A field given more than once is its last value."""
    return {k: v[-1] for k, v in (await form_lists(request)).items()}


async def form_lists(request: Request) -> dict[str, list[str]]:
    """As `form`, every value of each field (the findings ticked on the work queue)."""
    try:
        posted = await _form(request)
    except UserError as e:
        raise Answered(problem(request, 400, str(e), False)) from None
    auth = board_of(request).auth
    field = (posted.get("csrf") or [""])[-1]
    if _same_origin(request) and auth.csrf_ok(request.cookies.get(CSRF_COOKIE), field):
        return posted
    raise Answered(problem(
        request, 403, "Refused: the form did not come from a page of this board (cross-site "
        "request). Reload the page and submit it again.", False,
    ))


def role_of(request: Request, who: Identity | None) -> str:
    """What the one asking may do: their login's role; on a board without a login, whoever
    sits at this machine is the officer."""
    if not board_of(request).auth.required:
        return OFFICER
    return who.role if who else "none"


def officer_only(request: Request, who: Identity | None) -> None:
    """Answered with 403 unless the one asking is an officer: a viewer reads the board, and
    nothing they post is stored."""
    role = role_of(request, who)
    if role != OFFICER:
        raise Answered(problem(
            request, 403, f"Refused: {who.name if who else 'this login'} may read the board "
            f"(role {role}) but not write to it; an officer's login acknowledges, enters "
            "notices and signs reports off.", False,
        ))


def writer_args(request: Request, who: Identity | None) -> dict[str, Any]:
    """What the run record of every write from the board carries: the board, the client's
    address, how they logged in and their role."""
    return {"client": request.client.host if request.client else None,
            "login": who.via if who else "none (local)",
            "role": role_of(request, who)}


async def _form(request: Request) -> dict[str, list[str]]:
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
    return urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)


def render(
    request: Request, template: str, context: dict[str, Any], status: int = 200
) -> Response:
    """A page: its CSRF cookie set on first visit, and the token for its forms."""
    board = board_of(request)
    cookie = request.cookies.get(CSRF_COOKIE)
    fresh = cookie is None
    cookie = cookie or new_csrf_cookie()
    base = base_path(request)
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
        officer=role_of(request, who) == OFFICER,
        login=board.auth.required,
        property=board.conf.name,
        **({"zone_name": str(board.zones.shown())} | context),
    )
    response = HTMLResponse(html, status_code=status)
    if fresh:
        response.set_cookie(
            CSRF_COOKIE, cookie, httponly=True, samesite="strict", path=base or "/",
            secure=request.url.scheme == "https",
        )
    return secured(response)


async def query_filters(board: Board, request: Request) -> Filter:
    """The findings filters the query asks for (severity, code, pit, table, date, shift)."""
    return await board.read(
        lambda con, zone: Filter.from_query(request.query_params, board.conf, zone)
    )
