"""A Macau-scale gaming day, end to end: simulate, ingest, audit, report.

    python bench/scale.py [--rounds 10000000] [--hours 24] [--rate 0.001]
                          [--memory-limit 3GB] [--work bench/out/scale] [--keep-logs]
                          [--skip STAGES] [--keep-ingested]

Each stage runs as its own process, the way the nightly job runs the commands, and is timed
with its peak memory (the process's maximum resident set, from wait4):
  simulate  auditor.simulate.bulk (the logs of N tables for H hours; not part of the day)
  bare      DuckDB's own load of the same files: CREATE TABLE AS SELECT * FROM read_json(glob)
  ingest    bacc-audit ingest LOGS
  audit     bacc-audit audit
  report    bacc-audit report --date DAY (the whole gaming day as one PDF)
Every bacc-audit stage runs with BACC_AUDIT_MEMORY_LIMIT (DuckDB spills beyond it).
Prints one line per stage, then the day's total against the 10-minute and 4 GB targets and
the ratio (ingest + audit) / bare against the target of 2. `--json` prints the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DAY = "2026-12-01"
TARGET_SECONDS = 10 * 60  # ingest + audit + report (issue 13)
TARGET_RSS_MB = 4096
TARGET_RATIO = 2.0


def run_stage(name: str, argv: list[str], work: Path, env: dict[str, str] | None = None) -> dict:
    """Run one stage as a child process; its wall time, CPU time and peak RSS (wait4)."""
    out_path, err_path = work / f"{name}.out", work / f"{name}.err"
    started = time.perf_counter()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        child = subprocess.Popen(argv, env={**os.environ, **(env or {})}, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    return {
        "stage": name,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "exit": os.waitstatus_to_exitcode(status),
        "stdout_tail": out_path.read_text(errors="replace").strip().splitlines()[-3:],
        "stderr_tail": err_path.read_text(errors="replace").strip().splitlines()[-3:],
    }


def stage_argv(*args: object) -> list[str]:
    """This script run as one stage (see `_stage`)."""
    return [sys.executable, str(Path(__file__).resolve()), "_stage", *map(str, args)]


def _stage(name: str, *args: str) -> None:
    """The stages that are not bacc-audit commands, each in a child process of its own."""
    if name == "simulate":
        from auditor.simulate.bulk import simulate_bulk

        logs, tables, hours, seed, rate = args
        r = simulate_bulk(logs, int(tables), float(hours), seed=int(seed),
                          deviation_rate=float(rate))
        print(json.dumps({"rounds": r.rounds, "events": r.events,
                          "deviations": len(r.deviations), "files": len(r.files),
                          "rounds_per_s": round(r.rounds_per_second)}))
    elif name == "bare":
        import duckdb

        logs, db = args
        con = duckdb.connect(db)
        con.execute("SET enable_progress_bar = false")
        # DuckDB's defaults: the schema from a sample of the files (union_by_name, which
        # opens every file first, took 99.5 s instead of 33.8 s for the 1M-round day).
        con.execute(
            "CREATE TABLE t AS SELECT * FROM read_json(?, format='newline_delimited')",
            [str(Path(logs) / "*.jsonl")],
        )
        print(con.execute("SELECT count(*) FROM t").fetchall()[0][0])


def bacc_audit(*args: str) -> list[str]:
    return [sys.executable, "-m", "auditor.cli.app", *args]


def calibrate(hours: float, seed: int, work: Path) -> float:
    """Rounds one table deals in `hours` (the generator's pace), from a small run."""
    from auditor.simulate.bulk import simulate_bulk

    probe = work / "probe"
    r = simulate_bulk(probe, 8, hours, seed=seed)
    shutil.rmtree(probe)
    return r.rounds / 8


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=10_000_000)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--rate", type=float, default=0.001, help="deviation rate per round")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--memory-limit", default="3GB", help="BACC_AUDIT_MEMORY_LIMIT")
    ap.add_argument("--work", type=Path, default=ROOT / "bench" / "out" / "scale")
    ap.add_argument("--keep-logs", action="store_true", help="reuse logs already simulated")
    ap.add_argument("--skip", default="", help="stages to skip, e.g. bare,report")
    ap.add_argument(
        "--keep-ingested",
        action="store_true",
        help="after ingest, keep a copy of the database as ingested (ingested.duckdb); with "
        "--skip ingest, start the audit from that copy instead of ingesting again",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    work: Path = args.work
    logs, db = work / "logs", work / "audit.duckdb"
    work.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    per_table = calibrate(args.hours, args.seed, work)
    tables = max(1, math.ceil(args.rounds / per_table))
    env = {"BACC_AUDIT_DB": str(db), "BACC_AUDIT_MEMORY_LIMIT": args.memory_limit}
    for stale in (db, Path(f"{db}.wal"), work / "bare.duckdb", work / "day.pdf"):
        stale.unlink(missing_ok=True)
    ingested = work / "ingested.duckdb"
    if args.keep_ingested and "ingest" in skip and ingested.exists():
        shutil.copyfile(ingested, db)

    stages: list[dict] = []

    def stage(name: str, argv: list[str], stage_env: dict[str, str] | None = None) -> None:
        if name in skip:
            return
        s = run_stage(name, argv, work, stage_env)
        stages.append(s)
        if not args.json:
            print(
                f"{name:9s} {s['seconds']:9.1f} s  cpu {s['cpu_seconds']:9.1f} s  "
                f"peak {s['peak_rss_mb']:6d} MB  exit {s['exit']}  {' | '.join(s['stdout_tail'])}",
                flush=True,
            )
            if s["exit"] not in (0, 1):
                print("   stderr:", " | ".join(s["stderr_tail"]), flush=True)

    if not (args.keep_logs and logs.is_dir()):
        shutil.rmtree(logs, ignore_errors=True)
        stage("simulate", stage_argv("simulate", logs, tables, args.hours, args.seed, args.rate))
    size = sum(p.stat().st_size for p in logs.glob("*.jsonl"))
    files = len(list(logs.glob("*.jsonl")))
    if not args.json:
        print(f"logs: {files} files, {size / 1e9:.2f} GB, {tables} tables x {args.hours:g} h",
              flush=True)
    stage("bare", stage_argv("bare", logs, work / "bare.duckdb"))
    (work / "bare.duckdb").unlink(missing_ok=True)
    stage("ingest", bacc_audit("ingest", str(logs), "--json"), env)
    if args.keep_ingested and "ingest" not in skip:
        shutil.copyfile(db, ingested)
    stage("audit", bacc_audit("audit", "--json"), env)
    stage("report", bacc_audit("report", "--date", DAY, "--out", str(work / "day.pdf")), env)

    by = {s["stage"]: s for s in stages}
    day = [by[n] for n in ("ingest", "audit", "report") if n in by]
    total = sum(s["seconds"] for s in day)
    peak = max((s["peak_rss_mb"] for s in day), default=0)
    ratio = (
        (by["ingest"]["seconds"] + by["audit"]["seconds"]) / by["bare"]["seconds"]
        if {"ingest", "audit", "bare"} <= by.keys()
        else None
    )
    summary = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "rounds_asked": args.rounds,
        "tables": tables,
        "hours": args.hours,
        "log_files": files,
        "log_bytes": size,
        "memory_limit": args.memory_limit,
        "stages": stages,
        "day_seconds": round(total, 1),
        "day_peak_rss_mb": peak,
        "ingest_audit_over_bare": round(ratio, 2) if ratio else None,
        "db_bytes": db.stat().st_size if db.exists() else 0,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(
        f"day (ingest+audit+report): {total:.1f} s (target {TARGET_SECONDS} s: "
        f"{'met' if total < TARGET_SECONDS else 'MISSED'}), peak {peak} MB (target "
        f"{TARGET_RSS_MB} MB: {'met' if peak < TARGET_RSS_MB else 'MISSED'})"
    )
    if ratio:
        print(
            f"(ingest+audit)/bare: {ratio:.2f} (target {TARGET_RATIO:g}: "
            f"{'met' if ratio <= TARGET_RATIO else 'MISSED'})"
        )
    print(f"database: {summary['db_bytes'] / 1e9:.2f} GB")


if __name__ == "__main__":
    if sys.argv[1:2] == ["_stage"]:
        _stage(*sys.argv[2:])
    else:
        main()
