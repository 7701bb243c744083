"""The digests a piece's leaf carries (store/ledger.py): its event rows and its quarantined
rows, each hashed column by column in line order, so that a leaf per piece of a log file
covers every row it loaded without a leaf per row (docs/ledger.md says how to re-derive
them).

For each column, in the order the digest names them: a whole number as 8 bytes big-endian;
a text or bytes value as its length (4 bytes big-endian, -1 for NULL) in one stream and its
bytes in another. A column's part of the digest is SHA-256 of its first stream (and then of
its second); the digest is SHA-256 of those parts one after the other.

DuckDB's own sha256 is slow for this (about 95 MB/s on the 2-core bench machine, where
hashlib with the CPU's SHA extensions does 1.3 GB/s), so the rows come out as Arrow columns
and hashlib reads their buffers: no loop over rows in Python, one over pieces.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# The columns each digest covers. An event's other columns are read from its `raw` by
# ingest; `bacc-audit verify` reads them again and compares (ingest/reparse.py).
EVENT_DIGEST = ("line_no", "raw")
QUARANTINE_DIGEST = ("line_no", "reason", "raw", "raw_bytes")
DIGEST_FIELDS = ("events_stored", "events_sha256", "quarantine_stored", "quarantine_sha256")
BATCH_ROWS = 1_000_000  # rows of one query, held at once; a piece is never split
PARALLEL_ROWS = 100_000  # a batch of this many rows is hashed on threads (_Hashing)

# The events digest of a piece as ingest computed it while staging (ingest/stage.py), from
# the rows it had in hand: a seal takes it instead of reading the piece's events back
# (`verify` never does: it always digests the rows). A cache for the seal, not evidence.
STAGED = "ingest_digests"
STAGED_DDL = f"""
    CREATE TABLE IF NOT EXISTS {STAGED} (
      source_id BIGINT NOT NULL,
      start_byte BIGINT NOT NULL,
      end_byte BIGINT NOT NULL,
      events_stored BIGINT NOT NULL,
      events_sha256 VARCHAR NOT NULL
    )"""


@dataclass(frozen=True)
class Piece:
    source_id: int
    start_byte: int
    end_byte: int
    first_line: int
    last_line: int
    rows: int  # events + quarantined, as ingest counted them: the batch's size
    quarantined: int = -1  # as ingest counted them
    staged: tuple[int, str] | None = None  # events_stored, events_sha256 from ingest

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.source_id, self.start_byte, self.end_byte)


def pieces(con: duckdb.DuckDBPyConnection, where: str, staged: bool = False) -> list[Piece]:
    """The `source_extents` rows matching `where`, in the seal's order; `staged` (a seal):
    with the events digest ingest computed for each, where it did (STAGED)."""
    digest = f"LEFT JOIN {STAGED} d USING (source_id, start_byte, end_byte)" if staged else ""
    staged_cols = "d.events_stored, d.events_sha256" if staged else "NULL, NULL"
    return [
        Piece(int(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5] or 0),
              -1 if r[6] is None else int(r[6]),
              None if r[7] is None else (int(r[7]), str(r[8])))
        for r in con.execute(
            "SELECT source_id, start_byte, end_byte, first_line, last_line, "
            f"events + quarantined, quarantined, {staged_cols} "
            f"FROM (SELECT * FROM source_extents WHERE {where}) x {digest} "
            "ORDER BY source_id, start_byte, end_byte"
        ).fetchall()
    ]


def events_digest(chunks: Sequence[tuple[pa.Array, pa.Array]]) -> tuple[int, str]:
    """The events digest (EVENT_DIGEST) of rows given as (line_no, raw) arrays, in line
    order, chunk after chunk: what a seal would compute from the same rows in `events`."""
    # _Digest's arithmetic for these two columns, without its objects: a poll digests one
    # piece a file it read, hundreds at ten times speed.
    lines, lengths, text = hashlib.sha256(), hashlib.sha256(), hashlib.sha256()
    rows = 0
    for line_no, raw in chunks:
        rows += len(line_no)
        _whole_into(lines, line_no)
        _text_into(lengths, text, raw)
    return rows, hashlib.sha256(lines.digest() + lengths.digest() + text.digest()).hexdigest()


def record_staged(
    con: duckdb.DuckDBPyConnection, found: Sequence[tuple[int, int, int, int, str]]
) -> None:
    """Keep the events digests ingest computed: (source_id, start_byte, end_byte,
    events_stored, events_sha256) a piece, in the caller's transaction (with its rows)."""
    if not found:
        return
    cols = ("source_id", "start_byte", "end_byte", "events_stored", "events_sha256")
    if len(found) <= 64:  # a poll's few: one statement (whole numbers and hex digits only)
        con.execute(f"INSERT INTO {STAGED} VALUES " + ", ".join(
            f"({int(s)}, {int(a)}, {int(b)}, {int(n)}, '{bytes.fromhex(h).hex()}')"
            for s, a, b, n, h in found))
        return
    table = pa.table({
        c: pa.array([f[i] for f in found], pa.string() if i == 4 else pa.int64())
        for i, c in enumerate(cols)
    })
    con.register("new_digests", table)
    con.execute(f"INSERT INTO {STAGED} SELECT {', '.join(cols)} FROM new_digests")
    con.unregister("new_digests")


