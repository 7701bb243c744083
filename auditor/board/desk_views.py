"""What the desk's pages show beyond the queue, read as the shift report reads it: the pit's
notices beside the procedure changes they announce, the dealers' control chart and trend,
and the filed reports with their versions and sign-offs.

The report's own sections do the work (report/procedures.py pairs the notices with the
changes as the audit's notice check does; report/history.py draws the p-chart and the
30-day trend), over a report scope of the gaming day or shift asked for, so the board and
the PDF never say two things about one night.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import duckdb

from auditor.config import PropertyConfig
from auditor.errors import UserError
from auditor.ingest.reader import sha256_of
from auditor.report import attached, charts
from auditor.report.basis import Scope, read_basis
from auditor.report.gather import scope_for
from auditor.report.history import section_dealers, section_trend
from auditor.report.procedures import section_procedures
from auditor.store import notices as hand_notices
from auditor.store import signoffs, versions
from auditor.store.filters import known_pits, known_tables
from auditor.store.findings import short_id
from auditor.store.notice_entry import known_places
from auditor.store.stamps import refuse_impossible_stamps


def notices_view(
    con: duckdb.DuckDBPyConnection, conf: PropertyConfig, zone: dt.tzinfo, day: dt.date | None,
) -> dict[str, Any]:
    """The notices entered by hand (all of them, with who, when and their withdrawal), and for
    gaming day `day` the report's section on procedures: each change with the notices that
    count for it, every notice of the day (logged or by hand), the findings a notice entered
    by hand withdrew, and the procedure findings of each table."""
    gone = hand_notices.withdrawals(con)
    hand = []
    for n in hand_notices.list_notices(con):
        w = gone.get(n.id or 0)
        hand.append({
            "id": n.id, "pit": n.pit, "tables": n.tables, "procedure": n.procedure,
            "effective": n.effective.astimezone(zone), "recipient": n.recipient,
            "written": n.written, "given": n.given_at.astimezone(zone),
            "entered_by": n.entered_by, "entered_at": n.entered_at.astimezone(zone),
            "note": n.note,
            "withdrawn": None if w is None else {
                "by": w.withdrawn_by, "at": w.withdrawn_at.astimezone(zone), "reason": w.reason},
        })
    procedures: dict[str, Any] | None = None
    scope = report_scope(con, conf, day, None)
    if scope is not None:
        try:
            basis = read_basis(con, conf, scope)
        except UserError:  # no round dealt that day: no changes to pair
            basis = None
        if basis is not None:
            procedures = section_procedures(basis)["procedures"]
            for n in procedures["notices"]:
                n["effective_local"] = n["effective"].astimezone(zone)
                n["given_local"] = n["ts"].astimezone(zone)
    findings = [
        {"id": short_id(fp), "code": code, "status": status, "table": table,
         "at": ts.astimezone(zone), "message": message}
        for fp, code, status, table, ts, message in con.execute(
            """
            SELECT fingerprint, code, status, table_id, ts, message FROM (
              SELECT *, row_number() OVER (PARTITION BY fingerprint ORDER BY id DESC) AS rn
              FROM findings WHERE code LIKE 'procedure.notice_%')
            WHERE rn = 1 ORDER BY ts, table_id
            """
        ).fetchall()
    ]
    pits, _ = known_places(con, conf)
    return {
        "hand": hand,
        "procedures": procedures,
        "notice_findings": findings,
        "day": day,
        "known_pits": sorted(set(known_pits(con)) | pits),
        "known_tables": known_tables(con),
    }


def report_scope(
    con: duckdb.DuckDBPyConnection, conf: PropertyConfig, day: dt.date | None,
    shift: str | None,
) -> Scope | None:
    """The report scope a desk page asks for: a shift (`DAY/NAME`), else gaming day `day`."""
    if shift:
        return scope_for(conf, con, shift=shift)
    if day is None:
        return None
    return scope_for(conf, con, date=f"{day:%Y-%m-%d}")


def dealers_view(
    con: duckdb.DuckDBPyConnection, conf: PropertyConfig, scope: Scope | None,
    dealer: str | None = None,
) -> dict[str, Any]:
    """The report's "By dealer" and trend over `scope` (report.history: the period's p-chart
    over every dealer of the property, each beside the last 30 gaming days, and the findings
    per 1,000 rounds day by day), with the two p-charts drawn; with `dealer`, that dealer's
    lines alone beside the charts."""
    if scope is None:
        return {"scope": None, "dealers": []}
    try:
        basis = read_basis(con, conf, scope)
    except UserError as e:
        return {"scope": scope, "dealers": [], "empty": str(e)}
    by_dealer = section_dealers(basis)
    trend = section_trend(basis)
    rows = by_dealer["dealers"]
    span = by_dealer["dealers_span"]
    spans = [span[r.dealer] for r in rows if r.dealer in span]
    context = {
        **by_dealer,
        **trend,
        "scope": scope,
        "chart_period": charts.p_chart(
            [r.dealer for r in rows], [r.rate * 1000 for r in rows],
            [r.upper * 1000 for r in rows], by_dealer["dealers_expected"] * 1000,
            f"Error rounds per 1,000 by dealer, {scope.title}"),
        "chart_span": charts.p_chart(
            [m.count.dealer for m in spans], [m.rate * 1000 for m in spans],
            [m.upper * 1000 for m in spans], by_dealer["span"]["expected"] * 1000,
            f"Error rounds per 1,000 by dealer, {by_dealer['span']['first']} to "
            f"{by_dealer['span']['last']}"),
        "dealer": dealer,
    }
    if dealer is not None:
        context["dealers"] = [r for r in rows if r.dealer == dealer]
    return context


def filed_versions(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo,
                   archive: Path | None = None) -> list[dict[str, Any]]:
    """Every version of every report this database filed (report_versions), and with
    `archive` every other version that folder holds (archive_versions), newest report
    first, its versions in order: the file, its SHA-256 as filed, when, what changed since
    the version before (store.versions.changes) and its sign-offs (store.signoffs). A file
    recorded twice (an archive moved) is listed once, where it was first filed. A filing's
    or a sign-off's time no clock can show (an edited row) is refused naming where: 409, not
    a 500."""
    refuse_impossible_stamps(con, tables={"report_versions", "signoffs"})
    rows = _recorded(con)
    seen = {(slug, int(number)) for slug, number, *_ in rows}
    rows += [r for r in archive_versions(archive) if (r[0], r[1]) not in seen]
    rows.sort(key=lambda r: (r[0], -int(r[1])), reverse=True)  # slug DESC, version ASC
    signed: dict[str, list[dict[str, Any]]] = {}
    for s in signoffs.list_signoffs(con):
        signed.setdefault(s.sha256, []).append({
            "id": s.id, "by": s.signer, "title": s.title, "note": s.note,
            "at": s.recorded_at.astimezone(zone)})
    latest: dict[str, int] = {}
    for slug, number, *_ in rows:
        latest[slug] = max(latest.get(slug, 0), int(number))
    out: list[dict[str, Any]] = []
    before: dict[str, versions.Findings | None] = {}
    for slug, number, path, sha, filed_at, now, run_id in rows:
        out.append({
            "slug": slug, "version": int(number), "path": path, "name": Path(path).name,
            "sha256": sha, "filed": filed_at.astimezone(zone), "run_id": run_id,
            "recorded": run_id is not None,
            "findings": None if now is None else len(now),
            "changes": (versions.changes(before[slug], now)
                        if before.get(slug) is not None and now is not None else None),
            "signoffs": signed.get(sha, []),
            "superseded": int(number) < latest[slug],
        })
        before[slug] = now
    return out


# (slug, version, path, SHA-256, filed at, the findings it showed, the run that filed it)
Row = tuple[str, int, str, str, dt.datetime, versions.Findings | None, int | None]


def _recorded(con: duckdb.DuckDBPyConnection) -> list[Row]:
    """The versions this database filed (report_versions)."""
    if "report_versions" not in {t for (t,) in con.execute(
            "SELECT table_name FROM duckdb_tables()").fetchall()}:
        return []
    rows = con.execute(
        """
        SELECT slug, version, arg_min(path, filed_at), sha256, min(filed_at),
               CAST(arg_min(findings, filed_at) AS VARCHAR), arg_min(run_id, filed_at)
        FROM report_versions GROUP BY slug, version, sha256
        """
    ).fetchall()
    return [(slug, int(number), path, sha, filed_at,
             tuple(tuple(f) for f in json.loads(found)), run_id)
            for slug, number, path, sha, filed_at, found, run_id in rows]


# ARCHIVE/DAY/DAY_SHIFT.pdf, then DAY_SHIFT.v2.pdf, ...: what `nightly` and `watch
# --file-reports` file (auditor.jobs.archive).
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_FILED = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2}_[A-Za-z0-9_-]{1,40})"
                    r"(?:\.v([2-9]|[1-9][0-9]{1,3}))?\.pdf")
_KNOWN: dict[tuple[str, int, int], tuple[str, versions.Findings | None]] = {}


def archive_versions(archive: Path | None) -> list[Row]:
    """The versions the archive folder holds, by their names, as the nightly job numbers
    them: (slug, version, path, SHA-256 of the file now, its time, the findings it carries
    (report/attached.py) or None, None: no run of this database filed it). Only regular
    files directly in a gaming day's folder of the archive are read, none a link leads
    out of it. A file's hash and findings are kept while its size and time stay the same."""
    if archive is None or not archive.is_dir():
        return []
    root = archive.resolve()
    out: list[Row] = []
    for day in sorted(archive.iterdir()):
        if not _DAY.fullmatch(day.name) or not day.is_dir() or day.is_symlink():
            continue
        for path in sorted(day.iterdir()):
            m = _FILED.fullmatch(path.name)
            if m is None or not m[1].startswith(day.name) or path.is_symlink():
                continue
            try:
                st = path.stat()
                if not path.is_file() or not path.resolve().is_relative_to(root):
                    continue
                key = (str(path), st.st_size, st.st_mtime_ns)
                if key not in _KNOWN:
                    _KNOWN[key] = (sha256_of(path)[0], attached.read_filed(path).findings)
            except OSError:  # gone or unreadable since the listing: not listed
                continue
            sha, shown = _KNOWN[key]
            out.append((m[1], int(m[2] or 1), str(path), sha,
                        dt.datetime.fromtimestamp(st.st_mtime, dt.UTC), shown, None))
    return out


def version_file(version: dict[str, Any]) -> tuple[str, bytes | None]:
    """The filed PDF as the archive holds it now: ("as filed", its bytes), or why it cannot
    be served as that version ("missing", "changed since it was filed"), without bytes."""
    path = Path(version["path"])
    try:
        data = path.read_bytes()
    except OSError:
        return "missing", None
    if hashlib.sha256(data).hexdigest() != version["sha256"]:
        return "changed since it was filed", None
    return "as filed", data
