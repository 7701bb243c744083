"""The section on payout procedures and notices: the procedure in force at each table over
the window, its changes with the written notices given for them, and the notices entered by
hand that cleared a finding or were withdrawn.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from typing import Any

import duckdb

from auditor.audit.load import ORDERED_JOIN, ORDERED_TS, load_change_audits, load_notices
from auditor.replay.procedures import (
    Change,
    Notice,
    ProcedureRules,
    TableEvent,
    backdated_why,
    table_timeline,
    why_not,
)
from auditor.report import charts, formatting, reads
from auditor.report.basis import Basis, Scope, hour_ticks
from auditor.report.formatting import (
    listing,
)
from auditor.store import notices as hand_notices


def section_procedures(basis: Basis) -> dict[str, Any]:
    """Payout procedures and notices: the procedure in force per table over the window (a
    timeline, or past LISTING_ROWS tables a listing), its changes with the notices given for
    them, and what notices entered by hand did."""
    con, scope = basis.con, basis.scope
    names = [t["table_id"] for t in basis.tables]
    pit_of = {t["table_id"]: t["pit"] for t in basis.tables}
    pits = sorted({t["pit"] for t in basis.tables if t["pit"]})
    events = _table_events(con, scope, names)
    given = sorted((n for n in load_notices(con) if n.pit in pits), key=_notice_order)
    hand = _entered_by_hand(con, scope.zone)
    notices = [
        _notice_dict(n, hand) for n in given
        if scope.start - dt.timedelta(days=1) <= n.effective < scope.end
    ]
    pairing = _audit_changes(basis, events)
    changes = _changes(scope, names, pit_of, events, given, pairing, basis.found, hand)
    lanes, svg = _timeline(scope, names, pit_of, events, notices)
    return {
        "procedures": {
            "withdrawn_notices": _withdrawn_hand_notices(con, scope, pits),
            "cleared_by_hand": _cleared_by_hand(con, scope, names, pit_of, notices, hand),
            "changes": changes,
            "lanes": lanes,
            "timeline_svg": svg,
            "notices": notices,
            "listing": listing([_change_line(c) for c in changes])
            if len(changes) > formatting.LISTING_ROWS else [],
        },
        "listing_rows": formatting.LISTING_ROWS,
    }


def _table_events(
    con: duckdb.DuckDBPyConnection, scope: Scope, names: list[str]
) -> dict[str, list[dict]]:
    """Each table's opens, procedure changes and closes up to the end of the window, in seq
    order, at their ordered times (as the audit takes them): what was in force when the window
    began, and what changed in it."""
    by_table: dict[str, list[dict]] = {name: [] for name in names}
    for e in reads.rows(
        con,
        f"""
        SELECT e.table_id, {ORDERED_TS} AS ts, e.seq, e.type, e.procedure, e.pit, e.game,
               e.jurisdiction, e.variant, s.path || ':' || e.line_no AS source
        FROM events e JOIN sources s ON s.id = e.source_id {ORDERED_JOIN}
        WHERE e.type IN ('table_open', 'procedure_change', 'table_close')
          AND {ORDERED_TS} < ? AND e.table_id IN (SELECT unnest(?::VARCHAR[]))
        ORDER BY e.table_id, e.seq
        """,
        [scope.end, names],
    ):
        by_table[e["table_id"]].append(e)
    return by_table


def _notice_order(n: Notice) -> tuple:
    return (n.pit, n.effective, n.given_at, n.recipient)


def _notice_dict(n: Notice, hand: dict[str, str]) -> dict[str, Any]:
    """A notice, logged or entered by hand (bacc-audit notice add), as the page shows it."""
    return {"pit": n.pit, "ts": n.given_at, "procedure": n.procedure, "effective": n.effective,
            "recipient": n.recipient, "written": n.written, "tables": n.tables,
            "source": n.source,
            # A notice typed in with `bacc-audit notice add` says so, by whom, when and why.
            "by_hand": hand.get(n.key)}


def _entered_by_hand(con: duckdb.DuckDBPyConnection, zone: dt.tzinfo) -> dict[str, str]:
    """Each notice entered by hand (by its Notice key) as the page says it: who entered it,
    when in local time, and the note they gave."""
    return {
        f"hand:{r.id}": f"entered by hand by {r.entered_by} at "
        f"{r.entered_at.astimezone(zone):%Y-%m-%d %H:%M} (notice {r.id})"
        + (f": {r.note}" if r.note else "")
        for r in hand_notices.list_notices(con)
    }


# A change as the audit judged it: the Change, all its table's changes in time order, and
# when it was first judged (a notice delivered after that does not count).
Judged = tuple[Change, list[Change], dt.datetime | None]


def _audit_changes(basis: Basis, events: dict[str, list[dict]]) -> dict[tuple[str, int], Judged]:
    """The changes the audit's notice check judges at the scope's tables, by (table, seq):
    replay.procedures.table_timeline over the same events, packs and pit baselines."""

    def rules_for(jurisdiction: str | None, game: str | None) -> ProcedureRules | None:
        pack = basis.pack_cache.get(jurisdiction, game)
        return None if pack is None else ProcedureRules.of(pack)

    timeline = table_timeline(
        [TableEvent(e["table_id"], e["seq"], e["ts"], e["type"], e["source"], e["pit"],
                    e["game"], e["jurisdiction"], e["variant"], e["procedure"])
         for mine in events.values() for e in mine],
        basis.conf.pit_procedures, rules_for, {},
    )
    per_table: dict[str, list[Change]] = defaultdict(list)
    for c in sorted(timeline.changes, key=lambda c: (c.ts, c.seq)):
        per_table[c.table].append(c)
    audited = load_change_audits(basis.con)
    return {(c.table, c.seq): (c, per_table[c.table], audited.get((c.table, c.seq)))
            for c in timeline.changes}


def _counted(
    by_pit: dict[str | None, list[Notice]], judged: Judged | None, zone: dt.tzinfo
) -> list[Notice]:
    """The notices that count for a change as the audit counts them (replay.procedures.why_not,
    to a recipient its pack names); none for a change the audit does not judge. Every
    notice that counts is shown, each with its own lead. `by_pit`: the notices by pit, in
    their order (why_not counts none of another pit, and a property-wide day put every
    table's changes against every pit's notices: 24.8 M calls, 8 s, on the 10M-round day)."""
    if judged is None:
        return []
    change, table_changes, judged_at = judged
    return [n for n in by_pit.get(change.pit, ())
            if why_not(n, change, table_changes, zone) is None
            and backdated_why(n, change, None, table_changes, judged_at, zone) is None
            and n.recipient in change.rules.recipients]


def _changes(
    scope: Scope, names: list[str], pit_of: dict[str, str], events: dict[str, list[dict]],
    notices: list[Notice], pairing: dict[tuple[str, int], Judged], found: list[dict],
    hand: dict[str, str],
) -> list[dict[str, Any]]:
    """Every procedure_change in the window, table by table: the notices that count for it
    with their lead, and the procedure findings of its table."""
    flagged = {(f["table"], f["code"]) for f in found if f["code"].startswith("procedure.")}
    by_pit: dict[str | None, list[Notice]] = defaultdict(list)
    for n in notices:
        by_pit[n.pit].append(n)
    rows = []
    for name in names:
        for c in events[name]:
            if c["type"] != "procedure_change" or c["ts"] < scope.start:
                continue
            given = _counted(by_pit, pairing.get((name, c["seq"])), scope.zone)
            rows.append({
                "table": name,
                "pit": pit_of[name],
                "procedure": c["procedure"],
                "at": c["ts"].astimezone(scope.zone),
                "seq": c["seq"],
                "notices": [
                    {
                        **_notice_dict(n, hand),
                        "given": n.given_at.astimezone(scope.zone),
                        "lead_minutes": (c["ts"] - n.given_at).total_seconds() / 60,
                    }
                    for n in given
                ],
                "flagged": sorted(code for t, code in flagged if t == name),
            })
    return rows


def _timeline(
    scope: Scope, names: list[str], pit_of: dict[str, str], events: dict[str, list[dict]],
    notices: list[dict],
) -> tuple[list[dict[str, Any]], str]:
    """One lane a table, the procedure in force while it is open, with the notices of its pit
    marked: as values for the HTML, and drawn as an SVG. None past LISTING_ROWS tables, where
    the changes are listed instead."""
    if len(names) > formatting.LISTING_ROWS:
        return [], ""
    zone = scope.zone
    span = (scope.end - scope.start).total_seconds()

    def pos(t: dt.datetime) -> float:
        return min(max((t - scope.start).total_seconds() / span, 0.0), 1.0)

    lanes: list[dict[str, Any]] = []
    drawn: list[charts.Lane] = []
    for name in names:
        spans, closes = open_spans(events[name], scope.start, scope.end)
        lanes.append({
            "table": name,
            "spans": [
                {"from": a.astimezone(zone), "to": b.astimezone(zone), "procedure": p}
                for a, b, p in spans
            ],
            "closed": [t.astimezone(zone) for t in closes],
        })
        marks = [
            (pos(n["ts"]), f"notice to {n['recipient']} {n['ts'].astimezone(zone):%H:%M}")
            for n in notices
            if n["pit"] == pit_of[name] and scope.start <= n["ts"] < scope.end
        ]
        drawn.append((
            name,
            [(pos(a), pos(b), str(p)) for a, b, p in spans],
            marks,
            [(pos(t), f"closed {t.astimezone(zone):%H:%M}") for t in closes],
        ))
    if not drawn:
        return lanes, ""
    svg = charts.timeline(
        drawn,
        [(pos(h), f"{h.astimezone(zone):%H:%M}") for h in hour_ticks(scope)],
        "Procedure in force per table (▼ written notice given)",
    )
    return lanes, svg


def _cleared_by_hand(
    con: duckdb.DuckDBPyConnection, scope: Scope, names: list[str], pit_of: dict[str, str],
    notices: list[dict], hand: dict[str, str],
) -> list[dict]:
    """Findings that a notice entered by hand withdrew, beside the logged notices of their
    change: what someone typed in must never clear a finding unseen."""
    cleared = reads.rows(
        con,
        """
        SELECT code, table_id, seq, ts, message,
               json_extract_string(evidence, '$.withdrawn_because.entered') AS entered,
               json_extract_string(evidence, '$.withdrawn_because.hand_notices') AS keys
        FROM (
          SELECT *, row_number() OVER (PARTITION BY fingerprint ORDER BY id DESC) AS rn
          FROM findings WHERE code LIKE 'procedure.notice_%'
        )
        WHERE rn = 1 AND status = 'withdrawn'
          AND json_extract(evidence, '$.withdrawn_because') IS NOT NULL
          AND ts >= ? AND ts < ? AND table_id IN (SELECT unnest(?::VARCHAR[]))
        ORDER BY ts, table_id
        """,
        [scope.start, scope.end, names],
    )
    for f in cleared:
        f["at"] = f["ts"].astimezone(scope.zone)
        # The notices as the page says them (local time, note); as recorded if not found.
        keys = json.loads(f.pop("keys") or "[]")
        recorded = json.loads(f["entered"] or "[]")
        f["entered"] = "; ".join(hand[k] for k in keys) if all(k in hand for k in keys) and keys \
            else "; ".join(recorded)
        f["logged"] = "; ".join(
            f"{n['recipient']} {n['ts'].astimezone(scope.zone):%H:%M}"
            for n in notices
            if not n["by_hand"] and n["pit"] == pit_of.get(f["table_id"])
            and abs((n["effective"] - f["ts"]).total_seconds()) <= 3600
        ) or "none"
    return cleared


def _withdrawn_hand_notices(
    con: duckdb.DuckDBPyConnection, scope: Scope, pits: list[str]
) -> list[dict[str, Any]]:
    """Notices entered by hand and withdrawn since: they no longer count, and say so here."""
    gone = hand_notices.withdrawals(con)
    return [
        {
            "id": n.id,
            "pit": n.pit,
            "procedure": n.procedure,
            "recipient": n.recipient,
            "effective": n.effective.astimezone(scope.zone),
            "given": n.given_at.astimezone(scope.zone),
            "entered_by": n.entered_by,
            "by": w.withdrawn_by,
            "at": w.withdrawn_at.astimezone(scope.zone),
            "reason": w.reason,
        }
        for n in hand_notices.list_notices(con)
        if (w := gone.get(n.id or 0)) is not None
        and n.pit in pits and scope.start - dt.timedelta(days=1) <= n.effective < scope.end
    ]


def open_spans(
    events: list[dict], start: dt.datetime, end: dt.datetime
) -> tuple[list[tuple[dt.datetime, dt.datetime, int]], list[dt.datetime]]:
    """The procedure in force while the table is open, as (from, to, procedure) spans inside
    the window, and its closes inside the window.

    A closed table has no procedure in force on the floor: drawing the last one until the end
    of the shift would show a pit as mixed when it is not. A span ends at a table_close or a
    change; a reopening starts a new one. As in the audit (replay/tables.py), the procedure
    carries across a close, and a table_open that declares none keeps it.
    """
    spans: list[tuple[dt.datetime, dt.datetime, int]] = []
    closes: list[dt.datetime] = []
    current: int | None = None
    opened: dt.datetime | None = None  # start of the running span while the table is open

    def cut(at: dt.datetime) -> None:
        if opened is not None and current is not None:
            spans.append((opened, at, current))

    for e in events:  # seq order
        ts = e["ts"]
        if e["type"] == "table_open":
            cut(ts)  # an opening without a close: the old span ends here
            current = e["procedure"] if e["procedure"] is not None else current
            opened = ts
        elif e["type"] == "procedure_change":
            if e["procedure"] is not None and e["procedure"] != current:
                cut(ts)
                opened = ts if opened is not None else None
                current = e["procedure"]
        elif e["type"] == "table_close":
            if opened is not None and current is not None and start <= ts < end:
                closes.append(ts)  # a lane that ends here: a table without procedures has none
            cut(ts)
            opened = None
    cut(end)
    kept = [(max(a, start), min(b, end), p) for a, b, p in spans if b > start and a < end]
    return [(a, b, p) for a, b, p in kept if b > a], closes


def _change_line(c: dict) -> str:
    notices = "; ".join(
        f"{n['recipient']}{'' if n['written'] else ' (not written)'} {n['given']:%H:%M} "
        f"({n['lead_minutes']:.0f} min{', ' + n['by_hand'] if n['by_hand'] else ''})"
        for n in c["notices"]
    ) or "none"
    return (
        f"{c['table']:<10} {c['pit']:<6} {c['at']:%H:%M:%S} {c['seq']:>9} {c['procedure']:>3}  "
        f"{notices}  [{', '.join(c['flagged']) or 'none'}]"
    )
