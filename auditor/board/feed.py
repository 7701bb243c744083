"""The findings as they are stored, in the order they are stored: the cursor, the filters, and
the one poller that pushes what is new to every open stream.

## The cursor

A cursor is the `id` of a row of the findings table, a decimal integer; `0` is "from the
start". What comes after cursor `c` is every row with `id > c`, in `id` order. That is exact
(no finding missed, none repeated) because:

- the findings table is append-only: a finding is recorded once and a withdrawal is a new row
  (store/findings.py), so a row, once seen, never changes or moves;
- ids come from one sequence (`finding_id_seq`), and all findings are written by one writer
  (ingest and the audit, one transaction after another), so transactions commit in id order:
  when a reader sees row N, every row below N that will ever exist is already there.

A sequence value taken by a transaction that rolled back is a gap that stays empty, which
costs nothing. Two writers of findings committing at once could break the second point; the
poller checks it (the number of rows at or below its cursor must not grow) and logs an error
if it ever happens (docs/board.md).

An open row is a finding that now stands; a `withdrawn` row says a finding no longer holds.
The records are findings format v1, the same fields and values as `bacc-audit findings
--format jsonl` (fingerprint and id included).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

import anyio.to_thread
import duckdb

from auditor.config import PropertyConfig, log_offset
from auditor.store.filters import Filter
from auditor.store.findings import STORED_FIELDS, short_id, shown_ts

log = logging.getLogger("auditor.board")

Cursors = Callable[[], duckdb.DuckDBPyConnection]
# The columns of a findings-v1 record, as store/findings.select reads them.
RECORD_SQL = (
    "code, severity, table_id, pit, shoe, round, seq, ts, rule, message, "
    "CAST(expected AS VARCHAR), CAST(observed AS VARCHAR), source, fingerprint, dealer"
)
CHUNK = 1000  # rows read at a time when catching up


def record(row: tuple[Any, ...], zone: dt.tzinfo) -> dict[str, Any]:
    """One findings-v1 record from the RECORD_SQL columns, built as findings.select builds
    the export's (tests/board/test_board.py holds the two equal)."""
    rec = dict(zip(STORED_FIELDS, row[:-1], strict=True))
    rec["id"] = short_id(rec["fingerprint"])
    rec["dealer"] = row[-1]  # findings v1.1, last as in the export
    rec["ts"] = shown_ts(rec["ts"], zone, rec["fingerprint"])
    for k in ("expected", "observed"):
        rec[k] = json.loads(rec[k]) if rec[k] is not None else None
    return rec


@dataclass(frozen=True)
class Change:
    """One row of the findings table: a finding that now stands, or its withdrawal."""

    cursor: int
    status: str  # 'open' or 'withdrawn'
    at: dt.datetime  # the finding's time, UTC (for the window filter)
    record: dict[str, Any]

    def sse(self) -> str:
        """The Server-Sent Event: a new finding is a plain message (EventSource.onmessage),
        a withdrawal the named event `withdrawn`; `id:` is the cursor either way, so
        Last-Event-ID resumes after it."""
        kind = "" if self.status == "open" else f"event: {self.status}\n"
        data = json.dumps(self.record, separators=(",", ":"))
        return f"{kind}id: {self.cursor}\ndata: {data}\n\n"


@dataclass
class ZoneCache:
    """The zone times are shown in: the property's, else the offset most logs carry.

    The latter is a scan of the events, so it is asked again at most once a minute, not for
    every request and poll. A database without events yet says nothing of the property's
    zone: UTC is shown meanwhile and nothing is kept, so the first logs decide at once (a
    board started on an empty database showed +00:00 for a minute, then -05:00).
    """

    conf: PropertyConfig
    seconds: float = 60.0
    _zone: dt.tzinfo | None = None
    _at: float = field(default=-1e9)

    def get(self, con: duckdb.DuckDBPyConnection) -> dt.tzinfo:
        if self.conf.time_zone:
            return ZoneInfo(self.conf.time_zone)
        now = time.monotonic()
        if self._zone is None or now - self._at > self.seconds:
            offset = log_offset(con)
            if offset is None:
                return dt.UTC
            self._zone, self._at = self.conf.zone(offset), now
        return self._zone

    def shown(self) -> dt.tzinfo:
        """The zone of the latest answer, for a page that read no times (the footer)."""
        if self.conf.time_zone:
            return ZoneInfo(self.conf.time_zone)
        return self._zone or dt.UTC


