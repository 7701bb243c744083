"""The `bacc-audit` command: a thin skin over the library (auditor.ingest.files, .audit, .report,
.nightly, ...).

Exit codes: 0 clean (also when stdout's reader stops early: `findings | head -1`); 1 findings
(quarantined lines, refused files, findings at or above --fail-on); 2 usage, input or
configuration error; 3 internal failure; 4 database busy; 5 another nightly run holds its
lock; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import difflib
import errno
import json
import os
import re
import sys
from collections import Counter
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import duckdb
import typer
import typer.core
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table as RichTable
from typer import _click  # the click typer carries: its Context is what commands are given

from auditor import __version__
from auditor.cli.options import ConfigOption, DbOption, files_sentence
from auditor.cli.progress import progress_for
from auditor.errors import (
    EXIT_FINDINGS,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    WRITE_ERRNOS,
    UserError,
    cannot_write,
)
from auditor.ingest.paths import discover, escape_path
from auditor.ingest.result import IngestResult
from auditor.ingest.run import ingest
from auditor.store import db, runs
from auditor.words import count

EXIT_CODES_HELP = (
    "Exit codes: 0 clean (also when the reader of the output stops early, as `| head -1`); "
    "1 findings (quarantined lines, refused files, findings at or above "
    "--fail-on); "
    "2 usage, input or configuration error; 3 internal failure; 4 database busy; "
    "5 another nightly run holds its lock; 130 interrupted (Ctrl-C)."
)


class _Commands(typer.core.TyperGroup):
    """The root group: every command and subcommand is parsed inside its invoke, so a usage
    error's wording is mended here once.

    Typer validates values with pydantic, whose message for a ValueError (an enum's choices, a
    callback's refusal) begins "Value error, "; the sentence reads cleanly without it.
    """

    def invoke(self, ctx: _click.Context) -> object:
        try:
            return super().invoke(ctx)
        except typer.BadParameter as e:
            e.message = e.message.removeprefix("Value error, ")
            raise


_typed_display = typer.core.TyperOption.display_type_rich


def _flag_display_type(self: typer.core.TyperOption, ctx: _click.Context) -> str | None:
    """Typer 0.29 shows every flag as `--json <bool>`, which reads as if it took a value
    (`--json=true` is refused); a flag is shown bare."""
    return None if self.is_flag else _typed_display(self, ctx)


typer.core.TyperOption.display_type_rich = _flag_display_type  # type: ignore[method-assign]


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the reader has gone, and Python's final flush would otherwise
    print "Exception ignored ... BrokenPipeError" and exit 120."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


app = typer.Typer(
    name="bacc-audit",
    cls=_Commands,
    help="Audit baccarat table event logs against the rules of the jurisdiction.\n\n"
    + EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},  # subcommands inherit it
)
# markup=False: paths and reasons are printed as they are ("logs[old]/a.jsonl").
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
out = Console(highlight=False, soft_wrap=True, markup=False)



def _register_subcommands() -> None:
    from auditor.cli.backfill import backfill_cmd
    from auditor.cli.notice import notice_app
    from auditor.cli.watch import watch_cmd

    app.add_typer(notice_app, name="notice")
    app.command("watch")(watch_cmd)
    app.command("backfill")(backfill_cmd)


def _version(value: bool) -> None:
    if value:
        out.print(f"bacc-audit {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show version.")
    ] = False,
) -> None:
    pass


@app.command("ingest")
def ingest_cmd(
    paths: Annotated[
        list[Path], typer.Argument(help="Log files (.jsonl, .jsonl.gz) or directories.")
    ],
    db_path: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Load event logs into the audit database.

    Each file loads in one transaction. Bad lines are kept in quarantine with their file,
    line and reason, and the rest of the file still loads. A file already ingested adds
    nothing; a file whose content changed since it was ingested is refused and recorded as
    a log.altered finding. An empty file is recorded as empty in the manifest and said on
    stderr (exit 2): its table system delivered nothing.
    """
    con = db.connect(db_path or db.default_db_path())
    run_id = runs.start(con, "ingest", {"paths": [escape_path(p) for p in paths]})
    files, _ = discover(paths)
    total = sum(f.stat().st_size for f in files if f.is_file())
    use_bar = err.is_terminal and not as_json
    try:
        if use_bar:
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TimeRemainingColumn(),
                console=err,
                transient=True,
            ) as bar:
                task = bar.add_task("ingest", total=total)
                done: dict[Path, int] = {}

                def progress(path: Path, read: int) -> None:
                    done[path] = read
                    bar.update(
                        task, completed=sum(done.values()), description=escape_path(path.name)
                    )

                result = ingest(con, paths, run_id, progress)
        else:
            result = ingest(con, paths, run_id)
    except BaseException as e:
        _finish_failed(con, run_id, e)
        con.close()
        raise
    code = result.exit_code()
    runs.finish(con, run_id, "done", code, result.summary())
    con.close()
    if as_json:
        out.print_json(json.dumps(result.summary()))
    else:
        _print_ingest(result)
    raise typer.Exit(code)


def _finish_failed(con: duckdb.DuckDBPyConnection, run_id: int, e: BaseException) -> None:
    """Record how a run ended early: Ctrl-C is the operator's choice, recorded as
    'interrupted' with exit 130, not as a failure of the tool."""
    if db.interrupted(e):
        runs.finish(con, run_id, "interrupted", EXIT_INTERRUPTED, {"error": "interrupted"})
    else:
        runs.finish(con, run_id, "failed", EXIT_INTERNAL, {})