class _Column:
    """The running digest of one column of one piece."""

    def __init__(self) -> None:
        self.first = hashlib.sha256()
        self.second: hashlib._Hash | None = None

    def add(self, a: pa.Array) -> None:
        if pa.types.is_integer(a.type):
            _whole_into(self.first, a)
            return
        if self.second is None:
            self.second = hashlib.sha256()
        _text_into(self.first, self.second, a)

    def digest(self) -> bytes:
        out = self.first.digest()
        if self.second is not None:
            out += self.second.digest()
        return out


def _whole_into(digest: hashlib._Hash, a: pa.Array) -> None:
    """A whole-number column: each value as 8 bytes, big-endian."""
    if a.null_count:
        raise ValueError("a whole-number column of a digest holds NULL")
    digest.update(np.asarray(a, dtype=np.int64).astype(">i8").tobytes())


def _text_into(lengths: hashlib._Hash, text: hashlib._Hash, a: pa.Array) -> None:
    """A text column: each value's length as 4 bytes, big-endian (-1: NULL), into `lengths`;
    the values' bytes one after the other into `text`."""
    large = pa.types.is_large_string(a.type) or pa.types.is_large_binary(a.type)
    width = np.int64 if large else np.int32
    if len(a) == 0:
        return  # nothing in either stream
    if a.null_count:
        sizes = np.asarray(pc.fill_null(pc.binary_length(a), -1), dtype=np.int64)
        a = pc.fill_null(a, "" if pa.types.is_string(a.type) else b"")
    else:  # from the offsets: no compute call
        sizes = np.diff(np.frombuffer(a.buffers()[1], dtype=width)[a.offset:a.offset + len(a) + 1])
    lengths.update(sizes.astype(">i4").tobytes())
    offsets = np.frombuffer(a.buffers()[1], dtype=width)
    lo, hi = int(offsets[a.offset]), int(offsets[a.offset + len(a)])
    data = a.buffers()[2]
    if data is not None and hi > lo:
        text.update(memoryview(data)[lo:hi])


class _Digest:
    def __init__(self, columns: int, text: Sequence[bool]) -> None:
        self.rows = 0
        self.columns = [_Column() for _ in range(columns)]
        for col, is_text in zip(self.columns, text, strict=True):
            if is_text:  # an empty piece still has both streams of a text column
                col.second = hashlib.sha256()

    def hexdigest(self) -> str:
        return hashlib.sha256(b"".join(c.digest() for c in self.columns)).hexdigest()


def batches_digest(
    batches: Iterable[pa.RecordBatch], text: Sequence[bool]
) -> tuple[int, str]:
    """(rows, SHA-256) of the rows of `batches`, in their order, each column digested as a
    piece's are (the module's docstring); `text`: which columns are text."""
    d = _Digest(len(text), text)
    for rb in batches:
        d.rows += rb.num_rows
        for j, col in enumerate(d.columns):
            col.add(rb.column(j))
    return d.rows, d.hexdigest()


