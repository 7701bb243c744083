"""What a filed PDF carries about itself, for whoever files the next version: its version
record (`version.json`: which report and version, the SHA-256 of what it shows, the findings
it showed as acknowledged) and its findings (`findings.jsonl`).

The archive, not the database, is what a regulator holds: a database that did not file a
version (a new one, built from the same logs, given the archive) still learns from the PDF
itself what it showed, and so what changed since (jobs/archive.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.report.render import Attached
from auditor.store import versions

VERSION_RECORD = "version.json"
FINDINGS = "findings.jsonl"
RECORD_FORMAT = "bacc-audit report version record 1"


def version_attachment(
    slug: str,
    number: int,
    content_sha256: str,
    shown: versions.Findings,
    before: tuple[int, str] | None,
) -> Attached:
    """The version record a filed PDF carries. `content_sha256` is the SHA-256 of its HTML
    with what moves without its findings changing left out (archive.py's `_content_sha`);
    `before` the version it follows (number, SHA-256 of that PDF)."""
    record = {
        "format": RECORD_FORMAT,
        "slug": slug,
        "version": number,
        "content_sha256": content_sha256,
        "acknowledged": sorted(f[0] for f in shown if f[3]),
        "before": None if before is None else {"version": before[0], "sha256": before[1]},
    }
    return Attached(
        VERSION_RECORD,
        (json.dumps(record, sort_keys=True, indent=1) + "\n").encode(),
        "Which report and version this is, and what it showed, for the next version",
    )


@dataclass(frozen=True)
class FiledRecord:
    """What a filed PDF says of itself; None where it does not say."""

    content_sha256: str | None
    findings: versions.Findings | None  # from findings.jsonl; acknowledged False if unknown
    acks_known: bool  # its version record lists the findings acknowledged then


def attachments(path: Path) -> dict[str, bytes]:
    """The files attached to a PDF, by name: {} when it has none or cannot be read as a PDF
    (a file somebody left in the archive under a report's name)."""
    import pypdf

    try:
        reader = pypdf.PdfReader(path)
        return {name: datas[-1] for name, datas in reader.attachments.items() if datas}
    except Exception:  # pypdf raises many kinds for a damaged file; it only means "unknown"
        return {}


def read_filed(path: Path) -> FiledRecord:
    """What `path` says of itself (its version record and attached findings)."""
    files = attachments(path)
    record = _json(files.get(VERSION_RECORD))
    if not isinstance(record, dict):
        record = {}
    acked = record.get("acknowledged")
    content = record.get("content_sha256")
    listed = {str(a) for a in acked} if isinstance(acked, list) else set()
    shown = _findings(files.get(FINDINGS), listed)
    return FiledRecord(
        content if isinstance(content, str) else None, shown, isinstance(acked, list)
    )


def _json(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None


def _findings(data: bytes | None, acked: set[str]) -> versions.Findings | None:
    """The attached findings as a version's snapshot; None when absent or unreadable, or
    when a finding has no fingerprint (findings format v1 before 1.1)."""
    if data is None:
        return None
    found = []
    for line in data.splitlines():
        if not line.strip():
            continue
        f = _json(line)
        if not isinstance(f, dict) or not isinstance(f.get("fingerprint"), str):
            return None
        found.append({**f, "ack": True if f["fingerprint"] in acked else None})
    return versions.snapshot(found)
