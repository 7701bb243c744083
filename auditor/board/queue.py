"""The officer's work queue (docs/board.md): the standing findings nobody has acknowledged,
gravest first and, within a severity, the nearest video deadline first, and the bulk
acknowledgement of the ones the officer ticks.

"Needs action" and the video deadline are the report's (report/front.py): the queue shows by
default what the shift report's cover lists, and every other severity on asking. A bulk
acknowledgement is as many acknowledgements as findings ticked, each its own append-only
record, written by the store's writer of one (acks.add_ack, which `bacc-audit ack` and the
finding page's form use), in one `ack` run that names them all.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import duckdb

from auditor.board.feed import RECORD_SQL, record, snapshot
from auditor.board.views import acked_fingerprints, table_pack
from auditor.report.front import NEEDS_ACTION, needs_action, video_deadline
from auditor.rules.codes import SEVERITIES, severity_rank
from auditor.rules.pack import PackCache, video_retention_days
from auditor.store import acks
from auditor.store.filters import Filter

QUEUE_LIMIT = 500  # findings listed at once; the header counts them all
BULK_LIMIT = 500  # findings one bulk acknowledgement may take


def work_queue(
    con: duckdb.DuckDBPyConnection, zone: dt.tzinfo, packs: PackCache, now: dt.datetime,
    filters: Filter, everything: bool = False,
) -> dict[str, Any]:
    """The unacknowledged standing findings that pass `filters`: by default those that need
    action (report.front.NEEDS_ACTION), with `everything` every severity; each with its
    video deadline (the table's rule pack's retention). Counts per severity are of all the
    unacknowledged standing findings, whatever the filters."""
    where, params = filters.where()
    with snapshot(con):
        rows = con.execute(
            f"SELECT ts, {RECORD_SQL} FROM current_findings WHERE {where}", params
        ).fetchall()
        every = con.execute("SELECT fingerprint, severity FROM current_findings").fetchall()
    reviewed = acked_fingerprints(con)
    counts = Counter(sev for fp, sev in every if fp not in reviewed)
    retention: dict[tuple[Any, ...], int] = {}
    items = []
    for row in rows:
        rec = record(row[1:], zone)
        if rec["fingerprint"] in reviewed or not (everything or needs_action(rec)):
            continue
        at = row[0]
        key = (rec["table"], rec["pit"], at.date())
        if key not in retention:
            retention[key] = video_retention_days(
                table_pack(con, packs, rec["table"], rec["pit"], at))
        video_by = video_deadline(at, retention[key])
        items.append({**rec, "video_by": video_by.astimezone(zone),
                      "video_days_left": (video_by - now).total_seconds() / 86400})
    items.sort(key=lambda f: (severity_rank(f["severity"]), f["video_by"], f["id"]))
    return {
        "items": items[:QUEUE_LIMIT],
        "total": len(items),
        "counts": [(s, counts.get(s, 0)) for s in SEVERITIES],
        "open_total": sum(counts.values()),
        "needs_action_severities": NEEDS_ACTION,
        "everything": everything,
    }


def acknowledge_many(
    con: duckdb.DuckDBPyConnection, findings: list[str], *, by: str, disposition: str,
    note: str, client: dict[str, Any],
) -> list[dict[str, Any]]:
    """Acknowledge each of `findings` (ids or fingerprints) with the same disposition and
    note: one append-only acknowledgement per finding, written by the store's writer of one
    (acks.add_ack, through acks.acknowledge_all), in one `ack` run that names them all and
    says `via: board`. Every finding is checked before any is written."""
    # not retried as a whole (acks.acknowledge_all retries each finding): a retry of the
    # batch after some were written would record them twice
    done = acks.acknowledge_all(con, findings, by=by, disposition=disposition, note=note,
                                args={"via": "board", **client})
    return [acks.as_dict(a) for a in done]
