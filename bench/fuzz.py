"""The fuzz suite at full size: many files of good events mixed with every kind of bad line
(tests/helpers/hostile.py), and beside them hostile files at their real sizes (a 1 GB gzip
bomb, a 200 MB line, names that are not UTF-8 or hold a newline, a .gz that is not gzip, a
gzip cut short), ingested in one run under a memory cap; then the figures and the accounting.

    python bench/fuzz.py [--bad 110000] [--good 440000] [--files 40] [--memory-limit 1GB]
                         [--keep]

Prints the kinds, the lines, the time and the peak RSS of the ingest (a child process, so its
peak is its own), and checks what tests/ingest/test_fuzz.py checks at small size: every bad line in
quarantine at its own line number, every good line one event, each bad file refused alone,
no crash. Exits 1 if anything was lost or counted twice.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers.hostile import good_event, hostile_file, line_kinds  # noqa: E402

REFUSED = ("bomb.jsonl.gz", "fake.jsonl.gz", "cut.jsonl.gz")


def write(out: Path, files: int, good: int, bad: int, seed: int) -> tuple[dict, list[str]]:
    """The night's files and what each plants: {file name: [good lines, {line: kind}]}, and
    the kinds of bad line."""
    from auditor.ingest.reader import MAX_LINE_BYTES

    rng = random.Random(seed)
    kinds = line_kinds(MAX_LINE_BYTES)
    plan = {}
    names = [os.fsdecode(b"odd_\xff\xfe.jsonl"), "two\nlines.jsonl"]
    names += [f"night_FZ-{i:03d}.jsonl" for i in range(files - len(names))]
    for i, name in enumerate(names):
        data, good_at, bad_at = hostile_file(rng, f"FZ-{i:03d}", good // files, bad // files,
                                             kinds)
        (out / name).write_bytes(data)
        plan[name] = [good_at, {str(k): v for k, v in bad_at.items()}]
    # a 200 MB line between two good events: quarantined by length, hash and head
    with (out / "long.jsonl").open("wb") as fh:
        fh.write(good_event("FZ-LONG", 1) + b"\n" + b'{"note":"')
        for _ in range(200):
            fh.write(b"x" * (1 << 20))
        fh.write(b'"}\n' + good_event("FZ-LONG", 2) + b"\n")
    plan["long.jsonl"] = [[1, 3], {"2": "long_line"}]
    # 1 GB of zeros, 1 MB compressed: refused while it inflates
    with gzip.open(out / "bomb.jsonl.gz", "wb", compresslevel=6) as gz:
        for _ in range(1024):
            gz.write(bytes(1 << 20))
    (out / "fake.jsonl.gz").write_bytes(b"not gzip at all\n")
    whole = gzip.compress(good_event("FZ-CUT", 1) * 1000, mtime=0)
    (out / "cut.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    return plan, sorted(kinds)


def child(logs: Path, db_path: Path) -> None:
    """Ingest in this process; print seconds and peak RSS as JSON."""
    from auditor.ingest.paths import discover
    from auditor.ingest.run import ingest
    from auditor.store import db, runs

    con = db.connect(db_path)
    paths, _ = discover([logs])
    start = time.perf_counter()
    r = ingest(con, paths, runs.start(con, "ingest", {}))
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(json.dumps({"seconds": seconds, "rss_mb": rss, "events": r.events,
                      "quarantined": r.quarantined}))


def check(db_path: Path, logs: Path, plan: dict) -> list[str]:
    import duckdb

    from auditor.ingest.paths import escape_path

    con = duckdb.connect(str(db_path), read_only=True)
    problems = []
    for name in REFUSED:
        stored = con.execute("SELECT count(*) FROM sources WHERE path = ?",
                             [escape_path((logs / name).resolve())]).fetchall()[0][0]
        if stored:
            problems.append(f"{name}: loaded, should have been refused")
    for name, (good_at, bad_at) in plan.items():
        path = escape_path((logs / name).resolve())
        loaded = [n for (n,) in con.execute(
            "SELECT e.line_no FROM events e JOIN sources s ON s.id = e.source_id "
            "WHERE s.path = ? ORDER BY 1", [path]).fetchall()]
        held = [n for (n,) in con.execute(
            "SELECT q.line_no FROM quarantine q JOIN sources s ON s.id = q.source_id "
            "WHERE s.path = ? ORDER BY 1", [path]).fetchall()]
        if loaded != good_at:
            problems.append(f"{name}: {len(loaded)} events, {len(good_at)} good lines")
        if held != sorted(int(k) for k in bad_at):
            problems.append(f"{name}: {len(held)} quarantined, {len(bad_at)} bad lines")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bad", type=int, default=110_000)
    ap.add_argument("--good", type=int, default=440_000)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--memory-limit", default="1GB")
    ap.add_argument("--keep", action="store_true", help="keep the logs and database")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(Path(a.child[0]), Path(a.child[1]))
        return 0
    (ROOT / "bench" / "out").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="fuzz-", dir=ROOT / "bench" / "out"))
    logs = work / "logs"
    logs.mkdir(parents=True)
    plan, kinds = write(logs, a.files, a.good, a.bad, a.seed)
    bad = sum(len(b) for _, b in plan.values())
    good = sum(len(g) for g, _ in plan.values())
    size = sum(p.stat().st_size for p in logs.iterdir())
    env = dict(os.environ, BACC_AUDIT_MEMORY_LIMIT=a.memory_limit)
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(logs), str(work / "fuzz.duckdb")],
        env=env, capture_output=True, text=True,
    )
    if out.returncode != 0 or not out.stdout.strip():
        print(out.stdout, out.stderr)
        return 1
    r = json.loads(out.stdout.strip().splitlines()[-1])
    problems = check(work / "fuzz.duckdb", logs, plan)
    if not a.keep:
        shutil.rmtree(work)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; BACC_AUDIT_MEMORY_LIMIT={a.memory_limit}")
    print(f"{len(plan) + len(REFUSED)} files, {size / 1e6:.0f} MB on disk: {good:,} good "
          f"lines, {bad:,} bad lines of {len(kinds)} kinds; a 1 GB gzip bomb, a 200 MB line, "
          "names with \\xff and \\n, a fake and a cut .gz")
    print(f"ingest: {r['seconds']:.1f} s, {(good + bad) / r['seconds']:,.0f} lines/s, "
          f"peak RSS {r['rss_mb']:,} MB")
    print(f"events {r['events']:,} (want {good:,}), quarantined {r['quarantined']:,} "
          f"(want {bad:,})")
    print("lost or doubled: " + ("none" if not problems else f"{len(problems)} files"))
    for p in problems[:10]:
        print("  " + p)
    return 1 if problems or r["events"] != good or r["quarantined"] != bad else 0


if __name__ == "__main__":
    sys.exit(main())
