"""What a poll of the follower costs (auditor.ingest.follow), as the live `watch` command uses it.

    python bench/follow.py [--files 500] [--lines 2] [--polls 50] [--prefill 2000]

Writes `--files` table logs (simulated tables, cached under bench/out/follow/), each holding its
first `--prefill` lines, lets a follower load them (the first poll: one batch ingest), then
appends `--lines` lines to every file before each of `--polls` polls, and times:
  first:  the first poll (every file judged whole, hashed once, loaded through batch ingest)
  idle:   a poll when nothing changed (a stat per file)
  grow:   a poll after every file gained its lines (read the new bytes, one transaction)
and prints milliseconds per poll (median, 90th percentile, worst) and per file. A growing
poll should cost what the new bytes cost, not what the files or the database weigh: compare
the first and last tenth of the polls.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from auditor.ingest.follow import Follower  # noqa: E402
from auditor.simulate.generator import Night, TableNight, TableSpec  # noqa: E402
from auditor.store import db, runs  # noqa: E402

OUT = ROOT / "bench" / "out" / "follow"


def table_lines(i: int, at_least: int) -> list[bytes]:
    """A simulated table's night (cached), at least `at_least` lines (nights repeat with
    their seqs going on, if one night is not enough)."""
    cache = OUT / f"T{i:04d}.jsonl"
    if not cache.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        night = Night(dt.date(2026, 11, 28), dt.timedelta(hours=-5), [])
        spec = TableSpec(f"T{i:04d}", f"P{i % 20}", "mini_baccarat", "NJ", "standard", 7, 1,
                         ("tie",), opens="18:00", closes="02:00")
        lines = TableNight(night, spec, random.Random(f"follow:{i}")).run()
        cache.write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines_b = cache.read_bytes().splitlines(keepends=True)
    if len(lines_b) < at_least:
        raise SystemExit(f"{cache}: {len(lines_b)} lines, fewer than the {at_least} asked")
    return lines_b


def ms(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(len(xs) * 0.9))]
    return (f"median {statistics.median(xs) * 1e3:7.1f} ms  p90 {p90 * 1e3:7.1f}  "
            f"max {xs[-1] * 1e3:7.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--lines", type=int, default=2, help="lines appended to each file per poll")
    ap.add_argument("--polls", type=int, default=50)
    ap.add_argument("--prefill", type=int, default=2000, help="lines in each file at start")
    args = ap.parse_args()

    need = args.prefill + args.lines * args.polls
    started = time.perf_counter()
    logs = [table_lines(i, need) for i in range(args.files)]
    print(f"{args.files} table logs ready ({time.perf_counter() - started:.1f} s)")

    work = Path(tempfile.mkdtemp(prefix="bench-follow-"))
    try:
        spool = work / "spool"
        spool.mkdir()
        paths = [spool / f"T{i:04d}.jsonl" for i in range(args.files)]
        handles = []
        for path, lines in zip(paths, logs, strict=True):
            path.write_bytes(b"".join(lines[: args.prefill]))
            handles.append(path.open("ab", buffering=0))
        con = db.connect(work / "audit.duckdb")
        follower = Follower(runs.start(con, "bench", {}), paths)

        t = time.perf_counter()
        first = follower.poll(con)
        first_s = time.perf_counter() - t
        print(f"first poll: {first_s:.2f} s for {first.events:,} events "
              f"({first_s / args.files * 1e3:.2f} ms a file)")

        idle = []
        for _ in range(10):
            t = time.perf_counter()
            follower.poll(con)
            idle.append(time.perf_counter() - t)

        grow = []
        events = 0
        at = args.prefill
        for _ in range(args.polls):
            for fh, lines in zip(handles, logs, strict=True):
                fh.write(b"".join(lines[at : at + args.lines]))
            at += args.lines
            t = time.perf_counter()
            p = follower.poll(con)
            grow.append(time.perf_counter() - t)
            events += p.events
        for fh in handles:
            fh.close()
        total = con.execute("SELECT count(*) FROM events").fetchall()[0][0]
        con.close()

        tenth = max(1, len(grow) // 10)
        print(f"idle poll ({args.files} files, nothing new): {ms(idle)}")
        print(f"growing poll ({args.files} files x {args.lines} lines): {ms(grow)}")
        print(f"  per file: {statistics.median(grow) / args.files * 1e6:.0f} us (median)")
        print(f"  first tenth {statistics.mean(grow[:tenth]) * 1e3:.1f} ms, last tenth "
              f"{statistics.mean(grow[-tenth:]) * 1e3:.1f} ms")
        print(f"events loaded by the growing polls: {events:,} (expected "
              f"{args.files * args.lines * args.polls:,}); in the database: {total:,}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
