"""The archive the nightly job files into: ARCHIVE/DAY/DAY_SHIFT.pdf, a new version beside a
report once filed when what it shows changed (store/versions.py), never a file rewritten,
numbered after the versions the archive holds whichever database filed them; the days an
earlier run filed whose findings this run changed (a late log); and the temporary files of
renders killed before their rename."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import duckdb

from auditor.config import PropertyConfig
from auditor.errors import WRITE_ERRNOS, UserError, cannot_write, private_files
from auditor.ingest.reader import sha256_of
from auditor.jobs.evidence import Say
from auditor.report import attached, render, signing
from auditor.report.basis import Scope
from auditor.report.gather import gather, scope_for
from auditor.rules.codes import SEVERITIES
from auditor.store import db, signoffs, versions
from auditor.words import count

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


@dataclass(frozen=True)
class Archived:
    """One version of a report as the archive holds it. Versions follow the files there,
    whichever database filed them: what a version showed comes from this database's record
    of it (by the file's SHA-256), else from the PDF itself (report/attached.py)."""

    number: int
    path: Path
    sha256: str
    content_sha256: str | None  # None: not known (a PDF that carries no version record)
    findings: versions.Findings | None  # None: not known
    acks_known: bool
    recorded: bool  # this database's report_versions holds it, filed here


def archived(con: duckdb.DuckDBPyConnection, first: Path, slug: str) -> list[Archived]:
    """The versions of report `slug` in the folder of `first` (DAY_SHIFT.pdf, then
    DAY_SHIFT.v2.pdf, ...), oldest first."""
    folder = first.parent
    if not folder.is_dir():
        return []
    name = re.compile(rf"{re.escape(slug)}(?:\.v([2-9]|[1-9][0-9]+))?\.pdf")
    history = versions.history(con, slug)
    known = {v.sha256: v for v in history}
    here = {(v.sha256, v.path) for v in history}
    found = []
    for path in folder.iterdir():
        m = name.fullmatch(path.name)
        if not m or not path.is_file():
            continue
        sha = sha256_of(path)[0]
        number = int(m[1]) if m[1] else 1
        v = known.get(sha)
        if v is not None:
            found.append(Archived(number, path, sha, v.html_sha256 or None, v.findings, True,
                                  (sha, str(path.resolve())) in here))
        else:
            said = attached.read_filed(path)
            found.append(Archived(number, path, sha, said.content_sha256, said.findings,
                                  said.acks_known, False))
    return sorted(found, key=lambda a: a.number)


class _ToFile(NamedTuple):
    """A version to render and file, as read (report_shift)."""

    scope: Scope
    rounds: int
    number: int
    first: Path  # the first version's path
    context: dict[str, Any]
    record: attached.Attached  # the version record attached to the PDF
    content: str  # _content_sha of the context
    now: versions.Findings  # what it shows of its findings (versions.snapshot)


class _Shift(NamedTuple):
    """The shift report_shift files, and what it files it with."""

    conf: PropertyConfig
    day: dt.date
    name: str
    folder: Path
    epoch: dt.datetime
    run_id: int | None
    key: signing.SigningKey | None
    check: dict[str, Any] | None


def _read_shift(con: duckdb.DuckDBPyConnection, shift: _Shift) -> ShiftReport | _ToFile:
    """What report_shift reads: its answer when there is nothing to write (no rounds, or
    the last version unchanged), else the version to render and file."""
    conf, day, name, folder, epoch, run_id, key, check = shift
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
        context["signature"] = signing.cover(key)
        now = versions.snapshot(context["findings"])
        filed = archived(con, first, scope.slug)
        if filed:
            last = filed[-1]
            again = {**context, "version": _version(con, last.number, filed[:-1], now, scope.zone)}
            if _unchanged(last, again):
                if not last.recorded:  # filed by another database, or into another archive
                    versions.record(con, versions.Version(
                        scope.slug, last.number, str(last.path.resolve()), last.sha256,
                        _content_sha(again), now), run_id)
                return ShiftReport(name, "unchanged", rounds, last.path, version=last.number,
                                   sha256=last.sha256)
        number = filed[-1].number + 1 if filed else 1
        this = {**context, "version": _version(con, number, filed, now, scope.zone)}
        content = _content_sha(this)
        record = attached.version_attachment(
            scope.slug, number, content, now,
            (filed[-1].number, filed[-1].sha256) if filed else None,
        )
    return _ToFile(scope, rounds, number, first, this, record, content, now)


def report_shift(
    con: duckdb.DuckDBPyConnection,
    conf: PropertyConfig,
    day: dt.date,
    name: str,
    folder: Path,
    epoch: dt.datetime,
    say: Say,
    run_id: int | None = None,
    key: signing.SigningKey | None = None,
    check: dict[str, Any] | None = None,
    reading: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext,
) -> ShiftReport:
    """File the shift's report, signed with `key` when there is one. A report once filed is
    never rewritten (someone may have signed it): if what it would show changed, the new one
    is the next version beside the last in the archive, ARCHIVE/DAY/DAY_SHIFT.v2.pdf, whose
    first page says what changed since that version, gives its SHA-256 and lists the
    sign-offs of the versions before it. Unchanged means rendering it again as the latest
    version shows what that version shows (`_content_sha`). `check` is what the check of
    the ledger found before filing: a failed one is printed on the cover, in red, and a
    report that said otherwise before is filed again as the next version. What it reads of
    the database is read inside `reading()` (`watch` reads between two polls there), the
    render and the signature outside it."""
    with reading():
        got = _read_shift(con, _Shift(conf, day, name, folder, epoch, run_id, key, check))
    if isinstance(got, ShiftReport):
        return got
    scope, rounds, number, first, this, record, content, now = got
    with _report_epoch(epoch):
        data = render.render_pdf(this, render.render_html(this), [record])
        data = render.sign_if(data, key, conf)
    path = first if number == 1 else first.with_name(f"{scope.slug}.v{number}.pdf")
    say(f"report {scope.title} version {number} -> {path}")
    try:
        private_files()  # the archive's folders 0700, its PDFs 0600
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():  # the nightly lock keeps other nightly runs out; not other hands
            raise UserError(
                f"{path}: appeared in the archive while this run was filing version {number} "
                "there; nothing was written over it: find out who put it there, then run "
                "nightly again"
            )
        render.write_whole(path, data)
    except OSError as e:
        if e.errno not in WRITE_ERRNOS:
            raise
        raise archive_error(folder, e) from None
    sha = hashlib.sha256(data).hexdigest()
    versions.record(
        con, versions.Version(scope.slug, number, str(path.resolve()), sha, content, now),
        run_id,
    )
    return ShiftReport(name, "written" if number == 1 else "new_version", rounds, path,
                       version=number, sha256=sha)


def _unchanged(last: Archived, again: dict[str, Any]) -> bool:
    """Whether rendering the report again as version `last` shows what `last` shows."""
    if last.content_sha256:
        return last.content_sha256 == _content_sha(again)
    # A PDF that carries no version record (filed before PDFs did): the same only when an
    # unsigned render gives its very bytes.
    plain = {**again, "signature": None}
    return render.render_pdf(plain, render.render_html(plain)) == last.path.read_bytes()


def _content_sha(context: dict[str, Any]) -> str:
    """The SHA-256 of the report's HTML but for what moves without the findings changing:
    its "generated" time (any change to the database moves it, an acknowledgement
    elsewhere), its signature statement (a key configured or renewed), the sign-offs of
    earlier versions (recorded at any time), and the ledger head it prints (a finding
    withdrawn and found again, or a record still unsealed, moves the head and not what the
    report says; ledger.json is an attachment, outside the HTML). Only what the report shows
    of the shift makes a new version: the ledger's check stays in, so a red cover is filed."""
    fixed = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    same = {**context, "generated_at": fixed, "signature": None, "ledger": None}
    if context.get("version"):
        same["version"] = {**context["version"], "signoffs": []}
    html = render.render_html(same)
    return hashlib.sha256(html.encode()).hexdigest()


def _version(
    con: duckdb.DuckDBPyConnection,
    number: int,
    earlier: list[Archived],
    now: versions.Findings,
    zone: dt.tzinfo,
) -> dict[str, Any]:
    """The report's version block: its number and, from version 2 on, the version before
    (number, file name, SHA-256), what changed since (None: not known, and why), and the
    sign-offs on record of the versions before it."""
    if not earlier:
        return {"number": number, "before": None, "changes": None, "signoffs": []}
    before = earlier[-1]
    numbers = {a.sha256: a.number for a in earlier}
    return {
        "number": number,
        "before": {
            "number": before.number,
            "name": before.path.name,
            "sha256": before.sha256,
            "unknown": "it carries no list of its findings (findings.jsonl with their "
            "fingerprints) to compare with",
        },
        "changes": versions.changes(before.findings, now, before.acks_known),
        "signoffs": [
            {"version": numbers[s.sha256], "sha256": s.sha256, "by": s.signer,
             "title": s.title, "note": s.note, "at": s.recorded_at.astimezone(zone)}
            for s in signoffs.list_signoffs(con, numbers.keys())
        ],
    }


@dataclass
class Refiled:
    """An earlier gaming day with reports in the archive whose findings this run changed (a
    log of that day delivered late, or a rerun): its shifts filed again, and why."""

    day: dt.date
    opened: dict[str, int]  # severity -> findings recorded in that day since it was filed
    withdrawn: int  # findings of that day withdrawn since
    sources: list[str]  # the log files those findings were read from
    reports: list[ShiftReport] = field(default_factory=list)

    def why(self) -> str:
        parts = []
        if self.opened:
            sev = ", ".join(f"{n} {k}" for k, n in self.opened.items())
            parts.append(f"{count(sum(self.opened.values()), 'new finding')} ({sev})")
        if self.withdrawn:
            parts.append(f"{count(self.withdrawn, 'finding')} withdrawn")
        where = f", from {', '.join(self.sources)}" if self.sources else ""
        return f"{' and '.join(parts)} since its reports were filed{where}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "gaming_day": f"{self.day:%Y-%m-%d}",
            "why": self.why(),
            "findings_new": self.opened,
            "findings_withdrawn": self.withdrawn,
            "sources": self.sources,
            "reports": [r.as_dict() for r in self.reports],
        }


