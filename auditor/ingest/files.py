"""Load table event logs (event log v1, JSONL or JSONL.gz) into the audit database.

Each file is one transaction: its good lines become events, its bad lines go to quarantine
with the reason, and its hash goes to the sources manifest. Lines are split in Python (a few
vectorised numpy calls) and handed to DuckDB as Arrow, where `auditor.ingest.validate` checks them
all in one SELECT.

A file may be offered while it still grows (auditor.ingest.growing): what it holds beyond the
piece already ingested from it is loaded as a piece of its own, whatever its name is now, and a
last line without its newline waits for it. Only a change to bytes already ingested is
`log.altered`.
"""

from __future__ import annotations

import codecs
import datetime as dt
import gzip
import hashlib
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import duckdb
import numpy as np
import pyarrow as pa

from auditor.errors import UserError
from auditor.ingest import fast
from auditor.ingest.growing import (
    Changed,
    Digest,
    Layout,
    Piece,
    Tip,
    byte_before,
    digest_of,
    first_line_after,
    hash_objects_at,
    layout_of,
    path_record,
    record_pieces,
    tips,
)
from auditor.ingest.validate import names_its_event_sql, staging_select
from auditor.store import findings
from auditor.store.db import one, single
from auditor.store.events import FIELDS

SUFFIXES = (".jsonl", ".jsonl.gz")
GZIP_MAGIC = b"\x1f\x8b"
CHUNK_BYTES = 64 << 20
SMALL_FILE = 16 << 20  # files below this are validated together (see `ingest`)
# Hostile input must not take memory with it (README, "What ingest guarantees"). No event
# comes near a kilobyte, so a line over MAX_LINE_BYTES is streamed through and quarantined as
# its length, SHA-256 and first LONG_LINE_HEAD bytes.
MAX_LINE_BYTES = 1 << 20
LONG_LINE_HEAD = 4096
# A .jsonl.gz may inflate to MAX_INFLATE_RATIO times its size on disk (real logs: about 15),
# always to INFLATE_FLOOR, never past MAX_INFLATED; beyond that it is refused while reading.
MAX_INFLATE_RATIO = 100
INFLATE_FLOOR = 64 << 20
MAX_INFLATED = 16 << 30
BATCH_ROWS = 1 << 16
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

INSERT_SOURCE = (
    "INSERT INTO sources (id, path, sha256, size, lines, events, quarantined, duplicates, "
    "first_ts, last_ts, ingested_at, run_id, status, note) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now(), ?, 'ingested', ?)"
)

Progress = Callable[[Path, int], None]  # (file, bytes of it read so far)


@dataclass
class FileResult:
    """What happened to one file; `status` is ingested, already_ingested, refused_altered,
    unreadable, empty, or waiting (its only line has no newline yet: nothing to load)."""

    path: Path
    status: str
    sha256: str = ""
    size: int = 0
    lines: int = 0
    events: int = 0
    quarantined: int = 0
    duplicates: int = 0
    message: str = ""
    # A file refused as altered: when the events it concerns happened (the ingested event
    # that the first differing line would change), so its log.altered finding is dated there.
    concerns: dt.datetime | None = None
    per_stream: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # one sentence per quarantined line
    # The piece of the file loaded, bytes and lines counted from the file's start (`lines`
    # counts the piece's). Already ingested: end_byte and last_line of the last piece loaded
    # before, and first_line the line a next piece would start at.
    source_id: int | None = None
    file_id: int | None = None  # the file, whatever its name (source_files.id)
    start_byte: int = 0
    end_byte: int = 0
    first_line: int = 1
    last_line: int = 0
    waiting: int = 0  # bytes of a last line without its newline, left for later
    # The running SHA-256 of the file's first end_byte bytes, for a follower to extend.
    prefix_hash: Any = field(default=None, repr=False, compare=False)

    def summary(self) -> dict[str, Any]:
        """What `ingest --json` (and the run's record) says of the file."""
        return {
            "path": escape_path(self.path),
            "status": self.status,
            "sha256": self.sha256,
            "lines": self.lines,
            "events": self.events,
            "quarantined": self.quarantined,
            "duplicates": self.duplicates,
            "message": self.message,
            "problems": self.problems,
        }


@dataclass
class IngestResult:
    run_id: int
    files: list[FileResult]
    errors: list[str] = field(default_factory=list)  # paths that gave no file

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def events(self) -> int:
        return sum(f.events for f in self.files)

    @property
    def quarantined(self) -> int:
        return sum(f.quarantined for f in self.files)


_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNESCAPES = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPE_RE = re.compile(r"\\(?:([\\nrt])|x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8}))")


def escape_path(path: Path | str) -> str:
    """A path as messages show it and the `sources` manifest records it: one line of UTF-8.

    A POSIX file name is bytes. Bytes that are not UTF-8 (Python keeps them as the surrogates
    U+DC80-U+DCFF) become `\\xNN`, control and other unprintable characters `\\n`, `\\r`,
    `\\t`, `\\xNN` (below U+0080) or `\\uNNNN`, and a backslash `\\\\`; so every problem stays
    one line, the database can store the name, and `unescape_path` gives the exact name back.
    """
    text = str(path)
    if text.isprintable() and "\\" not in text:
        return text
    out = []
    for ch in text:
        o = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif o < 0x80:
            out.append(f"\\x{o:02x}")
        elif 0xDC80 <= o <= 0xDCFF:  # an undecodable byte of the name
            out.append(f"\\x{o - 0xDC00:02x}")
        elif o <= 0xFFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    return "".join(out)


def unescape_path(text: str) -> Path:
    """The path `escape_path` showed as `text` (`os.fsencode` of it gives the name's bytes)."""

    def one(m: re.Match[str]) -> str:
        short, byte, u4, u8 = m.groups()
        if short:
            return _UNESCAPES[short]
        if byte:
            n = int(byte, 16)
            return chr(n if n < 0x80 else 0xDC00 + n)
        return chr(int(u4 or u8, 16))

    return Path(_ESCAPE_RE.sub(one, text))


_C0 = re.compile("[\x00-\x1f]")


def _one_line(text: str) -> str:
    """A reason as one line. The reasons quote values as JSON, which escapes these already;
    this is the backstop (C0 controls only: they are what break lines and drive terminals)."""
    return _C0.sub(lambda m: _ESCAPES.get(m[0]) or f"\\x{ord(m[0]):02x}", text)


def discover(paths: Sequence[Path | str]) -> tuple[list[Path], list[str]]:
    """Expand directories (recursively) to their log files.

    Returns the files and one sentence per path that gave none, so the good paths still load.
    """
    found: list[Path] = []
    errors: list[str] = []
    for p in map(Path, paths):
        if not p.exists():
            errors.append(f"{escape_path(p)}: no such file or directory")
        elif p.is_dir():
            logs = sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(SUFFIXES))
            if logs:
                found.extend(logs)
            else:
                errors.append(
                    f"{escape_path(p)}: nothing to ingest (no .jsonl or .jsonl.gz files in it)"
                )
        else:
            found.append(p)
    unique: dict[Path, Path] = {}
    for f in found:
        unique.setdefault(f.resolve(), f)
    return list(unique.values()), errors


