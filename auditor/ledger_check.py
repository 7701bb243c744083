"""Check a filed report by itself, with no database: every finding its findings.jsonl
attaches is a leaf of the ledger tree whose head (size, root) the report prints on its cover
and attaches as ledger.json, and says what the report says of it.

    python -m auditor.ledger_check REPORT.pdf [REPORT.pdf ...]

Exit 0 when every report holds, 1 when anything does not (each problem a line), 2 when a
file cannot be read as a report. Needs only auditor/merkle.py and pypdf (docs/ledger.md).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor import merkle

HEAD_FORMAT = "bacc-audit ledger head 1"
COVER_HEAD = re.compile(r"Ledger head:\s*size\s*([\d,]+)\s*,?\s*root\s*([0-9a-f\s]{64,80})")
# A finding's record (findings format v1) and the leaf it carries: the fields both hold.
SAME = (("fingerprint", "fingerprint"), ("code", "code"), ("severity", "severity"),
        ("table", "table_id"), ("pit", "pit"), ("shoe", "shoe"), ("round", "round"),
        ("seq", "seq"), ("rule", "rule"), ("message", "message"), ("source", "source"),
        ("dealer", "dealer"))


class Unreadable(Exception):
    """Not a report this check can read (exit 2)."""


@dataclass
class Report:
    path: Path
    head: dict[str, Any]
    findings: list[dict[str, Any]]
    cover: tuple[int, str] | None  # (size, root) as printed on page 1


@dataclass
class Checked:
    path: Path
    size: int = 0
    root: str = ""
    proven: int = 0
    unsealed: int = 0
    problems: list[str] = field(default_factory=list)


def read_report(path: Path) -> Report:
    """The ledger head, the findings and the head printed on the cover of a report PDF."""
    try:
        from pypdf import PdfReader

        reader = PdfReader(str(path))
        files = reader.attachments
        cover_text = reader.pages[0].extract_text() if reader.pages else ""
    except Exception as e:  # pypdf raises many kinds for a file that is no PDF
        raise Unreadable(f"{path}: not a readable PDF ({e})") from None
    if "ledger.json" not in files or "findings.jsonl" not in files:
        raise Unreadable(
            f"{path}: no ledger.json or findings.jsonl attached; a report filed before the "
            "ledger carries no head to check"
        )
    try:
        head = json.loads(files["ledger.json"][0])
        found = [json.loads(line) for line in files["findings.jsonl"][0].splitlines() if line]
    except ValueError as e:
        raise Unreadable(f"{path}: an attachment is not JSON ({e})") from None
    m = COVER_HEAD.search(cover_text or "")
    cover = (int(m.group(1).replace(",", "")), re.sub(r"\s", "", m.group(2))[:64]) if m else None
    return Report(path, head, found, cover)


def _same_time(leaf_ts: Any, shown: Any) -> bool:
    if leaf_ts is None or shown is None:
        return leaf_ts == shown
    try:
        a = dt.datetime.fromisoformat(str(leaf_ts).replace("Z", "+00:00"))
        b = dt.datetime.fromisoformat(str(shown))
    except ValueError:
        return False
    return abs((a - b).total_seconds()) < 0.001  # the export shows milliseconds


def finding_differs(leaf: dict[str, Any], record: dict[str, Any]) -> list[str]:
    """The fields where a finding's record says something else than its leaf."""
    out = [mine for mine, theirs in SAME if record.get(mine) != leaf.get(theirs)]
    for name in ("expected", "observed"):
        text = leaf.get(name)
        if (json.loads(text) if text is not None else None) != record.get(name):
            out.append(name)
    if not _same_time(leaf.get("ts"), record.get("ts")):
        out.append("ts")
    if leaf.get("status") != "open" or leaf.get("kind") != "finding":
        out.append("status")
    return out


def check_report(report: Report) -> Checked:
    """Every attached finding against the printed head: its leaf's bytes hash into the root
    by its proof, and say what the record says."""
    head = report.head
    got = Checked(report.path)
    if head.get("format") != HEAD_FORMAT:
        got.problems.append(f"ledger.json is not {HEAD_FORMAT!r}")
        return got
    got.size, got.root = int(head["size"]), str(head["root"])
    if report.cover is None:
        got.problems.append("the cover prints no ledger head")
    elif report.cover != (got.size, got.root):
        got.problems.append(
            f"the cover prints head size {report.cover[0]} root {report.cover[1]}, the "
            f"attached ledger.json size {got.size} root {got.root}")
    root = bytes.fromhex(got.root)
    for record in report.findings:
        entry = record.get("ledger")
        name = record.get("id") or record.get("fingerprint")
        if entry is None:
            got.unsealed += 1
            continue
        data = str(entry["leaf"]).encode()
        proof = [bytes.fromhex(h) for h in entry["proof"]]
        if int(entry["tree_size"]) != got.size:
            got.problems.append(f"finding {name}: its proof is for another tree size")
        elif not merkle.verify_inclusion(int(entry["index"]), got.size, merkle.leaf_hash(data),
                                         proof, root):
            got.problems.append(
                f"finding {name}: leaf {entry['index']} and its proof do not give the root "
                "printed")
        else:
            differs = finding_differs(json.loads(data), record)
            if differs:
                got.problems.append(
                    f"finding {name}: the report shows {', '.join(differs)} other than its "
                    f"sealed leaf {entry['index']}")
            else:
                got.proven += 1
    return got


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else 2
    code = 0
    for name in args:
        try:
            checked = check_report(read_report(Path(name)))
        except Unreadable as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if checked.problems:
            code = 1
            for p in checked.problems:
                print(f"{name}: FAIL: {p}")
        else:
            extra = f"; {checked.unsealed} not sealed yet when it was made" \
                if checked.unsealed else ""
            print(f"{name}: OK: {checked.proven} findings are leaves of the ledger head it "
                  f"prints (size {checked.size}, root {checked.root}){extra}")
    return code


if __name__ == "__main__":
    sys.exit(main())
