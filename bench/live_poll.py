"""What one poll of `watch` costs, statement by statement, without a clock.

    python bench/live_poll.py [--tables 500] [--hours 0.28] [--log-seconds 2] [--polls 30]
                              [--start 60]

Takes bench/live.py's night (`--tables` tables, `--hours` long, cached under bench/out/:
a poll's cost late in the night needs a longer night and a later `--start`), writes its first
`--start` seconds of log into a spool and lets a Watch load them (the first pieces: at 60 s
the floor is still opening, a light feed; at 600 s it is in full swing), then before each of
`--polls` polls writes the next `--log-seconds` of log (2 s: a poll every 0.2 s at ten times
real speed; 0.2 s: at real speed) and times the poll (`Watch.step`, sweeps held off): wall and
CPU time (the process's, DuckDB's threads included), and every statement through the
connection, grouped by its text. So the fixed part of a poll (what it costs whatever it
loads) can be told from the part that follows the lines; bench/live.py measures the whole
watcher. Record the figures with the machine and the command in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from live import SpoolWriter, night  # noqa: E402  (bench/live.py, beside this script)

from auditor import config  # noqa: E402
from auditor.jobs.watch import Watch, WatchOptions  # noqa: E402
from auditor.store import db, runs, serving  # noqa: E402

calls: collections.Counter[str] = collections.Counter()
spent: dict[str, float] = collections.defaultdict(float)
_execute = serving.OwnedConnection.execute


def _timed(self: serving.OwnedConnection, *args: Any, **kwargs: Any) -> serving.OwnedConnection:
    started = time.perf_counter()
    try:
        return _execute(self, *args, **kwargs)
    finally:
        key = " ".join(str(args[0]).split())[:90]
        calls[key] += 1
        spent[key] += time.perf_counter() - started


def _history(con: Any, tables: list[str], n: int) -> None:
    """`n` rounds of earlier nights of `tables` (80 rounds a shoe, a shoe id of its own per
    night), recorded as judged by an earlier audit run: the round_audits a database keeps."""
    with runs.recorded(con, "audit", {}) as past:
        con.execute(
            """
            INSERT INTO round_audits
            SELECT t[1 + i % len(t)], t[1 + i % len(t)] || '-H' || (i // len(t) // 80)::VARCHAR,
                   1 + (i // len(t)) % 80, 17, 17 * (1 + (i // len(t)) % 80), 0, ?,
                   TIMESTAMPTZ '2026-11-01 00:00:00+00' + to_microseconds(i)
            FROM range(?) r(i), (SELECT ?::VARCHAR[] AS t)
            """,
            [past.id, n, tables],
        )
        past.done(0, {})


def _past_nights(con: Any, files: list[Path], work: Path, k: int) -> None:
    """The night's events `k` more times before it, as a database that keeps its history
    holds them: day d's copy stamped d days earlier, its seqs below the night's (the streams
    stay in order), its shoes and source ids its own, its rounds recorded as audited by an
    earlier run. Ingested once into a scratch database, then copied in SQL."""
    from auditor.ingest.run import ingest

    scratch = db.connect(work / "past.duckdb")
    with runs.recorded(scratch, "ingest", {}) as past:
        ingest(scratch, [f for f in files if ".resent." not in f.name], past.id)
    scratch.close()
    con.execute(f"ATTACH '{work / 'past.duckdb'}' AS past (READ_ONLY)")
    with runs.recorded(con, "audit", {}) as run:
        for d in range(k, 0, -1):
            con.execute(
                f"""
                INSERT INTO events SELECT * REPLACE (
                  ts - INTERVAL {d} DAY AS ts, seq - {d} * 100000000::BIGINT AS seq,
                  shoe || '~{d}' AS shoe, source_id + {d} * 1000000::BIGINT AS source_id)
                FROM past.events ORDER BY ts
                """
            )
        con.execute(
            """
            INSERT INTO round_audits
            SELECT table_id, shoe, round, count(*), max(seq), 0, ?, now() FROM events
            WHERE round IS NOT NULL AND shoe IS NOT NULL GROUP BY ALL
            """,
            [run.id],
        )
        run.done(0, {})
    con.execute("DETACH past")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tables", type=int, default=500)
    ap.add_argument("--log-seconds", type=float, default=2.0)
    ap.add_argument("--polls", type=int, default=30)
    ap.add_argument("--hours", type=float, default=0.28,
                    help="the night's length (bench/live.py's night, cached); a later "
                         "--start needs a longer night")
    ap.add_argument("--start", type=float, default=60.0,
                    help="seconds of the night loaded before the polls timed (60: the floor "
                         "still opening; 600: in full swing)")
    ap.add_argument("--warm-step", type=float, default=0.0, metavar="S",
                    help="load the first --start seconds S seconds of log a poll, as a watch "
                         "running all night would (its events table then in time order, "
                         "which bounded reads rely on); 0: in one poll")
    ap.add_argument("--poll-threads", type=int, default=WatchOptions.poll_threads, metavar="N",
                    help="DuckDB's threads while polling (WatchOptions.poll_threads; 0: "
                         "DuckDB's own count, as before session 51)")
    ap.add_argument("--top", type=int, default=25, help="the N costliest statements shown")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="print the N costliest functions of the polls (cProfile)")
    ap.add_argument("--sort", default="cumulative", choices=("cumulative", "tottime"),
                    help="the profile's order: with what each calls, or its own time")
    ap.add_argument("--history", type=int, default=0, metavar="N",
                    help="N rounds audited by an earlier run (earlier nights of the same "
                         "tables) in the database before the watch starts: what a poll "
                         "costs as the database keeps its history")
    ap.add_argument("--past-nights", type=int, default=0, metavar="K",
                    help="K earlier nights in the database before the watch starts: the "
                         "night's events again K times, a day apart each (seqs, shoes and "
                         "sources of their own), their rounds recorded as audited; the "
                         "watch's first sweep is skipped (it would audit them all)")
    args = ap.parse_args()
    files = night(args.tables, args.hours, 11, 0.1)
    work = Path(tempfile.mkdtemp(prefix="bench-live-poll-"))
    spool = work / "spool"
    spool.mkdir()
    writer = SpoolWriter(files, spool)
    write_until = writer.until

    serving.OwnedConnection.execute = _timed  # type: ignore[method-assign]
    con = db.connect(work / "live.duckdb")
    if args.history:
        _history(con, sorted({f.name.split("_", 1)[1].split(".")[0] for f in files}),
                 args.history)
    if args.past_nights:
        _past_nights(con, files, work, args.past_nights)
    walls, cpus = [], []
    with runs.recorded(con, "watch", {}) as run:
        w = Watch(con, spool, config.load(None), run.id,
                  WatchOptions(sweep_every=1e9, idle_sweep=1e9,
                               poll_threads=args.poll_threads))
        if args.past_nights:
            # no sweep: the past nights stand audited (their sources are not on record, a
            # sweep's table pass would not find their files); a poll is what is timed
            w._sweep_due, w._sweep_after = False, float("inf")
        t = args.start
        if args.warm_step > 0:
            for warm in range(1, int(t / args.warm_step) + 1):
                write_until(warm * args.warm_step)
                w.step()
        write_until(t)
        w.step()  # the first pieces, and the first sweep
        w.step()
        calls.clear()
        spent.clear()
        events = w.stats.events
        profile = cProfile.Profile() if args.profile else None
        for _ in range(args.polls):
            t += args.log_seconds
            write_until(t)
            cpu, wall = time.process_time(), time.perf_counter()
            if profile is not None:
                profile.enable()
            w.step()
            if profile is not None:
                profile.disable()
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        run.done(0, {})
    writer.close()
    con.close()
    shutil.rmtree(work, ignore_errors=True)
    n = args.polls
    walls.sort()
    cpus.sort()
    print(f"command: python bench/live_poll.py --tables {args.tables} --hours {args.hours:g} "
          f"--log-seconds {args.log_seconds:g} --polls {n} --start {args.start:g}"
          + (f" --warm-step {args.warm_step:g}" if args.warm_step else "")
          + (f" --history {args.history}" if args.history else "")
          + (f" --past-nights {args.past_nights}" if args.past_nights else "")
          + f" --poll-threads {args.poll_threads}")
    print(f"{n} polls of {args.log_seconds:g} s of log, {(w.stats.events - events) / n:.0f} "
          f"events a poll: wall median {walls[n // 2] * 1e3:.0f} ms, 90th "
          f"{walls[int(n * 0.9)] * 1e3:.0f} ms; CPU median {cpus[n // 2] * 1e3:.0f} ms; "
          f"{sum(calls.values()) / n:.1f} statements a poll, "
          f"{sum(spent.values()) / n * 1e3:.0f} ms in them")
    for key, s in sorted(spent.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {s / n * 1e3:7.1f} ms  {calls[key] / n:5.1f} a poll  {key}")
    if profile is not None:
        pstats.Stats(profile).sort_stats(args.sort).print_stats(args.profile)


if __name__ == "__main__":
    main()