def _digest_rows(
    con: duckdb.DuckDBPyConnection,
    table: str,
    columns: Sequence[str],
    text: Sequence[bool],
    batch: Sequence[Piece],
    hashing: _Hashing | None = None,
) -> list[_Digest]:
    out = [_Digest(len(columns), text) for _ in batch]
    cols = ", ".join(f"t.{c}" for c in columns)
    sids = sorted({p.source_id for p in batch})
    lo_line = min(p.first_line for p in batch)
    hi_line = max(p.last_line for p in batch)
    # A plain scan (no join): the constant ranges let DuckDB skip the row groups of other
    # sources and older lines; the rows are given their piece here (np.searchsorted), and
    # put in line order here too, cheaper than DuckDB's sort.
    which_sources = (f"IN ({', '.join(map(str, sids))})" if len(sids) <= 512
                     else f"BETWEEN {sids[0]} AND {sids[-1]}")
    sql = (
        f"SELECT t.source_id, t.line_no AS _line, {cols} FROM {table} t "
        f"WHERE t.source_id {which_sources} AND t.line_no BETWEEN {lo_line} AND {hi_line}"
    )
    order = sorted(range(len(batch)), key=lambda i: (batch[i].source_id, batch[i].first_line))
    starts = np.array([(batch[i].source_id << 32) + batch[i].first_line for i in order],
                      dtype=np.int64)
    ends = np.array([(batch[i].source_id << 32) + batch[i].last_line for i in order],
                    dtype=np.int64)
    piece_of = np.array(order, dtype=np.int64)
    if sum(p.rows for p in batch) > BATCH_ROWS:  # one piece bigger than a batch: streamed
        for rb in con.sql(sql + " ORDER BY t.source_id, t.line_no").to_arrow_reader(
                BATCH_ROWS // 4):
            rb, which, _ = _placed(rb, starts, ends, piece_of)
            _add(out, rb, which)
        return out
    rows = con.sql(sql).to_arrow_table()
    if not rows.num_rows:
        return out
    if _add_runs(out, rows, starts, ends, piece_of, hashing):
        return out
    rb = pa.record_batch([rows.column(j).combine_chunks() for j in range(rows.num_columns)],
                         names=rows.column_names)
    rb, which, lines = _placed(rb, starts, ends, piece_of)
    if np.any(np.diff(which) < 0) or np.any((np.diff(lines) <= 0) & (np.diff(which) == 0)):
        at = np.lexsort((lines, which))
        rb, which = rb.take(pa.array(at)), which[at]
    _add(out, rb, which)
    return out


def _add_runs(
    out: list[_Digest], rows: pa.Table, starts: np.ndarray, ends: np.ndarray,
    piece_of: np.ndarray, hashing: _Hashing | None = None,
) -> bool:
    """The rows of `rows` (source_id, line, ...) into their pieces' digests without copying
    them: put in piece and line order, they fall into runs of consecutive rows of the scan
    (a piece is inserted in one go, so a run is about a piece), and each run's slice is
    digested where it lies. About a third less time than combining the scan's chunks and
    reordering the whole text column. False (nothing added) where the runs would be so
    many that a loop over them costs more than the copy. With `hashing`, the pieces are
    hashed there (on its threads, while the caller reads the next batch)."""
    key, at, inside = _in_pieces(rows.column(0), rows.column(1), starts, ends)
    pos = np.flatnonzero(inside)
    which = piece_of[at[pos]]
    lines = key[pos]
    if np.any(np.diff(which) < 0) or np.any((np.diff(lines) <= 0) & (np.diff(which) == 0)):
        order = np.lexsort((lines, which))
        pos, which = pos[order], which[order]
    cuts = np.flatnonzero((np.diff(which) != 0) | (np.diff(pos) != 1)) + 1
    if len(cuts) > max(64, len(pos) // 256):
        return False
    runs: dict[int, list[tuple[int, int]]] = {}  # piece -> its runs, in line order
    for s, e in zip(np.concatenate(([0], cuts)).tolist(),
                    np.concatenate((cuts, [len(pos)])).tolist(), strict=True):
        piece = int(which[s])
        out[piece].rows += e - s
        runs.setdefault(piece, []).append((int(pos[s]), e - s))
    tasks = [partial(_feed, out[piece], rows, its) for piece, its in runs.items()]
    if hashing is None:
        for task in tasks:
            task()
    else:
        hashing.run(tasks, len(pos))
    return True


def _feed(d: _Digest, rows: pa.Table, runs: list[tuple[int, int]]) -> None:
    """One piece's runs (first row, rows) of `rows` into its digest, in order."""
    for first, n in runs:
        for j, col in enumerate(d.columns):
            for chunk in rows.column(j + 2).slice(first, n).chunks:
                col.add(chunk)


class _Hashing:
    """Hashes a batch's pieces on two threads while the caller reads the next batch: DuckDB's
    read and hashlib's (of buffers over 2 KB) both let go of the GIL, and on the 10M-round
    day each took about half of the fast check's 74 s. One batch in flight at a time, so
    about one batch of rows more is held (up to BATCH_ROWS rows, ~200 MB of events)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._flying: list[Future[None]] = []

    def run(self, tasks: Sequence[Callable[[], None]], rows: int) -> None:
        self.wait()
        if rows < PARALLEL_ROWS:  # a poll's seal: threads cost more than they save
            for task in tasks:
                task()
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="digest")
        self._flying = [self._pool.submit(task) for task in tasks]

    def wait(self) -> None:
        flying, self._flying = self._flying, []
        for f in flying:
            f.result()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)


def _in_pieces(
    sid: pa.Array | pa.ChunkedArray, lines: pa.Array | pa.ChunkedArray | np.ndarray,
    starts: np.ndarray, ends: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's key (source << 32 | line), the index of the last piece starting at or
    before it, and whether it falls inside that piece."""
    key = (np.asarray(sid, dtype=np.int64) << 32) + np.asarray(lines, dtype=np.int64)
    at = np.searchsorted(starts, key, side="right") - 1
    return key, at, (at >= 0) & (key <= ends[np.maximum(at, 0)])


def _placed(
    rb: pa.RecordBatch, starts: np.ndarray, ends: np.ndarray, piece_of: np.ndarray
) -> tuple[pa.RecordBatch, np.ndarray, np.ndarray]:
    """The rows of `rb` (source_id, line, ...) that fall in a piece of the batch (other
    pieces of the same sources are not the batch's), with the index of each one's piece
    and its line."""
    lines = np.asarray(rb.column(1), dtype=np.int64)
    _, at, inside = _in_pieces(rb.column(0), lines, starts, ends)
    if not inside.all():
        keep = np.flatnonzero(inside)
        rb, at, lines = rb.take(pa.array(keep)), at[keep], lines[keep]
    return rb, piece_of[at], lines


def _add(out: list[_Digest], rb: pa.RecordBatch, which: np.ndarray) -> None:
    """Rows in piece and line order (source, line, the digest's columns) into their
    digests; `which`: each row's piece."""
    if not len(which):
        return
    cuts = np.flatnonzero(np.diff(which)) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [len(which)]))
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        d = out[int(which[s])]
        d.rows += e - s
        for j, col in enumerate(d.columns):
            col.add(rb.column(j + 2).slice(s, e - s))


