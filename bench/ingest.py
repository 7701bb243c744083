"""Ingest speed against DuckDB's own bare load of the same file.

    python bench/ingest.py [--events 2000000] [--gzip]
    python bench/ingest.py --files 1000

Generates (once, cached under bench/out/) a log of simulated tables with at least the asked
number of events (or, with --files, that many files of one shoe each), then times, each in a
fresh database file:
  bare:   CREATE TABLE AS SELECT * FROM read_json(file)   (DuckDB's floor: parse + store)
  ingest: auditor.ingest.run.ingest(...)                 (validate, type, manifest, findings)
and prints events/s for both and the ratio ingest / bare (target: at most 1.5), and how many
of the lines the fast path took (the rest went through the per-line check).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import os
import platform
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from auditor.ingest import fast  # noqa: E402
from auditor.ingest.run import ingest  # noqa: E402
from auditor.simulate.generator import Night, TableNight, TableSpec  # noqa: E402
from auditor.store import db, runs  # noqa: E402


def make_log(path: Path, events: int, seed: int = 7) -> int:
    """Write whole simulated table nights until at least `events` lines; returns the count."""
    night = Night(dt.date(2026, 11, 28), dt.timedelta(hours=-5), [])
    written = 0
    i = 0
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt") as fh:
        while written < events:
            i += 1
            spec = TableSpec(f"T{i:04d}", f"P{i % 20}", "mini_baccarat", "NJ", "standard", 7,
                             1, ("tie", "dragon7", "panda8"), opens="18:00", closes="10:00")
            lines = TableNight(night, spec, random.Random(f"{seed}:{i}")).run()
            fh.write("\n".join(lines) + "\n")
            written += len(lines)
    return written


def make_shoes(folder: Path, files: int, seed: int = 11) -> int:
    """`files` table logs of one shoe each (a table opened for one shoe, then closed), the
    way a system that ships a file per shoe delivers them; returns the events written."""
    night = Night(dt.date(2026, 11, 28), dt.timedelta(hours=-5), [])
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    for i in range(1, files + 1):
        spec = TableSpec(f"S{i:05d}", f"P{i % 20}", "mini_baccarat", "NJ", "standard", 7,
                         1, ("tie", "dragon7", "panda8"), opens="20:00", closes="23:00")
        lines = TableNight(night, spec, random.Random(f"{seed}:{i}")).run()
        end = next(k for k, x in enumerate(lines) if '"type":"shoe_end"' in x)
        lines = lines[: end + 1]
        (folder / f"shoe-{i:05d}.jsonl").write_text("\n".join(lines) + "\n")
        written += len(lines)
    return written


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def bare_load(path: Path, work: Path) -> tuple[float, float]:
    con = duckdb.connect(str(work / "bare.duckdb"))
    source = str(path / "*.jsonl") if path.is_dir() else str(path)
    c = cpu_seconds()
    t = time.perf_counter()
    con.execute(
        f"CREATE TABLE t AS SELECT * FROM read_json('{source}', format='newline_delimited')"
    )
    elapsed = time.perf_counter() - t
    con.close()
    return elapsed, cpu_seconds() - c


class FastCount:
    """Lines the fast path took, counted around `auditor.ingest.fast.split_block`."""

    def __init__(self) -> None:
        self.typed = 0
        real = fast.split_block

        def split(*a: Any, **kw: Any) -> fast.Split:
            s = real(*a, **kw)
            self.typed += s.typed.num_rows if s.typed is not None else 0
            return s

        fast.split_block = split


def our_ingest(path: Path, work: Path) -> tuple[float, float, int]:
    con = db.connect(work / "audit.duckdb")
    run_id = runs.start(con, "bench", {})
    c = cpu_seconds()
    t = time.perf_counter()
    result = ingest(con, [path], run_id)
    elapsed = time.perf_counter() - t
    con.close()
    return elapsed, cpu_seconds() - c, result.events


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--files", type=int, help="that many files of one shoe each instead")
    ap.add_argument("--gzip", action="store_true", help="bench a .jsonl.gz file")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each; the best is kept")
    args = ap.parse_args()

    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    if args.files:
        path = out / f"shoes-{args.files}"
        if not path.exists():
            t = time.perf_counter()
            n = make_shoes(path, args.files)
            print(f"generated {n:,} events in {time.perf_counter() - t:.1f} s -> {path}")
        files = sorted(path.glob("*.jsonl"))
    else:
        path = out / f"bench-{args.events}.jsonl{'.gz' if args.gzip else ''}"
        if not path.exists():
            t = time.perf_counter()
            n = make_log(path, args.events)
            print(f"generated {n:,} events in {time.perf_counter() - t:.1f} s -> {path}")
        files = [path]
    opener = gzip.open if args.gzip else open
    lines = sum(1 for f in files for _ in opener(f, "rb"))
    size = sum(f.stat().st_size for f in files)

    bare, ours = [], []
    counted = FastCount()
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as d:
            bare.append(bare_load(path, Path(d)))
        with tempfile.TemporaryDirectory() as d:
            counted.typed = 0
            secs, cpu, loaded = our_ingest(path, Path(d))
            ours.append((secs, cpu))
            assert loaded == lines, (loaded, lines)
    (b, bc), (o, oc) = min(bare), min(ours)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, DuckDB {duckdb.__version__}, pyarrow {pa.__version__}")
    what = f"{len(files):,} files" if args.files else path.name
    print(f"input: {what}, {lines:,} events, {size / 1e6:.0f} MB")
    print(f"bare read_json load: {b:6.2f} s  {lines / b / 1e6:5.2f} M events/s  cpu {bc:6.2f} s")
    print(f"bacc-audit ingest:   {o:6.2f} s  {lines / o / 1e6:5.2f} M events/s  cpu {oc:6.2f} s"
          + (f"  ({o / len(files) * 1e3:.1f} ms a file)" if args.files else ""))
    print(f"fast path took {counted.typed:,} of {lines:,} lines; the per-line check the rest")
    print(f"ratio ingest / bare: {o / b:.2f} wall, {oc / bc:.2f} cpu  (target <= 1.5)")
    print(f"peak RSS of this process: {peak:,.0f} MB")


if __name__ == "__main__":
    main()
