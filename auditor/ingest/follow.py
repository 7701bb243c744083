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

The same rules as `bacc-audit ingest` (auditor.ingest.run): bad lines to quarantine with a
`log.malformed` naming file and line, a seq repeated in a file, events already ingested from
another file (skipped when identical, `log.altered` when not), `log.seq_gap`; a last line
without its newline waits for it (auditor.ingest.growing). The first piece a follower loads of
each file goes through batch ingest itself, which also decides whether the file is new,
continued, renamed or altered, and gives the file a `sources` row for this follower; the next
pieces take a path for small pieces (`_store_staged`) that stages the rows in a temporary table
(auditor.ingest.stage) and checks them there, so that a poll costs what the new bytes cost, not
what the night weighs.

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

from auditor.ingest import batch, commit, reader, staged_rows
from auditor.ingest.commit import loaded_message
from auditor.ingest.growing import (
    Digest,
    Layout,
    Piece,
    Tip,
    byte_before,
    cut_complete,
    first_line_after,
)
from auditor.ingest.lines import Rows, read_together, with_ids
from auditor.ingest.manifest import Offer, Refusal
from auditor.ingest.paths import escape_path, open_log
from auditor.ingest.reader import Block
from auditor.ingest.result import FileResult
from auditor.ingest.stage import Counts, Staging, bulk, odd_sources, staging
from auditor.ingest.stream_tops import StreamTops
from auditor.store.db import single
from auditor.store.events import ROUND_EVENTS
from auditor.store.sql import quote

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
# Each file opened for that check is charged as this many bytes: early in a night the files
# are small, and a poll would otherwise open every followed file (500 opens, a poll's
# largest cost when it loads nothing).
VERIFY_OPEN = 64 << 10


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
    # Every round that received events (a round that ended before, and gets more, has late
    # events: `watch` judges them at once), with the earliest stamp among those events, or
    # None if one had none (auditor.jobs.earliest: from when `watch` reads the round).
    rounds_touched: dict[tuple[str, str, int], dt.datetime | None] = field(default_factory=dict)
    # The first seq among the round events loaded of each round, and the rounds in which a
    # cut card was loaded: what the chemin de fer rounds' order follows
    # (auditor.audit.chemin_order).
    round_seqs: dict[tuple[str, str, int], int] = field(default_factory=dict)
    cut_cards: set[tuple[str, str, int]] = field(default_factory=set)
    # The rows committed to `events` just as the fast path typed them (Staging.straight):
    # `watch` replays the rounds that end from them (auditor.audit.round_rows).
    rows: list[pa.Table] = field(default_factory=list)
    # The rounds given a row that is not among `rows` (loaded the batch way, through the
    # per-line path, or in a piece a check changed): `watch` cannot count them from `rows`.
    unheld: set[tuple[str, str, int]] = field(default_factory=set)
    waiting: dict[Path, int] = field(default_factory=dict)  # bytes of a line without newline
    gone: list[Path] = field(default_factory=list)  # followed files no longer there

    @property
    def events(self) -> int:
        return sum(f.events for f in self.files if f.status == "ingested")

    @property
    def quarantined(self) -> int:
        return sum(f.quarantined for f in self.files if f.status == "ingested")

    def _count(self, stream: str, type_: str, n: int) -> None:
        self.types.setdefault(stream, Counter())[type_] += n

    def _touched(self, rows: list[tuple[Any, ...]]) -> None:
        for table, shoe, rnd, ts, seq, cut in rows:
            key = (table, shoe, rnd)
            fold_earliest(self.rounds_touched, key, ts)
            if seq is not None:
                self.round_seqs[key] = min(seq, self.round_seqs.get(key, seq))
            if cut:
                self.cut_cards.add(key)


