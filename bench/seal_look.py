"""What a poll's seal spends looking for leaves its records may already have.

    python bench/seal_look.py [--tables 500] [--hours 0.28] [--log-seconds 900] [--repeat 15]

A record stamped after the last seal has no leaf yet, unless the clock was set back: so a
poll's seal (store/ledger.py, `since` given) makes sure, against the leaves of the last
SEALED_LOOKBACK. Those grow with the night: at 500 tables about 5,000 leaves a minute.
This script lets a Watch follow bench/live.py's night for `--log-seconds` of log (a poll
every 2 s of it, each sealed), then loads one more poll without sealing it, and times, on
that state (medians of `--repeat`), the look as statements that only count:

- each kind the poll's seal looks at, with its look and without;
- the records of every kind in one statement, with a look a kind (how seals looked until
  session 61) and with one look for all of them (how they look now).

Record the figures with the machine and the command in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from live import SpoolWriter, night  # noqa: E402  (bench/live.py, beside this script)

from auditor import config  # noqa: E402
from auditor.jobs.watch import Watch, WatchOptions  # noqa: E402
from auditor.store import db, ledger, runs  # noqa: E402
from auditor.store.sql import quote  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=500)
    ap.add_argument("--hours", type=float, default=0.28, help="the night's length (cached)")
    ap.add_argument("--log-seconds", type=float, default=900.0)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    if args.log_seconds >= args.hours * 3600:
        sys.exit("--log-seconds must be shorter than the night (--hours)")
    work = Path(tempfile.mkdtemp(prefix="bench-seal-look-"))
    spool = work / "spool"
    spool.mkdir()
    writer = SpoolWriter(night(args.tables, args.hours, 11, 0.1), spool)
    write_until = writer.until

    con = db.connect(work / "live.duckdb")
    try:
        with runs.recorded(con, "watch", {}) as run:
            w = Watch(con, spool, config.load(None), run.id,
                      WatchOptions(sweep_every=1e9, idle_sweep=1e9, seal_every=0))
            t = 0.0
            while t < args.log_seconds:
                t += 2.0
                write_until(t)
                w.step()
            head = ledger.latest_head(con)
            assert head is not None
            since = head.sealed_at
            write_until(t + 0.2)
            w.follower.poll(con)  # one more poll's records, not sealed
            leaves = con.execute("SELECT count(*) FROM ledger").fetchall()[0][0]
            print(f"{args.tables} tables, {args.log_seconds:g} s of log: {leaves:,} leaves, "
                  f"{w.stats.events:,} events, {w.stats.polls} polls")
            timings(con, run.id, since, args.repeat)
            run.done(0, {})
    finally:
        con.close()
        writer.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}")
    print("command: python bench/seal_look.py " + " ".join(sys.argv[1:]))


def timings(con: duckdb.DuckDBPyConnection, run_id: int, since: dt.datetime, repeat: int
            ) -> None:
    def median_ms(sql: str) -> float:
        took = []
        for _ in range(repeat):
            started = time.perf_counter()
            con.execute(sql).fetchall()
            took.append(time.perf_counter() - started)
        return statistics.median(took) * 1000

    lookback = quote((since - ledger.SEALED_LOOKBACK).isoformat())
    types = ledger.column_types(con)
    each, plain = [], []
    print(f"{'kind':16} {'rows':>5} {'with its look':>14} {'without':>9}")
    for c in ledger.COVERED:
        if c.since is None or c.table not in types:
            continue
        where = (f"({c.ready}) AND {c.run} = {int(run_id)} "
                 f"AND {c.since} >= {quote(since.isoformat())}::TIMESTAMPTZ")
        # the look a kind as seals made it until session 61, for comparison
        look = (f" AND NOT EXISTS (SELECT 1 FROM ledger l WHERE l.kind = {quote(c.kind)} "
                f"AND l.record_key = {c.key} AND l.record_run = {int(run_id)} "
                f"AND l.sealed_at >= {lookback}::TIMESTAMPTZ)")
        rows = con.execute(f"SELECT count(*) FROM {c.table} WHERE {where}").fetchall()[0][0]
        with_look = median_ms(f"SELECT count(*) FROM {c.table} WHERE {where}{look}")
        without = median_ms(f"SELECT count(*) FROM {c.table} WHERE {where}")
        print(f"{c.kind:16} {rows:5d} {with_look:11.2f} ms {without:6.2f} ms")
        select = (f"SELECT {quote(c.kind)} AS kind, CAST({c.key} AS VARCHAR) AS record_key, "
                  f"{c.run} AS record_run FROM {c.table} WHERE {where}")
        plain.append(select)
        each.append(select + look)
    a_kind = "SELECT count(*) FROM (" + " UNION ALL ".join(each) + ")"
    once = (f"SELECT count(*) FROM ({' UNION ALL '.join(plain)}) u "
            f"WHERE NOT {ledger.sealed_lately('u', since)}")
    same = con.execute(a_kind).fetchall() == con.execute(once).fetchall()
    print(f"every kind in one statement: a look a kind {median_ms(a_kind):.2f} ms, "
          f"one look {median_ms(once):.2f} ms (the same records: {same})")


if __name__ == "__main__":
    main()
