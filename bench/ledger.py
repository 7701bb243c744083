"""What the ledger costs (docs/ledger.md), measured in one run.

    python bench/ledger.py [--tables 200] [--watch-tables 40] [--watch-hours 2] [--poll 30]

1. A day of `--tables` tables x 24 h from `bacc-audit simulate --bulk` (about 1,420 rounds a
   table), ingested and audited in this process as `ingest` and `audit` do (each in its run,
   sealed at its end): the seals' time against ingest + audit without them; then the digest
   of every piece two ways (`raw` and the line numbers, as sealed; every column of every
   event, as a digest without reparse would need); then `verify` (the whole check) and
   `verify --fast` right after.
2. `watch` over a night of `--watch-tables` tables (the planted simulator) written into its
   spool `--poll` simulated seconds at a time, one poll each, as fast as they go: the
   seals against the polls' ingest + audit, sealing after every poll that wrote
   (`seal_every` 0) and at most once a second (its default).

Prints the figures, the machine and the command; record them in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from auditor import config  # noqa: E402
from auditor.audit.run import audit  # noqa: E402
from auditor.ingest.run import ingest  # noqa: E402
from auditor.jobs import verify as verifying  # noqa: E402
from auditor.jobs.watch import Watch, WatchOptions  # noqa: E402
from auditor.simulate.feed import schedule  # noqa: E402
from auditor.simulate.planted import simulate  # noqa: E402
from auditor.store import db, ledger, ledger_rows, runs  # noqa: E402

OUT = ROOT / "bench" / "out"
BIN = Path(sys.executable).parent / "bacc-audit"


class Timed:
    """ledger.seal, timed wherever it is called (runs.recorded, watch)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self.real = ledger.seal

    def __call__(self, *args, **kw):
        started = time.perf_counter()
        try:
            return self.real(*args, **kw)
        finally:
            self.seconds += time.perf_counter() - started
            self.calls += 1


def day(tables: int) -> dict[str, float]:
    logs = OUT / f"ledger-bulk-{tables}"
    if not (logs / "ground_truth.ndjson").exists():
        shutil.rmtree(logs, ignore_errors=True)
        subprocess.run([str(BIN), "simulate", "--bulk", "--out", str(logs), "--tables",
                        str(tables), "--hours", "24"], check=True, stdout=subprocess.DEVNULL)
    path = OUT / f"ledger-bulk-{tables}.duckdb"
    for p in path.parent.glob(path.name + "*"):
        p.unlink()
    timer = Timed()
    ledger.seal = timer
    conf = config.load(None)
    con = db.connect(path)
    try:
        started = time.perf_counter()
        with runs.recorded(con, "ingest", {}) as run:
            got = ingest(con, sorted(logs.glob("*.jsonl")), run.id)
        after_ingest = time.perf_counter()
        with runs.recorded(con, "audit", {}) as run:
            audit(con, run.id, conf)
        done = time.perf_counter()
        ledger.seal = timer.real
        events = got.events
        rounds = con.execute("SELECT count(*) FROM round_audits").fetchall()[0][0]
        leaves = con.execute("SELECT count(*) FROM ledger").fetchall()[0][0]
        pieces = ledger_rows.pieces(con, "true")
        t = time.perf_counter()
        ledger_rows.digests(con, pieces)
        raw_digest = time.perf_counter() - t
        t = time.perf_counter()
        _every_column_digest(con)
        every_column = time.perf_counter() - t
        t = time.perf_counter()
        full = verifying.verify(con)
        full_s = time.perf_counter() - t
        t = time.perf_counter()
        with runs.recorded(con, "verify", {}) as run:
            verifying.record(con, full, run.id)
        fast = verifying.verify(con, fast=True)
        fast_s = time.perf_counter() - t
    finally:
        ledger.seal = timer.real
        con.close()
    work = done - started - timer.seconds
    return {
        "tables": tables, "rounds": rounds, "events": events, "leaves": leaves,
        "ingest_s": after_ingest - started, "audit_s": done - after_ingest,
        "seal_s": timer.seconds, "seals": timer.calls, "seal_share": timer.seconds / work,
        "digest_raw_s": raw_digest, "digest_every_column_s": every_column,
        "verify_s": full_s, "verify_ok": full.ok, "verify_fast_s": fast_s,
        "verify_fast_ok": fast.ok, "db_gb": path.stat().st_size / 1e9,
    }


