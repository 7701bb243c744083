"""The rounds a poll of `watch` judges, chosen with two narrow statements (issue 32).

select_rounds answers for any set of rounds in one statement: their spans, their last audits,
their table's context (three ASOF joins), the closes and the streams' tops. For the handful
of rounds a poll lists, that statement and the four around it cost about 14 ms of a 60 ms
poll at 500 tables (docs/benchmarks.md, session 55). Here the spans and the last audits are
read in two narrow statements, and the rest is worked out in Python from the table contexts
the watch keeps (`ContextIndex`, a mirror of its `live_contexts`), so `todo` holds what
select_rounds would make of the same rounds (about 4 ms). A round that shows something out
of place (suspect) goes on through select_rounds' own reading of its events one by one,
from the spans made here.

tests/audit/test_listed_rounds.py holds both ways to the same `todo` poll after poll.
"""

from __future__ import annotations

import datetime as dt
from bisect import bisect_left, insort
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa

from auditor.audit.round_rows import RoundRows
from auditor.audit.rounds import CHEMIN, ROUND_TYPES, SPAN_AGGREGATES, todo_from_spans
from auditor.config import PropertyConfig
from auditor.ingest.stream_tops import StreamTops
from auditor.store.sql import quote, stream_key

RoundKey = tuple[str, str, int]

# A context event as the index takes it: CONTEXT_EVENTS_SQL's columns, in its order.
_CONTEXT_SQL = (
    "SELECT table_id, seq, type, pit, game, jurisdiction, variant, seats, side_bets, "
    "procedure FROM {contexts} WHERE type IN ('table_open', 'procedure_change', 'table_close')"
)
# A table_open as a round's context: (seq, pit, game, jurisdiction, variant, seats, side_bets)
Open = tuple[int, str | None, str | None, str | None, str | None, int | None, list[str] | None]


@dataclass
class _Table:
    """One table's context events by seq: opens, the procedures in force (a table_open's or
    a procedure_change's that names one), closes."""

    opens: list[Open] = field(default_factory=list)
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
        """Rows of _CONTEXT_SQL, in any order."""
        for table, seq, type_, *context, procedure in rows:
            t = self._tables.setdefault(table, _Table())
            if type_ == "table_close":
                insort(t.closes, seq)
                continue
            if type_ == "table_open":
                insort(t.opens, (seq, *context), key=lambda o: o[0])
            if procedure is not None:
                insort(t.procedures, (seq, procedure))

    def rows(self) -> list[tuple]:
        """What the index holds, by kind (tests compare it with the events')."""
        out: list[tuple] = []
        for table, t in self._tables.items():
            out += [(table, "open", *o) for o in t.opens]
            out += [(table, "procedure", s, p) for s, p in t.procedures]
            out += [(table, "close", s) for s in t.closes]
        return sorted(out, key=repr)

    def opened(self, table: str, before: int) -> Open | None:
        """The last table_open before seq `before`."""
        t = self._tables.get(table)
        if t is None:
            return None
        i = bisect_left(t.opens, before, key=lambda o: o[0])
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
class Chosen:
    """What select_listed chose: whether a round was read one by one (`late_seen`), the
    bound the events were counted from, the listed rounds audited before (None: not
    known), and todo's rows (_TODO's columns; None: made in SQL)."""

    late: bool
    since: dt.datetime | None
    judged: set[RoundKey] | None
    rows: list[tuple] | None

    @property
    def todo(self) -> list[tuple[RoundKey, bool]] | None:
        """todo's rounds with whether each was audited before (None: made in SQL)."""
        return None if self.rows is None else [((r[0], r[1], r[2]), r[14]) for r in self.rows]


