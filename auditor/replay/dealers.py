"""Dealers against their shift: a p-chart of error rounds (docs/dealers.md).

Pure: the audit (auditor/audit/dealers.py) counts, per period and dealer, the rounds dealt
and the error rounds (rounds with at least one standing round finding); this module draws
the control limits and decides which dealers stand above them. One slip in a night is a
finding of its round; a dealer who slips far more often than the rest of the shift is a
training or supervision matter, which no single round shows.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from auditor.finding import Finding, fingerprint

CODE = "dealer.error_rate"
SIGMAS = 3.0  # Shewhart's limits: the usual choice, and the one docs/dealers.md measures
PER = 1000  # rates are shown per 1,000 rounds
# The one-sided tail a 3-sigma limit stands for under the normal approximation (1 - Φ(3)).
# With few rounds or rare errors the count of error rounds is far from normal and the limit
# alone fires much more often (docs/dealers.md); a dealer above it is flagged only when the
# binomial chance of that many error rounds at the shift's rate is this small too.
TAIL = 0.00135


@dataclass(frozen=True)
class DealerCount:
    """What the audit counted for one dealer over one period (a shift, a day, a range)."""

    period: str  # "2026-12-01/grave", or the dates of a day or range
    dealer: str
    rounds: int
    error_rounds: int
    first_ts: dt.datetime | None = None  # the dealer's first round in the period
    tables: tuple[str, ...] = ()


@dataclass(frozen=True)
class DealerRate:
    """One dealer on the period's p-chart: the proportion of error rounds and its limits."""

    count: DealerCount
    expected: float  # p̄: error rounds / rounds over every dealer of the period
    upper: float  # UCL for this dealer's number of rounds
    lower: float  # LCL, at least 0

    @property
    def rate(self) -> float:
        return self.count.error_rounds / self.count.rounds if self.count.rounds else 0.0

    @property
    def above(self) -> bool:
        """Above the upper limit: out of control on the high side (the only side charted)."""
        return self.count.rounds > 0 and self.rate > self.upper

    @property
    def tail(self) -> float:
        """P(at least this many error rounds in this many rounds) at the shift's rate."""
        return binomial_tail(self.count.error_rounds, self.count.rounds, self.expected)

    @property
    def flagged(self) -> bool:
        """Above the limit, and that many error rounds as unlikely as the limit promises
        (TAIL): what raises dealer.error_rate."""
        return self.above and self.tail < TAIL


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed exactly over the k terms below it (k is the
    error rounds of one dealer: a few hundred at most), in logs so large n cannot overflow."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)
    below = sum(
        math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                 + i * lp + (n - i) * lq)
        for i in range(k)
    )
    return max(0.0, 1.0 - below)


def p_chart(counts: Sequence[DealerCount], sigmas: float = SIGMAS) -> list[DealerRate]:
    """The p-chart of one period: p̄ = Σ error rounds / Σ rounds over all the dealers given,
    and per dealer UCL = p̄ + k·√(p̄(1-p̄)/n), LCL = max(0, p̄ - k·√(p̄(1-p̄)/n)), n that
    dealer's rounds. The limits widen for a dealer with few rounds, so a short stint is not
    judged as strictly as a full shift. Counts of other periods must not be mixed in."""
    if len({c.period for c in counts}) > 1:
        raise ValueError("a p-chart is drawn over one period at a time")
    n = np.array([c.rounds for c in counts], dtype=np.float64)
    errors = np.array([c.error_rounds for c in counts], dtype=np.float64)
    total = n.sum()
    p = float(errors.sum() / total) if total else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = np.where(n > 0, np.sqrt(p * (1 - p) / np.where(n > 0, n, 1)), 0.0)
    upper = np.minimum(1.0, p + sigmas * sigma)
    lower = np.maximum(0.0, p - sigmas * sigma)
    return [
        DealerRate(c, p, float(u), float(lo))
        for c, u, lo in zip(counts, upper.tolist(), lower.tolist(), strict=True)
    ]


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def error_rate_findings(counts: Sequence[DealerCount]) -> list[Finding]:
    """dealer.error_rate for each dealer flagged on the p-chart of their period (one shift,
    `counts` holding every dealer of it: DealerRate.flagged); fingerprint
    code|shift|dealer, so the same dealer flagged for the same shift again is the same
    finding."""
    out = []
    for r in p_chart(counts):
        c = r.count
        if not r.flagged or c.first_ts is None:
            continue
        evidence = {
            "shift": c.period,
            "rounds": c.rounds,
            "error_rounds": c.error_rounds,
            "expected_rate": round(r.expected, 6),
            "upper_limit": round(r.upper, 6),
            "binomial_tail": float(f"{r.tail:.3g}"),
            "shift_rounds": sum(x.rounds for x in counts),
            "shift_error_rounds": sum(x.error_rounds for x in counts),
            "dealers": len(counts),
            "tables": list(c.tables),
        }
        out.append(
            Finding(
                CODE,
                None,
                f"Dealer {c.dealer}: {c.error_rounds} of {c.rounds} rounds with a finding "
                f"({_pct(r.rate)}) in shift {c.period}, above the shift's upper control limit "
                f"of {_pct(r.upper)} for that many rounds (the shift's rate: "
                f"{_pct(r.expected)})",
                {"error_rate_at_most": round(r.upper, 6), "expected_rate": round(r.expected, 6)},
                {"rounds": c.rounds, "error_rounds": c.error_rounds,
                 "error_rate": round(r.rate, 6)},
                None,
                fingerprint=fingerprint(CODE, c.period, c.dealer),
                ts=c.first_ts,
                evidence=evidence,
                dealer=c.dealer,
            )
        )
    return out
