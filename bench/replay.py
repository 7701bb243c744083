"""Round replay speed: the fast verdict over per-round facts against the reference check_round.

    python bench/replay.py [--rounds 1000000] [--python-rounds 100000] [--threads N]

Generates (once, cached as bench/out/replay-<rounds>.duckdb) an ingested audit database of
simulated mini-baccarat tables with at least the asked number of rounds, then times, from the
same `todo` table that auditor.audit.run.select_rounds builds (so none pays for finding the
rounds):
  facts:   auditor.audit.facts.build, the per-round facts aggregated by DuckDB (one row per
           round, one per round and settlement key);
  verdict: auditor.replay.verdict.clean over those facts (numpy), the target figure;
  audit:   auditor.audit.run.clean_rounds, what the audit does before check_round (contexts,
           facts, verdict, the clean rounds as a table);
  python:  what auditor/audit/run.py does per round it does not call clean: the round's
           events fetched through Arrow, Event values, check_round (on the first
           --python-rounds rounds: the whole would take minutes);
and prints rounds/s for each, the peak memory, and checks the contract on the rounds the
reference replayed: none the verdict calls clean has a finding.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing
import os
import platform
import random
import resource
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from auditor.audit import facts  # noqa: E402
from auditor.audit.event_rows import event_at  # noqa: E402
from auditor.audit.run import (  # noqa: E402
    BATCH_ROWS,
    Known,
    _context,
    clean_rounds,
    fast_rounds,
    round_events_sql,
    select_rounds,
)
from auditor.config import PropertyConfig  # noqa: E402
from auditor.ingest.run import ingest  # noqa: E402
from auditor.replay import verdict  # noqa: E402
from auditor.replay.model import TableContext  # noqa: E402
from auditor.replay.round import check_round  # noqa: E402
from auditor.rules.pack import PackCache  # noqa: E402
from auditor.simulate.generator import Deviation, Night, TableNight, TableSpec  # noqa: E402
from auditor.store import db, runs  # noqa: E402

NIGHT_DATE = dt.date(2026, 11, 28)
TABLES_PER_FILE = 100

# Deviations planted at every table (each once, at the first round that qualifies after the
# time given), so the findings stage has work too; most rounds stay clean, as in a real night.
PLANTED = (
    ("banker_missed", "19:00", "draw.banker_missed"),
    ("player_extra", "20:00", "draw.player_extra"),
    ("tie_missing", "21:00", "announce.tie_missing"),
    ("wrong_winner", "22:00", "result.misannounced"),
    ("pay_short", "23:00", "settle.wrong_amount"),
    ("collect_after_pay", "00:30", "order.collect_after_pay"),
    ("procedure_order", "02:00", "order.procedure_mismatch"),
    ("push_collected", "03:00", "settle.wrong_outcome"),
    ("vig_short", "04:00", "vig.wrong_amount"),
    ("vig_not_allowed", "05:00", "vig.not_allowed"),
    ("dragon_missing", "06:00", "announce.dragon7_missing"),
    ("total_cards_missing", "07:00", "announce.total_cards_missing"),
)


def table_spec(i: int) -> TableSpec:
    """A mix of the tables a property runs: NJ standard (vigorish) under procedures 1-4,
    NJ no-vigorish dragon 7, total-card wagers, and NZ (no procedures)."""
    table, pit = f"T{i:05d}", f"P{i % 40:02d}"
    kind = i % 4
    if kind == 3:
        return TableSpec(
            table,
            pit,
            "mini_baccarat",
            "NZ",
            "standard",
            7,
            None,
            ("tie",),
            opens="18:00",
            closes="10:00",
        )
    variant = "no_vig_dragon7" if kind == 2 else "standard"
    side = (
        ("tie", "total_cards_4", "total_cards_5", "total_cards_6")
        if kind == 1
        else ("tie", "dragon7", "panda8")
    )
    return TableSpec(
        table,
        pit,
        "mini_baccarat",
        "NJ",
        variant,
        7,
        (i // 4) % 4 + 1,
        side,
        opens="18:00",
        closes="10:00",
    )


def _fits(kind: str, spec: TableSpec) -> bool:
    """Whether the simulator can plant `kind` at this table (vigorish deviations need a
    variant that charges it or does not, and so on)."""
    vig = spec.variant == "standard"
    return {
        "vig_short": vig,
        "vig_not_allowed": not vig,
        "dragon_missing": spec.variant == "no_vig_dragon7",
        "total_cards_missing": "total_cards_5" in spec.side_bets,
        "procedure_order": spec.procedure is not None,
    }.get(kind, True)


def _play(i: int) -> tuple[int, str]:
    """One table's night as JSONL text, and its number of rounds (run in a worker)."""
    spec = table_spec(i)
    devs = [
        Deviation(spec.table, kind, after, code, "")
        for kind, after, code in PLANTED
        if _fits(kind, spec)
    ]
    night = Night(NIGHT_DATE, dt.timedelta(hours=-5), [spec], devs)
    lines = TableNight(night, spec, random.Random(f"replay:{i}")).run()
    rounds = sum(1 for line in lines if '"type":"round_start"' in line)
    return rounds, "\n".join(lines) + "\n"


