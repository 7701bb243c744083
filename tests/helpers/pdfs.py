"""A filed report's words, to compare two databases' reports of the same logs: the time of
generation and each database's own ledger lines taken out (tests/jobs/test_backfill.py,
tests/jobs/test_filing.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pypdf


def pdf_text(path: Path) -> str:
    """The PDF's text, its whitespace runs made one space."""
    text = "\n".join(p.extract_text() for p in pypdf.PdfReader(path).pages)
    return re.sub(r"\s+", " ", text)


def without_generation_time(text: str) -> str:
    """The cover's "Generated <time> (time of the last change to the audit database)" with
    its time taken out, and its ledger lines (each database's own ledger: docs/ledger.md);
    each must be there, once."""
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z+\-0-9:]+)?"
    out, n = re.subn(rf"Generated {stamp} \(", "Generated (", text)
    assert n == 1, text[:2000]
    out, n = re.subn(r" Ledger .*? Needs action ", " Needs action ", out, count=1)
    assert n == 1, out[:2000]
    # The lines of each database's ledger are not as long: the page ends fall elsewhere.
    out = re.sub(r" ?bacc-audit \S+ · [^…]*…", "", out)
    return re.sub(r" ?page \d+ of \d+", "", out)
