"""The archive the nightly job files into: ARCHIVE/DAY/DAY_SHIFT.pdf, a new version beside a
report once filed when what it shows changed (store/versions.py), never a file rewritten; and
the temporary files of renders killed before their rename."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from auditor.config import PropertyConfig
from auditor.errors import WRITE_ERRNOS, UserError, cannot_write, private_files
from auditor.ingest.reader import sha256_of
from auditor.jobs.evidence import Say
from auditor.report import render
from auditor.report.gather import gather, scope_for
from auditor.store import db, versions

DEFAULT_ARCHIVE = Path("reports") / "archive"
# write_report's temporary name: `.NAME.pdf.partial` beside the final one.
PARTIAL_GLOB = ".*.partial"


def archive_dir(conf: PropertyConfig, archive: Path | None) -> Path:
    """--archive (or BACC_AUDIT_ARCHIVE), else the config's `[property] archive`, else
    reports/archive."""
    return archive or conf.archive or DEFAULT_ARCHIVE


def archive_path(archive: Path, day: dt.date, slug: str) -> Path:
    """ARCHIVE/2026-11-28/2026-11-28_grave.pdf: one folder per gaming day, names that sort."""
    return archive / f"{day:%Y-%m-%d}" / f"{slug}.pdf"


def sweep_partials(archive: Path) -> list[Path]:
    """Delete the temporary files of renders killed before their rename. Safe only under the
    nightly lock: no other nightly is writing into the archive then."""
    removed = []
    if archive.is_dir():
        for p in sorted(archive.rglob(PARTIAL_GLOB)):
            if p.is_file():
                p.unlink()
                removed.append(p)
    return removed


def data_changed_at(con: duckdb.DuckDBPyConnection) -> dt.datetime:
    """When the content the reports show last changed: the latest source, finding,
    acknowledgement or notice recorded.

    The report's "generated" time (and the PDF's dates) come from this, so rerunning the
    job on an unchanged database writes byte-identical PDFs: the report's own fallback, the
    latest run, moves with every run including this one.
    """
    tables = {
        r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
    }
    parts = [
        f"SELECT max({col}) AS t FROM {table}"
        for table, col in (
            ("sources", "ingested_at"),
            ("findings", "recorded_at"),
            ("acknowledgements", "recorded_at"),
            ("notices", "entered_at"),
        )
        if table in tables
    ]
    row = db.one(con, f"SELECT max(t) FROM ({' UNION ALL '.join(parts)})")
    return row[0] if row and row[0] else dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@contextlib.contextmanager
def _report_epoch(when: dt.datetime) -> Iterator[None]:
    """SOURCE_DATE_EPOCH for the render, unless the operator set one."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        yield
        return
    os.environ["SOURCE_DATE_EPOCH"] = str(int(when.timestamp()))
    try:
        yield
    finally:
        os.environ.pop("SOURCE_DATE_EPOCH", None)


@dataclass
class ShiftReport:
    """One shift of the gaming day: its PDF written (version 1), a new version filed beside
    the earlier ones, unchanged, or skipped (why)."""

    shift: str
    status: str  # written | new_version | unchanged | skipped
    rounds: int
    path: Path | None = None
    reason: str = ""
    version: int | None = None
    sha256: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "shift": self.shift,
            "status": self.status,
            "rounds": self.rounds,
            "path": str(self.path) if self.path else None,
            "version": self.version,
            "sha256": self.sha256,
            "reason": self.reason,
        }


