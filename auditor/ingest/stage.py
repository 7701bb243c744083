"""Staging rows: the lines of the pieces being loaded, from their insert until the finisher
(auditor.ingest.commit) takes them, and the checks made on them there: a seq repeated in a
file, events already ingested (duplicates, or an alteration), whether they may go in bulk.

A `Staging` owns the temporary tables these checks use, from its creation to its
`close`; its methods return values, and hand out the SQL of the rows they judged.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from auditor.ingest import fast, staged_rows
from auditor.ingest.lines import Rows
from auditor.ingest.reader import LongLine
from auditor.ingest.stream_tops import StreamTops
from auditor.ingest.validate import names_its_event_sql, present_types, staging_select
from auditor.store import ledger_rows
from auditor.store.db import one
from auditor.store.events import FIELDS

EVENT_COLUMNS = (
    "source_id",
    "line_no",
    "stream",
    "seq",
    "ts",
    "ts_offset_min",
    "type",
    *(f.column for f in FIELDS.values()),
    "raw",
)

# The follower's small pieces wait here, checked before they join `events`.
_EVENT_NAMES = [*EVENT_COLUMNS, "rejected"]
_COLUMNS = ", ".join(_EVENT_NAMES)
# Per connection, whether its `events` has its columns in _EVENT_NAMES' order (a database
# this version made always has; a changed one is written to by name).
_IN_ORDER: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _in_order(con: duckdb.DuckDBPyConnection) -> bool:
    with contextlib.suppress(KeyError, TypeError):  # TypeError: no weak reference to it
        return _IN_ORDER[con]
    ok = con.table("events").columns == _EVENT_NAMES
    with contextlib.suppress(TypeError):
        _IN_ORDER[con] = ok
    return ok


_STAGED_DDL = "CREATE OR REPLACE TEMP TABLE staged AS SELECT * FROM events LIMIT 0"
_LINE_BYTES_DDL = (
    "CREATE TEMP TABLE IF NOT EXISTS line_bytes (source_id BIGINT, line_no BIGINT, bytes BLOB)"
)
_GOOD = "rejected IS NULL"
# The line numbers and text of the rows staged are held for the pieces' events digests up to
# this many bytes of text a staging (a file bigger than that: its seal reads its rows back).
HOLD_BYTES = 256 << 20


def new_source_ids(con: duckdb.DuckDBPyConnection, n: int) -> list[int]:
    """The ids of `n` new sources, in order."""
    return [
        int(r[0])
        for r in con.execute(
            f"SELECT nextval('source_id_seq') AS id FROM range({int(n)}) ORDER BY id"
        ).fetchall()
    ]


def id_list(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    """The ids a query gives, as a SQL list of constants (NULL when there are none)."""
    ids = sorted(int(r[0]) for r in con.execute(sql).fetchall())
    return ", ".join(map(str, ids)) or "NULL"


class Overlap(NamedTuple):
    """What holding the rows against the events ingested found: `altered` says the first
    line that differs from an ingested event (empty: none), `concerns` when that event
    happened."""

    altered: str
    concerns: dt.datetime | None


@dataclass(frozen=True)
class Counts:
    """One source's staged rows: events to load (duplicates left out), lines quarantined,
    events skipped as already ingested, and the time span of its good lines."""

    events: int = 0
    quarantined: int = 0
    duplicates: int = 0
    # DuckDB gives a time past Python's years as text, which the manifest takes as such.
    first_ts: dt.datetime | str | None = None
    last_ts: dt.datetime | str | None = None


class Range(NamedTuple):
    """The seqs of one stream that one source stages (good rows; `lo_named` and `hi_named`
    count rejected lines that name their event too, as the overlap check does), with what
    the stream held before: its highest seq and the source holding it, and (when asked)
    whether any source ingested holds a seq within them."""

    stream: str
    source_id: int
    lo: int | None
    hi: int | None
    n: int
    seqs: int
    lo_named: int | None
    hi_named: int | None
    top: int | None
    top_source: int | None
    stored: bool | None


def bulk(ranges: Sequence[Range], past_top: bool) -> bool:
    """Whether staged rows may be finished together without the checks a file gets alone:
    no seq repeated within a source, no two sources sharing a stream's range, and no seq
    that an ingested source may hold. Ingest asks that no ingested range meets the new one;
    the follower (`past_top`) asks a little more, that every seq is past its stream's highest
    (a seq filling an older gap goes the careful way too). `ranges` by stream, then by lowest
    seq."""
    last: dict[str, int] = {}
    for r in ranges:
        if r.n != r.seqs or r.lo_named is None or r.hi_named is None:
            return False
        if (r.top is not None and r.lo_named <= r.top) if past_top else r.stored:
            return False
        if r.stream in last and r.lo_named <= last[r.stream]:
            return False
        last[r.stream] = r.hi_named
    return True


def odd_sources(ranges: Sequence[Range]) -> set[int]:
    """The sources whose ranges keep staged rows from going together (`bulk` with
    `past_top`): a seq repeated or not past its stream's highest, or a stream shared with
    another source."""
    odd: set[int] = set()
    sharing: dict[str, set[int]] = {}
    for r in ranges:
        if (r.n != r.seqs or r.lo_named is None or r.hi_named is None
                or (r.top is not None and r.lo_named <= r.top)):
            odd.add(r.source_id)
        sharing.setdefault(r.stream, set()).add(r.source_id)
    for sources in sharing.values():
        if len(sources) > 1:
            odd |= sources
    return odd


@contextmanager
def staging(
    con: duckdb.DuckDBPyConnection, sources: Sequence[int] | int, staged: bool = False
) -> Iterator[Staging]:
    """A transaction over the rows staged for `sources` (ids, or how many new sources to
    take): committed when the block calls `commit`, else rolled back (an exception
    included); then the staging's temporary tables go."""
    began = dt.datetime.now(dt.UTC)  # at most the transaction's now()
    con.execute("BEGIN TRANSACTION")
    rows = None
    try:
        ids = new_source_ids(con, sources) if isinstance(sources, int) else sources
        rows = Staging(con, ids, staged)
        rows.began = began
        yield rows
        if not rows.committed:
            con.execute("ROLLBACK")
    except BaseException:
        if rows is None or not rows.committed:
            con.execute("ROLLBACK")
        raise
    finally:
        if rows is not None:
            rows.close()


