"""`bacc-audit report`: the audit report of a shift or gaming day, as PDF or HTML
(auditor.report)."""

from __future__ import annotations

import json
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from auditor import config as cfg
from auditor.cli import console
from auditor.cli.options import ConfigOption, DbOption, JsonOption
from auditor.cli.progress import progress_for
from auditor.errors import WRITE_ERRNOS, UserError, cannot_write
from auditor.store import db, filters


class ReportFormat(StrEnum):
    pdf = "pdf"
    html = "html"


SUFFIX_FORMATS = {".pdf": "pdf", ".html": "html", ".htm": "html"}


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
            "--out",
            help="Output file, or a folder to write DAY_SHIFT[_PIT][_TABLE].pdf into "
            "(default: reports/out/).",
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
    as_json: JsonOption = False,
    db_path: DbOption = None,
    config_path: ConfigOption = None,
) -> None:
    """Render the audit report of a shift (or gaming day) as PDF or HTML.

    Give --shift or --date, not both. The format follows the --out file's suffix unless
    --format says it; a suffix that contradicts --format is refused.

    The PDF carries a cover with the rule packs and tool version, a summary of findings,
    hold against theoretical hold per table, the procedures in force with their notices,
    every finding with its citation, cards and source line, a sign-off block, and the
    findings attached as JSONL and CSV. The same database and arguments give the same bytes,
    but for the signature: with a [signing] key in the property config the PDF is signed
    (PAdES-B-B); without one its cover says it is unsigned.

    Progress (gather, render, write) goes to stderr: a bar on a terminal; elsewhere (cron),
    once the work has taken 30 s, a line every 10% or 30 s. Stdout is the file's path alone
    (with --json: the path, whether it is signed, and the filed versions of the gaming day
    that no sign-off names); those unsigned versions are also listed on stderr.
    """
    from auditor.jobs import verify as verifying
    from auditor.report.gather import scope_for
    from auditor.report.render import write_report
    from auditor.store import signoffs

    if shift and date:
        raise UserError("give --shift (one shift) or --date (the whole gaming day), not both")
    chosen = _report_format(out_path, fmt)
    conf = cfg.load(config_path)
    con = db.connect(db_path or db.default_db_path(), read_only=True)
    try:
        filters.validate(con, [], table, pit)  # a typo is not "no rounds in the shift"
        scope = scope_for(conf, con, shift=shift, date=date, pit=pit, table=table)
        check, said = verifying.report_check(con)
        with progress_for(console.err, "report", bar=console.err.is_terminal) as progress:
            path = write_report(con, conf, scope, out_path, chosen, progress, check)
        unsigned = signoffs.unsigned(con, scope.slug[:10])  # the slug starts with the day
    except OSError as e:
        if e.errno not in WRITE_ERRNOS:
            raise
        raise cannot_write(
            out_path or "reports/out", e, "choose another --out, or make that folder writable"
        ) from None
    finally:
        con.close()
    if _is_stdout(path):
        pass  # the report is this process's output: its path (or JSON) after it would spoil it
    elif as_json:
        console.out.print_json(json.dumps({
            "path": str(path),
            "format": chosen,
            "signed": chosen == "pdf" and conf.signing is not None,
            "unsigned_versions": unsigned,
        }))
    else:
        console.out.print(str(path))
    console.err.print(said, markup=False, highlight=False)  # once the report is written
    if unsigned:
        console.err.print(
            f"sign-off, gaming day {scope.slug[:10]}: {signoffs.unsigned_sentence(unsigned)}"
        )


def _is_stdout(path: Path) -> bool:
    """Whether the report went to this process's standard output (`--out /dev/stdout`):
    then its path after it would spoil the file."""
    try:
        st, out = path.stat(), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError):
        return False
    return (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino)


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
