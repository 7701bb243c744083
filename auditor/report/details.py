"""The findings in full: the gravest with their round's cards and evidence, and the side
wagers of each seat found following the count.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

from auditor.report import charts, reads
from auditor.report.basis import Basis
from auditor.report.formatting import (
    card_face,
    evidence_text,
    point_counts,
)
from auditor.rules.codes import REGISTRY
from auditor.rules.pack import video_retention_days

# Findings shown in full in the body. Past it, only those that need action (critical and
# major, not acknowledged), gravest first, up to it: a 10,000-finding night stays a report a
# person reads (issue 30); the appendix and the attached files hold every finding.
DETAIL_LIMIT = 40
SIDE_BET_CODE = "play.side_bet_counting"


def _number(value: Any, digits: int) -> str:
    """A number of the evidence with `digits` decimals; anything else as it is."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:.{digits}f}"
    return "?" if value is None else str(value)


def section_side_bets(basis: Basis) -> dict[str, Any]:
    """Side wagers against the count: for each play.side_bet_counting finding of the scope,
    the seat's side wager of each round against the true count it was made at, from the
    finding's evidence (its `series`: shoe, round, true count, amount; "0" where the seat
    made none), titled with the table, seat, bet and the rank correlation and its z."""
    mine = [f for f in basis.found if f["code"] == SIDE_BET_CODE]
    if not mine:
        return {"side_bets": []}
    evidence = dict(basis.con.execute(
        "SELECT fingerprint, CAST(evidence AS VARCHAR) FROM current_findings "
        "WHERE code = ? AND fingerprint IN (SELECT unnest(?::VARCHAR[]))",
        [SIDE_BET_CODE, [f["fingerprint"] for f in mine]],
    ).fetchall())
    out = []
    for f in mine:
        ev = json.loads(evidence.get(f["fingerprint"]) or "null")
        ev = ev if isinstance(ev, dict) else {}
        points: list[tuple[float, float]] = []
        for item in ev.get("series") or []:
            try:
                points.append((float(item[2]), float(Decimal(str(item[3])))))
            except (TypeError, ValueError, IndexError, ArithmeticError):
                continue  # a malformed point is left off the chart, not the report
        table = ev.get("table") or f["table"] or "?"
        title = (f"{table}, seat {ev.get('seat', '?')}, {ev.get('bet', '?')}: "
                 f"rho {_number(ev.get('rho'), 2)}, z {_number(ev.get('z'), 1)}")
        wagers = sum(1 for _, y in points if y)
        out.append({
            "id": f["id"],
            "title": title,
            "rounds": ev.get("rounds", len(points)),
            "side_wagers": ev.get("side_wagers", wagers),
            "threshold": _number(ev.get("threshold"), 1),
            "shift": ev.get("shift") or "",
            "points": len(points),
            "chart": charts.scatter(points, title, "true count", "side wager")
            if points else "",
        })
    out.sort(key=lambda x: x["title"])
    return {"side_bets": out}


def in_full(found: list[dict]) -> list[dict]:
    """The findings the body shows in full: all of them up to DETAIL_LIMIT, else the first
    DETAIL_LIMIT that need action (`found` runs gravest first)."""
    if len(found) <= DETAIL_LIMIT:
        return found
    return [f for f in found
            if f["severity"] in ("critical", "major") and not f.get("ack")][:DETAIL_LIMIT]


def section_findings(basis: Basis) -> dict[str, Any]:
    """Findings: those `in_full` with the round's cards and the date by which the
    surveillance video must be pulled before the house deletes it."""
    scope, values = basis.scope, basis.values
    shown = in_full(basis.found)
    keys = {(f["table"], f["shoe"], f["round"]) for f in shown if f["round"] is not None}
    cards = reads.round_cards(basis.con, keys)
    retention = video_retention_days(basis.any_pack)
    details = []
    for f in shown:
        c = REGISTRY[f["code"]]
        ts = dt.datetime.fromisoformat(f["ts"])
        round_cards = cards.get((f["table"], f["shoe"], f["round"]), [])
        details.append(
            {
                **f,
                "title": c.title,
                "why": c.why,
                "local": ts.astimezone(scope.zone),
                "video_by": (ts + dt.timedelta(days=retention)).astimezone(scope.zone),
                "cards": [card_face(card, hand, seq) for seq, hand, card in round_cards],
                "counts": point_counts(round_cards, values),
                "expected_text": evidence_text(f["expected"], scope.zone),
                "observed_text": evidence_text(f["observed"], scope.zone),
            }
        )
    return {"details": details, "detail_limit": DETAIL_LIMIT, "retention_days": retention}
