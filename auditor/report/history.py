"""The sections read from the property's last 30 gaming days: the dealers' p-chart beside
their record over the span, and the findings per 1,000 rounds day by day.
"""

from __future__ import annotations

from typing import Any

from auditor.audit import dealers as dealer_counts
from auditor.report import charts
from auditor.report.basis import Basis


def section_dealers(basis: Basis) -> dict[str, Any]:
    """By dealer: the period's p-chart over every dealer of the property in it (rounds, error
    rounds, rate, limit, flagged; docs/dealers.md), whatever pit or table the report covers:
    a dealer's limit is drawn against the whole shift. Beside it, each of those dealers over
    the last 30 gaming days (Basis.history): rounds, error rounds, rate, and the limit of the
    p-chart of those days, whose p̄ is the property's rate over them."""
    scope, span = basis.scope, basis.history
    rows, unnamed = dealer_counts.dealer_rows(
        basis.con, dealer_counts.Window(scope.title, scope.start, scope.end)
    )
    with_rounds = [d.day for d in span.days if d.rounds]
    return {
        "dealers": rows,
        "dealers_unnamed": unnamed,
        "dealers_expected": rows[0].expected if rows else 0.0,
        "dealers_rounds": sum(r.rounds for r in rows),
        "dealers_error_rounds": sum(r.error_rounds for r in rows),
        # dealer -> DealerRate over the span (every dealer of the shift dealt in it)
        "dealers_span": {r.dealer: span.dealers[r.dealer] for r in rows
                         if r.dealer in span.dealers},
        "span": {
            "label": span.label,
            "first": span.days[0].day,
            "last": span.days[-1].day,
            "days": len(span.days),
            "days_with_rounds": len(with_rounds),
            "first_with_rounds": with_rounds[0] if with_rounds else None,
            "expected": span.expected,
            "rounds": sum(r.count.rounds for r in span.dealers.values()),
            "error_rounds": sum(r.count.error_rounds for r in span.dealers.values()),
            "dealers": len(span.dealers),
            "unnamed": span.unnamed,
            "zone": str(scope.zone),
            "day_start": f"{basis.conf.gaming_day_start:%H:%M}",
        },
    }


def section_trend(basis: Basis) -> dict[str, Any]:
    """Findings per 1,000 rounds on each of the last 30 gaming days, the scope's last: a chart
    whose days without rounds are gaps, and the same numbers in a table. The findings are
    the kinds `bacc-audit dealers` counts against a dealer (standing round, chemin de fer and
    shoe findings), of the whole property whatever pit or table the report covers."""
    span = basis.history
    days = span.days
    shown = next((i for i, d in enumerate(days) if d.rounds), len(days) - 1)
    rate = 1000 * span.findings / span.rounds if span.rounds else None
    with_rounds = sum(1 for d in days if d.rounds)
    return {
        "trend_days_with_rounds": with_rounds,
        "trend_days": days[shown:],  # from the first day with rounds (the last day at least)
        "trend_before": days[:shown],  # days without rounds before the first that has some
        "trend_rate": rate,
        "trend_rounds": span.rounds,
        "trend_findings": span.findings,
        # One day is a point, not a trend: a grey box with a dot said nothing (issue 30).
        "chart_trend": "" if with_rounds < 2 else charts.gap_line(
            [f"{d.day:%m-%d}" for d in days],
            [d.per_1000 for d in days],
            f"Findings per 1,000 rounds, gaming days {days[0].day:%Y-%m-%d} to "
            f"{days[-1].day:%Y-%m-%d}",
            rate,
            "30-day rate" if rate is not None else "",
        ),
    }
