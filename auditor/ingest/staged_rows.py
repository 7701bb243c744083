"""What the checks and the finisher want to know of a follower's staged rows, worked out in
Python from one read of them.

A poll of `watch` stages a few dozen to a few hundred rows (auditor.ingest.follow), and
asked them six questions, each a statement: their seq ranges against the streams' highest,
per source what they hold, the lines rejected, the event types and round ends loaded, the
rounds they touch, and whether any is stamped ahead of its delivery. At that size a
statement costs its planning, not its rows (docs/benchmarks.md, session 51): one read of
the rows' narrow columns (`SUMMARY_SQL`) and these pure functions answer the same, in the
same order, as the statements do (tests/ingest/test_staged_rows.py holds each against its
statement on random rows). The batch path, whose rows are many, keeps the statements.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import duckdb
import pyarrow as pa

from auditor.ingest.stream_tops import StreamTops, read_tops
from auditor.ingest.validate import names_its_event_sql
from auditor.store.events import ROUND_EVENTS


class Row(NamedTuple):
    """One staged row, as `SUMMARY_SQL` reads it."""

    source_id: int
    line_no: int
    stream: str | None
    seq: int | None
    ts: dt.datetime | None
    type: str | None
    table_id: str | None
    shoe: str | None
    round: int | None
    rejected: str | None
    named: bool | None  # a rejected line that still names its event (None if not rejected)
    top: int | None  # its stream's highest seq ingested, and the source holding it
    top_source: int | None


# The rows of `staged` with their stream's highest seq before them (stream_sources).
_NAMED = names_its_event_sql("s.stream", "s.seq", "s.raw")
SUMMARY_SQL = f"""
SELECT s.source_id, s.line_no, s.stream, s.seq, s.ts, s.type, s.table_id, s.shoe, s.round,
       s.rejected, CASE WHEN s.rejected IS NOT NULL THEN {_NAMED} END,
       t.top, t.top_source
FROM staged s
LEFT JOIN (SELECT stream, max(max_seq) AS top, arg_max(source_id, max_seq) AS top_source
           FROM stream_sources WHERE stream IN (SELECT stream FROM staged)
           GROUP BY stream) t USING (stream)
