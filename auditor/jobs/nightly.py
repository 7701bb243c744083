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

import datetime as dt
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from auditor import __version__
from auditor.audit.dealers import gaming_day_of
from auditor.audit.run import AuditResult, audit
from auditor.config import PropertyConfig
from auditor.errors import EXIT_FINDINGS, EXIT_INPUT, EXIT_OK, WRITE_ERRNOS, UserError
from auditor.ingest.paths import escape_path
from auditor.ingest.result import IngestResult
from auditor.ingest.run import ingest
from auditor.jobs import verify as verifying
from auditor.jobs.archive import (
    Refiled,
    ShiftReport,
    archive_dir,
    archive_error,
    changed_days,
    data_changed_at,
    report_shift,
    sweep_partials,
)
from auditor.jobs.evidence import EVIDENCE, FILE_INGESTED, Filed, file_ingested_to_evidence
from auditor.jobs.lock import NightlyLock, nightly_lock
from auditor.report import signing
from auditor.rules.codes import SEVERITIES
from auditor.store import closed_days, config_record, db, ledger, outcome, runs, signoffs
from auditor.store.outcome import files_sentence
from auditor.words import count

Say = Callable[[str], None]  # a progress line for the journal (stderr)

# What the summary says of each file: FileResult.summary()'s, less its problems and counts of
# lines and duplicates, plus where it was filed.
FILE_FIELDS = ("path", "status", "sha256", "events", "quarantined", "message")


@dataclass(frozen=True)
class NightlyOptions:
    """What one nightly run is asked to do (the command's options, resolved)."""

    spool: Path
    conf: PropertyConfig
    archive: Path  # archive_dir's answer
    day: dt.date | None = None  # None: the latest gaming day that has ended
    fail_on: str = "major"
    file_ingested: str = "keep"
    now: dt.datetime | None = None  # for last_ended_gaming_day (tests)
    say: Say = field(default=lambda _line: None)


# --- which day ------------------------------------------------------------------------------


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


def days_held(
    con: duckdb.DuckDBPyConnection, ingested: IngestResult, conf: PropertyConfig,
    zone: dt.tzinfo,
) -> list[dt.date]:
    """The gaming days of the rounds in the files this ingest loaded (not those it skipped as
    already ingested: a spool that keeps its files would report every old night again)."""
    sources = [f.source_id for f in ingested.files
               if f.status == "ingested" and f.source_id is not None]
    if not sources:
        return []
    minutes = con.execute(
        "SELECT DISTINCT date_trunc('minute', ts) FROM events WHERE type = 'round_start' "
        f"AND source_id IN ({', '.join(str(int(s)) for s in sources)})"
    ).fetchall()
    return sorted({gaming_day_of(m, conf, zone) for (m,) in minutes})


def days_to_report(
    held: list[dt.date], latest: dt.date, say: Say
) -> tuple[list[dt.date], list[dt.date]]:
    """Without --date: the latest ended gaming day, unless the files this run loaded hold
    other ended days, which are then the days reported, each (the files of an older night
    delivered late; the question whether today's logs came would be the wrong one). Days
    not over yet wait for a later run. Returns the days to report and the ended days held."""
    ended = [d for d in held if d <= latest]
    for d in held:
        if d > latest:
            say(f"gaming day {d:%Y-%m-%d} is not over yet: reported by a run after it ends")
    if not ended or ended == [latest]:
        return [latest], ended
    say(f"the files hold gaming day{'s' if len(ended) > 1 else ''} "
        f"{', '.join(f'{d:%Y-%m-%d}' for d in ended)}: reporting each")
    return ended, ended


@dataclass
class DayFiled:
    """A gaming day reported by a run besides its last (`NightlyResult.earlier`)."""

    day: dt.date
    window: tuple[dt.datetime, dt.datetime]
    closed: str
    reports: list[ShiftReport]
    by_severity: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {
            "gaming_day": f"{self.day:%Y-%m-%d}",
            "gaming_day_closed": self.closed,
            "window_utc": [t.isoformat() for t in self.window],
            "reports": [r.as_dict() for r in self.reports],
            "rounds_in_gaming_day": sum(r.rounds for r in self.reports),
            "findings_standing_in_gaming_day": sum(self.by_severity.values()),
            "by_severity": self.by_severity,
        }