def fold_earliest(
    into: dict[tuple[str, str, int], dt.datetime | None],
    key: tuple[str, str, int],
    ts: dt.datetime | None,
) -> None:
    """`into[key]` becomes the earlier of it and `ts`; None (a stamp missing) stays None."""
    if key not in into or ((was := into[key]) is not None and (ts is None or ts < was)):
        into[key] = ts


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

    # What `commit.finish` asks of a piece (commit.Loaded).

    @property
    def source_id(self) -> int:
        assert self.state.source_id is not None
        return self.state.source_id

    @property
    def path(self) -> Path:
        return self.state.path

    @property
    def resolved(self) -> str:
        return self.state.resolved

    @property
    def end(self) -> int:
        return self.state.offset + len(self.data)

    def file_key(self, con: duckdb.DuckDBPyConnection) -> str:
        """The key batch ingest names the file by in log.malformed fingerprints: the SHA-256
        of its first line (source_files), else of the bytes read so far."""
        row = con.execute(
            "SELECT head_sha256 FROM source_files WHERE id = ?", [self.state.file_id]
        ).fetchall()
        return (row[0][0] if row else None) or self.hash.hexdigest()

    def source(self, c: Counts) -> None:
        return None  # the source has its row: this follower's, from its first piece

    def piece(self, c: Counts) -> Piece:
        s = self.state
        return Piece(
            self.source_id, s.file_id, s.resolved, s.offset, self.end, s.next_line,
            self.last_line, self.hash.hexdigest(), c.events, c.quarantined, c.duplicates,
            self.waiting, s.device, s.inode,
        )

    def result(self, c: Counts, per_stream: dict[str, int], problems: list[str]) -> FileResult:
        s = self.state
        return FileResult(
            s.path, "ingested", self.hash.hexdigest(), self.end, self.lines, c.events,
            c.quarantined, c.duplicates,
            message=f"{loaded_message(s.path, c)} (lines {s.next_line:,}-{self.last_line:,})",
            per_stream=per_stream, problems=problems, source_id=self.source_id,
            file_id=s.file_id, start_byte=s.offset, end_byte=self.end, first_line=s.next_line,
            last_line=self.last_line, waiting=self.waiting, prefix_hash=self.hash,
        )


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
        # The streams' highest seqs as this follower's commits left them (stream_tops).
        self.tops = StreamTops()
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
        a new file, or `log.altered`.

        Files new to the follower are read first and stored last. A writer writes a file
        before another that sends some of its lines again (a table system resending a
        stretch of its stream): read first, the new file cannot hold lines of a stream whose
        own file was read short of them in the same poll; stored last, a stream's own file
        goes in before a copy of its lines, as in a batch `ingest` of the finished files.
        Otherwise a resend read while the watch lags would take the stream's seqs first, and
        the stream's own file, meeting them changed, would be refused from there on
        (`log.altered`) instead of the resend."""
        out = Poll()
        offers: list[Offer] = []
        seen: dict[Path, os.stat_result] = {}
        staged: list[_Staged] = []
        budget = POLL_TOTAL
        self._verify_some()
        order = list(self._paths)
        if order:
            k = self._turn % len(order)
            order = order[k:] + order[:k]
            self._turn += 1
        # New files first (see above); the rotation kept within each part.
        order = [p for p in order if p not in self._states] + [
            p for p in order if p in self._states]
        for path in order:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                if self._states.pop(path, None) is not None:
                    out.gone.append(path)
                continue
            except OSError as e:
                out.files.append(_unreadable(path, e))
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
                out.files.append(_unreadable(path, e))
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
                reader.MAX_LINE_BYTES,
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
        if staged:
            for piece, result in _store_staged(con, staged, self.run_id, out, self.tops):
                out.files.append(result)
                if result.status == "ingested":
                    _advance(piece, result)
                else:
                    self._stop(piece.state.path, seen.get(piece.state.path))
                    self._states.pop(piece.state.path, None)
        if offers:
            self._store_offers(con, offers, seen, out)
        return out

    # -- checking what was ingested ------------------------------------------------------

    def _verify_some(self) -> None:
        """Hash again up to VERIFY_BYTES of what was ingested (less VERIFY_OPEN for each
        file opened), going on with the check under way or starting the next file's. A file
        that no longer hashes as ingested loses its state: the poll judges it again whole, as
        `ingest` would (`log.altered`)."""
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
                with open_log(v.state.path) as fh:
                    now = os.fstat(fh.fileno())
                    if (now.st_dev, now.st_ino) != (v.state.device, v.state.inode):
                        self._verifying = None  # another file now: the poll sees it
                        continue
                    budget -= VERIFY_OPEN
                    want = min(budget, v.target - v.pos)
                    if want <= 0 < v.target - v.pos:
                        return  # the rest of this file's check at the next poll
                    block = os.pread(fh.fileno(), want, v.pos)
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
        offers: list[Offer],
        seen: dict[Path, os.stat_result],
    ) -> None:
        """Judge a file not followed yet (or no longer the one followed) as `ingest` would,
        hashing it once: nothing new (follow it from its last piece), a piece to load (with
        this poll's first pieces), or a file to stop at (refused, unreadable, gzip)."""
        if self._stopped.get(path) == _signature(st):
            return
        if st.st_size == 0 and not truncated:
            return  # a new file, nothing written yet: nothing to judge
        got = commit.judge(con, path, self.run_id)
        if isinstance(got, Offer):
            offers.append(got)
            seen[path] = st
            return
        if got.status == "already_ingested" and got.file_id is not None:
            try:
                state = self._states[path] = _state_of(path, got, st)
            except OSError as e:
                out.files.append(_unreadable(path, e))
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
        offers: list[Offer],
        seen: dict[Path, os.stat_result],
        out: Poll,
    ) -> None:
        """First pieces, through batch ingest (one transaction, or one per file when they
        overlap); each file loaded gets its state, with this follower's source."""
        gz = {o.path for o in offers if o.layout.gz}
        self.tops.forget()  # the batch way writes `stream_sources` without telling them
        results = batch.store_batch(con, batch.prepare_batch(offers, None), self.run_id, None)
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
        with open_log(state.path) as fh:
            fd = fh.fileno()
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
        data = b"".join(parts)
        if data[:keep] != state.check:
            return None
        return data[keep:], start + len(data) >= st.st_size


