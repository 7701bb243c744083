"""Does the nightly audit cost more as the database's history grows? (issue 32: the day)

    python bench/history.py [--days 24] [--tables 12] [--hours 12] [--rate 0.01]
                            [--date 2026-10-01]

A property keeps one audit database for months (the report's "last 30 gaming days", the
versions of filed reports), and the nightly job ingests one more day into it and audits.
This bench simulates `--days` consecutive gaming days of one property from `--date`
(`simulate --days`: each table's stream goes on across the days; cached under bench/out/),
then, day by day into one database, ingests the day and audits it (`auditor.audit.run.audit`,
as `audit` and `nightly` call it), then audits it once more with nothing new. Each day brings
the same work, so a flat line means the audit's cost follows the day; a rising one, that it
follows the history. Printed per day: the rounds in the database, the CPU seconds (DuckDB's
threads included) of the ingest, of the audit and of the audit with nothing new, and the
audit's parts in wall seconds (bench/audit.py's PARTS); then the last day's figures against
the first's. Record them with the machine and the command in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from audit import time_parts  # noqa: E402  (bench/audit.py, beside this script)

from auditor import config  # noqa: E402
from auditor.audit.run import audit  # noqa: E402
from auditor.ingest.run import ingest  # noqa: E402
from auditor.simulate.history import day_files, simulate_days  # noqa: E402
from auditor.simulate.planted import NightSettings  # noqa: E402
from auditor.store import db, runs  # noqa: E402

OUT = ROOT / "bench" / "out"
spent: dict[str, float] = {}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def logs(args: argparse.Namespace) -> Path:
    """The simulated days, written once for these arguments."""
    folder = OUT / (f"history-{args.date}-{args.days}d-{args.tables}t-{args.hours}h-"
                    f"{args.rate}-s{args.seed}")
    if not (folder / ".done").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.parent.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        settings = NightSettings(tables=args.tables, hours=args.hours, seed=args.seed,
                                 deviation_rate=args.rate, day=args.date)
        simulate_days(folder, settings, days=args.days)
        (folder / ".done").touch()
        print(f"simulated {args.days} days in {time.perf_counter() - t:.0f} s", flush=True)
    return folder


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--days", type=int, default=24)
    p.add_argument("--tables", type=int, default=12)
    p.add_argument("--hours", type=float, default=12)
    p.add_argument("--rate", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--date", type=dt.date.fromisoformat, default=dt.date(2026, 10, 1),
                   help="the first gaming day (the last must be over by today's clock)")
    args = p.parse_args()
    if args.date + dt.timedelta(days=args.days) >= dt.date.today():
        p.error("the days must be over by today: an earlier --date or fewer --days")
    folder = logs(args)
    print(f"command: python bench/history.py {' '.join(sys.argv[1:])}")
    print(f"machine: {platform.node()} {platform.machine()}, Python {platform.python_version()}")
    time_parts(spent)
    conf = config.PropertyConfig()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        con = db.connect(Path(tmp) / "audit.duckdb")
        for day, files in sorted(day_files(folder).items()):
            c = _cpu()
            ingest(con, files, runs.start(con, "ingest", {}))
            ingest_cpu = _cpu() - c
            spent.clear()
            c, w = _cpu(), time.perf_counter()
            audit(con, runs.start(con, "audit", {}), conf)
            audit_cpu, audit_wall = _cpu() - c, time.perf_counter() - w
            parts = dict(spent)
            c = _cpu()
            audit(con, runs.start(con, "audit", {}), conf)
            again_cpu = _cpu() - c
            rounds = db.single(con, "SELECT count(*) FROM round_audits")[0]
            row = {"day": day, "rounds": rounds, "ingest": ingest_cpu, "audit": audit_cpu,
                   "wall": audit_wall, "again": again_cpu, "parts": parts}
            rows.append(row)
            shown = ", ".join(f"{k} {v:.2f}" for k, v in parts.items() if v >= 0.05)
            print(f"{day}: {rounds:>9,} rounds audited in all; CPU s: ingest {ingest_cpu:5.2f}, "
                  f"audit {audit_cpu:6.2f} ({audit_wall:5.2f} wall), with nothing new "
                  f"{again_cpu:6.2f}; wall s: {shown}", flush=True)
        con.close()
    first, last = rows[0], rows[-1]
    print(f"last day against the first ({len(rows)} days, {last['rounds']:,} rounds): "
          f"audit CPU {last['audit']:.2f} / {first['audit']:.2f} = "
          f"{last['audit'] / first['audit']:.1f}x; with nothing new {last['again']:.2f} / "
          f"{first['again']:.2f} = {last['again'] / first['again']:.1f}x; ingest "
          f"{last['ingest']:.2f} / {first['ingest']:.2f} = "
          f"{last['ingest'] / first['ingest']:.1f}x")
    grew = {k: last["parts"].get(k, 0.0) - first["parts"].get(k, 0.0)
            for k in last["parts"]}
    print("what grew (wall s, last day less the first): " + ", ".join(
        f"{k} {v:+.2f}" for k, v in sorted(grew.items(), key=lambda kv: -kv[1]) if abs(v) >= 0.05))


if __name__ == "__main__":
    main()
