"""`bacc-audit verify`: the ledger recomputed from the records (auditor/jobs/verify.py,
docs/ledger.md), and filed reports held against the database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from auditor import config as cfg
from auditor.cli import console
from auditor.cli.options import ConfigOption, DbOption, JsonOption
from auditor.errors import EXIT_FINDINGS, EXIT_OK, UserError
from auditor.jobs import verify as verifying
from auditor.ledger_check import Unreadable
from auditor.report import signing
from auditor.store import db, runs
from auditor.store.ledger_verify import Problem

SHOWN = 20  # problems listed; `--json` has them all as read


def verify_cmd(
    against: Annotated[
        list[Path] | None,
        typer.Option(
            "--against",
            help="A filed report (PDF) or an archive folder of them: prove the database "
            "still holds what each showed. May be given more than once.",
            show_default=False,
        ),
    ] = None,
    fast: Annotated[
        bool,
        typer.Option(
            "--fast",
            help="Only the fast check of doctor, nightly and report: events read again "
            "only for the pieces sealed since the last verified head.",
        ),
    ] = False,
    trust_root: Annotated[
        Path | None,
        typer.Option(
            "--trust-root",
            help="Certificates (PEM or DER) a filed report's signature must chain to "
            "(default: [signing] trust_root of the property config, else the certificate "
            "the PDF carries).",
            show_default=False,
        ),
    ] = None,
    config_path: ConfigOption = None,
    db_path: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Recompute the ledger from the records and name the first record that differs, is
    missing or was inserted (table, id, the field that changed); exit 1 when anything does
    not hold, 0 when all holds.

    Every leaf is recomputed from its record (a piece of a log file from its event and
    quarantine rows, every event's columns read again from its line), every record is
    looked for in the ledger, and every head is recomputed from the leaves. A check that
    finds everything as sealed is recorded: the fast check of `doctor`, `nightly` and
    `report` starts from it. With --against, each filed report's findings must still be
    the leaves of the ledger head it prints, and the first leaves of the database's ledger
    must still give that head's root, so a database rewritten since is caught; a signed
    report's signature must hold (an unsigned one is said, not failed).
    """
    pdfs = verifying.reports_in(against or [])
    missing = [p for p in pdfs if not p.is_file()]
    if missing:
        raise UserError(f"{missing[0]}: no such report (give a PDF or an archive folder)")
    if against and not pdfs:
        raise UserError(f"{against[0]}: no report PDF in this folder")
    if pdfs and trust_root is None:
        signing_conf = cfg.load(config_path).signing
        trust_root = signing_conf.trust_root if signing_conf else None
    path = db_path or db.default_db_path()
    db.require_database(path)  # not an empty new database "verified"
    con = db.connect(path, small_writes=True)
    try:
        with runs.recorded(con, "verify", {"against": [str(p) for p in pdfs],
                                           "fast": fast}) as run:
            v = verifying.verify(con, fast=fast)
            filed: list[dict[str, Any]] = []
            report_problems: list[Problem] = []
            for pdf in pdfs:
                try:
                    alone, signed, problems = verifying.against(con, pdf, trust_root)
                except Unreadable as e:
                    raise UserError(str(e)) from None
                report_problems += problems
                filed.append({"report": str(pdf), "size": alone.size, "root": alone.root,
                              "findings_proven": alone.proven, "ok": not problems,
                              "problems": [p.sentence() for p in problems],
                              "signature": signed.as_dict(),
                              "signature_says": signed.sentence()})
            verifying.record(con, v, run.id)
            code = EXIT_OK if v.ok and not report_problems else EXIT_FINDINGS
            summary = _summary(v, filed, report_problems)
            run.done(code, summary)
    finally:
        con.close()
    if as_json:
        console.out.print_json(json.dumps(summary, default=str))
    else:
        _say(v, filed, report_problems)
    raise typer.Exit(code)


def _summary(
    v: verifying.Verification, filed: list[dict[str, Any]], report_problems: list[Problem]
) -> dict[str, Any]:
    return {
        "ok": v.ok and not report_problems,
        "mode": v.mode,
        "size": v.size,
        "root": v.root,
        "verified_from": v.start,
        "leaves_checked": v.leaves,
        "pieces_read": v.pieces_read,
        "problems": [p.sentence() for p in v.problems],
        "problems_not_listed": v.more,
        "not_sealed_yet": {str(r): n for r, n in sorted(v.pending.items())},
        "reports": filed,
    }


def _say(
    v: verifying.Verification, filed: list[dict[str, Any]], report_problems: list[Problem]
) -> None:
    out = console.out
    out.print(v.headline(), markup=False, highlight=False)
    for p in v.problems[1:SHOWN]:
        out.print(f"  {p.sentence()}", markup=False, highlight=False)
    rest = v.total - min(len(v.problems), SHOWN)
    if rest > 0:
        out.print(f"  ... and {rest} more (`--json` lists those read)", markup=False)
    if not v.no_ledger:
        out.print(f"head: size {v.size}, root {v.root}", markup=False, highlight=False)
    for f in filed:
        if f["ok"]:
            out.print(f"{f['report']}: holds: its {f['findings_proven']} findings are still "
                      f"the leaves of its head (size {f['size']}, root {f['root']})",
                      markup=False, highlight=False)
        else:
            for sentence in f["problems"]:
                out.print(f"{f['report']}: FAILED: {sentence}", markup=False, highlight=False)
        if f["signature"]["ok"] or f["signature"]["problem"] == signing.NO_SIGNATURE:
            out.print(f["signature_says"], markup=False, highlight=False)  # else FAILED above
