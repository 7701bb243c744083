"""Files that grow: where a file's complete lines end, its hashes, and the pieces already
ingested from it.

Table systems append to their logs all night (event log v1, "File"): bytes once written never
change, and the last line may still be half written. So a file is not judged by its name and
whole hash alone. What was ingested from it is recorded piece by piece (`source_extents`: byte
range, line range, SHA-256 of the file up to the piece's end), and a file offered again is
matched against those pieces by content:

- its first `end_byte` bytes still hash to what was ingested: it is the same file, grown (or
  renamed, or rotated), and only what follows is new;
- otherwise it is another file, or an altered one (auditor.ingest.manifest decides which).

Files are found by the SHA-256 of their first line (`source_files.head_sha256`), so a renamed
file is recognised without hashing it against every file ever ingested.

Nothing here writes to the database except `record_pieces`; the rest is reading files and
looking things up, so the follower (auditor.ingest.follow) and batch ingest share it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from auditor.ingest.paths import open_log
from auditor.ingest.reader import BOM, gzipped
from auditor.store.given_rows import given_rows

# A file is known by its first line, at most this many bytes of it: enough to tell table
# files apart (the first line names the table, its seq and its time), little to read.
HEAD_MAX = 4096
_READ = 1 << 20


class Changed(Exception):
    """The file changed (shrank) while it was being read."""


@dataclass(frozen=True)
class Layout:
    """What a look at a file's two ends tells, before any hashing.

    `end` is where its complete lines end: `size`, or the start of a last line that has no
    newline yet and waits for it (`waiting` bytes). A gzip file is always whole (its stream
    ends with a trailer), so its `end` is its size and it is never continued.
    """

    size: int
    end: int
    gz: bool
    head: str | None  # SHA-256 of the first line (None: gzip, or nothing to know it by)
    device: int
    inode: int

    @property
    def waiting(self) -> int:
        return self.size - self.end


def layout_of(path: Path, line_limit: int) -> Layout:
    """The file's layout (see Layout). The rule for a last line without its newline:

    - it is read when it is already a whole JSON object: only spaces could still follow it on
      its line, so it cannot grow into another event (a file finished without a final newline
      loses nothing);
    - it is read when it is over `line_limit`: it is a bad line whatever follows;
    - a line of spaces only is read (it holds no event);
    - anything else waits: the table system is still writing it.
    """
    with open_log(path) as fh:
        st = os.fstat(fh.fileno())
        size = st.st_size
        first = fh.read(min(size, HEAD_MAX))
        gz = gzipped(first)
        if gz or size == 0:
            return Layout(size, size, gz, None, st.st_dev, st.st_ino)
        end = _complete_end(fh, size, line_limit)
    return Layout(size, end, False, head_of(first[:end]), st.st_dev, st.st_ino)


def _complete_end(fh: Any, size: int, line_limit: int) -> int:
    """Where the lines that may be read end (the rule in `layout_of`)."""
    back = min(size, line_limit + 1)
    fh.seek(size - back)
    tail = fh.read(back)
    if len(tail) < back:
        raise Changed
    return size - back + cut_complete(tail, size - back, True, False, line_limit)


def cut_complete(data: bytes, at: int, to_end: bool, mid_line: bool, line_limit: int) -> int:
    """How many bytes of `data` (the file's bytes from offset `at`) may be read, by the rule
    of `layout_of`: up to its last newline, and the line after it too when that line may
    not grow into another event.

    `to_end`: `data` reaches the file's end (else the line after its last newline is cut by
    the read, and waits). `mid_line`: `data` starts inside a line whose start was read
    already, as a whole object: what follows it on its line is read when it is only spaces
    (else the line is no event, but it may still become one: it waits)."""
    nl = data.rfind(b"\n")
    if nl == len(data) - 1:
        return len(data)
    if not to_end:
        return nl + 1 if nl >= 0 or len(data) <= line_limit else len(data)
    line = data[nl + 1 :]
    if len(line) > line_limit:
        return len(data)  # over the limit already: bad whatever follows
    if nl < 0 and mid_line:
        return len(data) if not line.strip(b" \t\r") else 0
    if at + nl + 1 == 0:
        line = line.removeprefix(BOM)
    if not line.strip(b" \t\r") or whole_object(line):
        return len(data)
    return nl + 1


def whole_object(line: bytes) -> bool:
    """Whether `line` is a complete JSON object (so nothing but spaces can follow it)."""
    if not line.rstrip().endswith(b"}"):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


def head_of(start: bytes) -> str | None:
    """The SHA-256 that knows a file: its first line (trailing spaces and CR dropped, so a
    line read before its newline was written is known by the same hash), at most HEAD_MAX
    bytes of it. `start` is the file's first bytes that may be read (up to HEAD_MAX). None
    for a blank first line, which tells files apart no better than nothing."""
    nl = start.find(b"\n")
    if nl >= 0:
        first = start[:nl].rstrip(b" \t\r")
    elif len(start) >= HEAD_MAX:
        first = start[:HEAD_MAX]
    else:
        first = start.rstrip(b" \t\r")
    if not first.removeprefix(BOM).strip():
        return None
    return hashlib.sha256(first).hexdigest()


@dataclass
class Digest:
    """The hashes of a file as `layout` saw it: of all `size` bytes (the manifest's sha256)
    and of its first `end` bytes (what an extent ending there records), with the running hash
    there, which a follower extends with the next bytes instead of hashing from the start."""

    sha256: str
    prefix_sha256: str
    prefix: Any  # hashlib sha256 object over the first `end` bytes
    snaps: dict[int, Any]  # running hashes at `end`, `size` and the offsets asked for


def digest_of(path: Path, layout: Layout, at: Iterable[int] = ()) -> Digest:
    """Hash the file's first `layout.size` bytes in one pass, with a snapshot at `layout.end`
    and at each offset of `at` (offsets past the size are left out). Raises Changed if the
    file no longer has that many bytes (it was truncated while being read)."""
    snaps = hash_objects_at(path, [layout.end, layout.size, *at], layout.size)
    if layout.size not in snaps:
        raise Changed
    prefix = snaps[layout.end]
    return Digest(snaps[layout.size].hexdigest(), prefix.hexdigest(), prefix, snaps)


@dataclass(frozen=True)
class Tip:
    """The last piece ingested of a file (its furthest `end_byte`)."""

    file_id: int
    source_id: int
    path: str
    end: int
    last_line: int
    sha256: str  # of the file's first `end` bytes
    ingested_at: dt.datetime


@dataclass(frozen=True)
class PathRecord:
    """The latest piece ingested from a path, with the file it then was (None: a database
    from before pieces were recorded, which did not keep it)."""

    end: int
    device: int | None
    inode: int | None


def tips(con: duckdb.DuckDBPyConnection, head: str | None, known: Sequence[int]) -> list[Tip]:
    """The tips of the files that could be this one: known by the same first line, or read
    from the same path before (`known`: those sources' ids)."""
    ids = [
        r[0]
        for r in con.execute(
            "SELECT id FROM source_files WHERE head_sha256 = ?", [head]
        ).fetchall()
    ] if head else []
    if known:
        ids += [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT file_id FROM source_extents "
                f"WHERE source_id IN ({_ints(known)})"
            ).fetchall()
        ]
    if not ids:
        return []
    return [
        Tip(*r)
        for r in con.execute(
            "SELECT file_id, source_id, path, end_byte, last_line, prefix_sha256, ingested_at "
            f"FROM source_extents WHERE file_id IN ({_ints(ids)}) "
            "QUALIFY row_number() OVER (PARTITION BY file_id ORDER BY end_byte DESC, "
            "ingested_at DESC) = 1 ORDER BY end_byte DESC"
        ).fetchall()
    ]


def path_record(con: duckdb.DuckDBPyConnection, known: Sequence[int]) -> PathRecord | None:
    """The latest piece read from the sources `known` (one path's)."""
    if not known:
        return None
    row = con.execute(
        "SELECT end_byte, device, inode FROM source_extents "
        f"WHERE source_id IN ({_ints(known)}) ORDER BY ingested_at DESC, end_byte DESC LIMIT 1"
    ).fetchall()
    return PathRecord(*row[0]) if row else None


def hash_objects_at(path: Path, offsets: Iterable[int], limit: int | None = None) -> dict[int, Any]:
    """The running SHA-256 of the file's first n bytes for each n of `offsets` (up to
    `limit`), in one read; offsets the file no longer reaches are left out."""
    want = sorted({o for o in offsets if o >= 0 and (limit is None or o <= limit)})
    out: dict[int, Any] = {}
    h = hashlib.sha256()
    pos = 0
    with open_log(path) as fh:
        for stop in want:
            while pos < stop:
                block = fh.read(min(_READ, stop - pos))
                if not block:
                    return out
                h.update(block)
                pos += len(block)
            out[stop] = h.copy()
    return out


def byte_before(path: Path, offset: int) -> bytes:
    """The byte just before `offset` (b"" at 0)."""
    if offset <= 0:
        return b""
    with open_log(path) as fh:
        return os.pread(fh.fileno(), 1, offset - 1)


def first_line_after(tip_last_line: int, before: bytes) -> int:
    """The number of the first line of a piece that starts where a piece ending with byte
    `before` and line `tip_last_line` stopped: the next line, or the same one when that piece
    ended without a newline (its last line was read whole; what follows on it is its rest)."""
    return tip_last_line + 1 if before in (b"\n", b"") else tip_last_line


@dataclass(frozen=True)
class Piece:
    """One extent ingested: a row of `source_extents` (and, for the first piece of a file,
    of `source_files`)."""

    source_id: int
    file_id: int
    path: str
    start: int
    end: int
    first_line: int
    last_line: int
    prefix_sha256: str
    events: int
    quarantined: int
    duplicates: int
    waiting: int
    device: int | None
    inode: int | None
    head: str | None = None
    new_file: bool = False


_PIECE_COLUMNS = (
    "source_id", "file_id", "path", "start_byte", "end_byte", "first_line", "last_line",
    "prefix_sha256", "events", "quarantined", "duplicates", "waiting_bytes", "device", "inode",
)


def record_pieces(con: duckdb.DuckDBPyConnection, pieces: Sequence[Piece], run_id: int) -> None:
    """The pieces' rows, in the caller's transaction (with the events they loaded)."""
    if not pieces:
        return
    values = [
        (p.source_id, p.file_id, p.path, p.start, p.end, p.first_line, p.last_line,
         p.prefix_sha256, p.events, p.quarantined, p.duplicates, p.waiting, p.device, p.inode)
        for p in pieces
    ]
    types = ["BIGINT", "BIGINT", "VARCHAR", *["BIGINT"] * 4, "VARCHAR", *["BIGINT"] * 6]
    with given_rows(con, "new_pieces", list(zip(_PIECE_COLUMNS, types, strict=True)),
                    list(zip(*values, strict=True))) as (pieces_in, params):
        con.execute(
            f"INSERT INTO source_extents ({', '.join(_PIECE_COLUMNS)}, run_id, ingested_at) "
            f"SELECT {', '.join(_PIECE_COLUMNS)}, {int(run_id)}, now() FROM {pieces_in}", params)
    files = [(p.file_id, p.head, p.path) for p in pieces if p.new_file]
    if files:
        con.executemany(
            "INSERT INTO source_files (id, head_sha256, path, run_id, recorded_at) "
            f"VALUES (?, ?, ?, {int(run_id)}, now())",
            files,
        )


def _ints(ids: Iterable[int]) -> str:
    return ", ".join(str(int(i)) for i in ids)
