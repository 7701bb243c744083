"""What the ledger costs (docs/ledger.md), measured in one run.

    python bench/ledger.py [--tables 200] [--watch-tables 40] [--watch-hours 2] [--poll 30]
    python bench/ledger.py --against /work/wt/base [--repeats 2] ...   # before and after

With `--against TREE`, each part runs in a child process, alternately with TREE's code
(its own .venv) and this checkout's, `--repeats` times, the order swapped every repeat; the
figures of both, their medians and ratios are printed with the load seen by each child, and
CPU seconds beside wall seconds (the machine is shared: CPU time is distorted less).

1. A day of `--tables` tables x 24 h from `bacc-audit simulate --bulk` (about 1,420 rounds a
   table), ingested and audited in this process as `ingest` and `audit` do (each in its run,
   sealed at its end): the seals' time against ingest + audit without them, and the ledger's
   whole cost, the seals and the events digests ingest computes while staging (`Staging.hold`
   and `record_digests`; none in a tree from before them), against ingest + audit without
   either; then the digest
   of every piece two ways (`raw` and the line numbers, as sealed; every column of every
   event, as a digest without reparse would need); then `verify` (the whole check) and
   `verify --fast` right after.
2. `watch` over a night of `--watch-tables` tables (the planted simulator) written into its
   spool `--poll` simulated seconds at a time, one poll each, as fast as they go: the
   seals (and the ledger's whole cost, as above) against the polls' ingest + audit, sealing
   after every poll that wrote (`seal_every` 0) and at most once a second (its default;
   longer after a costly seal, `seal_share`).

Prints the figures, the machine and the command; record them in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# --tree PATH: measure PATH's code (a child of --against); the logs stay under this bench/out
TREE = Path(sys.argv[sys.argv.index("--tree") + 1]) if "--tree" in sys.argv else ROOT
sys.path.insert(0, str(TREE))

from auditor import config  # noqa: E402
from auditor.audit.run import audit  # noqa: E402
from auditor.ingest import stage  # noqa: E402
from auditor.ingest.run import ingest  # noqa: E402
from auditor.jobs import verify as verifying  # noqa: E402
from auditor.jobs.watch import Watch, WatchOptions  # noqa: E402
from auditor.simulate.feed import schedule  # noqa: E402
from auditor.simulate.planted import simulate  # noqa: E402
from auditor.store import db, ledger, ledger_rows, runs  # noqa: E402

OUT = ROOT / "bench" / "out"
BIN = Path(sys.executable).parent / "bacc-audit"


class Timed:
    """ledger.seal, timed wherever it is called (runs.recorded, watch): wall and CPU."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.cpu = 0.0
        self.calls = 0
        self.real = ledger.seal

    def __call__(self, *args, **kw):
        started, cpu = time.perf_counter(), time.process_time()
        try:
            return self.real(*args, **kw)
        finally:
            self.seconds += time.perf_counter() - started
            self.cpu += time.process_time() - cpu
            self.calls += 1


class Spent:
    """Wall and CPU seconds in the methods `names` of `cls`, wherever they are called (those
    a tree has: a tree from before the staged digests has none, and they cost 0). The CPU
    seconds are the calling thread's: ingest's read-ahead thread parses the next block
    meanwhile, and the process's CPU seconds would count its work here."""

    def __init__(self, cls: type, names: tuple[str, ...]) -> None:
        self.seconds = 0.0
        self.cpu = 0.0
        self.cls = cls
        self.saved = {n: getattr(cls, n) for n in names if hasattr(cls, n)}
        for n, f in self.saved.items():
            setattr(cls, n, self._timed(f))

    def _timed(self, f):
        def run(*args, **kw):
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return f(*args, **kw)
            finally:
                self.seconds += time.perf_counter() - started
                self.cpu += time.thread_time() - cpu
        return run

    def restore(self) -> None:
        for n, f in self.saved.items():
            setattr(self.cls, n, f)


STAGED_DIGEST = ("hold", "record_digests")  # Staging's events digests, while staging


