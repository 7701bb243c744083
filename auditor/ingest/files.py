"""Load table event logs (event log v1, JSONL or JSONL.gz) into the audit database.

Each file is one transaction: its good lines become events, its bad lines go to quarantine
with the reason, and its hash goes to the sources manifest. Lines are split in Python (a few
vectorised numpy calls) and handed to DuckDB as Arrow, where `auditor.ingest.validate` checks them
all in one SELECT.
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
from typing import NamedTuple

import duckdb
import numpy as np
import pyarrow as pa

from auditor.errors import UserError
from auditor.ingest import fast
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
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now(), ?, 'ingested', '')"
)

Progress = Callable[[Path, int], None]  # (file, bytes of it read so far)


@dataclass
class FileResult:
    """What happened to one file; `status` is ingested, already_ingested, refused_altered,
    unreadable or empty."""

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


def iter_blocks(path: Path, chunk_bytes: int | None = None) -> Iterator[Block]:
    """Blocks of whole lines, read `chunk_bytes` at a time, so that memory stays flat whatever
    the file holds: a gzip file is refused (UserError) as soon as it inflates past
    `inflation_cap`, and a line over MAX_LINE_BYTES is never held whole (`LongLine`)."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    gz = _is_gzip(path)
    shown = escape_path(path)
    if path.name.endswith(".gz") and not gz:
        raise UserError(f"{shown}: not a gzip file (it does not start with the gzip signature)")
    with path.open("rb") as raw_fh:
        size = os.fstat(raw_fh.fileno()).st_size
        cap = inflation_cap(size) if gz else None
        fh = gzip.GzipFile(fileobj=raw_fh, mode="rb") if gz else raw_fh
        inflated = 0

        def read() -> bytes:
            nonlocal inflated
            try:
                data = fh.read(chunk_bytes)
            except (OSError, EOFError, zlib.error) as e:
                raise UserError(f"{shown}: corrupt gzip data ({e})") from None
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
        while len(data) < 3 and (more := read()):
            data += more
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:] or read()
        yield from _split(data, read, raw_fh.tell)


