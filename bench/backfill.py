"""`bacc-audit backfill` on this machine: 1 worker against 2, the engine's cost a partition,
and what a year of a jurisdiction would take on N machines.

    python bench/backfill.py [--tables 64] [--hours 24] [--partition-mb 16]
                             [--workers 1,2] [--repeat 3] [--properties 40]
                             [--tables-per-property 100]

Generates (once, cached under bench/out/) the logs of `--tables` NJ mini-baccarat tables open
`--hours` hours with `bacc-audit simulate --bulk` (one table's gaming day is one file, about
5 MB and 1,420 rounds for 24 hours). For each worker count, in one run: starts a local Dask
cluster (timed apart), sends empty tasks through it (the engine's own cost a task), then
backfills the logs into a fresh database with the same partitions. Prints each partition's
cost, the throughput of each worker count and their ratio, the engine's overhead per
partition measured two ways, and the estimate of a year of `--properties` properties of
`--tables-per-property` tables on N machines, from the measured costs.

The worker counts run `--repeat` times in turn, each round after a measure of the machine's
own ceiling (the same pure-Python work in 1 and in 2 processes): on a shared machine the
ratio moves from one minute to the next, and the rounds and their median say how much.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OUT = ROOT / "bench" / "out"
TARGET_RATIO = 1.8
TARGET_OVERHEAD_S = 0.5


def _noop(i: int) -> int:
    return i


def _warm() -> None:
    import auditor.jobs.backfill  # noqa: F401  (DuckDB, pyarrow, the audit: once a worker)


def engine_overhead(client: Any, n: int = 200) -> dict[str, float]:
    """The engine's own cost a task: `n` empty tasks one after the other (submit, run on a
    worker, result back: the latency a partition pays), and `n` at once (the throughput).
    The workers import the tool first (a cost once a worker, not a partition)."""
    t = time.perf_counter()
    client.run(_warm)
    warm = time.perf_counter() - t
    for i in range(5):
        client.submit(_noop, i, pure=False).result()
    t = time.perf_counter()
    for i in range(n):
        client.submit(_noop, i, pure=False).result()
    serial = (time.perf_counter() - t) / n
    t = time.perf_counter()
    client.gather(client.map(_noop, range(n), pure=False))
    batch = (time.perf_counter() - t) / n
    return {"serial_s": serial, "batch_s": batch, "warm_s": warm}


def logs_for(tables: int, hours: float) -> Path:
    from auditor.simulate.bulk import simulate_bulk

    path = OUT / f"backfill-{tables}x{hours:g}"
    if not (path / "ground_truth.ndjson").exists():
        shutil.rmtree(path, ignore_errors=True)
        simulate_bulk(path, tables, hours, seed=11, deviation_rate=0.001)
        (path / "ground_truth.ndjson").rename(path.with_suffix(".truth"))
        (path / "ground_truth.ndjson").write_text("")  # the cache's mark, not a log
    return path


def run(logs: Path, workers: int, partition_bytes: int, threads: int) -> dict[str, Any]:
    from auditor import config
    from auditor.jobs import backfill
    from auditor.store import db, runs

    path = OUT / f"backfill-w{workers}.duckdb"
    for p in (path, path.with_name(path.name + ".wal")):
        p.unlink(missing_ok=True)
    t = time.perf_counter()
    eng = backfill.start_engine("dask", None, workers)
    start_s = time.perf_counter() - t
    eng.threads = threads  # DuckDB's and pyarrow's threads in each worker
    try:
        over = engine_overhead(eng.client)
        con = db.connect(path)
        run_id = runs.start(con, "backfill", {"bench": True})
        t = time.perf_counter()
        result = backfill.backfill(
            con, run_id, [logs], config.PropertyConfig(), eng,
            OUT / f"backfill-w{workers}.work", partition_bytes, merge_while_running=False,
        )
        wall = time.perf_counter() - t
        runs.finish(con, run_id, "done", 0, {})
        rounds = db.single(con, "SELECT count(*) FROM round_audits")[0]
        findings = db.single(con, "SELECT count(*) FROM current_findings")[0]
        con.close()
    finally:
        eng.close()
    for p in (path, path.with_name(path.name + ".wal")):
        p.unlink(missing_ok=True)
    return {
        "workers": workers, "start_s": start_s, "overhead": over, "wall": wall,
        "rounds": rounds, "findings": findings, "result": result,
        "costs": backfill.partition_costs(result),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", type=int, default=64)
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--partition-mb", type=int, default=16)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--threads", type=int, default=1,
                    help="DuckDB and pyarrow threads a worker (1: a worker is a core)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="rounds of the worker counts, each after the machine's own ceiling")
    ap.add_argument("--properties", type=int, default=40)
    ap.add_argument("--tables-per-property", type=int, default=100)
    args = ap.parse_args()
    import duckdb

    OUT.mkdir(parents=True, exist_ok=True)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, DuckDB {duckdb.__version__}, "
        f"dask {_version('dask')}, distributed {_version('distributed')}; load average "
        + ", ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    t = time.perf_counter()
    logs = logs_for(args.tables, args.hours)
    files = sorted(logs.glob("*.jsonl"))
    size = sum(f.stat().st_size for f in files)
    print(
        f"input: {len(files)} files, {size / 1e6:,.0f} MB ({args.tables} tables x "
        f"{args.hours:g} h, bulk simulator; ready in {time.perf_counter() - t:.1f} s)"
    )
    counts = [int(w) for w in args.workers.split(",")]
    rounds_of: list[tuple[float, float, float]] = []  # (machine ceiling, whole, workers)
    first: list[dict[str, Any]] = []
    for k in range(args.repeat):
        ceiling = machine_ceiling(min(counts), max(counts))
        runs_ = [run(logs, w, args.partition_mb << 20, args.threads) for w in counts]
        if k == 0:
            first = runs_
            report(runs_, args)
        a, b = runs_[0], runs_[-1]
        rounds_of.append((ceiling, (a["wall"] / b["wall"]),
                          a["result"].seconds["workers"] / b["result"].seconds["workers"]))
    if len(counts) >= 2:
        print(f"\n{max(counts)} workers / {min(counts)}, {args.repeat} rounds, each the "
              "machine's own ceiling first (the same pure-Python work in that many processes):")
        for i, (c, whole, part) in enumerate(rounds_of, 1):
            print(f"  round {i}: machine {c:.2f}x; backfill {part:.2f}x on the workers, "
                  f"{whole:.2f}x whole")
        med = [statistics.median(x[i] for x in rounds_of) for i in range(3)]
        print(f"  median: machine {med[0]:.2f}x; backfill {med[2]:.2f}x on the workers, "
              f"{med[1]:.2f}x whole (target {TARGET_RATIO}x)")
    estimate(first[0], args)


def _spin(n: int) -> float:
    """Pure-Python work of no I/O: what a core gives when nothing is shared."""
    t = time.perf_counter()
    h = b"x"
    for _ in range(n):
        h = hashlib.sha256(h).digest()
        sum(range(50))
    return time.perf_counter() - t


def machine_ceiling(one: int, many: int, n: int = 1_500_000) -> float:
    """How much faster `many` processes finish `many` equal pieces of pure-Python work than
    `one` process does (`many`/`one` on a machine whose cores are its own; less on a shared
    or oversubscribed one): the most a cluster of `many` workers can gain here."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(many) as pool:
        pool.map(_spin, [1000] * many)  # started and warm
        t = time.perf_counter()
        pool.map(_spin, [n] * many, chunksize=1)
        parallel = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(many // one):
        _spin(n * one)
    serial = time.perf_counter() - t
    return serial / parallel


def report(runs_: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """The first round of runs in full: each partition's costs, the throughputs, the
    engine's overhead."""
    for r in runs_:
        res = r["result"]
        costs = r["costs"]
        tot = [c["total_s"] for c in costs]
        busy = sum(tot)
        n = len(costs)
        part_wall = res.seconds["workers"]  # the partitions on the workers, merges after
        print(f"\n--- {r['workers']} worker(s) ---")
        o = r["overhead"]
        print(
            f"cluster start {r['start_s']:.2f} s, workers import the tool {o['warm_s']:.2f} s; "
            f"empty task {o['serial_s'] * 1e3:.1f} ms one at a time, "
            f"{o['batch_s'] * 1e3:.2f} ms each in a batch of 200"
        )
        print("partition  files     events   rounds  ingest_s  audit_s  total_s  cpu_s  merge_s")
        for c in costs:
            print(
                f"{c['index']:>9} {c['files']:>6} {c['events']:>10,} {c['rounds']:>8,} "
                f"{c['ingest_s']:>9.2f} {c['audit_s']:>8.2f} {c['total_s']:>8.2f} "
                f"{c['cpu_s']:>6.2f} {c['merge_s']:>8.2f}"
            )
        cpu = sum(c["cpu_s"] for c in costs)
        print(
            f"partition total_s: median {statistics.median(tot):.2f}, max {max(tot):.2f}; "
            f"per table-day {busy / _table_days(args):.3f} s of worker time; worker CPU "
            f"{cpu:.1f} s = {cpu / part_wall:.2f} cores over the workers' phase"
        )
        print(
            f"backfill {r['wall']:.2f} s: plan {res.seconds['plan']:.2f}, workers "
            f"{part_wall:.2f}, then the driver: merge {res.seconds['merge']:.2f}, across "
            f"{res.seconds['across']:.2f}, final audit {res.seconds['audit']:.2f}; "
            f"{r['rounds']:,} rounds, {r['findings']:,} findings"
        )
        r["throughput"] = r["rounds"] / r["wall"]
        r["part_throughput"] = r["rounds"] / part_wall
        # Engine overhead from the run itself: the workers' wall time not spent inside
        # run_partition, a partition (it includes waiting for the last partitions: an upper
        # bound).
        r["idle_per_partition"] = (part_wall * r["workers"] - busy) / n
        print(
            f"throughput: {r['throughput']:,.0f} rounds/s whole backfill, "
            f"{r['part_throughput']:,.0f} rounds/s on the workers; workers' time outside "
            f"run_partition {r['idle_per_partition']:.2f} s a partition (engine and waiting)"
        )
    if len(runs_) >= 2:
        a, b = runs_[0], runs_[-1]
        ratio = b["throughput"] / a["throughput"]
        pratio = b["part_throughput"] / a["part_throughput"]
        print(
            f"\n{b['workers']} workers / {a['workers']}: {ratio:.2f}x whole backfill, "
            f"{pratio:.2f}x on the workers (target {TARGET_RATIO}x)"
        )
        over = b["overhead"]["serial_s"]
        print(
            f"engine overhead a partition: {over * 1e3:.1f} ms (empty task round trip), "
            f"{b['idle_per_partition']:.2f} s (workers' time outside run_partition); target "
            f"< {TARGET_OVERHEAD_S} s"
        )


def estimate(r: dict[str, Any], args: argparse.Namespace) -> None:
    """A year of a jurisdiction, from the measured per-table-day costs of run `r`."""
    costs = r["costs"]
    res = r["result"]
    table_days = _table_days(args)
    worker_s = sum(c["total_s"] for c in costs) / table_days
    merge_s = res.seconds["merge"] / table_days
    final_s = (res.seconds["audit"] + res.seconds["across"]) / table_days
    over = r["overhead"]["serial_s"]
    per_part = max(1.0, table_days / max(1, len(costs)))  # table-days a partition
    d = args.properties * args.tables_per_property * 365
    rounds = d * r["rounds"] / table_days
    print(
        f"\nestimate: a year of {args.properties} properties x {args.tables_per_property} "
        f"tables = {d:,} table-days, {rounds / 1e9:.2f} G rounds; measured a table-day: "
        f"{worker_s:.3f} s of one worker, {merge_s:.3f} s of the driver's merge, "
        f"{final_s:.3f} s of its final audit"
    )
    work = d * (worker_s + over / per_part)
    driver = d * final_s
    merge = d * merge_s
    print("machines x cores   workers' part   driver merge (overlaps)   driver final   total")
    for n in (1, 4, 16, 64, 256):
        part = work / (n * (os.cpu_count() or 1))
        total = max(part, merge) + driver
        print(
            f"{n:>8} x {os.cpu_count():<2}      {_h(part):>12}   {_h(merge):>22}   "
            f"{_h(driver):>12}   {_h(total):>6}"
        )
    print(
        "one database for the jurisdiction: the driver's merge and final audit are serial; "
        f"per property ({args.properties} drivers, one database each), the driver's part is "
        f"{_h((merge + driver) / args.properties)}"
    )


def _table_days(args: argparse.Namespace) -> float:
    return args.tables * args.hours / 24


def _h(seconds: float) -> str:
    return f"{seconds / 3600:,.1f} h" if seconds >= 3600 else f"{seconds / 60:,.1f} min"


def _version(name: str) -> str:
    from importlib.metadata import version

    try:
        return version(name)
    except Exception:
        return "?"


if __name__ == "__main__":
    main()
