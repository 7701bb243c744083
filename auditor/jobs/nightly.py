"""The nightly compliance job: ingest the spool, audit, and file a PDF per shift of the gaming
day, unattended, with one summary and one exit code for whoever watches it.

It only strings together the steps the other commands use (`ingest`, `audit`, `report`), each
of which is crash safe on its own: a file loads in one transaction, the round replay and the
table pass in one each, a PDF appears under its name only when complete. So a run killed at
any point leaves a consistent database, and the next run finishes the work without
duplicating any of it. One run at a time: a lock file next to the database, held with
flock(2), which the kernel releases when the process dies however it dies.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import hashlib
import json
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from auditor import __version__
from auditor.audit.run import AuditResult, audit
from auditor.config import PropertyConfig
from auditor.errors import (
    EXIT_FINDINGS,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_LOCKED,
    EXIT_OK,
    WRITE_ERRNOS,
    UserError,
    cannot_write,
)
from auditor.ingest.paths import escape_path
from auditor.ingest.reader import sha256_of
from auditor.ingest.result import FileResult, IngestResult
from auditor.ingest.run import ingest
from auditor.report import render
from auditor.report.gather import gather, scope_for
from auditor.rules.codes import SEVERITIES
from auditor.store import db, runs, versions
from auditor.words import count

DEFAULT_ARCHIVE = Path("reports") / "archive"
# write_report's temporary name: `.NAME.pdf.partial` beside the final one.
PARTIAL_GLOB = ".*.partial"

Say = Callable[[str], None]  # a progress line for the journal (stderr)


class NightlyLocked(UserError):
    """Another nightly run holds the lock: not an error in the data, so its own exit code,
    which a timer or cron wrapper can treat as "already running"."""

    exit_code = EXIT_LOCKED


# --- the lock ------------------------------------------------------------------------------


def lock_path(db_path: Path) -> Path:
    """`<db>.lock`, beside the database file it guards, symlinks followed: every name of the
    same database (a symlinked file or folder) must take the same lock, or two runs through
    two names would run at once."""
    try:
        real = db_path.resolve()
    except (OSError, RuntimeError) as e:  # a symlink loop: RuntimeError before Python 3.13
        raise UserError(f"{db_path}: cannot follow the path to the database ({e})") from None
    return real.with_name(real.name + ".lock")


@dataclass(frozen=True)
class LockInfo:
    """Who holds the nightly lock, as it wrote into the lock file (for messages and `runs`)."""

    pid: int | None
    run_id: int | None
    since: str | None

    def describe(self) -> str:
        who = f"process {self.pid}" if self.pid else "another process"
        run = f"nightly run {self.run_id}" if self.run_id else "a nightly run"
        when = f", since {self.since}" if self.since else ""
        return f"{run} ({who}{when})"


def _read_info(fd: int) -> LockInfo:
    try:
        data = json.loads(os.pread(fd, 4096, 0).split(b"\n")[0] or b"{}")
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    return LockInfo(data.get("pid"), data.get("run_id"), data.get("since"))


class NightlyLock:
    """The held lock; `note_run` records the run id in the file, so `bacc-audit runs` can tell
    the live run from ones killed earlier."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.since = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        self._write(None)

    def _write(self, run_id: int | None) -> None:
        data = json.dumps({"pid": os.getpid(), "run_id": run_id, "since": self.since}).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data + b"\n", 0)

    def note_run(self, run_id: int) -> None:
        self._write(run_id)