@dataclass(frozen=True)
class Listed:
    """A poll's rounds, for audit_rounds: how many its keys table lists, the index of the
    contexts it reads, and the round events `watch` holds (None: read them back)."""

    rounds: int
    index: ContextIndex
    held: RoundRows | None = None
    # The follower's streams' highest seqs (auditor.ingest.stream_tops): a round without its
    # round_end is closed by its table going past it, asked of them, not of the table.
    tops: StreamTops | None = None
    # The rounds' spans from what `watch` holds (RoundRows.spans; None: read them).
    spans: list[tuple] | None = None

    def held_events(self, con: duckdb.DuckDBPyConnection, chosen: Chosen, below: int
                    ) -> dict[str, list[Any]] | None:
        """The chosen rounds' events from those held, when there are fewer than `below` (a
        verdict's run reads a part of them) and all are held (RoundRows.columns). Else, or
        when a round was audited before (its old findings are withdrawn by a statement over
        it), temp table `todo` is made of them for the replay's statements."""
        if chosen.rows is None:  # select_rounds made `todo`
            return None
        held = None
        if self.held is not None and len(chosen.rows) < below:
            held = self.held.columns(con, chosen.rows, chosen.since)
        if held is None or any(r[14] for r in chosen.rows):
            make_todo(con, chosen.rows)
        return held


_SPANS_SQL = f"""
SELECT table_id, shoe, round, {SPAN_AGGREGATES},
       count(*) FILTER (type = 'round_start') AS starts
FROM events SEMI JOIN {{keys}} USING (table_id, shoe, round)
WHERE type IN ({ROUND_TYPES}) AND shoe IS NOT NULL {{recent}}
GROUP BY ALL
"""
# ...and, in the same statement, the rounds' audits before (`done` set).
_DONE_SQL = """
SELECT true AS done, table_id, shoe, round, events, last_seq AS done_seq, audited_at
FROM {audits} SEMI JOIN {keys} USING (table_id, shoe, round)
"""
_SPAN_COLUMNS = ("table_id", "shoe", "round", "first_seq", "last_seq", "n", "ts", "end_seq",
                 "last_core", "starts")
_CONTEXT_FIELDS: list[tuple[str, pa.DataType]] = [
    ("pit", pa.string()), ("game", pa.string()), ("jurisdiction", pa.string()),
    ("variant", pa.string()), ("seats", pa.int64()), ("side_bets", pa.list_(pa.string())),
    ("procedure", pa.int64()), ("audited_before", pa.bool_()),
]
_SPAN_FIELDS: list[tuple[str, pa.DataType]] = [
    ("table_id", pa.string()), ("shoe", pa.string()), ("round", pa.int64()),
    ("first_seq", pa.int64()), ("last_seq", pa.int64()), ("n", pa.int64()),
    ("ts", pa.timestamp("us", tz="UTC")),
]
# round_spans as select_rounds makes it, and todo
_SPANS = pa.schema([*_SPAN_FIELDS, ("end_seq", pa.int64()), ("last_core", pa.int64()),
                    *_CONTEXT_FIELDS, ("suspect", pa.bool_()), ("chemin", pa.bool_()),
                    ("top", pa.int64())])
_TODO = pa.schema([*_SPAN_FIELDS, *_CONTEXT_FIELDS, ("partial", pa.bool_())])


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
    stream_tops: StreamTops | None = None,
    spans: list[tuple] | None = None,
) -> Chosen:
    """select_rounds(keys=`keys`, since=`since`) for a poll whose `n_keys` rounds (none
    twice) relation `keys` lists: the rows of its `todo` (made by make_todo when a statement
    reads it: Listed.held_events), or, when a round is suspect, what select_rounds makes.
    The bound the rounds' events are counted from is None when a round has no round_start
    stamped at or after `since` (begun before the watch, or stamped before the rest): its
    events are then all counted. `spans`: the rounds' spans with `since` as `_spans` gives
    them, none of the rounds judged before (RoundRows.spans), else read here."""
    spans, audited = (spans, []) if spans is not None else _spans(con, keys, since, audits)
    if since is not None and (not spans or any(r[9] == 0 for r in spans)
                              or len(spans) < n_keys):
        since = None
        spans, audited = _spans(con, keys, None, audits)
    done: dict[RoundKey, tuple[int, int, dt.datetime]] = {}
    for t, s, r, e, last, at in audited:
        if (t, s, r) not in done or at > done[t, s, r][2]:  # the round's last audit
            done[t, s, r] = (e, last, at)
    pits = config.pit_procedures
    rows = []
    for table, shoe, rnd, first, last, n, ts, end, core, _ in spans:
        opened = index.opened(table, first)
        context = (None,) * 6 if opened is None else opened[1:]
        chemin = context[1] == CHEMIN
        procedure = index.procedure(table, first)
        if procedure is None and context[0] is not None:
            procedure = pits.get(context[0])
        close = None if end is not None else index.close_within(table, first, last)
        d = done.get((table, shoe, rnd))
        changed = d is not None and (d[0] != n or d[1] != last)
        overrun = (end is not None and (
            (core is not None and core > end)
            or (last > end and not (chemin and last == end + 1)))) or close is not None
        if d is not None and not changed and not overrun:
            continue
        rows.append((table, shoe, rnd, first, last, n, ts, end, core, *context, procedure,
                     d is not None, changed or overrun, chemin))
    tops = _tops(con, {r[0] for r in rows if r[-2] or r[7] is None or r[-1]}, stream_tops)
    if any(r[-2] for r in rows):
        _made(con, "round_spans", _SPANS, [(*r, tops.get(r[0])) for r in rows])
        late = todo_from_spans(con, None, None, listed=True, closed_before=None,
                               contexts=contexts, audits=audits)
        return Chosen(late, since, set(done), None)
    # closed: with its round_end (but at chemin de fer), or its table gone on past it
    todo = [(*r[:7], *r[9:17], False) for r in rows
            if (r[7] is not None and not r[-1]) or r[4] < tops.get(r[0], r[4])]
    return Chosen(False, since, set(done), todo)