def sha256_of(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
            size += len(block)
    return h.hexdigest(), size


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(2) == GZIP_MAGIC


class LongLine(NamedTuple):
    """A line over MAX_LINE_BYTES, streamed through: what quarantine keeps of it."""

    line_no: int
    length: int  # bytes, without the newline that ends it
    sha256: str
    head: bytes  # its first LONG_LINE_HEAD bytes
    limit: int

    @property
    def reason(self) -> str:
        return (
            f"line too long: {self.length:,} bytes, over the limit of {self.limit:,} "
            f"(sha256 {self.sha256}); only its first {len(self.head):,} bytes are kept"
        )

    @property
    def raw(self) -> str:
        """The head as text (a character cut in two at its end is left out)."""
        return codecs.getincrementaldecoder("utf-8")("replace").decode(self.head, final=False)


class Block(NamedTuple):
    """Whole lines of a file, as `lines_table` takes them."""

    data: bytes  # a line over MAX_LINE_BYTES stands here as an empty line
    read: int  # bytes of the file read so far (compressed ones for a .gz: for progress)
    first_line: int  # the number of the first line of `data`
    long_lines: tuple[LongLine, ...]


class _LongLineReader:
    """A line found to be over the limit, fed piece by piece: only hash, length and head."""

    def __init__(self, start: bytes) -> None:
        self.hash = hashlib.sha256(start)
        self.length = len(start)
        self.head = start[:LONG_LINE_HEAD]

    def feed(self, piece: bytes | memoryview) -> None:
        self.hash.update(piece)
        self.length += len(piece)
        if len(self.head) < LONG_LINE_HEAD:
            self.head += bytes(piece[: LONG_LINE_HEAD - len(self.head)])

    def done(self, line_no: int) -> LongLine:
        return LongLine(line_no, self.length, self.hash.hexdigest(), self.head, MAX_LINE_BYTES)


def inflation_cap(compressed_size: int) -> int:
    """The most a gzip file of this size may inflate to before it is refused as a bomb."""
    return min(MAX_INFLATED, max(INFLATE_FLOOR, MAX_INFLATE_RATIO * compressed_size))


def _size_text(n: int) -> str:
    """A limit as people write it: 64 MiB, 16 GiB."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n:,} bytes"


def iter_blocks(
    path: Path,
    chunk_bytes: int | None = None,
    start: int = 0,
    end: int | None = None,
    first_line: int = 1,
) -> Iterator[Block]:
    """Blocks of whole lines, read `chunk_bytes` at a time, so that memory stays flat whatever
    the file holds: a gzip file is refused (UserError) as soon as it inflates past
    `inflation_cap`, and a line over MAX_LINE_BYTES is never held whole (`LongLine`).

    A piece of a plain file: bytes `start` to `end`, its first line numbered `first_line`
    (a gzip file is always read whole). A file that no longer holds them is a UserError."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    gz = _is_gzip(path)
    shown = escape_path(path)
    if path.name.endswith(".gz") and not gz:
        raise UserError(f"{shown}: not a gzip file (it does not start with the gzip signature)")
    if gz and (start or end is not None):
        raise AssertionError("a gzip file is read whole")
    with path.open("rb") as raw_fh:
        size = os.fstat(raw_fh.fileno()).st_size
        cap = inflation_cap(size) if gz else None
        fh = gzip.GzipFile(fileobj=raw_fh, mode="rb") if gz else raw_fh
        inflated = 0
        if start:
            raw_fh.seek(start)
        left = None if end is None else end - start

        def read() -> bytes:
            nonlocal inflated, left
            n = chunk_bytes if left is None else min(chunk_bytes, left)
            if n <= 0:
                return b""
            try:
                data = fh.read(n)
            except (OSError, EOFError, zlib.error) as e:
                raise UserError(f"{shown}: corrupt gzip data ({e})") from None
            if left is not None:
                left -= len(data)
                if not data:
                    raise UserError(f"{shown}: changed while it was being read (it shrank)")
            inflated += len(data)
            if cap is not None and inflated > cap:
                raise UserError(
                    f"{shown}: not loaded: it decompresses to more than {cap:,} bytes, the "
                    f"limit for a gzip file of {size:,} bytes ({MAX_INFLATE_RATIO} times its "
                    f"size, at least {_size_text(INFLATE_FLOOR)}, at most "
                    f"{_size_text(MAX_INFLATED)}); it may be a decompression bomb, and nothing "
                    "of it was loaded"
                )
            return data

        # A UTF-8 byte order mark is not part of the first line (read enough to see).
        data = read()
        if not start:
            while len(data) < 3 and (more := read()):
                data += more
            if data.startswith(b"\xef\xbb\xbf"):
                data = data[3:] or read()
        yield from _split(data, read, raw_fh.tell, first_line)


def _split(
    data: bytes, read: Callable[[], bytes], where: Callable[[], int], first_line: int = 1
) -> Iterator[Block]:
    """Cut what `read` gives (starting with `data`) into blocks that end at a line's end."""
    limit = MAX_LINE_BYTES
    line_no = first_line  # of the next line not yet in a block
    rest = b""  # the start of a line still open, at most `limit` bytes
    long: _LongLineReader | None = None  # or a line still open that is over the limit
    while True:
        eof = not data
        found: list[LongLine] = []
        start = b""
        if long is not None:
            nl = data.find(b"\n")
            if nl < 0 and not eof:
                long.feed(data)
                data = read()
                continue
            end = nl if nl >= 0 else len(data)
            long.feed(memoryview(data)[:end])
            found.append(long.done(line_no))
            long = None
            start = b"\n"  # the long line's place, so the line numbers after it hold
            data = data[end + 1 :]
        if rest:
            data = rest + data
        if eof:
            whole, rest = data, b""
        else:
            cut = data.rfind(b"\n") + 1
            whole, rest = data[:cut], data[cut:]
            if len(rest) > limit:
                long, rest = _LongLineReader(rest), b""
        whole, inner = _cut_long_lines(whole, line_no + len(start), limit)
        block = start + whole if start else whole
        if block:
            yield Block(block, where(), line_no, (*found, *inner))
            line_no += block.count(b"\n") + int(not block.endswith(b"\n"))
        if eof:
            return
        data = read()


def _cut_long_lines(block: bytes, first_line: int, limit: int) -> tuple[bytes, list[LongLine]]:
    """`block` with each line over `limit` bytes replaced by an empty line, and those lines.

    Cheap when there are none, as nearly always: a line over `limit` bytes covers a whole
    aligned window of limit // 2 bytes, so only a window without a newline calls for the
    exact look."""
    step = max(limit // 2, 1)
    if len(block) <= limit or all(
        block.find(b"\n", i, i + step) >= 0 for i in range(0, len(block) - step + 1, step)
    ):
        return block, []
    nl = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
    starts = np.concatenate(([0], nl + 1))
    ends = np.append(nl, len(block))
    over = np.flatnonzero(ends - starts > limit).tolist()
    if not over:
        return block, []
    view = memoryview(block)
    parts: list[bytes | memoryview] = []
    found: list[LongLine] = []
    pos = 0
    for i in over:
        s, e = int(starts[i]), int(ends[i])
        head = min(s + LONG_LINE_HEAD, e)
        reader = _LongLineReader(bytes(view[s:head]))
        reader.feed(view[head:e])
        found.append(reader.done(first_line + i))
        parts += [view[pos:s], b"\n"]
        pos = e + 1
    parts.append(view[pos:])
    return b"".join(parts), found


def line_ends(block: bytes) -> np.ndarray:
    """The offset just past each line of `block` (its newline, or the end of the block).
    Found 4 MB at a time: a fresh 64 MB temporary costs more in page faults than the work."""
    whole = np.frombuffer(block, dtype=np.uint8)
    step = 4 << 20
    parts = [np.flatnonzero(whole[lo : lo + step] == 10) + (lo + 1)
             for lo in range(0, len(whole), step)]
    ends = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if len(block) and block[-1:] != b"\n":
        ends = np.append(ends, len(block))
    return ends


def lines_table(
    block: bytes, ends: np.ndarray, first_line_no: int
) -> tuple[pa.Table, bytes, np.ndarray]:
    """An Arrow table (line_no, line, utf8_ok, raw_bytes) over `block` without copying the
    text; `raw_bytes` holds a line's own bytes where they are not UTF-8 (`line` shows them
    as U+FFFD), else null. With it, the block as that text and the text's line ends."""
    utf8_ok = True
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        utf8_ok = False
    n = len(ends)
    if utf8_ok:
        ok = np.ones(n, dtype=bool)
        kept = pa.nulls(n, pa.binary())
    else:
        ok, block, originals = _mend_utf8(block, ends)
        kept = pa.array(originals, pa.binary())
        ends = line_ends(block)
    offsets = np.zeros(n + 1, dtype=np.int64)
    offsets[1:] = ends
    lines = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(block))
    table = pa.table(
        {
            "line_no": np.arange(first_line_no, first_line_no + n, dtype=np.int64),
            "line": lines,
            "utf8_ok": ok,
            "raw_bytes": kept,
        }
    )
    batches = table.to_batches(max_chunksize=BATCH_ROWS)
    return pa.Table.from_batches(batches, table.schema), block, ends


class Rows(NamedTuple):
    """A block's lines as the two paths take them: `typed`, accepted by the fast path
    (`auditor.ingest.fast`), and `lines`, left to the per-line check (`lines_table` rows)."""

    typed: pa.Table | None
    lines: pa.Table | None
    n_lines: int  # lines in the block, blank ones included


def read_rows(block: bytes, first_line_no: int) -> Rows:
    """A block's lines, split between the fast path and the per-line path; a line that is
    not UTF-8 always takes the per-line path, which quarantines it with its bytes."""
    lines, text, ends = lines_table(block, line_ends(block), first_line_no)
    if not fast.ENABLED:
        return Rows(None, lines, len(ends))
    bad = np.flatnonzero(~lines.column("utf8_ok").to_numpy())
    split = fast.split_block(text, ends, first_line_no, bad)
    slow = lines.take(pa.array(split.slow)) if len(split.slow) else None
    return Rows(split.typed, slow, len(ends))


def _read_ahead(blocks: Iterator[Block]) -> Iterator[tuple[Block, Rows]]:
    """Each block with its rows, the next one read (parsed, checked) in a second thread
    while the caller loads this one: both cores stay busy, since pyarrow and DuckDB let go
    of the GIL while they work. At most two blocks are held."""

    def read(b: Block) -> tuple[Block, Rows]:
        return b, read_rows(b.data, b.first_line)

    with ThreadPoolExecutor(1, thread_name_prefix="ingest-read") as pool:
        ahead: Future[tuple[Block, Rows]] | None = None
        for b in blocks:
            nxt = pool.submit(read, b)
            if ahead is not None:
                yield ahead.result()
            ahead = nxt
        if ahead is not None:
            yield ahead.result()


def _insert_rows(
    con: duckdb.DuckDBPyConnection,
    rows: Sequence[Rows],
    source_id: int | None = None,
    table: str = "events",
) -> None:
    """Every row into `events` (the per-line path's with their reason in `rejected`), or into
    `table`, a temporary table of its columns; the tables carry a source_id column unless
    `source_id` is given."""
    sid = "source_id" if source_id is None else str(int(source_id))
    cols = ", ".join((*EVENT_COLUMNS, "rejected"))
    typed = [r.typed for r in rows if r.typed is not None]
    if typed:
        con.register("typed_chunk", pa.concat_tables(typed))
        select = fast.typed_select("typed_chunk", sid)
        con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM ({select})")
        con.unregister("typed_chunk")
    slow = [r.lines for r in rows if r.lines is not None and r.lines.num_rows]
    if slow:
        chunk = pa.concat_tables(slow)
        con.register("chunk", chunk)
        select = staging_select("chunk", sid)
        con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM ({select})")
        con.unregister("chunk")
        _keep_bytes(con, [chunk], source_id)


def _mend_utf8(
    block: bytes, ends: np.ndarray
) -> tuple[np.ndarray, bytes, list[bytes | None]]:
    """Mark lines that are not UTF-8 and replace their bad bytes, so the rest can load; the
    bytes they had are given back (without the line ending, as `raw` is kept) for quarantine."""
    ok = np.ones(len(ends), dtype=bool)
    parts: list[bytes] = []
    originals: list[bytes | None] = [None] * len(ends)
    start = 0
    for i, end in enumerate(ends.tolist()):
        line = block[start:end]
        try:
            line.decode("utf-8")
            parts.append(line)
        except UnicodeDecodeError:
            ok[i] = False
            originals[i] = line.rstrip(b"\r\n")
            parts.append(line.decode("utf-8", errors="replace").encode("utf-8"))
        start = end
    return ok, b"".join(parts), originals


def ingest(
    con: duckdb.DuckDBPyConnection,
    paths: Sequence[Path | str],
    run_id: int,
    progress: Progress | None = None,
) -> IngestResult:
    """Ingest every log file under `paths`; one file's failure does not stop the others.

    Files under SMALL_FILE bytes of text (decompressed) are read together, up to
    `CHUNK_BYTES` at a time, in one transaction (a statement has a fixed cost that
    thousands of table files a day would otherwise pay one by one), the next batch read
    while this one loads; bigger files load alone, each in its own. A file that grew since
    a piece of it was ingested loads only what follows that piece (`_offer`)."""
    files, errors = discover(paths)
    results: list[FileResult] = []
    batch: list[_Offer] = []
    batch_bytes = 0

    # The hashes, paths and file identities of the batches not yet committed.
    held: set[str] = set()
    pending: Future[_Prepared] | None = None

    def flush(wait: bool = False) -> None:
        """Hand the batch to the reader thread and commit the one before it, which was read
        meanwhile; with `wait`, commit this one too (before a file that must see it)."""
        nonlocal batch_bytes, pending
        ready = pending
        pending = reader.submit(_prepare_batch, list(batch), progress) if batch else None
        batch.clear()
        batch_bytes = 0
        if ready is not None:
            results.extend(_store_batch(con, ready.result(), run_id, progress))
        if wait and pending is not None:
            ready, pending = pending, None
            results.extend(_store_batch(con, ready.result(), run_id, progress))
        ready = None
        pa.default_memory_pool().release_unused()  # give back what the batch held
        if pending is None:
            held.clear()

    with (
        ThreadPoolExecutor(1, thread_name_prefix="ingest-hash") as hasher,
        ThreadPoolExecutor(1, thread_name_prefix="ingest-read") as reader,
    ):
        ahead = _HashAhead(files, hasher)
        for i, f in enumerate(files):
            try:
                offer = _offer(con, f, run_id, ahead.scan(i), hasher)
                if isinstance(offer, FileResult):
                    results.append(offer)
                    continue
                text_bytes = offer.text_size
                if text_bytes >= SMALL_FILE:
                    flush(wait=True)
                    results.append(_ingest_alone(con, offer, run_id, progress))
                else:
                    keys = offer.keys()
                    if keys & held:
                        # An earlier copy or piece of it must be committed first; then it is
                        # judged again against that.
                        flush(wait=True)
                        results.append(ingest_file(con, f, run_id, progress))
                        continue
                    batch.append(offer)
                    held.update(keys)
                    batch_bytes += text_bytes
                    if batch_bytes >= CHUNK_BYTES:
                        flush()
            except UserError as e:
                results.append(FileResult(f, "unreadable", message=str(e)))
        flush(wait=True)
    order = {f: i for i, f in enumerate(files)}
    results.sort(key=lambda r: order.get(r.path, len(order)))
    return IngestResult(run_id, results, errors)


Scan = tuple[Layout, Digest]


def scan_file(path: Path) -> Scan:
    """A file's layout and hashes (auditor.ingest.growing): no database, so it runs ahead in
    another thread."""
    layout = layout_of(path, MAX_LINE_BYTES)
    return layout, digest_of(path, layout)


class _HashAhead:
    """The SHA-256 of the next small files, computed in a second thread while this one loads
    (hashlib lets go of the GIL). A big file is hashed while it loads instead (`_offer`)."""

    AHEAD = 8

    def __init__(self, files: list[Path], hasher: ThreadPoolExecutor) -> None:
        self.files = files
        self.hasher = hasher
        self.pending: dict[int, Future[Scan]] = {}

    def scan(self, i: int) -> Future[Scan] | None:
        for k in range(i + 1, min(i + 1 + self.AHEAD, len(self.files))):
            if k not in self.pending and _size(self.files[k]) < SMALL_FILE:
                self.pending[k] = self.hasher.submit(scan_file, self.files[k])
        return self.pending.pop(i, None)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return SMALL_FILE  # not hashed ahead: `_offer` says why it cannot be read


@dataclass
class _Offer:
    """A file, or the piece of it after `continues`, that passed the manifest checks and is to
    be loaded: bytes `start` to `layout.end`, lines from `first_line`. Its hashes may still be
    computing (`digest`): only once they are known is the file's row written.

    `known`: sources ingested before from this path, of which it is not a continuation. If it
    shares an event with them, its bytes ingested under that name changed: `altered`."""

    path: Path
    resolved: str
    layout: Layout
    digest: Future[Digest] | Digest
    start: int = 0
    first_line: int = 1
    continues: Tip | None = None
    known: tuple[int, ...] = ()
    altered: str = ""

    @property
    def size(self) -> int:
        return self.layout.size

    @property
    def end(self) -> int:
        return self.layout.end

    @property
    def file_id(self) -> int | None:
        return self.continues.file_id if self.continues else None

    @property
    def text_size(self) -> int:
        """Bytes of text to read, to decide whether it is small (see `_text_size`)."""
        if self.layout.gz:
            return _text_size(self.path, self.size)
        return self.end - self.start

    def hashes(self) -> Digest:
        if isinstance(self.digest, Digest):
            return self.digest
        try:
            d = self.digest.result()
        except OSError as e:
            raise UserError(f"{escape_path(self.path)}: cannot read ({e.strerror})") from None
        except Changed:
            raise UserError(f"{escape_path(self.path)}: changed while it was being read") from None
        self.digest = d
        return d

    @property
    def sha(self) -> str:
        return self.hashes().sha256

    @property
    def prefix_sha(self) -> str:
        return self.hashes().prefix_sha256

    @property
    def file_key(self) -> str:
        """What names the file in a log.malformed fingerprint (see _record_malformed)."""
        return self.layout.head or self.prefix_sha

    def keys(self) -> set[str]:
        """What two offers of one batch must not share: the same bytes, path or file."""
        keys = {self.sha, self.resolved}
        if self.layout.head:
            keys.add(f"head:{self.layout.head}")
        if self.continues:
            keys.add(f"file:{self.continues.file_id}")
        return keys

    def piece(self, source_id: int, last_line: int, counts: tuple[int, int, int]) -> Piece:
        """The row of `source_extents` for this piece, loaded as `source_id`."""
        events, quarantined, duplicates = counts
        return Piece(
            source_id, self.file_id or source_id, self.resolved, self.start, self.end,
            self.first_line, last_line, self.prefix_sha, events, quarantined, duplicates,
            self.layout.waiting, self.layout.device, self.layout.inode, self.layout.head,
            new_file=self.continues is None,
        )

    def note(self, last_line: int) -> str:
        """The manifest's note: what this piece continues, and a line that waits."""
        parts = []
        if self.continues:
            t = self.continues
            parts.append(
                f"continues {t.path} (source {t.source_id}) from byte {self.start:,}, line "
                f"{self.first_line:,}"
            )
        if self.layout.waiting:
            parts.append(_waits(last_line + 1, self.layout.waiting))
        return "; ".join(parts)

    def result(self, source_id: int, last_line: int, **kw: Any) -> FileResult:
        """The result of loading it (the counts and message given in `kw`)."""
        return FileResult(
            self.path, "ingested", self.sha, self.size, last_line - self.first_line + 1,
            source_id=source_id, file_id=self.file_id or source_id, start_byte=self.start,
            end_byte=self.end, first_line=self.first_line, last_line=last_line,
            waiting=self.layout.waiting, prefix_hash=self.hashes().prefix.copy(), **kw,
        )

    def told(self, last_line: int) -> str:
        """What the summary adds to "N events, M quarantined": where the piece starts, and
        the line that waits."""
        out = ""
        if self.continues:
            t = self.continues
            where = "" if t.path == self.resolved else f" as {t.path}"
            out += (
                f"; continued from line {self.first_line:,} (the lines before it were "
                f"ingested{where} already)"
            )
        if self.layout.waiting:
            out += "; " + _waits(last_line + 1, self.layout.waiting)
        return out


def _waits(line_no: int, nbytes: int) -> str:
    return (
        f"line {line_no:,} has no newline yet ({nbytes:,} bytes so far): it waits for its "
        "newline and loads when the file is offered again"
    )


def _offer(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    run_id: int,
    scan: Future[Scan] | None = None,
    hasher: ThreadPoolExecutor | None = None,
) -> _Offer | FileResult:
    """Check a file against the manifest; already ingested, or altered since, end here.

    - its whole SHA-256 is that of a file ingested, or it still starts with all that was
      ingested from a file (found by its first line, or its path) and holds no complete line
      more: already ingested;
    - it starts with all that was ingested from a file and has more: the piece after that,
      under whatever name it has now (a file that grew, was renamed, was rotated);
    - it is smaller than what was ingested from this path, and the same file (device and
      inode): truncated in place, refused as altered;
    - otherwise a new file; if this path was ingested before, sharing any event with what was
      ingested from it means those bytes changed, which `_load` refuses as altered (a new file
      under an old name shares none).

    `scan` is the file's layout and hashes being computed ahead. A file that no ingested file
    can equal, continue or be an earlier version of is loaded while `hasher` computes its
    hash, if given."""
    resolved = escape_path(path.resolve())
    shown = escape_path(path)
    try:
        if scan is not None:
            layout, digest = scan.result()
        else:
            layout = layout_of(path, MAX_LINE_BYTES)
            if (
                hasher is not None
                and layout.size >= SMALL_FILE
                and _new_to_the_manifest(con, layout, resolved)
                and not _inflates_to_nothing(path)
            ):
                return _Offer(path, resolved, layout, hasher.submit(digest_of, path, layout))
            digest = digest_of(path, layout)
    except OSError as e:
        return FileResult(path, "unreadable", message=f"{shown}: cannot read ({e.strerror})")
    except Changed:
        return FileResult(path, "unreadable", message=f"{shown}: changed while it was being read")
    sha, size = digest.sha256, layout.size
    # The sources ingested from this path before, and the first with the same bytes.
    rows = con.execute(
        "SELECT id, path, sha256, ingested_at FROM sources WHERE status = 'ingested' "
        "AND (path = ? OR sha256 = ?) ORDER BY id",
        [resolved, sha],
    ).fetchall()
    known = tuple(r[0] for r in rows if r[1] == resolved)
    same = next(((r[1], r[3]) for r in rows if r[2] == sha), None)
    if size == 0 or _inflates_to_nothing(path):
        return _empty(con, path, resolved, sha, layout, known, run_id)
    grown = None if layout.gz else _continued(path, layout, digest, tips(con, layout.head, known))
    if same or (grown and grown[0].end >= layout.end):
        return _already(path, resolved, layout, sha, same, grown)
    if grown:
        tip, first_line, _ = grown
        return _Offer(path, resolved, layout, digest, tip.end, first_line, tip)
    reason = ""
    if known:
        before = next(r[2] for r in reversed(rows) if r[1] == resolved)
        reason = (
            f"its content changed since it was ingested (sha256 {before[:12]}... "
            f"then, {sha[:12]}... now)"
        )
        last = path_record(con, known)
        if last and (last.device, last.inode) == (layout.device, layout.inode) and (
            size < last.end
        ):
            return _refuse_altered(con, path, resolved, sha, size, run_id, reason)
    if layout.end == 0:  # its first line is still being written
        return FileResult(
            path, "waiting", sha, size, waiting=layout.waiting,
            message=f"{shown}: nothing to load yet; {_waits(1, layout.waiting)}",
        )
    return _Offer(path, resolved, layout, digest, known=known, altered=reason)


Grown = tuple[Tip, int, Any]  # the tip continued, the first line after it, the hash there


def _continued(path: Path, layout: Layout, digest: Digest, candidates: list[Tip]) -> Grown | None:
    """The furthest piece ingested that this file still starts with (its bytes up to the
    piece's end hash the same), the number of the line after it and the running hash there."""
    fits = [t for t in candidates if 0 < t.end <= layout.size]
    if not fits:
        return None
    snaps = dict(digest.snaps)
    need = {t.end for t in fits} - snaps.keys()
    if need:
        try:
            snaps |= hash_objects_at(path, need, layout.size)
        except OSError:
            return None
    for t in fits:  # furthest first
        h = snaps.get(t.end)
        if h is not None and h.hexdigest() == t.sha256:
            try:
                before = byte_before(path, t.end)
            except OSError:
                return None
            return t, first_line_after(t.last_line, before), h
    return None


def _already(
    path: Path,
    resolved: str,
    layout: Layout,
    sha: str,
    same: tuple[Any, ...] | None,
    grown: Grown | None,
) -> FileResult:
    """A file with nothing new: the same bytes as a file ingested, or no complete line past
    the piece ingested last. A last line that waits for its newline is said."""
    if grown and grown[0].end < layout.end:
        grown = None  # the same bytes as a copy ingested whole, under a name not continued
    if same:
        at, when = same
    else:
        assert grown is not None
        at, when = grown[0].path, grown[0].ingested_at
    where = "" if at == resolved else f" as {at}"
    upto = f" up to line {grown[0].last_line:,}" if grown and not same else ""
    message = (
        f"{escape_path(path)}: already ingested{where}{upto} on {when:%Y-%m-%d %H:%M} UTC; "
        "nothing new"
    )
    if grown is None:
        return FileResult(path, "already_ingested", sha, layout.size, message=message)
    tip, first_line, h = grown
    if layout.size > tip.end:
        message += "; " + _waits(first_line, layout.size - tip.end)
    return FileResult(
        path, "already_ingested", sha, layout.size, message=message,
        source_id=tip.source_id, file_id=tip.file_id, start_byte=tip.end, end_byte=tip.end,
        first_line=first_line, last_line=tip.last_line, waiting=layout.size - tip.end,
        prefix_hash=h.copy(),
    )


def _new_to_the_manifest(con: duckdb.DuckDBPyConnection, layout: Layout, resolved: str) -> bool:
    """No ingested file can equal it (none has its size), be its earlier version (none has
    its path) or its earlier piece (none has its first line)."""
    return not one(
        con,
        "SELECT 1 FROM sources WHERE status = 'ingested' AND (size = ? OR path = ?) LIMIT 1",
        [layout.size, resolved],
    ) and not (
        layout.head
        and one(con, "SELECT 1 FROM source_files WHERE head_sha256 = ? LIMIT 1", [layout.head])
    )


def _inflates_to_nothing(path: Path) -> bool:
    """A .jsonl.gz whose content is empty (a broken one is left to the load to report)."""
    try:
        if not _is_gzip(path):
            return False
        with gzip.open(path, "rb") as fh:
            return fh.read(1) == b""
    except (OSError, EOFError, zlib.error):
        return False


def _empty(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    resolved: str,
    sha: str,
    layout: Layout,
    known: tuple[int, ...],
    run_id: int,
) -> FileResult:
    """A file with no lines: nothing to load, but evidence that a table system delivered
    nothing, so the manifest keeps one row for it (status `empty`), and the run says so.

    A path ingested with content and now empty was truncated: that is refused as altered,
    unless it is known to be another file now (another device or inode than the file last
    read under that name: a log rotated away and a new one begun). Every empty file has the
    same SHA-256, so an empty file is never "already ingested" as another; the same empty
    file offered again adds no second row.
    """
    size = layout.size
    before = one(
        con,
        "SELECT sha256 FROM sources WHERE path = ? AND status = 'ingested' ORDER BY id DESC "
        "LIMIT 1",
        [resolved],
    )
    last = path_record(con, known)
    other_file = (
        last is not None
        and last.inode is not None
        and (last.device, last.inode) != (layout.device, layout.inode)
    )
    if before and before[0] != sha and not other_file:
        reason = (
            f"it is now empty, and held content when it was ingested (sha256 {before[0][:12]}"
            "... then)"
        )
        return _refuse_altered(con, path, resolved, sha, size, run_id, reason)
    seen = one(
        con,
        "SELECT ingested_at FROM sources WHERE path = ? AND sha256 = ? AND status = 'empty' "
        "ORDER BY id LIMIT 1",
        [resolved, sha],
    )
    if seen:
        when = f"already recorded as empty on {seen[0]:%Y-%m-%d %H:%M} UTC"
    else:
        con.execute(
            "INSERT INTO sources (path, sha256, size, lines, events, quarantined, duplicates, "
            "ingested_at, run_id, status, note) "
            "VALUES (?, ?, ?, 0, 0, 0, 0, now(), ?, 'empty', 'the file holds no lines')",
            [resolved, sha, size, run_id],
        )
        when = "recorded in the manifest as empty"
    return FileResult(
        path,
        "empty",
        sha,
        size,
        message=f"{escape_path(path)}: empty file, no events to load ({when}); "
        "check that its table system delivered its log",
    )


def ingest_file(
    con: duckdb.DuckDBPyConnection, path: Path, run_id: int, progress: Progress | None = None
) -> FileResult:
    """One file, in its own transaction."""
    offer = _offer(con, path, run_id)
    if isinstance(offer, FileResult):
        return offer
    return _ingest_offer(con, offer, run_id, progress)


def _text_size(path: Path, size: int) -> int:
    """What a file should hold once decompressed, to decide whether it is small: for gzip the
    size its trailer states (modulo 4 GiB, of the last member only: a hint, which
    `_read_small` checks while reading)."""
    if size < 18:  # no room for a gzip header and trailer
        return size
    try:
        with path.open("rb") as fh:
            if fh.read(2) != GZIP_MAGIC:
                return size
            fh.seek(-4, os.SEEK_END)
            return max(size, int.from_bytes(fh.read(4), "little"))
    except OSError:
        return size


def _ingest_alone(
    con: duckdb.DuckDBPyConnection, o: _Offer, run_id: int, progress: Progress | None
) -> FileResult:
    """One offer in its own transaction; a file that turns out unreadable (corrupt, a
    decompression bomb) is reported as such and the others go on."""
    try:
        return _ingest_offer(con, o, run_id, progress)
    except UserError as e:
        return FileResult(o.path, "unreadable", o.sha, o.size, message=str(e))


def _ingest_offer(
    con: duckdb.DuckDBPyConnection, o: _Offer, run_id: int, progress: Progress | None
) -> FileResult:
    con.execute("BEGIN TRANSACTION")
    try:
        result = _load(con, o, run_id, progress)
    except BaseException:
        con.execute("ROLLBACK")
        raise
    if result.status == "refused_altered":
        con.execute("ROLLBACK")
        return _refuse_altered(
            con, o.path, o.resolved, o.sha, o.size, run_id, result.message, result.concerns
        )
    con.execute("COMMIT")
    return result


@dataclass
class _Prepared:
    """A batch of small files read and split between the two paths (`_prepare_batch`),
    waiting for its transaction (`_store_batch`). The rows carry `file` (an index into
    `readable`) where the events table has source_id, which only the transaction gives."""

    readable: list[tuple[_Offer, list[LongLine], int]]  # offer, long lines, lines
    rows: Rows | None
    results: list[FileResult]  # the files that could not be read
    alone: list[_Offer]  # turned out too big for a batch
    later: list[_Offer]  # left over once a batch's bytes were held


def _prepare_batch(offers: list[_Offer], progress: Progress | None) -> _Prepared:
    """Read a batch of small files and split their lines between the fast path and the
    per-line path: no database, so it runs in a second thread while the previous batch
    loads.

    Memory is bounded by what is read, not by what the sizes promised: a file that holds
    SMALL_FILE bytes of text or more goes alone, and once `CHUNK_BYTES` are held the files
    left over make a batch of their own."""
    out = _Prepared([], None, [], [], [])
    blocks: list[list[Block]] = []
    read: list[tuple[_Offer, list[LongLine]]] = []
    held = 0
    for k, o in enumerate(offers):
        if held >= CHUNK_BYTES:
            out.later = offers[k:]
            break
        try:
            got = _read_small(o, progress)
        except UserError as e:
            out.results.append(FileResult(o.path, "unreadable", o.sha, o.size, message=str(e)))
            continue
        if got is None:
            out.alone.append(o)
            continue
        parts, long_lines, text_bytes = got
        held += text_bytes
        blocks.append(parts)
        read.append((o, long_lines))
    if blocks:
        out.rows, counts = _read_together(blocks)
        out.readable = [(o, long, n) for (o, long), n in zip(read, counts, strict=True)]
    return out


def _store_batch(
    con: duckdb.DuckDBPyConnection, p: _Prepared, run_id: int, progress: Progress | None
) -> list[FileResult]:
    """A prepared batch in one transaction. Only the common case is done in bulk: when a
    file repeats a seq or shares a stream's seq range with another file (here or already
    ingested), the batch is rolled back and each file goes alone, so duplicates and altered
    files are judged exactly as `ingest_file` judges them."""
    results = list(p.results)
    one_by_one = False
    if p.readable:
        con.execute("BEGIN TRANSACTION")
        try:
            ids = np.array([
                int(r[0])
                for r in con.execute(
                    f"SELECT nextval('source_id_seq') AS id FROM range({len(p.readable)}) "
                    "ORDER BY id"
                ).fetchall()
            ])
            if p.rows is not None:
                _insert_rows(con, [Rows(_with_ids(p.rows.typed, ids), _with_ids(p.rows.lines, ids),
                                        p.rows.n_lines)])
            for i, (_, long_lines, _) in zip(ids.tolist(), p.readable, strict=True):
                _insert_long_lines(con, i, long_lines)
            con.execute(
                "CREATE OR REPLACE TEMP VIEW this AS SELECT * FROM events "
                f"WHERE source_id IN ({', '.join(map(str, ids.tolist()))})"
            )
            one_by_one = _batch_needs_one_by_one(con)
            if not one_by_one:
                results += _finish_batch(
                    con,
                    [(o, i, n) for (o, _, n), i in zip(p.readable, ids.tolist(), strict=True)],
                    run_id,
                )
        except BaseException:
            con.execute("ROLLBACK")
            raise
        if one_by_one:
            con.execute("ROLLBACK")
            results += [_ingest_alone(con, o, run_id, progress) for o, _, _ in p.readable]
        else:
            con.execute("COMMIT")
    results += [_ingest_alone(con, o, run_id, progress) for o in p.alone]
    if p.later:  # offered again: a copy of one of them may have been committed since
        again = [_offer(con, o.path, run_id) for o in p.later]
        results += [x for x in again if isinstance(x, FileResult)]
        rest = [x for x in again if isinstance(x, _Offer)]
        if rest:
            results += _store_batch(con, _prepare_batch(rest, progress), run_id, progress)
    return results


def _with_ids(t: pa.Table | None, ids: np.ndarray) -> pa.Table | None:
    """A prepared table's `file` column as the files' source ids."""
    if t is None:
        return None
    source_ids = pa.array(ids[t.column("file").to_numpy()])
    return fast.aligned(t.drop_columns(["file"]).append_column("source_id", source_ids))


def _read_together(files: list[list[Block]]) -> tuple[Rows, list[int]]:
    """The blocks of many small files read as one (`read_rows` has a fixed cost a call, which
    thousands of table files would otherwise pay one by one), each row then given back its
    file (column `file`, an index into `files`) and line number; with each file's count of
    lines."""
    texts: list[bytes] = []
    owner: list[int] = []  # per block
    firsts: list[int] = []
    sizes: list[int] = []
    counts = []
    for k, blocks in enumerate(files):
        n = 0
        for b in blocks:
            text = b.data if b.data.endswith(b"\n") else b.data + b"\n"
            texts.append(text)
            owner.append(k)
            firsts.append(b.first_line)
            sizes.append(text.count(b"\n"))
            n += sizes[-1]
        counts.append(n)
    rows = read_rows(b"".join(texts), 0)
    begins = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)

    def tagged(t: pa.Table | None) -> pa.Table | None:
        if t is None:
            return None
        at = t.column("line_no").to_numpy()
        block = np.searchsorted(begins, at, side="right") - 1
        line_no = np.asarray(firsts)[block] + at - begins[block]
        t = t.set_column(t.schema.get_field_index("line_no"), "line_no", pa.array(line_no))
        return fast.aligned(t.append_column("file", pa.array(np.asarray(owner)[block])))

    return Rows(tagged(rows.typed), tagged(rows.lines), rows.n_lines), counts


