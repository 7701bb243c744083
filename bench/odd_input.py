"""The fuzz tests of issue 31 at a large size: every command's options
(tests/cli/test_fuzz_commands.py) and every board route and query parameter
(tests/board/test_fuzz_routes.py), the same tests the suite runs at a small size, with many
more draws each.

    python bench/odd_input.py [--examples 100] [--board-examples 1500] [--workers 1]
                              [--only commands|board]

Runs pytest on the two files with BACC_FUZZ_EXAMPLES (commands) and then the board's count,
each outcome counted through BACC_FUZZ_TALLY (tests/helpers/fuzz.py). Prints, per command,
the runs, their exit codes and the slowest; per route, the requests and their statuses; the
time and the peak RSS of the pytest process. Exits 1 if any run was judged wrong (exit 3, a
traceback, no sentence, a hang past HANG_SECONDS, an HTTP 500) or a test failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from helpers.fuzz import HANG_SECONDS  # noqa: E402

CLI_TESTS = "tests/cli/test_fuzz_commands.py"
BOARD_TESTS = "tests/board/test_fuzz_routes.py"


def run_tests(path: str, draws: int, tally: Path, workers: int) -> tuple[int, float]:
    """pytest on `path` with `draws` examples a test; (its exit code, seconds)."""
    env = {**os.environ, "BACC_FUZZ_EXAMPLES": str(draws), "BACC_FUZZ_TALLY": str(tally)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", path]
    if workers > 1:
        cmd += ["-n", str(workers)]
    t0 = time.monotonic()
    code = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    return code, time.monotonic() - t0


def read(tally: Path) -> list[dict]:
    return [json.loads(x) for x in tally.read_text().splitlines()] if tally.exists() else []


def report_commands(rows: list[dict]) -> int:
    """The table of command runs; how many were judged wrong."""
    by: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by[r["command"]].append(r)
    print(f"\n{'command':<16} {'runs':>6} {'exit 0':>7} {'exit 1':>7} {'exit 2':>7} "
          f"{'wrong':>6} {'slowest s':>10}")
    wrong = 0
    for command in sorted(by):
        runs = by[command]
        codes = Counter(r["code"] for r in runs)
        bad = sum(r["verdict"] != "ok" for r in runs)
        wrong += bad
        print(f"{command:<16} {len(runs):>6} {codes[0]:>7} {codes[1]:>7} {codes[2]:>7} "
              f"{bad:>6} {max(r['seconds'] for r in runs):>10.2f}")
    verdicts = Counter(r["verdict"] for r in rows)
    print(f"{'all':<16} {len(rows):>6}   verdicts: {dict(verdicts)}")
    return wrong


def report_board(rows: list[dict]) -> int:
    """The table of board requests; how many answered 500."""
    by: dict[str, Counter[int]] = defaultdict(Counter)
    slowest: dict[str, float] = defaultdict(float)
    for r in rows:
        by[r["route"]][r["status"]] += 1
        slowest[r["route"]] = max(slowest[r["route"]], r["seconds"])
    print(f"\n{'route':<16} {'requests':>9} {'slowest s':>10}  statuses")
    for route in sorted(by):
        statuses = ", ".join(f"{s}: {n}" for s, n in sorted(by[route].items()))
        print(f"{route:<16} {sum(by[route].values()):>9} {slowest[route]:>10.2f}  {statuses}")
    total = Counter(r["status"] for r in rows)
    print(f"{'all':<16} {len(rows):>9}   {dict(sorted(total.items()))}")
    return total[500]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=100, help="draws per command")
    ap.add_argument("--board-examples", type=int, default=1500,
                    help="draws per board test (4: two boards, a stranger and a token)")
    ap.add_argument("--workers", type=int, default=1, help="pytest-xdist workers")
    ap.add_argument("--only", choices=("commands", "board"), help="run one of the two")
    a = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; hang bound {HANG_SECONDS} s a command")
    with tempfile.TemporaryDirectory(prefix="odd-input-") as tmp:
        cli_tally, board_tally = Path(tmp) / "cli.jsonl", Path(tmp) / "board.jsonl"
        cli_code, cli_s = (0, 0.0) if a.only == "board" else run_tests(
            CLI_TESTS, a.examples, cli_tally, a.workers)
        board_code, board_s = (0, 0.0) if a.only == "commands" else run_tests(
            BOARD_TESTS, a.board_examples, board_tally, a.workers)
        cli_rows, board_rows = read(cli_tally), read(board_tally)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    wrong = report_commands(cli_rows)
    fives = report_board(board_rows)
    print(f"\ncommands: {len(cli_rows)} runs in {cli_s:.0f} s, {wrong} judged wrong "
          f"(pytest exit {cli_code}); board: {len(board_rows)} requests in {board_s:.0f} s, "
          f"{fives} answered 500 (pytest exit {board_code}); peak RSS of a pytest process "
          f"{peak:.0f} MB")
    return 1 if wrong or fives or cli_code or board_code else 0


if __name__ == "__main__":
    sys.exit(main())
