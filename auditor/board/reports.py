"""The desk's reports (docs/board.md): the reports this database filed and their versions (the
file, its SHA-256, what changed, who signed it off), a filed version's PDF as the archive holds
it, the sign-off of a version from its page, and a shift's report rendered on demand with
the function `bacc-audit report` writes it with (the same bytes, generation time aside).
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import duckdb
from starlette.requests import Request
from starlette.responses import Response

from auditor.board import desk_views, router, views
from auditor.board.auth import Identity
from auditor.board.router import Board, Refused, render
from auditor.errors import UserError
from auditor.report.render import report_bytes
from auditor.store import signoffs

SLUG = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[A-Za-z0-9._-]{0,80}")


def _version(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo, slug: str,
             number: str, archive: Path | None) -> dict[str, Any]:
    """The filed version a URL names (`/reports/SLUG/vN`); one not on record is 404."""
    n = router.whole_number(number)
    if not SLUG.fullmatch(slug) or n is None:
        raise Refused(404, f"No filed report {slug} version {number}.")
    for v in desk_views.filed_versions(con, zone, archive):
        if v["slug"] == slug and v["version"] == n:
            return v
    raise Refused(404, f"No filed report {slug} version {n}: the reports page lists those "
                  "this database filed and those the archive holds.")


async def reports_page(request: Request, board: Board, who: Identity | None) -> Response:
    asked = request.query_params.get("date")

    def read(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> dict[str, Any]:
        from auditor.config import parse_date

        day = parse_date(asked) if asked else views.floor_day(con, board.conf, zone)
        return {"versions": desk_views.filed_versions(con, zone, board.archive), "day": day,
                "archive": board.archive}

    context = await board.read(read)
    return render(request, "reports.html.j2", {
        **context,
        "shift_names": [s.name for s in board.conf.shifts],
        "unsigned": sum(1 for v in context["versions"] if not v["signoffs"]),
    })


async def _version_response(
    request: Request, board: Board, *, error: str | None = None, done: str | None = None,
    form: dict[str, str] | None = None, status: int = 200,
) -> Response:
    slug, number = request.path_params["slug"], request.path_params["number"]

    def read(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> dict[str, Any]:
        v = _version(con, zone, slug, number, board.archive)
        state, _ = desk_views.version_file(v)
        return {"v": v, "file_state": state}

    context = await board.read(read)
    return render(request, "report_version.html.j2", {
        **context, "error": error, "done": done, "form": form or {}}, status)


async def version_page(request: Request, board: Board, who: Identity | None) -> Response:
    return await _version_response(request, board)


async def version_pdf(request: Request, board: Board, who: Identity | None) -> Response:
    """The filed PDF, byte for byte, when the archive still holds it as filed; else 409 with
    what is wrong with it (a file changed is no longer that version)."""
    slug, number = request.path_params["slug"], request.path_params["number"]

    def read(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> tuple[dict, str, bytes | None]:
        v = _version(con, zone, slug, number, board.archive)
        return (v, *desk_views.version_file(v))

    v, state, data = await board.read(read)
    if data is None:
        raise Refused(409, f"{v['path']}: {state}; it is not served as version {v['version']} "
                      f"(SHA-256 {v['sha256']} on record).")
    return Response(data, media_type="application/pdf", headers={
        "Content-Disposition": f'inline; filename="{v["name"]}"'})


async def version_signoff(request: Request, board: Board, who: Identity | None) -> Response:
    """Sign a filed version off from its page, with the record `bacc-audit signoff` writes
    (store.signoffs.sign_off): of the PDF as the archive holds it, whose SHA-256 must be the
    version's."""
    router.officer_only(request, who)
    form = await router.form(request)
    slug, number = request.path_params["slug"], request.path_params["number"]
    by = who.name if who else form.get("by", "").strip()
    title, note = form.get("title", "").strip(), form.get("note", "").strip()
    args = {"via": "board", **router.writer_args(request, who)}

    def write(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> str:
        import hashlib

        v = _version(con, zone, slug, number, board.archive)
        state, data = desk_views.version_file(v)
        if data is None:
            raise UserError(f"{v['path']}: {state}; sign off the PDF as it lies in the archive, "
                            "unchanged")
        s = views.retried(lambda: signoffs.sign_off(
            con, hashlib.sha256(data).hexdigest(), v["path"], by=by, title=title, note=note,
            args=args))
        return (f"signoff {s.id}: {s.slug} version {s.version} (SHA-256 {s.sha256}) signed "
                f"off by {s.signer}, {s.title}")

    try:
        done = await board.read(write)
    except Refused:
        raise
    except UserError as e:
        return await _version_response(request, board, error=str(e), form=form, status=400)
    return await _version_response(request, board, done=done)


async def render_report(request: Request, board: Board, who: Identity | None) -> Response:
    """A gaming day's or a shift's report rendered now, as `bacc-audit report --shift` (or
    `--date`) writes it: the PDF, or `format=html` the page."""
    q = request.query_params
    date, name = (q.get("date") or "").strip(), (q.get("shift_name") or "").strip()
    fmt = q.get("format", "pdf")
    if not date or fmt not in ("pdf", "html"):
        raise UserError("name the gaming day (date=YYYY-MM-DD), and a shift_name or none for "
                        "the whole day; format is pdf or html")

    def read(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> tuple[str, bytes]:
        from auditor.report.gather import scope_for

        scope = scope_for(board.conf, con, shift=f"{date}/{name}" if name else None,
                          date=None if name else date)
        check = board.report_check(con) if board.report_check else None
        return scope.slug, report_bytes(con, board.conf, scope, fmt, None, check)

    slug, data = await board.read(read)
    headers = {"Content-Disposition": f'inline; filename="{slug}.{fmt}"'}
    if fmt == "html":  # the report's page styles itself inline and runs no script
        headers["Content-Security-Policy"] = (
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'")
    return Response(data, media_type="application/pdf" if fmt == "pdf" else "text/html",
                    headers=headers)
