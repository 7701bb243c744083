"""The board's stream of findings as Server-Sent Events (docs/board.md): caught up from the
database after the client's cursor, then fed by the one poller (feed.Hub).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from auditor.board import feed
from auditor.board.api import cursor_param, past_head
from auditor.board.auth import Identity
from auditor.board.router import Board, query_filters

HEARTBEAT_SECONDS = 15.0  # a comment on an idle stream: proxies keep it open, and a gone
# client is noticed (a write to it fails)


async def api_stream(request: Request, board: Board, who: Identity | None) -> Response:
    """Server-Sent Events: one event per finding stored after the cursor (Last-Event-ID,
    else `since`, else now), `id:` its cursor; withdrawals as the event `withdrawn`."""
    what = "Last-Event-ID"
    start = cursor_param(request.headers.get(what), what)
    if start is None:
        what = "since"
        start = cursor_param(request.query_params.get(what), what)
    filters = await query_filters(board, request)
    if start is not None:
        top = await board.read(lambda con, zone: feed.head(con))
        if start > top:
            raise past_head(start, top, what)
    hub = board.hub
    sub = hub.subscribe(filters)
    if start is None:
        # from now: the head as it is, not as the poller last read it (it reads only at its
        # interval while no stream is open: feed.Hub.nudge)
        sub.start = max(sub.start, await board.read(lambda con, zone: feed.head(con)))

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
                    if c.cursor > covered and filters.matches(c.record, c.at):
                        yield c.sse()
                covered = max(covered, batch[-1].cursor)
        finally:
            hub.unsubscribe(sub)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