def _events(
    con: duckdb.DuckDBPyConnection, batch: Sequence[Piece], hashing: _Hashing | None = None
) -> list[_Digest]:
    """The events digests of `batch`: as ingest staged them where it did, else read."""
    read = [p for p in batch if p.staged is None]
    got = iter(_digest_rows(con, "events", EVENT_DIGEST, (False, True), read, hashing)
               if read else [])
    return [next(got) if p.staged is None else _Staged(*p.staged) for p in batch]


class _Staged(_Digest):
    """A digest ingest computed (`Piece.staged`), as `digests` gives it."""

    def __init__(self, rows: int, sha256: str) -> None:
        self.rows = rows
        self.sha256 = sha256

    def hexdigest(self) -> str:
        return self.sha256


def digests(
    con: duckdb.DuckDBPyConnection, found: Sequence[Piece], counted: bool = False
) -> pa.Table:
    """The digests of `found` (DIGEST_FIELDS), keyed by (source_id, start_byte, end_byte).

    `counted` (a seal): pieces ingest counted no quarantined line in are not looked for in
    `quarantine` (the digest of no rows). A row added there before the seal is then not
    sealed but found by `verify`, which always reads the rows."""
    rows: list[tuple[Piece, _Digest, _Digest]] = []
    batch: list[Piece] = []
    size = 0
    hashing = _Hashing()

    def flush() -> None:
        if not batch:
            return
        ev = _events(con, batch, hashing)
        text = (False, True, True, True)
        if counted and all(p.quarantined == 0 for p in batch):
            qu = [_Digest(len(QUARANTINE_DIGEST), text) for _ in batch]
        else:
            qu = _digest_rows(con, "quarantine", QUARANTINE_DIGEST, text, batch)
        rows.extend(zip(batch, ev, qu, strict=True))
        batch.clear()

    try:
        for p in found:
            if batch and size + p.rows > BATCH_ROWS:
                flush()
                size = 0
            batch.append(p)
            size += p.rows if p.staged is None else max(p.quarantined, 0)
        flush()
    finally:
        hashing.close()  # every digest complete (or the first failure raised)
    return pa.table({
        "source_id": pa.array([p.source_id for p, _, _ in rows], pa.int64()),
        "start_byte": pa.array([p.start_byte for p, _, _ in rows], pa.int64()),
        "end_byte": pa.array([p.end_byte for p, _, _ in rows], pa.int64()),
        "events_stored": pa.array([e.rows for _, e, _ in rows], pa.int64()),
        "events_sha256": pa.array([e.hexdigest() for _, e, _ in rows], pa.string()),
        "quarantine_stored": pa.array([q.rows for _, _, q in rows], pa.int64()),
        "quarantine_sha256": pa.array([q.hexdigest() for _, _, q in rows], pa.string()),
    })


