"""The false-alarm rates of the codes that look across rounds and nights, on clean simulated
nights at full size (tests/audit/test_false_alarms.py checks the same on 10 nights).

    python bench/false_alarms.py [--nights 100] [--keep DIR]

`--nights` clean nights of four tables, two hours each (tests/helpers/clean_nights.py), are
simulated, ingested and audited in one database. Prints how much was searched (shoes and
pairs of shoes, dealer-shifts charted, the ordinary errors charted), the findings of each
code against what its stated rate allows, and the time; exits 1 when a code is over it.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers.clean_nights import clean_nights  # noqa: E402

from auditor.replay.dealers import TAIL  # noqa: E402

# Codes a clean night must not raise at all at these sizes (their stated rates are far below
# one in the shoes and seats searched here).
NONE_EXPECTED = ("shoe.repeated_order", "shoe.unshuffled", "play.side_bet_counting")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nights", type=int, default=100)
    ap.add_argument("--keep", type=Path, help="simulate and keep the nights in this folder")
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="false-alarms-"))
    base.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        t = clean_nights(base, args.nights)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    seconds = time.perf_counter() - started
    print(f"{t.nights} clean nights of 4 tables, 2 h each: simulated, ingested and audited in "
          f"{seconds:.0f} s ({platform.python_version()}, {platform.machine()})")
    print(f"  shoes searched: {t.shoes:,} ({t.shoe_pairs:,} pairs)")
    print(f"  dealer-shifts charted: {t.dealer_shifts:,}; ordinary errors charted: {t.errors:,}")
    failed = []
    for code in NONE_EXPECTED:
        n = t.found[code]
        print(f"  {code}: {n} (0 expected)")
        if n:
            failed.append(code)
    n, allowed = t.found["dealer.error_rate"], t.dealer_alarms_allowed
    print(f"  dealer.error_rate: {n} ({t.dealer_shifts * TAIL:.2f} expected at {TAIL:.3%} a "
          f"dealer-shift; at most {allowed} at 99.9%)")
    if n > allowed:
        failed.append("dealer.error_rate")
    if failed:
        print(f"over the stated rate: {', '.join(failed)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
