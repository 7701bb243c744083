"""Where the watcher's CPU goes, part by part, while bench/live.py runs it.

    python bench/watch_parts.py [--window 60] [-- bench/live.py's arguments]

Runs `bench/live.py` (by default `--tables 500 --settle`) with a `sitecustomize` on
PYTHONPATH that, inside the `bacc-audit watch` process only, times the watcher's parts by
the CPU of the thread that runs them: the follower's poll (the polls' ingest), the audit of
the rounds that ended, seals and their steps, sweeps and their passes, the spool's walk.
Every 5 s it writes what each part has cost so far. This script then prints, for the last
`--window` seconds of the watcher (phase 2 of bench/live.py, at real speed, when it runs
60 s as by default), each part's calls a second, CPU a call and share of a core, beside
the process's own CPU over the same window.

The timing wraps each part in a Python function call, a few microseconds a call: the
watcher runs slightly slower than under bench/live.py alone. Compare parts with parts.
Record the figures with the machine and the command in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Written as sitecustomize.py into a folder put first on PYTHONPATH; active only in a
# process whose arguments hold `watch`. PARTS_OUT names the folder for the snapshots.
SITECUSTOMIZE = '''
import json, os, sys, threading, time

if "watch" in sys.argv and os.environ.get("PARTS_OUT"):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the command itself sets it
    from auditor.audit import integrity, run, sidebets, table_pass
    from auditor.board import feed
    from auditor.ingest import commit, follow, stage
    from auditor.jobs import watch
    from auditor.store import derived, ledger, ledger_rows

    costs = {}

    def timed(real, label):
        def part(*a, **k):
            t = time.thread_time()
            try:
                return real(*a, **k)
            finally:
                c = costs.setdefault(label, [0, 0.0])
                c[0] += 1
                c[1] += time.thread_time() - t
        return part

    for owner, name, label in (
        (watch.Watch, "_step", "step (all of a poll, seals and sweeps included)"),
        (follow.Follower, "poll", "poll: the ingest of the lines"),
        (follow.Follower, "_verify_some", "poll: ingest: files verified again"),
        (follow, "read_together", "poll: ingest: the lines parsed"),
        (stage.Staging, "insert", "poll: ingest: the rows typed and held"),
        (stage.Staging, "ranges", "poll: ingest: the seq ranges"),
        (follow, "_loaded", "poll: ingest: rounds ended and touched"),
        (commit, "finish", "poll: ingest: the pieces finished"),
        (commit, "record_pieces", "poll: ingest: finish: the extents"),
        (stage.Staging, "record_digests", "poll: ingest: finish: the digests"),
        (stage.Staging, "keep", "poll: ingest: finish: the rows to events"),
        (commit, "_extend_streams", "poll: ingest: finish: the streams"),
        (stage.Staging, "commit", "poll: ingest: the commit"),
        (stage.Staging, "close", "poll: ingest: temporary tables dropped"),
        (follow.Follower, "_store_offers", "poll: ingest: files new to the follower"),
        (watch.Watch, "_audit_ended", "poll: the audit of the rounds that ended"),
        (watch.Watch, "_scan", "poll: the spool walked"),
        (watch.Watch, "_entered_beside", "poll: notices and closed days entered beside"),
        (watch.Watch, "_seal", "seal"),
        (ledger, "_count_and_head", "seal: the head and the count"),
        (ledger_rows, "pieces", "seal: the pieces' statement"),
        (ledger_rows, "digests", "seal: the digests"),
        (ledger_rows, "fill_table", "seal: a temporary table"),
        (derived, "at_seal", "seal: the bookkeeping's digests"),
        (watch.Watch, "_sweep", "sweep"),
        (feed.Hub, "_read", "board: the feed's read (its own thread)"),
        (run, "check_streams", "sweep: the streams' check"),
        (run, "select_rounds", "sweep: the choice of rounds"),
        (run.derived, "refuse_untrusted", "sweep: the audit's own records checked"),
        (run, "refuse_impossible_stamps", "sweep: the stamps checked"),
        (table_pass, "table_findings", "sweep: the table pass"),
        (table_pass, "supersede_round_mismatches", "sweep: mismatches superseded"),
        (table_pass, "dealer_findings", "sweep: the dealers"),
        (integrity, "integrity_findings", "sweep: shoe integrity"),
        (sidebets, "side_bet_findings", "sweep: side bets"),
    ):
        setattr(owner, name, timed(getattr(owner, name), label))

    def snapshots():
        import resource
        path = os.path.join(os.environ["PARTS_OUT"], f"watch-{os.getpid()}.jsonl")
        with open(path, "a") as f:
            while True:
                time.sleep(5)
                r = resource.getrusage(resource.RUSAGE_SELF)
                f.write(json.dumps({"t": time.time(), "cpu": r.ru_utime + r.ru_stime,
                                    "parts": {k: list(v) for k, v in costs.items()}}) + "\\n")
                f.flush()

    threading.Thread(target=snapshots, daemon=True).start()
'''


def breakdown(snapshots: list[dict], window: float) -> list[str]:
    """The table of the last `window` seconds of `snapshots` (one watch process's)."""
    end = snapshots[-1]
    before = [s for s in snapshots if s["t"] <= end["t"] - window]
    start = before[-1] if before else snapshots[0]
    seconds = end["t"] - start["t"]
    cpu = end["cpu"] - start["cpu"]
    lines = [f"the watcher's last {seconds:.0f} s: {cpu:.2f} s of CPU, "
             f"{cpu / seconds:.3f} of a core (the process, all threads)",
             f"{'part':52} {'a second':>9} {'ms a call':>10} {'of a core':>10}"]
    # by name: each part's steps ("seal: ...") follow it
    for label, (calls, spent) in sorted(end["parts"].items()):
        n0, c0 = start["parts"].get(label, [0, 0.0])
        n, c = calls - n0, spent - c0
        if n:
            lines.append(f"{label:52} {n / seconds:9.2f} {1000 * c / n:10.1f} "
                         f"{c / seconds:10.3f}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--window", type=float, default=60.0,
                    help="seconds at the end of the watcher's run to break down")
    ap.add_argument("live", nargs="*", help="bench/live.py's arguments (after --)")
    args = ap.parse_args()
    live_args = args.live or ["--tables", "500", "--settle"]
    with tempfile.TemporaryDirectory(prefix="watch-parts-") as tmp:
        site, out = Path(tmp) / "site", Path(tmp) / "out"
        site.mkdir()
        out.mkdir()
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        env = {**os.environ, "PARTS_OUT": str(out),
               "PYTHONPATH": os.pathsep.join(
                   [str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}
        done = subprocess.run([sys.executable, str(ROOT / "bench" / "live.py"), *live_args],
                              env=env, check=False)
        if done.returncode != 0:
            sys.exit(done.returncode)
        runs = sorted(out.glob("watch-*.jsonl"))
        if not runs:
            sys.exit("no watch process was timed (did bench/live.py start one?)")
        for path in runs:
            snapshots = [json.loads(x) for x in path.read_text().splitlines() if x]
            if len(snapshots) < 2:
                continue
            print()
            print("\n".join(breakdown(snapshots, args.window)))
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    print("command: python bench/watch_parts.py --window", args.window, "--",
          " ".join(live_args))


if __name__ == "__main__":
    main()