def digests_sql(table: pa.Table) -> str:
    """`digests`' rows as SQL (VALUES), for a seal of a few pieces."""
    cols = ("source_id", "start_byte", "end_byte", *DIGEST_FIELDS)
    rows = ", ".join(
        "(" + ", ".join(str(int(r[c])) if isinstance(r[c], int) else f"'{r[c]}'"
                        for c in cols) + ")"
        for r in table.to_pylist()
    )
    return f"(SELECT * FROM (VALUES {rows}) AS d({', '.join(cols)}))"


def fill_digests(con: duckdb.DuckDBPyConnection, table: pa.Table) -> None:
    """Temp table `piece_digests`, which store/ledger.records_sql joins a piece's row with."""
    fill_table(con, "piece_digests", table)


def fill_table(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    """Temp table `name` holding `table`: registered where the connection is DuckDB's own,
    else (a command served by the database's owner, store/shared.py) sent as values."""
    con.execute(f"DROP TABLE IF EXISTS {name}")
    try:
        con.register(f"{name}_arrow", table)
    except duckdb.NotImplementedException:
        kinds = {f.name: "BIGINT" if pa.types.is_integer(f.type) else "VARCHAR"
                 for f in table.schema}
        con.execute(f"CREATE TEMP TABLE {name} ("
                    + ", ".join(f'"{n}" {t}' for n, t in kinds.items()) + ")")
        values = table.to_pylist()
        for i in range(0, len(values), 500):
            chunk = values[i:i + 500]
            marks = ", ".join("(" + ", ".join("?" * len(kinds)) + ")" for _ in chunk)
            con.execute(f"INSERT INTO {name} VALUES {marks}",
                        [r[n] for r in chunk for n in kinds])
        return
    try:
        con.execute(f"CREATE TEMP TABLE {name} AS SELECT * FROM {name}_arrow")
    finally:
        con.unregister(f"{name}_arrow")
