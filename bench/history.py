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

    python bench/history.py --against TREE [--repeat 4] [same options]

compares two versions on the last day instead, in one sitting: the database of every day
but the last, ingested and audited once by this tree (cached under bench/out/), is copied for
each run; the run ingests the last day and audits twice (the day's audit, then one with
nothing new), in a process of its own with this tree's code or TREE's (a checkout with its
own .venv, e.g. `git worktree add /tmp/base <commit>`), alternating. Prints each run's CPU
seconds and parts, the medians and their ratio, and whether both found the same findings
(exit 1 if not).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from audit import time_parts  # bench/audit.py, beside this script

# The auditor is imported inside the functions: a child run imports the one of the tree it
# is run for (PYTHONPATH), the parent this tree's.
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
spent: dict[str, float] = {}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def logs(args: argparse.Namespace) -> Path:
    """The simulated days, written once for these arguments."""
    from auditor.simulate.history import simulate_days
    from auditor.simulate.planted import NightSettings

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
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--days", type=int, default=24)
    p.add_argument("--tables", type=int, default=12)
    p.add_argument("--hours", type=float, default=12)
    p.add_argument("--rate", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--date", type=dt.date.fromisoformat, default=dt.date(2026, 10, 1),
                   help="the first gaming day (the last must be over by today's clock)")
    p.add_argument("--against", type=Path,
                   help="another tree (with .venv): compare the last day's audit with it")
    p.add_argument("--repeat", type=int, default=4, help="runs of each tree (--against)")
    p.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(*args.child)
        return
    if args.against and not (args.against / ".venv" / "bin" / "python").exists():
        p.error(f"--against {args.against}: no .venv/bin/python there (a checkout with its "
                "own .venv: make .venv/bin/.installed in it, or link this tree's .venv)")
    sys.path.insert(0, str(ROOT))
    if args.date + dt.timedelta(days=args.days) >= dt.date.today():
        p.error("the days must be over by today: an earlier --date or fewer --days")
    folder = logs(args)
    print(f"command: python bench/history.py {' '.join(sys.argv[1:])}")
    print(f"machine: {platform.node()} {platform.machine()}, Python {platform.python_version()}")
    if args.against:
        compare(folder, args.against.resolve(), args.repeat)
        return
    from auditor import config
    from auditor.audit.run import audit
    from auditor.ingest.run import ingest
    from auditor.simulate.history import day_files
    from auditor.store import db, runs

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


# --- two trees on the last day (--against) ---------------------------------------------------


def _history_db(folder: Path) -> Path:
    """Every day but the last ingested and audited once by this tree, kept beside the logs."""
    from auditor import config
    from auditor.audit.run import audit
    from auditor.ingest.run import ingest
    from auditor.simulate.history import day_files
    from auditor.store import db, runs

    path = folder.with_name(folder.name + "-but-last.duckdb")
    if path.exists():
        return path
    days = sorted(day_files(folder).items())
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    t = time.perf_counter()
    con = db.connect(tmp)
    ingest(con, [f for _, files in days[:-1] for f in files], runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    con.close()
    tmp.rename(path)
    print(f"the first {len(days) - 1} days ingested and audited in "
          f"{time.perf_counter() - t:.0f} s: {path.name}", flush=True)
    return path


def child(copy: Path, folder: Path) -> None:
    """One run, in the tree PYTHONPATH names: the last day ingested into `copy`, audited,
    audited again; one JSON line."""
    from auditor import config
    from auditor.audit.run import audit
    from auditor.ingest.run import ingest
    from auditor.simulate.history import day_files
    from auditor.store import db, runs

    last = sorted(day_files(folder).items())[-1][1]
    con = db.connect(copy)
    ingest(con, last, runs.start(con, "ingest", {}))
    conf = config.PropertyConfig()
    time_parts(spent)
    out: dict[str, Any] = {}
    for step in ("day", "again"):
        spent.clear()
        c = _cpu()
        audit(con, runs.start(con, "audit", {}), conf)
        out[step] = {"cpu": _cpu() - c, "parts": dict(spent)}
    rows = con.execute(
        "SELECT fingerprint, status, code, message FROM current_findings ORDER BY ALL"
    ).fetchall()
    con.close()
    out["findings"] = len(rows)
    out["digest"] = hashlib.sha256(json.dumps(rows, default=str).encode()).hexdigest()
    print(json.dumps(out))


def compare(folder: Path, other: Path, repeat: int) -> None:
    """`repeat` runs of each tree on copies of the same database, alternating."""
    source = _history_db(folder)
    trees = [("before", other), ("after", ROOT)]
    for label, tree in trees:
        head = subprocess.run(["git", "-C", str(tree), "log", "-1", "--format=%h %s"],
                              capture_output=True, text=True).stdout.strip()
        print(f"{label}: {tree} at {head[:90] or 'an unknown commit'}", flush=True)
    got: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for i in range(repeat):
        for label, tree in trees if i % 2 == 0 else trees[::-1]:
            with tempfile.TemporaryDirectory(dir=OUT) as tmp:
                copy = Path(tmp) / "audit.duckdb"
                shutil.copyfile(source, copy)
                done = subprocess.run(
                    [str(tree / ".venv" / "bin" / "python"), str(Path(__file__).resolve()),
                     "--child", str(copy), str(folder)],
                    cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, check=True,
                    capture_output=True, text=True)
            r = json.loads(done.stdout.strip().splitlines()[-1])
            got[label].append(r)
            parts = ", ".join(f"{k} {v:.2f}" for k, v in r["day"]["parts"].items() if v >= 0.05)
            print(f"{label:>6}: the day's audit {r['day']['cpu']:5.2f} s CPU, with nothing new "
                  f"{r['again']['cpu']:5.2f}; {r['findings']:,} findings; wall s: {parts}",
                  flush=True)
    for step, name in (("day", "the day's audit"), ("again", "with nothing new")):
        before, after = (statistics.median(r[step]["cpu"] for r in got[k])
                         for k in ("before", "after"))
        print(f"{name}: CPU median {before:.2f} s before, {after:.2f} s after: "
              f"{before / after:.2f}x")
    same = {r["digest"] for rs in got.values() for r in rs}
    print("findings: " + ("identical in every run" if len(same) == 1
                          else f"DIFFER ({len(same)} distinct sets)"))
    if len(same) != 1:
        sys.exit(1)


if __name__ == "__main__":
    main()

