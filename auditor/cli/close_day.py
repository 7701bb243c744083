"""`bacc-audit close-day DATE`: record by hand that a gaming day is over, so that the tables
whose logs stop in it are judged (log.table_unclosed, log.shoe_unfinished) at the next audit
(auditor.store.closed_days).

`nightly` closes the day it reports and `watch` the day before the one under way; this is for
the rest: a day audited with `ingest` and `audit` by hand, or one whose last tables closed
before the next day's first event came in. A small record: it is written through a `watch`
that owns the database, as an acknowledgement is.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from auditor import config as cfg
from auditor.cli import console
from auditor.cli.options import ConfigOption, DbOption, JsonOption
from auditor.errors import EXIT_OK, UserError
from auditor.store import closed_days, db, runs


def close_day_cmd(
    date: Annotated[str, typer.Argument(metavar="DATE", help="The gaming day, like 2026-11-28.")],
    as_json: JsonOption = False,
    db_path: DbOption = None,
    config_path: ConfigOption = None,
) -> None:
    """Record that gaming day DATE is over: the next audit (or watch's next sweep) judges the
    ends of its tables' logs, and its report shows a table whose log stops without its close.

    A day is closed once, on record (who closed it, when, by which run); closing it again
    says so and records nothing. A day not over yet by the property's gaming day (config
    `gaming_day_start`, in its time zone) is refused.

    Exit codes: 0 closed, or closed already; 2 a day not over, or a bad date; 4 database
    busy.
    """
    conf = cfg.load(config_path)
    day = cfg.parse_date(date)
    con = db.connect(db_path or db.default_db_path(), small_writes=True)
    try:
        zone = conf.zone_for(con)
        early = closed_days.not_over(conf, day, zone)
        if early is not None:
            raise UserError(f"gaming day {day:%Y-%m-%d} is {early}: it cannot be closed before "
                            "it ends (every table still open would read as a log that stops)")
        before = closed_days.closed_days(con).get(day)
        if before is None:
            with runs.recorded(con, "close-day", {"date": f"{day:%Y-%m-%d}"}) as run:
                closed_days.close(con, [day], run.id, "close-day")
                run.done(EXIT_OK, {"gaming_day": f"{day:%Y-%m-%d}"})
            record = closed_days.closed_days(con)[day]
        else:
            record = before
    finally:
        con.close()
    at = record.closed_at.astimezone(zone)
    summary = {"gaming_day": f"{day:%Y-%m-%d}", "closed_now": before is None,
               "how": record.how, "run_id": record.run_id, "closed_at": at.isoformat()}
    if as_json:
        console.out.print_json(json.dumps(summary))
    elif before is None:
        console.out.print(
            f"gaming day {day:%Y-%m-%d} closed (run {record.run_id}); the next audit judges "
            "the ends of its tables' logs"
        )
    else:
        console.out.print(
            f"gaming day {day:%Y-%m-%d} was closed already, by {record.how} (run "
            f"{record.run_id}) at {at:%Y-%m-%d %H:%M %Z}; nothing recorded"
        )
