"""Speed of the table pass: the table, pit and shoe checks over a simulated day.

    python bench/tables.py [--db AUDIT.duckdb] [--rounds 1000000] [--hours 24] [--json]

Without --db, builds (once, cached as bench/out/tables-<rounds>.duckdb) an ingested audit
database of simulated NJ mini-baccarat tables (auditor.simulate.bulk, deviations planted at
a rate of 0.001 a round). The database is copied to a temporary file first, so the original
is never written to; then auditor.audit.table_pass.compute runs once on the copy (it only
reads), with each loader of auditor.audit.load and .shoe_reads, and each check of
auditor.replay.shoes, .log_ends and .shoe_labels, timed on the way. Prints rounds, shoes,
findings, seconds (in all and per step) and the peak resident memory of this process.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from auditor.audit import load, shoe_reads, table_pass  # noqa: E402
from auditor.config import PropertyConfig  # noqa: E402
from auditor.ingest.run import ingest  # noqa: E402
from auditor.replay import log_ends, shoe_labels  # noqa: E402
from auditor.replay import shoes as shoe_checks  # noqa: E402
from auditor.replay import tables as table_checks  # noqa: E402
from auditor.simulate.bulk import simulate_bulk  # noqa: E402
from auditor.store import db, runs  # noqa: E402


def make_db(path: Path, rounds: int, hours: float, seed: int = 1) -> None:
    """Simulate enough tables for `rounds` rounds in `hours`, ingest them into `path`."""
    work = path.with_suffix(".logs")
    shutil.rmtree(work, ignore_errors=True)
    probe = simulate_bulk(work / "probe", 8, hours, seed=seed)
    shutil.rmtree(work / "probe")
    tables = max(1, math.ceil(rounds / (probe.rounds / 8)))
    t = time.perf_counter()
    made = simulate_bulk(work / "logs", tables, hours, seed=seed, deviation_rate=0.001)
    print(f"simulated {tables} tables, {made.rounds:,} rounds in "
          f"{time.perf_counter() - t:.0f} s", flush=True)
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    con = db.connect(tmp)
    t = time.perf_counter()
    result = ingest(con, [work / "logs"], runs.start(con, "bench", {}))
    con.close()
    print(f"ingested {result.events:,} events in {time.perf_counter() - t:.0f} s -> {path}",
          flush=True)
    tmp.rename(path)
    shutil.rmtree(work)


def timed(module: Any, names: list[str], spent: dict[str, float],
          calls: dict[str, int]) -> None:
    """Wrap module.<name> so each call adds its wall time to spent[name] (the pass calls
    them through the module, so the wrappers are what it runs)."""
    for name in names:
        real: Callable[..., Any] = getattr(module, name)

        @functools.wraps(real)
        def wrapper(*args: Any, _real: Callable[..., Any] = real, _name: str = name,
                    **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return _real(*args, **kw)
            finally:
                spent[_name] += time.perf_counter() - t
                calls[_name] += 1

        setattr(module, name, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", type=Path, help="an ingested audit database (default: build one)")
    ap.add_argument("--rounds", type=int, default=1_000_000)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    source: Path = args.db or ROOT / "bench" / "out" / f"tables-{args.rounds}.duckdb"
    if args.db is None and not source.exists():
        source.parent.mkdir(parents=True, exist_ok=True)
        make_db(source, args.rounds, args.hours)
    spent: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    loaders = sorted(n for n in vars(load) if n.startswith("load_")
                     or n == "tables_with_other_orders")
    timed(load, loaders, spent, calls)
    timed(shoe_reads, sorted(n for n in vars(shoe_reads) if n.startswith("load_")), spent,
          calls)
    timed(shoe_checks, ["shoe_findings"], spent, calls)
    timed(log_ends, ["log_end_findings"], spent, calls)
    timed(shoe_labels, ["label_findings"], spent, calls)
    timed(table_checks, ["undeclared_runs"], spent, calls)
    with tempfile.TemporaryDirectory(prefix="bench-tables-", dir=source.parent) as tmp:
        copy = Path(tmp) / "audit.duckdb"
        shutil.copyfile(source, copy)
        con = db.connect(copy)
        t = time.perf_counter()
        found, stats, _ = table_pass.compute(con, PropertyConfig())
        seconds = time.perf_counter() - t
        con.close()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    summary = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "database": str(source),
        "rounds_with_payout_order": stats["rounds_with_payout_order"],
        "shoes": stats["shoes"],
        "findings": len(found),
        "seconds": round(seconds, 2),
        "steps": {n: {"seconds": round(spent[n], 2), "calls": calls[n]} for n in spent},
        "peak_rss_mb": round(peak_mb),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"{summary['rounds_with_payout_order']:,} rounds with payments, {stats['shoes']:,} "
          f"shoes, {len(found):,} findings: compute {seconds:.2f} s, peak {peak_mb:.0f} MB")
    for name, s in sorted(summary["steps"].items(), key=lambda kv: -kv[1]["seconds"]):
        print(f"  {name:28s} {s['seconds']:7.2f} s  ({s['calls']} calls)")


if __name__ == "__main__":
    main()