"""


def from_arrow(
    con: duckdb.DuckDBPyConnection, t: pa.Table, tops: StreamTops | None = None
) -> list[Row]:
    """The rows as `SUMMARY_SQL` reads them, from rows typed in Arrow (`fast.as_events`,
    none rejected) that are not in `staged`: only the streams' highest seqs are asked, of
    `tops` (the follower's, auditor.ingest.stream_tops) if given, else of the table."""
    streams = sorted({s for s in t.column("stream").to_pylist() if s is not None})
    highest = tops.read(con, streams) if tops is not None else read_tops(con, streams)
    cols = [t.column(n).to_pylist() for n in _ARROW_COLUMNS]
    none = (None, None)
    return [Row._make((*r, None, None, *highest.get(r[2], none)))
            for r in zip(*cols, strict=True)]


_ARROW_COLUMNS = ("source_id", "line_no", "stream", "seq", "ts", "type", "table_id", "shoe",
                  "round")


def read(fetched: Iterable[tuple[Any, ...]]) -> list[Row] | None:
    """The rows, or None when a time came back as text (DuckDB's way with a year past
    Python's): those cannot be compared here, and the statements answer instead."""
    rows = [Row(*r) for r in fetched]
    if any(r.ts is not None and not isinstance(r.ts, dt.datetime) for r in rows):
        return None
    return rows


def _nulls_last(v: Any) -> tuple[bool, Any]:
    """A sort key ordering None after every value, as DuckDB's ORDER BY does."""
    return (v is None, v if v is not None else 0)


def _good(r: Row, dups: frozenset[int]) -> bool:
    return r.rejected is None and r.line_no not in dups


def problems(rows: Sequence[Row]) -> dict[int, list[tuple[int, str]]]:
    """The lines rejected, per source, in line order (Staging.problems)."""
    out: dict[int, list[tuple[int, str]]] = {}
    for r in sorted((r for r in rows if r.rejected is not None),
                    key=lambda r: (r.source_id, r.line_no)):
        assert r.rejected is not None
        out.setdefault(r.source_id, []).append((r.line_no, r.rejected))
    return out


RangeFields = tuple[Any, Any, Any, Any, Any, Any, Any, Any, Any, Any]


def ranges(rows: Sequence[Row], named: bool, dups: frozenset[int]) -> list[RangeFields]:
    """Staging.ranges' fields (without `stored`), by stream and then by lowest seq: per
    stream and source, the good rows' lowest and highest seq, their count and distinct seqs,
    the lowest and highest counting rejected lines that name their event (`named`), and the
    stream's highest before."""
    groups: dict[tuple[str | None, int], list[Any]] = {}
    for r in rows:
        good = _good(r, dups)
        if not (good or (r.rejected is not None and named and r.named)):
            continue
        g = groups.get((r.stream, r.source_id))
        if g is None:  # lo, hi, n, seqs, lo_named, hi_named, top, top_source
            g = groups[(r.stream, r.source_id)] = [None, None, 0, set(), None, None,
                                                   r.top, r.top_source]
        s = r.seq
        if good:
            g[2] += 1
            if s is not None:
                g[0] = s if g[0] is None else min(g[0], s)
                g[1] = s if g[1] is None else max(g[1], s)
                g[3].add(s)
        if s is not None:
            g[4] = s if g[4] is None else min(g[4], s)
            g[5] = s if g[5] is None else max(g[5], s)
    found: list[RangeFields] = [
        (stream, sid, lo, hi, n, len(seqs), lo_named, hi_named, top, top_source)
        for (stream, sid), (lo, hi, n, seqs, lo_named, hi_named, top, top_source)
        in groups.items()
    ]
    found.sort(key=lambda x: (_nulls_last(x[0]), _nulls_last(x[6])))
    return found


def tally(
    rows: Sequence[Row], dups: frozenset[int]
) -> list[tuple[int, str | None, int, int, int, dt.datetime | None, dt.datetime | None]]:
    """Staging.tally's query, row for row: per source and stream (in that order) the rows
    to load, those rejected and those skipped as duplicates, with the source's first and
    last stamp among its rows not rejected."""
    per: dict[tuple[int, str | None], list[int]] = {}
    span: dict[int, list[dt.datetime | None]] = {}
    for r in rows:
        c = per.setdefault((r.source_id, r.stream), [0, 0, 0])
        s = span.setdefault(r.source_id, [None, None])
        if r.rejected is not None:
            c[1] += 1
            continue
        if r.line_no in dups:
            c[2] += 1
        else:
            c[0] += 1
        if r.ts is not None:
            s[0] = r.ts if s[0] is None else min(s[0], r.ts)
            s[1] = r.ts if s[1] is None else max(s[1], r.ts)
    return [
        (sid, stream, n, bad, dup, span[sid][0], span[sid][1])
        for (sid, stream), (n, bad, dup) in sorted(
            per.items(), key=lambda x: (x[0][0], _nulls_last(x[0][1])))
    ]


def kept(rows: Sequence[Row], dups: frozenset[int]) -> list[Row]:
    """The rows to load: not rejected, not a duplicate."""
    return [r for r in rows if _good(r, dups)]


def loaded_types(rows: Sequence[Row]) -> list[tuple[Any, Any, int, list[tuple[str, str, int]]]]:
    """follow's count of what loaded, row for row: per source, stream and type (in that
    order) the events, and the rounds that ended, in seq order."""
    per: dict[tuple[int, str | None, str | None], list[Any]] = {}
    for r in rows:
        g = per.setdefault((r.source_id, r.stream, r.type), [0, []])
        g[0] += 1
        if r.type == "round_end":
            g[1].append((r.seq, (r.table_id, r.shoe, r.round)))
    out = []
    for (_, stream, type_), (n, ends) in sorted(
        per.items(), key=lambda x: (x[0][0], _nulls_last(x[0][1]), _nulls_last(x[0][2]))
    ):
        ends.sort(key=lambda e: _nulls_last(e[0]))
        out.append((stream, type_, n, [k for _, k in ends]))
    return out


def touched(
    rows: Sequence[Row],
) -> list[tuple[str, str, int, dt.datetime | None, int | None, bool]]:
    """follow's TOUCHED over the rows: per round named (table, shoe and round all given),
    the earliest stamp (None if one has none), the lowest seq among its round events, and
    whether a cut card came out."""
    per: dict[tuple[str, str, int], list[Any]] = {}
    for r in rows:
        if r.table_id is None or r.shoe is None or r.round is None:
            continue
        key = (r.table_id, r.shoe, r.round)
        g = per.get(key)
        if g is None:  # earliest, every row stamped, lowest round-event seq, cut card
            g = per[key] = [None, True, None, False]
        if r.ts is None:
            g[1] = False
        elif g[0] is None or r.ts < g[0]:
            g[0] = r.ts
        if r.type in ROUND_EVENTS and r.seq is not None:
            g[2] = r.seq if g[2] is None else min(g[2], r.seq)
        g[3] = g[3] or r.type == "cut_card"
    return [(*k, g[0] if g[1] else None, g[2], g[3]) for k, g in per.items()]


def latest_stamp(rows: Sequence[Row]) -> dt.datetime | None:
    """The latest stamp among the rows (to tell that none is ahead of its delivery)."""
    return max((r.ts for r in rows if r.ts is not None), default=None)