# --- the result -----------------------------------------------------------------------------


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
    day_closed: str = ""  # what became of the gaming day's closing (_close_day)
    ledger: str = ""  # what the check of the ledger before filing found
    # Earlier gaming days with filed reports whose findings this run changed, filed again.
    refiled: list[Refiled] = field(default_factory=list)
    signature: dict[str, Any] = field(default_factory=lambda: {"signed": False})
    unsigned: list[dict[str, Any]] = field(default_factory=list)  # filed, no sign-off yet
    # Without --date: the ended gaming days the files this run ingested hold, when they are
    # not the latest ended day alone (an older night delivered); `day` is the last of them
    # and `earlier` the others, each reported in full.
    held: list[dt.date] = field(default_factory=list)
    earlier: list[DayFiled] = field(default_factory=list)
    latest_ended: dt.date | None = None  # without --date: the day it reports by default

    @property
    def held_other_days(self) -> bool:
        """Whether the run reports the days its files hold instead of the default one."""
        return bool(self.held) and self.held != [self.latest_ended]

    @property
    def exit_code(self) -> int:
        """store/outcome.py: its problems, and the findings standing in the gaming day or
        new in this run; a quarantined line or an altered file through its log.* finding."""
        return outcome.exit_code(problems=len(self.problems), failing=self.failing)

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
            "gaming_day_closed": self.day_closed,
            "time_zone": self.zone,
            "window_utc": [t.isoformat() for t in self.window],
            "spool": str(self.spool),
            "archive": str(self.archive),
            "files": [
                {k: v for k, v in f.summary().items() if k in FILE_FIELDS} | self._where(f.path)
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
            "refiled": [r.as_dict() for r in self.refiled],
            "gaming_days_held": [f"{d:%Y-%m-%d}" for d in self.held],
            "earlier_gaming_days": [d.as_dict() for d in self.earlier],
            "signing": {k: str(v) if isinstance(v, dt.datetime) else v
                        for k, v in self.signature.items()},
            "unsigned_versions": self.unsigned,
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
            "ledger": self.ledger,
            "rule_packs": self.rule_packs,
            "tool_version": __version__,
            "exit_code": self.exit_code,
        }


# --- the run --------------------------------------------------------------------------------


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
    outcome.fail_rule(fail_on)
    if file_ingested not in FILE_INGESTED:
        raise UserError(
            f"--file-ingested must be one of {', '.join(FILE_INGESTED)}, not {file_ingested!r}"
        )
    options = NightlyOptions(
        spool, conf, archive_dir(conf, archive), day, fail_on, file_ingested, now,
        say or (lambda _line: None),
    )
    db.check_database_file(db_path)  # before the lock file is made beside it
    with nightly_lock(db_path) as lock:
        con = db.connect(db_path)
        try:
            return _run(con, lock, options)
        finally:
            con.close()