def _print_ingest(result: IngestResult) -> None:
    for e in result.errors:
        err.print(f"error: {e}")
    for f in result.files:
        for line in f.problems:
            err.print(f"quarantined: {line}")
        if f.status in ("unreadable", "refused_altered", "empty"):
            err.print(f"error: {f.message}")
        else:
            out.print(f.message)
    per_stream = result.per_stream()
    if per_stream:
        out.print("events per stream:")
        for stream, n in sorted(per_stream.items()):
            out.print(f"  {stream.replace(':', ' '):<24} {n:>10,}")
    out.print(files_sentence(Counter(f.status for f in result.files), result.events,
                             result.quarantined))




@app.command("audit")
def audit_cmd(
    db_path: DbOption = None,
    config_path: ConfigOption = None,
    rerun: Annotated[
        str | None,
        typer.Option(
            help="Also replay rounds already audited in these gaming days: DAY or FROM..TO "
            "(FROM not after TO)."
        ),
    ] = None,
    fail_on: Annotated[
        str, typer.Option(help="Exit 1 when a new finding is at least this severe.")
    ] = "major",
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Replay every ingested round not yet audited and record its deviations.

    Each round is re-derived from its cards under the table's rule pack: the deal, the
    third-card draws, the result and announcements, the settlement of every wager, the
    vigorish, and the order of collections, payments and vigorish against the procedure in
    force. Rerunning adds no duplicate findings.

    Progress goes to stderr: a bar on a terminal (not with --json); elsewhere (cron), once the
    work has taken 30 s, a line every 10% or 30 s.
    """
    from auditor import config as cfg
    from auditor.audit.run import LATER_PASSES, audit
    from auditor.rules.codes import SEVERITIES

    if fail_on not in SEVERITIES:
        raise UserError(f"--fail-on must be one of {', '.join(SEVERITIES)}, not {fail_on!r}")
    conf = cfg.load(config_path)
    days = None
    if rerun:
        first, _, last = rerun.partition("..")
        days = cfg.parse_date(first), cfg.parse_date(last or first)
        if days[1] < days[0]:
            raise UserError(
                f"--rerun {rerun}: the range ends before it starts; "
                f"write it FROM..TO, like {days[1]}..{days[0]}"
            )
    con = db.connect(db_path or db.default_db_path())
    window = None
    if days:
        day_from, day_to = days
        zone = conf.zone_for(con)
        start = conf.gaming_day_window(day_from, zone)[0]
        end = conf.gaming_day_window(day_to, zone)[1]
        window = (start, end)
    run_id = runs.start(con, "audit", {"rerun": rerun, "config": conf.source})
    try:
        with progress_for(err, "audit", bar=err.is_terminal and not as_json) as progress:
            result = audit(con, run_id, conf, window, progress=progress)
    except BaseException as e:
        _finish_failed(con, run_id, e)
        con.close()
        raise
    graver = SEVERITIES[: SEVERITIES.index(fail_on) + 1]
    n_fail = db.single(
        con,
        f"SELECT count(*) FROM findings WHERE run_id = ? AND status = 'open' "
        f"AND severity IN ({', '.join('?' for _ in graver)})",
        [run_id, *graver],
    )[0]
    code = EXIT_FINDINGS if n_fail else EXIT_OK
    summary = result.summary() | {"exit_code": code}
    runs.finish(con, run_id, "done", code, summary)
    con.close()
    if as_json:
        out.print_json(json.dumps(summary))
    else:
        out.print(
            f"{count(result.rounds, 'round')} audited: "
            f"{count(result.findings_new, 'new finding')}, "
            f"{result.findings_withdrawn} withdrawn"
        )
        for c, n in sorted(result.by_code.items()):
            out.print(f"  {c:<32} {n:>6}")
        t = result.tables
        out.print(
            f"tables, pits, shoes, dealers and seats: "
            f"{count(result.passes_new, 'new finding')}, {result.passes_withdrawn} withdrawn"
        )
        for c, n in sorted(t.get("findings_by_code", {}).items()):
            out.print(f"  {c:<32} {n:>6}")
        for name in LATER_PASSES:
            later = t.get(name, {})
            if later.get("findings"):
                out.print(f"  {name.replace('_', ' '):<32} {later['findings']:>6}")
        for why, n in sorted(result.skipped.items()):
            err.print(f"not audited: {count(n, 'round')}: {why}")
    raise typer.Exit(code)


class Format(StrEnum):
    jsonl = "jsonl"
    csv = "csv"
    table = "table"


@app.command("findings")
def findings_cmd(
    db_path: DbOption = None,
    fmt: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.table,
    table: Annotated[
        str | None, typer.Option(help="Only this table (one the database holds).")
    ] = None,
    pit: Annotated[str | None, typer.Option(help="Only this pit.")] = None,
    code: Annotated[
        list[str] | None,
        typer.Option(help="Only these codes (repeatable; `log.*` works; see `bacc-audit codes`)."),
    ] = None,
    severity: Annotated[
        str | None,
        typer.Option(help="Only this severity and graver: critical, major, minor, info."),
    ] = None,
    date: Annotated[
        str | None, typer.Option(help="Only this gaming day (local), e.g. 2026-11-28.")
    ] = None,
    shift: Annotated[
        str | None,
        typer.Option(help="Only this shift: GAMING-DAY/NAME, e.g. 2026-11-28/grave."),
    ] = None,
    config_path: ConfigOption = None,
) -> None:
    """Write the standing findings (findings format v1) to standard output.

    The table view starts with each finding's id, which `bacc-audit ack ID` takes. Times are
    shown in the property's time zone (config), else at the offset the logs carry.
    A --code no finding code matches, or a --table the database holds nothing of, is refused
    (exit 2) with the near one named: "0 findings" for a typo would read as a clean night.
    """
    from auditor import config as cfg
    from auditor.rules.codes import SEVERITIES
    from auditor.store import findings

    if severity and severity not in SEVERITIES:
        raise UserError(f"--severity must be one of {', '.join(SEVERITIES)}, not {severity!r}")
    conf = cfg.load(config_path)
    con = db.connect(db_path or db.default_db_path(), read_only=True)
    try:
        _check_filters(con, code or [], table)
    except UserError:
        con.close()
        raise
    zone = conf.zone_for(con)
    window = None
    if shift:
        day, name = cfg.parse_shift(shift)
        window = conf.shift_window(day, name, zone)
    elif date:
        window = conf.gaming_day_window(cfg.parse_date(date), zone)
    rows = findings.select(
        con, table=table, pit=pit, codes=code, min_severity=severity, window=window, zone=zone,
        dealer=True,
    )
    con.close()
    if fmt is Format.jsonl:
        for r in rows:
            sys.stdout.write(json.dumps(r, separators=(",", ":")) + "\n")
    elif fmt is Format.csv:
        findings.write_csv(sys.stdout, rows)
    else:
        t = RichTable(show_lines=False)
        for col in ("id", "time", "severity", "code", "table", "shoe/round", "message"):
            t.add_column(col, no_wrap=col == "id")
        for r in rows:
            where = f"{r['shoe']} r{r['round']}" if r["shoe"] else ""
            t.add_row(
                r["id"],
                r["ts"][:19].replace("T", " "),
                r["severity"],
                r["code"],
                r["table"] or r["pit"] or "",
                where,
                r["message"],
            )
        wide = Console(highlight=False, markup=False, width=max(out.width, 160))
        wide.print(t)
        wide.print(count(len(rows), "finding"))


@app.command("dealers")
def dealers_cmd(
    db_path: DbOption = None,
    fmt: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.table,
    date: Annotated[
        str | None, typer.Option(help="This gaming day (local), e.g. 2026-11-28.")
    ] = None,
    shift: Annotated[
        str | None, typer.Option(help="This shift: GAMING-DAY/NAME, e.g. 2026-11-28/grave.")
    ] = None,
    day_from: Annotated[
        str | None, typer.Option("--from", help="First gaming day of a range (with --to).")
    ] = None,
    day_to: Annotated[
        str | None, typer.Option("--to", help="Last gaming day of a range (with --from).")
    ] = None,
    config_path: ConfigOption = None,
) -> None:
    """Per dealer: rounds dealt, error rounds, findings by severity, and the rate against
    the property's over the period with its p-chart limits (docs/dealers.md).

    A round's dealer is its round_start's, else its shoe_start's; an error round is a round
    with at least one standing round finding. The period is --shift, --date or --from/--to
    (gaming days of the property's config); without one, everything in the database.
    """
    import datetime as dt

    from auditor import config as cfg
    from auditor.audit import dealers
    from auditor.rules.codes import SEVERITIES
    from auditor.store.findings import csv_line

    if sum(x is not None for x in (shift, date, day_from or day_to)) > 1:
        raise UserError("give one period: --shift, --date or --from/--to")
    if (day_from is None) != (day_to is None):
        raise UserError("--from and --to go together: give both, like --from 2026-11-28 --to "
                        "2026-11-30")
    conf = cfg.load(config_path)
    span = None
    if day_from and day_to:
        span = cfg.parse_date(day_from), cfg.parse_date(day_to)
        if span[1] < span[0]:
            raise UserError(f"--to {day_to} is before --from {day_from}")
    parsed_shift = cfg.parse_shift(shift) if shift else None
    parsed_date = cfg.parse_date(date) if date else None
    if parsed_shift:
        conf.shift(parsed_shift[1])  # an unknown shift name is refused before the database
    con = db.connect(db_path or db.default_db_path(), read_only=True)
    try:
        zone = conf.zone_for(con)
        if parsed_shift:
            window = dealers.Window(shift or "", *conf.shift_window(*parsed_shift, zone))
        elif parsed_date:
            window = dealers.Window(f"{parsed_date}", *conf.gaming_day_window(parsed_date, zone))
        elif span:
            start = conf.gaming_day_window(span[0], zone)[0]
            end = conf.gaming_day_window(span[1], zone)[1]
            window = dealers.Window(f"{span[0]}..{span[1]}", start, end)
        else:
            first, last = con.execute(
                "SELECT min(ts), max(ts) FROM events WHERE type = 'round_start'"
            ).fetchall()[0]
            if first is None:
                first = last = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
            window = dealers.Window("all", first, last + dt.timedelta(microseconds=1))
        rows, unnamed = dealers.dealer_rows(con, window)
    finally:
        con.close()
    records = [r.record() for r in rows]
    if fmt is Format.jsonl:
        for rec in records:
            sys.stdout.write(json.dumps(rec, separators=(",", ":")) + "\n")
        return
    if fmt is Format.csv:
        sys.stdout.write(",".join(dealers.RECORD_FIELDS) + "\n")
        for rec in records:
            sys.stdout.write(csv_line(
                str(v).lower() if isinstance(v, bool) else v for v in rec.values()
            ))
        return
    t = RichTable(show_lines=False)
    for col in ("dealer", "rounds", "error rounds", "per 1,000", "limit per 1,000", "flagged",
                *SEVERITIES):
        t.add_column(col, justify="left" if col == "dealer" else "right")
    for r in rows:
        t.add_row(r.dealer, f"{r.rounds:,}", f"{r.error_rounds:,}", f"{r.rate * 1000:.1f}",
                  f"{r.upper * 1000:.1f}", "FLAGGED" if r.flagged else "",
                  *(str(r.findings.get(s, 0)) for s in SEVERITIES))
    wide = Console(highlight=False, markup=False, width=max(out.width, 120))
    wide.print(t)
    total = sum(r.rounds for r in rows)
    errors = sum(r.error_rounds for r in rows)
    p = rows[0].expected if rows else 0.0
    wide.print(
        f"{window.label}: {count(len(rows), 'dealer')}, {count(total, 'round')}, "
        f"{count(errors, 'error round')} (a round with at least one round finding); "
        f"property rate p̄ {p * 1000:.1f} per 1,000; a dealer's limit is "
        "p̄ + 3·sqrt(p̄(1-p̄)/rounds) (docs/dealers.md)"
    )
    if unnamed:
        wide.print(f"{count(unnamed, 'round')} name no dealer and are left out")


def _near(word: str, known: list[str]) -> str:
    near = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return f"; did you mean {near[0]}?" if near else ""


def _check_filters(con: duckdb.DuckDBPyConnection, codes: list[str], table: str | None) -> None:
    """A filter that can match nothing is a typo, not a clean result: "0 findings" for
    `draw.banker_miss` would tell a compliance officer the night was clean.

    Codes are the registry's (and any an older version recorded); tables, those the database
    holds events or findings for.
    """
    from auditor.rules.codes import REGISTRY

    known = sorted(
        set(REGISTRY)
        | {r[0] for r in con.execute("SELECT DISTINCT code FROM findings").fetchall()}
    )
    for c in codes:
        pattern = re.compile(".*".join(re.escape(part) for part in c.split("*")))
        if not any(pattern.fullmatch(k) for k in known):
            raise UserError(
                f"--code {c}: no such finding code{_near(c, known)} "
                "(bacc-audit codes lists them; * matches any text, as in log.*)"
            )
    if table is None:
        return
    # stream_sources is the small summary; a database from before it has only the events.
    has_summary = db.single(
        con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'stream_sources'"
    )[0]
    streams = "stream_sources" if has_summary else "events"
    tables = sorted(
        r[0]
        for r in con.execute(
            f"SELECT substr(stream, 7) FROM {streams} WHERE starts_with(stream, 'table:') "
            "UNION SELECT table_id FROM findings WHERE table_id IS NOT NULL"
        ).fetchall()
    )
    if table not in tables:
        if not tables:
            held = " (it holds no table yet)"
        elif len(tables) <= 12:
            held = f" (it holds {', '.join(tables)})"
        else:
            held = f" (it holds {len(tables):,} tables, {tables[0]} to {tables[-1]})"
        near = _near(table, tables)
        raise UserError(f"--table {table}: no such table in this database{near}{held}")


@app.command("codes")
def codes_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print the registry as JSON.")] = False,
    as_markdown: Annotated[
        bool, typer.Option("--markdown", help="Print docs/codes.md (generated from the registry).")
    ] = False,
) -> None:
    """List every finding code with its severity, its rule, the provision each rule pack
    cites for it, and why it matters. The packs are those in use (BACC_AUDIT_RULES, else the
    packs shipped); --markdown always documents the packs shipped."""
    from auditor.rules.codes import REGISTRY, markdown
    from auditor.rules.pack import RulePackError, citations
    from auditor.shipped import shipped

    if as_markdown:
        sys.stdout.write(markdown(citations(shipped("rules"))))
        return
    try:
        cited = citations()
    except (RulePackError, OSError) as e:
        raise UserError(f"the rule packs cannot be read: {e}") from None
    if as_json:
        rows = [
            {**vars(c), "citations": {p: texts[c.code] for p, texts in cited if c.code in texts}}
            for c in REGISTRY.values()
        ]
        out.print_json(json.dumps(rows))
        return
    for c in REGISTRY.values():
        out.print(f"{c.code}  ({c.severity_text})  {c.title}")
        out.print(f"    rule: {c.rule}")
        for pack, texts in cited:
            if c.code in texts:
                out.print(f"      {pack}: {texts[c.code]}")
        out.print(f"    why:  {c.why}")


class ReportFormat(StrEnum):
    pdf = "pdf"
    html = "html"


@app.command("report")
def report_cmd(
    shift: Annotated[
        str | None, typer.Option(help="The shift: GAMING-DAY/NAME, e.g. 2026-11-28/grave.")
    ] = None,
    date: Annotated[str | None, typer.Option(help="A whole gaming day instead.")] = None,
    pit: Annotated[str | None, typer.Option(help="Only this pit.")] = None,
    table: Annotated[str | None, typer.Option(help="Only this table.")] = None,
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Output file (default: reports/out/DAY_SHIFT[_PIT][_TABLE].pdf)."
        ),
    ] = None,
    fmt: Annotated[
        ReportFormat | None,
        typer.Option(
            "--format",
            help="pdf or html (default: from the --out suffix, .pdf or .html; else pdf).",
            show_default=False,
        ),
    ] = None,
    db_path: DbOption = None,
    config_path: ConfigOption = None,
) -> None:
    """Render the audit report of a shift (or gaming day) as PDF or HTML.

    Give --shift or --date, not both. The format follows the --out file's suffix unless
    --format says it; a suffix that contradicts --format is refused.

    The PDF carries a cover with the rule packs and tool version, a summary of findings,
    hold against theoretical hold per table, the procedures in force with their notices,
    every finding with its citation, cards and source line, a sign-off block, and the
    findings attached as JSONL and CSV. The same database and arguments give the same bytes.

    Progress (gather, render, write) goes to stderr: a bar on a terminal; elsewhere (cron),
    once the work has taken 30 s, a line every 10% or 30 s. Stdout is the file's path alone.
    """
    from auditor import config as cfg
    from auditor.report.gather import scope_for
    from auditor.report.render import write_report

    if shift and date:
        raise UserError("give --shift (one shift) or --date (the whole gaming day), not both")
    chosen = _report_format(out_path, fmt)
    conf = cfg.load(config_path)
    con = db.connect(db_path or db.default_db_path(), read_only=True)
    try:
        scope = scope_for(conf, con, shift=shift, date=date, pit=pit, table=table)
        with progress_for(err, "report", bar=err.is_terminal) as progress:
            path = write_report(con, conf, scope, out_path, chosen, progress)
    except OSError as e:
        if e.errno not in WRITE_ERRNOS:
            raise
        raise cannot_write(
            out_path or "reports/out", e, "choose another --out, or make that folder writable"
        ) from None
    finally:
        con.close()
    out.print(str(path))


SUFFIX_FORMATS = {".pdf": "pdf", ".html": "html", ".htm": "html"}


def _report_format(out_path: Path | None, fmt: ReportFormat | None) -> str:
    """--format, else the --out suffix, else pdf: `--out y.html` that wrote a PDF (or
    `--format html --out z.pdf` that wrote HTML) gave a file its own name misdescribes."""
    by_suffix = SUFFIX_FORMATS.get(out_path.suffix.lower()) if out_path else None
    if fmt is None:
        if out_path and out_path.suffix and by_suffix is None:
            raise UserError(
                f"--out {out_path}: the report is PDF or HTML; name the file .pdf or .html, "
                "or say which with --format"
            )
        return by_suffix or "pdf"
    if by_suffix and by_suffix != fmt.value:
        raise UserError(
            f"--format {fmt.value} contradicts --out {out_path}, whose suffix says "
            f"{by_suffix}; make them agree (or leave --format out)"
        )
    return fmt.value


@app.command("doctor")
def doctor_cmd(
    db_path: DbOption = None,
    config_path: ConfigOption = None,
    spool: Annotated[
        Path | None,
        typer.Option(
            envvar="BACC_AUDIT_SPOOL",
            help="The nightly job's spool: checked to exist and be readable.",
            show_default=False,
        ),
    ] = None,
    archive: Annotated[
        Path | None,
        typer.Option(
            envvar="BACC_AUDIT_ARCHIVE",
            help="The nightly job's archive (default as nightly: [property] archive in the "
            "config, else reports/archive): checked to exist and be writable.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Check what bacc-audit needs: PDF libraries, fonts, rule packs, the property config,
    the nightly job's spool and archive, and the database and its folder.

    Each failed check says what to do; exit 2 when any failed. The spool and archive are
    checked when a spool is given or an archive given or configured. Permissions are those
    of the user running doctor: run it as the user of the nightly job.
    """
    from auditor.cli.doctor import checks

    failed = 0
    for ok, what, advice in checks(db_path or db.default_db_path(), config_path, spool, archive):
        out.print(f"{'note' if ok is None else 'ok  ' if ok else 'FAIL'} {what}")
        if ok is False:
            failed += 1
            out.print(f"     {advice}")
    raise typer.Exit(EXIT_INPUT if failed else EXIT_OK)


@app.command("odds")
def odds_cmd(
    decks: Annotated[int, typer.Option(min=1, max=16, help="Decks in the shoe.")] = 8,
    variant: Annotated[
        str | None, typer.Option(help="Only this variant's house edges (default: all).")
    ] = None,
    jurisdiction: Annotated[str, typer.Option(help="Rule pack jurisdiction.")] = "NJ",
    game: Annotated[str, typer.Option(help="Rule pack game.")] = "mini_baccarat",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Exact probabilities and house edges by complete enumeration of a finite shoe.

    Every ordered deal of the shoe is counted with the rule pack's own draw tables, so the
    figures are the pack's rules, not a textbook's.
    """
    from auditor.rules.odds import odds_report
    from auditor.rules.pack import RulePackError, load_pack

    try:
        pack = load_pack(jurisdiction, game)
    except (RulePackError, FileNotFoundError) as e:
        raise UserError(str(e)) from None
    if pack.game == "chemin_de_fer":
        raise UserError(
            "odds are for the banking games (mini_baccarat, punto_banco): at chemin de fer "
            "the participants play against each other, and the option cells make the odds "
            "depend on the players' choices"
        )
    report = odds_report(pack, decks)
    if variant:
        if variant not in report["house_edge"]:
            known = ", ".join(report["house_edge"])
            raise UserError(f"{pack.id} has no variant {variant!r} (it has: {known})")
        report["house_edge"] = {variant: report["house_edge"][variant]}
    if as_json:
        out.print_json(json.dumps(report, default=str))
        return
    out.print(f"{report['pack']}, {decks} decks, {report['sequences']:,} ordered deals")
    out.print("probability")
    for k, p in report["probability"].items():
        out.print(f"  {k:<16} {p}")
    for name, edges in report["house_edge"].items():
        out.print(f"house edge, variant {name}")
        for k, edge in edges.items():
            out.print(f"  {k:<16} {edge * 100:.4f}%")


# --- nightly job, runs, acknowledgements (issue 6) ------------------------------------------


@app.command("nightly")
def nightly_cmd(
    spool: Annotated[
        Path,
        typer.Option(
            envvar="BACC_AUDIT_SPOOL",
            help="The folder the table systems deliver logs to; new files are ingested, "
            "files already ingested are skipped.",
        ),
    ],
    date: Annotated[
        str | None,
        typer.Option(
            help="The gaming day to report (default: the latest one that has ended, in the "
            "property's time zone)."
        ),
    ] = None,
    archive: Annotated[
        Path | None,
        typer.Option(
            envvar="BACC_AUDIT_ARCHIVE",
            help="Where the PDFs are filed as DAY/DAY_SHIFT.pdf (default: [property] archive "
            "in the config, else reports/archive).",
            show_default=False,
        ),
    ] = None,
    fail_on: Annotated[
        str, typer.Option(help="Exit 1 when a finding of the night is at least this severe.")
    ] = "major",
    file_ingested: Annotated[
        str,
        typer.Option(
            "--file-ingested",
            help="What becomes of a spool file once its ingest committed: keep (leave it in "
            "the spool), move or link (hard-link, never copy) it into "
            "ARCHIVE/evidence/DAY/, so the spool holds only what is new. Only ingested and "
            "already ingested files leave; refused, unreadable and empty ones stay.",
        ),
    ] = "keep",
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
    db_path: DbOption = None,
    config_path: ConfigOption = None,
) -> None:
    """The unattended nightly job: ingest the spool, audit, file a PDF per shift.

    Every shift of the gaming day with rounds gets its PDF under ARCHIVE/DAY/DAY_SHIFT.pdf;
    shifts without rounds are skipped and said so. One run at a time (a lock file beside the
    database, `DB.lock`); a run killed anywhere leaves a consistent database and the next run
    completes its work.

    Exit codes: 0 clean; 1 findings at or above --fail-on in the night's data (standing in
    the gaming day, or new in this run); 2 input or configuration error (missing spool,
    unreadable or empty file, an archive it cannot write to, no rounds in the whole gaming
    day); 3 internal failure; 4 database busy (another command has the database open);
    5 another nightly run holds the lock; 130 interrupted (Ctrl-C).
    """
    from auditor import config as cfg
    from auditor.jobs import nightly

    try:
        conf = cfg.load(config_path)
        day = cfg.parse_date(date) if date else None
        result = nightly.run_nightly(
            db_path or db.default_db_path(),
            spool,
            conf,
            day=day,
            archive=archive,
            fail_on=fail_on,
            file_ingested=file_ingested,
            say=lambda line: err.print(f"nightly: {line}"),
        )
    except UserError as e:
        if as_json:  # monitoring reads stdout: give it JSON even for a refusal
            out.print_json(json.dumps({"error": str(e), "exit_code": e.exit_code}))
        raise
    if as_json:
        out.print_json(json.dumps(result.summary()))
    else:
        for line in nightly.summary_lines(result):
            out.print(line)
    raise typer.Exit(result.exit_code)


class RunStatus(StrEnum):
    running = "running"
    done = "done"
    failed = "failed"
    interrupted = "interrupted"


# The commands that record a run (what `runs --command` can name).
RUN_COMMANDS = ("ingest", "audit", "nightly", "watch", "ack", "notice add", "backfill")
RUNS_LIMIT = 50


@app.command("runs")
def runs_cmd(
    db_path: DbOption = None,
    limit: Annotated[
        int,
        typer.Option(
            min=0,
            help=f"Only the latest N runs (default {RUNS_LIMIT}: a year of nightly runs is "
            "hundreds); 0 for all.",
            show_default=False,
        ),
    ] = RUNS_LIMIT,
    command: Annotated[
        str | None,
        typer.Option(help=f"Only this command's runs: {', '.join(RUN_COMMANDS)}."),
    ] = None,
    status: Annotated[
        RunStatus | None,
        typer.Option(help="Only runs with this status (as shown: a dead run is interrupted)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the recorded runs, oldest first: command, times, status, exit code and counts.

    The latest 50 by default (--limit 0 for all), after --command and --status filter them;
    the text listing says how many it left out. A --command that no command records is
    refused (exit 2) with the near one named: "0 runs" for a typo would read as none ran.

    A run stopped with Ctrl-C is recorded as 'interrupted' (exit 130). A run whose process
    died before it finished (killed, power loss) still reads 'running' in its row; it is
    shown as 'interrupted' too (the row itself is never edited).
    """
    from auditor.errors import DatabaseBusy
    from auditor.jobs import nightly

    path = db_path or db.default_db_path()
    holder = nightly.lock_holder(path)
    try:
        con = db.connect(path, read_only=True)
    except DatabaseBusy:
        if holder is None:
            raise
        raise DatabaseBusy(
            f"{path}: database busy: {holder.describe()} is writing to it; "
            "try again when it has finished"
        ) from None
    try:
        if command is not None:
            recorded = [r[0] for r in con.execute("SELECT DISTINCT command FROM runs").fetchall()]
            known = sorted(set(RUN_COMMANDS) | set(recorded))
            if command not in known:
                raise UserError(
                    f"--command {command}: no such command records runs{_near(command, known)} "
                    f"(they are {', '.join(known)})"
                )
        live = {holder.run_id} if holder and holder.run_id else set()
        live |= db.served_runs(con)  # the owner serving this reader, and commands it serves
        every = runs.listing(con, live, command=command, status=status and status.value)
    finally:
        con.close()
    rows = every[-limit:] if limit else every
    if as_json:
        out.print_json(json.dumps(rows, default=str))
        return
    t = RichTable(show_lines=False)
    for col in ("id", "command", "started (UTC)", "finished (UTC)", "status", "exit", "counts"):
        t.add_column(col)
    for r in rows:
        t.add_row(
            str(r["id"]),
            r["command"],
            r["started_at"][:19].replace("T", " "),
            (r["finished_at"] or "")[:19].replace("T", " "),
            r["status"],
            "" if r["exit_code"] is None else str(r["exit_code"]),
            ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in r["counts"].items()),
        )
    Console(highlight=False, markup=False, width=max(out.width, 140)).print(t)
    left_out = len(every) - len(rows)
    more = f" ({left_out:,} earlier left out: --limit 0 for all)" if left_out else ""
    out.print(f"{count(len(rows), 'run')}{more}")


@app.command("ack")
def ack_cmd(
    finding: Annotated[
        str | None,
        typer.Argument(
            metavar="ID|FINGERPRINT",
            help="The finding's id (the first column of `bacc-audit findings`, any case) or "
            "its full fingerprint (findings --format jsonl shows both), or `list` to list "
            "every acknowledgement.",
        ),
    ] = None,
    by: Annotated[str | None, typer.Option("--by", help="Who reviewed the finding.")] = None,
    disposition: Annotated[
        str | None, typer.Option(help="What was decided, e.g. 'video reviewed, patron paid'.")
    ] = None,
    note: Annotated[str, typer.Option(help="Anything else the next reader needs.")] = "",
    list_all: Annotated[
        bool, typer.Option("--list", help="Same as `ack list` (kept for scripts).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    db_path: DbOption = None,
) -> None:
    """Record who reviewed a finding and what was decided (append-only); `ack list` lists them.

    The finding is named by its short id (what the table view and the PDF show, so an officer
    can type it) or its full fingerprint; either way the full fingerprint is recorded. An id
    no finding has is refused (exit 2) with the closest ids. `ack list` reads as `notice list`
    does (`ack --list` still works); no id or fingerprint is the word list, since an id is F
    and hex digits and a fingerprint always has its `|` separators. A later acknowledgement
    of the same finding is a new row; the latest one stands and is the one the shift report
    prints beside the finding.
    """
    from auditor.store import acks

    path = db_path or db.default_db_path()
    fingerprint = finding
    if fingerprint == "list":
        if list_all:
            raise UserError("give ack list or ack --list, not both")
        fingerprint, list_all = None, True
    if list_all:
        if fingerprint or by or disposition or note:
            raise UserError("ack list takes no fingerprint, --by, --disposition or --note")
        con = db.connect(path, read_only=True)
        try:
            rows = [acks.as_dict(a) for a in acks.list_acks(con)]
        finally:
            con.close()
        if as_json:
            out.print_json(json.dumps(rows))
            return
        for row in rows:
            note_text = f" ({row['note']})" if row["note"] else ""
            out.print(
                f"ack {row['id']} {row['recorded_at'][:19].replace('T', ' ')} UTC  "
                f"{row['finding_id']}  {row['fingerprint']}\n"
                f"    by {row['by']}: {row['disposition']}{note_text}"
            )
        out.print(count(len(rows), "acknowledgement"))
        return
    if not fingerprint or by is None or disposition is None:
        raise UserError(
            "give the finding and the review: bacc-audit ack ID|FINGERPRINT --by NAME "
            "--disposition TEXT [--note TEXT] (or bacc-audit ack list)"
        )
    con = db.connect(path, small_writes=True)  # through the owner, if one writes now
    try:
        a, status = acks.acknowledge(con, fingerprint, by=by, disposition=disposition,
                                     note=note)
        fingerprint = a.fingerprint
    finally:
        con.close()
    if as_json:
        out.print_json(json.dumps(acks.as_dict(a) | {"finding_status": status}))
        return
    later = " (the finding has since been withdrawn)" if status == "withdrawn" else ""
    out.print(f"ack {a.id}: {fingerprint} by {a.reviewer}: {a.disposition}{later}")


@app.command("simulate")
def simulate_cmd(
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out", help="Folder to write the logs into: new or empty, unless --replace."
        ),
    ],
    tables: Annotated[int, typer.Option("--tables", help="How many tables.")],
    hours: Annotated[
        float,
        typer.Option(
            "--hours",
            help="Hours each table is open: from 22:00 on --date (at most 13), or with --bulk "
            "from 06:00 (at most 24).",
        ),
    ],
    seed: Annotated[int, typer.Option("--seed", help="Same seed, same bytes.")] = 1,
    deviation_rate: Annotated[
        float,
        typer.Option(
            "--deviation-rate",
            help="Probability of a deviation per round (round codes), and per shoe, pit, "
            "table or file for the kinds planted there (see README).",
        ),
    ] = 0.0,
    games: Annotated[
        str,
        typer.Option(
            "--games",
            help="Comma-separated: mini_baccarat, punto_banco, chemin_de_fer, nz (NZ "
            "mini-baccarat).",
        ),
    ] = "mini_baccarat,punto_banco,chemin_de_fer",
    bulk: Annotated[
        bool,
        typer.Option(
            "--bulk",
            help="Vectorised generator for volume: NJ mini-baccarat tables only (--games is "
            "ignored), deviation kinds draw.*, settle.wrong_amount, vig.missing, "
            "vig.wrong_amount, order.collect_after_pay, result.misannounced, "
            "announce.tie_missing; up to 24 hours from 06:00 (one gaming day).",
        ),
    ] = False,
    date: Annotated[
        str | None,
        typer.Option(
            "--date",
            help="The gaming day simulated, e.g. 2026-11-28 (default 2026-12-01): it names "
            "the files and shoes and dates the events.",
            show_default=False,
        ),
    ] = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Let --out hold files already: first remove the *.jsonl, *.jsonl.gz and "
            "ground_truth.ndjson directly in it (what a simulation writes); nothing else "
            "is touched.",
        ),
    ] = False,
    error_prone_dealer: Annotated[
        bool,
        typer.Option(
            "--error-prone-dealer",
            help="Plant a dealer with ten times the others' rate of deviations during the "
            "grave shift (dealer.error_rate; docs/dealers.md). Needs --deviation-rate.",
        ),
    ] = False,
    counting_seat: Annotated[
        bool,
        typer.Option(
            "--counting-seat",
            help="Plant a seat whose Dragon 7 wagers follow the count at the first Dragon 7 "
            "table (play.side_bet_counting; docs/side-bets.md).",
        ),
    ] = False,
    shoe_twice: Annotated[
        bool,
        typer.Option(
            "--shoe-twice",
            help="Plant a shoe dealt in the order of another table's shoe "
            "(shoe.repeated_order; docs/shoe-integrity.md).",
        ),
    ] = False,
    unshuffled: Annotated[
        bool,
        typer.Option(
            "--unshuffled",
            help="Plant a shoe shuffled with two riffles only and a run of spades in a new "
            "pack's order (shoe.unshuffled; docs/shoe-integrity.md).",
        ),
    ] = False,
) -> None:
    """Write event log v1 files for a simulated night, with deviations planted at random and
    listed in ground_truth.ndjson (code, table, shoe, round, kind) beside the logs.

    --out must be new or empty: the logs of two nights in one folder would be ingested as one,
    and the ground truth would describe only the newer; --replace clears a previous run's
    files first.
    """
    from auditor import config as cfg
    from auditor.simulate.bulk import BULK_DATE, simulate_bulk
    from auditor.simulate.planted import SIM_DATE, simulate

    chosen = tuple(g.strip() for g in games.split(",") if g.strip())
    try:
        day = cfg.parse_date(date) if date is not None else None
    except UserError as e:
        raise UserError(f"--date: {e}") from None
    patterns = [name for name, on in (
        ("--error-prone-dealer", error_prone_dealer), ("--counting-seat", counting_seat),
        ("--shoe-twice", shoe_twice), ("--unshuffled", unshuffled)) if on]
    if bulk and patterns:
        raise UserError(f"{', '.join(patterns)}: not with --bulk, whose generator plants only "
                        "round deviations; leave out --bulk")
    try:
        if bulk:
            result = simulate_bulk(
                out_dir, tables, hours, seed, deviation_rate,
                day=day or BULK_DATE, replace=replace,
            )
        else:
            result = simulate(
                out_dir, tables, hours, seed, deviation_rate, chosen,
                day=day or SIM_DATE, replace=replace, error_prone_dealer=error_prone_dealer,
                counting_seat=counting_seat, shoe_twice=shoe_twice, unshuffled=unshuffled,
            )
    except ValueError as e:
        raise UserError(str(e)) from None
    except OSError as e:  # a folder the user cannot write: their setup, not a bug
        where = e.filename or out_dir
        raise UserError(f"{where}: cannot write the simulated logs there ({e.strerror})") from None
    for path in result.files:
        out.print(str(path))
    out.print(str(result.ground_truth))
    out.print(
        f"{count(result.tables, 'table')}, {count(result.rounds, 'round')}, "
        f"{count(result.events, 'event')}, {count(len(result.deviations), 'deviation')} planted; "
        f"{result.rounds_per_second:,.0f} rounds/s"
    )


