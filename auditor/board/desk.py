"""The officer's desk (docs/board.md): the work queue and its bulk acknowledgement, the
notices entered and withdrawn from the board, the dealers and the filed reports. What each
page shows is read by queue.py (and the other desk views); the access rule, the officer's
role and the CSRF check are the router's.
"""

from __future__ import annotations

import datetime as dt
import urllib.parse
from typing import Any

import duckdb
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from auditor.board import desk_views, queue, router, views
from auditor.board.auth import Identity
from auditor.board.feed import head
from auditor.board.pages import ack_fields
from auditor.board.router import Board, Refused, base_path, query_filters, render
from auditor.errors import UserError
from auditor.store import notice_entry
from auditor.store.stamps import refuse_impossible_stamps
from auditor.words import count


async def _queue_response(
    request: Request, board: Board, *, error: str | None = None,
    form: dict[str, str] | None = None, ticked: list[str] | None = None, status: int = 200,
) -> Response:
    filters = await query_filters(board, request)
    everything = request.query_params.get("all") == "1"
    now = dt.datetime.now(dt.UTC)

    def read(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> dict[str, Any]:
        return {**queue.work_queue(con, zone, board.packs, now, filters, everything),
                "cursor": head(con)}

    context = await board.read(read)
    query = [*filters.query(), *([("all", "1")] if everything else [])]
    stream = [("since", str(context["cursor"]))]
    done = request.query_params.get("acked")
    return render(request, "queue.html.j2", {
        **context,
        "filters": filters,
        "filter_query": urllib.parse.urlencode(query),
        "back": urllib.parse.urlencode(query),
        "stream_url": f"{base_path(request)}/api/stream?{urllib.parse.urlencode(stream)}",
        "done": f"{count(int(done), 'acknowledgement')} recorded." if done and done.isdigit()
        else None,
        "error": error,
        "form": form or {},
        "ticked": set(ticked or ()),
    }, status)


async def queue_page(request: Request, board: Board, who: Identity | None) -> Response:
    return await _queue_response(request, board)


async def bulk_ack(request: Request, board: Board, who: Identity | None) -> Response:
    """Acknowledge every finding ticked on the queue with one disposition and note: each its
    own record, as from its page. Nothing is written when a finding named is unknown."""
    router.officer_only(request, who)
    posted = await router.form_lists(request)
    form = {k: v[-1] for k, v in posted.items()}
    ticked = [f for f in posted.get("finding", []) if f.strip()]
    by, disposition, note, trouble = ack_fields(form, who)
    if not ticked:
        trouble = "Tick the findings to acknowledge." + (f" {trouble}" if trouble else "")
    elif len(ticked) > queue.BULK_LIMIT:
        trouble = f"Acknowledge at most {queue.BULK_LIMIT} findings at once."
    back = form.get("back", "")
    request.scope["query_string"] = back.encode()  # the queue as it was shown
    if trouble:
        return await _queue_response(request, board, error=trouble, form=form, ticked=ticked,
                                     status=400)
    client = router.writer_args(request, who)

    def write(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> list[dict[str, Any]]:
        return queue.acknowledge_many(
            con, ticked, by=by, disposition=disposition, note=note, client=client)

    try:
        done = await board.read(write)
    except UserError as e:
        return await _queue_response(request, board, error=str(e), form=form, ticked=ticked,
                                     status=400)
    target = f"{base_path(request)}/?{back + '&' if back else ''}acked={len(done)}"
    return RedirectResponse(target, status_code=303)


# -- notices ----------------------------------------------------------------------------------


def _day(con: duckdb.DuckDBPyConnection, board: Board, zone: dt.tzinfo,
         asked: str | None) -> dt.date | None:
    """The gaming day a page asks for (`date`), else the floor's (that of the latest round)."""
    from auditor.config import parse_date

    return parse_date(asked) if asked else views.floor_day(con, board.conf, zone)


async def _notices_response(
    request: Request, board: Board, *, error: str | None = None,
    form: dict[str, list[str]] | None = None, done: list[str] | None = None, status: int = 200,
) -> Response:
    asked = request.query_params.get("date")

    def read(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> dict[str, Any]:
        # a notice's times: 409 naming where, not a 500
        refuse_impossible_stamps(con, tables={"events", "notices", "notice_withdrawals"},
                                 rows={"events": "type = 'procedure_notice'"})
        return desk_views.notices_view(con, board.conf, zone, _day(con, board, zone, asked))

    context = await board.read(read)
    posted = form or {}
    return render(request, "notices.html.j2", {
        **context,
        "error": error,
        "done": done,
        "form": {k: v[-1] for k, v in posted.items()},
        "recipients": set(posted.get("recipient", ["division", "surveillance"])),
    }, status)


async def notices_page(request: Request, board: Board, who: Identity | None) -> Response:
    return await _notices_response(request, board)


def _by(form: dict[str, list[str]], who: Identity | None) -> str:
    return who.name if who else (form.get("by") or [""])[-1].strip()


async def notice_add(request: Request, board: Board, who: Identity | None) -> Response:
    """Enter a notice as `bacc-audit notice add` does (notice_entry.enter: the same checks,
    the same sentences, a run of its own); refused, the form comes back with the sentence."""
    router.officer_only(request, who)
    posted = await router.form_lists(request)
    one = {k: v[-1].strip() for k, v in posted.items()}
    procedure = one.get("procedure", "")
    recipients = [r for r in posted.get("recipient", []) if r.strip()]
    trouble = None
    if not procedure.isdigit() or not 1 <= int(procedure) <= 4:
        trouble = f"procedure must be 1, 2, 3 or 4, not {procedure!r}"
    elif not recipients:
        trouble = "say who the notice was given to: division, surveillance or both"
    if trouble:
        return await _notices_response(request, board, error=trouble, form=posted, status=400)
    args = {"via": "board", **router.writer_args(request, who)}

    def write(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> list[str]:
        stored = views.retried(lambda: notice_entry.enter(
            con, zone, pit=one.get("pit", ""), procedure=int(procedure),
            effective=one.get("effective", ""), recipients=recipients,
            given_at=one.get("given_at", ""), by=_by(posted, who),
            tables=one.get("tables") or None, written=not one.get("not_written"),
            note=one.get("note", ""), known=notice_entry.known_places(con, board.conf),
            late=bool(one.get("late")), args=args,
        ))
        return [notice_entry.entered_sentence(n, zone) for n in stored]

    try:
        done = await board.read(write)
    except UserError as e:
        return await _notices_response(request, board, error=str(e),
                                       form=posted, status=400)
    return await _notices_response(request, board, done=done)


async def notice_withdraw(request: Request, board: Board, who: Identity | None) -> Response:
    """Withdraw a notice entered by hand, as `bacc-audit notice withdraw` does."""
    router.officer_only(request, who)
    posted = await router.form_lists(request)
    notice = router.whole_number(request.path_params["nid"])
    if notice is None:
        raise Refused(404, f"No notice {request.path_params['nid']}.")
    reason = (posted.get("reason") or [""])[-1]
    args = {"via": "board", **router.writer_args(request, who)}

    def write(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> list[str]:
        w = views.retried(lambda: notice_entry.withdraw(
            con, notice, by=_by(posted, who), reason=reason, args=args))
        return [notice_entry.withdrawn_sentence(w, zone)]

    try:
        done = await board.read(write)
    except UserError as e:
        return await _notices_response(request, board, error=str(e), status=400)
    return await _notices_response(request, board, done=done)


# -- dealers ----------------------------------------------------------------------------------


async def dealers_page(request: Request, board: Board, who: Identity | None) -> Response:
    """Every dealer of a gaming day or shift on the report's p-chart and trend; with a
    dealer in the path, that dealer's lines and the links to their findings."""
    dealer = request.path_params.get("dealer")
    q = request.query_params
    asked, shift_name = q.get("date"), (q.get("shift_name") or "").strip() or None

    def read(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> dict[str, Any]:
        day = _day(con, board, zone, asked)
        shift = f"{day:%Y-%m-%d}/{shift_name}" if day and shift_name else None
        scope = desk_views.report_scope(con, board.conf, day, shift)
        return {"empty": None, **desk_views.dealers_view(con, board.conf, scope, dealer),
                "day": day}

    context = await board.read(read)
    return render(request, "dealers.html.j2", {
        **context,
        "dealer": dealer,
        "path": "/dealers" + (f"/{dealer}" if dealer else ""),
        "shift_name": shift_name,
        "shift_names": [s.name for s in board.conf.shifts],
    })