def report_shift(
    con: duckdb.DuckDBPyConnection,
    conf: PropertyConfig,
    day: dt.date,
    name: str,
    folder: Path,
    epoch: dt.datetime,
    say: Say,
    run_id: int | None = None,
    check: dict[str, Any] | None = None,
) -> ShiftReport:
    """File the shift's report. A report once filed is never rewritten (someone may have
    signed it): if what it would show changed, the new one is the next version beside it,
    ARCHIVE/DAY/DAY_SHIFT.v2.pdf, whose first page says what changed since the version before
    and gives that version's SHA-256. Unchanged means rendering it again as the latest version
    gives that version's HTML (its "generated" time aside). `check` is what the check of
    the ledger found before filing: a failed one is printed on the cover, in red, and a
    report that said otherwise before is filed again as the next version."""
    scope = scope_for(conf, con, shift=f"{day:%Y-%m-%d}/{name}")
    rounds = db.single(
        con,
        "SELECT count(DISTINCT (table_id, shoe, round)) FROM events "
        "WHERE type = 'round_start' AND ts >= ? AND ts < ?",
        [scope.start, scope.end],
    )[0]
    if not rounds:
        return ShiftReport(name, "skipped", 0, reason="no rounds in this shift")
    first = archive_path(folder, day, scope.slug)
    with _report_epoch(epoch):
        context = {**gather(con, conf, scope), "ledger_check": check}
        now = versions.snapshot(context["findings"])
        # The versions filed in this archive (a database may have filed into another).
        here = first.parent.resolve()
        filed = [v for v in versions.history(con, scope.slug) if Path(v.path).parent == here]
        if not filed and first.is_file():  # filed before versions were recorded
            legacy = versions.Version(scope.slug, 1, str(first), sha256_of(first)[0], "", None)
            as_v1 = {**context, "version": _version(1, None, now)}
            if render.render_pdf(context, render.render_html(as_v1)) == first.read_bytes():
                versions.record(con, versions.Version(
                    scope.slug, 1, str(first.resolve()), legacy.sha256, _content_sha(as_v1),
                    now), run_id)
                return ShiftReport(name, "unchanged", rounds, first, version=1,
                                   sha256=legacy.sha256)
            filed = [legacy]
        if filed:
            last = filed[-1]
            before = filed[-2] if len(filed) > 1 else None
            again = {**context, "version": _version(last.number, before, now)}
            if _content_sha(again) == last.html_sha256:
                return ShiftReport(name, "unchanged", rounds,
                                   first.with_name(Path(last.path).name),
                                   version=last.number, sha256=last.sha256)
        number = filed[-1].number + 1 if filed else 1
        this = {**context, "version": _version(number, filed[-1] if filed else None, now)}
        data = render.render_pdf(context, render.render_html(this))
    path = first if number == 1 else first.with_name(f"{scope.slug}.v{number}.pdf")
    while path.exists() and path.read_bytes() != data:  # left by another hand: never over it
        number += 1
        path = first.with_name(f"{scope.slug}.v{number}.pdf")
    say(f"report {scope.title} version {number} -> {path}")
    try:
        private_files()  # the archive's folders 0700, its PDFs 0600
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():  # else a run that died before recording it wrote these bytes
            render.write_whole(path, data)
    except OSError as e:
        if e.errno not in WRITE_ERRNOS:
            raise
        raise archive_error(folder, e) from None
    sha = sha256_of(path)[0]
    versions.record(
        con, versions.Version(scope.slug, number, str(path.resolve()), sha, _content_sha(this),
                              now),
        run_id,
    )
    return ShiftReport(name, "written" if number == 1 else "new_version", rounds, path,
                       version=number, sha256=sha)


def _content_sha(context: dict[str, Any]) -> str:
    """The SHA-256 of the report's HTML but for its "generated" time, which moves with any
    change to the database (an acknowledgement elsewhere): only what the report shows makes
    a new version."""
    fixed = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    html = render.render_html({**context, "generated_at": fixed})
    return hashlib.sha256(html.encode()).hexdigest()


def _version(
    number: int, before: versions.Version | None, now: versions.Findings
) -> dict[str, Any]:
    """The report's version block: its number and, from version 2 on, the version before
    (number, file name, SHA-256) and what changed since (None: not known)."""
    if before is None:
        return {"number": number, "before": None, "changes": None}
    return {
        "number": number,
        "before": {"number": before.number, "name": Path(before.path).name,
                   "sha256": before.sha256},
        "changes": versions.changes(before.findings, now),
    }


def archive_error(folder: Path, e: OSError) -> UserError:
    return cannot_write(
        folder,
        e,
        "point --archive (or BACC_AUDIT_ARCHIVE, or [property] archive) at a folder this "
        "user can write to",
    )
