"""What reading each stream in its order costs an audit (issue 28): the check of the streams'
times and the rounds' events as they stood.

    python bench/streams.py [--tables 200] [--hours 24] [--late 0.01]

Simulates a clean gaming day (the bulk generator: NJ mini-baccarat, its streams never run
back in time), ingests it (cached as bench/out/streams-<tables>-<hours>.duckdb), then times,
in one run:
  audit:      the whole first audit (`auditor.audit.run.audit`), with its parts below;
  streams:    `check_streams` alone, on the first audit (every stream new: two windows, the
              second over nothing on a clean day) and on a second one (nothing changed);
  rounds:     `select_rounds` over every round of the day;
  late:       `select_rounds` again after a file brings a late `vig` for `--late` of the
              rounds (after its table's close), and the late events' findings;
and prints each with events/s or rounds/s and its share of the audit. With `--against REV`
(a commit from before issue 28, e.g. c41bab1), `select_rounds` of that commit's
auditor/audit/run.py is timed against today's, alternately, `--repeat` times each, on the
same database in the same process.
"""

from __future__ import annotations

import argparse
import importlib.util
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
sys.path.insert(0, str(ROOT))

from auditor.audit.rounds import record_late, select_rounds  # noqa: E402
from auditor.audit.run import audit  # noqa: E402
from auditor.audit.streams import check_streams  # noqa: E402
from auditor.config import PropertyConfig  # noqa: E402
from auditor.ingest.run import ingest  # noqa: E402
from auditor.simulate.bulk import simulate_bulk  # noqa: E402
from auditor.store import db, runs  # noqa: E402

OUT = ROOT / "bench" / "out"


def _database(tables: int, hours: float) -> Path:
    """The day ingested, once; each run works on a copy."""
    OUT.mkdir(parents=True, exist_ok=True)
    cached = OUT / f"streams-{tables}-{hours:g}.duckdb"
    if not cached.exists():
        logs = OUT / f"streams-{tables}-{hours:g}-logs"
        shutil.rmtree(logs, ignore_errors=True)
        simulate_bulk(logs, tables, hours, seed=1)
        con = db.connect(cached.with_suffix(".tmp"))
        ingest(con, [logs], runs.start(con, "ingest", {}))
        con.close()
        cached.with_suffix(".tmp").rename(cached)
        shutil.rmtree(logs)
    return cached


def _timed(what: str, fn):
    started = time.perf_counter()
    out = fn()
    took = time.perf_counter() - started
    print(f"  {what:<52} {took:8.2f} s", flush=True)
    return out, took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--late", type=float, default=0.01, help="share of rounds given a late vig")
    ap.add_argument("--against", help="a commit whose select_rounds to time against today's")
    ap.add_argument("--repeat", type=int, default=7, help="runs of each, with --against")
    args = ap.parse_args()
    print(f"{platform.node()}: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, "
          f"python {platform.python_version()}")
    cached = _database(args.tables, args.hours)
    path = OUT / "streams-run.duckdb"
    shutil.copy(cached, path)
    con = db.connect(path)
    conf = PropertyConfig()
    events, rounds = con.execute(
        "SELECT count(*), count(*) FILTER (type = 'round_start') FROM events").fetchall()[0]
    print(f"{args.tables} tables, {args.hours:g} h: {events:,} events, {rounds:,} rounds")
    zone = conf.zone_for(con)
    first, t_streams = _timed("streams, first check (every stream new)",
                              lambda: check_streams(con, runs.start(con, "b", {}), zone))
    _, t_again = _timed("streams, nothing changed",
                        lambda: check_streams(con, runs.start(con, "b", {}), zone))
    con.execute("DELETE FROM stream_checks")  # the audit below checks them again
    _, t_select = _timed("select_rounds, every round of the day",
                         lambda: select_rounds(con, conf, None))
    result, t_audit = _timed("audit, the whole first one",
                             lambda: audit(con, runs.start(con, "audit", {}), conf))
    # A file that brings a late vig for a share of the rounds, after the tables' close.
    late = con.execute(
        f"""
        SELECT r.table_id, r.shoe, r.round, t.top FROM (
          SELECT table_id, shoe, round FROM events WHERE type = 'round_end'
          USING SAMPLE {args.late * 100:.4f} PERCENT (bernoulli, 7)
        ) r JOIN (SELECT table_id, max(seq) AS top, max(ts) AS last FROM events
                  GROUP BY ALL) t USING (table_id)
        ORDER BY ALL
        """
    ).fetchall()
    tops: dict[str, int] = {}
    lines = []
    for table, shoe, rnd, top in late:
        tops[table] = tops.get(table, top) + 1
        lines.append(json.dumps({"v": 1, "ts": "2026-12-02T07:00:00-05:00", "type": "vig",
                                 "table": table, "seq": tops[table], "shoe": shoe,
                                 "round": rnd, "seat": 1, "amount": "1.00",
                                 "mode": "collect"}))
    later = OUT / "streams-late.jsonl"
    later.write_text("\n".join(lines) + "\n")
    ingest(con, [later], runs.start(con, "ingest", {}))
    run_id = runs.start(con, "b", {})
    con.execute("BEGIN TRANSACTION")
    _, t_late = _timed(f"select_rounds with {len(late):,} rounds given a late vig",
                       lambda: select_rounds(con, conf, None))
    found, t_record = _timed("their findings worded and recorded",
                             lambda: record_late(con, run_id, zone))
    con.execute("ROLLBACK")
    con.close()
    print(f"streams, first check: {events / t_streams:,.0f} events/s, "
          f"{t_streams / t_audit:.0%} of the audit ({first['streams_checked']} streams); "
          f"nothing changed: {t_again:.3f} s")
    print(f"select_rounds: {rounds / t_select:,.0f} rounds/s, {t_select / t_audit:.0%} of "
          f"the audit ({result.rounds:,} rounds audited in {t_audit:.1f} s)")
    print(f"late rounds: select_rounds {t_late:.2f} s, findings {found[0]:,} new in "
          f"{t_record:.2f} s")
    if args.against:
        _against(cached, args.against, args.repeat)


def _against(cached: Path, rev: str, repeat: int) -> None:
    """select_rounds of `rev` (its auditor/audit/run.py) and today's, alternately, on a fresh
    copy of the day (no round audited yet)."""
    source = subprocess.run(["git", "show", f"{rev}:auditor/audit/run.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    old_file = OUT / f"run-{rev}.py"
    old_file.write_text(source)
    spec = importlib.util.spec_from_file_location(f"run_{rev}", old_file)
    assert spec is not None and spec.loader is not None
    old = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = old
    spec.loader.exec_module(old)
    path = OUT / "streams-against.duckdb"
    shutil.copy(cached, path)
    con = db.connect(path)
    conf = PropertyConfig()
    took: dict[str, list[float]] = {rev: [], "today": []}
    for _ in range(repeat):
        for name, fn in ((rev, old.select_rounds), ("today", select_rounds)):
            started = time.perf_counter()
            fn(con, conf, None)
            took[name].append(time.perf_counter() - started)
    con.close()
    for name, times in took.items():
        print(f"select_rounds {name:>8}: min {min(times):.3f} s, median "
              f"{statistics.median(times):.3f} s, max {max(times):.3f} s ({repeat} runs)")
    print(f"today / {rev}: min {min(took['today']) / min(took[rev]):.2f}x, median "
          f"{statistics.median(took['today']) / statistics.median(took[rev]):.2f}x")


if __name__ == "__main__":
    main()