class Clock:
    """Wall and CPU seconds of a stretch of work."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def lap(self) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        out = (wall - self.wall, cpu - self.cpu)
        self.wall, self.cpu = wall, cpu
        return out


def _progress(what: str, **figures: float) -> None:
    """A phase's figures as soon as it ends (stderr): a day of 7,040 tables runs for an hour."""
    said = ", ".join(f"{k} {v:.2f}" for k, v in figures.items())
    print(f"[{time.strftime('%H:%M:%S')}] {what}: {said}", file=sys.stderr, flush=True)


def day(tables: int, with_every_column: bool) -> dict[str, float]:
    logs = OUT / f"ledger-bulk-{tables}"
    if not (logs / "ground_truth.ndjson").exists():
        shutil.rmtree(logs, ignore_errors=True)
        subprocess.run([str(BIN), "simulate", "--bulk", "--out", str(logs), "--tables",
                        str(tables), "--hours", "24"], check=True, stdout=subprocess.DEVNULL)
    path = OUT / f"ledger-bulk-{tables}-{TREE.name}.duckdb"
    for p in path.parent.glob(path.name + "*"):
        p.unlink()
    timer = Timed()
    ledger.seal = timer
    conf = config.load(None)
    con = db.connect(path)
    staged = Spent(stage.Staging, STAGED_DIGEST)
    try:
        clock = Clock()
        with runs.recorded(con, "ingest", {}) as run:
            got = ingest(con, sorted(logs.glob("*.jsonl")), run.id)
        ingest_s, ingest_cpu = clock.lap()
        staged.restore()
        _progress("ingest", wall=ingest_s, cpu=ingest_cpu, seal_s=timer.seconds,
                  seal_cpu=timer.cpu, staged_s=staged.seconds, staged_cpu=staged.cpu)
        with runs.recorded(con, "audit", {}) as run:
            audit(con, run.id, conf)
        audit_s, audit_cpu = clock.lap()
        ledger.seal = timer.real
        _progress("audit", wall=audit_s, cpu=audit_cpu, seal_s=timer.seconds,
                  seal_cpu=timer.cpu)
        events = got.events
        rounds = con.execute("SELECT count(*) FROM round_audits").fetchall()[0][0]
        leaves = con.execute("SELECT count(*) FROM ledger").fetchall()[0][0]
        pieces = ledger_rows.pieces(con, "true")
        clock.lap()
        ledger_rows.digests(con, pieces)
        raw_digest, raw_digest_cpu = clock.lap()
        _progress("digest_raw", wall=raw_digest, cpu=raw_digest_cpu)
        every_column = _every_column_digest(con)[0] if with_every_column else None
        clock.lap()
        full = verifying.verify(con)
        full_s, full_cpu = clock.lap()
        _progress("verify", wall=full_s, cpu=full_cpu, ok=full.ok)
        with runs.recorded(con, "verify", {}) as run:
            verifying.record(con, full, run.id)
        clock.lap()
        fast = verifying.verify(con, fast=True)
        fast_s, fast_cpu = clock.lap()
    finally:
        ledger.seal = timer.real
        staged.restore()
        con.close()
    work = ingest_s + audit_s - timer.seconds
    work_cpu = ingest_cpu + audit_cpu - timer.cpu
    bare, bare_cpu = work - staged.seconds, work_cpu - staged.cpu
    return {
        "tables": tables, "rounds": rounds, "events": events, "leaves": leaves,
        "ingest_s": ingest_s, "audit_s": audit_s, "work_cpu": work_cpu,
        "seal_s": timer.seconds, "seal_cpu": timer.cpu, "seals": timer.calls,
        "seal_share": timer.seconds / work, "seal_share_cpu": timer.cpu / work_cpu,
        "stage_digest_s": staged.seconds, "stage_digest_cpu": staged.cpu,
        "ledger_cpu": timer.cpu + staged.cpu,
        "ledger_share": (timer.seconds + staged.seconds) / bare,
        "ledger_share_cpu": (timer.cpu + staged.cpu) / bare_cpu,
        "digest_raw_s": raw_digest, "digest_raw_cpu": raw_digest_cpu,
        "digest_every_column_s": every_column,
        "verify_s": full_s, "verify_cpu": full_cpu, "verify_ok": full.ok,
        "verify_fast_s": fast_s, "verify_fast_cpu": fast_cpu,
        "verify_fast_ok": fast.ok, "db_gb": path.stat().st_size / 1e9,
        "verify_us_event": 1e6 * full_s / events, "seal_us_event": 1e6 * timer.seconds / events,
    }


