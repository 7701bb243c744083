"""The CPU a selection of the tests costs, in this tree and in another checkout, in one run.

    python bench/tests_cpu.py [--against /work/wt/base] [--repeat 2] [-n 2] \
        [-m "not (slow or stats or realtime or cluster)"] [PATH ...]

Runs `pytest -q -p no:cacheprovider` on the same paths and marker expression in each tree
(each with its own .venv, from its own folder), the two trees taking turns, `--repeat` times.
A run's CPU is user + sys of the pytest process and everything it waited for (the xdist
workers, DuckDB's threads, the subprocesses a test starts), read from `getrusage`'s children
figures: on a shared machine CPU seconds compare where wall time does not. Prints each run
with the load average at its start, then the median per tree, per test, and their ratio.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUMMARY = re.compile(r"(\d+) passed")


def run(tree: Path, args: argparse.Namespace) -> tuple[float, float, int, str]:
    """(CPU seconds, wall seconds, tests passed, the summary line) of one pytest run."""
    cmd = [str(tree / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-p",
           "no:cacheprovider", "-m", args.marks]
    cmd += ["-n", str(args.n), "--dist", "worksteal"] if args.n else ["-p", "no:xdist"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(cmd + args.paths, cwd=tree, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    found = SUMMARY.search(last)
    return cpu, wall, int(found.group(1)) if found else 0, last


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--against", type=Path, default=Path("/work/wt/base"))
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("-n", type=int, default=0, help="xdist workers (0: one process)")
    p.add_argument("-m", dest="marks", default="not (slow or stats or realtime or cluster)")
    p.add_argument("paths", nargs="*", default=["tests"])
    args = p.parse_args()
    trees = {"before": args.against.resolve(), "after": ROOT}
    print(f"vm: {os.cpu_count()} cores, python {platform.python_version()}")
    print(f"selection: -m {args.marks!r} {' '.join(args.paths)}"
          f"{f' -n {args.n} --dist worksteal' if args.n else ' (one process)'}")
    cpu: dict[str, list[float]] = {k: [] for k in trees}
    passed: dict[str, int] = {}
    for i in range(args.repeat):
        for name, tree in trees.items():
            load = os.getloadavg()[0]
            c, w, n, last = run(tree, args)
            cpu[name].append(c)
            passed[name] = n
            print(f"  {i + 1} {name:6} load {load:5.2f}  cpu {c:7.1f} s  wall {w:6.1f} s  {last}",
                  flush=True)
    med = {k: statistics.median(v) for k, v in cpu.items()}
    for name in trees:
        each = med[name] / passed[name] if passed[name] else float("nan")
        print(f"{name:6} median cpu {med[name]:7.1f} s for {passed[name]} tests: "
              f"{each:.3f} s a test")
    print(f"after/before {med['after'] / med['before']:.2f}; load at the end "
          f"{os.getloadavg()[0]:.2f}")
    sys.exit(0)


if __name__ == "__main__":
    main()
