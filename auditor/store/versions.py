"""The versions of each report the nightly job filed: a signed report never changes under its
signature, so a changed report is a new version beside it, and says what changed since.

Append-only (table `report_versions`, auditor.store.db); one row a version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import duckdb

from auditor.store.findings import short_id

# What a version showed of its findings: (fingerprint, code, table, acknowledged), sorted.
Findings = tuple[tuple[str, str, str | None, bool], ...]


@dataclass(frozen=True)
class Version:
    slug: str
    number: int
    path: str
    sha256: str
    html_sha256: str
    findings: Findings | None  # None: filed before versions were recorded


def history(con: duckdb.DuckDBPyConnection, slug: str) -> list[Version]:
    """The versions of report `slug` (2026-11-28_grave), oldest first."""
    rows = con.execute(
        "SELECT slug, version, path, sha256, html_sha256, CAST(findings AS VARCHAR) "
        "FROM report_versions WHERE slug = ? ORDER BY version",
        [slug],
    ).fetchall()
    return [
        Version(s, int(v), p, sha, hsha, tuple(tuple(f) for f in json.loads(fs)))
        for s, v, p, sha, hsha, fs in rows
    ]


def record(
    con: duckdb.DuckDBPyConnection, v: Version, run_id: int | None
) -> None:
    con.execute(
        "INSERT INTO report_versions VALUES (?, ?, ?, ?, ?, ?::JSON, ?, now())",
        [v.slug, v.number, v.path, v.sha256, v.html_sha256,
         json.dumps([list(f) for f in v.findings or ()]), run_id],
    )


def snapshot(found: list[dict[str, Any]]) -> Findings:
    """What a version showed of its findings, as the next version compares it."""
    return tuple(sorted(
        (f["fingerprint"], f["code"], f.get("table"), f.get("ack") is not None) for f in found
    ))


def changes(
    before: Findings | None, now: Findings, acks_known: bool = True
) -> dict[str, list[dict[str, Any]] | None] | None:
    """Findings added, withdrawn and acknowledged since `before` (None: not known, for a
    version that carries no list of its findings; `acknowledged` None when `before` does not
    say which of its findings were acknowledged)."""
    if before is None:
        return None
    old = {f[0]: f for f in before}
    new = {f[0]: f for f in now}

    def rows(keys: list[str], source: dict) -> list[dict[str, Any]]:
        return [
            {"code": source[k][1], "table": source[k][2], "fingerprint": k, "id": short_id(k)}
            for k in keys
        ]

    return {
        "added": rows(sorted(new.keys() - old.keys()), new),
        "withdrawn": rows(sorted(old.keys() - new.keys()), old),
        "acknowledged": rows(
            sorted(k for k, f in new.items() if f[3] and not (k in old and old[k][3])), new
        ) if acks_known else None,
    }
