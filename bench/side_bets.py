"""The false-alarm rate of play.side_bet_counting on clean simulated nights (docs/side-bets.md).

    python bench/side_bets.py [--nights 100] [--hours 8] [--draws 2000] [--seed 0]

Two measurements:
  audit:     `--nights` nights of one Dragon 7 table (NJ mini-baccarat, no_vig_dragon7: Dragon 7
             and Panda 8 wagers), `--hours` from 22:00 (8: the whole grave shift), dealt by the
             simulator's regular bettors, who wager on each side bet at random (12% of their
             wagers, 5, 10 or 25); ingested and audited as a real night is. Prints the
             seat-shift-bets tested, the findings raised, and how often z passed 2 and 3
             against the normal tails.
  resampled: for every seat-shift-bet of those nights (its rounds and true counts as the audit
             saw them), `--draws` more seats wagering the same way at random (12%, 5/10/25),
             each tested as the audit tests: the share flagged, against the stated rate. This
             is the many tests a rate of 1e-5 needs to be seen at all.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import sys
import tempfile
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from auditor import config  # noqa: E402
from auditor.audit.run import audit  # noqa: E402
from auditor.audit.sidebets import seat_series  # noqa: E402
from auditor.ingest.run import ingest  # noqa: E402
from auditor.replay.sidebets import (  # noqa: E402
    FALSE_ALARM,
    MIN_ROUNDS,
    MIN_SIDE_WAGERS,
    Z_THRESHOLD,
    average_ranks,
    seat_test,
)
from auditor.rules.counts import load_counts  # noqa: E402
from auditor.simulate.generator import Night, write_night  # noqa: E402
from auditor.simulate.layout import SIM_DATE, mini_specs  # noqa: E402
from auditor.store import db, runs  # noqa: E402

SIDE_RATE = 0.12  # as the generator's regular bettors (TableNight.wagers)
STAKES = np.array([5, 10, 25])


CUTS = (3.0, 4.0, Z_THRESHOLD)


def resampled(xs: list[float], draws: int, rng: np.random.Generator) -> tuple[int, list[int]]:
    """(tests, how many reached each of CUTS) over `draws` random seats at these rounds: each
    round a side wager with probability SIDE_RATE of 5, 10 or 25, tested as seat_test does
    (ranks, ties averaged; z = rho * sqrt(n - 1)); the last cut is the flag."""
    n = len(xs)
    rx = np.array(average_ranks(xs))
    dx = rx - (n + 1) / 2
    sxx = float(dx @ dx)
    y = np.where(rng.random((draws, n)) < SIDE_RATE, rng.choice(STAKES, (draws, n)), 0)
    # Average ranks of the four levels, row by row: those below, then the middle of the ties.
    ry = np.zeros((draws, n))
    below = np.zeros((draws, 1))
    for level in (0, *STAKES):
        eq = y == level
        k = eq.sum(axis=1, keepdims=True)
        ry = np.where(eq, below + (k + 1) / 2, ry)
        below = below + k
    dy = ry - (n + 1) / 2
    syy = (dy * dy).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (dy @ dx) / np.sqrt(sxx * syy) * math.sqrt(n - 1)
    tested = (y > 0).sum(axis=1) >= MIN_SIDE_WAGERS
    return int(tested.sum()), [int((tested & (z >= cut)).sum()) for cut in CUTS]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nights", type=int, default=100)
    ap.add_argument("--hours", type=int, default=8, help="whole hours from 22:00, at most 8")
    ap.add_argument("--draws", type=int, default=2000, help="random seats per seat-shift-bet")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="bench-side-bets-"))
    logs = work / "logs"
    for k in range(args.nights):
        spec = mini_specs(f"D{k:03d}", "P1", 1, 1)
        spec.opens, spec.closes = "22:00", f"{(22 + args.hours) % 24:02d}:00"
        write_night(Night(SIM_DATE, dt.timedelta(hours=-5), [spec]), logs,
                    seed=args.seed * 100_000 + k)
    con = db.connect(work / "a.duckdb")
    ingest(con, [logs], runs.start(con, "ingest", {}))
    res = audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    raised = con.execute("SELECT count(*) FROM current_findings "
                         "WHERE code = 'play.side_bet_counting'").fetchall()[0][0]
    series = seat_series(con, config.PropertyConfig(), load_counts())
    con.close()
    tests = [t for s in series if (t := seat_test(s.rounds)).rounds >= MIN_ROUNDS
             and t.side_wagers >= MIN_SIDE_WAGERS]
    zs = [t.z for t in tests if t.z is not None]
    print(f"audit: {args.nights} nights of a Dragon 7 table, {args.hours} h each "
          f"({time.perf_counter() - started:.0f} s)")
    print(f"  seat-shift-bets tested: {res.tables['side_bets']['seat_shift_bets_tested']}; "
          f"play.side_bet_counting raised: {raised}")
    for cut in (2.0, 3.0):
        share = sum(z >= cut for z in zs) / max(len(zs), 1)
        print(f"  z >= {cut}: {sum(z >= cut for z in zs)} ({share:.3%}; "
              f"normal {1 - NormalDist().cdf(cut):.3%})")
    print(f"  largest z: {max(zs, default=float('nan')):.2f} (flagged from {Z_THRESHOLD:.3f})")

    rng = np.random.default_rng(args.seed)
    total, reached = 0, [0] * len(CUTS)
    for s in series:
        if len(s.rounds) < MIN_ROUNDS:
            continue
        n, got = resampled([o.true for o in s.rounds], args.draws, rng)
        total, reached = total + n, [a + b for a, b in zip(reached, got, strict=True)]
    if not total:
        return
    for cut, k in zip(CUTS[:-1], reached, strict=False):
        print(f"  resampled z >= {cut}: {k / max(total, 1):.2e} "
              f"(normal {1 - NormalDist().cdf(cut):.2e})")
    flagged = reached[-1]
    rate = flagged / max(total, 1)
    upper = (flagged + 3) / max(total, 1) if flagged == 0 else rate + 2 * math.sqrt(
        flagged) / max(total, 1)
    print(f"resampled: {total:,} random seat-shift-bets at the same rounds: {flagged} flagged "
          f"({rate:.2e}; about {upper:.1e} at most; stated {FALSE_ALARM:.0e}) "
          f"({time.perf_counter() - started:.0f} s in all)")


if __name__ == "__main__":
    main()
