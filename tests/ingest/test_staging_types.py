"""The per-line path's statement written for the event types a chunk holds
(`validate.present_types`) against the statement for every type: the same rows, reasons
and typed values, line for line, whatever mix of types and bad lines the chunk holds. The
short statement is what makes a file of one bad line cheap to stage; a type left out of it
must stop the statement, never let a line through unchecked.
"""

from __future__ import annotations

import random
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from helpers.events import ACCEPTED, REJECTED, VALID_EVENTS, changed, line
from helpers.hostile import line_kinds

from auditor.ingest.lines import line_ends, lines_table
from auditor.ingest.validate import ALL_TYPES_LINES, present_types, staging_select
from auditor.store.events import EVENT_TYPES

# Lines whose type is read in an odd way (escaped, given twice, not a string, absent), and
# ids written with an escape or with a character outside the alphabet first.
ODD_LINES = [
    line(changed(VALID_EVENTS["wager"], table="MB\\u002d07")).replace("\\\\", "\\"),
    line(changed(VALID_EVENTS["wager"], shoe="\u00e9" * 70)),
    line(VALID_EVENTS["wager"]).replace('"type":"wager"', '"type":"wag\\u0065r"'),
    line(VALID_EVENTS["card"])[:-1] + ',"type":"pay"}',
    line(changed(VALID_EVENTS["pay"], type=7)),
    line({k: v for k, v in VALID_EVENTS["void"].items() if k != "type"}),
    "",
    "   ",
]


def _corpus() -> list[bytes]:
    rng = random.Random(27)
    events: list[dict[str, Any]] = [
        *VALID_EVENTS.values(),
        *ACCEPTED.values(),
        *(e for e, _ in REJECTED.values()),
    ]
    return [
        *(line(e).encode("utf-8") for e in events),
        *(make(rng) for make in line_kinds(4_096).values()),
        *(x.encode("utf-8") for x in ODD_LINES),
    ]


def _chunk(lines: list[bytes]) -> pa.Table:
    block = b"\n".join(lines) + b"\n"
    return lines_table(block, line_ends(block), 1)[0]


def _rows(con: duckdb.DuckDBPyConnection, chunk: pa.Table, types: tuple[str, ...] | None
          ) -> list[tuple[Any, ...]]:
    con.register("chunk", chunk)
    if types is None:
        types = present_types(con, "chunk")
    rows = con.execute(f"{staging_select('chunk', '5', types)} ORDER BY line_no").fetchall()
    con.unregister("chunk")
    return rows


@pytest.fixture(scope="module")
def judged() -> tuple[list[bytes], list[tuple[Any, ...]]]:
    """The corpus and its rows from the statement for every type."""
    lines = _corpus()
    return lines, _rows(duckdb.connect(), _chunk(lines), EVENT_TYPES)


def test_the_corpus_holds_every_type_good_and_bad(judged: tuple[list[bytes], list]) -> None:
    _, rows = judged
    # (rejected, type) is columns 2 and 7: every type has a good line and most a bad one.
    good = {r[7] for r in rows if r[2] is None}
    assert good == set(EVENT_TYPES)
    assert {r[7] for r in rows if r[2] is not None} >= {"wager", "card", "burn", None}
    assert len(rows) == len(judged[0]) - 2  # the blank lines give no row
    reasons = " ".join(r[2] for r in rows if r[2] is not None)
    for words in ("has U+200B at character 11", "has U+00E9 at character 1:",
                  "characters long", "is empty", "not among", "is given twice"):
        assert (words in reasons) == (words != "not among"), words


def test_the_statement_for_the_types_present_gives_the_same_rows(
    judged: tuple[list[bytes], list]
) -> None:
    lines, full = judged
    con = duckdb.connect()
    # Split by type, each part is staged with only its own types' checks.
    by_line = {r[1]: r for r in full}
    half = set(EVENT_TYPES[: len(EVENT_TYPES) // 2])
    for part in (True, False):
        at = [n for n in range(1, len(lines) + 1)
              if n in by_line and (by_line[n][7] in half) == part]
        chunk = _chunk(lines).take(pa.array([n - 1 for n in at], pa.int64()))
        con.register("chunk", chunk)
        staged = present_types(con, "chunk")
        assert (set(staged) <= half) == part and staged
        got = _rows(con, chunk, staged)
        assert got == [by_line[n] for n in at]


def test_a_file_of_one_bad_line_is_staged_with_its_type_alone() -> None:
    bad = line(changed(VALID_EVENTS["wager"], amount="12.345")).encode("utf-8")
    con = duckdb.connect()
    chunk = _chunk([bad])
    con.register("chunk", chunk)
    assert present_types(con, "chunk") == ("wager",)
    [row] = _rows(con, chunk, None)
    assert row[:4] == (5, 1, 'amount "12.345" has more than 2 decimal places', "table:MB-07")


def test_a_line_of_a_type_left_out_stops_the_statement() -> None:
    con = duckdb.connect()
    chunk = _chunk([line(VALID_EVENTS["pay"]).encode("utf-8")])
    with pytest.raises(duckdb.Error, match="not among the staged types: pay"):
        _rows(con, chunk, ("wager",))
    with pytest.raises(duckdb.Error, match="not among the staged types: pay"):
        _rows(con, chunk, ())


def test_a_chunk_past_the_bulk_size_is_given_every_type_unread() -> None:
    con = duckdb.connect()
    con.register("chunk", _chunk([line(VALID_EVENTS["pay"]).encode("utf-8")]))
    assert present_types(con, "chunk", ALL_TYPES_LINES) == ("pay",)
    assert present_types(con, "chunk", ALL_TYPES_LINES + 1) == EVENT_TYPES