def _split(data: bytes, read: Callable[[], bytes], where: Callable[[], int]) -> Iterator[Block]:
    """Cut what `read` gives (starting with `data`) into blocks that end at a line's end."""
    limit = MAX_LINE_BYTES
    line_no = 1  # of the next line not yet in a block
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
    con: duckdb.DuckDBPyConnection, rows: Sequence[Rows], source_id: int | None = None
) -> None:
    """Every row into `events` (the per-line path's with their reason in `rejected`); the
    tables carry a source_id column unless `source_id` is given."""
    sid = "source_id" if source_id is None else str(int(source_id))
    cols = ", ".join((*EVENT_COLUMNS, "rejected"))
    typed = [r.typed for r in rows if r.typed is not None]
    if typed:
        con.register("typed_chunk", pa.concat_tables(typed))
        select = fast.typed_select("typed_chunk", sid)
        con.execute(f"INSERT INTO events ({cols}) SELECT {cols} FROM ({select})")
        con.unregister("typed_chunk")
    slow = [r.lines for r in rows if r.lines is not None and r.lines.num_rows]
    if slow:
        chunk = pa.concat_tables(slow)
        con.register("chunk", chunk)
        select = staging_select("chunk", sid)
        con.execute(f"INSERT INTO events ({cols}) SELECT {cols} FROM ({select})")
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
    while this one loads; bigger files load alone, each in its own."""
    files, errors = discover(paths)
    results: list[FileResult] = []
    batch: list[_Offer] = []
    batch_bytes = 0

    held: set[str] = set()  # the hashes and paths of the batches not yet committed
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
                offer = _offer(con, f, run_id, ahead.digest(i), hasher)
                if isinstance(offer, FileResult):
                    results.append(offer)
                    continue
                text_bytes = _text_size(offer.path, offer.size)
                if text_bytes >= SMALL_FILE:
                    flush(wait=True)
                    results.append(_ingest_alone(con, offer, run_id, progress))
                else:
                    if offer.sha in held or offer.resolved in held:
                        flush(wait=True)  # the earlier copy must be committed first
                        results.append(ingest_file(con, f, run_id, progress))
                        continue
                    batch.append(offer)
                    held.update((offer.sha, offer.resolved))
                    batch_bytes += text_bytes
                    if batch_bytes >= CHUNK_BYTES:
                        flush()
            except UserError as e:
                results.append(FileResult(f, "unreadable", message=str(e)))
        flush(wait=True)
    order = {f: i for i, f in enumerate(files)}
    results.sort(key=lambda r: order.get(r.path, len(order)))
    return IngestResult(run_id, results, errors)


class _HashAhead:
    """The SHA-256 of the next small files, computed in a second thread while this one loads
    (hashlib lets go of the GIL). A big file is hashed while it loads instead (`_offer`)."""

    AHEAD = 8

    def __init__(self, files: list[Path], hasher: ThreadPoolExecutor) -> None:
        self.files = files
        self.hasher = hasher
        self.pending: dict[int, Future[tuple[str, int]]] = {}

    def digest(self, i: int) -> Future[tuple[str, int]] | None:
        for k in range(i + 1, min(i + 1 + self.AHEAD, len(self.files))):
            if k not in self.pending and _size(self.files[k]) < SMALL_FILE:
                self.pending[k] = self.hasher.submit(sha256_of, self.files[k])
        return self.pending.pop(i, None)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return SMALL_FILE  # not hashed ahead: `_offer` says why it cannot be read


@dataclass
class _Offer:
    """A file that passed the manifest checks and is to be loaded. Its SHA-256 may still be
    computing (`digest`): only once it is known is the file's row written."""

    path: Path
    resolved: str
    digest: Future[tuple[str, int]] | str
    size: int

    @property
    def sha(self) -> str:
        if isinstance(self.digest, str):
            return self.digest
        try:
            sha, size = self.digest.result()
        except OSError as e:
            raise UserError(f"{escape_path(self.path)}: cannot read ({e.strerror})") from None
        if size != self.size:
            raise UserError(f"{escape_path(self.path)}: changed while it was being read")
        self.digest = sha
        return sha


def _offer(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    run_id: int,
    digest: Future[tuple[str, int]] | None = None,
    hasher: ThreadPoolExecutor | None = None,
) -> _Offer | FileResult:
    """Check a file against the manifest: already ingested, or altered since, end here.

    `digest` is the file's SHA-256 being computed ahead. A file that no ingested file can
    equal (none has its size) nor be an earlier version of (none has its path) is loaded
    while `hasher` computes its hash, if given."""
    resolved = escape_path(path.resolve())
    try:
        if digest is None and hasher is not None:
            size = path.stat().st_size
            if (
                size >= SMALL_FILE
                and _new_to_the_manifest(con, size, resolved)
                and not _inflates_to_nothing(path)
            ):
                return _Offer(path, resolved, hasher.submit(sha256_of, path), size)
        sha, size = digest.result() if digest is not None else sha256_of(path)
    except OSError as e:
        return FileResult(
            path, "unreadable", message=f"{escape_path(path)}: cannot read ({e.strerror})"
        )
    if size == 0 or _inflates_to_nothing(path):
        return _empty(con, path, resolved, sha, size, run_id)
    same = one(
        con,
        "SELECT path, ingested_at FROM sources WHERE sha256 = ? AND status = 'ingested' "
        "ORDER BY id LIMIT 1",
        [sha],
    )
    if same:
        when = same[1].strftime("%Y-%m-%d %H:%M UTC")
        where = "" if same[0] == resolved else f" as {same[0]}"
        return FileResult(
            path,
            "already_ingested",
            sha,
            size,
            message=f"{escape_path(path)}: already ingested{where} on {when}; nothing new",
        )
    before = one(
        con,
        "SELECT sha256 FROM sources WHERE path = ? AND status = 'ingested' ORDER BY id DESC "
        "LIMIT 1",
        [resolved],
    )
    if before:
        reason = (
            f"its content changed since it was ingested (sha256 {before[0][:12]}... "
            f"then, {sha[:12]}... now)"
        )
        return _refuse_altered(con, path, resolved, sha, size, run_id, reason)
    return _Offer(path, resolved, sha, size)