@contextlib.contextmanager
def reading(cursors: Cursors) -> Iterator[duckdb.DuckDBPyConnection]:
    """A cursor of its own for one request or poll, closed after (DuckDB cursors of one
    connection may be used from different threads, one thread each)."""
    con = cursors()
    try:
        con.execute("SET TimeZone = 'UTC'")  # a setting of each cursor, as db.connect sets it
        yield con
    finally:
        con.close()


@contextlib.contextmanager
def snapshot(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """One read transaction: the head and the rows read inside it are of the same moment."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    finally:
        con.execute("ROLLBACK")


def head(con: duckdb.DuckDBPyConnection) -> int:
    """The cursor of the latest row stored (0 for none)."""
    return int(con.execute("SELECT coalesce(max(id), 0) FROM findings").fetchall()[0][0])


def _change(row: tuple[Any, ...], zone: dt.tzinfo) -> Change:
    """A Change from `id, status, ts` and the RECORD_SQL columns; the record first, which
    names a finding whose time no clock can show (findings.shown_ts)."""
    rec = record(row[3:], zone)
    return Change(row[0], row[1], row[2].astimezone(dt.UTC), rec)


def changes(
    con: duckdb.DuckDBPyConnection,
    after: int,
    zone: dt.tzinfo,
    *,
    upto: int | None = None,
    filters: Filter | None = None,
    withdrawn: bool = True,
    limit: int = CHUNK,
) -> list[Change]:
    """The rows after cursor `after` (and at most `upto`), in cursor order, at most `limit`."""
    where, params = (filters or Filter()).where()
    if upto is not None:
        where += " AND id <= ?"
        params.append(upto)
    if not withdrawn:
        where += " AND status = 'open'"
    rows = con.execute(
        f"SELECT id, status, ts, {RECORD_SQL} FROM findings WHERE id > ? AND {where} "
        "ORDER BY id LIMIT ?",
        [after, *params, limit],
    ).fetchall()
    return [_change(r, zone) for r in rows]


def all_changes(
    con: duckdb.DuckDBPyConnection,
    after: int,
    upto: int,
    zone: dt.tzinfo,
    filters: Filter | None = None,
    withdrawn: bool = True,
) -> Iterator[Change]:
    """Every row in (after, upto], read CHUNK at a time."""
    cursor = after
    while cursor < upto:
        batch = changes(
            con, cursor, zone, upto=upto, filters=filters, withdrawn=withdrawn, limit=CHUNK
        )
        yield from batch
        if len(batch) < CHUNK:
            return
        cursor = batch[-1].cursor


def standing(
    con: duckdb.DuckDBPyConnection, zone: dt.tzinfo, filters: Filter, limit: int
) -> list[Change]:
    """The standing findings, newest stored first, at most `limit`."""
    where, params = filters.where()
    rows = con.execute(
        f"SELECT id, status, ts, {RECORD_SQL} FROM current_findings WHERE {where} "
        "ORDER BY id DESC LIMIT ?",
        [*params, limit],
    ).fetchall()
    return [_change(r, zone) for r in rows]


# -- the poller ---------------------------------------------------------------------------


class Subscriber:
    """One open stream: the batches the poller pushes, and whether it fell behind."""

    def __init__(self, filters: Filter, start: int, size: int) -> None:
        self.filters = filters
        # the poller's cursor when it subscribed (it pushes what follows), or the head read
        # after, for a stream from now (streams.api_stream): what is not past it is skipped
        self.start = start
        self.queue: asyncio.Queue[list[Change] | None] = asyncio.Queue(maxsize=size)
        self.overflowed = False


class Hub:
    """The one poller behind every stream: it reads the rows after its cursor every
    `interval` seconds (one small query, however many pages are open) and puts each batch on
    every subscriber's queue.

    Runs on the event loop; the reads go to a worker thread with a cursor of their own. A
    subscriber whose queue is full (a page that stopped reading) is closed; its EventSource
    reconnects with Last-Event-ID and catches up from the database, exactly.
    """

    def __init__(
        self,
        cursors: Cursors,
        zones: ZoneCache,
        interval: float = 0.15,
        queue_size: int = 256,
    ) -> None:
        self.cursors = cursors
        self.zones = zones
        self.interval = interval
        self.queue_size = queue_size
        self.head = 0
        self.rows = 0  # rows at or below head: must only grow by the rows read after head
        self.subscribers: set[Subscriber] = set()
        self.polls = 0
        self.last_poll: float | None = None
        self.error: str | None = None
        self._closed = False
        self._wake: asyncio.Event | None = None

    def _start(self) -> tuple[int, int]:
        with reading(self.cursors) as con:
            top = head(con)
            n = con.execute("SELECT count(*) FROM findings WHERE id <= ?", [top]).fetchall()
            return top, int(n[0][0])

    async def start(self) -> None:
        """Take the database's head as the cursor to push from (the first read counts as a
        poll for /healthz)."""
        self.head, self.rows = await anyio.to_thread.run_sync(self._start)
        self.last_poll = time.time()

    def _read(self, after: int) -> tuple[list[Change], int]:
        with reading(self.cursors) as con:
            zone = self.zones.get(con)
            batch: list[Change] = []
            while True:
                more = changes(con, after, zone, limit=CHUNK)
                batch += more
                if len(more) < CHUNK:
                    break
                after = more[-1].cursor
            top = batch[-1].cursor if batch else after
            n = con.execute("SELECT count(*) FROM findings WHERE id <= ?", [top]).fetchall()
            return batch, int(n[0][0])

    async def poll(self) -> None:
        """Read what is new and push it: one step of `run`."""
        batch, rows = await anyio.to_thread.run_sync(self._read, self.head)
        self.polls += 1
        self.last_poll = time.time()
        if rows != self.rows + len(batch):
            # A row appeared below a cursor already handed out: findings were written by two
            # writers at once, and a client past that cursor will not see it.
            self.error = (
                f"{rows - self.rows - len(batch)} findings were stored below cursor "
                f"{self.head} after it was read: more than one writer of findings?"
            )
            log.error("board: %s", self.error)
        self.rows = rows
        if not batch:
            return
        self.head = batch[-1].cursor
        for sub in list(self.subscribers):
            try:
                sub.queue.put_nowait(batch)
            except asyncio.QueueFull:
                sub.overflowed = True
                self._end(sub)

    async def run(self) -> None:
        """Poll until closed; a failed read is logged and tried again. It ends by itself
        once closed (never cancelled mid-read: a read in its thread would outlive the
        cancellation and hold a cursor while the database is closed)."""
        self._wake = asyncio.Event()
        while not self._closed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
            if self._closed:
                return
            self._wake.clear()
            try:
                await self.poll()
            except Exception as e:  # a busy or briefly failing database must not end the board
                self.error = f"poll failed: {e}"
                log.exception("board: poll failed")
                await asyncio.sleep(1.0)

    def nudge(self) -> None:
        """Read now, not at the next interval: the writer just committed findings (`watch`
        says so after each commit that stored some). On the event loop: from another
        thread, through loop.call_soon_threadsafe (app.BoardServer.nudge).

        With no stream open nobody waits for the read: the interval's reads keep the head
        and the health check, and `watch` at real speed, which commits every poll, does not
        pay for a board nobody watches (a stream opened meanwhile reads its own start)."""
        if self._wake is not None and self.subscribers:
            self._wake.set()

    def subscribe(self, filters: Filter) -> Subscriber:
        sub = Subscriber(filters, self.head, self.queue_size)
        self.subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self.subscribers.discard(sub)

    def _end(self, sub: Subscriber) -> None:
        """Tell a stream to end now. Batches it has not sent are dropped, all of them: a
        stream must never send a batch after one it skipped, since its client resumes after
        the last event it got. Reconnecting, the client catches up from the database."""
        self.subscribers.discard(sub)
        while not sub.queue.empty():
            sub.queue.get_nowait()
        sub.queue.put_nowait(None)

    def close(self) -> None:
        """End every stream (the server is stopping; open streams would hold it up). On the
        event loop: from another thread, through loop.call_soon_threadsafe."""
        self._closed = True
        if self._wake is not None:
            self._wake.set()
        for sub in list(self.subscribers):
            self._end(sub)