def make_db(path: Path, rounds: int) -> None:
    """Simulate tables (on every core) into JSONL files of TABLES_PER_FILE tables until
    `rounds` rounds, ingest them into a new audit database at `path`, drop the files."""
    work = path.with_suffix(".logs")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    t = time.perf_counter()
    made = tables = 0
    with multiprocessing.Pool(os.cpu_count()) as pool:
        while made < rounds:  # a file of tables at a time, until there are enough rounds
            batch = range(tables, tables + TABLES_PER_FILE)
            with (work / f"tables-{tables // TABLES_PER_FILE:04d}.jsonl").open("w") as fh:
                for n, text in pool.imap(_play, batch, chunksize=4):
                    fh.write(text)
                    made += n
            tables += TABLES_PER_FILE
    print(f"simulated {tables} tables, {made:,} rounds in {time.perf_counter() - t:.0f} s")
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    con = db.connect(tmp)
    t = time.perf_counter()
    result = ingest(con, [work], runs.start(con, "bench", {}))
    con.close()
    print(f"ingested {result.events:,} events in {time.perf_counter() - t:.0f} s -> {path}")
    tmp.rename(path)
    shutil.rmtree(work)


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def python_reference(con: duckdb.DuckDBPyConnection, rounds: str) -> tuple[int, set[str], float]:
    """What auditor/audit/run.py's _replay does per round, without storing: the events through
    Arrow in batches, Event values, the table context, check_round, the fingerprints.
    Returns the rounds replayed, the fingerprints and the seconds spent in check_round."""
    contexts: dict[tuple, TableContext | str] = {}
    packs = PackCache()
    found: set[str] = set()
    replayed = 0
    in_check = 0.0
    reader = con.sql(round_events_sql(rounds)).to_arrow_reader(BATCH_ROWS)
    key: tuple | None = None
    head: tuple = ()
    events: list = []

    def flush() -> None:
        nonlocal replayed, in_check
        if key is None:
            return
        ctx = _context(head, contexts, packs)
        if isinstance(ctx, str):
            return
        replayed += 1
        seen: Counter[tuple[str, int | None]] = Counter()
        start = time.perf_counter()
        found_here = check_round(ctx, events)
        in_check += time.perf_counter() - start
        for f in found_here:
            k = seen[(f.code, f.seq)]
            seen[(f.code, f.seq)] += 1
            found.add(f"{f.code}|{key[0]}|{key[1]}|{key[2]}|{f.seq}|{k}")

    for batch in reader:
        cols = batch.to_pydict()
        for i in range(batch.num_rows):
            k = (cols["table_id"][i], cols["shoe"][i], cols["round"][i])
            if k != key:
                flush()
                key = k
                head = tuple(
                    cols[c][i]
                    for c in (
                        "table_id",
                        "shoe",
                        "round",
                        "n",
                        "last_seq",
                        "pit",
                        "game",
                        "jurisdiction",
                        "variant",
                        "seats",
                        "side_bets",
                        "procedure",
                    )
                )
                events = []
            events.append(event_at(cols, i))
    flush()
    return replayed, found, in_check


def duckdb_memory_mb(con: duckdb.DuckDBPyConnection) -> float:
    """Memory DuckDB's buffer manager holds now (temp tables included)."""
    rows = con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchall()
    return (rows[0][0] or 0) / 2**20


