"""`bacc-audit audit`: replay the ingested rounds and record their deviations
(auditor.audit.run)."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Annotated

import duckdb
import typer

from auditor import config as cfg
from auditor.cli import console
from auditor.cli.options import ConfigOption, DbOption, FailOnOption, JsonSummaryOption
from auditor.cli.progress import progress_for
from auditor.errors import UserError
from auditor.rules.codes import at_least
from auditor.store import config_record, db, outcome, runs
from auditor.words import count

if TYPE_CHECKING:  # the audit's modules load when the command runs, not at startup
    from auditor.audit.run import AuditResult


def audit_cmd(
    db_path: DbOption = None,
    config_path: ConfigOption = None,
    rerun: Annotated[
        str | None,
        typer.Option(
            help="Also replay rounds already audited in these gaming days: DAY, FROM..TO "
            "(FROM not after TO) or all. Under a property config changed since the standing "
            "findings were made, with --reason: the only way to audit under it."
        ),
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option(
            help="Why --rerun runs (a changed property config: which, and who decided): "
            "recorded on the run, which every finding it withdraws or opens names.",
            show_default=False,
        ),
    ] = None,
    fail_on: FailOnOption = "major",
    as_json: JsonSummaryOption = False,
) -> None:
    """Replay every ingested round not yet audited and record its deviations.

    Each round is re-derived from its cards under the table's rule pack: the deal, the
    third-card draws, the result and announcements, the settlement of every wager, the
    vigorish, and the order of collections, payments and vigorish against the procedure in
    force. Rerunning adds no duplicate findings.

    The run records the property config it audits under. When that config differs from the
    one the standing findings were made under (shifts, time zone, gaming day start, pit
    procedures, house options), the audit refuses (exit 2) and names what changed: rerun
    with --rerun all --reason TEXT, which records the reason on the run.

    Progress goes to stderr: a bar on a terminal (not with --json); elsewhere (cron), once the
    work has taken 30 s, a line every 10% or 30 s.
    """
    from auditor.audit.run import audit

    graver = at_least(fail_on)
    conf = cfg.load(config_path)
    days = None if rerun == "all" else _days(rerun)
    reason = _reason(rerun, reason)
    path = db_path or db.default_db_path()
    db.require_database(path)
    con = db.connect(path)
    try:
        config_record.check_unchanged(con, conf, "audit", reason)
        window = None
        if days:
            zone = conf.zone_for(con)
            window = (conf.gaming_day_window(days[0], zone)[0],
                      conf.gaming_day_window(days[1], zone)[1])
        elif rerun == "all":
            window = _everything(con)
        args = {"rerun": rerun, "config": conf.source, **config_record.run_args(conf, reason)}
        with runs.recorded(con, "audit", args) as run:
            bar = console.err.is_terminal and not as_json
            with progress_for(console.err, "audit", bar=bar) as progress:
                result = audit(con, run.id, conf, window, progress=progress)
            code = outcome.exit_code(failing=outcome.failing(con, run.id, graver, standing=False))
            summary = result.summary() | {"exit_code": code}
            run.done(code, summary)
    finally:
        con.close()
    if as_json:
        console.out.print_json(json.dumps(summary))
    else:
        _print(result)
    raise typer.Exit(code)


def _reason(rerun: str | None, reason: str | None) -> str | None:
    """--reason, which goes with --rerun and says something."""
    if reason is None:
        return None
    if not reason.strip():
        raise UserError("--reason is empty: say why the rerun runs (what changed, who decided)")
    if not rerun:
        raise UserError("--reason goes with --rerun: it records why rounds are replayed again "
                        "(e.g. --rerun all --reason \"shifts moved to 07:00 by J. Rivera\")")
    return reason.strip()


def _everything(con: duckdb.DuckDBPyConnection) -> tuple[dt.datetime, dt.datetime] | None:
    """--rerun all: a window over every round in the database."""
    first, last = con.execute(
        "SELECT min(ts), max(ts) FROM events WHERE type = 'round_start'").fetchall()[0]
    return None if first is None else (first, last + dt.timedelta(seconds=1))


def _days(rerun: str | None) -> tuple[dt.date, dt.date] | None:
    """--rerun DAY or FROM..TO as (first, last) gaming day."""
    if not rerun:
        return None
    first, _, last = rerun.partition("..")
    days = cfg.parse_date(first), cfg.parse_date(last or first)
    if days[1] < days[0]:
        raise UserError(
            f"--rerun {rerun}: the range ends before it starts; "
            f"write it FROM..TO, like {days[1]}..{days[0]}"
        )
    return days


def _print(result: AuditResult) -> None:
    from auditor.audit.run import LATER_PASSES

    out = console.out
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
    console.not_audited(result.skipped)