@contextlib.contextmanager
def nightly_lock(db_path: Path) -> Iterator[NightlyLock]:
    """Hold `<db>.lock` for the block, or raise NightlyLocked at once (never wait: a second
    run started by a timer while the first is still going should step aside, not queue).

    The file is never deleted: removing a flock'd file lets a third process lock a new file
    of the same name while the second still holds the old one.
    """
    path = lock_path(db_path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise UserError(f"{path}: cannot create the nightly lock file ({e.strerror})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_info(fd)
            raise NightlyLocked(
                f"{db_path}: another nightly run holds the lock: {holder.describe()}; "
                f"this run did nothing (lock file {path})"
            ) from None
        yield NightlyLock(path, fd)
    finally:
        os.close(fd)  # releases the lock


def lock_holder(db_path: Path) -> LockInfo | None:
    """Who holds the nightly lock of `db_path` now, or None when nobody does."""
    path = lock_path(db_path)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_info(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


# --- which day, which shifts ---------------------------------------------------------------


def last_ended_gaming_day(
    conf: PropertyConfig, zone: dt.tzinfo, now: dt.datetime | None = None
) -> dt.date:
    """The latest gaming day whose end is at or before `now`: the night just ended when the
    job runs after the gaming day's start time (06:30 for a 06:00 day), the one before if it
    runs earlier. Walks back day by day so a DST change cannot skip or repeat a day."""
    now = now or dt.datetime.now(dt.UTC)
    day = now.astimezone(zone).date()
    while conf.gaming_day_window(day, zone)[1] > now:
        day -= dt.timedelta(days=1)
    return day


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


# --- ingested files into the evidence folder -------------------------------------------------

# --file-ingested: what becomes of a spool file once its ingest committed.
FILE_INGESTED = ("keep", "move", "link")
# Only these leave the spool: a refused, unreadable or empty file stays for a person to see.
FILEABLE = ("ingested", "already_ingested")
EVIDENCE = "evidence"
UNDATED = "undated"  # the folder of a file with no event (every line quarantined)
_LOG_SUFFIXES = (".jsonl.gz", ".jsonl")


@dataclass
class Filed:
    """Where one spool file went: `action` is kept (still in the spool, as asked), moved,
    linked, duplicate (the evidence folder already held the same bytes: the spool copy was
    removed) or left (it stays in the spool; `note` says why)."""

    action: str
    now_at: Path
    note: str = ""
    problem: bool = False  # the setup refused the move: an input problem of the night


def evidence_dir(archive: Path, day: dt.date | None) -> Path:
    """ARCHIVE/evidence/DAY: the gaming day of the file's first event, beside the PDFs."""
    return archive / EVIDENCE / (f"{day:%Y-%m-%d}" if day else UNDATED)


def gaming_day_of(conf: PropertyConfig, zone: dt.tzinfo, ts: dt.datetime) -> dt.date:
    """The gaming day `ts` falls in (a night's 03:00 belongs to the day before)."""
    day = ts.astimezone(zone).date()
    while conf.gaming_day_window(day, zone)[0] > ts:
        day -= dt.timedelta(days=1)
    return day


def _candidates(name: str) -> Iterator[str]:
    """NAME, then NAME.2, NAME.3, ... before the log suffix (a.jsonl.gz, a.2.jsonl.gz)."""
    base, ext = name, ""
    for suffix in _LOG_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            base, ext = name[: -len(suffix)], suffix
            break
    yield name
    n = 2
    while True:
        yield f"{base}.{n}{ext}"
        n += 1


def file_ingested_to_evidence(
    con: duckdb.DuckDBPyConnection,
    files: list[FileResult],
    how: str,
    archive: Path,
    conf: PropertyConfig,
    zone: dt.tzinfo,
    say: Say,
) -> dict[Path, Filed]:
    """Move or hard-link each ingested (or already ingested) spool file into the evidence
    folder, so the spool, which every run reads and hashes whole, holds only what is new.

    Called after ingest returned, so every ingest it reports has committed. The `sources`
    manifest keeps the delivered path: a later file of that name with other content is still
    refused as altered (by its path, and by its streams' seqs), wherever this one went. An
    existing evidence file is never replaced: a name taken by other bytes gets a suffix, and
    the same bytes (by SHA-256) are not stored twice.
    """
    done: dict[Path, Filed] = {}
    for f in files:
        if how == "keep":
            done[f.path] = Filed("kept", f.path)
            continue
        if f.status not in FILEABLE:
            done[f.path] = Filed("kept", f.path, f"{f.status}: stays for a person to review")
            continue
        if f.waiting:  # still being written: its last line waits for its newline
            done[f.path] = Filed(
                "kept", f.path, f"its last line has no newline yet ({f.waiting} bytes): "
                "it stays until the file is complete",
            )
            continue
        row = db.one(
            con,
            "SELECT first_ts FROM sources WHERE sha256 = ? AND status = 'ingested' "
            "ORDER BY id LIMIT 1",
            [f.sha256],
        )
        day = gaming_day_of(conf, zone, row[0]) if row and row[0] else None
        try:
            filed = _file_one(f.path, f.sha256, evidence_dir(archive, day), how)
        except OSError as e:
            note = f"cannot {how} it into {evidence_dir(archive, day)} ({e.strerror or e})"
            filed = Filed("left", f.path, note, problem=True)
        if filed.action == "left":
            say(f"left {f.path} in the spool: {filed.note}")
        done[f.path] = filed
    return done


def _file_one(src: Path, sha: str, folder: Path, how: str) -> Filed:
    folder.mkdir(parents=True, exist_ok=True)
    for name in _candidates(src.name):
        dst = folder / name
        if dst.exists() or dst.is_symlink():
            if dst.is_file() and sha256_of(dst)[0] == sha:
                if sha256_of(src)[0] != sha:
                    return Filed("left", src, "its content changed after it was ingested")
                src.unlink()  # the evidence folder holds these bytes already
                return Filed("duplicate", dst, "the evidence folder already held this file")
            continue  # the name holds other bytes: never overwrite, take the next
        try:
            os.link(src, dst)  # fails if dst appeared meanwhile: never overwrites
        except FileExistsError:
            continue
        except OSError as e:
            if how == "link" or e.errno not in (errno.EXDEV, errno.EPERM):
                raise
            _copy_whole(src, dst)  # move across file systems, or a file another user owns
        if sha256_of(dst)[0] != sha:  # changed after its ingest: leave it to the next run
            dst.unlink()
            return Filed("left", src, "its content changed after it was ingested")
        src.unlink()
        return Filed("linked" if how == "link" else "moved", dst)
    raise AssertionError("unreachable")  # _candidates never ends


def _copy_whole(src: Path, dst: Path) -> None:
    """Copy to `.NAME.partial` (swept like a render's), flush it to disk, then link it to its
    name, so a copy cut short never carries the final name and never replaces one."""
    tmp = dst.with_name(f".{dst.name}.partial")
    shutil.copyfile(src, tmp)
    try:
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
        os.link(tmp, dst)
    finally:
        tmp.unlink()


# --- the run -------------------------------------------------------------------------------


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


@dataclass
class NightlyResult:
    """Everything the summary says; `summary()` is also what the run record keeps."""

    run_id: int
    day: dt.date
    zone: str
    window: tuple[dt.datetime, dt.datetime]
    spool: Path
    archive: Path
    fail_on: str
    ingested: IngestResult
    audited: AuditResult
    reports: list[ShiftReport]
    by_severity: dict[str, int]  # standing findings in the gaming day
    new_findings: int  # standing findings this run recorded (any day)
    recorded: tuple[int, int]  # finding rows this run wrote: (opened, withdrawn), every step
    failing: int  # of those two sets, at or above fail_on
    rule_packs: dict[str, str]
    problems: list[str] = field(default_factory=list)  # input problems: exit 2
    partials_removed: list[Path] = field(default_factory=list)
    interrupted_runs: list[int] = field(default_factory=list)
    file_ingested: str = "keep"
    filed: dict[Path, Filed] = field(default_factory=dict)  # spool path -> where it went

    @property
    def exit_code(self) -> int:
        if self.problems:
            return EXIT_INPUT
        return EXIT_FINDINGS if self.failing else EXIT_OK

    def _where(self, path: Path) -> dict[str, str]:
        filed = self.filed.get(path) or Filed("kept", path)
        return {
            "filed": filed.action,
            "now_at": escape_path(filed.now_at),
            "filed_note": filed.note,
        }

    def summary(self) -> dict[str, Any]:
        files = self.ingested.files
        return {
            "run_id": self.run_id,
            "gaming_day": f"{self.day:%Y-%m-%d}",
            "time_zone": self.zone,
            "window_utc": [t.isoformat() for t in self.window],
            "spool": str(self.spool),
            "archive": str(self.archive),
            "files": [
                {
                    "path": escape_path(f.path),
                    "status": f.status,
                    "sha256": f.sha256,
                    "events": f.events,
                    "quarantined": f.quarantined,
                    "message": f.message,
                    **self._where(f.path),
                }
                for f in files
            ],
            "file_ingested": self.file_ingested,
            "files_by_status": dict(sorted(Counter(f.status for f in files).items())),
            "events": self.ingested.events,
            "quarantined": self.ingested.quarantined,
            "rounds_audited": self.audited.rounds,
            "rounds_not_audited": dict(sorted(self.audited.skipped.items())),
            "findings_new": self.recorded[0],
            "findings_withdrawn": self.recorded[1],
            "table_pass": {  # with the passes after it: shoes, dealers, seats
                "findings_new": self.audited.passes_new,
                "findings_withdrawn": self.audited.passes_withdrawn,
            },
            "rounds_in_gaming_day": sum(r.rounds for r in self.reports),
            "pdfs": sum(1 for r in self.reports if r.path),
            "reports": [r.as_dict() for r in self.reports],
            "findings": {
                "standing_in_gaming_day": sum(self.by_severity.values()),
                "by_severity": self.by_severity,
                "new_this_run": self.new_findings,
                "fail_on": self.fail_on,
                "at_or_above_fail_on": self.failing,
            },
            "problems": self.problems,
            "partials_removed": [str(p) for p in self.partials_removed],
            "interrupted_runs": self.interrupted_runs,
            "rule_packs": self.rule_packs,
            "tool_version": __version__,
            "exit_code": self.exit_code,
        }


def run_nightly(
    db_path: Path,
    spool: Path,
    conf: PropertyConfig,
    *,
    day: dt.date | None = None,
    archive: Path | None = None,
    fail_on: str = "major",
    file_ingested: str = "keep",
    now: dt.datetime | None = None,
    say: Say | None = None,
) -> NightlyResult:
    """The whole job under the nightly lock; the run is recorded whatever its outcome.

    Raises NightlyLocked (exit 5) when another run holds the lock, DatabaseBusy (exit 4) when
    a standalone command is writing to the database, UserError (exit 2) for a missing spool.
    """
    if fail_on not in SEVERITIES:
        raise UserError(f"--fail-on must be one of {', '.join(SEVERITIES)}, not {fail_on!r}")
    if file_ingested not in FILE_INGESTED:
        raise UserError(
            f"--file-ingested must be one of {', '.join(FILE_INGESTED)}, not {file_ingested!r}"
        )
    say = say or (lambda _line: None)
    db.check_database_file(db_path)  # before the lock file is made beside it
    with nightly_lock(db_path) as lock:
        con = db.connect(db_path)
        try:
            return _run(con, lock, spool, conf, day, archive, fail_on, file_ingested, now, say)
        finally:
            con.close()


def _run(
    con: duckdb.DuckDBPyConnection,
    lock: NightlyLock,
    spool: Path,
    conf: PropertyConfig,
    day: dt.date | None,
    archive: Path | None,
    fail_on: str,
    file_ingested: str,
    now: dt.datetime | None,
    say: Say,
) -> NightlyResult:
    # Runs left 'running' are dead: we hold both the lock and the database. Name the ones
    # since the last nightly run that finished, whose work this run is the first to complete.
    interrupted = [
        r[0]
        for r in con.execute(
            "SELECT id FROM runs WHERE status = 'running' AND id > coalesce((SELECT max(id) "
            "FROM runs WHERE command = 'nightly' AND status <> 'running'), 0) ORDER BY id"
        ).fetchall()
    ]
    packs = runs.rule_pack_hashes()
    folder = archive_dir(conf, archive)
    run_id = runs.start(
        con,
        "nightly",
        {
            "spool": str(spool),
            "date": f"{day:%Y-%m-%d}" if day else None,
            "archive": str(folder),
            "fail_on": fail_on,
            "file_ingested": file_ingested,
            "config": conf.source,
            "rule_packs": packs,
        },
    )
    lock.note_run(run_id)
    try:
        result = _work(
            con, run_id, spool, conf, day, folder, fail_on, file_ingested, now, packs, say
        )
    except UserError as e:
        runs.finish(con, run_id, "failed", e.exit_code, {"error": str(e)})
        raise
    except BaseException as e:
        if db.interrupted(e):  # Ctrl-C: the operator's choice, not a failure
            runs.finish(con, run_id, "interrupted", EXIT_INTERRUPTED, {"error": "interrupted"})
        else:
            runs.finish(con, run_id, "failed", EXIT_INTERNAL, {"error": repr(e)})
        raise
    result.interrupted_runs = interrupted
    runs.finish(con, run_id, "done", result.exit_code, result.summary())
    return result


def _work(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    spool: Path,
    conf: PropertyConfig,
    day: dt.date | None,
    folder: Path,
    fail_on: str,
    file_ingested: str,
    now: dt.datetime | None,
    packs: dict[str, str],
    say: Say,
) -> NightlyResult:
    if not spool.is_dir():
        raise UserError(
            f"{spool}: the spool is not a folder; point --spool (or BACC_AUDIT_SPOOL) at the "
            "folder the table systems deliver their logs to"
        )
    try:
        removed = sweep_partials(folder)
    except OSError as e:
        if e.errno not in WRITE_ERRNOS:
            raise
        raise _archive_error(folder, e) from None
    for p in removed:
        say(f"removed {p}: left by a render that was interrupted")

    say(f"ingest {spool}")
    ingested = ingest(con, [spool], run_id)
    problems = list(ingested.errors)
    problems += [f.message for f in ingested.files if f.status in ("unreadable", "empty")]
    zone = conf.zone_for(con)
    # After ingest returned: every ingest it reports has committed.
    filed = file_ingested_to_evidence(con, ingested.files, file_ingested, folder, conf, zone, say)
    problems += [f"{escape_path(p)}: {x.note}" for p, x in filed.items() if x.problem]

    say("audit")
    audited = audit(con, run_id, conf)

    day = day or last_ended_gaming_day(conf, zone, now)
    window = conf.gaming_day_window(day, zone)
    reports = []
    epoch = data_changed_at(con)
    for shift in conf.shifts:
        reports.append(
            _report_shift(con, conf, day, shift.name, folder, epoch, say, run_id)
        )
    if not any(r.rounds for r in reports):
        problems.append(
            f"no rounds in gaming day {day:%Y-%m-%d}: nothing to report; were the night's logs "
            f"delivered to {spool}?"
        )

    graver = list(SEVERITIES[: SEVERITIES.index(fail_on) + 1])
    by_sev = dict(
        con.execute(
            "SELECT severity, count(*) FROM current_findings WHERE ts >= ? AND ts < ? "
            "GROUP BY ALL",
            list(window),
        ).fetchall()
    )
    new, failing = db.single(
        con,
        f"""
        SELECT count(*) FILTER (run_id = ?),
               count(*) FILTER (severity IN ({", ".join("?" for _ in graver)}))
        FROM current_findings WHERE (ts >= ? AND ts < ?) OR run_id = ?
        """,
        [run_id, *graver, *window, run_id],
    )
    recorded = db.single(
        con,
        "SELECT count(*) FILTER (status = 'open'), count(*) FILTER (status = 'withdrawn') "
        "FROM findings WHERE run_id = ?",
        [run_id],
    )
    return NightlyResult(
        run_id=run_id,
        day=day,
        zone=str(zone),
        window=window,
        spool=spool,
        archive=folder,
        fail_on=fail_on,
        ingested=ingested,
        audited=audited,
        reports=reports,
        by_severity={s: by_sev.get(s, 0) for s in SEVERITIES},
        new_findings=new,
        recorded=(recorded[0], recorded[1]),
        failing=failing,
        rule_packs=packs,
        problems=problems,
        partials_removed=removed,
        file_ingested=file_ingested,
        filed=filed,
    )


def _report_shift(
    con: duckdb.DuckDBPyConnection,
    conf: PropertyConfig,
    day: dt.date,
    name: str,
    folder: Path,
    epoch: dt.datetime,
    say: Say,
    run_id: int | None = None,
) -> ShiftReport:
    """File the shift's report. A report once filed is never rewritten (someone may have
    signed it): if what it would show changed, the new one is the next version beside it,
    ARCHIVE/DAY/DAY_SHIFT.v2.pdf, whose first page says what changed since the version before
    and gives that version's SHA-256. Unchanged means rendering it again as the latest version
    gives that version's HTML (its "generated" time aside)."""
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
        context = gather(con, conf, scope)
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
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():  # else a run that died before recording it wrote these bytes
            render.write_whole(path, data)
    except OSError as e:
        if e.errno not in WRITE_ERRNOS:
            raise
        raise _archive_error(folder, e) from None
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


def _archive_error(folder: Path, e: OSError) -> UserError:
    return cannot_write(
        folder,
        e,
        "point --archive (or BACC_AUDIT_ARCHIVE, or [property] archive) at a folder this "
        "user can write to",
    )


# --- the summary for people -----------------------------------------------------------------


def summary_lines(result: NightlyResult) -> list[str]:
    """The text summary: what was loaded, audited and filed, and why the exit code is what
    it is; one line per fact so a mail from cron reads top to bottom."""
    s = result.summary()
    lines = [
        f"nightly run {result.run_id}: gaming day {s['gaming_day']} ({result.zone}), "
        f"spool {result.spool}"
    ]
    for rid in result.interrupted_runs:
        lines.append(f"run {rid} had been interrupted; this run completes its work")
    for p in result.partials_removed:
        lines.append(f"removed {p} (a render that was interrupted)")
    files = result.ingested.files
    by = Counter(f.status for f in files)
    empty = f", {by['empty']} empty" if by["empty"] else ""
    lines.append(
        f"ingest: {count(len(files), 'file')}: {by['ingested']} ingested, "
        f"{by['already_ingested']} already ingested, {by['refused_altered']} refused, "
        f"{by['unreadable']} unreadable{empty}; "
        f"{count(s['events'], 'event')} loaded, "
        f"{count(s['quarantined'], 'line')} quarantined"
    )
    if result.file_ingested != "keep":
        acts = Counter(x.action for x in result.filed.values())
        lines.append(
            f"filed ({result.file_ingested}) into {result.archive / EVIDENCE}: "
            f"{acts['moved']} moved, {acts['linked']} linked, {acts['duplicate']} already there, "
            f"{acts['left']} left in the spool"
        )
        for path, x in result.filed.items():
            if x.action == "left":
                lines.append(f"  LEFT {escape_path(path)}: {x.note}")
    for f in files:
        if f.status == "refused_altered":
            lines.append(f"  REFUSED {f.message} (move it out of the spool once reviewed)")
        elif f.status == "unreadable":
            lines.append(f"  UNREADABLE {f.message}")
        elif f.status == "empty":
            lines.append(f"  EMPTY {f.message} (move it out of the spool once reviewed)")
    lines.append(
        f"audit: {s['rounds_audited']:,} rounds replayed; findings recorded by this run "
        f"(ingest and audit): {s['findings_new']} new, {s['findings_withdrawn']} withdrawn"
    )
    for why, n in s["rounds_not_audited"].items():
        lines.append(f"  not audited: {count(n, 'round')}: {why}")
    lines.append(f"reports ({result.archive}):")
    for r in result.reports:
        if r.status == "skipped":
            lines.append(f"  {r.shift:<8} skipped: {r.reason}")
        else:
            lines.append(f"  {r.shift:<8} {r.status:<11} v{r.version} {r.rounds:>7,} rounds  "
                         f"{r.path}")
    f = s["findings"]
    sev = ", ".join(f"{n} {k}" for k, n in f["by_severity"].items() if n) or "none"
    lines.append(
        f"findings standing in gaming day {s['gaming_day']}: "
        f"{f['standing_in_gaming_day']} ({sev}); {f['new_this_run']} new this run"
    )
    for problem in result.problems:
        lines.append(f"problem: {problem}")
    why = {
        EXIT_OK: f"clean: no findings at or above {result.fail_on}",
        EXIT_FINDINGS: f"{result.failing} findings at or above {result.fail_on}",
        EXIT_INPUT: "input problems (above)",
    }[result.exit_code]
    lines.append(f"exit {result.exit_code}: {why}")
    return lines