def _read_small(
    o: _Offer, progress: Progress | None
) -> tuple[list[Block], list[LongLine], int] | None:
    """A small file's blocks, its long lines and its bytes of text; None once it turns out to
    hold SMALL_FILE bytes or more (a gzip trailer that understated)."""
    parts: list[Block] = []
    long_lines: list[LongLine] = []
    text_bytes = 0
    for b in iter_blocks(o.path, **_piece_of(o)):
        text_bytes += len(b.data)
        if text_bytes >= SMALL_FILE:
            return None
        parts.append(b)
        long_lines += b.long_lines
        if progress:
            progress(o.path, b.read)
    return parts, long_lines, text_bytes


def _insert_long_lines(
    con: duckdb.DuckDBPyConnection,
    source_id: int,
    long_lines: Iterable[LongLine],
    table: str = "events",
) -> None:
    """Long lines join the file's rejected rows, so quarantine, `log.malformed` and the
    problems list take them like any bad line."""
    rows = [(source_id, x.line_no, x.raw, x.reason) for x in long_lines]
    if rows:
        con.executemany(
            f"INSERT INTO {table} (source_id, line_no, raw, rejected) VALUES (?, ?, ?, ?)", rows
        )


def _piece_of(o: _Offer) -> dict[str, Any]:
    """`iter_blocks` arguments for the piece an offer loads."""
    if o.layout.gz:
        return {}
    return {"start": o.start, "end": o.end, "first_line": o.first_line}