def _every_column_digest(con) -> None:
    """Every column of every event through hashlib, in line order: the cost of a digest of
    every column (its buffers as they come, not a canonical form: the cost is the point)."""
    h = hashlib.sha256()
    for rb in con.sql("SELECT * FROM events ORDER BY source_id, line_no").to_arrow_reader(
            500_000):
        for col in rb.columns:
            for buf in col.buffers():
                if buf is not None:
                    h.update(memoryview(buf))


def watched(tables: int, hours: float, poll: float, seal_every: float) -> dict[str, float]:
    night = OUT / f"ledger-watch-{tables}-{hours}"
    if not night.exists():
        simulate(night, tables, hours, seed=3, deviation_rate=0.01)
    files = sorted(p for p in night.iterdir() if p.name.endswith(".jsonl")
                   and ".resent." not in p.name)
    lines = schedule(files, 1.0)
    work = OUT / f"ledger-watch-{tables}-{hours}-run"
    shutil.rmtree(work, ignore_errors=True)
    spool = work / "spool"
    spool.mkdir(parents=True)
    con = db.connect(work / "live.duckdb")
    conf = config.load(None)
    try:
        with runs.recorded(con, "watch", {}) as run:
            w = Watch(con, spool, conf, run.id, WatchOptions(rescan=0, sweep_every=60,
                                                               seal_every=seal_every))
            handles: dict[str, object] = {}
            total, polls, i = 0.0, 0, 0
            until = lines[0].at
            while i < len(lines):
                until += poll
                while i < len(lines) and lines[i].at <= until:
                    fh = handles.get(lines[i].name)
                    if fh is None:
                        fh = handles[lines[i].name] = (spool / lines[i].name).open("ab")
                    fh.write(lines[i].data)  # type: ignore[attr-defined]
                    i += 1
                for fh in handles.values():
                    fh.flush()  # type: ignore[attr-defined]
                t = time.perf_counter()
                w.step()
                total += time.perf_counter() - t
                polls += 1
            for fh in handles.values():
                fh.close()  # type: ignore[attr-defined]
        v = verifying.verify(con)
    finally:
        con.close()
    return {"tables": tables, "hours": hours, "polls": polls, "lines": len(lines),
            "seal_every": seal_every,
            "step_s": total, "seal_s": w.seal_seconds,
            "seal_share": w.seal_seconds / (total - w.seal_seconds), "verify_ok": v.ok}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument("--watch-tables", type=int, default=40)
    ap.add_argument("--watch-hours", type=float, default=2.0)
    ap.add_argument("--poll", type=float, default=30.0, help="simulated seconds a poll")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cpus, "
          f"python {platform.python_version()}; load {os.getloadavg()[0]:.1f}")
    print(f"command: python bench/ledger.py {' '.join(sys.argv[1:])}".rstrip())
    d = day(args.tables)
    print(f"day: {d['tables']} tables, {d['rounds']:,} rounds, {d['events']:,} events, "
          f"{d['leaves']:,} leaves, database {d['db_gb']:.2f} GB")
    print(f"  ingest {d['ingest_s']:.1f} s + audit {d['audit_s']:.1f} s, of which "
          f"{d['seals']} seals {d['seal_s']:.2f} s: seal / (ingest + audit) = "
          f"{100 * d['seal_share']:.1f}%")
    print(f"  digest of every piece: raw and line numbers {d['digest_raw_s']:.2f} s; every "
          f"column of every event {d['digest_every_column_s']:.2f} s")
    print(f"  verify (whole) {d['verify_s']:.1f} s ok={d['verify_ok']}; verify --fast right "
          f"after {d['verify_fast_s']:.1f} s ok={d['verify_fast_ok']}")
    for every in (0.0, 1.0):
        w = watched(args.watch_tables, args.watch_hours, args.poll, every)
        print(f"watch (seal_every {every:g} s): {w['tables']} tables x {w['hours']} h, "
              f"{w['lines']:,} lines in {w['polls']} polls: polls {w['step_s']:.1f} s, of "
              f"which seals {w['seal_s']:.2f} s: seal / (ingest + audit) = "
              f"{100 * w['seal_share']:.1f}%; verify ok={w['verify_ok']}")


if __name__ == "__main__":
    main()
