"""The rounds a poll of `watch` judges, chosen with two narrow statements (issue 32).

select_rounds answers for any set of rounds in one statement: their spans, their last audits,
their table's context (three ASOF joins), the closes and the streams' tops. Over the handful
of rounds a poll lists, most of that statement's cost is DuckDB planning it: about 14 ms of
a 60 ms poll at 500 tables. Here the spans and the audits are read in two narrow statements,
and the rest is worked out in Python from the table contexts the watch keeps
(`ContextIndex`, a mirror of its `live_contexts`), so `todo` holds what select_rounds would
make of the same rounds. A round that shows something out of place (suspect) goes on
through select_rounds' own reading of its events one by one, from the spans made here.

tests/audit/test_listed_rounds.py holds both ways to the same `todo` poll after poll.
"""

from __future__ import annotations

import datetime as dt
from bisect import bisect_left, insort
from collections.abc import Iterable
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa

from auditor.audit.rounds import CHEMIN, ROUND_TYPES, todo_from_spans
from auditor.config import PropertyConfig
from auditor.store.sql import quote, stream_key

RoundKey = tuple[str, str, int]

# What the index keeps of a context event: its seq and the columns the selection reads.
_CONTEXT_SQL = (
    "SELECT table_id, seq, type, pit, game, procedure FROM {contexts} "
    "WHERE type IN ('table_open', 'procedure_change', 'table_close')"
)


@dataclass
class _Table:
    """One table's context events by seq: opens (seq, pit, game), the procedures in force
    (a table_open's or a procedure_change's that names one), closes."""

    opens: list[tuple[int, str | None, str | None]] = field(default_factory=list)
    procedures: list[tuple[int, int]] = field(default_factory=list)
    closes: list[int] = field(default_factory=list)


class ContextIndex:
    """The table_open, procedure_change and table_close events `watch` keeps in
    `live_contexts`, by table and seq, for ASOF lookups in Python."""

    def __init__(self) -> None:
        self._tables: dict[str, _Table] = {}

    @classmethod
    def read(cls, con: duckdb.DuckDBPyConnection, contexts: str) -> ContextIndex:
        index = cls()
        index.add(con.execute(_CONTEXT_SQL.format(contexts=contexts)).fetchall())
        return index

    def add(self, rows: Iterable[tuple]) -> None:
        """Rows of (table_id, seq, type, pit, game, procedure), in any order."""
        for table, seq, type_, pit, game, procedure in rows:
            t = self._tables.setdefault(table, _Table())
            if type_ == "table_close":
                insort(t.closes, seq)
                continue
            if type_ == "table_open":
                insort(t.opens, (seq, pit, game))
            if procedure is not None:
                insort(t.procedures, (seq, procedure))

    def rows(self) -> list[tuple]:
        """What the index holds, as (table_id, seq, type-or-None, pit, game, procedure)
        entries by kind (tests compare it with `live_contexts`)."""
        out: list[tuple] = []
        for table, t in self._tables.items():
            out += [(table, "open", s, p, g) for s, p, g in t.opens]
            out += [(table, "procedure", s, p) for s, p in t.procedures]
            out += [(table, "close", s) for s in t.closes]
        return sorted(out, key=repr)

    def opened(self, table: str, before: int) -> tuple[int, str | None, str | None] | None:
        """The last table_open before seq `before`: (seq, pit, game)."""
        t = self._tables.get(table)
        if t is None:
            return None
        i = bisect_left(t.opens, (before,))
        return t.opens[i - 1] if i else None

    def procedure(self, table: str, before: int) -> int | None:
        """The procedure the last table_open or procedure_change naming one before seq
        `before` set."""
        t = self._tables.get(table)
        if t is None:
            return None
        i = bisect_left(t.procedures, (before,))
        return t.procedures[i - 1][1] if i else None

    def close_within(self, table: str, first: int, last: int) -> int | None:
        """The last table_close before seq `last`, if it comes after seq `first`."""
        t = self._tables.get(table)
        if t is None:
            return None
        i = bisect_left(t.closes, last)
        return t.closes[i - 1] if i and t.closes[i - 1] > first else None


@dataclass(frozen=True)
class Listed:
    """A poll's rounds, for audit_rounds: how many its keys table lists, and the index of
    the contexts it reads."""

    rounds: int
    index: ContextIndex