class Staging:
    """The rows of new sources, inserted into `events` under their source ids (ingest), or
    of pieces of sources that hold events already, in a temporary table (`staged`: the
    follower's small pieces), until `commit.finish` keeps the good ones.

    `staged`, `overlap`, `dups` and `line_bytes` hold them and what the checks found; all
    are this object's, dropped by `close`."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, source_ids: Sequence[int], staged: bool = False
    ) -> None:
        self.con = con
        self.ids = [int(i) for i in source_ids]
        self.staged = staged
        self._table = "staged" if staged else "events"
        self.dups = False  # lines skipped as duplicates are in `dups`
        self._kept = False  # `keep` ran: in `events`, only the rows to load are left
        self.committed = False
        self._ranges: list[Range] | None = None  # as last computed, while the rows hold
        self._problems: dict[int, list[tuple[int, str]]] | None = None
        # The staged rows as read once (staged_rows), while they hold; None: not read yet,
        # or not to be judged in Python (`_rows_read`).
        self._summary: list[staged_rows.Row] | None = None
        self._summary_read = False
        self._dup_lines: frozenset[int] | None = None
        # A time no later than the transaction's start (DuckDB's now()), if known.
        self.began: dt.datetime | None = None
        self._made: list[str] = []  # the temporary tables made, for `close`
        # Per source, the (line_no, raw) of its rows as inserted, for `record_digests`;
        # None once past HOLD_BYTES.
        self._held: dict[int, list[tuple[pa.Array, pa.Array]]] | None = {}
        self._held_bytes = 0
        # A poll's rows typed in Arrow (fast.as_events), held here rather than in `staged`
        # until a statement needs them there (`_ready`): in the common poll none does, and
        # they go from here to `events` (`keep`), the checks answered in Python.
        self._pending: pa.Table | None = None
        self._staged_made = False
        # Every chunk of rows typed in Arrow, wherever it went (pending, `staged`, `events`),
        # and whether a check may have rejected one since (`_doubted`): `straight`.
        self._typed: list[pa.Table] = []
        self._doubted = False
        self.straight: pa.Table | None = None
        # The follower's streams' highest seqs (auditor.ingest.stream_tops), asked instead of
        # the table; and what `commit.finish` wrote to `stream_sources`, for it to follow.
        self.tops: StreamTops | None = None
        self.extended: list[Range] = []
        # The rows, as SQL: the staged table, or this staging's rows in `events`.
        self._rows_sql = "staged" if staged else (
            f"(SELECT * FROM events WHERE source_id {self._which})"
        )

    def _ready(self) -> None:
        """`staged` made and holding every staged row, for a statement that reads it."""
        if not self.staged or self._staged_made:
            return
        self._make("staged", _STAGED_DDL)
        self._staged_made = True
        if self._pending is not None:
            self._insert_events("staged", self._pending)

    def _insert_events(self, table: str, rows: pa.Table) -> None:
        """Rows shaped as `fast.as_events` makes them into `table` (`events` or `staged`,
        whose columns are its): by position when they are in its order, as they are made,
        which costs a poll's rows 0.7 ms less than a table registered for the statement."""
        if rows.schema.names == _EVENT_NAMES and _in_order(self.con):
            self.con.from_arrow(rows).insert_into(table)
            return
        self.con.register("typed_rows", rows)
        self.con.execute(f"INSERT INTO {table} ({_COLUMNS}) SELECT * FROM typed_rows")
        self.con.unregister("typed_rows")

    @property
    def table(self) -> str:
        """The table the rows are inserted into (`staged` made, for a statement)."""
        self._ready()
        return self._table

    @property
    def rows(self) -> str:
        """The rows, as SQL (`staged` made and filled, for a statement)."""
        self._ready()
        return self._rows_sql

    def _make(self, name: str, ddl: str) -> None:
        self.con.execute(ddl)
        if name not in self._made:
            self._made.append(name)

    def _changed(self) -> None:
        """The rows changed: what was read of them is read again."""
        self._ranges = None
        self._problems = None
        self._summary, self._summary_read, self._dup_lines = None, False, None

    def _rows_read(self) -> list[staged_rows.Row] | None:
        """The staged rows, read once while they hold, for the questions below to be
        answered in Python (a poll's few rows: auditor.ingest.staged_rows); None for rows
        in `events` (a batch's, too many) or whose times cannot be compared in Python."""
        if not self.staged:
            return None
        if not self._summary_read:
            if self._pending is not None and not self._staged_made:
                self._summary = staged_rows.from_arrow(self.con, self._pending, self.tops)
            else:
                self._ready()
                self._summary = staged_rows.read(
                    self.con.execute(staged_rows.SUMMARY_SQL).fetchall())
            self._summary_read = True
        return self._summary

    def _dups(self) -> frozenset[int]:
        """The lines skipped as duplicates (`dups`), read once."""
        if not self.dups:
            return frozenset()
        if self._dup_lines is None:
            self._dup_lines = frozenset(
                int(r[0]) for r in self.con.execute("SELECT line_no FROM dups").fetchall())
        return self._dup_lines

    def none_ahead(self, tolerance: dt.timedelta) -> bool:
        """Whether no row to load is stamped more than `tolerance` after the transaction's
        now(), as told from the rows read in Python (False: not known, ask DuckDB). A
        second's margin for the clock read before the transaction began."""
        kept = self.kept_rows()
        if kept is None or self.began is None:
            return False
        latest = staged_rows.latest_stamp(kept)
        return latest is None or latest <= self.began + tolerance - dt.timedelta(seconds=1)

    def kept_rows(self) -> list[staged_rows.Row] | None:
        """The staged rows to load, as read in Python (None: ask `kept_sql`)."""
        rows = self._rows_read()
        return None if rows is None else staged_rows.kept(rows, self._dups())

    @property
    def _which(self) -> str:
        """The sources, as SQL after `source_id`."""
        if len(self.ids) == 1:
            return f"= {self.ids[0]}"
        return f"IN ({', '.join(map(str, self.ids))})"

    def commit(self) -> None:
        self.con.execute("COMMIT")
        self.committed = True

    def close(self) -> None:
        """Drop what the staging made (once its transaction is over)."""
        if self._made:
            self.con.execute("; ".join(f"DROP TABLE IF EXISTS {t}" for t in self._made))

    # -- rows in ----------------------------------------------------------------------------

    def insert(self, rows: Sequence[Rows], source_id: int | None = None) -> None:
        """Every row, the per-line path's with their reason in `rejected`; the rows carry a
        source_id column unless `source_id` is given."""
        self._changed()
        sid = "source_id" if source_id is None else str(int(source_id))
        cols = _COLUMNS
        typed = [r.typed for r in rows if r.typed is not None]
        slow = [r.lines for r in rows if r.lines is not None and r.lines.num_rows]
        if typed:
            typed_chunk = pa.concat_tables(typed)
            as_events = fast.as_events(typed_chunk, source_id)
            if as_events is None:
                self.con.register("typed_chunk", typed_chunk)
                select = fast.typed_select("typed_chunk", sid)
                self.con.execute(
                    f"INSERT INTO {self.table} ({cols}) SELECT {cols} FROM ({select})")
                self.con.unregister("typed_chunk")
            elif (self.staged and not slow and self._pending is None
                  and not self._staged_made):
                self._pending = as_events
            else:
                self._insert_events(self.table, as_events)
            if as_events is not None:
                self._typed.append(as_events)
            self.hold(typed_chunk, typed_chunk.column("raw"), source_id)
        if slow:
            chunk = pa.concat_tables(slow)
            # the rows staging_select makes: a line less its line end, blank lines skipped
            line = chunk.column("line")
            chunk_rows = chunk.filter(
                pc.greater(pc.binary_length(pc.utf8_rtrim(line, " \t\r\n")), 0))
            self.hold(chunk_rows, pc.utf8_rtrim(chunk_rows.column("line"), "\r\n"),
                       source_id)
            self.con.register("chunk", chunk)
            types = present_types(self.con, "chunk", chunk.num_rows)
            select = staging_select("chunk", sid, types)
            self.con.execute(f"INSERT INTO {self.table} ({cols}) SELECT {cols} FROM ({select})")
            self.con.unregister("chunk")
            self._keep_bytes([chunk], source_id)

    def hold(self, t: pa.Table, raw: pa.ChunkedArray, source_id: int | None) -> None:
        """Keep the line numbers and text of rows just inserted (`t`, with `raw` their
        text as `events` holds it), by source, for `record_digests`."""
        if self._held is None or not t.num_rows:
            return
        self._held_bytes += raw.nbytes
        if self._held_bytes > HOLD_BYTES:
            self._held = None
            return
        # slices of the arrays inserted, no copy: the rows of a source are together (a
        # batch's files one after the other), else put so first
        rows = pa.table({"line_no": t.column("line_no"), "raw": raw})
        if source_id is not None:
            self._add_held(int(source_id), rows)
            return
        sids = np.asarray(t.column("source_id"), dtype=np.int64)
        if np.any(np.diff(sids) < 0):
            order = np.argsort(sids, kind="stable")
            rows, sids = rows.take(pa.array(order)), sids[order]
        cuts = np.flatnonzero(np.diff(sids)) + 1
        for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(sids)], strict=True):
            self._add_held(int(sids[lo]), rows.slice(lo, hi - lo))

    def _add_held(self, source_id: int, rows: pa.Table) -> None:
        held = self._held
        assert held is not None
        for b in rows.to_batches():
            if b.num_rows:
                held.setdefault(source_id, []).append((b.column(0), b.column(1)))

    def record_digests(self, pieces: Sequence[tuple[int, int, int]]) -> None:
        """Before `keep`, once the checks are done: the events digest of each piece
        (source_id, start_byte, end_byte: the one piece of its source staged here), from
        the rows held at insert less those `keep` will remove (rejected lines, duplicates),
        into the ledger's STAGED table, which the seal takes instead of reading them back.
        Nothing when the rows were too many to hold: the seal reads them."""
        if self._held is None:
            return
        problems = self.problems()
        dups = (np.array([r[0] for r in self.con.execute("SELECT line_no FROM dups").fetchall()],
                         dtype=np.int64) if self.dups else None)
        found = []
        for sid, start, end in pieces:
            chunks = self._held.get(sid, [])
            removed = np.array([n for n, _ in problems.get(sid, [])], dtype=np.int64)
            if dups is not None and self.ids == [sid]:
                removed = np.concatenate((removed, dups))
            found.append((sid, start, end, *ledger_rows.events_digest(
                _in_line_order(chunks, removed))))
        ledger_rows.record_staged(self.con, found)

    def insert_long_lines(self, source_id: int, long_lines: Iterable[LongLine]) -> None:
        """Long lines join the file's rejected rows, so quarantine, `log.malformed` and the
        problems list take them like any bad line."""
        rows = [(source_id, x.line_no, x.raw, x.reason) for x in long_lines]
        if rows:
            self._changed()
            self.con.executemany(
                f"INSERT INTO {self.table} (source_id, line_no, raw, rejected) "
                "VALUES (?, ?, ?, ?)",
                rows,
            )

    def _keep_bytes(self, parts: Iterable[pa.Table], source_id: int | None = None) -> None:
        """Hold the bytes of lines that are not UTF-8 (`lines_table`'s raw_bytes) in
        `line_bytes` until `quarantine` writes their rows: the events table has no place for
        them. `parts` carry a source_id column unless `source_id` is given."""
        sid = "source_id" if source_id is None else str(int(source_id))
        for t in parts:
            if t.column("raw_bytes").null_count == t.num_rows:
                continue
            self._make("line_bytes", _LINE_BYTES_DDL)
            self.con.register("chunk_bytes", t)
            self.con.execute(
                f"INSERT INTO line_bytes SELECT {sid}, line_no, raw_bytes FROM chunk_bytes "
                "WHERE raw_bytes IS NOT NULL"
            )
            self.con.unregister("chunk_bytes")

    # -- checks -----------------------------------------------------------------------------

    def reject_repeated_seq(self, source_id: int) -> None:
        """A seq used twice in one stream of one file: the first line stands, the rest wait."""
        self._changed()
        self._doubted = True
        t = self.table
        self.con.execute(
            f"""
            UPDATE {t} SET rejected = 'seq ' || {t}.seq || ' repeats in ' ||
                                     replace({t}.stream, ':', ' ') ||
                                     ' (first at line ' || d.first_line || ')'
            FROM (SELECT stream, seq, min(line_no) AS first_line FROM {self.rows}
                  WHERE rejected IS NULL GROUP BY ALL HAVING count(*) > 1) d
            WHERE {t}.source_id = {source_id} AND {t}.rejected IS NULL
              AND {t}.stream = d.stream AND {t}.seq = d.seq
              AND {t}.line_no <> d.first_line
            """
        )

    def check_overlap(
        self,
        source_id: int,
        file_id: int | None = None,
        known: tuple[int, ...] = (),
        known_reason: str = "",
    ) -> Overlap:
        """Hold one source's rows against the events already in the database: identical
        ones are skipped as duplicates (the rows `kept_sql` gives leave them out); a
        different one means a log was altered, and the message says where, with the time of
        the ingested event it would change.

        A rejected line is held against them too when it still names its event (stream and
        seq): a resend whose copy of an event was changed into a bad line is as altered as
        one whose change still reads well, and quarantining that line would let the file
        through.

        Two cases of a piece of a file (`file_id`) or a path read before (`known`):
        - an event of an earlier piece of the same file at another line is a seq repeated in
          the file: rejected as such, as if the file had been read whole;
        - sharing any event with the sources `known` (the same path, of which this is not a
          continuation) means the bytes ingested under that name changed: `known_reason`,
          dated by the first event ingested from the path."""
        assert self.ids == [source_id]
        self._changed()
        self._doubted = True
        con, t = self.con, self.table
        named = names_its_event_sql()
        earlier = id_list(
            con,
            f"""
            SELECT DISTINCT r.source_id FROM stream_sources r
            JOIN (SELECT stream, min(seq) AS lo, max(seq) AS hi FROM {self.rows}
                  WHERE rejected IS NULL OR {named} GROUP BY stream) t
              ON r.stream = t.stream AND r.min_seq <= t.hi AND r.max_seq >= t.lo
            """,
        )
        named_s = names_its_event_sql("s.stream", "s.seq", "s.raw")
        # Rows staged outside `events` cannot meet themselves there.
        itself = "" if self.staged else "AND e.source_id <> s.source_id"
        self._make(
            "overlap",
            f"""
            CREATE OR REPLACE TEMP TABLE overlap AS
            SELECT s.line_no, s.stream, s.seq, s.rejected, e.source_id AS other_source,
                   e.line_no AS other_line, e.ts AS other_ts,
                   (s.raw = e.raw OR try(json(s.raw) = json(e.raw))) AS same,
                   x.file_id AS other_file
            FROM {self.rows} s JOIN events e
              ON e.stream = s.stream AND e.seq = s.seq {itself}
            LEFT JOIN (SELECT source_id, min(file_id) AS file_id FROM source_extents
                       WHERE source_id IN ({earlier}) GROUP BY source_id) x
              ON x.source_id = e.source_id
            WHERE (s.rejected IS NULL OR {named_s}) AND e.rejected IS NULL
              AND e.source_id IN ({earlier})
            """
        )
        if known and one(
            con,
            f"SELECT 1 FROM overlap WHERE other_source IN ({', '.join(map(str, known))}) "
            "LIMIT 1",
        ):
            return Overlap(known_reason, None)
        if file_id is not None:
            con.execute(
                f"""
                UPDATE {t} SET rejected = 'seq ' || {t}.seq || ' repeats in ' ||
                                         replace({t}.stream, ':', ' ') ||
                                         ' (first at line ' || r.first_line || ')'
                FROM (SELECT line_no, min(other_line) AS first_line FROM overlap
                      WHERE other_file = {int(file_id)} AND other_line <> line_no
                        AND rejected IS NULL GROUP BY line_no) r
                WHERE {t}.source_id = {int(source_id)} AND {t}.line_no = r.line_no
                  AND {t}.rejected IS NULL
                """
            )
            con.execute(
                f"DELETE FROM overlap WHERE other_file = {int(file_id)} AND other_line <> line_no"
            )
        differ = one(
            con,
            "SELECT o.stream, o.seq, o.line_no, o.rejected, src.path, o.other_line, "
            "count(*) OVER (), o.other_ts FROM overlap o "
            "JOIN sources src ON src.id = o.other_source "
            "WHERE NOT coalesce(o.same, false) ORDER BY o.line_no LIMIT 1",
        )
        if differ:
            stream, seq, line_no, rejected, other, other_line, n, when = differ
            bad = f", malformed: {rejected}" if rejected else ""
            return Overlap(
                f"line {line_no} ({stream.replace(':', ' ')} seq {seq}{bad}) differs from the "
                f"event already ingested from {other}:{other_line} "
                f"({n} {'event differs' if n == 1 else 'events differ'})",
                when,
            )
        # A rejected line the same as an ingested event stays in quarantine: only good lines
        # are skipped as duplicates.
        self._make(
            "dups",
            "CREATE OR REPLACE TEMP TABLE dups AS SELECT line_no FROM overlap "
            "WHERE same AND rejected IS NULL",
        )
        self.dups = True
        return Overlap("", None)

    @property
    def good(self) -> str:
        """The condition on the staged rows of those to load."""
        return f"{_GOOD} AND line_no NOT IN (SELECT line_no FROM dups)" if self.dups else _GOOD

    def ranges(self, named: bool = False, stored: bool = False) -> list[Range]:
        """The rows' `Range`s, in one query, by stream and then by lowest seq. `named`:
        rejected lines that name their event count in lo_named and hi_named (needed only
        when there are rejected lines); `stored`: say whether an ingested source's range
        meets each."""
        rows = None if stored else self._rows_read()
        if rows is not None:
            self._ranges = [Range(*r, None)
                            for r in staged_rows.ranges(rows, named, self._dups())]
            return self._ranges
        with_named = names_its_event_sql() if named else "false"
        meets = (
            "EXISTS (SELECT 1 FROM stream_sources r WHERE r.stream = s.stream "
            "AND r.min_seq <= s.hi_named AND s.lo_named <= r.max_seq)"
            if stored else "NULL"
        )
        good = self.good
        self._ranges = [
            Range(*r)
            for r in self.con.execute(
                f"""
                WITH s AS (
                  SELECT stream, source_id,
                         min(seq) FILTER ({good}) AS lo, max(seq) FILTER ({good}) AS hi,
                         count(*) FILTER ({good}) AS n,
                         count(DISTINCT seq) FILTER ({good}) AS seqs,
                         min(seq) AS lo_named, max(seq) AS hi_named
                  FROM {self.rows} WHERE ({good}) OR (rejected IS NOT NULL AND {with_named})
                  GROUP BY ALL
                )
                SELECT s.*, t.top, t.top_source, {meets} AS stored
                FROM s
                LEFT JOIN (SELECT stream, max(max_seq) AS top,
                                  arg_max(source_id, max_seq) AS top_source
                           FROM stream_sources WHERE stream IN (SELECT stream FROM s)
                           GROUP BY stream) t USING (stream)
                ORDER BY s.stream, s.lo_named
                """
            ).fetchall()
        ]
        return self._ranges

    def last_ranges(self) -> list[Range]:
        """The ranges as last computed if the rows have not changed since, else anew."""
        return self._ranges if self._ranges is not None else self.ranges()

    # -- what the finisher reads ------------------------------------------------------------

    def tally(self) -> tuple[dict[int, Counts], dict[int, dict[str, int]]]:
        """Per source, what its rows hold (a source without rows is absent), and the events
        to load per stream, in one query."""
        dup = (
            "count(*) FILTER (rejected IS NULL AND line_no IN (SELECT line_no FROM dups))"
            if self.dups else "0"
        )
        counts: dict[int, Counts] = {}
        per_stream: dict[int, dict[str, int]] = {}
        rows = self._rows_read()
        # The times are the source's (a time past Python's years comes back as text).
        got = staged_rows.tally(rows, self._dups()) if rows is not None else self.con.execute(
            f"SELECT source_id, stream, count(*) FILTER ({self.good}), "
            f"count(*) FILTER (rejected IS NOT NULL), {dup}, "
            "min(min(ts) FILTER (rejected IS NULL)) OVER w, "
            "max(max(ts) FILTER (rejected IS NULL)) OVER w "
            f"FROM {self.rows} GROUP BY source_id, stream "
            "WINDOW w AS (PARTITION BY source_id) ORDER BY source_id, stream"
        ).fetchall()
        for sid, stream, n, bad, dups, first, last in got:
            c = counts.get(sid, Counts())
            counts[sid] = Counts(
                c.events + n, c.quarantined + bad, c.duplicates + dups, first, last
            )
            if n:
                per_stream.setdefault(sid, {})[stream] = n
        return counts, per_stream

    def problems(self) -> dict[int, list[tuple[int, str]]]:
        """The lines rejected, per source: (line, reason)."""
        if self._problems is None and (rows := self._rows_read()) is not None:
            self._problems = staged_rows.problems(rows)
        if self._problems is None:
            self._problems = {}
            for sid, line_no, reason in self.con.execute(
                f"SELECT source_id, line_no, rejected FROM {self.rows} "
                "WHERE rejected IS NOT NULL ORDER BY source_id, line_no"
            ).fetchall():
                self._problems.setdefault(sid, []).append((line_no, reason))
        return self._problems

    def of_source(self, source_id: int) -> str:
        """The SQL of one source's rows, good and rejected."""
        if self.ids == [source_id]:
            return self.rows
        return f"(SELECT * FROM {self.rows} WHERE source_id = {int(source_id)})"

    @property
    def kept_sql(self) -> str:
        """The SQL of the rows to load."""
        if self._kept and not self.staged:
            return f"SELECT * FROM {self.rows}"
        return f"SELECT * FROM {self.rows} WHERE {self.good}"

    def quarantine(self) -> None:
        """The rejected lines into quarantine: reason, text, and the bytes of a line that is
        not UTF-8 (its text shows them as U+FFFD)."""
        self._make("line_bytes", _LINE_BYTES_DDL)
        self.con.execute(
            "INSERT INTO quarantine (source_id, line_no, reason, raw, raw_bytes) "
            f"SELECT t.source_id, t.line_no, t.rejected, t.raw, b.bytes FROM {self.rows} t "
            "LEFT JOIN line_bytes b ON b.source_id = t.source_id AND b.line_no = t.line_no "
            "WHERE t.rejected IS NOT NULL ORDER BY t.source_id, t.line_no"
        )
        self.con.execute("DELETE FROM line_bytes")

    def keep(self, rejected: bool) -> None:
        """Only the good rows stay: the staged ones join `events`; in `events`, the rejected
        ones (if there are: `rejected`) and the duplicates leave."""
        self._kept = True
        if self.staged and self._typed and not (self.dups or self._doubted):
            # none of them rejected: every one goes to `events` as it is
            self.straight = pa.concat_tables(self._typed)
        if self.staged and not self._staged_made and self._pending is not None:
            assert not self.dups  # no check wrote `staged`: every row is good
            self._insert_events("events", self._pending)
        elif self.staged:
            self._ready()
            self.con.execute(f"INSERT INTO events SELECT * FROM staged WHERE {self.good}")
        elif rejected or self.dups:
            dups = " OR line_no IN (SELECT line_no FROM dups)" if self.dups else ""
            self.con.execute(
                f"DELETE FROM events WHERE source_id {self._which} "
                f"AND (rejected IS NOT NULL{dups})"
            )


