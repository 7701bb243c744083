"""Opening and reading a log's bytes: the one gzip sniff and its bomb cap, blocks of whole lines
read a chunk at a time, and lines too long to hold streamed through as their length and hash.

Nothing here knows the database or the event format; memory stays flat whatever a file holds."""

from __future__ import annotations

import codecs
import gzip
import hashlib
import os
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from auditor.errors import UserError
from auditor.ingest.paths import escape_path, open_log

GZIP_MAGIC = b"\x1f\x8b"
BOM = b"\xef\xbb\xbf"
CHUNK_BYTES = 64 << 20
SMALL_FILE = 16 << 20  # files below this are validated together (see auditor.ingest.run)
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

Progress = Callable[[Path, int], None]  # (file, bytes of it read so far)


def cannot_read(path: Path, e: OSError | None = None) -> str:
    """Why a file could not be read: an error of the system (`e`), else that it changed
    under the reader."""
    if e is None:
        return f"{escape_path(path)}: changed while it was being read"
    return f"{escape_path(path)}: cannot read ({e.strerror})"


def gzipped(start: bytes) -> bool:
    """Whether a file that starts with `start` is gzip: the one sniff every reader asks."""
    return start[:2] == GZIP_MAGIC


def is_gzip(path: Path) -> bool:
    with open_log(path) as fh:
        return gzipped(fh.read(2))


def sha256_of(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open_log(path) as fh:
        while block := fh.read(1 << 20):
            h.update(block)
            size += len(block)
    return h.hexdigest(), size


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
    gz = is_gzip(path)
    shown = escape_path(path)
    if path.name.endswith(".gz") and not gz:
        raise UserError(f"{shown}: not a gzip file (it does not start with the gzip signature)")
    if gz and (start or end is not None):
        raise AssertionError("a gzip file is read whole")
    with open_log(path) as raw_fh:
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
            if data.startswith(BOM):
                data = data[3:] or read()
        yield from split(data, read, raw_fh.tell, first_line)


def split(
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


def text_size(path: Path, size: int) -> int:
    """What a file should hold once decompressed, to decide whether it is small: for gzip the
    size its trailer states (modulo 4 GiB, of the last member only: a hint, which
    the batch checks while reading)."""
    if size < 18:  # no room for a gzip header and trailer
        return size
    try:
        with open_log(path) as fh:
            if not gzipped(fh.read(2)):
                return size
            fh.seek(-4, os.SEEK_END)
            return max(size, int.from_bytes(fh.read(4), "little"))
    except OSError:
        return size


def inflates_to_nothing(path: Path) -> bool:
    """A .jsonl.gz whose content is empty (a broken one is left to the load to report)."""
    try:
        if not is_gzip(path):
            return False
        with open_log(path) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as fh:
            return fh.read(1) == b""
    except (OSError, EOFError, zlib.error):
        return False
