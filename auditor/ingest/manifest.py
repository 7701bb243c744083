"""The manifest's decision on a file offered: what of it to load, or why nothing.

Read-only: `decide` looks at the file and at what `sources` and the pieces ingested know of it,
and returns a value; `auditor.ingest.commit.judge` carries out a decision that loads nothing
(an empty file's row, a refusal), and the loaders take an `Offer`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from auditor.errors import UserError
from auditor.ingest import reader
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
    tips,
)
from auditor.ingest.paths import escape_path
from auditor.ingest.reader import Block
from auditor.ingest.result import FileResult
from auditor.store.db import one

Scan = tuple[Layout, Digest]


def scan_file(path: Path) -> Scan:
    """A file's layout and hashes (auditor.ingest.growing): no database, so it runs ahead in
    another thread."""
    layout = layout_of(path, reader.MAX_LINE_BYTES)
    return layout, digest_of(path, layout)


@dataclass
class Offer:
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
        """Bytes of text to read, to decide whether it is small (see `reader.text_size`)."""
        if self.layout.gz:
            return reader.text_size(self.path, self.size)
        return self.end - self.start

    def hashes(self) -> Digest:
        if isinstance(self.digest, Digest):
            return self.digest
        try:
            d = self.digest.result()
        except OSError as e:
            raise UserError(reader.cannot_read(self.path, e)) from None
        except Changed:
            raise UserError(reader.cannot_read(self.path)) from None
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
        """What names the file in a log.malformed fingerprint
        (see log_findings.record_malformed)."""
        return self.layout.head or self.prefix_sha

    def blocks(self) -> Iterator[Block]:
        """The piece's blocks of whole lines (a gzip file is read whole)."""
        if self.layout.gz:
            return reader.iter_blocks(self.path)
        return reader.iter_blocks(
            self.path, start=self.start, end=self.end, first_line=self.first_line
        )

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
            parts.append(waits(last_line + 1, self.layout.waiting))
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
            out += "; " + waits(last_line + 1, self.layout.waiting)
        return out


def waits(line_no: int, nbytes: int) -> str:
    return (
        f"line {line_no:,} has no newline yet ({nbytes:,} bytes so far): it waits for its "
        "newline and loads when the file is offered again"
    )


@dataclass(frozen=True)
class Refusal:
    """Refuse the file as altered: its offer is recorded and `log.altered` raised, nothing of
    it loads. `concerns`: when the events it concerns happened (the ingested event that its
    first differing line would change), so the finding is dated there."""

    path: Path
    resolved: str
    sha: str
    size: int
    reason: str
    concerns: dt.datetime | None = None


@dataclass(frozen=True)
class Empty:
    """A file with no lines: the manifest keeps one row for it, unless the same empty file
    was recorded already (`seen`: when)."""

    path: Path
    resolved: str
    sha: str
    size: int
    seen: dt.datetime | None


# What to do with a file: load an Offer; record an Empty or a Refusal; or only say the
# FileResult (already ingested, waiting, unreadable).
Decision = Offer | Refusal | Empty | FileResult


def decide(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    scan: Future[Scan] | None = None,
    hasher: ThreadPoolExecutor | None = None,
) -> Decision:
    """Check a file against the manifest; already ingested, or altered since, end here.

    - its whole SHA-256 is that of a file ingested, or it still starts with all that was
      ingested from a file (found by its first line, or its path) and holds no complete line
      more: already ingested;
    - it starts with all that was ingested from a file and has more: the piece after that,
      under whatever name it has now (a file that grew, was renamed, was rotated);
    - it is smaller than what was ingested from this path, and the same file (device and
      inode): truncated in place, refused as altered;
    - otherwise a new file; if this path was ingested before, sharing any event with what was
      ingested from it means those bytes changed, which the load refuses as altered (a new
      file under an old name shares none).

    `scan` is the file's layout and hashes being computed ahead. A file that no ingested file
    can equal, continue or be an earlier version of is loaded while `hasher` computes its
    hash, if given."""
    resolved = escape_path(path.resolve())
    shown = escape_path(path)
    try:
        if scan is not None:
            layout, digest = scan.result()
        else:
            layout = layout_of(path, reader.MAX_LINE_BYTES)
            if (
                hasher is not None
                and layout.size >= reader.SMALL_FILE
                and _new_to_the_manifest(con, layout, resolved)
                and not reader.inflates_to_nothing(path)
            ):
                return Offer(path, resolved, layout, hasher.submit(digest_of, path, layout))
            digest = digest_of(path, layout)
    except OSError as e:
        return FileResult(path, "unreadable", message=reader.cannot_read(path, e))
    except Changed:
        return FileResult(path, "unreadable", message=reader.cannot_read(path))
    sha, size = digest.sha256, layout.size
    # The sources ingested from this path before, and the first with the same bytes.
    rows = con.execute(
        "SELECT id, path, sha256, ingested_at FROM sources WHERE status = 'ingested' "
        "AND (path = ? OR sha256 = ?) ORDER BY id",
        [resolved, sha],
    ).fetchall()
    known = tuple(r[0] for r in rows if r[1] == resolved)
    same = next(((r[1], r[3]) for r in rows if r[2] == sha), None)
    if size == 0 or reader.inflates_to_nothing(path):
        return _empty(con, path, resolved, sha, layout, known)
    grown = None if layout.gz else _continued(path, layout, digest, tips(con, layout.head, known))
    if same or (grown and grown[0].end >= layout.end):
        return _already(path, resolved, layout, sha, same, grown)
    if grown:
        tip, first_line, _ = grown
        return Offer(path, resolved, layout, digest, tip.end, first_line, tip)
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
            return Refusal(path, resolved, sha, size, reason)
    if layout.end == 0:  # its first line is still being written
        return FileResult(
            path, "waiting", sha, size, waiting=layout.waiting,
            message=f"{shown}: nothing to load yet; {waits(1, layout.waiting)}",
        )
    return Offer(path, resolved, layout, digest, known=known, altered=reason)


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
        message += "; " + waits(first_line, layout.size - tip.end)
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


def _empty(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    resolved: str,
    sha: str,
    layout: Layout,
    known: tuple[int, ...],
) -> Empty | Refusal:
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
        return Refusal(path, resolved, sha, size, reason)
    seen = one(
        con,
        "SELECT ingested_at FROM sources WHERE path = ? AND sha256 = ? AND status = 'empty' "
        "ORDER BY id LIMIT 1",
        [resolved, sha],
    )
    return Empty(path, resolved, sha, size, seen[0] if seen else None)
