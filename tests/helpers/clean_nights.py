"""Clean simulated nights for the false-alarm rates of the codes that look across rounds and
nights: tests/audit/test_false_alarms.py audits a few of them, bench/false_alarms.py the full
hundred. Clean means none of the patterns those codes look for is planted; each night (four
tables, two hours) carries the ordinary deviations of a night (rate 0.02), so that the dealers'
chart has errors to chart. The nights follow one another, each stream going on from the last.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from auditor.audit.run import audit
from auditor.config import PropertyConfig
from auditor.ingest.run import ingest
from auditor.replay.dealers import TAIL
from auditor.simulate.planted import simulate
from auditor.store import db, runs
from helpers.nights import continue_streams

FIRST_DAY = dt.date(2026, 6, 1)


@dataclass(frozen=True)
class Tally:
    """What the audit of the nights found, and how much it searched."""

    nights: int
    found: Counter[str]  # standing findings by code
    shoes: int  # every shoe's order searched against every other's
    dealer_shifts: int  # the dealer-shifts the p-chart charted

    @property
    def shoe_pairs(self) -> int:
        return self.shoes * (self.shoes - 1) // 2

    @property
    def errors(self) -> int:
        """The ordinary deviations charted (draw and settlement findings)."""
        return sum(n for code, n in self.found.items() if code.startswith(("draw.", "settle.")))

    @property
    def dealer_alarms_allowed(self) -> int:
        """dealer.error_rate findings a correct chart stays within, at 99.9%."""
        return poisson_bound(self.dealer_shifts * TAIL)


def poisson_bound(lam: float, p: float = 0.001) -> int:
    """The smallest k with P(Poisson(lam) > k) < p."""
    k, term, total = 0, math.exp(-lam), math.exp(-lam)
    while 1 - total >= p:
        k += 1
        term *= lam / k
        total += term
    return k


def clean_nights(base: Path, nights: int) -> Tally:
    """`nights` clean nights from FIRST_DAY on, simulated under `base`, ingested and audited
    in one database there."""
    tops: dict[str, int] = {}
    files: list[Path] = []
    for i in range(nights):
        folder = base / f"n{i:03d}"
        r = simulate(folder, 4, 2, seed=1000 + i, deviation_rate=0.02,
                     day=FIRST_DAY + dt.timedelta(days=i))
        r.ground_truth.unlink()
        continue_streams(folder, tops)
        files += sorted(folder.glob("*.jsonl"))
    con = db.connect(base / "a.duckdb")
    try:
        ingest(con, files, runs.start(con, "ingest", {}))
        audit(con, runs.start(con, "audit", {}), PropertyConfig())
        found = Counter(dict(con.execute(
            "SELECT code, count(*) FROM current_findings GROUP BY code").fetchall()))
        shoes = con.execute("SELECT count(*) FROM shoe_orders").fetchall()[0][0]
        dealer_shifts = con.execute(
            "SELECT count(*) FROM (SELECT DISTINCT r.dealer, "
            "date_trunc('day', r.ts - INTERVAL 6 HOUR) FROM events r "
            "WHERE r.type = 'round_start' AND r.dealer IS NOT NULL)").fetchall()[0][0]
    finally:
        con.close()
    return Tally(nights, found, shoes, dealer_shifts)