def _batch_needs_one_by_one(con: duckdb.DuckDBPyConnection) -> bool:
    """A seq repeated within a file, or a stream seq range shared with another file of the
    batch or an earlier one: cases the per-file path judges line by line. A rejected line
    that names its event counts in the ranges, as `_check_overlap` compares it too."""
    return bool(
        single(
            con,
            f"""
            WITH ranges AS (
              SELECT source_id, stream, min(seq) AS lo, max(seq) AS hi,
                     count(*) FILTER (rejected IS NULL) AS n,
                     count(DISTINCT seq) FILTER (rejected IS NULL) AS seqs
              FROM this WHERE rejected IS NULL OR {names_its_event_sql()}
              GROUP BY source_id, stream
            )
            SELECT (SELECT count(*) FROM ranges WHERE n <> seqs)
                 + (SELECT count(*) FROM ranges a JOIN ranges b
                      ON a.stream = b.stream AND a.source_id < b.source_id
                     AND a.lo <= b.hi AND b.lo <= a.hi)
                 + (SELECT count(*) FROM ranges a JOIN stream_sources r
                      ON a.stream = r.stream AND r.min_seq <= a.hi AND a.lo <= r.max_seq)
            """,
        )[0]
    )


def _finish_batch(
    con: duckdb.DuckDBPyConnection, files: list[tuple[_Offer, int, int]], run_id: int
) -> list[FileResult]:
    """The manifest, quarantine, log findings and summaries of a batch with no overlaps, in
    a few statements over all its files (the view `this`)."""
    counts = {
        r[0]: r[1:]
        for r in con.execute(
            "SELECT source_id, count(*) FILTER (rejected IS NULL), "
            "count(*) FILTER (rejected IS NOT NULL), min(ts) FILTER (rejected IS NULL), "
            "max(ts) FILTER (rejected IS NULL) FROM this GROUP BY source_id"
        ).fetchall()
    }
    rows = []
    pieces = []
    for o, source_id, lines in files:
        events, quarantined, first_ts, last_ts = counts.get(source_id, (0, 0, None, None))
        last_line = o.first_line + lines - 1
        rows.append((source_id, o.resolved, o.sha, o.size, lines, events, quarantined, 0,
                     first_ts, last_ts, run_id, o.note(last_line)))
        pieces.append(o.piece(source_id, last_line, (events, quarantined, 0)))
    _insert_sources(con, rows)
    record_pieces(con, pieces, run_id)
    problems: dict[int, list[tuple[int, str]]] = {}
    for source_id, line_no, reason in con.execute(
        "SELECT source_id, line_no, rejected FROM this WHERE rejected IS NOT NULL "
        "ORDER BY source_id, line_no"
    ).fetchall():
        problems.setdefault(source_id, []).append((line_no, reason))
    if problems:
        _quarantine(con)
        for o, source_id, _ in files:
            if source_id in problems:
                con.execute(
                    "CREATE OR REPLACE TEMP VIEW this_file AS SELECT * FROM events "
                    f"WHERE source_id = {source_id}"
                )
                _record_malformed(con, run_id, o.resolved, o.file_key, view="this_file")
        ids = ", ".join(str(i) for i in problems)
        con.execute(
            f"DELETE FROM events WHERE source_id IN ({ids}) AND rejected IS NOT NULL"
        )
    con.execute(
        "INSERT INTO stream_sources SELECT stream, source_id, min(seq), max(seq), count(*) "
        "FROM this GROUP BY stream, source_id"
    )
    record_seq_gaps(con, run_id, "SELECT DISTINCT stream FROM this")
    per_stream: dict[int, dict[str, int]] = {}
    for source_id, stream, n in con.execute(
        "SELECT source_id, stream, count(*) FROM this GROUP BY ALL ORDER BY ALL"
    ).fetchall():
        per_stream.setdefault(source_id, {})[stream] = n
    out = []
    for o, source_id, lines in files:
        events, quarantined = counts.get(source_id, (0, 0))[:2]
        last_line = o.first_line + lines - 1
        out.append(
            o.result(
                source_id, last_line, events=events, quarantined=quarantined,
                message=f"{escape_path(o.path)}: {events} events, {quarantined} quarantined"
                + o.told(last_line),
                per_stream=per_stream.get(source_id, {}),
                problems=[
                    f"{escape_path(o.path)}:{n}: {_one_line(r)}"
                    for n, r in problems.get(source_id, [])
                ],
            )
        )
    return out


