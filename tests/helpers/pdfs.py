"""A report's words for a test to look for: read by PDFium (pypdfium2), about twenty times
faster than pypdf, whose reading of the suite's reports cost a fifth of some modules' time.
The two read the same words in the same order; PDFium writes a hyphen it broke a word at as
U+FFFE and ends lines with CRLF, which are made pypdf's `-` and newline here. Only the
whitespace between words differs (runs of spaces, which line a chart's labels fall on), so
every reader here makes each run of it one space.

`without_generation_time` compares two databases' reports of the same logs: the time of
generation and each database's own ledger lines taken out (tests/jobs/test_backfill.py,
tests/jobs/test_filing.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pypdfium2 as pdfium


def page_texts(path: Path | str | bytes) -> list[str]:
    """Each page's text, its whitespace runs made one space."""
    doc = pdfium.PdfDocument(path)
    try:
        out = []
        for i in range(len(doc)):
            page = doc[i]
            text = page.get_textpage().get_text_range()
            out.append(re.sub(r"\s+", " ", text.replace("\ufffe", "-\n")).strip())
        return out
    finally:
        doc.close()


def pdf_text(path: Path | str | bytes, pages: int | None = None) -> str:
    """The PDF's text (of its first `pages` pages), its whitespace runs made one space."""
    return " ".join(page_texts(path)[:pages])


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
