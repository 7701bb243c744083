"""`bacc-audit findings`: the standing findings, filtered (auditor.store.filters), as findings
format v1 (auditor.store.findings)."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.table import Table as RichTable

from auditor import config as cfg
from auditor.cli import console
from auditor.cli.options import ConfigOption, DbOption, Format, FormatOption
from auditor.rules.codes import check_severity
from auditor.store import db, filters, findings
from auditor.words import count


def findings_cmd(
    db_path: DbOption = None,
    fmt: FormatOption = Format.table,
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
    if severity:
        check_severity(severity, "--severity")
    conf = cfg.load(config_path)
    con = db.connect(db_path or db.default_db_path(), read_only=True)
    try:
        filters.validate(con, code or [], table, pit)
        zone = conf.zone_for(con)
        window = filters.window_of(conf, zone, shift=shift, date=date)
        rows = findings.select(
            con, table=table, pit=pit, codes=code, min_severity=severity, window=window,
            zone=zone, dealer=True,
        )
    finally:
        con.close()
    if fmt is Format.jsonl:
        for r in rows:
            sys.stdout.write(json.dumps(r, separators=(",", ":")) + "\n")
    elif fmt is Format.csv:
        findings.write_csv(sys.stdout, rows)
    else:
        _print_table(rows)


def _print_table(rows: list[dict]) -> None:
    t = RichTable(show_lines=False)
    for col in ("id", "time", "severity", "code", "table", "shoe/round", "message"):
        t.add_column(col, no_wrap=col == "id")
    for r in rows:
        where = (r["shoe"] or "") + (f" r{r['round']}" if r["shoe"] and r["round"] is not None
                                     else "")
        t.add_row(
            r["id"],
            r["ts"][:19].replace("T", " "),
            r["severity"],
            r["code"],
            r["table"] or r["pit"] or "",
            where,
            r["message"],
        )
    wide = console.wide(160)
    wide.print(t)
    wide.print(count(len(rows), "finding"))
