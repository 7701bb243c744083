"""`bacc-audit ack`: who reviewed a finding and what was decided, and the list of them
(auditor.store.acks)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from auditor.cli import console
from auditor.cli.options import DbOption, JsonOption
from auditor.errors import UserError
from auditor.store import db
from auditor.store.stamps import refuse_impossible_stamps


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
    as_json: JsonOption = False,
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
            refuse_impossible_stamps(con, tables={"acknowledgements"})
            rows = [acks.as_dict(a) for a in acks.list_acks(con)]
        finally:
            con.close()
        console.records(rows, as_json, _ack_line, "acknowledgement")
        return
    if not fingerprint or by is None or disposition is None:
        raise UserError(
            "give the finding and the review: bacc-audit ack ID|FINGERPRINT --by NAME "
            "--disposition TEXT [--note TEXT] (or bacc-audit ack list)"
        )
    db.require_database(path)
    con = db.connect(path, small_writes=True)  # through the owner, if one writes now
    try:
        a, status = acks.acknowledge(con, fingerprint, by=by, disposition=disposition,
                                     note=note)
        fingerprint = a.fingerprint
    finally:
        con.close()
    if as_json:
        console.out.print_json(json.dumps(acks.as_dict(a) | {"finding_status": status}))
        return
    later = " (the finding has since been withdrawn)" if status == "withdrawn" else ""
    console.out.print(f"ack {a.id}: {fingerprint} by {a.reviewer}: {a.disposition}{later}")


def _ack_line(row: dict[str, Any]) -> str:
    when, note = console.entered(row)
    return (
        f"ack {row['id']} {when}  {row['finding_id']}  {row['fingerprint']}\n"
        f"    by {row['by']}: {row['disposition']}{note}"
    )
