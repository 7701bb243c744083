"""The fast path's rows typed in Arrow (`fast.as_events`) against its SQL (`typed_select`).

The parity tests (test_fast.py) hold the fast path to the per-line path over mixed files,
where a chunk with one card written `10H` takes the SQL. Here each way types the same clean
chunk, with every form of time the fast path accepts, and the rows must be equal column
for column; the forms only the SQL types must make the Arrow way step aside.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from helpers.events import VALID_EVENTS, changed, line

from auditor.ingest import fast
from auditor.ingest.stage import EVENT_COLUMNS
from auditor.store import db

TIMES = (
    "2026-11-28T22:14:03-05:00",
    "2026-11-28T22:14:03Z",
    "2026-11-28 22:14:03+05:30",
    "2026-11-28T22:14:03.5-00:00",
    "2026-11-28T22:14:03.123+14:00",
    "2026-11-29T01:02:03.123456-09:45",
    "2028-02-29T23:59:59.999999+01:00",
)


def _typed(events: list[dict[str, Any]]) -> pa.Table:
    block = "".join(line(e) + "\n" for e in events).encode()
    ends = np.cumsum([len(line(e).encode()) + 1 for e in events])
    split = fast.split_block(block, ends, 1)
    assert split.typed is not None and len(split.slow) == 0, "every line for the fast path"
    return split.typed


def _clean() -> list[dict[str, Any]]:
    seq = iter(range(1, 1_000))
    out = []
    for i, ts in enumerate(TIMES):
        for name in ("wager", "card", "burn", "procedure_notice", "table_open", "shoe_start"):
            out.append(changed(VALID_EVENTS[name], ts=ts, seq=next(seq)))
        out.append(changed(VALID_EVENTS["card"], ts=ts, seq=next(seq), card=f"{'TJQKA'[i % 5]}h"))
    return out


def _both(tmp_path: Path, typed: pa.Table, source_id: int) -> tuple[list[Any], list[Any]]:
    con = db.connect(tmp_path / "a.duckdb")
    cols = ", ".join((*EVENT_COLUMNS, "rejected"))
    order = "ORDER BY line_no"
    con.execute("CREATE TEMP TABLE by_sql AS SELECT * FROM events LIMIT 0")
    con.execute("CREATE TEMP TABLE by_arrow AS SELECT * FROM events LIMIT 0")
    con.register("chunk", typed)
    con.execute(f"INSERT INTO by_sql ({cols}) SELECT {cols} FROM "
                f"({fast.typed_select('chunk', str(source_id))})")
    rows = fast.as_events(typed, source_id)
    assert rows is not None
    con.register("rows", rows)
    con.execute(f"INSERT INTO by_arrow ({cols}) SELECT * FROM rows")
    by_sql = con.execute(f"SELECT * FROM by_sql {order}").fetchall()
    by_arrow = con.execute(f"SELECT * FROM by_arrow {order}").fetchall()
    con.close()
    return by_sql, by_arrow


def test_arrow_types_a_clean_chunk_as_the_sql_does(tmp_path: Path) -> None:
    typed = _typed(_clean())
    by_sql, by_arrow = _both(tmp_path, typed, 41)
    assert len(by_arrow) == len(_clean()) == 49
    assert by_arrow == by_sql
    names = [*EVENT_COLUMNS, "rejected"]
    row = dict(zip(names, by_arrow[2 * 7 + 2], strict=True))  # +05:30's burn
    assert row["source_id"] == 41 and row["stream"] == "table:" + VALID_EVENTS["burn"]["table"]
    assert row["ts_offset_min"] == 330
    assert row["ts"] == dt.datetime(2026, 11, 28, 16, 44, 3, tzinfo=dt.UTC)
    notice = dict(zip(names, by_arrow[3], strict=True))
    assert notice["stream"] == "pit:" + VALID_EVENTS["procedure_notice"]["pit"]
    assert notice["ts_offset_min"] == -300
    late = dict(zip(names, by_arrow[5 * 7 + 3], strict=True))  # -09:45
    assert late["ts_offset_min"] == -585
    assert late["ts"] == dt.datetime(2026, 11, 29, 10, 47, 3, 123456, tzinfo=dt.UTC)


def test_rows_with_their_own_source_ids(tmp_path: Path) -> None:
    typed = _typed(_clean()[:6])
    typed = typed.append_column("source_id", pa.array([3, 3, 3, 4, 4, 4], pa.int64()))
    rows = fast.as_events(typed, None)
    assert rows is not None
    assert rows.column("source_id").to_pylist() == [3, 3, 3, 4, 4, 4]


@pytest.mark.parametrize(
    "field, value",
    [("card", "10H"), ("card", "ts"), ("card", "qS"), ("cards", ["2d", "th"]),
     ("cards", ["10s", "Qh"]), ("ts", "2026-11-28T22:14:03.1234567-05:00")],
)
def test_forms_only_the_sql_types_are_left_to_it(field: str, value: Any) -> None:
    name = "burn" if field == "cards" else "card"
    events = [*_clean()[:6], changed(VALID_EVENTS[name], seq=500, **{field: value})]
    typed = _typed(events)
    assert fast.as_events(typed, 1) is None
    assert fast.as_events(_typed(events[:6]), 1) is not None