def _new_to_the_manifest(con: duckdb.DuckDBPyConnection, size: int, resolved: str) -> bool:
    """No ingested file can equal it (none has its size) nor be its earlier version."""
    return not one(
        con,
        "SELECT 1 FROM sources WHERE status = 'ingested' AND (size = ? OR path = ?) LIMIT 1",
        [size, resolved],
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
    con: duckdb.DuckDBPyConnection, path: Path, resolved: str, sha: str, size: int, run_id: int
) -> FileResult:
    """A file with no lines: nothing to load, but evidence that a table system delivered
    nothing, so the manifest keeps one row for it (status `empty`), and the run says so.

    A path ingested with content and now empty was truncated: that is refused as altered.
    Every empty file has the same SHA-256, so an empty file is never "already ingested" as
    another; the same empty file offered again adds no second row.
    """
    before = one(
        con,
        "SELECT sha256 FROM sources WHERE path = ? AND status = 'ingested' ORDER BY id DESC "
        "LIMIT 1",
        [resolved],
    )
    if before and before[0] != sha:
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
    for b in iter_blocks(o.path):
        text_bytes += len(b.data)
        if text_bytes >= SMALL_FILE:
            return None
        parts.append(b)
        long_lines += b.long_lines
        if progress:
            progress(o.path, b.read)
    return parts, long_lines, text_bytes


def _insert_long_lines(
    con: duckdb.DuckDBPyConnection, source_id: int, long_lines: Iterable[LongLine]
) -> None:
    """Long lines join the file's rejected rows, so quarantine, `log.malformed` and the
    problems list take them like any bad line."""
    rows = [(source_id, x.line_no, x.raw, x.reason) for x in long_lines]
    if rows:
        con.executemany(
            "INSERT INTO events (source_id, line_no, raw, rejected) VALUES (?, ?, ?, ?)", rows
        )


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
    for o, source_id, lines in files:
        events, quarantined, first_ts, last_ts = counts.get(source_id, (0, 0, None, None))
        rows.append((source_id, o.resolved, o.sha, o.size, lines, events, quarantined, 0,
                     first_ts, last_ts, run_id))
    _insert_sources(con, rows)
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
                _record_malformed(con, run_id, o.resolved, o.sha, view="this_file")
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
        out.append(
            FileResult(
                o.path, "ingested", o.sha, o.size, lines, events, quarantined, 0,
                message=f"{escape_path(o.path)}: {events} events, {quarantined} quarantined",
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
             "first_ts", "last_ts", "run_id")
    cols = list(zip(*rows, strict=True))
    table = pa.table({n: pa.array(c) for n, c in zip(names, cols, strict=True)})
    con.register("new_sources", table)
    con.execute(
        f"INSERT INTO sources ({', '.join(names)}, ingested_at, status, note) "
        f"SELECT {', '.join(names)}, now(), 'ingested', '' FROM new_sources"
    )
    con.unregister("new_sources")


def _load(
    con: duckdb.DuckDBPyConnection, o: _Offer, run_id: int, progress: Progress | None
) -> FileResult:
    """Load every line straight into `events` (the one full copy of the data), then move
    the rejected lines to quarantine and drop duplicates, all inside the file's transaction.
    """
    path, resolved, size = o.path, o.resolved, o.size
    source_id = int(single(con, "SELECT nextval('source_id_seq')")[0])
    lines = 0
    for b, rows in _read_ahead(iter_blocks(path)):
        lines = b.first_line - 1 + rows.n_lines
        _insert_rows(con, [rows], source_id)
        _insert_long_lines(con, source_id, b.long_lines)
        if progress:
            progress(path, b.read)
    sha = o.sha  # the hash, computed meanwhile
    # From here on the file's rows are `this`; committed rows of other files never change.
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW this AS SELECT * FROM events WHERE source_id = {source_id}"
    )

    _reject_repeated_seq(con, source_id)
    altered, concerns = _check_overlap(con)
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
        ],
    )
    _quarantine(con)
    _record_malformed(con, run_id, resolved, sha)
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
    return FileResult(
        path,
        "ingested",
        sha,
        size,
        lines,
        events,
        quarantined,
        duplicates,
        message=f"{escape_path(path)}: {events} events, {quarantined} quarantined{note}",
        per_stream=per_stream,
        problems=problems,
    )