def _in_line_order(
    chunks: list[tuple[pa.Array, pa.Array]], removed: np.ndarray
) -> list[tuple[pa.Array, pa.Array]]:
    """(line_no, raw) chunks without the lines `removed`, in line order: as they are when
    each chunk is and they follow each other (a file's blocks, the fast path alone), else
    put in order in one piece."""
    if len(chunks) == 1 and not len(removed):  # a poll's piece: a run of its lines
        line_no = np.asarray(chunks[0][0], dtype=np.int64)
        if np.all(line_no[1:] > line_no[:-1]):
            return chunks
    chunks = sorted(chunks, key=lambda c: c[0][0].as_py())
    lines = [np.asarray(c[0], dtype=np.int64) for c in chunks]
    if len(removed):
        keep = [~np.isin(n, removed) for n in lines]
        chunks = [(c[0].filter(pa.array(k)), c[1].filter(pa.array(k)))
                  for c, k in zip(chunks, keep, strict=True)]
        lines = [n[k] for n, k in zip(lines, keep, strict=True)]
    every = np.concatenate(lines) if lines else np.zeros(0, dtype=np.int64)
    if np.all(np.diff(every) > 0):
        return chunks
    order = pa.array(np.argsort(every, kind="stable"))
    return [(pa.concat_arrays([c[0].cast(pa.int64()) for c in chunks]).take(order),
             pa.concat_arrays([c[1].cast(pa.large_string()) for c in chunks]).take(order))]