def _every_column_digest(con) -> tuple[float, float]:
    """Every column of every event through hashlib, in line order: the cost of a digest of
    every column (its buffers as they come, not a canonical form: the cost is the point)."""
    clock = Clock()
    h = hashlib.sha256()
    for rb in con.sql("SELECT * FROM events ORDER BY source_id, line_no").to_arrow_reader(
            500_000):
        for col in rb.columns:
            for buf in col.buffers():
                if buf is not None:
                    h.update(memoryview(buf))
    return clock.lap()


def watched(tables: int, hours: float, poll: float, seal_every: float) -> dict[str, float]:
    night = OUT / f"ledger-watch-{tables}-{hours}"
    if not night.exists():
        simulate(night, tables, hours, seed=3, deviation_rate=0.01)
    files = sorted(p for p in night.iterdir() if p.name.endswith(".jsonl")
                   and ".resent." not in p.name)
    lines = schedule(files, 1.0)
    work = OUT / f"ledger-watch-{tables}-{hours}-run-{TREE.name}"
    shutil.rmtree(work, ignore_errors=True)
    spool = work / "spool"
    spool.mkdir(parents=True)
    con = db.connect(work / "live.duckdb")
    conf = config.load(None)
    timer = Timed()
    staged = Spent(stage.Staging, ())
    try:
        with runs.recorded(con, "watch", {}) as run:
            w = Watch(con, spool, conf, run.id, WatchOptions(rescan=0, sweep_every=60,
                                                               seal_every=seal_every))
            handles: dict[str, object] = {}
            total, total_cpu, polls, i = 0.0, 0.0, 0, 0
            ledger.seal = timer
            staged = Spent(stage.Staging, STAGED_DIGEST)
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
                clock = Clock()
                w.step()
                wall, cpu = clock.lap()
                total += wall
                total_cpu += cpu
                polls += 1
            # the polls' seals only: the run's own end seal is not a poll's
            ledger.seal = timer.real
            staged.restore()
            steps = (timer.seconds, timer.cpu, timer.calls)
            for fh in handles.values():
                fh.close()  # type: ignore[attr-defined]
        v = verifying.verify(con)
    finally:
        ledger.seal = timer.real
        staged.restore()
        con.close()
    seal_s, seal_cpu, seals = steps
    bare, bare_cpu = total - seal_s - staged.seconds, total_cpu - seal_cpu - staged.cpu
    return {"tables": tables, "hours": hours, "polls": polls, "lines": len(lines),
            "seal_every": seal_every, "seals": seals,
            "step_s": total, "step_cpu": total_cpu, "seal_s": seal_s, "seal_cpu": seal_cpu,
            "seal_share": seal_s / (total - seal_s),
            "seal_share_cpu": seal_cpu / (total_cpu - seal_cpu),
            "stage_digest_s": staged.seconds, "stage_digest_cpu": staged.cpu,
            "ledger_share": (seal_s + staged.seconds) / bare,
            "ledger_share_cpu": (seal_cpu + staged.cpu) / bare_cpu, "verify_ok": v.ok}


def run_part(args: argparse.Namespace) -> dict:
    if args.part == "day":
        return day(args.tables, args.every_column)
    return watched(args.watch_tables, args.watch_hours, args.poll, float(args.part[5:]))


PARTS = ("day", "watch0", "watch1")  # watch0: seal_every 0 s; watch1: 1 s (the default)