_SPANS_SQL = f"""
SELECT table_id, shoe, round, min(seq) AS first_seq, max(seq) AS last_seq, count(*) AS n,
       min(ts) AS ts, min(seq) FILTER (type = 'round_end') AS end_seq,
       max(seq) FILTER (type <> 'bank_pass') AS last_core,
       count(*) FILTER (type = 'round_start') AS starts
FROM events SEMI JOIN {{keys}} USING (table_id, shoe, round)
WHERE type IN ({ROUND_TYPES}) AND shoe IS NOT NULL {{recent}}
GROUP BY ALL
"""
_DONE_SQL = """
SELECT DISTINCT ON (table_id, shoe, round) table_id, shoe, round, events, last_seq
FROM {audits} SEMI JOIN {keys} USING (table_id, shoe, round)
ORDER BY table_id, shoe, round, audited_at DESC
"""
_SPAN_SCHEMA = pa.schema([
    ("table_id", pa.string()), ("shoe", pa.string()), ("round", pa.int64()),
    ("first_seq", pa.int64()), ("last_seq", pa.int64()), ("n", pa.int64()),
    ("ts", pa.timestamp("us", tz="UTC")), ("end_seq", pa.int64()), ("last_core", pa.int64()),
    ("open_seq", pa.int64()), ("procedure", pa.int64()), ("audited_before", pa.bool_()),
    ("suspect", pa.bool_()), ("chemin", pa.bool_()), ("top", pa.int64()),
])
# The columns of round_spans (select_rounds), the context's read from the table_open.
_SPANS_FROM = """
SELECT r.table_id, r.shoe, r.round, r.first_seq, r.last_seq, r.n, r.ts, r.end_seq,
       r.last_core, o.pit, o.game, o.jurisdiction, o.variant, o.seats, o.side_bets,
       r.procedure, r.audited_before, r.suspect, r.chemin, r.top
FROM listed_spans r
LEFT JOIN {contexts} o ON o.table_id = r.table_id AND o.seq = r.open_seq
"""


def select_listed(
    con: duckdb.DuckDBPyConnection,
    config: PropertyConfig,
    keys: str,
    n_keys: int,
    since: dt.datetime | None,
    index: ContextIndex,
    *,
    contexts: str,
    audits: str,
) -> tuple[bool, dt.datetime | None]:
    """select_rounds(keys=`keys`, since=`since`) for a poll whose `n_keys` rounds (none
    twice) table `keys` lists: temp table `todo` (and, when a
    round is suspect, what select_rounds makes for it). Returns whether a round was read
    one by one, and the bound the rounds' events were counted from: None when a round has
    no round_start stamped at or after `since` (begun before the watch, or stamped before
    the rest), whose events are then all counted."""
    spans = _spans(con, keys, since)
    if since is not None and (not spans or any(r[9] == 0 for r in spans)
                              or len(spans) < n_keys):
        since = None
        spans = _spans(con, keys, None)
    done = {(t, s, r): (e, last) for t, s, r, e, last in con.execute(
        _DONE_SQL.format(audits=audits, keys=keys)).fetchall()}
    pits = config.pit_procedures
    rows = []
    for table, shoe, rnd, first, last, n, ts, end, core, _ in spans:
        opened = index.opened(table, first)
        chemin = opened is not None and opened[2] == CHEMIN
        procedure = index.procedure(table, first)
        if procedure is None and opened is not None and opened[1] is not None:
            procedure = pits.get(opened[1])
        close = None if end is not None else index.close_within(table, first, last)
        d = done.get((table, shoe, rnd))
        changed = d is not None and (d[0] != n or d[1] != last)
        overrun = (end is not None and (
            (core is not None and core > end)
            or (last > end and not (chemin and last == end + 1)))) or close is not None
        if d is not None and not changed and not overrun:
            continue
        rows.append([table, shoe, rnd, first, last, n, ts, end, core,
                     None if opened is None else opened[0], procedure, d is not None,
                     changed or overrun, chemin, None])
    tops = _tops(con, {r[0] for r in rows if r[12] or r[7] is None or r[13]})
    for r in rows:
        r[14] = tops.get(r[0])
    con.register("listed_spans", pa.Table.from_pylist(
        [dict(zip(_SPAN_SCHEMA.names, r, strict=True)) for r in rows], _SPAN_SCHEMA))
    try:
        if any(r[12] for r in rows):
            con.execute("CREATE OR REPLACE TEMP TABLE round_spans AS "
                        + _SPANS_FROM.format(contexts=contexts))
            late = todo_from_spans(con, None, None, listed=True, closed_before=None,
                                   contexts=contexts, audits=audits)
            return late, since
        con.execute(
            "CREATE OR REPLACE TEMP TABLE todo AS SELECT table_id, shoe, round, first_seq, "
            "last_seq, n, ts, pit, game, jurisdiction, variant, seats, side_bets, procedure, "
            f"audited_before, false AS partial FROM ({_SPANS_FROM.format(contexts=contexts)}) "
            "WHERE (end_seq IS NOT NULL AND NOT chemin) OR last_seq < top"
        )
    finally:
        con.unregister("listed_spans")
    return False, since


def _spans(con: duckdb.DuckDBPyConnection, keys: str, since: dt.datetime | None) -> list[tuple]:
    recent = "" if since is None else "AND ts >= ?"
    return con.execute(_SPANS_SQL.format(keys=keys, recent=recent),
                       [] if since is None else [since]).fetchall()


def _tops(con: duckdb.DuckDBPyConnection, tables: set[str]) -> dict[str, int]:
    """The highest seq on record of each table's stream (`stream_sources`)."""
    if not tables:
        return {}
    streams = ", ".join(quote(stream_key("table", t)) for t in sorted(tables))
    return {
        k.split(":", 1)[1]: top for k, top in con.execute(
            f"SELECT stream, max(max_seq) FROM stream_sources WHERE stream IN ({streams}) "
            "GROUP BY ALL").fetchall()
    }
