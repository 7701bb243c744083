"""Sign-offs: who signed which filed version of a report, and when, on the record.

The report's page 1 has a sign-off box for ink; this is its record in the database (table
`signoffs`, auditor.store.records.Signoff). A sign-off names the version by the SHA-256 of
the PDF signed, so only a version this database filed (report_versions) can be signed off,
and a file changed since it was filed cannot. Append-only: each sign-off is a row of its own
run (`store/runs.recorded`), never changed or withdrawn.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from typing import Any

import duckdb

from auditor.errors import EXIT_OK, UserError
from auditor.store import runs
from auditor.store.db import add_row, all_rows, one
from auditor.store.records import Signoff


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Which of the two tables exist: a database written by an older bacc-audit has no
    signoffs (or report_versions) until its next read-write open; readers take none."""
    return {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_name IN ('signoffs', 'report_versions')"
        ).fetchall()
    }


def sign_off(
    con: duckdb.DuckDBPyConnection,
    sha256: str,
    shown_as: str,
    *,
    by: str,
    title: str,
    note: str = "",
    recorded_at: dt.datetime | None = None,
    args: dict[str, Any] | None = None,
) -> Signoff:
    """Record, in a run of its own (command `signoff`, `args` added to its record), that `by`
    (`title`) signed off the filed version whose PDF has this SHA-256 (`shown_as`: the file
    as the user named it, for the sentences). A SHA-256 no filed version has is a UserError
    sentence (exit 2)."""
    if not by.strip():
        raise UserError("say who signs off (--by NAME)")
    if not title.strip():
        raise UserError("say in what capacity (--title TITLE, e.g. 'Compliance Officer')")
    when = recorded_at or dt.datetime.now(dt.UTC)
    if when.tzinfo is None:
        raise UserError(f"a sign-off time needs a time zone, not {when.isoformat()}")
    filed = one(
        con,
        "SELECT slug, version, path FROM report_versions WHERE sha256 = ? "
        "ORDER BY filed_at LIMIT 1",
        [sha256],
    ) if "report_versions" in _tables(con) else None
    if filed is None:
        raise UserError(
            f"{shown_as}: not a version of a report this database filed (no filed version has "
            f"its SHA-256, {sha256}); sign off the PDF as it lies in the archive, unchanged"
        )
    slug, version, path = filed
    record = {"pdf": shown_as, "sha256": sha256, "slug": slug, "version": version, "by": by,
              **(args or {})}
    with runs.recorded(con, "signoff", record) as run:
        row = add_row(con, Signoff(
            slug=slug,
            version=int(version),
            sha256=sha256,
            path=path,
            signer=by.strip(),
            title=title.strip(),
            note=note.strip(),
            recorded_at=when.astimezone(dt.UTC),
            run_id=run.id,
        ))
        run.done(EXIT_OK, {"signoff": row.id, "slug": slug, "version": int(version)})
    return row


def list_signoffs(
    con: duckdb.DuckDBPyConnection, sha256s: Collection[str] | None = None
) -> list[Signoff]:
    """Every sign-off, oldest first; or those of the PDFs with these SHA-256s."""
    if "signoffs" not in _tables(con):
        return []
    rows = all_rows(con, Signoff)
    return rows if sha256s is None else [s for s in rows if s.sha256 in sha256s]


def as_dict(s: Signoff) -> dict[str, Any]:
    """A sign-off as JSON-ready values (time in UTC, RFC 3339)."""
    return {
        "id": s.id,
        "slug": s.slug,
        "version": s.version,
        "sha256": s.sha256,
        "path": s.path,
        "by": s.signer,
        "title": s.title,
        "note": s.note,
        "recorded_at": s.recorded_at.astimezone(dt.UTC).isoformat(),
        "run_id": s.run_id,
    }


def unsigned(con: duckdb.DuckDBPyConnection, day: str | None = None) -> list[dict[str, Any]]:
    """The filed versions no sign-off names, oldest report first (only gaming day `day`'s,
    2026-11-28, when given). `superseded`: a later version of the same report was filed,
    so the one to read and sign is that one."""
    present = _tables(con)
    if "report_versions" not in present:
        return []
    signed = (
        "AND NOT EXISTS (SELECT 1 FROM signoffs s WHERE s.sha256 = v.sha256)"
        if "signoffs" in present else ""
    )
    rows = con.execute(
        f"""
        SELECT slug, version, arg_min(path, filed_at), sha256, min(filed_at),
               bool_or(version < latest) AS superseded
        FROM (SELECT *, max(version) OVER (PARTITION BY slug) AS latest FROM report_versions) v
        WHERE (? IS NULL OR slug = ? OR starts_with(slug, ? || '_')) {signed}
        GROUP BY slug, version, sha256  -- one file, recorded again in a moved archive: once
        ORDER BY slug, version
        """,
        [day, day, day],
    ).fetchall()
    return [
        {
            "slug": slug,
            "version": int(version),
            "path": path,
            "sha256": sha,
            "filed_at": filed_at.astimezone(dt.UTC).isoformat(),
            "superseded": bool(superseded),
        }
        for slug, version, path, sha, filed_at, superseded in rows
    ]


def unsigned_sentence(rows: list[dict[str, Any]], limit: int = 10) -> str:
    """One line for a summary: how many filed versions await a sign-off, and which."""
    if not rows:
        return "no filed version awaits a sign-off"
    named = [
        f"{r['slug']} v{r['version']}" + (" (superseded)" if r["superseded"] else "")
        for r in rows[:limit]
    ]
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    what = "version awaits" if len(rows) == 1 else "versions await"
    return f"{len(rows)} filed {what} a sign-off: {', '.join(named)}{more}"
