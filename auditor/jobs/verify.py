"""Verifying the ledger (docs/ledger.md): the whole of it (`bacc-audit verify`), or the fast
check from the last verified head that `doctor`, `nightly` (before it files) and `report`
run; and a filed report, or an archive of them, against the database (`--against`).

The fast check recomputes every leaf but a piece's digests from the records (a finding,
an acknowledgement, a run ... changed, removed or added is caught wherever it is), counts
every source's event and quarantine rows, recomputes the digests of the pieces sealed since
the last verified head, reads again from their lines the events of the rounds whose
findings were withdrawn since, and recomputes the heads since that one. What it leaves to
the whole check: an event edited in place that no audit has acted on yet, or in a piece
verified before, and a leaf hash of the ledger rewritten together with its record.
"""

from __future__ import annotations

import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from auditor import ledger_check
from auditor.errors import UserError
from auditor.ingest import reparse
from auditor.report import signing
from auditor.store import ledger
from auditor.store import ledger_verify as lv
from auditor.store.ledger_verify import Problem
from auditor.words import count


@dataclass
class Verification:
    mode: str  # full | fast
    size: int = 0
    root: str = ""
    peaks: str = "[]"
    start: int = 0  # the fast check took the leaves before this as verified
    problems: list[Problem] = field(default_factory=list)
    more: int = 0
    pending: dict[int, int] = field(default_factory=dict)
    leaves: int = 0
    pieces_read: int = 0
    no_ledger: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def total(self) -> int:
        return len(self.problems) + self.more

    @property
    def how(self) -> str:
        if self.mode == "full":
            return f"whole ledger checked, {count(self.size, 'leaf', 'leaves')}"
        if not self.start:
            return (f"fast check of all {count(self.size, 'leaf', 'leaves')}; no whole check "
                    "on record: `bacc-audit verify` reads every line again")
        return (f"fast check from the head verified at {count(self.start, 'leaf', 'leaves')}, "
                f"{count(self.size, 'leaf', 'leaves')} now")

    def headline(self) -> str:
        if self.no_ledger:
            return "no ledger yet: the next run that writes seals what the database holds"
        if self.ok:
            note = ""
            if self.pending:
                runs = ", ".join(f"run {r}" for r in sorted(self.pending))
                rows = count(sum(self.pending.values()), "record")
                note = (f"; {rows} of {runs} not sealed yet (a run still going, or "
                        "killed: the next run seals them)")
            return f"ledger verified: every record as sealed ({self.how}){note}"
        return f"ledger FAILED: {self.problems[0].sentence()}"

    def cover(self) -> dict[str, Any]:
        """What the report's cover and its ledger.json say of this check: whether it held,
        and the first problem. Not how far it read (that moves with every run): an
        unchanged database renders the same report."""
        return {
            "ok": self.ok,
            "first": self.problems[0].sentence() if self.problems else None,
            "problems": self.total,
        }


def verify(con: duckdb.DuckDBPyConnection, *, fast: bool = False) -> Verification:
    """Recompute the ledger from the records (`fast`: from the last verified head, see the
    module's docstring). Reads only: temp tables of its own aside."""
    v = Verification("fast" if fast else "full")
    if ledger.latest_head(con) is None:
        v.no_ledger = True
        return v
    # With no check on record the fast check starts at the first leaf: every record and
    # piece as the fast check takes new ones, but not every line read again, which costs
    # ingest's parsing (48 CPU-minutes on the 10M-round day) and would fall on every report
    # of a database nobody has run `verify` on.
    start = lv.recorded_check(con) if fast else None
    v.start = start.size if start else 0
    tree = lv.check_tree(con, start)
    v.size, v.root, v.peaks = tree.size, tree.root, tree.peaks
    found = lv.Found(problems=list(tree.problems))
    v.pieces_read = lv.piece_scope(con, v.start)
    found.add(lv.check_records(con))
    found.add(lv.check_rows(con))
    found.add(lv.check_derived(con, v.start))
    found.add(lv.check_set_logs(con))
    found.add(lv.check_shoe_index(con, v.start))
    found.add(lv.check_stream_sources(con))
    for sid, line, col, stored, read in _reread(con, v.start, v.mode == "full")[0]:
        found.problems.append(Problem(
            "changed", "events", f"source {sid} line {line}",
            f"its column {col} holds {stored!r}, its line says {read!r} (an event edited in "
            "place)"))
    v.problems = sorted(found.problems, key=Problem.order)
    v.more, v.pending, v.leaves = found.more, found.pending, found.leaves
    return v


