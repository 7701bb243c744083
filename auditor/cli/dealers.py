"""`bacc-audit dealers`: each dealer's error rate against the property's (auditor.audit.dealers,
docs/dealers.md)."""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import TYPE_CHECKING, Annotated

import duckdb
import typer
from rich.table import Table as RichTable

from auditor import config as cfg
from auditor.cli import console
from auditor.cli.options import ConfigOption, DbOption, Format, FormatOption
from auditor.config import PropertyConfig
from auditor.errors import UserError
from auditor.rules.codes import SEVERITIES
from auditor.store import db
from auditor.store.findings import csv_line
from auditor.words import count

if TYPE_CHECKING:  # the audit's modules load when the command runs, not at startup
    from auditor.audit.dealers import DealerRow, Window


def dealers_cmd(
    db_path: DbOption = None,
    fmt: FormatOption = Format.table,
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
    from auditor.audit import dealers

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
        window = _window(con, conf, shift, parsed_shift, parsed_date, span)
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
    _print_table(rows, window, unnamed)


def _window(
    con: duckdb.DuckDBPyConnection,
    conf: PropertyConfig,
    shift: str | None,
    parsed_shift: tuple[dt.date, str] | None,
    parsed_date: dt.date | None,
    span: tuple[dt.date, dt.date] | None,
) -> Window:
    """The period asked for, else all the database holds."""
    from auditor.audit.dealers import Window

    zone = conf.zone_for(con)
    if parsed_shift:
        return Window(shift or "", *conf.shift_window(*parsed_shift, zone))
    if parsed_date:
        return Window(f"{parsed_date}", *conf.gaming_day_window(parsed_date, zone))
    if span:
        start = conf.gaming_day_window(span[0], zone)[0]
        end = conf.gaming_day_window(span[1], zone)[1]
        return Window(f"{span[0]}..{span[1]}", start, end)
    first, last = con.execute(
        "SELECT min(ts), max(ts) FROM events WHERE type = 'round_start'"
    ).fetchall()[0]
    if first is None:
        first = last = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return Window("all", first, last + dt.timedelta(microseconds=1))


def _print_table(rows: list[DealerRow], window: Window, unnamed: int) -> None:
    t = RichTable(show_lines=False)
    for col in ("dealer", "rounds", "error rounds", "per 1,000", "limit per 1,000",
                "above limit", "flagged", *SEVERITIES):
        t.add_column(col, justify="left" if col == "dealer" else "right")
    for r in rows:
        t.add_row(r.dealer, f"{r.rounds:,}", f"{r.error_rounds:,}", f"{r.rate * 1000:.1f}",
                  f"{r.upper * 1000:.1f}", "above" if r.above else "",
                  "FLAGGED" if r.flagged else "",
                  *(str(r.findings.get(s, 0)) for s in SEVERITIES))
    wide = console.wide(120)
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
    unlikely = sum(1 for r in rows if r.above and not r.flagged)
    if unlikely:
        wide.print(
            f"{count(unlikely, 'dealer')} above the limit but not flagged: too few rounds for "
            "that many error rounds to be unlikely at p̄ (the binomial tail is above 0.135%, "
            "the flag's second rule; docs/dealers.md)"
        )
    if unnamed:
        wide.print(f"{count(unnamed, 'round')} name no dealer and are left out")
