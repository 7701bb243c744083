"""What the `events` table's layout costs ingest and the audit's reads (issue 32's "narrower
events table"), measured in one run on bench/ingest.py's 2M-event file.

    python bench/events_layout.py [--events 2000000] [--repeat 2]

The file is read once, block by block, by ingest's own fast path (`lines.read_rows`, then
`fast.as_events`: the rows exactly as ingest hands them to DuckDB), and held in memory. Then,
each layout in turn, `--repeat` times, alternating, into a fresh database file:

- `today`: every column `events` has (the 46 typed fields and `raw`, the line as text);
- `offsets`: the same typed columns, `raw` replaced by where the line is in its file (its
  byte offset and length): the text stays in the archived file, whose SHA-256 is on record;
- `common+raw`: only the columns every event has (source, line, stream, seq, time, type,
  table, shoe, round) and `raw`; a field of one type is read out of `raw` when asked;
- `common+offsets`: the common columns and the offsets alone (the floor of any layout).

For each: the wall and CPU time of the inserts (DuckDB's threads included), and the
database's size on disk after a checkpoint; then the time of two reads the audit makes
over every round, on that layout: the cards (`card`, `to_hand`, as auditor.audit.facts
groups them) and the stakes (`seat`, `bet`, `amount` of wagers). Beside them, DuckDB's bare
load of the same file (`read_json` into a table of its own types), as bench/ingest.py
times it. Prints the figures, the machine and the command; record them in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ingest import bare_load, cpu_seconds, make_log  # noqa: E402  (bench/ingest.py)

from auditor.ingest import fast, reader  # noqa: E402
from auditor.ingest.lines import read_rows  # noqa: E402
from auditor.store.db import EVENTS_DDL  # noqa: E402

COMMON = ("source_id", "line_no", "stream", "seq", "ts", "ts_offset_min", "type", "table_id",
          "shoe", "round")
LAYOUTS = ("today", "offsets", "common+raw", "common+offsets")

# The two reads, per layout: a column of `events`, or the same field out of `raw`.
_FROM_RAW = {
    "card": "json_extract_string(raw, '$.card')",
    "to_hand": "json_extract_string(raw, '$.to')",
    "seat": "CAST(json_extract(raw, '$.seat') AS BIGINT)",
    "bet": "json_extract_string(raw, '$.bet')",
    "amount": "CAST(json_extract_string(raw, '$.amount') AS DECIMAL(18,2))",
}


def _field(layout: str, name: str) -> str:
    return _FROM_RAW[name] if layout == "common+raw" else name


def reads(layout: str) -> dict[str, str]:
    """The two reads on `layout` (none on the floor, which keeps no field to read)."""
    if layout == "common+offsets":
        return {}

    def f(name: str) -> str:
        return _field(layout, name)

    cards = (
        "SELECT table_id, shoe, round, "
        f"count(*) FILTER ({f('to_hand')} = 'player') AS p, "
        f"count(*) FILTER ({f('to_hand')} = 'banker') AS b, "
        f"min({f('card')}) AS lo, max({f('card')}) AS hi "
        "FROM events WHERE type = 'card' GROUP BY ALL"
    )
    stakes = (
        f"SELECT table_id, shoe, round, {f('seat')} AS seat, {f('bet')} AS bet, "
        f"sum({f('amount')}) AS staked FROM events WHERE type = 'wager' GROUP BY ALL"
    )
    return {"cards": f"SELECT count(*), sum(p), sum(b), max(hi) FROM ({cards})",
            "stakes": f"SELECT count(*), sum(staked) FROM ({stakes})"}


def blocks(path: Path) -> list[pa.Table]:
    """The file's rows as ingest's fast path types them (source 1), with each line's byte
    offset and length beside them."""
    out = []
    offset = 0
    with path.open("rb") as fh:  # read as ingest reads it: CHUNK_BYTES at a time
        chunks = list(iter(lambda: fh.read(reader.CHUNK_BYTES), b""))
    pending = iter(chunks[1:])
    for b in reader.split(chunks[0], lambda: next(pending, b""), lambda: 0, 1):
        rows = read_rows(b.data, b.first_line)
        assert rows.lines is None, "the bench's file has lines the fast path refuses"
        typed = fast.as_events(rows.typed, 1)
        assert typed is not None
        raw = typed.column("raw")
        lengths = pc.add(pc.utf8_length(raw), 1)  # the newline (the file is ASCII)
        ends = pc.cumulative_sum(lengths)
        starts = pc.add(pc.subtract(ends, lengths), offset)
        offset += len(b.data)
        out.append(typed.append_column("line_start", pc.cast(starts, pa.int64()))
                   .append_column("line_bytes", pc.cast(lengths, pa.int32())))
    return out


def shaped(t: pa.Table, layout: str) -> pa.Table:
    """The rows in the layout's columns, in its order (inserted by position)."""
    names = [n for n in t.column_names if n not in ("line_start", "line_bytes")]
    at = names.index("raw")
    offsets = ["line_start", "line_bytes"]
    if layout == "today":
        return t.select(names)
    if layout == "offsets":
        return t.select([*names[:at], *offsets, *names[at + 1:]])
    if layout == "common+raw":
        return t.select([*COMMON, "raw", "rejected"])
    return t.select([*COMMON, *offsets, "rejected"])


