"""Follow growing log files: ingest each file's new complete lines as they are written.

The live `watch` command polls hundreds of table logs several times a second. Hashing or
re-reading whole files on every poll would cost what the files weigh (10 MB and more by the end
of a night), so a `Follower` keeps, per file, what it has ingested: the offset after the last
line loaded, its line number, and the running SHA-256 of those bytes. A poll is then one
`stat` per file, and one read of the new bytes of each file that grew.

Evidence and crashes: everything one poll loads commits in one transaction together with the
record of each piece (`source_extents`: bytes, lines, SHA-256 of the file up to the piece's
end). The in-memory state moves only after the commit. So a follower killed at any moment,
SIGKILL included, loses nothing and repeats nothing: a new `Follower` over the same paths finds
each file's last piece in the database, checks once that the file still starts with exactly
those bytes (one hash of the file), and goes on from there.

The same rules as `bacc-audit ingest` (auditor.ingest.files): bad lines to quarantine with a
`log.malformed` naming file and line, a seq repeated in a file, events already ingested from
another file (skipped when identical, `log.altered` when not), `log.seq_gap`; a last line
without its newline waits for it (auditor.ingest.growing). The first piece a follower loads of
each file goes through batch ingest itself, which also decides whether the file is new,
continued, renamed or altered, and gives the file a `sources` row for this follower; the next
pieces take a path for small pieces (`_store_staged`) that stages the rows in a temporary table
and checks them there, so that a poll costs what the new bytes cost, not what the night weighs.

One writer per file: while a follower follows a file, do not ingest it with `ingest` into the
same database (the follower would read again what that loaded; its events would be skipped as
duplicates, but the pieces recorded would overlap).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import duckdb
import numpy as np
import pyarrow as pa

from auditor.ingest import files
from auditor.ingest.files import Block, FileResult, Rows, escape_path
from auditor.ingest.growing import (
    Digest,
    Layout,
    Piece,
    Tip,
    byte_before,
    cut_complete,
    first_line_after,
    record_pieces,
)
from auditor.store.db import q, single

# At most this much of one file per poll, and of all files together: a backlog (a follower
# started late in the night) loads over a few polls instead of holding it all at once.
POLL_BYTES = 16 << 20
POLL_TOTAL = 64 << 20
# The last bytes ingested of each file are read again with its new bytes: a file rewritten
# in place under the follower (its size grown, its start changed) is caught at once, for the
# price of a few bytes, and judged again whole.
CHECK_BYTES = 64
# Bytes already ingested are hashed again 1 MiB a poll (a few ms), one followed file after
# another, and compared with the running hash: a file changed in place anywhere in what was
# ingested is caught within a round of the files (500 files of 10 MB: about 12 minutes at a
# poll every 150 ms), for a bounded cost a poll. 0 turns it off.
VERIFY_BYTES = 1 << 20

# The rows of the small pieces of one poll, checked before they join `events`.
STAGED_DDL = "CREATE OR REPLACE TEMP TABLE staged AS SELECT * FROM events LIMIT 0"


class Position(NamedTuple):
    """How far a file has been ingested: the offset after its last piece and that piece's
    last line, and the bytes after it that wait (a last line without its newline)."""

    offset: int
    last_line: int
    waiting: int


@dataclass
class Poll:
    """What one poll loaded, for the caller to act on: which rounds ended (to audit them
    now), which event types each stream received, and the files that need a person.

    `files` holds one FileResult per piece loaded (status `ingested`), and one per file
    refused (`refused_altered`), unreadable or recorded as empty; a file with nothing new is
    not in it."""

    files: list[FileResult] = field(default_factory=list)
    # per stream ('table:MB-07', 'pit:P3'): event type -> events loaded
    types: dict[str, Counter[str]] = field(default_factory=dict)
    rounds_ended: list[tuple[str, str, int]] = field(default_factory=list)  # table, shoe, round
    # The time of the earliest event loaded: the rounds that ended began after it less the
    # length of a round, which bounds what the caller reads to audit them.
    earliest: dt.datetime | None = None
    waiting: dict[Path, int] = field(default_factory=dict)  # bytes of a line without newline
    gone: list[Path] = field(default_factory=list)  # followed files no longer there

    @property
    def events(self) -> int:
        return sum(f.events for f in self.files if f.status == "ingested")

    @property
    def quarantined(self) -> int:
        return sum(f.quarantined for f in self.files if f.status == "ingested")

    def _count(self, stream: str, type_: str, n: int, ts: dt.datetime | None) -> None:
        self.types.setdefault(stream, Counter())[type_] += n
        if ts is not None and (self.earliest is None or ts < self.earliest):
            self.earliest = ts


@dataclass
class _State:
    """One followed file, as far as it has been ingested."""

    path: Path
    resolved: str
    device: int
    inode: int
    size: int  # st_size and st_mtime_ns when last looked at: unchanged, nothing to read
    mtime_ns: int
    offset: int  # end of the last piece ingested
    last_line: int
    next_line: int  # the first line of the next piece (last_line: the last piece ended
    #                 inside its line, read as a whole object; what follows is its rest)
    hash: Any  # running SHA-256 of the file's first `offset` bytes
    file_id: int
    last_source: int  # the source whose piece ended at `offset`
    last_path: str
    source_id: int | None  # this follower's `sources` row for the file, once it has one
    check: bytes  # the last bytes before `offset`
    waiting: int = 0


@dataclass
class _Staged:
    """A small piece of a file that has its source: bytes state.offset to state.offset +
    len(data), read and split into blocks."""

    state: _State
    seen: os.stat_result  # the file when the piece was read
    data: bytes
    hash: Any  # running SHA-256 at the piece's end
    waiting: int
    to_end: bool  # the read reached the file's end (else more waits for the next poll)
    blocks: list[Block] = field(default_factory=list)
    lines: int = 0

    @property
    def last_line(self) -> int:
        return self.state.next_line + self.lines - 1


@dataclass
class _Verifying:
    """A check under way of the bytes ingested from a file: its first `target` bytes must
    hash to `expected`, the running hash when the check began."""

    state: _State
    target: int
    expected: str
    hash: Any
    pos: int = 0


class Follower:
    """Follows files (plain .jsonl; a gzip file is read whole, once) and ingests what they
    gain, one `poll` at a time.

    Keeps no file open between polls (a rotated log is let go of at once), holds no lock and
    starts no thread: the caller owns the connection and the rhythm. `run_id` is the run the
    rows are recorded under (auditor.store.runs).
    """

    def __init__(self, run_id: int, paths: Iterable[Path | str] = ()) -> None:
        self.run_id = run_id
        self._paths: dict[Path, None] = {}
        self._states: dict[Path, _State] = {}
        # Files not followed for now (refused, unreadable, gzip, same as an ingested copy),
        # with how they looked: judged again only when that changes.
        self._stopped: dict[Path, tuple[int, int, int, int]] = {}
        self._turn = 0  # where the next poll starts, so a backlog cannot starve a file
        self._verifying: _Verifying | None = None
        self._verify_turn = 0
        for p in paths:
            self.follow(p)

    def follow(self, path: Path | str) -> None:
        """Follow `path` from the next poll on; what it already holds that was not ingested
        is loaded then."""
        self._paths.setdefault(Path(path), None)

    def forget(self, path: Path | str) -> None:
        """Stop following `path` (what was ingested stays; following it again later goes on
        where it stopped)."""
        p = Path(path)
        self._paths.pop(p, None)
        self._states.pop(p, None)
        self._stopped.pop(p, None)

    @property
    def paths(self) -> list[Path]:
        return list(self._paths)

    def position(self, path: Path | str) -> Position | None:
        """How far `path` has been ingested, as far as this follower knows (None before its
        first poll of it, or while it is not followed)."""
        s = self._states.get(Path(path))
        return Position(s.offset, s.last_line, s.waiting) if s else None

    def poll(self, con: duckdb.DuckDBPyConnection) -> Poll:
        """Look at every followed file and load what each gained, in at most two
        transactions (first pieces through batch ingest, then the small pieces together).

        A file unchanged since the last poll costs one `stat`. A file that is gone is let go
        of (said in `Poll.gone`); one replaced under its name (another device or inode), or
        smaller than what was ingested from it, is judged again whole, as `ingest` would:
        a new file, or `log.altered`."""
        out = Poll()
        offers: list[files._Offer] = []
        seen: dict[Path, os.stat_result] = {}
        staged: list[_Staged] = []
        budget = POLL_TOTAL
        self._verify_some()
        order = list(self._paths)
        if order:
            k = self._turn % len(order)
            order = order[k:] + order[:k]
            self._turn += 1
        for path in order:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                if self._states.pop(path, None) is not None:
                    out.gone.append(path)
                continue
            except OSError as e:
                out.files.append(FileResult(path, "unreadable", message=_cannot(path, e)))
                continue
            state = self._states.get(path)
            truncated = False
            if state is not None and (
                (st.st_dev, st.st_ino) != (state.device, state.inode) or st.st_size < state.offset
            ):
                truncated = st.st_size < state.offset
                del self._states[path]
                state = None
            if state is None:
                self._identify(con, path, st, truncated, out, offers, seen)
                continue
            if (st.st_size, st.st_mtime_ns) == (state.size, state.mtime_ns) or budget <= 0:
                continue
            try:
                got = self._read(state, st, min(POLL_BYTES, budget))
            except FileNotFoundError:  # gone since the stat
                del self._states[path]
                out.gone.append(path)
                continue
            except OSError as e:
                out.files.append(FileResult(path, "unreadable", message=_cannot(path, e)))
                del self._states[path]
                self._stop(path, st)
                continue
            if got is None:  # rewritten under us: judged again whole
                del self._states[path]
                self._identify(con, path, st, False, out, offers, seen)
                continue
            new, to_end = got
            budget -= len(new)
            take = cut_complete(
                new, state.offset, to_end, state.next_line == state.last_line,
                files.MAX_LINE_BYTES,
            )
            # A last line without its newline; not what a read cut short left for later.
            waiting = len(new) - take if to_end else 0
            if waiting:
                out.waiting[path] = waiting
            if not take:  # nothing to commit: this look is the state
                state.size = st.st_size if to_end else -1
                state.mtime_ns, state.waiting = st.st_mtime_ns, waiting
                continue
            # The state moves (size and time seen included) only once the piece commits.
            h = state.hash.copy()
            h.update(memoryview(new)[:take])
            if state.source_id is None:
                offers.append(_offer_from(state, st, new, take, h))
                seen[path] = st
            else:
                staged.append(_Staged(state, st, new[:take], h, waiting, to_end))
        if offers:
            self._store_offers(con, offers, seen, out)
        if staged:
            for piece, result in _store_staged(con, staged, self.run_id, out):
                out.files.append(result)
                if result.status == "ingested":
                    _advance(piece, result)
                else:
                    self._stop(piece.state.path, seen.get(piece.state.path))
                    self._states.pop(piece.state.path, None)
        return out

    # -- checking what was ingested ------------------------------------------------------

    def _verify_some(self) -> None:
        """Hash again up to VERIFY_BYTES of what was ingested, going on with the check under
        way or starting the next file's. A file that no longer hashes as ingested loses its
        state: the poll judges it again whole, as `ingest` would (`log.altered`)."""
        budget, started = VERIFY_BYTES, 0
        order: list[Path] | None = None
        while budget > 0:
            v = self._verifying
            if v is None or self._states.get(v.state.path) is not v.state:
                if started >= len(self._paths):
                    return  # every file had its turn in this poll
                if order is None:
                    order = [p for p in self._paths if p in self._states]
                v = self._verifying = self._next_check(order)
                started += 1
                if v is None:
                    return
            try:
                with v.state.path.open("rb") as fh:
                    now = os.fstat(fh.fileno())
                    if (now.st_dev, now.st_ino) != (v.state.device, v.state.inode):
                        self._verifying = None  # another file now: the poll sees it
                        continue
                    block = os.pread(fh.fileno(), min(budget, v.target - v.pos), v.pos)
            except OSError:
                self._verifying = None  # gone or unreadable: the poll says so
                continue
            v.hash.update(block)
            v.pos += len(block)
            budget -= len(block)
            if v.pos == v.target or not block:
                self._verifying = None
                if v.pos < v.target or v.hash.hexdigest() != v.expected:
                    del self._states[v.state.path]

    def _next_check(self, order: list[Path]) -> _Verifying | None:
        """The check of the next followed file with something ingested (`order`), in turn."""
        if not order:
            return None
        state = self._states[order[self._verify_turn % len(order)]]
        self._verify_turn += 1
        return _Verifying(state, state.offset, state.hash.hexdigest(), hashlib.sha256())

    # -- judging a file whole -----------------------------------------------------------

    def _identify(
        self,
        con: duckdb.DuckDBPyConnection,
        path: Path,
        st: os.stat_result,
        truncated: bool,
        out: Poll,
        offers: list[files._Offer],
        seen: dict[Path, os.stat_result],
    ) -> None:
        """Judge a file not followed yet (or no longer the one followed) as `ingest` would,
        hashing it once: nothing new (follow it from its last piece), a piece to load (with
        this poll's first pieces), or a file to stop at (refused, unreadable, gzip)."""
        if self._stopped.get(path) == _signature(st):
            return
        if st.st_size == 0 and not truncated:
            return  # a new file, nothing written yet: nothing to judge
        got = files._offer(con, path, self.run_id)
        if isinstance(got, files._Offer):
            offers.append(got)
            seen[path] = st
            return
        if got.status == "already_ingested" and got.file_id is not None:
            try:
                state = self._states[path] = _state_of(path, got, st)
            except OSError as e:
                out.files.append(FileResult(path, "unreadable", message=_cannot(path, e)))
                self._stop(path, st)
                return
            state.last_path = single(
                con, f"SELECT path FROM sources WHERE id = {int(state.last_source)}"
            )[0]
            if got.waiting:
                out.waiting[path] = got.waiting
            return
        if got.status == "waiting":
            out.waiting[path] = got.waiting
        elif got.status != "already_ingested":
            out.files.append(got)
        self._stop(path, st)  # judged again once it changes

    def _store_offers(
        self,
        con: duckdb.DuckDBPyConnection,
        offers: list[files._Offer],
        seen: dict[Path, os.stat_result],
        out: Poll,
    ) -> None:
        """First pieces, through batch ingest (one transaction, or one per file when they
        overlap); each file loaded gets its state, with this follower's source."""
        gz = {o.path for o in offers if o.layout.gz}
        results = files._store_batch(con, files._prepare_batch(offers, None), self.run_id, None)
        loaded = [r.source_id for r in results if r.status == "ingested" and r.source_id]
        if loaded:
            _count_loaded(con, loaded, out)
        for r in results:
            st = seen.get(r.path)
            if r.status == "ingested" and r.path not in gz and st is not None:
                # gone since it loaded: judged again if it comes back
                with contextlib.suppress(OSError):
                    self._states[r.path] = _state_of(r.path, r, st, r.source_id)
            elif r.status != "already_ingested":
                self._stop(r.path, st)
            if r.status != "already_ingested":
                out.files.append(r)

    def _stop(self, path: Path, st: os.stat_result | None) -> None:
        if st is None:
            try:
                st = os.stat(path)
            except OSError:
                return
        self._stopped[path] = _signature(st)

    # -- reading new bytes ----------------------------------------------------------------

    def _read(self, state: _State, st: os.stat_result, most: int) -> tuple[bytes, bool] | None:
        """The bytes after `state.offset` (at most `most`), and whether they reach the end
        of the file; None when the bytes before the offset are no longer those ingested, or
        the path names another file since the stat."""
        keep = len(state.check)
        start = state.offset - keep
        want = min(st.st_size - start, keep + most)
        fd = os.open(state.path, os.O_RDONLY)
        try:
            now = os.fstat(fd)
            if (now.st_dev, now.st_ino) != (state.device, state.inode):
                return None
            parts = []
            got = 0
            while got < want:
                part = os.pread(fd, want - got, start + got)
                if not part:
                    break
                parts.append(part)
                got += len(part)
        finally:
            os.close(fd)
        data = b"".join(parts)
        if data[:keep] != state.check:
            return None
        return data[keep:], start + len(data) >= st.st_size


def _signature(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _cannot(path: Path, e: OSError) -> str:
    return f"{escape_path(path)}: cannot read ({e.strerror})"


def _state_of(
    path: Path, r: FileResult, st: os.stat_result, source_id: int | None = None
) -> _State:
    """A file's state after a piece loaded through batch ingest, or found ingested already
    (`r` then says where the next piece starts)."""
    assert r.file_id is not None and r.source_id is not None
    end = r.end_byte
    before = byte_before(path, end)
    next_line = r.first_line if r.status == "already_ingested" else first_line_after(
        r.last_line, before
    )
    with path.open("rb") as fh:
        check = os.pread(fh.fileno(), min(CHECK_BYTES, end), end - min(CHECK_BYTES, end))
    return _State(
        path, escape_path(path.resolve()), st.st_dev, st.st_ino, r.size, st.st_mtime_ns, end,
        r.last_line, next_line, r.prefix_hash, r.file_id, r.source_id,
        escape_path(path.resolve()), source_id, check, r.waiting,
    )


def _offer_from(
    state: _State, st: os.stat_result, new: bytes, take: int, h: Any
) -> files._Offer:
    """The first piece this follower loads of a file it found ingested already: an offer
    for batch ingest built from the state (no hashing again), continuing the last piece."""
    whole = h.copy()
    whole.update(memoryview(new)[take:])
    size = state.offset + len(new)
    layout = Layout(size, state.offset + take, False, None, st.st_dev, st.st_ino)
    tip = Tip(state.file_id, state.last_source, state.last_path, state.offset,
              state.last_line, state.hash.hexdigest(), dt.datetime.now(dt.UTC))
    digest = Digest(whole.hexdigest(), h.hexdigest(), h, {})
    return files._Offer(
        state.path, state.resolved, layout, digest, state.offset, state.next_line, tip
    )


def _advance(piece: _Staged, r: FileResult) -> None:
    """Move a file's state past a piece committed."""
    s = piece.state
    s.offset = r.end_byte
    s.last_line = r.last_line
    s.next_line = first_line_after(r.last_line, piece.data[-1:])
    s.hash = piece.hash
    s.check = (s.check + piece.data)[-CHECK_BYTES:]
    s.last_source = r.source_id or s.last_source
    s.last_path = s.resolved
    # A read cut short by the poll's budget: the file is not as seen, read on next poll.
    s.size = piece.seen.st_size if piece.to_end else -1
    s.mtime_ns, s.waiting = piece.seen.st_mtime_ns, piece.waiting


def _count_loaded(con: duckdb.DuckDBPyConnection, ids: list[int], out: Poll) -> None:
    """Event types and round ends of the first pieces just committed (new sources: their
    rows are the last ones written, which DuckDB finds without reading the others)."""
    sources = ", ".join(str(int(i)) for i in ids)
    for stream, type_, n, ts in con.execute(
        f"SELECT stream, type, count(*), min(ts) FROM events WHERE source_id IN ({sources}) "
        "GROUP BY ALL ORDER BY ALL"
    ).fetchall():
        out._count(stream, type_, n, ts)
    out.rounds_ended += con.execute(
        f"SELECT table_id, shoe, round FROM events WHERE source_id IN ({sources}) "
        "AND type = 'round_end' ORDER BY ALL"
    ).fetchall()


# -- small pieces ---------------------------------------------------------------------------


def _file_key(con: duckdb.DuckDBPyConnection, piece: _Staged) -> str:
    """The key batch ingest names the file by in log.malformed fingerprints: the SHA-256 of
    its first line (source_files), else of the bytes read so far."""
    row = con.execute(
        "SELECT head_sha256 FROM source_files WHERE id = ?", [piece.state.file_id]
    ).fetchall()
    return (row[0][0] if row else None) or piece.hash.hexdigest()


def _store_staged(
    con: duckdb.DuckDBPyConnection, pieces: list[_Staged], run_id: int, out: Poll
) -> list[tuple[_Staged, FileResult]]:
    """Small pieces of files that have their source, in one transaction with their
    `source_extents` rows.

    The common case costs a few statements over the staged rows alone: every seq new to its
    stream and past the stream's highest, none repeated (`_plain`). A poll that is not plain
    goes piece by piece, and a piece that repeats a seq or meets events already ingested goes
    through the same checks as a batch file (auditor.ingest.files: repeats, duplicates,
    `log.altered`, gaps judged over the whole stream)."""
    for p in pieces:
        p.blocks = list(files._split(p.data, lambda: b"", lambda: 0, p.state.next_line))
    rows, counts = files._read_together([p.blocks for p in pieces])
    for p, n in zip(pieces, counts, strict=True):
        p.lines = n
    ids = np.array([p.state.source_id for p in pieces])
    by_source = {p.state.source_id: p for p in pieces}
    altered, concerns = "", None
    results: list[FileResult] = []
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(STAGED_DDL)
        files._insert_rows(
            con,
            [Rows(files._with_ids(rows.typed, ids), files._with_ids(rows.lines, ids),
                  rows.n_lines)],
            table="staged",
        )
        for p in pieces:
            assert p.state.source_id is not None
            files._insert_long_lines(
                con, p.state.source_id, [x for b in p.blocks for x in b.long_lines], "staged"
            )
        problems = _problems(con)
        ranges = _ranges(con, "rejected IS NULL", named=bool(problems))
        plain = _plain(ranges)
        if plain:
            results = _finish_staged(
                con, pieces, run_id, out, "rejected IS NULL", ranges, problems
            )
        elif len(pieces) == 1:
            sid = int(ids[0])
            con.execute("CREATE OR REPLACE TEMP VIEW this AS SELECT * FROM staged")
            files._reject_repeated_seq(con, sid, "staged")
            altered, concerns = files._check_overlap(
                con, sid, pieces[0].state.file_id, table="staged"
            )
            if not altered:
                good = "rejected IS NULL AND line_no NOT IN (SELECT line_no FROM dups)"
                results = _finish_staged(con, pieces, run_id, out, good, None, _problems(con))
    except BaseException:
        con.execute("ROLLBACK")
        raise
    if not plain and len(pieces) > 1:
        con.execute("ROLLBACK")
        # The files that make the poll unusual go one by one; the others stay together (a
        # floor of tables always has one file doing something unusual).
        odd = _odd_sources(ranges)
        calm = [p for p in pieces if p.state.source_id not in odd]
        if not odd or not calm:
            return [x for p in pieces for x in _store_staged(con, [p], run_id, out)]
        rough = [p for p in pieces if p.state.source_id in odd]
        return [
            *_store_staged(con, calm, run_id, out),
            *(x for p in rough for x in _store_staged(con, [p], run_id, out)),
        ]
    if altered:
        con.execute("ROLLBACK")
        p = pieces[0]
        r = files._refuse_altered(
            con, p.state.path, p.state.resolved, p.hash.hexdigest(),
            p.state.offset + len(p.data), run_id, altered, concerns,
        )
        return [(p, r)]
    con.execute("COMMIT")
    return [(by_source[r.source_id], r) for r in results]


class _Range(NamedTuple):
    """The seqs of one stream that one source gets in this poll (good rows; `lo_named` and
    `hi_named` count rejected lines that name their event too, as the overlap checks do),
    with what the stream held before: its highest seq and the source holding it."""

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


def _ranges(con: duckdb.DuckDBPyConnection, good: str, named: bool = False) -> list[_Range]:
    """The staged rows' `_Range`s, in one query."""
    with_named = files.names_its_event_sql() if named else "false"
    return [
        _Range(*r)
        for r in con.execute(
            f"""
            WITH s AS (
              SELECT stream, source_id,
                     min(seq) FILTER ({good}) AS lo, max(seq) FILTER ({good}) AS hi,
                     count(*) FILTER ({good}) AS n,
                     count(DISTINCT seq) FILTER ({good}) AS seqs,
                     min(seq) AS lo_named, max(seq) AS hi_named
              FROM staged WHERE ({good}) OR (rejected IS NOT NULL AND {with_named})
              GROUP BY ALL
            )
            SELECT s.*, t.top, t.top_source
            FROM s
            LEFT JOIN (SELECT stream, max(max_seq) AS top,
                              arg_max(source_id, max_seq) AS top_source
                       FROM stream_sources WHERE stream IN (SELECT stream FROM s)
                       GROUP BY stream) t USING (stream)
            ORDER BY s.stream, s.lo_named
            """
        ).fetchall()
    ]


def _odd_sources(ranges: list[_Range]) -> set[int]:
    """The sources whose ranges keep a poll from being plain (see _plain): a seq repeated or
    not past its stream's highest, or a stream shared with another source."""
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


def _plain(ranges: list[_Range]) -> bool:
    """No seq repeated within a source, no two sources sharing a stream's range, and every
    seq past the highest its stream held: what `files._batch_needs_one_by_one` asks, and a
    little more (a seq filling an older gap goes the careful way too)."""
    last: dict[str, int] = {}
    for r in ranges:  # by stream, then by lowest seq
        if r.n != r.seqs or r.lo_named is None or r.hi_named is None:
            return False
        if r.top is not None and r.lo_named <= r.top:
            return False
        if r.stream in last and r.lo_named <= last[r.stream]:
            return False
        last[r.stream] = r.hi_named
    return True


def _problems(con: duckdb.DuckDBPyConnection) -> dict[int, list[tuple[int, str]]]:
    """The staged lines rejected so far, per source: (line, reason)."""
    problems: dict[int, list[tuple[int, str]]] = {}
    for sid, line_no, reason in con.execute(
        "SELECT source_id, line_no, rejected FROM staged WHERE rejected IS NOT NULL "
        "ORDER BY source_id, line_no"
    ).fetchall():
        problems.setdefault(sid, []).append((line_no, reason))
    return problems


def _finish_staged(
    con: duckdb.DuckDBPyConnection,
    pieces: list[_Staged],
    run_id: int,
    out: Poll,
    good: str,
    ranges: list[_Range] | None,
    problems: dict[int, list[tuple[int, str]]],
) -> list[FileResult]:
    """Quarantine, findings, events, the streams' seq ranges and gaps, and the pieces'
    records, for staged rows already checked (`good`: the rows to load; `problems`: the
    rejected ones), in the caller's transaction."""
    if problems:
        con.execute("CREATE OR REPLACE TEMP VIEW this AS SELECT * FROM staged")
        files._quarantine(con)
        for p in pieces:
            if p.state.source_id in problems:
                con.execute(
                    "CREATE OR REPLACE TEMP VIEW this_piece AS SELECT * FROM staged "
                    f"WHERE source_id = {int(p.state.source_id)}"
                )
                files._record_malformed(
                    con, run_id, p.state.resolved, _file_key(con, p), view="this_piece"
                )
    per_stream: dict[int, dict[str, int]] = {}
    events: Counter[int] = Counter()
    for sid, stream, type_, n, ts, ended in con.execute(
        f"SELECT source_id, stream, type, count(*), min(ts), "
        "list((table_id, shoe, round) ORDER BY seq) FILTER (type = 'round_end') "
        f"FROM staged WHERE {good} GROUP BY ALL ORDER BY ALL"
    ).fetchall():
        per_stream.setdefault(sid, {})
        per_stream[sid][stream] = per_stream[sid].get(stream, 0) + n
        events[sid] += n
        out._count(stream, type_, n, ts)
        out.rounds_ended += [tuple(x.values()) if isinstance(x, dict) else tuple(x)
                             for x in ended or ()]
    duplicates = 0 if good == "rejected IS NULL" else single(
        con, "SELECT count(*) FROM dups"
    )[0]
    con.execute(f"INSERT INTO events SELECT * FROM staged WHERE {good}")
    _ranges_and_gaps(con, run_id, good, ranges if ranges is not None else _ranges(con, good))
    results = []
    pieces_rows = []
    for p in pieces:
        s = p.state
        assert s.source_id is not None
        n_events, quarantined = events[s.source_id], len(problems.get(s.source_id, ()))
        end = s.offset + len(p.data)
        pieces_rows.append(Piece(
            s.source_id, s.file_id, s.resolved, s.offset, end, s.next_line, p.last_line,
            p.hash.hexdigest(), n_events, quarantined, duplicates, p.waiting, s.device,
            s.inode,
        ))
        note = f", {duplicates} already ingested from another file" if duplicates else ""
        results.append(FileResult(
            s.path, "ingested", p.hash.hexdigest(), end, p.lines, n_events, quarantined,
            duplicates,
            message=f"{escape_path(s.path)}: {n_events} events, {quarantined} quarantined"
            f"{note} (lines {s.next_line:,}-{p.last_line:,})",
            per_stream=per_stream.get(s.source_id, {}),
            problems=[f"{escape_path(s.path)}:{n}: {files._one_line(r)}"
                      for n, r in problems.get(s.source_id, [])],
            source_id=s.source_id, file_id=s.file_id, start_byte=s.offset, end_byte=end,
            first_line=s.next_line, last_line=p.last_line, waiting=p.waiting,
            prefix_hash=p.hash,
        ))
    record_pieces(con, pieces_rows, run_id)
    return results


def _ranges_and_gaps(
    con: duckdb.DuckDBPyConnection, run_id: int, good: str, ranges: list[_Range]
) -> None:
    """Widen each source's seq range per stream (`stream_sources`, a summary: one row per
    source and stream, so it does not grow with every poll), and find the seq gaps the new
    events open. Where a stream's new seqs follow its highest one by one, there is none. Where
    they are all past its highest, only gaps among them and after that highest can appear,
    and no standing gap closes: found among the new rows. Only a stream that got a seq below
    its highest is judged again whole (`files.record_seq_gaps`)."""
    got = [r for r in ranges if r.lo is not None and r.hi is not None]
    if not got:
        return
    table = pa.table({
        "stream": [r.stream for r in got],
        "source_id": pa.array([r.source_id for r in got], pa.int64()),
        "lo": pa.array([r.lo for r in got], pa.int64()),
        "hi": pa.array([r.hi for r in got], pa.int64()),
        "n": pa.array([r.n for r in got], pa.int64()),
    })
    con.register("piece_ranges", table)
    had = set(
        con.execute(
            "UPDATE stream_sources SET min_seq = least(min_seq, p.lo), "
            "max_seq = greatest(max_seq, p.hi), events = events + p.n FROM piece_ranges p "
            "WHERE stream_sources.stream = p.stream AND stream_sources.source_id = p.source_id "
            "RETURNING stream_sources.stream, stream_sources.source_id"
        ).fetchall()
    )
    con.unregister("piece_ranges")
    new = [i for i, r in enumerate(got) if (r.stream, r.source_id) not in had]
    if new:  # a stream new to its source
        con.register("piece_ranges", table.take(pa.array(new, pa.int64())))
        con.execute("INSERT INTO stream_sources SELECT * FROM piece_ranges")
        con.unregister("piece_ranges")
    behind: set[str] = set()
    tops: dict[str, tuple[int | None, int | None]] = {}
    gappy: set[str] = set()
    last: dict[str, int | None] = {}
    for r in got:  # by stream, then by lowest seq
        assert r.lo is not None and r.hi is not None
        if r.top is not None and r.lo <= r.top:
            behind.add(r.stream)
            continue
        tops.setdefault(r.stream, (r.top, r.top_source))
        before = last.get(r.stream, r.top)  # the highest seq below this range
        if r.n != r.hi - r.lo + 1 or (before is not None and r.lo != before + 1):
            gappy.add(r.stream)
        last[r.stream] = r.hi
    gappy -= behind
    if gappy:
        _new_gaps(con, run_id, good, {s: tops[s] for s in sorted(gappy)})
    if behind:
        files.record_seq_gaps(con, run_id, ", ".join(q(s) for s in sorted(behind)))


def _new_gaps(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    good: str,
    tops: dict[str, tuple[int | None, int | None]],
) -> None:
    """`log.seq_gap` among the staged rows of `tops`' streams, all past each stream's
    highest seq before (`tops`: that seq and its source; None for a new stream)."""
    con.register("tops", pa.table({
        "stream": list(tops),
        "top": pa.array([t for t, _ in tops.values()], pa.int64()),
        "top_source": pa.array([s for _, s in tops.values()], pa.int64()),
    }))
    files.find_gaps(
        con,
        f"SELECT stream, seq, ts, source_id, line_no FROM staged "
        f"WHERE {good} AND stream IN (SELECT stream FROM tops) "
        "UNION ALL SELECT stream, top, NULL, top_source, NULL FROM tops WHERE top IS NOT NULL",
    )
    con.unregister("tops")
    # A gap right after the stream's highest seq names the line that holds it.
    for stream, prev_seq, prev_source in con.execute(
        "SELECT stream, prev_seq, prev_source FROM gaps WHERE prev_line IS NULL"
    ).fetchall():
        con.execute(
            "UPDATE gaps SET prev_line = (SELECT min(line_no) FROM events WHERE source_id = "
            f"{int(prev_source)} AND stream = ? AND seq = ?) WHERE stream = ? AND prev_seq = ?",
            [stream, prev_seq, stream, prev_seq],
        )
    files.record_gaps(con, run_id)