def _signature(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _unreadable(path: Path, e: OSError) -> FileResult:
    return FileResult(path, "unreadable", message=reader.cannot_read(path, e))


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
    with open_log(path) as fh:
        check = os.pread(fh.fileno(), min(CHECK_BYTES, end), end - min(CHECK_BYTES, end))
    return _State(
        path, escape_path(path.resolve()), st.st_dev, st.st_ino, r.size, st.st_mtime_ns, end,
        r.last_line, next_line, r.prefix_hash, r.file_id, r.source_id,
        escape_path(path.resolve()), source_id, check, r.waiting,
    )


def _offer_from(
    state: _State, st: os.stat_result, new: bytes, take: int, h: Any
) -> Offer:
    """The first piece this follower loads of a file it found ingested already: an offer
    for batch ingest built from the state (no hashing again), continuing the last piece."""
    whole = h.copy()
    whole.update(memoryview(new)[take:])
    size = state.offset + len(new)
    layout = Layout(size, state.offset + take, False, None, st.st_dev, st.st_ino)
    tip = Tip(state.file_id, state.last_source, state.last_path, state.offset,
              state.last_line, state.hash.hexdigest(), dt.datetime.now(dt.UTC))
    digest = Digest(whole.hexdigest(), h.hexdigest(), h, {})
    return Offer(
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


# The rounds a poll's events name, each with the earliest stamp among them (NULL if one has
# none), the first seq among its round events and whether a cut card came out in it
# (Poll._touched).
TOUCHED = (
    "SELECT table_id, shoe, round, CASE WHEN count(ts) = count(*) THEN min(ts) END, "
    f"min(seq) FILTER (type IN ({', '.join(map(quote, ROUND_EVENTS))})), "
    "bool_or(type = 'cut_card')"
)
TOUCHED_WHERE = "shoe IS NOT NULL AND round IS NOT NULL AND table_id IS NOT NULL"


def _key(x: Any) -> tuple[str, str, int]:
    """A (table, shoe, round) struct as DuckDB gives it (a dict or a tuple)."""
    return tuple(x.values()) if isinstance(x, dict) else tuple(x)


def _count_loaded(con: duckdb.DuckDBPyConnection, ids: list[int], out: Poll) -> None:
    """Event types and round ends of the first pieces just committed (new sources: their
    rows are the last ones written, which DuckDB finds without reading the others)."""
    sources = ", ".join(str(int(i)) for i in ids)
    for stream, type_, n in con.execute(
        f"SELECT stream, type, count(*) FROM events WHERE source_id IN ({sources}) "
        "GROUP BY ALL ORDER BY ALL"
    ).fetchall():
        out._count(stream, type_, n)
    out.rounds_ended += con.execute(
        f"SELECT table_id, shoe, round FROM events WHERE source_id IN ({sources}) "
        "AND type = 'round_end' ORDER BY ALL"
    ).fetchall()
    touched = con.execute(f"{TOUCHED} FROM events WHERE source_id IN ({sources}) "
                          f"AND {TOUCHED_WHERE} GROUP BY ALL").fetchall()
    out._touched(touched)
    out.unheld.update((t, s, r) for t, s, r, *_ in touched)


# -- small pieces ---------------------------------------------------------------------------


def _store_staged(
    con: duckdb.DuckDBPyConnection, pieces: list[_Staged], run_id: int, out: Poll,
    tops: StreamTops,
) -> list[tuple[_Staged, FileResult]]:
    """Small pieces of files that have their source, in one transaction with their
    `source_extents` rows.

    The common case costs a few statements over the staged rows alone: every seq new to its
    stream and past the stream's highest, none repeated (`stage.bulk`). A poll that is not
    so goes piece by piece, and a piece that repeats a seq or meets events already ingested
    goes through the same checks as a batch file (auditor.ingest.stage: repeats, duplicates,
    `log.altered`, gaps judged over the whole stream)."""
    for p in pieces:
        p.blocks = list(reader.split(p.data, lambda: b"", lambda: 0, p.state.next_line))
    rows_read, counts = read_together([p.blocks for p in pieces])
    for p, n in zip(pieces, counts, strict=True):
        p.lines = n
    ids = np.array([p.source_id for p in pieces])
    altered, concerns = "", None
    results: list[FileResult] = []
    plain = False
    with staging(con, ids.tolist(), staged=True) as rows:
        rows.tops = tops
        rows.insert([Rows(with_ids(rows_read.typed, ids), with_ids(rows_read.lines, ids),
                          rows_read.n_lines)])
        for p in pieces:
            rows.insert_long_lines(p.source_id, [x for b in p.blocks for x in b.long_lines])
        ranges = rows.ranges(named=bool(rows.problems()))
        plain = bulk(ranges, past_top=True)
        if not plain and len(pieces) == 1:
            sid = int(ids[0])
            rows.reject_repeated_seq(sid)
            altered, concerns = rows.check_overlap(sid, pieces[0].state.file_id)
        if plain or (len(pieces) == 1 and not altered):
            results, kept, touched = _finish(con, rows, pieces, run_id, out)
            rows.commit()
            tops.committed(rows.extended)
            if rows.straight is not None and rows.straight.num_rows == kept:
                out.rows.append(rows.straight)
            else:
                out.unheld.update(touched)
    if not plain and len(pieces) > 1:
        # The files that make the poll unusual go one by one; the others stay together (a
        # floor of tables always has one file doing something unusual).
        odd = odd_sources(ranges)
        calm = [p for p in pieces if p.source_id not in odd]
        if not odd or not calm:
            return [x for p in pieces for x in _store_staged(con, [p], run_id, out, tops)]
        rough = [p for p in pieces if p.source_id in odd]
        return [
            *_store_staged(con, calm, run_id, out, tops),
            *(x for p in rough for x in _store_staged(con, [p], run_id, out, tops)),
        ]
    if altered:
        p = pieces[0]
        refusal = Refusal(p.path, p.resolved, p.hash.hexdigest(), p.end, altered, concerns)
        return [(p, commit.refuse(con, refusal, run_id))]
    return list(zip(pieces, results, strict=True))  # finish answers in their order


def _finish(
    con: duckdb.DuckDBPyConnection, rows: Staging, pieces: list[_Staged], run_id: int, out: Poll
) -> tuple[list[FileResult], int, set[tuple[str, str, int]]]:
    """The pieces finished (commit.finish), with what the poll tells its caller of them: the
    event types each stream received, and the rounds that ended. Also the events kept and
    the rounds they touched."""
    types, touched = _loaded(con, rows)
    for stream, type_, n, ended in types:
        out._count(stream, type_, n)
        out.rounds_ended += ended
    out._touched(touched)
    kept = sum(n for _, _, n, _ in types)
    return (commit.finish(con, rows, pieces, run_id), kept,
            {(t, s, r) for t, s, r, *_ in touched})


Loaded = tuple[list[tuple[Any, Any, int, list[tuple[str, str, int]]]], list[tuple[Any, ...]]]


def _loaded(con: duckdb.DuckDBPyConnection, rows: Staging) -> Loaded:
    """Per source, stream and type the events to load and the rounds that ended (in seq
    order), and the rounds touched (TOUCHED): from the rows as read in Python when they were
    (auditor.ingest.staged_rows), else by asking DuckDB (`_loaded_sql`)."""
    kept = rows.kept_rows()
    if kept is None:
        return _loaded_sql(con, rows.kept_sql)
    return staged_rows.loaded_types(kept), list(staged_rows.touched(kept))


def _loaded_sql(con: duckdb.DuckDBPyConnection, kept_sql: str) -> Loaded:
    types = [
        (stream, type_, n, [_key(x) for x in ended or ()])
        for stream, type_, n, ended in con.execute(
            "SELECT stream, type, count(*), "
            "list((table_id, shoe, round) ORDER BY seq) FILTER (type = 'round_end') "
            f"FROM ({kept_sql}) GROUP BY source_id, stream, type "
            "ORDER BY source_id, stream, type"
        ).fetchall()
    ]
    return types, con.execute(
        f"{TOUCHED} FROM ({kept_sql}) WHERE {TOUCHED_WHERE} GROUP BY ALL").fetchall()