def _insert_sources(con: duckdb.DuckDBPyConnection, rows: Sequence[tuple[object, ...]]) -> None:
    """Many `sources` rows in one statement (an executemany is a statement a row)."""
    names = ("id", "path", "sha256", "size", "lines", "events", "quarantined", "duplicates",
             "first_ts", "last_ts", "run_id", "note")
    cols = list(zip(*rows, strict=True))
    table = pa.table({n: pa.array(c) for n, c in zip(names, cols, strict=True)})
    con.register("new_sources", table)
    con.execute(
        f"INSERT INTO sources ({', '.join(names)}, ingested_at, status) "
        f"SELECT {', '.join(names)}, now(), 'ingested' FROM new_sources"
    )
    con.unregister("new_sources")


def _load(
    con: duckdb.DuckDBPyConnection, o: _Offer, run_id: int, progress: Progress | None
) -> FileResult:
    """Load every line of the piece straight into `events` (the one full copy of the data),
    then move the rejected lines to quarantine and drop duplicates, all inside the file's
    transaction, with the piece's row in `source_extents`.
    """
    path, resolved, size = o.path, o.resolved, o.size
    source_id = int(single(con, "SELECT nextval('source_id_seq')")[0])
    last_line = o.first_line - 1
    for b, rows in _read_ahead(iter_blocks(path, **_piece_of(o))):
        last_line = b.first_line - 1 + rows.n_lines
        _insert_rows(con, [rows], source_id)
        _insert_long_lines(con, source_id, b.long_lines)
        if progress:
            progress(path, b.read)
    lines = last_line - o.first_line + 1
    sha = o.sha  # the hash, computed meanwhile
    # From here on the file's rows are `this`; committed rows of other files never change.
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW this AS SELECT * FROM events WHERE source_id = {source_id}"
    )

    _reject_repeated_seq(con, source_id)
    altered, concerns = _check_overlap(con, source_id, o.file_id, o.known, o.altered)
    if altered:
        return FileResult(
            path, "refused_altered", sha, size, lines, message=altered, concerns=concerns
        )

    events, quarantined, duplicates, first_ts, last_ts = single(
        con,
        "SELECT count(*) FILTER (rejected IS NULL) - (SELECT count(*) FROM dups), "
        "count(*) FILTER (rejected IS NOT NULL), (SELECT count(*) FROM dups), "
        "min(ts) FILTER (rejected IS NULL), max(ts) FILTER (rejected IS NULL) FROM this",
    )
    con.execute(
        INSERT_SOURCE,
        [
            source_id,
            resolved,
            sha,
            size,
            lines,
            events,
            quarantined,
            duplicates,
            first_ts,
            last_ts,
            run_id,
            o.note(last_line),
        ],
    )
    record_pieces(con, [o.piece(source_id, last_line, (events, quarantined, duplicates))], run_id)
    _quarantine(con)
    _record_malformed(con, run_id, resolved, o.file_key)
    problems = [
        f"{escape_path(path)}:{line_no}: {_one_line(reason)}"
        for line_no, reason in con.execute(
            "SELECT line_no, rejected FROM this WHERE rejected IS NOT NULL ORDER BY line_no"
        ).fetchall()
    ]
    con.execute(
        f"DELETE FROM events WHERE source_id = {source_id} "
        "AND (rejected IS NOT NULL OR line_no IN (SELECT line_no FROM dups))"
    )
    con.execute(
        "INSERT INTO stream_sources SELECT stream, source_id, min(seq), max(seq), count(*) "
        "FROM this GROUP BY stream, source_id"
    )
    record_seq_gaps(con, run_id, "SELECT DISTINCT stream FROM this")
    per_stream = dict(
        con.execute("SELECT stream, count(*) FROM this GROUP BY stream ORDER BY stream").fetchall()
    )
    note = f", {duplicates} already ingested from another file" if duplicates else ""
    return o.result(
        source_id,
        last_line,
        events=events,
        quarantined=quarantined,
        duplicates=duplicates,
        message=f"{escape_path(path)}: {events} events, {quarantined} quarantined{note}"
        + o.told(last_line),
        per_stream=per_stream,
        problems=problems,
    )