def _run(
    con: duckdb.DuckDBPyConnection, lock: NightlyLock, options: NightlyOptions
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
    args = {
        "spool": str(options.spool),
        "date": f"{options.day:%Y-%m-%d}" if options.day else None,
        "archive": str(options.archive),
        "fail_on": options.fail_on,
        "file_ingested": options.file_ingested,
        "config": options.conf.source,
        "rule_packs": packs,
        **config_record.run_args(options.conf),
    }
    with runs.recorded(con, "nightly", args) as run:
        lock.note_run(run.id)
        # Its audit under a changed config could withdraw standing findings: refused, as
        # `audit` refuses, until `audit --rerun all --reason` puts the change on record.
        config_record.check_unchanged(con, options.conf, "nightly")
        result = _work(con, run.id, options, packs)
        result.interrupted_runs = interrupted
        run.done(result.exit_code, result.summary())
    return result


def _work(
    con: duckdb.DuckDBPyConnection, run_id: int, options: NightlyOptions, packs: dict[str, str]
) -> NightlyResult:
    """The steps: open the signing key, sweep the archive, ingest and file the spool, audit,
    file the reports (the day's, and those of earlier days whose findings this run changed),
    count the findings."""
    say = options.say
    key = signing.key_for(options.conf)  # a key that will not open stops the run first
    removed = _prepare(options)
    ingested, problems = _ingest_spool(con, run_id, options)
    zone = options.conf.zone_for(con)  # after the ingest: the logs it loaded count
    filed = _file_spool(con, ingested, options, zone, problems)
    held: list[dt.date] = []
    latest = None
    if options.day is not None:
        days = [options.day]
    else:
        latest = last_ended_gaming_day(options.conf, zone, options.now)
        days, held = days_to_report(days_held(con, ingested, options.conf, zone), latest, say)
    closed = {}
    for d in days:
        closed[d] = _close_day(con, run_id, d, options.conf, zone, options.now)
        say(f"gaming day {d:%Y-%m-%d}: {closed[d]}")
    say("audit")
    audited = audit(con, run_id, options.conf)
    epoch = data_changed_at(con)
    checked = _check_ledger(con, run_id, say, problems)
    filed_days = {
        d: [report_shift(con, options.conf, d, shift.name, options.archive, epoch, say, run_id,
                         key, checked.cover())
            for shift in options.conf.shifts]
        for d in days
    }
    refiled = changed_days(con, run_id, options.conf, zone, options.archive, days)
    for r in refiled:
        say(f"gaming day {r.day:%Y-%m-%d} filed again: {r.why()}")
        r.reports = [
            report_shift(con, options.conf, r.day, shift.name, options.archive, epoch, say,
                         run_id, key, checked.cover())
            for shift in options.conf.shifts
        ]
    for d in days:
        if not any(r.rounds for r in filed_days[d]):
            problems.append(
                f"no rounds in gaming day {d:%Y-%m-%d}: nothing to report; were the night's "
                f"logs delivered to {options.spool}?"
            )
    day = days[-1]
    window, reports = options.conf.gaming_day_window(day, zone), filed_days[day]
    day_closed = closed[day]
    earlier = [DayFiled(d, options.conf.gaming_day_window(d, zone), closed[d], filed_days[d],
                        _findings(con, run_id, options.conf.gaming_day_window(d, zone))[0])
               for d in days[:-1]]
    by_sev, new, recorded = _findings(con, run_id, window)
    return NightlyResult(
        run_id=run_id,
        day=day,
        zone=str(zone),
        window=window,
        spool=options.spool,
        archive=options.archive,
        fail_on=options.fail_on,
        ingested=ingested,
        audited=audited,
        reports=reports,
        by_severity=by_sev,
        new_findings=new,
        recorded=recorded,
        failing=outcome.failing_on(con, run_id, options.fail_on, window=window,
                                   windows=[e.window for e in earlier]),
        rule_packs=packs,
        problems=problems,
        partials_removed=removed,
        file_ingested=options.file_ingested,
        filed=filed,
        day_closed=day_closed,
        ledger=checked.headline(),
        refiled=refiled,
        signature=signing.cover(key),
        unsigned=signoffs.unsigned(con),
        held=held,
        earlier=earlier,
        latest_ended=latest,
    )


def _close_day(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    day: dt.date,
    conf: PropertyConfig,
    zone: dt.tzinfo,
    now: dt.datetime | None,
) -> str:
    """Record the gaming day the run reports closed, before its audit, so that the tables
    whose logs stop in it are judged on its own night (store/closed_days.py); a day not over
    yet is left open. Says what became of it."""
    early = closed_days.not_over(conf, day, zone, now)
    if early is not None:
        return f"{early}: not closed, the ends of its tables' logs are not judged yet"
    before = closed_days.closed_days(con).get(day)
    if before is not None:
        return f"closed already ({before.how}, run {before.run_id})"
    closed_days.close(con, [day], run_id, "nightly")
    return "closed by this run"


def _check_ledger(
    con: duckdb.DuckDBPyConnection, run_id: int, say: Say, problems: list[str]
) -> verifying.Verification:
    """Seal what this run wrote so far (the reports print a head that holds it), then the
    fast check of the ledger before anything is filed: a failed one is a problem of the
    night (exit 2, the alert), and the reports say it on their cover."""
    ledger.seal(con, run_id)
    checked = verifying.verify(con, fast=True)
    say(checked.headline())
    if checked.ok:
        verifying.record(con, checked, run_id)
    else:
        problems.append(
            f"the audit database failed verification ({checked.problems[0].sentence()}); "
            "the reports filed say so on their cover; `bacc-audit verify` lists every record "
            "that differs"
        )
    return checked


def _prepare(options: NightlyOptions) -> list[Path]:
    """Refuse a spool that is no folder; remove what renders killed before their rename left
    in the archive (safe under the lock). Returns what was removed."""
    if not options.spool.is_dir():
        raise UserError(
            f"{options.spool}: the spool is not a folder; point --spool (or BACC_AUDIT_SPOOL) "
            "at the folder the table systems deliver their logs to"
        )
    try:
        removed = sweep_partials(options.archive)
    except OSError as e:
        if e.errno not in WRITE_ERRNOS:
            raise
        raise archive_error(options.archive, e) from None
    for p in removed:
        options.say(f"removed {p}: left by a render that was interrupted")
    return removed


def _ingest_spool(
    con: duckdb.DuckDBPyConnection, run_id: int, options: NightlyOptions
) -> tuple[IngestResult, list[str]]:
    """Ingest the spool. Returns the ingest and the input problems it met (exit 2)."""
    options.say(f"ingest {options.spool}")
    ingested = ingest(con, [options.spool], run_id)
    problems = list(ingested.errors)
    problems += [f.message for f in ingested.files if f.status in outcome.INPUT_STATUSES]
    return ingested, problems


def _file_spool(
    con: duckdb.DuckDBPyConnection,
    ingested: IngestResult,
    options: NightlyOptions,
    zone: dt.tzinfo,
    problems: list[str],
) -> dict[Path, Filed]:
    """File what the ingest committed into the evidence folder (after ingest returned, every
    ingest it reports has committed); a file the setup would not let go is a problem."""
    filed = file_ingested_to_evidence(
        con, ingested.files, options.file_ingested, options.archive, options.conf, zone,
        options.say,
    )
    problems += [f"{escape_path(p)}: {x.note}" for p, x in filed.items() if x.problem]
    return filed


def _findings(
    con: duckdb.DuckDBPyConnection, run_id: int, window: tuple[dt.datetime, dt.datetime]
) -> tuple[dict[str, int], int, tuple[int, int]]:
    """The findings standing in the gaming day by severity, those standing that this run
    recorded (any day), and the rows this run wrote at every step: (opened, withdrawn)."""
    by_sev = dict(
        con.execute(
            "SELECT severity, count(*) FROM current_findings WHERE ts >= ? AND ts < ? "
            "GROUP BY ALL",
            list(window),
        ).fetchall()
    )
    new = db.single(con, "SELECT count(*) FROM current_findings WHERE run_id = ?", [run_id])[0]
    opened, withdrawn = db.single(
        con,
        "SELECT count(*) FILTER (status = 'open'), count(*) FILTER (status = 'withdrawn') "
        "FROM findings WHERE run_id = ?",
        [run_id],
    )
    return {s: by_sev.get(s, 0) for s in SEVERITIES}, new, (opened, withdrawn)


# --- the summary for people -----------------------------------------------------------------


def summary_lines(result: NightlyResult) -> list[str]:
    """The text summary: what was loaded, audited and filed, and why the exit code is what
    it is; one line per fact so a mail from cron reads top to bottom."""
    s = result.summary()
    lines = [
        f"nightly run {result.run_id}: gaming day {s['gaming_day']} ({result.zone}), "
        f"spool {result.spool}"
    ]
    if result.held_other_days:
        lines.append(
            f"the files ingested hold gaming day{'s' if len(result.held) > 1 else ''} "
            f"{', '.join(s['gaming_days_held'])} (the latest ended is "
            f"{result.latest_ended:%Y-%m-%d}): each is reported")
    for e in result.earlier:
        lines.append(f"gaming day {e.day:%Y-%m-%d}: {e.closed}")
    lines.append(f"gaming day {s['gaming_day']}: {result.day_closed}")
    for rid in result.interrupted_runs:
        lines.append(f"run {rid} had been interrupted; this run completes its work")
    for p in result.partials_removed:
        lines.append(f"removed {p} (a render that was interrupted)")
    files = result.ingested.files
    statuses = Counter(f.status for f in files)
    lines.append(f"ingest: {files_sentence(statuses, s['events'], s['quarantined'])}")
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
    for e in result.earlier:
        lines.append(f"reports of gaming day {e.day:%Y-%m-%d} ({result.archive}):")
        lines += [_report_line(r) for r in e.reports]
        sev = ", ".join(f"{n} {k}" for k, n in e.by_severity.items() if n) or "none"
        lines.append(f"findings standing in gaming day {e.day:%Y-%m-%d}: "
                     f"{sum(e.by_severity.values())} ({sev})")
    lines.append(f"reports{f' of gaming day {result.day:%Y-%m-%d}' if result.earlier else ''} "
                 f"({result.archive}):")
    lines += [_report_line(r) for r in result.reports]
    for again in result.refiled:
        lines.append(f"gaming day {again.day:%Y-%m-%d} filed again: {again.why()}")
        lines += [_report_line(r) for r in again.reports]
    sig = result.signature
    lines.append(
        f"signed with the certificate of {sig['subject']}" if sig["signed"]
        else "unsigned: no [signing] key is configured"
    )
    if result.unsigned:
        lines.append(f"sign-off: {signoffs.unsigned_sentence(result.unsigned)}")
    f = s["findings"]
    sev = ", ".join(f"{n} {k}" for k, n in f["by_severity"].items() if n) or "none"
    lines.append(
        f"findings standing in gaming day {s['gaming_day']}: "
        f"{f['standing_in_gaming_day']} ({sev}); {f['new_this_run']} new this run"
    )
    if result.ledger:
        lines.append(result.ledger)
    for problem in result.problems:
        lines.append(f"problem: {problem}")
    why = {
        EXIT_OK: f"clean: no findings at or above {result.fail_on}",
        EXIT_FINDINGS: f"{result.failing} findings at or above {result.fail_on}",
        EXIT_INPUT: "input problems (above)",
    }[result.exit_code]
    lines.append(f"exit {result.exit_code}: {why}")
    return lines


def _report_line(r: ShiftReport) -> str:
    if r.status == "skipped":
        return f"  {r.shift:<8} skipped: {r.reason}"
    return f"  {r.shift:<8} {r.status:<11} v{r.version} {r.rounds:>7,} rounds  {r.path}"
