"""The slowest tests of `make test`, each alone, in this tree and in another (issue 27).

For each test id given, runs `python -m pytest -q -p no:cacheprovider -p no:xdist ID` (or on
`--workers N` xdist workers, `--dist worksteal` as `make test`: a module's tests split) with
each tree's own `.venv` and the tree as the current folder, the trees alternating (--repeat
times), and prints for each run its wall time, its CPU time (user + sys of the pytest process
and everything it started: subprocesses, cluster workers) and the load average at its start.
A machine shared with other work distorts wall time; CPU time is the steadier figure.

    python bench/slow_tests.py --against /work/wt/base --repeat 2 \\
        tests/jobs/test_watch.py::test_every_code_is_found_live_as_in_batch

Exits 1 if any run failed (its pytest exit code is printed).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def run_once(tree: Path, test: str, workers: int) -> tuple[int, float, float, float]:
    """(pytest's exit code, wall s, CPU s, 1-minute load at the start) of one run, on
    `workers` pytest-xdist workers (0: without xdist)."""
    dist = ["-n", str(workers), "--dist", "worksteal"] if workers else ["-p", "no:xdist"]
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    code = subprocess.run(
        [str(tree / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
         *dist, test],
        cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
    ).returncode
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return code, wall, cpu, load


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tests", nargs="+", help="pytest ids, as in this tree")
    ap.add_argument("--against", type=Path, required=True, help="the other tree (before)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--workers", type=int, default=0,
                    help="pytest-xdist workers, as `make test` runs (default: no xdist)")
    args = ap.parse_args()
    trees = {"before": args.against.resolve(), "after": HERE}
    failed = False
    for test in args.tests:
        got: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
        for _ in range(args.repeat):
            for name, tree in trees.items():
                code, w, c, load = run_once(tree, test, args.workers)
                failed |= code != 0
                got[name].append((w, c))
                print(f"{test} {name}: exit {code}, wall {w:.1f} s, CPU {c:.1f} s, "
                      f"load {load:.1f}", flush=True)
        wall = {k: statistics.median(w for w, _ in v) for k, v in got.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in got.items()}
        print(f"{test}: median wall {wall['before']:.1f} -> {wall['after']:.1f} s "
              f"({wall['after'] / wall['before']:.2f}x), CPU {cpu['before']:.1f} -> "
              f"{cpu['after']:.1f} s ({cpu['after'] / cpu['before']:.2f}x)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
