"""The round events `watch` loaded, held so a poll replays the rounds that end from them
instead of reading them back from `events` (issue 32).

Reading a poll's rounds back (round_events_sql: 25 columns, the sources and ordered_times
joined) cost about 5 ms of a 40 ms poll at 500 tables; the same rows are in hand a moment
earlier, as the follower typed them in Arrow (auditor.ingest.fast.as_events, the very values
`events` stores). A round is replayed from what is held only when that is provably every row
the read would give:

- the poll's narrow count of the round (auditor.audit.listed: its events, first and last
  seq, bounded by the same `since`) equals what is held; every row held was committed to
  `events` under that key, so equal counts are equal sets. A row loaded another way (before
  the watch, by the batch or per-line path, through `staged`) is not held, and its round is
  read back as before;
- no event of the round has an ordered time (`ordered_times`, written only by the sweeps'
  stream check: `ordered` is told after each).

Otherwise the whole poll is read back from `events`. tests/audit/test_round_rows.py holds both
ways to the same columns.

The counts themselves (`spans`) come from what is held too when no other row can stand under
the round's key at or after the poll's `since`: every row of it loaded while watching was held
(none came through `staged`, the batch way or a backlog, none was let go), and nothing on
record before the watch was stamped that late. That saves the poll its statement over
`events` (about 6 ms of a 36 ms poll at 500 tables, docs/benchmarks.md, session 64).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from itertools import islice
from operator import itemgetter
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from auditor.audit.event_rows import CHEMIN_COLUMNS, EVENT_COLUMNS, HEAD_COLUMNS
from auditor.audit.rounds import CHEMIN
from auditor.store.columns import py_columns
from auditor.store.events import ROUND_EVENTS
from auditor.store.sql import stream_name

RoundKey = tuple[str, str, int]
# Rounds let go of, or given a row not held, remembered at most; past that no spans are
# given from what is held (RoundRows.spans) for the rest of the watch.
UNHELD_KEPT = 200_000
# Rounds held at most (500 tables have about 500 under way); the oldest go first, and a
# round no longer held is read back. A poll's rows past ROWS_HELD (a backlog loaded at
# once) are not held: their rounds are many, and read back in one statement.
ROUNDS_HELD = 5_000
ROWS_HELD = 50_000

_ROUND_TYPES = pa.array(ROUND_EVENTS, pa.string())
# What is held of each row: `events` columns, after the round's key.
_HELD = ("seq", "type", "ts", "source_id", "line_no", "to_hand", "card", "seat", "bet",
         "amount", "kind", "player_count", "banker_count", "winner", "count", "mode",
         "void_reason", "disposition", "hand", "choice", "from_seat", "to_seat", "dealer")
_SEQ, _TYPE, _TS, _SOURCE, _LINE = 0, 1, 2, 3, 4
# round_events_sql's columns: the round's head (from `todo`), then the event's.
EVENT = (*EVENT_COLUMNS, *CHEMIN_COLUMNS, "event_dealer")
# Where each event column comes from in a held row (None: the round's key).
_FROM = {c: (_HELD.index("dealer") if c == "event_dealer" else
             None if c in ("source", "shoe", "round") else _HELD.index(c)) for c in EVENT}


class RoundRows:
    """Per round key, the rows of its events loaded by `watch`'s polls straight from Arrow,
    in load order; the source paths met; each table's highest seq with an ordered time."""

    def __init__(self, stamped_to: dt.datetime | None = None) -> None:
        self._rows: dict[RoundKey, list[tuple[Any, ...]]] = {}
        self._paths: dict[int, str] = {}
        self._ordered: dict[str, int] = {}
        # The latest stamp on record when the watch began (None: no event), and the rounds
        # a row of which `events` may hold without it being held here.
        self._stamped_to = stamped_to
        self._unheld: set[RoundKey] | None = set()

    def loaded(self, tables: Iterable[pa.Table], touched: Iterable[RoundKey] = (),
               unheld: Iterable[RoundKey] = ()) -> None:
        """Rows a poll committed to `events` as they are (auditor.ingest.fast.as_events);
        `touched`: every round the poll gave rows; `unheld`: those given a row not among
        `tables`."""
        tables = list(tables)
        self._lost(unheld)
        if sum(t.num_rows for t in tables) > ROWS_HELD:
            self._lost(touched)
            return
        for t in tables:
            t = t.filter(pc.and_(pc.is_in(t.column("type"), _ROUND_TYPES),
                                 pc.and_(pc.is_valid(t.column("shoe")),
                                         pc.is_valid(t.column("round")))))
            if not t.num_rows:
                continue
            cols = py_columns(t.select(["table_id", "shoe", "round", *_HELD]))
            for table, shoe, rnd, *row in zip(*cols.values(), strict=True):
                self._rows.setdefault((table, shoe, rnd), []).append(tuple(row))
        excess = len(self._rows) - ROUNDS_HELD
        if excess > 0:
            gone = list(islice(self._rows, excess))
            for k in gone:
                del self._rows[k]
            self._lost(gone)

    def _lost(self, keys: Iterable[RoundKey]) -> None:
        if self._unheld is None:
            return
        self._unheld.update(keys)
        if len(self._unheld) > UNHELD_KEPT:
            self._unheld = None

    def spans(self, keys: Sequence[RoundKey], since: dt.datetime | None) -> list[tuple] | None:
        """auditor.audit.listed's spans of these rounds (key, first and last seq, events,
        earliest stamp, round_end's seq, last seq but a bank_pass, round_starts), over their
        events stamped at or after `since`, from what is held: None unless that is provably
        every such row of `events`. The caller vouches that none of them was judged while
        watching (a judged round is let go, and its later rows held under the same key
        would be taken for all of it): `since` from auditor.jobs.earliest, which is None
        for such a round."""
        if (since is None or self._unheld is None
                or (self._stamped_to is not None and since <= self._stamped_to)):
            return None
        out = []
        for k in keys:
            held = self._rows.get(k)
            if held is None or k in self._unheld:
                return None
            rows = [r for r in held if r[_TS] is not None and r[_TS] >= since]
            if not rows:
                return None
            seqs = [r[_SEQ] for r in rows]
            ends = [s for s, r in zip(seqs, rows, strict=True) if r[_TYPE] == "round_end"]
            core = [s for s, r in zip(seqs, rows, strict=True) if r[_TYPE] != "bank_pass"]
            out.append((*k, min(seqs), max(seqs), len(rows), min(r[_TS] for r in rows),
                        min(ends, default=None), max(core, default=None),
                        sum(1 for r in rows if r[_TYPE] == "round_start")))
        return out

    def forget(self, keys: Iterable[RoundKey]) -> None:
        """Rounds judged: more events of one are late, and it is read back whole (no spans
        are asked of it again: auditor.jobs.earliest keeps it judged), so it need not be
        remembered as unheld either."""
        for k in keys:
            self._rows.pop(k, None)
            if self._unheld is not None:
                self._unheld.discard(k)

    def ordered(self, con: duckdb.DuckDBPyConnection) -> None:
        """Read which events have an ordered time now (after a sweep, the only writer)."""
        self._ordered = {
            t: int(top) for stream, top in con.execute(
                "SELECT stream, max(seq) FROM ordered_times GROUP BY ALL").fetchall()
            if (t := stream_name("table", stream)) is not None
        }

    def columns(
        self, con: duckdb.DuckDBPyConnection, todo: Sequence[tuple], since: dt.datetime | None
    ) -> dict[str, list[Any]] | None:
        """round_events_sql(todo, bounded=since is not None, excluded=False) as `py_columns`
        gives it, from what is held; None unless every round of `todo` (auditor.audit.listed's
        rows: key, first_seq, last_seq, n, ... as _TODO) is held whole."""
        picked: list[tuple[tuple, list[tuple[Any, ...]]]] = []
        for head in sorted(todo, key=itemgetter(0, 1, 2)):
            table, _, _, first, last, n = head[:6]
            held = self._rows.get(head[:3])
            if held is None or self._ordered.get(table, first - 1) >= first:
                return None
            if since is not None:
                held = [r for r in held if r[_TS] is not None and r[_TS] >= since]
            if not held or len(held) != n:
                return None
            held = sorted(held, key=itemgetter(_SEQ))
            if held[0][_SEQ] != first or held[-1][_SEQ] != last:
                return None
            picked.append((head, held))
        self._learn_paths(con, {r[_SOURCE] for _, held in picked for r in held})
        out: dict[str, list[Any]] = {c: [] for c in (*HEAD_COLUMNS, *EVENT)}
        for head, held in picked:
            values = (*head[:3], head[5], head[4], *head[7:14])
            for c, v in zip(HEAD_COLUMNS, values, strict=True):
                out[c] += [v] * len(held)
            for c, i in _FROM.items():
                if i is not None:
                    out[c] += [r[i] for r in held]
            out["source"] += [f"{self._paths[r[_SOURCE]]}:{r[_LINE]}" for r in held]
        return out

    def _learn_paths(self, con: duckdb.DuckDBPyConnection, sources: set[int]) -> None:
        new = sorted(sources - self._paths.keys())
        if new:
            self._paths.update(con.execute(
                "SELECT id, path FROM sources WHERE id IN (SELECT unnest(?))", [new]
            ).fetchall())


def chemin_rounds(cols: dict[str, list[Any]]) -> set[RoundKey]:
    """The chemin de fer rounds among `columns`' rows."""
    return {(t, s, r) for t, s, r, g in zip(cols["table_id"], cols["shoe"], cols["round"],
                                             cols["game"], strict=True) if g == CHEMIN}