def _reject_repeated_seq(
    con: duckdb.DuckDBPyConnection, source_id: int, table: str = "events"
) -> None:
    """A seq used twice in one stream of one file: the first line stands, the rest wait.
    `this` holds the file's rows, in `table`."""
    con.execute(
        f"""
        UPDATE {table} SET rejected = 'seq ' || {table}.seq || ' repeats in ' ||
                                     replace({table}.stream, ':', ' ') ||
                                     ' (first at line ' || d.first_line || ')'
        FROM (SELECT stream, seq, min(line_no) AS first_line FROM this
              WHERE rejected IS NULL GROUP BY ALL HAVING count(*) > 1) d
        WHERE {table}.source_id = {source_id} AND {table}.rejected IS NULL
          AND {table}.stream = d.stream AND {table}.seq = d.seq
          AND {table}.line_no <> d.first_line
        """
    )


def _check_overlap(
    con: duckdb.DuckDBPyConnection,
    source_id: int,
    file_id: int | None = None,
    known: tuple[int, ...] = (),
    known_reason: str = "",
    table: str = "events",
) -> tuple[str, dt.datetime | None]:
    """Events of this file (`this`, rows of `source_id` in `table`) already in the
    database: identical ones are skipped as duplicates (table `dups`); a different one means
    a log was altered, and the message says where, with the time of the ingested event it
    would change.

    A rejected line is held against them too when it still names its event (stream and
    seq): a resend whose copy of an event was changed into a bad line is as altered as one
    whose change still reads well, and quarantining that line would let the file through.

    Two cases of a piece of a file (`file_id`) or a path read before (`known`):
    - an event of an earlier piece of the same file at another line is a seq repeated in
      the file: rejected as such, as if the file had been read whole;
    - sharing any event with the sources `known` (the same path, of which this is not a
      continuation) means the bytes ingested under that name changed: `known_reason`, dated
      by the first event ingested from the path."""
    named = names_its_event_sql()
    earlier = _ids(
        con,
        f"""
        SELECT DISTINCT r.source_id FROM stream_sources r
        JOIN (SELECT stream, min(seq) AS lo, max(seq) AS hi FROM this
              WHERE rejected IS NULL OR {named} GROUP BY stream) t
          ON r.stream = t.stream AND r.min_seq <= t.hi AND r.max_seq >= t.lo
        """,
    )
    named_s = names_its_event_sql("s.stream", "s.seq", "s.raw")
    # Rows staged outside `events` cannot meet themselves there.
    itself = "AND e.source_id <> s.source_id" if table == "events" else ""
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE overlap AS
        SELECT s.line_no, s.stream, s.seq, s.rejected, e.source_id AS other_source,
               e.line_no AS other_line, e.ts AS other_ts,
               (s.raw = e.raw OR try(json(s.raw) = json(e.raw))) AS same,
               x.file_id AS other_file
        FROM this s JOIN events e
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
        f"SELECT 1 FROM overlap WHERE other_source IN ({', '.join(map(str, known))}) LIMIT 1",
    ):
        return known_reason, None
    if file_id is not None:
        con.execute(
            f"""
            UPDATE {table} SET rejected = 'seq ' || {table}.seq || ' repeats in ' ||
                                         replace({table}.stream, ':', ' ') ||
                                         ' (first at line ' || r.first_line || ')'
            FROM (SELECT line_no, min(other_line) AS first_line FROM overlap
                  WHERE other_file = {int(file_id)} AND other_line <> line_no
                    AND rejected IS NULL GROUP BY line_no) r
            WHERE {table}.source_id = {int(source_id)} AND {table}.line_no = r.line_no
              AND {table}.rejected IS NULL
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
        return (
            f"line {line_no} ({stream.replace(':', ' ')} seq {seq}{bad}) differs from the "
            f"event already ingested from {other}:{other_line} "
            f"({n} {'event differs' if n == 1 else 'events differ'})",
            when,
        )
    # A rejected line the same as an ingested event stays in quarantine: only good lines
    # are skipped as duplicates.
    con.execute(
        "CREATE OR REPLACE TEMP TABLE dups AS SELECT line_no FROM overlap "
        "WHERE same AND rejected IS NULL"
    )
    return "", None


def _refuse_altered(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    resolved: str,
    sha: str,
    size: int,
    run_id: int,
    reason: str,
    concerns: dt.datetime | None = None,
) -> FileResult:
    """Keep a record of the refused offer and raise `log.altered`; load nothing from it.

    The finding is dated by the events it concerns, so the report of their shift shows it:
    `concerns` (the ingested event a differing line would change), else the first event of
    the version of this path ingested before, else (nothing tells) the time of refusal."""
    message = f"{escape_path(path)}: refused: {reason}"
    at = "NULL::TIMESTAMPTZ" if concerns is None else f"TIMESTAMPTZ '{concerns.isoformat()}'"
    con.execute("BEGIN TRANSACTION")
    source_id = single(
        con,
        "INSERT INTO sources (path, sha256, size, lines, events, quarantined, duplicates, "
        "ingested_at, run_id, status, note) "
        "VALUES (?, ?, ?, 0, 0, 0, 0, now(), ?, 'refused_altered', ?) RETURNING id",
        [resolved, sha, size, run_id, reason],
    )[0]
    findings.record(
        con,
        run_id,
        f"""
        SELECT 'log.altered|' || path || '|' || sha256 AS fingerprint, 'log.altered' AS code,
               NULL AS table_id, NULL AS pit, NULL AS shoe, NULL::BIGINT AS round,
               NULL::BIGINT AS seq,
               coalesce({at}, (
                 SELECT min(e.ts) FROM events e JOIN sources p ON p.id = e.source_id
                 WHERE p.path = sources.path AND p.status = 'ingested' AND e.rejected IS NULL
               ), ingested_at) AS ts,
               path || ' was refused as altered: ' || note AS message,
               to_json({{'content': 'identical to the file already ingested'}}) AS expected,
               to_json({{'sha256': sha256, 'reason': note}}) AS observed,
               path AS source, to_json({{'source_id': id}}) AS evidence
        FROM sources WHERE id = {int(source_id)}
        """,
    )
    con.execute("COMMIT")
    return FileResult(path, "refused_altered", sha, size, message=message)


LINE_BYTES_DDL = (
    "CREATE TEMP TABLE IF NOT EXISTS line_bytes (source_id BIGINT, line_no BIGINT, bytes BLOB)"
)


def _keep_bytes(
    con: duckdb.DuckDBPyConnection, parts: Iterable[pa.Table], source_id: int | None = None
) -> None:
    """Hold the bytes of lines that are not UTF-8 (`lines_table`'s raw_bytes) in the temp
    table `line_bytes` until `_quarantine` writes their rows: the events table has no place
    for them. `parts` carry a source_id column unless `source_id` is given."""
    sid = "source_id" if source_id is None else str(int(source_id))
    for t in parts:
        if t.column("raw_bytes").null_count == t.num_rows:
            continue
        con.execute(LINE_BYTES_DDL)
        con.register("chunk_bytes", t)
        con.execute(
            f"INSERT INTO line_bytes SELECT {sid}, line_no, raw_bytes FROM chunk_bytes "
            "WHERE raw_bytes IS NOT NULL"
        )
        con.unregister("chunk_bytes")


def _quarantine(con: duckdb.DuckDBPyConnection) -> None:
    """The rejected lines of `this` into quarantine: reason, text, and the bytes of a line
    that is not UTF-8 (its text shows them as U+FFFD)."""
    con.execute(LINE_BYTES_DDL)
    con.execute(
        "INSERT INTO quarantine (source_id, line_no, reason, raw, raw_bytes) "
        "SELECT t.source_id, t.line_no, t.rejected, t.raw, b.bytes FROM this t "
        "LEFT JOIN line_bytes b ON b.source_id = t.source_id AND b.line_no = t.line_no "
        "WHERE t.rejected IS NOT NULL ORDER BY t.source_id, t.line_no"
    )
    con.execute("DELETE FROM line_bytes")


def _record_malformed(
    con: duckdb.DuckDBPyConnection, run_id: int, path: str, file_key: str, view: str = "this"
) -> None:
    """One `log.malformed` per quarantined line, dated by the events around it: its own time
    if it has one, else the good line before it, else the good line after it (a bad first
    line); the time of ingest only when the file has no good line at all.

    The fingerprint is the file's key (the SHA-256 of its first line, as source_files knows
    it; a gzip file or one with a blank first line: the SHA-256 of the bytes it was read
    in), the line's number and the start of the SHA-256 of the line itself. So the same
    bad line is the same finding whether its file was read whole or in pieces as it grew
    (`watch`), and another line at that place in a file starting alike is another."""
    findings.record(
        con,
        run_id,
        f"""
        SELECT 'log.malformed|{file_key}|' || q.line_no || '|' || left(sha256(q.raw), 16)
                 AS fingerprint, 'log.malformed' AS code,
               try(json_extract_string(q.raw, '$.table')) AS table_id,
               try(json_extract_string(q.raw, '$.pit')) AS pit,
               try(json_extract_string(q.raw, '$.shoe')) AS shoe,
               try(CAST(json_extract(q.raw, '$.round') AS BIGINT)) AS round,
               try(CAST(json_extract(q.raw, '$.seq') AS BIGINT)) AS seq,
               coalesce(q.ts, g.ts, h.ts, now()) AS ts,
               'Line ' || q.line_no || ' of ' || {_sql_str(Path(path).name)} ||
                 ' could not be read: ' ||
                 q.reason || '; it is kept in quarantine' AS message,
               to_json('a line of event log v1') AS expected,
               to_json({{'reason': q.reason, 'line': left(q.raw, 500)}}) AS observed,
               {_sql_str(path)} || ':' || q.line_no AS source,
               to_json({{'line_no': q.line_no}}) AS evidence
        FROM (SELECT *, rejected AS reason FROM {view} WHERE rejected IS NOT NULL) q
        ASOF LEFT JOIN (SELECT line_no, ts FROM {view} WHERE rejected IS NULL) g
          ON q.line_no >= g.line_no
        ASOF LEFT JOIN (SELECT line_no, ts FROM {view} WHERE rejected IS NULL) h
          ON q.line_no <= h.line_no
        """,
    )


def record_seq_gaps(con: duckdb.DuckDBPyConnection, run_id: int, streams_sql: str) -> None:
    """Recompute `log.seq_gap` over the whole of each stream named by `streams_sql`.

    A stream may span files; a gap one file leaves may be filled by the next, so standing gap
    findings that no longer hold are withdrawn.
    """
    # Only the files that hold these streams are read (constants, so DuckDB skips the
    # row groups of every other file).
    sources = _ids(
        con, f"SELECT DISTINCT source_id FROM stream_sources WHERE stream IN ({streams_sql})"
    )
    find_gaps(con, f"SELECT stream, seq, ts, source_id, line_no FROM events "
                   f"WHERE source_id IN ({sources}) AND stream IN ({streams_sql})")
    record_gaps(con, run_id)
    findings.withdraw(
        con,
        run_id,
        f"""code = 'log.seq_gap'
            AND ((table_id IS NOT NULL AND 'table:' || table_id IN ({streams_sql}))
              OR (pit IS NOT NULL AND 'pit:' || pit IN ({streams_sql})))
            AND fingerprint NOT IN (
              SELECT 'log.seq_gap|' || stream || '|' || prev_seq || '|' || seq FROM gaps)""",
    )


def find_gaps(con: duckdb.DuckDBPyConnection, rows_sql: str) -> None:
    """Temp table `gaps`: each row of `rows_sql` (stream, seq, ts, source_id, line_no) whose
    seq is more than one past the one before it in its stream, with that one's seq, source
    and line (what record_gaps records)."""
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE gaps AS
        SELECT * FROM (
          SELECT stream, seq, ts, source_id, line_no,
                 lag(seq) OVER w AS prev_seq, lag(source_id) OVER w AS prev_source,
                 lag(line_no) OVER w AS prev_line
          FROM ({rows_sql})
          WINDOW w AS (PARTITION BY stream ORDER BY seq)
        ) WHERE seq > prev_seq + 1
        """
    )


