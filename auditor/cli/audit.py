"""`bacc-audit audit`: replay the ingested rounds and record their deviations
(auditor.audit.run)."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Annotated

import typer

from auditor import config as cfg
from auditor.cli import console
from auditor.cli.options import ConfigOption, DbOption, FailOnOption, JsonSummaryOption
from auditor.cli.progress import progress_for
from auditor.errors import UserError
from auditor.rules.codes import at_least
from auditor.store import db, outcome, runs
from auditor.words import count

if TYPE_CHECKING:  # the audit's modules load when the command runs, not at startup
    from auditor.audit.run import AuditResult


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
    fail_on: FailOnOption = "major",
    as_json: JsonSummaryOption = False,
) -> None:
    """Replay every ingested round not yet audited and record its deviations.

    Each round is re-derived from its cards under the table's rule pack: the deal, the
    third-card draws, the result and announcements, the settlement of every wager, the
    vigorish, and the order of collections, payments and vigorish against the procedure in
    force. Rerunning adds no duplicate findings.

    Progress goes to stderr: a bar on a terminal (not with --json); elsewhere (cron), once the
    work has taken 30 s, a line every 10% or 30 s.
    """
    from auditor.audit.run import audit

    graver = at_least(fail_on)
    conf = cfg.load(config_path)
    days = _days(rerun)
    path = db_path or db.default_db_path()
    db.require_database(path)
    con = db.connect(path)
    try:
        window = None
        if days:
            zone = conf.zone_for(con)
            window = (conf.gaming_day_window(days[0], zone)[0],
                      conf.gaming_day_window(days[1], zone)[1])
        with runs.recorded(con, "audit", {"rerun": rerun, "config": conf.source}) as run:
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
