"""Speed of the audit stage with every pass on (issue 32): a 200-table night, ~3% deviant rounds.

    python bench/audit.py [--tables 200] [--hours 13] [--rate 0.03] [--repeat 3]
                          [--against /work/wt/base] [--profile]

The logs come from the reference simulator (auditor.simulate.planted: deviations planted per
round, shoe, pit, table and file at `--rate`, and the dealer, counting-seat, shoe-twice and
unshuffled patterns, so that every pass has work), of the banking games by default
(`--games`): every chemin de fer round goes through the reference replay, never the fast
verdict, so a night with a third of its tables at chemin de fer times that replay (about 700
rounds/s of CPU) rather than the stage. They are written and
ingested once into a cached database (bench/out/audit-*.duckdb): the audit stage alone is
timed, never the ingest. Each repeat copies that database to a fresh file and
audits the copy in a child process of the tree being measured (`auditor.audit.run.audit`,
as `bacc-audit audit` calls it inside its recorded run), timing the whole stage and its parts
(the streams check, the rounds, the table pass, shoe integrity, dealers, side bets), the
CPU seconds of the process (DuckDB's threads included) and the load average.

With `--against TREE` (a checkout with its own .venv, e.g. the start commit) the repeats
alternate between that tree and this one, so that before and after come from one run on the
same machine; the findings of both are compared (code, table, shoe, round, message) and the
run fails if they differ. With `--db-each` as well, each tree ingests the night into a database
of its own (a tree from before a change of the schema cannot read this tree's); the findings
are then only counted, since the trees may find different things.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
TARGET = 160_000  # rounds/s, issue 32

# The stage's parts, as (module, function): each call's wall time is added to its part. The
# functions are looked up when the child runs, in the tree being measured; one that tree
# lacks is left out.
PARTS = (
    ("auditor.audit.run", "check_streams", "streams"),
    ("auditor.audit.run", "select_rounds", "rounds: selection"),
    ("auditor.audit.run", "record_late", "rounds: late events"),
    ("auditor.audit.run", "clean_rounds", "rounds: facts + verdict"),
    ("auditor.audit.run", "_store", "rounds: findings stored"),
    ("auditor.audit.run", "_replay", "rounds: replay in all"),
    ("auditor.audit.table_pass", "table_findings", "table pass"),
    ("auditor.audit.table_pass", "supersede_round_mismatches", "mismatches superseded"),
    ("auditor.audit.integrity", "integrity_findings", "shoe integrity"),
    ("auditor.audit.table_pass", "dealer_findings", "dealers"),
    ("auditor.audit.sidebets", "side_bet_findings", "side bets"),
)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def time_parts(spent: dict[str, float]) -> None:
    """Each call of a part adds its wall time to `spent[part]` (bench/history.py uses it too):
    `audit` imports the passes when it runs, so the wrappers set here are the ones it calls."""
    import importlib

    for module_name, name, part in PARTS:
        module = importlib.import_module(module_name)
        real = getattr(module, name, None)
        if real is None:
            continue

        def wrapper(*a: Any, _real: Callable[..., Any] = real, _part: str = part,
                    **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return _real(*a, **kw)
            finally:
                spent[_part] = spent.get(_part, 0.0) + time.perf_counter() - t

        setattr(module, name, functools.wraps(real)(wrapper))


# --- the child: one audit of one copy, in the tree it runs in ----------------------------------


def child(db_path: Path, profile: Path | None) -> None:
    from auditor import config as cfg
    from auditor.store import config_record, db, runs

    spent: dict[str, float] = {}
    time_parts(spent)
    from auditor.audit.run import audit

    con = db.connect(db_path)
    conf = cfg.load(None)
    with runs.recorded(con, "audit", {"config": conf.source,
                                      **config_record.run_args(conf, None)}) as run:
        load_before = _load()
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        if profile is not None:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        result = audit(con, run.id, conf)  # the stage alone: not the run's seals
        wall = time.perf_counter() - t0
        if profile is not None:
            prof.disable()
            prof.dump_stats(str(profile))
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        run.done(0, result.summary())
    rows = con.execute(
        "SELECT code, coalesce(table_id, ''), coalesce(shoe, ''), coalesce(round, -1), "
        "coalesce(seq, -1), message FROM current_findings ORDER BY ALL"
    ).fetchall()
    con.close()
    print(json.dumps({
        "wall": wall,
        "cpu": (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime),
        "rounds": result.rounds,
        "findings": len(rows),
        "findings_digest": hashlib.sha256(json.dumps(rows, default=str).encode()).hexdigest(),
        "parts": spent,
        "load": f"{load_before} -> {_load()}",
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }))


# --- the parent ---------------------------------------------------------------------------------


def logs_for(args: argparse.Namespace) -> Path:
    """The night's logs, simulated once (by this tree's simulator) and kept."""
    from auditor.simulate.planted import NightSettings, simulate_night

    games = tuple(args.games.split(","))
    folder = OUT / (f"audit-{args.tables}t-{args.hours:g}h-{args.rate:g}-s{args.seed}-"
                    f"{'-'.join(g[:2] for g in games)}.logs")
    if (folder / "ground_truth.ndjson").exists():
        return folder
    t = time.perf_counter()
    made = simulate_night(folder, NightSettings(
        args.tables, args.hours, args.seed, args.rate, games, error_prone_dealer=True,
        counting_seat=True, shoe_twice=True, unshuffled=True), replace=True)
    print(f"simulated {made.tables} tables, {made.rounds:,} rounds, {made.events:,} events, "
          f"{len(made.deviations):,} deviations in {time.perf_counter() - t:.0f} s", flush=True)
    return folder


def ingested(tree: Path, logs: Path, own: bool = False) -> Path:
    """The logs ingested once, by `tree`'s code (the first tree measured: both trees must
    read the same schema), or with `own` into a database of the tree's own, named by its
    commit."""
    path = logs.with_suffix(".duckdb")
    if own:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=tree, check=True,
                              capture_output=True, text=True).stdout.strip()
        path = logs.with_suffix(f".{head}.duckdb")
    if path.exists():
        return path
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    code = (
        "import sys; from pathlib import Path; from auditor.store import db, runs; "
        "from auditor.ingest.run import ingest; con = db.connect(Path(sys.argv[1])); "
        "r = ingest(con, [Path(sys.argv[2])], runs.start(con, 'bench', {})); "
        "print(r.events); con.close()"
    )
    t = time.perf_counter()
    out = subprocess.run([str(tree / ".venv" / "bin" / "python"), "-c", code, str(tmp),
                          str(logs)], cwd=tree, check=True, capture_output=True, text=True)
    print(f"{tree}: ingested {int(out.stdout.split()[-1]):,} events in "
          f"{time.perf_counter() - t:.0f} s", flush=True)
    tmp.rename(path)
    return path


def run_once(tree: Path, source: Path, profile: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=OUT) as tmp:
        copy = Path(tmp) / "audit.duckdb"
        shutil.copyfile(source, copy)
        cmd = [str(tree / ".venv" / "bin" / "python"), str(Path(__file__).resolve()),
               "--child", str(copy)]
        if profile is not None:
            cmd += ["--profile-out", str(profile)]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        out = subprocess.run(cmd, cwd=tree, env=env, check=True, capture_output=True,
                             text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def show(label: str, r: dict[str, Any]) -> None:
    rate = r["rounds"] / r["wall"]
    print(f"{label:>7}: {r['wall']:6.2f} s  {rate:9,.0f} rounds/s  cpu {r['cpu']:6.2f} s  "
          f"{r['findings']:,} findings  peak {r['peak_rss_mb']:,} MB  load {r['load']}",
          flush=True)
    print("         " + ", ".join(f"{k} {v:.2f}" for k, v in r["parts"].items()), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument("--hours", type=float, default=13.0)
    ap.add_argument("--rate", type=float, default=0.03)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--games", default="mini_baccarat,punto_banco")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--against", type=Path, help="another tree (with .venv) to alternate with")
    ap.add_argument("--db-each", action="store_true",
                    help="with --against: each tree ingests the night itself (schemas differ)")
    ap.add_argument("--profile", action="store_true",
                    help="one cProfile'd run of this tree instead; prints its top functions")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--profile-out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.profile_out)
        return
    sys.path.insert(0, str(ROOT))
    OUT.mkdir(parents=True, exist_ok=True)
    logs = logs_for(args)
    trees = [("after", ROOT)]
    if args.against:
        trees.insert(0, ("before", args.against.resolve()))
    sources = {label: ingested(tree, logs, own=args.db_each) for label, tree in trees}
    if not args.db_each:
        sources = dict.fromkeys(sources, sources[trees[0][0]])
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; logs {logs.name}; load {_load()}", flush=True)
    if args.profile:
        import pstats

        prof = OUT / "audit.prof"
        show("after", run_once(ROOT, sources["after"], prof))
        pstats.Stats(str(prof)).sort_stats("cumulative").print_stats(45)
        return
    results: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in trees}
    for i in range(args.repeat):
        order = trees if i % 2 == 0 else trees[::-1]
        for label, tree in order:
            r = run_once(tree, sources[label], None)
            results[label].append(r)
            show(label, r)
    print()
    for label, rs in results.items():
        walls = [r["wall"] for r in rs]
        cpus = [r["cpu"] for r in rs]
        rounds = rs[0]["rounds"]
        best = rounds / min(walls)
        print(f"{label}: {rounds:,} rounds; wall median {statistics.median(walls):.2f} s "
              f"(min {min(walls):.2f}), {rounds / statistics.median(walls):,.0f} rounds/s "
              f"median, {best:,.0f} best; cpu median {statistics.median(cpus):.2f} s; "
              f"target {TARGET:,} rounds/s: {'met' if best >= TARGET else 'missed'}")
    if args.against:
        b, a = results["before"], results["after"]
        wall = statistics.median(r["wall"] for r in b) / statistics.median(r["wall"] for r in a)
        cpu = statistics.median(r["cpu"] for r in b) / statistics.median(r["cpu"] for r in a)
        print(f"after / before: {wall:.2f}x faster (wall medians), {cpu:.2f}x (cpu medians)")
        if args.db_each:
            print(f"findings: before {b[0]['findings']:,}, after {a[0]['findings']:,} "
                  "(each tree's own database: not compared)")
            return
        same = {r["findings_digest"] for r in b + a}
        print("findings: " + ("identical in every run" if len(same) == 1 else
                              f"DIFFER ({len(same)} distinct sets)"))
        if len(same) != 1:
            sys.exit(1)


if __name__ == "__main__":
    main()
