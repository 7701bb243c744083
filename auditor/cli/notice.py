"""`bacc-audit notice`: enter and list procedure notices given outside the logs (a letter to the
Division, an e-mail to surveillance), so the notice checks count them at the next audit.

Registered in auditor.cli.app with `app.add_typer(notice_app, name="notice")`; a thin skin over
auditor.store.notices.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table as RichTable

from auditor.store import db, notice_entry, notices
from auditor.store.stamps import refuse_impossible_stamps
from auditor.words import count

notice_app = typer.Typer(
    help="Procedure notices entered by hand (written notices the logs do not carry).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False, soft_wrap=True)

DbOption = Annotated[
    Path | None,
    typer.Option("--db", envvar="BACC_AUDIT_DB",
                 help="Audit database file (default: ./bacc-audit.duckdb).", show_default=False),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", envvar="BACC_AUDIT_CONFIG",
                 help="Property config (its time zone reads times given without an offset).",
                 show_default=False),
]


class Recipient(StrEnum):
    division = "division"
    surveillance = "surveillance"


@notice_app.command("add")
def add_cmd(
    pit: Annotated[str, typer.Option(help="The pit the notice is for.")],
    procedure: Annotated[int, typer.Option(min=1, max=4, help="The procedure (1-4) noticed.")],
    effective: Annotated[str, typer.Option(help="When the procedure takes effect.")],
    recipient: Annotated[
        list[Recipient],
        typer.Option(help="division or surveillance (repeat for both: one notice each)."),
    ],
    given_at: Annotated[str, typer.Option("--given-at", help="When the notice was given.")],
    by: Annotated[str, typer.Option("--by", help="Who enters it (name or employee id).")],
    tables: Annotated[
        str | None, typer.Option(help="Only these tables, comma separated (default: the pit).")
    ] = None,
    not_written: Annotated[
        bool, typer.Option("--not-written", help="The notice was not in writing.")
    ] = False,
    note: Annotated[str, typer.Option(help="Where the notice is kept, why entered.")] = "",
    late: Annotated[
        bool,
        typer.Option("--late", help="Record a notice given after the time it announces (it is "
                     "then judged late)."),
    ] = False,
    db_path: DbOption = None,
    config_path: ConfigOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the stored notices.")] = False,
) -> None:
    """Record a notice given outside the logs; the next audit counts it (and withdraws the
    notice findings it answers).

    The pit (and any --tables) must be in the logs or the property config. A notice given
    after the time it announces is refused unless --late. Times: RFC 3339 with an offset, or
    a local date and time read in the property's time zone (config), else at the offset the
    logs carry; a local time that a change of daylight saving time makes ambiguous or skips
    is refused: give it with its offset ("2026-11-01 01:40-05:00").
    """
    from auditor import config as cfg

    conf = cfg.load(config_path)
    con = db.connect(db_path or db.default_db_path(), small_writes=True)
    try:
        zone = conf.zone_for(con)
        stored = notice_entry.enter(
            con, zone, pit=pit, procedure=procedure, effective=effective,
            recipients=[str(r) for r in recipient], given_at=given_at, by=by, tables=tables,
            written=not not_written, note=note, known=notice_entry.known_places(con, conf),
            late=late,
        )
    finally:
        con.close()
    if as_json:
        out.print_json(json.dumps([notices.as_dict(n) for n in stored]))
        return
    for n in stored:
        out.print(notice_entry.entered_sentence(n, zone))


@notice_app.command("list")
def list_cmd(
    db_path: DbOption = None,
    config_path: ConfigOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the notices entered by hand, oldest entry first."""
    from auditor import config as cfg

    conf = cfg.load(config_path)
    con = db.connect(db_path or db.default_db_path(), read_only=True)
    try:
        refuse_impossible_stamps(con, tables={"notices", "notice_withdrawals"})
        rows = notices.list_notices(con)
        gone = notices.withdrawals(con)
        zone = conf.zone_for(con)
    finally:
        con.close()
    if as_json:
        out.print_json(json.dumps([notices.as_dict(n, gone.get(n.id or 0)) for n in rows]))
        return
    t = RichTable(show_lines=False)
    for col in ("id", "pit", "tables", "procedure", "effective", "recipient", "written",
                "given at", "entered by", "note", "withdrawn"):
        t.add_column(col)
    for n in rows:
        w = gone.get(n.id or 0)
        t.add_row(
            str(n.id), n.pit, n.tables or "(pit)", str(n.procedure),
            f"{n.effective.astimezone(zone):%Y-%m-%d %H:%M}", n.recipient,
            "yes" if n.written else "NO", f"{n.given_at.astimezone(zone):%Y-%m-%d %H:%M}",
            n.entered_by, n.note,
            "" if w is None else f"by {w.withdrawn_by} "
            f"{w.withdrawn_at.astimezone(zone):%Y-%m-%d %H:%M}: {w.reason}",
        )
    Console(highlight=False, width=max(out.width, 140)).print(t)
    out.print(f"{count(len(rows), 'notice')} entered by hand")


@notice_app.command("withdraw")
def withdraw_cmd(
    notice_id: Annotated[int, typer.Argument(metavar="ID", help="The notice (notice list).")],
    by: Annotated[str, typer.Option("--by", help="Who withdraws it (name or employee id).")],
    reason: Annotated[str, typer.Option("--reason", help="Why it is withdrawn.")],
    db_path: DbOption = None,
    config_path: ConfigOption = None,
) -> None:
    """Withdraw a notice entered by hand: it stays on record with who withdrew it, when and
    why, and the next audit no longer counts it (its findings come back)."""
    from auditor import config as cfg

    conf = cfg.load(config_path)
    con = db.connect(db_path or db.default_db_path(), small_writes=True)
    try:
        w = notice_entry.withdraw(con, notice_id, by=by, reason=reason)
        sentence = notice_entry.withdrawn_sentence(w, conf.zone_for(con))
    finally:
        con.close()
    out.print(sentence)