def report_check(con: duckdb.DuckDBPyConnection) -> tuple[dict[str, Any] | None, str]:
    """The fast check of the ledger before a report is rendered (`bacc-audit report`, the
    board's), for the cover (in red when the database fails it), and its headline. A reader
    beside `watch` that cannot make temp tables does not check: (None, why)."""
    try:
        v = verify(con, fast=True)
    except duckdb.Error as e:
        return None, f"ledger not checked: {str(e).splitlines()[0]}"
    return v.cover(), v.headline()


def _reread(
    con: duckdb.DuckDBPyConnection, start: int, everything: bool
) -> tuple[list[tuple[int, int, str, str | None, str | None]], int]:
    """The events whose columns are not what their line says: all of them, or (the fast
    check) those of the rounds whose findings were withdrawn since leaf `start`: an event
    edited in place shows by what the next audit withdraws, and reading every line again
    costs what ingest's per-line path costs, too much for every night."""
    if everything:
        return reparse.differing(con)
    return reparse.differing(
        con,
        "EXISTS (SELECT 1 FROM findings f JOIN ledger l ON l.kind = 'finding' AND "
        "l.record_key = CAST(f.id AS VARCHAR) AND l.idx >= "
        f"{int(start)} WHERE f.status = 'withdrawn' AND f.table_id = events.table_id AND "
        "f.shoe = events.shoe AND f.round = events.round)",
    )


def fast_check(con: duckdb.DuckDBPyConnection) -> tuple[bool, str, str]:
    """The fast check as a line of `doctor`, `report` and `nightly`: (held, what was found,
    what to do). A check that cannot run (a reader served beside `watch` may not make the
    temp tables it needs) says so, and counts as not failed."""
    try:
        v = verify(con, fast=True)
    except duckdb.Error as e:
        return True, f"ledger not checked here ({str(e).splitlines()[0]})", ""
    return v.ok, v.headline(), "run `bacc-audit verify` to list every record that differs"


def record(con: duckdb.DuckDBPyConnection, v: Verification, run_id: int) -> None:
    """Keep a check that found everything as sealed: the next fast check starts from it."""
    if v.ok and not v.no_ledger:
        lv.record_check(con, v.size, v.root, v.peaks, v.mode, run_id)


# --- filed reports --------------------------------------------------------------------------


def reports_in(paths: Iterable[Path]) -> list[Path]:
    """The PDFs named, and those under the folders named (an archive), in name order."""
    out: list[Path] = []
    for p in paths:
        try:
            folder = stat.S_ISDIR(p.stat().st_mode)
        except OSError as e:  # missing, a name too long for the system, no permission
            raise UserError(f"{p}: cannot be read ({e.strerror or e}); name a filed report "
                            "PDF or the archive folder") from None
        if folder:
            out += sorted(x for x in p.rglob("*.pdf") if not x.name.startswith("."))
        else:
            out.append(p)
    return out


def against(
    con: duckdb.DuckDBPyConnection, pdf: Path, trust_root: Path | None = None
) -> tuple[ledger_check.Checked, signing.SignatureStatus, list[Problem]]:
    """Whether the database still holds what the filed report `pdf` showed: the report by
    itself (its findings are leaves of the head it prints), its signature (pyHanko's check,
    against `trust_root` when given: a signed PDF whose signature fails is a problem; an
    unsigned one is said, not failed, as a property without a key files them), the first
    `size` leaves of the ledger give its root, and each finding it shows is still its leaf
    and its record. Raises ledger_check.Unreadable for a file that is not such a report."""
    report = ledger_check.read_report(pdf)
    alone = ledger_check.check_report(report)
    name = pdf.name
    problems = [Problem("report", name, "", p) for p in alone.problems]
    signed = signing.signature_status(pdf, trust_root)
    if signed.problem and signed.problem != signing.NO_SIGNATURE:
        problems.append(Problem("report", name, "signature", signed.problem))
    size, root = alone.size, alone.root
    held = int(con.execute("SELECT count(*) FROM ledger").fetchall()[0][0]) \
        if ledger.has_ledger(con) else 0
    if size > held:
        problems.append(Problem(
            "report", name, "",
            f"it prints a ledger of {size} leaves; this database holds {held}: its ledger "
            "was cut or rewritten since the report was filed"))
        return alone, signed, problems
    if size and ledger.Subtrees(con)(0, size).hex() != root:
        problems.append(Problem(
            "report", name, "",
            f"the first {size} leaves of this database's ledger do not give the root the "
            f"report prints ({root[:16]}...): the records it rests on were rewritten since"))
    entries = [(f, f["ledger"]) for f in report.findings if f.get("ledger")]
    data = ledger.leaf_data(con, [int(e["index"]) for _, e in entries])
    for f, e in entries:
        if data.get(int(e["index"])) != e["leaf"]:
            problems.append(Problem(
                "report", name, f"finding {f.get('id')}",
                f"leaf {e['index']} of this database is not the finding the report shows"))
    return alone, signed, problems
