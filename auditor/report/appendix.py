"""The appendices: every finding on one line (A), and the log files the report rests on,
with the digest printed on every page (B).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import textwrap
from typing import Any

import duckdb

from auditor.report import formatting, reads
from auditor.report.basis import Basis, Scope
from auditor.report.formatting import (
    listing,
    local_time,
)


def _sources(con: duckdb.DuckDBPyConnection, scope: Scope, tables: set[str]) -> list[dict]:
    """The log files the window's events came from, one row per file however it was read:
    whole, or in pieces as it grew (`watch`, an ingest run twice over a growing file). A
    file's SHA-256 and line count are those of all that was read of it (its last piece's
    prefix hash), its events and quarantined lines the sum of its pieces; so a watched night
    lists the same files, hashes and counts as a batch ingest of the finished files."""
    only = ""
    params: list[Any] = [scope.start, scope.end]
    if scope.pit or scope.table:
        only = "AND table_id IN (SELECT unnest(?::VARCHAR[]))"
        params.append(sorted(tables))
    return reads.rows(
        con,
        f"""
        WITH used AS (
          SELECT DISTINCT source_id FROM events WHERE ts >= ? AND ts < ? {only}
        ), files AS (
          SELECT DISTINCT file_id FROM source_extents SEMI JOIN used USING (source_id)
        )
        SELECT x.file_id AS id, arg_max(x.path, x.end_byte) AS path,
               arg_max(x.prefix_sha256, x.end_byte) AS sha256, max(x.last_line) AS lines,
               sum(x.events)::BIGINT AS events, sum(x.quarantined)::BIGINT AS quarantined
        FROM source_extents x SEMI JOIN files USING (file_id)
        GROUP BY x.file_id
        ORDER BY path
        """,
        params,
    )


# Findings listed one a line in Appendix A; past it, they are counted by code, table and
# dealer instead (each one is in the attached findings.csv and findings.jsonl).
APPENDIX_LINES = 400


def section_appendix(basis: Basis) -> dict[str, Any]:
    """Appendix A: every finding on its own line, or past APPENDIX_LINES a line per code,
    table and dealer with the count, the acknowledged and the first and last time."""
    found, zone = basis.found, basis.scope.zone
    if len(found) <= APPENDIX_LINES:
        return {"appendix_blocks": _appendix_blocks(found, zone), "appendix_groups": []}
    return {"appendix_blocks": [], "appendix_groups": _group_blocks(found, zone),
            "appendix_group_head": GROUP_FORMAT % GROUP_HEAD, "appendix_lines": APPENDIX_LINES}


GROUP_HEAD = ("code", "severity", "table", "dealer", "findings", "acked",
              "first (local)", "last (local)")
GROUP_FORMAT = "%-28s %-8s %-8s %-16s %8s %6s  %-16s  %-16s"


def _group_blocks(found: list[dict], zone: dt.tzinfo) -> list[str]:
    """One line per (code, table or pit, dealer), in the order of `found` (gravest first),
    so the graver codes lead."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for f in found:
        key = (f["code"], f["table"] or f["pit"] or "", f.get("dealer") or "")
        groups.setdefault(key, []).append(f)
    lines = []
    for (code, where, dealer), fs in groups.items():
        times = sorted(dt.datetime.fromisoformat(f["ts"]) for f in fs)
        lines.append(GROUP_FORMAT % (
            code, fs[0]["severity"], where, dealer[:16], f"{len(fs):,}",
            f"{sum(1 for f in fs if f.get('ack')):,}",
            f"{times[0].astimezone(zone):%Y-%m-%d %H:%M}",
            f"{times[-1].astimezone(zone):%Y-%m-%d %H:%M}"))
    return listing(lines)


def section_sources(basis: Basis) -> dict[str, Any]:
    """Appendix B and the digest on the cover and every page: the logs the report rests on, so
    a reader can check they hold the same files."""
    sources = _sources(basis.con, basis.scope, basis.names)
    digest = hashlib.sha256("".join(sorted(s["sha256"] for s in sources)).encode()).hexdigest()
    return {
        "sources": sources,
        "sources_listing": listing([_source_line(x) for x in sources])
        if len(sources) > formatting.LISTING_ROWS else [],
        "sources_digest": digest,
    }


def _ack_text(ack: dict | None) -> str:
    if ack is None:
        return ""
    note = f" ({ack['note']})" if ack["note"] else ""
    return f"  [acknowledged {ack['at']:%Y-%m-%d %H:%M} by {ack['by']}: {ack['disposition']}{note}]"


# Characters of a message on one line of Appendix A: a landscape A4 line of 6 pt DejaVu Sans
# Mono holds 209, and the message starts at the 115th (report.css, @page listing).
MESSAGE_WIDTH = 94
MESSAGE_COLUMN = 114


def _appendix_blocks(found: list[dict], zone: dt.tzinfo) -> list[str]:
    """Every finding on one fixed-width line, its message wrapped under itself, in blocks.
    Each line carries its date: the lines run gravest first, not in time order, across
    midnight. The id before the message is what `bacc-audit ack` takes, so an officer acks
    from the PDF."""
    indent = "\n" + " " * MESSAGE_COLUMN
    return listing([
        f"{local_time(f['ts'], zone):<23} {f['severity']:<8} {f['code']:<28} "
        f"{f['table'] or f['pit'] or '':<8} "
        f"{_shoe_round(f):<18} {f['seq'] or '':>7}  "
        f"{f['id']:<13}  "
        + indent.join(textwrap.wrap(f"{f['message']}{_ack_text(f.get('ack'))}", MESSAGE_WIDTH,
                                    break_on_hyphens=False) or [""])
        for f in found
    ])


def _shoe_round(f: dict) -> str:
    """'SHOE/ROUND', or the shoe alone for a finding of a whole shoe."""
    if not f["shoe"]:
        return ""
    return f["shoe"] if f["round"] is None else f"{f['shoe']}/{f['round']}"


def _source_line(s: dict) -> str:
    return f"{s['sha256']}  {s['lines']:>9} {s['events']:>9} {s['quarantined']:>5}  {s['path']}"