def _reject_repeated_seq(con: duckdb.DuckDBPyConnection, source_id: int) -> None:
    """A seq used twice in one stream of one file: the first line stands, the rest wait."""
    con.execute(
        f"""
        UPDATE events SET rejected = 'seq ' || events.seq || ' repeats in ' ||
                                     replace(events.stream, ':', ' ') ||
                                     ' (first at line ' || d.first_line || ')'
        FROM (SELECT stream, seq, min(line_no) AS first_line FROM this
              WHERE rejected IS NULL GROUP BY ALL HAVING count(*) > 1) d
        WHERE events.source_id = {source_id} AND events.rejected IS NULL
          AND events.stream = d.stream AND events.seq = d.seq AND events.line_no <> d.first_line
        """
    )


def _check_overlap(con: duckdb.DuckDBPyConnection) -> tuple[str, dt.datetime | None]:
    """Events of this file already in the database: identical ones are skipped as
    duplicates (table `dups`); a different one means a log was altered, and the message says
    where, with the time of the ingested event it would change.

    A rejected line is held against them too when it still names its event (stream and
    seq): a resend whose copy of an event was changed into a bad line is as altered as one
    whose change still reads well, and quarantining that line would let the file through."""
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
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE overlap AS
        SELECT s.line_no, s.stream, s.seq, s.rejected, e.source_id AS other_source,
               e.line_no AS other_line, e.ts AS other_ts,
               (s.raw = e.raw OR try(json(s.raw) = json(e.raw))) AS same
        FROM this s JOIN events e
          ON e.stream = s.stream AND e.seq = s.seq AND e.source_id <> s.source_id
        WHERE (s.rejected IS NULL OR {named_s}) AND e.rejected IS NULL
          AND e.source_id IN ({earlier})
        """
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
    con: duckdb.DuckDBPyConnection, run_id: int, path: str, sha: str, view: str = "this"
) -> None:
    """One `log.malformed` per quarantined line, dated by the events around it: its own time
    if it has one, else the good line before it, else the good line after it (a bad first
    line); the time of ingest only when the file has no good line at all."""
    findings.record(
        con,
        run_id,
        f"""
        SELECT 'log.malformed|{sha}|' || q.line_no AS fingerprint, 'log.malformed' AS code,
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
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE gaps AS
        SELECT * FROM (
          SELECT stream, seq, ts, source_id, line_no,
                 lag(seq) OVER w AS prev_seq, lag(source_id) OVER w AS prev_source,
                 lag(line_no) OVER w AS prev_line
          FROM events WHERE source_id IN ({sources}) AND stream IN ({streams_sql})
          WINDOW w AS (PARTITION BY stream ORDER BY seq)
        ) WHERE seq > prev_seq + 1
        """
    )
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
    findings.withdraw(
        con,
        run_id,
        f"""code = 'log.seq_gap'
            AND ((table_id IS NOT NULL AND 'table:' || table_id IN ({streams_sql}))
              OR (pit IS NOT NULL AND 'pit:' || pit IN ({streams_sql})))
            AND fingerprint NOT IN (
              SELECT 'log.seq_gap|' || stream || '|' || prev_seq || '|' || seq FROM gaps)""",
    )


def _ids(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    """The ids a query gives, as a SQL list of constants (NULL when there are none)."""
    ids = sorted(int(r[0]) for r in con.execute(sql).fetchall())
    return ", ".join(map(str, ids)) or "NULL"


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
