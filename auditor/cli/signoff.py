"""`bacc-audit signoff`: record who signed off which filed version of a report, and list the
sign-offs (auditor.store.signoffs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from auditor.cli import console
from auditor.cli.options import DbOption, JsonOption
from auditor.errors import UserError
from auditor.store import db
from auditor.store.stamps import refuse_impossible_stamps


def signoff_cmd(
    pdf: Annotated[
        str | None,
        typer.Argument(
            metavar="REPORT.pdf",
            help="The filed PDF signed off (as the archive holds it), or `list` to list every "
            "sign-off.",
        ),
    ] = None,
    by: Annotated[str | None, typer.Option("--by", help="Who signs off.")] = None,
    title: Annotated[
        str | None, typer.Option("--title", help="Their title, e.g. 'Compliance Officer'.")
    ] = None,
    note: Annotated[str, typer.Option(help="Anything the next reader needs.")] = "",
    as_json: JsonOption = False,
    db_path: DbOption = None,
) -> None:
    """Record that a person signed off a filed version of a report (append-only); `signoff
    list` lists the sign-offs.

    The version is named by the PDF's bytes: its SHA-256 must be that of a version the
    nightly job filed into its archive (a PDF not filed, or changed since, is refused with
    exit 2). The next version of the same report lists the sign-offs of the versions before
    it on its first page; `report` and `nightly` list the filed versions still unsigned.
    """
    from auditor.ingest.reader import sha256_of
    from auditor.store import signoffs

    path = db_path or db.default_db_path()
    if pdf == "list":
        if by or title or note:
            raise UserError("signoff list takes no --by, --title or --note")
        con = db.connect(path, read_only=True)
        try:
            refuse_impossible_stamps(con, tables={"signoffs"})  # exit 2 naming the row
            rows = [signoffs.as_dict(s) for s in signoffs.list_signoffs(con)]
        finally:
            con.close()
        console.records(rows, as_json, _signoff_line, "sign-off")
        return
    if not pdf or by is None or title is None:
        raise UserError(
            "give the PDF and who signs it off: bacc-audit signoff REPORT.pdf --by NAME "
            "--title TITLE [--note TEXT] (or bacc-audit signoff list)"
        )
    if not path.exists():  # a sign-off needs the database that filed the version
        raise UserError(
            f"{path}: no audit database here; give --db (or BACC_AUDIT_DB) the database "
            "whose nightly job filed the report"
        )
    file = Path(pdf)
    try:
        sha = sha256_of(file)[0]
    except FileNotFoundError:
        raise UserError(f"{pdf}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{pdf}: is a folder; name the filed PDF signed off") from None
    except OSError as e:
        raise UserError(f"{pdf}: cannot read it ({e.strerror})") from None
    con = db.connect(path, small_writes=True)  # through the owner, if one writes now
    try:
        s = signoffs.sign_off(con, sha, pdf, by=by, title=title, note=note)
    finally:
        con.close()
    if as_json:
        console.out.print_json(json.dumps(signoffs.as_dict(s)))
        return
    console.out.print(
        f"signoff {s.id}: {s.slug} version {s.version} (SHA-256 {s.sha256}) signed off by "
        f"{s.signer}, {s.title}"
    )


def _signoff_line(row: dict[str, Any]) -> str:
    when, note = console.entered(row)
    return (
        f"signoff {row['id']} {when}  {row['slug']} v{row['version']}  {row['sha256']}\n"
        f"    by {row['by']}, {row['title']}{note}"
    )