def _closed_pipe(e: BaseException) -> bool:
    """Whether an exit came from stdout's reader going away (`findings | head -1`).

    Typer and rich both turn a BrokenPipeError into a silent exit 1, the code for "findings
    found"; the reader stopping early is its choice, not a finding, so the CLI exits 0.
    """
    cause = e.__context__
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno == errno.EPIPE:
            return True
        cause = cause.__context__
    return False


def main() -> None:
    """Entry point: user errors become one sentence and an exit code, never a traceback.

    Click handles usage errors itself (exit 2) and typer.Exit carries each command's code.
    Ctrl-C is the operator's choice, not a bug: one line and 130, as a shell expects.
    """
    try:
        app()
    except SystemExit as e:
        if e.code == EXIT_INTERRUPTED:  # typer turns a KeyboardInterrupt into a silent 130
            err.print("interrupted")
        if _closed_pipe(e):
            _quiet_stdout()
            sys.exit(EXIT_OK)
        try:  # output still buffered meets a closed pipe here, not in the command
            sys.stdout.flush()
        except BrokenPipeError:
            _quiet_stdout()
            sys.exit(EXIT_OK)
        raise
    except UserError as e:
        err.print(f"error: {e}")
        sys.exit(e.exit_code)
    except Exception as e:
        if db.interrupted(e):
            err.print("interrupted")
            sys.exit(EXIT_INTERRUPTED)
        err.print_exception()
        err.print(f"internal error: {e}; please report it with the command you ran")
        sys.exit(EXIT_INTERNAL)


_register_subcommands()

if __name__ == "__main__":
    main()