def bench(path: Path, args: argparse.Namespace) -> None:
    con = duckdb.connect(str(path), read_only=True)
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET preserve_insertion_order = false")
    if args.threads:
        con.execute(f"SET threads = {int(args.threads)}")
    threads = con.execute("SELECT current_setting('threads')").fetchall()[0][0]
    t = time.perf_counter()
    select_rounds(con, PropertyConfig(), None)
    select_s = time.perf_counter() - t
    rounds, events = con.execute("SELECT count(*), sum(n) FROM todo").fetchall()[0]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores "
        f"(DuckDB threads {threads}), Python {platform.python_version()}, "
        f"DuckDB {duckdb.__version__}, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"database: {path.name}, {rounds:,} rounds, {events:,} round events "
        f"(finding them, select_rounds: {select_s:.2f} s)"
    )

    sub = args.python_rounds or rounds
    con.execute(
        f"CREATE TEMP TABLE todo_py AS SELECT * FROM todo "
        f"ORDER BY table_id, shoe, round LIMIT {int(sub)}"
    )
    c, t = cpu_seconds(), time.perf_counter()
    replayed, py_found, in_check = python_reference(con, "todo_py")
    py_s, py_cpu = time.perf_counter() - t, cpu_seconds() - c
    print(
        f"python check_round: {replayed:,} rounds in {py_s:6.2f} s  "
        f"{replayed / py_s:>12,.0f} rounds/s  cpu {py_cpu:6.2f} s  "
        f"peak RSS {peak_rss_mb():,.0f} MB"
    )
    print(
        f"  of which in check_round itself: {in_check:.2f} s "
        f"({replayed / in_check:,.0f} rounds/s); the rest is fetching and Event values"
    )

    # What the audit does before check_round, best of --repeat; then its parts alone.
    best_audit = min(_timed(lambda: clean_rounds(con, Known())) for _ in range(args.repeat))
    clean_n = con.execute("SELECT count(*) FROM todo_clean").fetchall()[0][0]
    all_terms = fast_rounds(con, Known())
    n = con.execute("SELECT count(*) FROM todo_fast").fetchall()[0][0]
    best_facts = min(_timed(lambda: facts.build(con, "todo_fast")) for _ in range(args.repeat))
    r, s = facts.build(con, "todo_fast")
    runs = [_timed(lambda: verdict.clean(r, s, all_terms)) for _ in range(args.repeat)]
    first_verdict, best_verdict = runs[0], min(runs)
    ok = verdict.clean(r, s, all_terms)
    assert int(ok.sum()) == clean_n
    for name, (wall, cpu) in (
        ("facts (DuckDB)", best_facts),
        ("verdict (numpy)", best_verdict),
        ("  its first run", first_verdict),
        ("audit before replay", best_audit),
    ):
        print(
            f"{name + ':':<20}{n:,} rounds in {wall:6.2f} s  {n / wall:>12,.0f} rounds/s  "
            f"cpu {cpu:6.2f} s"
        )
    print(
        f"verdict / check_round itself: {n / best_verdict[0] / (replayed / in_check):,.0f}x; "
        f"peak RSS {peak_rss_mb():,.0f} MB, DuckDB holds {duckdb_memory_mb(con):,.0f} MB"
    )
    print(
        f"called clean: {clean_n:,} of {rounds:,} rounds "
        f"({rounds - clean_n:,} go to check_round: {(rounds - clean_n) / rounds:.2%})"
    )

    # The contract on the rounds both judged: a round called clean has no finding.
    clean_keys = {
        f"{t}|{s}|{r}|"
        for t, s, r in con.execute(
            "SELECT table_id, shoe, round FROM todo_clean SEMI JOIN todo_py "
            "USING (table_id, shoe, round)"
        ).fetchall()
    }
    wrong = [fp for fp in py_found if fp.split("|", 1)[1].rsplit("|", 2)[0] + "|" in clean_keys]
    holds = "holds" if not wrong else f"BROKEN ({len(wrong)} findings in clean rounds)"
    print(f"on the {replayed:,} rounds check_round replayed: {len(py_found):,} findings, "
          f"contract {holds}")
    if wrong:
        sys.exit(1)


def _timed(step: Callable[[], object]) -> tuple[float, float]:
    c, t = cpu_seconds(), time.perf_counter()
    step()
    return time.perf_counter() - t, cpu_seconds() - c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1_000_000)
    ap.add_argument(
        "--python-rounds",
        type=int,
        default=100_000,
        help="rounds the Python reference replays (0: all)",
    )
    ap.add_argument("--threads", type=int, default=0, help="DuckDB threads (0: its default)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each timed step; best kept")
    ap.add_argument("--generate-only", action="store_true")
    args = ap.parse_args()

    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    label = f"{args.rounds // 1_000_000}M" if args.rounds % 1_000_000 == 0 else str(args.rounds)
    path = out / f"replay-{label}.duckdb"
    if not path.exists():
        make_db(path, args.rounds)
        if not args.generate_only:  # measure in a fresh process, not one that just ingested
            os.execv(sys.executable, [sys.executable, __file__, *sys.argv[1:]])
    if args.generate_only:
        return
    bench(path, args)


if __name__ == "__main__":
    main()
