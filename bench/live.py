"""Live latency and cost of `bacc-audit watch`, measured in one run.

    python bench/live.py [--tables 500] [--speed 10] [--seconds 60] [--real-seconds 60]

Simulates a night of `--tables` tables with planted deviations (`--rate` a round, so that
many rounds have a finding to time; cached under bench/out/),
starts `bacc-audit watch --web` on an empty database as its own process, and writes the logs
into its spool line by line as the table systems would (auditor.simulate.feed):

1. at `--speed` times real speed for `--seconds` of wall time: for every round with a finding,
   the time from the moment its round_end line was written to the moment the finding was in
   `GET /api/findings` (polled every 20 ms with `?since=`); p50, p99 and the worst (targets:
   p50 under 200 ms, p99 under 1 s);
2. at real speed for `--real-seconds`, with no client polling: the CPU time the watcher
   used over the wall time (target: under a quarter of one core); with `--settle`, once the
   watcher has gone idle after phase 1 (on a loaded machine it may still be loading phase 1's
   lines, which would count here);
3. with `--real-latency-seconds N`, N more seconds at real speed with the client polling
   again: the latencies of phase 1 at real speed (what the polls' pace, which follows their
   cost, gives a floor that is not busy), and the watcher's CPU with that client.

With `--against TREE` (another checkout with a .venv, e.g. /work/wt/base; a link to this
tree's .venv will do: TREE's code is put first on PYTHONPATH), each of
`--repeat` rounds runs both trees' `bacc-audit watch` one after the other on the same logs,
alternating which goes first, and prints each run, then the medians of both and their ratio
(before and after measured in one sitting, on a machine whose load changes); the load
average is printed with every run.

Prints the figures, the machine and the command; record them in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import BinaryIO

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from auditor.rules.codes import REGISTRY  # noqa: E402
from auditor.simulate.feed import Feed, Line, schedule  # noqa: E402
from auditor.simulate.planted import simulate  # noqa: E402

OUT = ROOT / "bench" / "out"
BIN = Path(sys.executable).parent / "bacc-audit"


def night(tables: int, hours: float, seed: int, rate: float) -> list[Path]:
    folder = OUT / f"live-{tables}-{hours}-{seed}-{rate}"
    if not (folder / "ground_truth.ndjson").exists():
        if folder.exists():
            shutil.rmtree(folder)
        started = time.perf_counter()
        simulate(folder, tables, hours, seed=seed, deviation_rate=rate)
        print(f"simulated {tables} tables x {hours} h in {time.perf_counter() - started:.0f} s")
    return sorted(p for p in folder.iterdir() if p.name.endswith(".jsonl"))


class SpoolWriter:
    """A night's lines written into `spool` as the table systems would have written them by
    a time of log (seconds after the first table opened), for scripts that poll a Watch
    themselves (bench/live_poll.py, bench/seal_look.py). Close it to close its files."""

    def __init__(self, files: list[Path], spool: Path) -> None:
        self.lines = schedule(files, 1.0, later=[f for f in files if ".resent." in f.name])
        self.opens = min(line.at for line in self.lines if "notices" not in line.name)
        self.spool = spool
        self.written = 0
        self.handles: dict[str, BinaryIO] = {}

    def until(self, t: float) -> None:
        lines = self.lines
        while self.written < len(lines) and lines[self.written].at - self.opens < t:
            line = lines[self.written]
            fh = self.handles.get(line.name) or self.handles.setdefault(
                line.name, (self.spool / line.name).open("ab"))
            fh.write(line.data)
            self.written += 1
        for fh in self.handles.values():
            fh.flush()

    def close(self) -> None:
        for fh in self.handles.values():
            fh.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Poller:
    """Asks the board for what is new every `every` seconds and notes when each round's
    first finding arrived."""

    def __init__(self, base: str, every: float = 0.02, cursor: int = 0) -> None:
        self.base = base
        self.every = every
        self.cursor = cursor
        self.arrived: dict[tuple[str, str, int], float] = {}
        self.findings = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with urllib.request.urlopen(
                    f"{self.base}/api/findings?since={self.cursor}", timeout=5
                ) as r:
                    body = r.read().decode()
                    self.cursor = int(r.headers.get("Bacc-Cursor", self.cursor))
                now = time.time()
                for line in body.splitlines():
                    f = json.loads(line)
                    self.findings += 1
                    # Only what is decided at the round's end (a bad line is found before).
                    if REGISTRY[f["code"]].scope in ("round", "chemin"):
                        key = (f["table"], f["shoe"], int(f["round"]))
                        self.arrived.setdefault(key, now)
            except OSError:
                pass
            self.stop.wait(self.every)


def wait_healthy(base: str, within: float = 60) -> None:
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the board did not come up")


def caught_up(pid: int, within: float = 240.0, idle: float = 0.15) -> float:
    """The time (monotonic) the watcher went idle: under `idle` of a core for three seconds
    running (an idle watch with its board costs a few hundredths to a tenth)."""
    end = time.monotonic() + within
    calm, last = 0, cpu_seconds(pid)
    while time.monotonic() < end:
        time.sleep(1.0)
        now = cpu_seconds(pid)
        calm = calm + 1 if now - last < idle else 0
        last = now
        if calm >= 3:
            return time.monotonic() - 3.0
    return time.monotonic()


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def latencies(poller: Poller, feed: Feed) -> dict[str, float]:
    """Print and return the p50, p99 and worst wait from a round_end written to its finding
    seen, by game. A chemin de fer round is judged once its table has gone past it (the
    bank's passing follows its round_end): its wait includes the time to the next round."""
    out: dict[str, float] = {}
    for label, chemin in (("all rounds", None), ("banking games", False),
                          ("chemin de fer", True)):
        part = [poller.arrived[k] - feed.written[k] for k in poller.arrived
                if k in feed.written and (chemin is None or k[0].startswith("CF-") == chemin)]
        if part:
            print(f"    {label}, {len(part)} rounds: "
                  f"p50 {percentile(part, 50) * 1000:.0f} ms, "
                  f"p99 {percentile(part, 99) * 1000:.0f} ms, "
                  f"max {max(part) * 1000:.0f} ms")
            key = {None: "all", False: "bank", True: "chemin"}[chemin]
            out[f"{key}_p50"] = percentile(part, 50) * 1000
            out[f"{key}_p99"] = percentile(part, 99) * 1000
            out[f"{key}_max"] = max(part) * 1000
    return out


def measure(binary: Path, first: list[Line], rest: list[Line], late: list[Line],
            args: argparse.Namespace) -> dict[str, float]:
    """One watch of `binary` on an empty database: phase 1 (at speed, with the poller),
    phase 2 (real speed, no client) and phase 3 (real speed, with the poller) if `late`.
    Prints the run; returns its figures."""
    work = Path(tempfile.mkdtemp(prefix="bench-live-"))
    spool = work / "spool"
    spool.mkdir()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    out: dict[str, float] = {}
    print(f"{binary.parent.parent.parent}: {load()}", flush=True)
    if binary == BIN and os.environ.get("PYTHONPATH"):
        print(f"  (its code from PYTHONPATH={os.environ['PYTHONPATH']})")
    # The other tree's own code, not a PYTHONPATH this run was given (a frozen copy of
    # this tree, measured while it is edited), nor this tree's: a .venv linked to this
    # one imports `auditor` from here through the editable install, whatever its path.
    env = os.environ.copy() if binary == BIN else {
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        "PYTHONPATH": str(binary.parent.parent.parent)}
    watch = subprocess.Popen(
        [str(binary), "watch", "--spool", str(spool), "--db", str(work / "live.duckdb"),
         "--web", f"127.0.0.1:{port}", "--poll", str(args.poll)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    try:
        wait_healthy(base)
        poller = Poller(base)
        poller.thread.start()
        feed = Feed(first, spool)
        cpu0, wall0 = cpu_seconds(watch.pid), time.monotonic()
        feed.run()
        time.sleep(3)  # the last rounds' findings
        cpu1, wall1 = cpu_seconds(watch.pid), time.monotonic()
        rounds = sum(1 for line in first if line.round_end)
        print(f"  phase 1, {args.speed:g}x real speed: {len(first):,} lines, {rounds:,} rounds "
              f"in {wall1 - wall0:.1f} s; {poller.findings} findings seen")
        out.update(latencies(poller, feed))
        out["cpu_fast"] = (cpu1 - cpu0) / (wall1 - wall0)
        print(f"    watcher CPU {cpu1 - cpu0:.1f} s over {wall1 - wall0:.1f} s wall "
              f"({out['cpu_fast']:.2f} of one core)")
        poller.stop.set()  # the watcher's own cost, without a client asking 50 times a second
        if rest and args.settle:  # phase 2 without phase 1's backlog
            settled = time.monotonic()
            caught_up(watch.pid)
            print(f"  (settled: phase 2 starts {time.monotonic() - settled:.1f} s later, "
                  "the watcher idle)")
        if rest:
            feed2 = Feed(rest, spool)
            cpu2, wall2 = cpu_seconds(watch.pid), time.monotonic()
            feed2.run()
            cpu3, wall3 = cpu_seconds(watch.pid), time.monotonic()
            out["cpu_real"] = (cpu3 - cpu2) / (wall3 - wall2)
            print(f"  phase 2, real speed: {len(rest):,} lines in {wall3 - wall2:.1f} s; "
                  f"watcher CPU {cpu3 - cpu2:.1f} s = {out['cpu_real']:.3f} of one core "
                  "(target: under 0.25)")
        if late:
            poller = Poller(base, cursor=poller.cursor)
            poller.thread.start()
            feed3 = Feed(late, spool)
            cpu4, wall4 = cpu_seconds(watch.pid), time.monotonic()
            feed3.run()
            time.sleep(3)
            cpu5, wall5 = cpu_seconds(watch.pid), time.monotonic()
            poller.stop.set()
            print(f"  phase 3, real speed, the client polling: {len(late):,} lines in "
                  f"{wall5 - wall4:.1f} s; watcher CPU {cpu5 - cpu4:.1f} s = "
                  f"{(cpu5 - cpu4) / (wall5 - wall4):.3f} of one core")
            out.update({f"real_{k}": v for k, v in latencies(poller, feed3).items()})
        # Under load the watcher may not keep up: the CPU it took to take the whole feed in
        # (until it idles) is the measure of its work that a busy machine does not bend.
        fed = time.monotonic()
        idle_at = caught_up(watch.pid)
        out["cpu_total"] = cpu_seconds(watch.pid) - cpu0
        print(f"  idle {max(0.0, idle_at - fed):.1f} s after the last line was written; "
              f"watcher CPU from phase 1's start to then: {out['cpu_total']:.1f} s")
        print(f"  {load()}", flush=True)
    finally:
        watch.send_signal(signal.SIGTERM)
        try:
            watch.wait(120)
        except subprocess.TimeoutExpired:
            watch.kill()
        shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tables", type=int, default=500)
    ap.add_argument("--speed", type=float, default=10.0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--real-seconds", type=float, default=60.0)
    ap.add_argument("--real-latency-seconds", type=float, default=0.0,
                    help="phase 3: this long at real speed with the client polling (latency)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--rate", type=float, default=0.1, help="deviations planted per round")
    ap.add_argument("--poll", type=float, default=0.2, help="watch --poll (its default: 0.2)")
    ap.add_argument("--against", type=Path, default=None,
                    help="another checkout (with .venv/) measured in the same sitting")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each tree")
    ap.add_argument("--settle", action="store_true",
                    help="start phase 2 once the watcher is idle (its CPU at real speed "
                    "without what it had left of phase 1)")
    args = ap.parse_args()
    real = args.real_seconds + args.real_latency_seconds
    hours = max(0.25, args.seconds * args.speed / 3600 + real / 3600 + 0.1)
    files = night(args.tables, round(hours, 2), args.seed, args.rate)
    lines = schedule(files, 1.0, later=[f for f in files if ".resent." in f.name])
    # The pits' notices come before the tables open: they are written at once.
    opens = min(line.at for line in lines if "notices" not in line.name)
    lines = [Line(max(0.0, x.at - opens), x.name, x.data, x.round_end) for x in lines]
    fast_until = args.seconds * args.speed  # log seconds fed at speed
    first = [
        Line(line.at / args.speed, line.name, line.data, line.round_end)
        for line in lines if line.at < fast_until
    ]
    rest = [
        Line(line.at - fast_until, line.name, line.data, line.round_end)
        for line in lines if fast_until <= line.at < fast_until + args.real_seconds
    ]
    late = [
        Line(line.at - fast_until - args.real_seconds, line.name, line.data, line.round_end)
        for line in lines if fast_until + args.real_seconds <= line.at < fast_until + real
    ]
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    against = f" --against {args.against} --repeat {args.repeat}" if args.against else ""
    phase3 = (f" --real-latency-seconds {args.real_latency_seconds:g}"
              if args.real_latency_seconds else "")
    print(f"command: python bench/live.py --tables {args.tables} --speed {args.speed:g} "
          f"--seconds {args.seconds:g} --real-seconds {args.real_seconds:g}{phase3} "
          f"--poll {args.poll:g} --rate {args.rate:g}{' --settle' if args.settle else ''}{against}")
    trees = [("this tree", BIN)]
    if args.against is not None:
        trees.insert(0, ("against", args.against.resolve() / ".venv" / "bin" / "bacc-audit"))
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
    for i in range(args.repeat):
        order = trees if i % 2 == 0 else trees[::-1]
        for name, binary in order:
            print(f"run {i + 1}, {name}:")
            runs[name].append(measure(binary, first, rest, late, args))
    if len(trees) < 2 and args.repeat < 2:
        return
    print("medians over the runs:")
    keys = ["all_p50", "all_p99", "bank_p50", "bank_p99", "bank_max", "chemin_p50",
            "cpu_fast", "cpu_real", "real_bank_p50", "real_bank_p99", "cpu_total"]
    med = {name: {k: statistics.median(r[k] for r in rs if k in r) for k in keys
                  if any(k in r for r in rs)} for name, rs in runs.items()}
    for k in keys:
        cells = [f"{name} {med[name][k]:.3g}" for name, _ in trees if k in med[name]]
        if not cells:
            continue
        ratio = ""
        if len(trees) == 2 and all(k in med[n] for n, _ in trees) and med["against"][k]:
            ratio = f"  (this/against {med['this tree'][k] / med['against'][k]:.2f})"
        print(f"  {k:<11} " + ", ".join(cells) + ratio)


if __name__ == "__main__":
    main()
