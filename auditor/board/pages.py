"""The board's pages (docs/board.md): the feed, the floor, a finding with its
acknowledgement form, a round, and the login. What each shows is read by views.py; the
access rule, the CSRF check and errors are the router's (router.py).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import urllib.parse
from typing import Any

import anyio.to_thread
import duckdb
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from auditor.board import feed, router, views
from auditor.board.auth import SESSION_COOKIE, Identity
from auditor.board.feed import snapshot
from auditor.board.router import (
    Board,
    Refused,
    base_path,
    problem,
    query_filters,
    render,
    secured,
    whole_number,
)
from auditor.errors import UserError
from auditor.store.filters import Filter

FEED_LIMIT = 200  # findings on the feed page as first served; the stream adds the rest


def _feed_context(
    con: duckdb.DuckDBPyConnection, zone: dt.tzinfo, filters: Filter
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


async def feed_page(request: Request, board: Board, who: Identity | None) -> Response:
    filters = await query_filters(board, request)
    context = await board.read(_feed_context, filters)
    stream = [*filters.query(), ("since", str(context["cursor"]))]
    return render(request, "feed.html.j2", {
        **context,
        "filters": filters,
        "filter_query": urllib.parse.urlencode(filters.query()),
        "stream_url": f"{base_path(request)}/api/stream?{urllib.parse.urlencode(stream)}",
        "limit": FEED_LIMIT,
    })


async def floor_page(request: Request, board: Board, who: Identity | None) -> Response:
    asked = request.query_params.get("date")

    def read(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> dict[str, Any]:
        from auditor.config import parse_date

        day = parse_date(asked) if asked else views.floor_day(con, board.conf, zone)
        if day is None:
            return {"floor": None, "zone_name": str(zone)}
        return {"floor": views.floor(con, board.conf, zone, day), "zone_name": str(zone)}

    return render(request, "floor.html.j2", await board.read(read))


def _resolve(con: duckdb.DuckDBPyConnection, fid: str) -> str:
    """The fingerprint a finding's URL names; one no finding has is not found (404), with
    the closest ids named as `bacc-audit ack` names them."""
    from auditor.store import acks

    try:
        fingerprint = acks.resolve(con, fid)
        acks.check_fingerprint(con, fingerprint)
    except UserError as e:
        raise Refused(404, str(e)) from None
    return fingerprint


async def _finding_response(
    request: Request, board: Board, fid: str, *, error: str | None = None,
    form: dict[str, str] | None = None, status: int = 200,
) -> Response:
    now = dt.datetime.now(dt.UTC)

    def read(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> dict[str, Any] | None:
        return views.finding_page(con, _resolve(con, fid), zone, board.packs, now)

    page = await board.read(read)
    if page is None:
        return problem(request, 404, f"No finding {fid}.", False)
    return render(request, "finding.html.j2", {
        **page,
        "error": error,
        "form": form or {},
        "acked": request.query_params.get("acked"),
        "now": now,
    }, status)


async def finding_page(request: Request, board: Board, who: Identity | None) -> Response:
    return await _finding_response(request, board, request.path_params["fid"])


async def round_page(request: Request, board: Board, who: Identity | None) -> Response:
    q = request.query_params
    table, shoe, number = q.get("table"), q.get("shoe"), whole_number(q.get("round"))
    if not table or shoe is None or number is None:
        raise UserError("a round is named by table, shoe and round (a whole number)")
    now = dt.datetime.now(dt.UTC)
    page = await board.read(
        lambda con, zone: views.round_page(con, table, shoe, number, zone, board.packs, now)
    )
    if page is None:
        return problem(request, 404, f"No round {number} of shoe {shoe} at {table}.", False)
    return render(request, "round.html.j2", {**page, "now": now})


def ack_fields(form: dict[str, str], who: Identity | None) -> tuple[str, str, str, str | None]:
    """Who acknowledges (the login, else the name typed), the disposition and the note, and
    the sentence saying what is missing or too long (None when nothing is)."""
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
    trouble = "; ".join(problems).capitalize() + "." if problems else None
    return by, disposition, note, trouble


async def ack(request: Request, board: Board, who: Identity | None) -> Response:
    fid = request.path_params["fid"]
    router.officer_only(request, who)
    form = await router.form(request)
    by, disposition, note, trouble = ack_fields(form, who)
    if trouble:
        return await _finding_response(request, board, fid, error=trouble, form=form,
                                       status=400)
    client = router.writer_args(request, who)

    def write(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> dict[str, Any]:
        return views.retried(lambda: views.acknowledge(
            con, fid, by=by, disposition=disposition, note=note, client=client))

    try:
        done = await board.read(write)
    except UserError as e:
        return await _finding_response(request, board, fid, error=str(e), form=form,
                                       status=400)
    target = f"{base_path(request)}/finding/{done['finding_id']}?acked={done['id']}"
    return RedirectResponse(target, status_code=303)


# A throttled attempt is answered after this pause: one that does not wait for Retry-After
# asks at most about once a second a connection, and costs the board next to nothing.
REFUSED_PAUSE = 1.0
FAILED_PAUSE = 0.5  # slows a guesser down; a person does not notice


def _safe_next(target: str | None) -> str:
    """Only a path inside the board: `next=//elsewhere` must not send a login away."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


async def login(request: Request, board: Board, who: Identity | None) -> Response:
    base = base_path(request)
    nxt = _safe_next(request.query_params.get("next"))
    if not board.auth.required:
        return RedirectResponse(base + nxt, status_code=303)
    if request.method == "GET":
        return render(request, "login.html.j2", {"next": nxt, "error": None, "name": ""})
    form = await router.form(request)
    nxt = _safe_next(form.get("next"))
    name, password, token = form.get("name", ""), form.get("password", ""), form.get("token", "")
    client = request.client.host if request.client else ""
    throttle = board.throttle
    refused = throttle.refusal(client, "" if token.strip() else name)
    if refused is not None:
        await asyncio.sleep(REFUSED_PAUSE)  # a guesser that does not wait is held back
        page = render(request, "login.html.j2", {
            "next": nxt, "error": refused.message, "name": name}, 429)
        page.headers["Retry-After"] = str(refused.seconds)
        return page
    user = None
    if token.strip():
        user = board.auth.check_token(token)
    elif name.strip() and password:
        throttle.checking += 1
        try:
            user = await anyio.to_thread.run_sync(
                board.auth.check_password, name, password, limiter=throttle.limiter())
        finally:
            throttle.checking -= 1
    if user is None:
        throttle.failed(client, "" if token.strip() else name)
        await asyncio.sleep(FAILED_PAUSE)
        return render(request, "login.html.j2", {
            "next": nxt, "error": "Wrong name and password, or an unknown token.",
            "name": name,
        }, 401)
    throttle.succeeded(client, name)
    response = RedirectResponse(base + nxt, status_code=303)
    response.set_cookie(
        SESSION_COOKIE, board.auth.session_value(user), max_age=board.auth.session_seconds,
        httponly=True, samesite="strict", path=base or "/",
        secure=request.url.scheme == "https",
    )
    return secured(response)


async def logout(request: Request, board: Board, who: Identity | None) -> Response:
    await router.form(request)
    base = base_path(request)
    response = RedirectResponse(f"{base}/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path=base or "/")
    return secured(response)