def ddl(layout: str) -> str:
    today = EVENTS_DDL.replace("IF NOT EXISTS ", "")
    if layout == "today":
        return today
    if layout == "offsets":
        return today.replace("raw VARCHAR NOT NULL,", "line_start BIGINT, line_bytes INTEGER,")
    common = ("source_id BIGINT NOT NULL, line_no BIGINT NOT NULL, stream VARCHAR, seq BIGINT, "
              "ts TIMESTAMPTZ, ts_offset_min SMALLINT, type VARCHAR, table_id VARCHAR, "
              "shoe VARCHAR, round BIGINT")
    tail = "raw VARCHAR NOT NULL" if layout == "common+raw" else (
        "line_start BIGINT, line_bytes INTEGER")
    return f"CREATE TABLE events ({common}, {tail}, rejected VARCHAR)"


# What each layout's reads answered: the same on every layout, or the timing means nothing.
answers: dict[tuple[str, str], list[tuple]] = {}


def one(layout: str, rows: list[pa.Table], work: Path, run: int) -> dict[str, float]:
    path = work / f"{layout.replace('+', '-')}-{run}.duckdb"
    con = duckdb.connect(str(path))
    con.execute(ddl(layout))
    parts = [shaped(t, layout) for t in rows]
    wall, cpu = time.perf_counter(), cpu_seconds()
    for t in parts:
        con.execute("BEGIN")
        con.from_arrow(t).insert_into("events")
        con.execute("COMMIT")
    con.execute("CHECKPOINT")
    out = {"insert": time.perf_counter() - wall, "insert_cpu": cpu_seconds() - cpu}
    for name, sql in reads(layout).items():
        started = time.perf_counter()
        answers[(layout, name)] = con.execute(sql).fetchall()
        out[name] = time.perf_counter() - started
    con.close()
    out["mb"] = path.stat().st_size / 1e6
    path.unlink()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    log = ROOT / "bench" / "out" / f"bench-{args.events}.jsonl"
    if not log.exists():
        log.parent.mkdir(parents=True, exist_ok=True)
        make_log(log, args.events)
    started = time.perf_counter()
    rows = blocks(log)
    n = sum(t.num_rows for t in rows)
    print(f"{log.name}: {n:,} events in {len(rows)} blocks, read and typed in "
          f"{time.perf_counter() - started:.1f} s (not counted below)")
    with tempfile.TemporaryDirectory(prefix="bench-layout-", dir=ROOT / "bench" / "out") as tmp:
        work = Path(tmp)
        got: dict[str, list[dict[str, float]]] = {k: [] for k in LAYOUTS}
        bares = []
        for r in range(args.repeat):
            bares.append(bare_load(log, work)[0])  # as bench/ingest.py times it
            (work / "bare.duckdb").unlink()
            for layout in (LAYOUTS if r % 2 == 0 else LAYOUTS[::-1]):
                got[layout].append(one(layout, rows, work, r))
                g = got[layout][-1]
                print(f"  run {r + 1} {layout:15} insert {g['insert']:5.2f} s "
                      f"(CPU {g['insert_cpu']:5.2f} s), {g['mb']:6.0f} MB; "
                      + ", ".join(f"{k} {g[k]:.3f} s" for k in ("cards", "stakes") if k in g)
                      + f"; load {os.getloadavg()[0]:.2f}", flush=True)
    base = statistics.median(bares)
    print(f"\nbare read_json load: {', '.join(f'{b:.2f}' for b in bares)} s (median {base:.2f})")
    print(f"{'layout':15} {'insert':>7} {'CPU':>7} {'/bare':>6} {'size MB':>8} "
          f"{'cards':>7} {'stakes':>7}  (medians)")
    for layout in LAYOUTS:
        m = {k: statistics.median(g[k] for g in got[layout]) for k in got[layout][0]}
        print(f"{layout:15} {m['insert']:6.2f}s {m['insert_cpu']:6.2f}s "
              f"{m['insert'] / base:6.2f} {m['mb']:8.0f} "
              + " ".join(f"{m[k]:6.3f}s" if k in m else f"{'-':>7}" for k in ("cards", "stakes")))
    for name in ("cards", "stakes"):
        said = {repr(v) for (_, n), v in answers.items() if n == name}
        print(f"the {name} read answered the same on every layout: {len(said) == 1}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, duckdb {duckdb.__version__}")
    print("command: python bench/events_layout.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
