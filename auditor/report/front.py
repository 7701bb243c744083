"""The report's first pages: the cover with its sign-off block, "Needs action", and the
summary of the findings by severity, code, hour and table.
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from typing import Any

import duckdb

from auditor import __version__
from auditor.report import charts
from auditor.report.basis import Basis, hour_ticks
from auditor.rules.codes import REGISTRY, SEVERITIES, severity_rank
from auditor.rules.pack import video_retention_days
from auditor.store import ledger

# Lines of "Needs action" on the cover, the rest counted: with the signature and ledger lines
# the cover stays one page.
NEEDS_ACTION_LIMIT = 10
# What "needs action" takes: the open findings of these severities nobody has acknowledged
# (the report's cover, the board's work queue).
NEEDS_ACTION = ("critical", "major")


def video_deadline(ts: dt.datetime, retention_days: int) -> dt.datetime:
    """When a finding's surveillance video is gone: its time plus the table's retention
    (rules.pack.video_retention_days)."""
    return ts + dt.timedelta(days=retention_days)


def needs_action(record: dict[str, Any]) -> bool:
    """Whether a finding (a findings-v1 record with its standing `ack`, if any) needs action."""
    return record["severity"] in NEEDS_ACTION and not record.get("ack")


def _generated_at(con: duckdb.DuckDBPyConnection) -> dt.datetime:
    """SOURCE_DATE_EPOCH when set; else when the database last changed (its latest run), so
    the same database renders the same report."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        return dt.datetime.fromtimestamp(int(epoch), dt.UTC)
    row = con.execute("SELECT max(coalesce(finished_at, started_at)) FROM runs").fetchall()
    return row[0][0] or dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def section_cover(basis: Basis) -> dict[str, Any]:
    """The cover and its sign-off block: what was audited, under which rules and config, by
    which version of the tool, as of which change to the database."""
    scope = basis.scope
    generated = _generated_at(basis.con)
    return {
        "property": basis.conf.name,
        "config_source": basis.conf.source,
        "scope": scope,
        "local_start": scope.start.astimezone(scope.zone),
        "local_end": scope.end.astimezone(scope.zone),
        "zone_name": str(scope.zone),
        "generated_at": generated.astimezone(scope.zone),
        "tool_version": __version__,
        "packs": sorted({p.label for p in basis.packs.values() if p}),
        "rounds": basis.rounds,
        "findings": basis.found,
    }


def section_summary(basis: Basis) -> dict[str, Any]:
    """Summary: how many findings of each severity and code, how many rounds they touch, and
    when and where they fell."""
    scope, found, rounds = basis.scope, basis.found, basis.rounds
    by_sev = Counter(f["severity"] for f in found)
    by_code = Counter(f["code"] for f in found)
    rounds_with = len({(f["table"], f["shoe"], f["round"]) for f in found if f["round"]})
    hours = hour_ticks(scope)[:-1] or [scope.start]
    per_hour = Counter(
        dt.datetime.fromisoformat(f["ts"]).astimezone(scope.zone).strftime("%H") for f in found
    )
    return {
        "by_severity": [(s, by_sev.get(s, 0)) for s in SEVERITIES],
        # Gravest codes first (the code's severity in the registry), then the most frequent.
        "by_code": sorted(
            by_code.items(),
            key=lambda kv: (severity_rank(REGISTRY[kv[0]].severity), -kv[1], kv[0]),
        ),
        "rounds_with_findings": rounds_with,
        "per_thousand": (1000 * rounds_with / rounds) if rounds else 0.0,
        "chart_hours": charts.bar_chart(
            [f"{h.astimezone(scope.zone):%H}" for h in hours],
            [per_hour.get(f"{h.astimezone(scope.zone):%H}", 0) for h in hours],
            "Findings by hour (local)",
        ),
        "chart_tables": charts.bar_chart(
            [t["table_id"] for t in basis.tables],
            [basis.per_table_findings.get(t["table_id"], 0) for t in basis.tables],
            "Findings by table",
        ),
    }


def section_needs_action(basis: Basis) -> dict[str, Any]:
    """The cover's "Needs action": the open critical and major findings nobody has
    acknowledged yet, each with the date its video is gone, soonest first, so the officer
    who reads one page knows what to pull before it is too late."""
    retention = video_retention_days(basis.any_pack)
    pending = []
    for f in basis.found:
        if not needs_action(f):
            continue
        ts = dt.datetime.fromisoformat(f["ts"])
        pending.append({**f, "video_by": video_deadline(ts, retention)
                        .astimezone(basis.scope.zone)})
    pending.sort(key=lambda f: (f["video_by"], severity_rank(f["severity"]), f["id"]))
    return {"needs_action": pending[:NEEDS_ACTION_LIMIT],
            "needs_action_all": pending,  # a web page lists them all
            "needs_action_more": max(0, len(pending) - NEEDS_ACTION_LIMIT),
            "needs_action_total": len(pending)}


def section_ledger(basis: Basis) -> dict[str, Any]:
    """The ledger head the report rests on (docs/ledger.md), printed on the cover and
    attached as ledger.json, and each finding's leaf and inclusion proof for findings.jsonl.

    The head is the first one that holds every finding and acknowledgement shown and every
    log the report reads, not the latest: rendered again on an unchanged database, the
    report is the same, whatever runs sealed since. A record shown that is not sealed yet
    (a run still going) is counted, and carries no proof."""
    con, scope = basis.con, basis.scope
    if ledger.latest_head(con) is None:
        return {"ledger": None}
    prints = [f["fingerprint"] for f in basis.found]
    rows: dict[str, int] = {}
    for i in range(0, len(prints), 1000):
        chunk = prints[i:i + 1000]
        marks = ", ".join("?" * len(chunk))
        rows.update(dict(con.execute(
            f"SELECT fingerprint, id FROM current_findings WHERE fingerprint IN ({marks})",
            chunk).fetchall()))
    leaf_of = ledger.leaf_index(con, "finding", [str(v) for v in rows.values()])
    acks = [str(f["ack"]["id"]) for f in basis.found if f.get("ack")]
    sources = [str(s) for (s,) in con.execute(
        "SELECT DISTINCT source_id FROM events WHERE ts >= ? AND ts < ?",
        [scope.start, scope.end]).fetchall()]
    rest = [*ledger.leaf_index(con, "acknowledgement", acks).values(),
            *ledger.leaf_index(con, "source", sources).values()]
    shown = [leaf_of[str(rows[p])] for p in prints if str(rows.get(p)) in leaf_of]
    pending = len(prints) - len(shown) + len(acks) + len(sources) - len(rest)
    top = max([*shown, *rest], default=None)
    head = ledger.latest_head(con) if top is None or pending else ledger.head_covering(con, top)
    if head is None:
        return {"ledger": None}
    proofs = ledger.proofs(con, head.size, shown)
    data = ledger.leaf_data(con, shown)
    entries = {
        p: {"index": i, "tree_size": head.size, "leaf": data[i], "proof": proofs[i]}
        for p in prints if (i := leaf_of.get(str(rows.get(p)), -1)) >= 0
    }
    return {"ledger": {
        "size": head.size,
        "root": head.root,
        "sealed_at": head.sealed_at.astimezone(scope.zone),
        "pending": pending,
        "entries": entries,
    }}