def record_gaps(con: duckdb.DuckDBPyConnection, run_id: int) -> None:
    """A `log.seq_gap` for each row of the temp table `gaps` (stream, seq, ts, source_id,
    line_no, prev_seq, prev_source, prev_line) not already standing."""
    findings.record(
        con,
        run_id,
        """
        SELECT 'log.seq_gap|' || g.stream || '|' || g.prev_seq || '|' || g.seq AS fingerprint,
               'log.seq_gap' AS code,
               CASE WHEN starts_with(g.stream, 'table:') THEN substr(g.stream, 7) END
                 AS table_id,
               CASE WHEN starts_with(g.stream, 'pit:') THEN substr(g.stream, 5) END AS pit,
               NULL AS shoe, NULL::BIGINT AS round, g.seq, g.ts,
               upper(left(g.stream, 1)) || replace(substr(g.stream, 2), ':', ' ') ||
                 ': seq ' || g.prev_seq || ' is followed by seq ' || g.seq || '; ' ||
                 (g.seq - g.prev_seq - 1) ||
                 CASE WHEN g.seq - g.prev_seq = 2 THEN ' event is' ELSE ' events are' END ||
                 ' missing' AS message,
               to_json({'seq': g.prev_seq + 1}) AS expected,
               to_json({'seq': g.seq, 'previous_seq': g.prev_seq,
                        'missing': g.seq - g.prev_seq - 1}) AS observed,
               s.path || ':' || g.line_no AS source,
               to_json({'previous': p.path || ':' || g.prev_line}) AS evidence
        FROM gaps g JOIN sources s ON s.id = g.source_id
        JOIN sources p ON p.id = g.prev_source
        """,
    )


def _ids(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    """The ids a query gives, as a SQL list of constants (NULL when there are none)."""
    ids = sorted(int(r[0]) for r in con.execute(sql).fetchall())
    return ", ".join(map(str, ids)) or "NULL"


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
