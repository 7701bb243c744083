"""Speed of the shoe-integrity search against a year of shoes (docs/shoe-integrity.md).

    python bench/integrity.py [--tables 100] [--days 365] [--shoes-per-day 30] [--json]

Builds (once, cached as bench/out/integrity-<tables>x<days>.duckdb) the index a property of
`tables` tables dealing `shoes-per-day` shoes a table a day would have after `days` days:
`shoe_orders` (400 dealt cards a shoe, fairly shuffled 8-deck shoes) and `shoe_grams` (the
k-grams of every `step`-th position), written straight into the tables the audit keeps.
Then one night of new shoes (`tables` x `shoes-per-day`, one of them dealt in the order of
a shoe from the first day) is searched against it, through the audit's own search
(auditor.audit.integrity.repeats). Prints the index's rows and size, the build rate, the
search time and what it found: the planted shoe, and nothing else.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from auditor.audit import integrity  # noqa: E402
from auditor.config import PropertyConfig  # noqa: E402
from auditor.replay import integrity as rules  # noqa: E402
from auditor.store import db  # noqa: E402

DEALT = 400
CHUNK = 20_000  # shoes written at a time


def _shoes(rng: np.random.Generator, n: int) -> np.ndarray:
    """n fairly shuffled 8-deck shoes, their first DEALT cards as codes 0..51."""
    return (rng.random((n, 416)).argsort(axis=1)[:, :DEALT] % 52).astype(np.int64)


def build(path: Path, tables: int, days: int, per_day: int, seed: int = 1) -> dict:
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    con = db.connect(tmp)
    rng = np.random.default_rng(seed)
    total = tables * days * per_day
    day0 = dt.datetime(2025, 12, 1, 5, tzinfo=dt.UTC)
    started = time.perf_counter()
    for first in range(0, total, CHUNK):
        n = min(CHUNK, total - first)
        codes = _shoes(rng, n)
        nos = np.arange(first + 1, first + n + 1, dtype=np.int64)
        table_of = (nos - 1) % tables
        day_of = (nos - 1) // (tables * per_day)
        k = (nos - 1) // tables % per_day
        orders = pa.table({
            "shoe_no": nos,
            "table_id": pa.array([f"T{t:03d}" for t in table_of]),
            "shoe": pa.array([f"T{t:03d}-{d:03d}-{s:02d}" for t, d, s in
                              zip(table_of, day_of, k, strict=True)]),
            "first_ts": pa.array([day0 + dt.timedelta(days=int(d), minutes=48 * int(s))
                                  for d, s in zip(day_of, k, strict=True)],
                                 pa.timestamp("us", tz="UTC")),
            "decks": pa.array(np.full(n, 8, np.int64)),
            "shuffle": pa.array(["manual"] * n),
            "batch": pa.array(["red"] * n),
            "codes": pa.array(list(codes.astype(np.uint8)), pa.list_(pa.uint8())),
            "rounds": pa.array([list(np.arange(DEALT) // 5 + 1)] * n, pa.list_(pa.int64())),
        })
        shoe_ix, pos, gram = rules.grams(codes.ravel(), np.arange(0, n * DEALT + 1, DEALT),
                                         integrity.K)
        keep = pos % integrity.STEP == 0
        grams = pa.table({"gram": gram[keep], "shoe_no": nos[shoe_ix[keep]],
                          "pos": pos[keep].astype(np.int32)})
        con.register("_o", orders)
        con.register("_g", grams)
        con.execute("INSERT INTO shoe_orders BY NAME SELECT * FROM _o").fetchall()
        con.execute("INSERT INTO shoe_grams BY NAME SELECT * FROM _g").fetchall()
        con.unregister("_o")
        con.unregister("_g")
        if first // CHUNK % 10 == 0:
            print(f"  {first + n:,} of {total:,} shoes", flush=True)
    seconds = time.perf_counter() - started
    con.execute("CHECKPOINT")
    con.close()
    tmp.rename(path)
    return {"shoes": total, "build_seconds": round(seconds, 1)}


def search(path: Path, tables: int, per_day: int, seed: int = 2) -> dict:
    con = db.connect(path)
    try:
        grams = con.execute("SELECT count(*) FROM shoe_grams").fetchall()[0][0]
        shoes = con.execute("SELECT count(*), max(shoe_no) FROM shoe_orders").fetchall()[0]
        old = con.execute("SELECT codes FROM shoe_orders WHERE shoe_no = 7").fetchall()[0][0]
        rng = np.random.default_rng(seed)
        n = tables * per_day
        codes = _shoes(rng, n)
        codes[n // 2] = np.array(old, np.int64)  # a shoe of the first day, dealt again
        night = dt.datetime(2027, 1, 1, 3, tzinfo=dt.UTC)
        orders = [integrity.ShoeOrder(int(shoes[1]) + 1 + i, f"N{i % tables:03d}",
                                      f"N{i % tables:03d}-night-{i // tables:02d}", night,
                                      8, "manual", "red", codes[i].tolist(),
                                      list(range(1, DEALT + 1)))
                  for i in range(n)]
        con.execute("BEGIN TRANSACTION")
        started = time.perf_counter()
        found = integrity.repeats(con, orders, PropertyConfig(time_zone="UTC"))
        seconds = time.perf_counter() - started
        con.execute("ROLLBACK")
    finally:
        con.close()
    return {
        "index_shoes": int(shoes[0]), "index_grams": int(grams),
        "night_shoes": n, "night_grams_probed": n * (DEALT - integrity.K + 1),
        "search_seconds": round(seconds, 2),
        "found": [(f.shoe, (f.evidence or {}).get("earlier_shoe", {}).get("shoe"),
                   (f.evidence or {}).get("run_cards")) for f in found],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=100)
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--shoes-per-day", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"integrity-{a.tables}x{a.days}x{a.shoes_per_day}.duckdb"
    built: dict = {}
    if not path.exists():
        built = build(path, a.tables, a.days, a.shoes_per_day)
    result = {"machine": f"{platform.node()} {os.cpu_count()} CPUs", **built,
              **search(path, a.tables, a.shoes_per_day),
              "db_gb": round(path.stat().st_size / 1e9, 2),
              "min_repeat": rules.MIN_REPEAT, "k": integrity.K, "step": integrity.STEP}
    if a.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:>20}: {value}")


if __name__ == "__main__":
    main()
