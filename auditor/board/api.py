"""The board's API (docs/board.md): findings v1 as JSON Lines, from the standing state or
after a cursor, and the health check. The stream of findings is in streams.py.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import urllib.parse
from typing import Any

import duckdb
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from auditor.board import feed
from auditor.board.auth import Identity
from auditor.board.feed import snapshot
from auditor.board.router import (
    Board,
    Refused,
    base_path,
    query_filters,
    secured,
    whole_number,
)
from auditor.errors import UserError
from auditor.store import findings

CURSOR_HEADER = "Bacc-Cursor"


def cursor_param(text: str | None, what: str) -> int | None:
    """A cursor given in the query or a header (None when not given); a UserError else.
    ASCII digits only, at most 18 of them (a BIGINT): `isdigit` also takes "²", which
    `int` refuses."""
    number = whole_number(text)
    if number is None and text is not None and text.strip():
        raise UserError(f"{what} is a cursor: a whole number, as a response's {CURSOR_HEADER} "
                        "header or a stream event's id gives it")
    return number


def past_head(cursor: int, top: int, what: str) -> Refused:
    """A cursor past the newest finding was never given out by this database (it was
    replaced, restored from a copy, or the client asked another board): answering "nothing
    new" would hide every finding stored until the ids catch up with it. 409 Conflict: the
    request is well formed, the client's state and the database's disagree."""
    return Refused(
        409,
        f"{what} {cursor} is past the newest finding (cursor {top}): this database never gave "
        "it out; start again without it (GET /api/findings gives the standing findings and a "
        "cursor)"
    )


async def api_findings(request: Request, board: Board, who: Identity | None) -> Response:
    """Findings v1 as JSON Lines. Without `since`: the standing findings, exactly what
    `bacc-audit findings --format jsonl` writes with the same filters. With `since=CURSOR`:
    the findings stored after it, in the order stored (`withdrawn=1` adds the withdrawals,
    and a `status` field to every line). The `Bacc-Cursor` header is the cursor to ask
    with next time."""
    q = request.query_params
    since = cursor_param(q.get("since"), "since")
    with_withdrawn = q.get("withdrawn", "") in ("1", "true", "yes")
    limit = whole_number(q.get("limit"))
    if limit is None and q.get("limit", "").strip():
        raise UserError("limit is the most lines to answer: a whole number")
    filters = await query_filters(board, request)

    def read(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> tuple[list[dict], int]:
        with snapshot(con):
            top = feed.head(con)
            if since is not None and since > top:
                raise past_head(since, top, "since")
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
            return rows, top

    rows, cursor = await board.read(read)
    body = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)
    nxt = urllib.parse.urlencode(_next_query(request, cursor))
    return Response(
        body,
        media_type="application/x-ndjson",
        headers={CURSOR_HEADER: str(cursor), "Link": f'<{base_path(request)}/api/findings?{nxt}>; '
                 'rel="next"'},
    )


def _next_query(request: Request, cursor: int) -> list[tuple[str, str]]:
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "since"]
    return [*kept, ("since", str(cursor))]


async def healthz(request: Request, board: Board, who: Identity | None) -> Response:
    """Liveness for the proxy or a monitor, without a login: whether the poller is keeping
    up, and nothing of the findings."""
    hub = board.hub
    age = None if hub.last_poll is None else round(time.time() - hub.last_poll, 3)
    stale = age is None or age > max(5.0, hub.interval * 20)
    body: dict[str, Any] = {"status": "stale" if stale else "ok", "last_poll_seconds_ago": age}
    if hub.error:
        body["warning"] = hub.error  # e.g. findings stored out of cursor order
    return secured(JSONResponse(body, status_code=503 if stale else 200))