def filed_days(folder: Path) -> list[dt.date]:
    """The gaming days the archive holds a report of (ARCHIVE/DAY/*.pdf)."""
    days = []
    if folder.is_dir():
        for sub in folder.iterdir():
            try:
                day = dt.date.fromisoformat(sub.name)
            except ValueError:
                continue  # evidence/, or anything else kept there
            if sub.is_dir() and any(sub.glob("*.pdf")):
                days.append(day)
    return sorted(days)


def changed_days(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    conf: PropertyConfig,
    zone: dt.tzinfo,
    folder: Path,
    skip: dt.date | Collection[dt.date],
) -> list[Refiled]:
    """The gaming days other than `skip` that have a report in the archive and whose
    findings changed since: this run recorded or withdrew one there, or a run did after
    this database last filed the day's reports (a run that died before
    filing them again). Their reports no longer show what stands, so they are filed again
    (a shift whose report would show the same stays as it is). When it last filed a day
    into this archive is read by the day folder's path, or, if it never filed into that
    path, by the folder's name wherever it filed it: an archive moved (or mounted elsewhere)
    with its database would otherwise look never filed by it, and the findings of a run
    that died before filing again would never reach the day's reports."""
    skipped = {skip} if isinstance(skip, dt.date) else set(skip)
    days = [d for d in filed_days(folder) if d not in skipped]
    if not days:
        return []
    at_path: dict[Path, dt.datetime] = {}
    by_name: dict[str, dt.datetime] = {}
    for path, filed_at in con.execute("SELECT path, filed_at FROM report_versions").fetchall():
        where = Path(path).parent
        at_path[where] = max(filed_at, at_path.get(where, filed_at))
        by_name[where.name] = max(filed_at, by_name.get(where.name, filed_at))
    windows = [
        (d, *conf.gaming_day_window(d, zone),
         at_path.get((folder / f"{d:%Y-%m-%d}").resolve(), by_name.get(f"{d:%Y-%m-%d}")))
        for d in days
    ]
    values = ", ".join("(?::DATE, ?::TIMESTAMPTZ, ?::TIMESTAMPTZ, ?::TIMESTAMPTZ)"
                       for _ in windows)
    rows = con.execute(
        f"""
        SELECT w.day, f.status, f.severity, count(*),
               list(DISTINCT regexp_replace(f.source, ':[0-9]+$', '') ORDER BY 1)
                 FILTER (f.source IS NOT NULL)
        FROM (SELECT * FROM findings WHERE run_id = ? OR recorded_at > ?) f
        JOIN (VALUES {values}) AS w(day, lo, hi, filed) ON f.ts >= w.lo AND f.ts < w.hi
        WHERE f.run_id = ? OR f.recorded_at > w.filed
        GROUP BY ALL ORDER BY w.day
        """,
        [run_id, min((w[3] for w in windows if w[3]), default=None),
         *(x for w in windows for x in w), run_id],
    ).fetchall()
    changed: dict[dt.date, Refiled] = {}
    for day, status, severity, n, sources in rows:
        r = changed.setdefault(day, Refiled(day, {}, 0, []))
        if status == "withdrawn":
            r.withdrawn += n
        else:
            r.opened[severity] = r.opened.get(severity, 0) + n
        r.sources = sorted({*r.sources, *(Path(s).name for s in sources or ())})
    for r in changed.values():
        r.opened = {k: r.opened[k] for k in SEVERITIES if k in r.opened}
    return [changed[d] for d in sorted(changed)]


def archive_error(folder: Path, e: OSError) -> UserError:
    return cannot_write(
        folder,
        e,
        "point --archive (or BACC_AUDIT_ARCHIVE, or [property] archive) at a folder this "
        "user can write to",
    )
