"""The per-line path's cost to start, before and after a change, on the same files in one run.

    python bench/staging.py [--against /work/wt/base] [--repeat 5] [--big 200000]

Three files (made once under bench/out/ from the simulator's table nights, the bad lines
written in place of wagers' amounts): one of a single bad line among 200 good ones; one of
1,000 lines, 1% bad; one of `--big` lines with a bad line every 2,000, so the per-line path
runs in every block of a big file; and the big file once more with the fast path off, every
line through the per-line path (its speed in bulk, the parity tests' way). Each is ingested
into a fresh database by a child process of each tree (this one, and `--against`: another
checkout with its own .venv), the two trees taking turns, `--repeat` times. A child times,
in CPU seconds (user + sys, DuckDB's threads included), the whole
`auditor.ingest.run.ingest` call and, within it, the staging of rows (`Staging.insert`,
where the per-line path's statement runs); it counts the events and quarantined lines so
both trees are seen to agree. Prints the median of each and the ratio, with the load
average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BAD_EVERY_BIG = 2_000


def make_file(path: Path, lines: int, bad_every: int, seed: int) -> None:
    """`lines` lines of simulated table nights, every `bad_every`-th wager's amount given 3
    decimal places (a line the fast path leaves to the per-line path, which refuses it)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from ingest import make_log  # bench/ingest.py: whole table nights

    whole = path.with_suffix(".whole")
    make_log(whole, lines, seed)
    out: list[str] = []
    wagers = 0
    with whole.open() as fh:
        for text in fh:
            if len(out) == lines:
                break
            if '"type":"wager"' in text:
                wagers += 1
                if wagers % bad_every == 0 or (bad_every > lines and wagers == 1):
                    text = re.sub(r'"amount":("?)([0-9.]+)', r'"amount":\g<1>\g<2>.001', text)
            out.append(text)
    whole.unlink()
    path.write_text("".join(out))


def files(big: int) -> dict[str, Path]:
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    # Wagers are about a fifth of the lines: 1% of the lines is one wager in 20.
    specs = {
        "one bad line in 200": (200, 10**9, 1),
        "1,000 lines, 1% bad": (1_000, 20, 2),
        f"{big:,} lines, a bad one every {BAD_EVERY_BIG:,}": (big, BAD_EVERY_BIG // 5, 3),
    }
    made = {}
    for name, (n, every, seed) in specs.items():
        path = out / f"staging-{n}-{every}.jsonl"
        if not path.exists():
            make_file(path, n, every, seed)
        made[name] = path
    return made


def child(path: Path, tree: Path, per_line: bool) -> dict[str, Any]:
    """One ingest of `path` by the `auditor` this interpreter imports; CPU seconds.
    `per_line`: every line through the per-line path (the fast path off)."""
    import resource

    import auditor
    from auditor.ingest import fast, stage
    from auditor.ingest.run import ingest
    from auditor.store import db, runs

    assert Path(auditor.__file__).resolve().is_relative_to(tree.resolve()), auditor.__file__

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    staged = [0.0]
    real = stage.Staging.insert

    def insert(self: Any, *a: Any, **kw: Any) -> None:
        c = cpu()
        real(self, *a, **kw)
        staged[0] += cpu() - c

    stage.Staging.insert = insert  # type: ignore[method-assign]
    fast.ENABLED = not per_line
    with tempfile.TemporaryDirectory() as d:
        # A first file of one good line loads DuckDB's JSON extension and the like.
        warm = Path(d) / "warm.jsonl"
        warm.write_text(path.open().readline())
        con = db.connect(Path(d) / "warm.duckdb")
        ingest(con, [warm], runs.start(con, "bench", {}))
        con.close()
        staged[0] = 0.0
        con = db.connect(Path(d) / "audit.duckdb")
        run_id = runs.start(con, "bench", {})
        c = cpu()
        result = ingest(con, [path], run_id)
        total = cpu() - c
        con.close()
    return {"ingest": total, "staging": staged[0], "events": result.events,
            "quarantined": sum(f.quarantined for f in result.files)}


def run_child(tree: Path, path: Path, per_line: bool) -> dict[str, Any]:
    python = tree / ".venv" / "bin" / "python"
    cmd = [str(python), str(Path(__file__).resolve()), "--child", str(path), "--tree", str(tree)]
    out = subprocess.run(
        cmd + (["--per-line"] if per_line else []),
        cwd=tree, capture_output=True, text=True, check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", type=Path, default=Path("/work/wt/base"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--big", type=int, default=200_000)
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--per-line", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.tree, args.per_line)))
        return

    trees = {"before": args.against, "after": ROOT}
    made = files(args.big)
    # The big file again with the fast path off: the per-line path's own speed in bulk.
    big = list(made)[-1]
    cases = [(name, path, False) for name, path in made.items()]
    cases.append((f"{big}, every line by the per-line path", made[big], True))
    print(f"vm: {os.cpu_count()} cores, python {platform.python_version()}; "
          f"before = {args.against}, after = {ROOT}")
    print(f"load average at the start: {load()}")
    for name, path, per_line in cases:
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
        for i in range(args.repeat):
            # Take turns, starting each round with the other tree.
            for label in (list(trees) if i % 2 == 0 else list(trees)[::-1]):
                runs[label].append(run_child(trees[label], path, per_line))
        counts = {(r["events"], r["quarantined"]) for rs in runs.values() for r in rs}
        assert len(counts) == 1, f"the trees disagree on {name}: {counts}"
        ((events, quarantined),) = counts
        print(f"\n{name}: {events:,} events, {quarantined:,} quarantined "
              f"(median of {args.repeat}, CPU seconds)")
        med = {k: {m: statistics.median(r[m] for r in rs) for m in ("ingest", "staging")}
               for k, rs in runs.items()}
        for m in ("ingest", "staging"):
            b, a = med["before"][m], med["after"][m]
            print(f"  {m:<8} before {b:7.3f} s   after {a:7.3f} s   after/before {a / b:5.2f}")
    print(f"\nload average at the end: {load()}")


if __name__ == "__main__":
    main()
