"""The sections read from the property's last 30 gaming days: the dealers' p-chart beside
their record over the span, and the findings per 1,000 rounds day by day.
"""

from __future__ import annotations

from typing import Any

from auditor.audit import dealers as dealer_counts
from auditor.replay.dealers import DealerRate
from auditor.report import charts, formatting
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
    span_of = {r.dealer: span.dealers[r.dealer] for r in rows if r.dealer in span.dealers}
    width = max([6] + [len(r.dealer) for r in rows])
    return {
        "dealers": rows,
        "dealers_listing": formatting.listing(_dealer_lines(rows, span_of, width))
        if len(rows) > formatting.LISTING_ROWS else [],
        "dealers_listing_head": _dealer_head(width),
        "dealers_unnamed": unnamed,
        "dealers_expected": rows[0].expected if rows else 0.0,
        "dealers_rounds": sum(r.rounds for r in rows),
        "dealers_error_rounds": sum(r.error_rounds for r in rows),
        # dealer -> DealerRate over the span (every dealer of the shift dealt in it)
        "dealers_span": span_of,
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


def _dealer_head(width: int) -> str:
    return (f"{'dealer':<{width}} {'rounds':>9} {'errors':>6} {'per 1000':>8} {'limit':>8} "
            f"{'flag':<7} | {'rounds':>9} {'errors':>6} {'per 1000':>8} {'limit':>8} above")


def _dealer_lines(
    rows: list[dealer_counts.DealerRow], span_of: dict[str, DealerRate], width: int
) -> list[str]:
    """The By dealer table as fixed-width lines (past LISTING_ROWS dealers: a property-wide
    day has thousands, and a PDF table of them took most of the report's layout time): the
    same columns and figures, the flags in one word (FLAGGED, above; ABOVE, above)."""
    out = []
    for d in rows:
        flag = "FLAGGED" if d.flagged else "above" if d.above else ""
        line = (f"{d.dealer:<{width}} {d.rounds:>9,} {d.error_rounds:>6,} {d.rate * 1000:>8.1f} "
                f"{d.upper * 1000:>8.1f} {flag:<7} |")
        m = span_of.get(d.dealer)
        if m is not None:
            mark = "ABOVE" if m.flagged else "above" if m.above else ""
            line += (f" {m.count.rounds:>9,} {m.count.error_rounds:>6,} {m.rate * 1000:>8.1f} "
                     f"{m.upper * 1000:>8.1f} {mark}")
        out.append(line.rstrip())
    return out


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