def compare(args: argparse.Namespace) -> None:
    """Each part in a child process per tree, alternately, `--repeats` times."""
    trees = {"before": Path(args.against).resolve(), "after": TREE}
    got: dict[str, dict[str, list[dict]]] = {p: {"before": [], "after": []} for p in PARTS}
    parts = args.parts.split(",")
    for r in range(args.repeats):
        for part in parts:
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for side in order:
                tree = trees[side]
                python = tree / ".venv" / "bin" / "python"
                cmd = [str(python if python.exists() else sys.executable), __file__,
                       "--tree", str(tree), "--part", part, "--tables", str(args.tables),
                       "--watch-tables", str(args.watch_tables), "--watch-hours",
                       str(args.watch_hours), "--poll", str(args.poll)]
                load = os.getloadavg()[0]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                fig = json.loads(out.strip().splitlines()[-1])
                fig["load"] = load
                got[part][side].append(fig)
                print(f"# repeat {r + 1} {part} {side} (load {load:.1f}): {json.dumps(fig)}",
                      flush=True)
    for part in parts:
        print(f"{part}:")
        keys = [k for k, v in got[part]["after"][0].items() if isinstance(v, float)]
        for k in keys:
            b = statistics.median(f[k] for f in got[part]["before"])
            a = statistics.median(f[k] for f in got[part]["after"])
            ratio = f"{a / b:.2f}" if b else "-"
            print(f"  {k:24} before {b:10.4g}  after {a:10.4g}  after/before {ratio}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument("--watch-tables", type=int, default=40)
    ap.add_argument("--watch-hours", type=float, default=2.0)
    ap.add_argument("--poll", type=float, default=30.0, help="simulated seconds a poll")
    ap.add_argument("--every-column", action="store_true",
                    help="also time a digest of every column of every event")
    ap.add_argument("--against", help="a checkout to measure before this one, interleaved")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--parts", default=",".join(PARTS),
                    help=f"with --against: which of {', '.join(PARTS)} to run")
    ap.add_argument("--tree", help=argparse.SUPPRESS)
    ap.add_argument("--part", choices=PARTS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.part:  # a child of --against: one part, as JSON
        print(json.dumps(run_part(args)))
        return
    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cpus, "
          f"python {platform.python_version()}; load {os.getloadavg()[0]:.1f}")
    print(f"command: python bench/ledger.py {' '.join(sys.argv[1:])}".rstrip())
    if args.against:
        compare(args)
        return
    d = day(args.tables, args.every_column)
    print(f"day: {d['tables']} tables, {d['rounds']:,} rounds, {d['events']:,} events, "
          f"{d['leaves']:,} leaves, database {d['db_gb']:.2f} GB")
    print(f"  ingest {d['ingest_s']:.1f} s + audit {d['audit_s']:.1f} s, of which "
          f"{d['seals']} seals {d['seal_s']:.2f} s: seal / (ingest + audit) = "
          f"{100 * d['seal_share']:.1f}% ({100 * d['seal_share_cpu']:.1f}% of CPU seconds)")
    print(f"  with the events digests staged at ingest ({d['stage_digest_s']:.2f} s): the "
          f"ledger / (ingest + audit without it) = {100 * d['ledger_share']:.1f}% "
          f"({100 * d['ledger_share_cpu']:.1f}% of CPU seconds)")
    every = d["digest_every_column_s"]
    print(f"  digest of every piece: raw and line numbers {d['digest_raw_s']:.2f} s"
          + (f"; every column of every event {every:.2f} s" if every is not None else ""))
    print(f"  verify (whole) {d['verify_s']:.1f} s ({d['verify_us_event']:.1f} us an event) "
          f"ok={d['verify_ok']}; verify --fast right after {d['verify_fast_s']:.1f} s "
          f"ok={d['verify_fast_ok']}")
    for every_s in (0.0, 1.0):
        w = watched(args.watch_tables, args.watch_hours, args.poll, every_s)
        print(f"watch (seal_every {every_s:g} s): {w['tables']} tables x {w['hours']} h, "
              f"{w['lines']:,} lines in {w['polls']} polls, {w['seals']} seals: polls "
              f"{w['step_s']:.1f} s, of which seals {w['seal_s']:.2f} s: seal / (ingest + "
              f"audit) = {100 * w['seal_share']:.1f}% ({100 * w['seal_share_cpu']:.1f}% of "
              f"CPU seconds); with the staged digests {100 * w['ledger_share_cpu']:.1f}% of CPU "
              f"seconds; verify ok={w['verify_ok']}")


if __name__ == "__main__":
    main()