def make_todo(con: duckdb.DuckDBPyConnection, rows: list[tuple]) -> None:
    """Temp table `todo` of select_listed's rows."""
    _made(con, "todo", _TODO, rows)


def keys_sql(keys: Iterable[RoundKey]) -> str:
    """The rounds `keys` as a relation (table_id, shoe, round), written out: a poll's few
    rounds cost less so than as a table made for them."""
    rows = ", ".join(f"({quote(t)}, {quote(s)}, {int(r)}::BIGINT)" for t, s, r in keys)
    return f"(SELECT * FROM (VALUES {rows}) k(table_id, shoe, round))"


def _made(con: duckdb.DuckDBPyConnection, name: str, schema: pa.Schema, rows: list[tuple]
          ) -> None:
    """Temp table `name` of these rows."""
    con.register("listed_rows", pa.Table.from_pylist(
        [dict(zip(schema.names, r, strict=True)) for r in rows], schema))
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM listed_rows")
    finally:
        con.unregister("listed_rows")


def _spans(con: duckdb.DuckDBPyConnection, keys: str, since: dt.datetime | None, audits: str
           ) -> tuple[list[tuple], list[tuple]]:
    """The rounds' spans (_SPAN_COLUMNS) and their audits' rows (_DONE_SQL's), in one
    statement: a poll's statements cost 1-3 ms each whatever they read."""
    recent = "" if since is None else "AND ts >= ?"
    cur = con.execute(
        f"SELECT false AS done, * FROM ({_SPANS_SQL.format(keys=keys, recent=recent)}) "
        f"UNION ALL BY NAME ({_DONE_SQL.format(audits=audits, keys=keys)})",
        [] if since is None else [since])
    at = {d[0]: i for i, d in enumerate(cur.description)}
    rows = cur.fetchall()
    span_at = [at[c] for c in _SPAN_COLUMNS]
    done_at = [at[c] for c in ("table_id", "shoe", "round", "events", "done_seq", "audited_at")]
    return ([tuple(r[i] for i in span_at) for r in rows if not r[0]],
            [tuple(r[i] for i in done_at) for r in rows if r[0]])


def _tops(con: duckdb.DuckDBPyConnection, tables: set[str], kept: StreamTops | None = None
          ) -> dict[str, int]:
    """The highest seq on record of each table's stream (`stream_sources`), as `kept`
    answers (the follower's, as its commits left them) if given."""
    if not tables:
        return {}
    if kept is not None:
        got = kept.read(con, [stream_key("table", t) for t in tables])
        return {t: top for t in tables if (top := got.get(stream_key("table", t), (None,))[0])
                is not None}
    streams = ", ".join(quote(stream_key("table", t)) for t in sorted(tables))
    return {
        k.split(":", 1)[1]: top for k, top in con.execute(
            f"SELECT stream, max(max_seq) FROM stream_sources WHERE stream IN ({streams}) "
            "GROUP BY ALL").fetchall()
    }
