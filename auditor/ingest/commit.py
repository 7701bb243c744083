"""Finishing what ingest loads: the one finisher of a piece, whether a file loaded alone, a
batch of small files or a follower's pieces, and the one writer of `sources` rows (a piece
loaded, an empty file, a refused one).

A finished piece has its manifest row and extents, its bad lines in quarantine with their
`log.malformed`, its good lines in `events` (duplicates left out), its streams' seq ranges and
`log.seq_gap`s; all of it in the caller's transaction.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import duckdb
import pyarrow as pa

from auditor.ingest import log_findings, manifest
from auditor.ingest.growing import Piece, record_pieces
from auditor.ingest.manifest import Empty, Offer, Refusal, Scan
from auditor.ingest.paths import escape_path, one_line
from auditor.ingest.result import FileResult
from auditor.ingest.stage import Counts, Staging, new_source_ids
from auditor.store.given_rows import given_rows
from auditor.store.sql import quote


@dataclass(frozen=True)
class SourceRow:
    """A row of the `sources` manifest: one offer of a file, and what became of it."""

    id: int
    path: str
    sha256: str
    size: int
    status: str  # ingested, empty or refused_altered
    note: str
    lines: int = 0
    events: int = 0
    quarantined: int = 0
    duplicates: int = 0
    first_ts: dt.datetime | str | None = None  # text: a time past Python's years
    last_ts: dt.datetime | str | None = None


_SOURCE_COLUMNS = ("id", "path", "sha256", "size", "lines", "events", "quarantined",
                   "duplicates", "first_ts", "last_ts", "note", "status")


def record_sources(
    con: duckdb.DuckDBPyConnection, rows: Sequence[SourceRow], run_id: int
) -> None:
    """Rows of the manifest, in one statement (an executemany is a statement a row)."""
    table = pa.table({
        name: pa.array([getattr(r, name) for r in rows]) for name in _SOURCE_COLUMNS
    })
    con.register("new_sources", table)
    con.execute(
        f"INSERT INTO sources ({', '.join(_SOURCE_COLUMNS)}, run_id, ingested_at) "
        f"SELECT {', '.join(_SOURCE_COLUMNS)}, {int(run_id)}, now() FROM new_sources"
    )
    con.unregister("new_sources")


def judge(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    run_id: int,
    scan: Future[Scan] | None = None,
    hasher: ThreadPoolExecutor | None = None,
) -> Offer | FileResult:
    """The manifest's decision on a file (`manifest.decide`), carried out when it loads
    nothing: an empty file's row, a refusal; what is left is an Offer to load or a result
    to say."""
    decision = manifest.decide(con, path, scan, hasher)
    if isinstance(decision, Refusal):
        return refuse(con, decision, run_id)
    if isinstance(decision, Empty):
        return record_empty(con, decision, run_id)
    return decision


def refuse(con: duckdb.DuckDBPyConnection, r: Refusal, run_id: int) -> FileResult:
    """Keep a record of the refused offer and raise `log.altered`; load nothing from it."""
    con.execute("BEGIN TRANSACTION")
    [source_id] = new_source_ids(con, 1)
    record_sources(
        con, [SourceRow(source_id, r.resolved, r.sha, r.size, "refused_altered", r.reason)], run_id
    )
    log_findings.record_altered(con, run_id, source_id, r.concerns)
    con.execute("COMMIT")
    return FileResult(
        r.path, "refused_altered", r.sha, r.size, message=f"{escape_path(r.path)}: refused: "
        f"{r.reason}"
    )


def record_empty(con: duckdb.DuckDBPyConnection, e: Empty, run_id: int) -> FileResult:
    """The manifest's row for an empty file, unless the same empty file has one."""
    if e.seen:
        when = f"already recorded as empty on {e.seen:%Y-%m-%d %H:%M} UTC"
    else:
        [source_id] = new_source_ids(con, 1)
        record_sources(
            con,
            [SourceRow(source_id, e.resolved, e.sha, e.size, "empty", "the file holds no lines")],
            run_id,
        )
        when = "recorded in the manifest as empty"
    return FileResult(
        e.path,
        "empty",
        e.sha,
        e.size,
        message=f"{escape_path(e.path)}: empty file, no events to load ({when}); "
        "check that its table system delivered its log",
    )


class Loaded(Protocol):
    """A piece whose rows are staged, as `finish` takes it: what it records and says."""

    @property
    def source_id(self) -> int: ...

    @property
    def path(self) -> Path: ...

    @property
    def resolved(self) -> str: ...

    def file_key(self, con: duckdb.DuckDBPyConnection) -> str:
        """What names the file in its log.malformed fingerprints."""
        ...

    def source(self, c: Counts) -> SourceRow | None:
        """Its `sources` row (None: a piece of a source that has its row)."""
        ...

    def piece(self, c: Counts) -> Piece: ...

    def result(self, c: Counts, per_stream: dict[str, int], problems: list[str]) -> FileResult:
        ...


def loaded_message(path: Path, c: Counts) -> str:
    """How a result starts: the file, its events and lines quarantined, and duplicates."""
    note = f", {c.duplicates} already ingested from another file" if c.duplicates else ""
    return f"{escape_path(path)}: {c.events} events, {c.quarantined} quarantined{note}"


@dataclass
class Loading:
    """An offer of the manifest whose `lines` lines are staged as the new source
    `source_id`."""

    offer: Offer
    source_id: int
    lines: int

    @property
    def path(self) -> Path:
        return self.offer.path

    @property
    def resolved(self) -> str:
        return self.offer.resolved

    @property
    def last_line(self) -> int:
        return self.offer.first_line + self.lines - 1

    def file_key(self, con: duckdb.DuckDBPyConnection) -> str:
        return self.offer.file_key

    def source(self, c: Counts) -> SourceRow:
        o = self.offer
        return SourceRow(
            self.source_id, o.resolved, o.sha, o.size, "ingested", o.note(self.last_line),
            self.lines, c.events, c.quarantined, c.duplicates, c.first_ts, c.last_ts,
        )

    def piece(self, c: Counts) -> Piece:
        return self.offer.piece(
            self.source_id, self.last_line, (c.events, c.quarantined, c.duplicates)
        )

    def result(self, c: Counts, per_stream: dict[str, int], problems: list[str]) -> FileResult:
        return self.offer.result(
            self.source_id,
            self.last_line,
            events=c.events,
            quarantined=c.quarantined,
            duplicates=c.duplicates,
            message=loaded_message(self.path, c) + self.offer.told(self.last_line),
            per_stream=per_stream,
            problems=problems,
        )


def finish(
    con: duckdb.DuckDBPyConnection, rows: Staging, loaded: Sequence[Loaded], run_id: int
) -> list[FileResult]:
    """Finish pieces whose staged rows passed their checks, in the caller's transaction:
    the manifest's rows, the extents, quarantine and `log.malformed`, the good rows kept and
    `log.future_stamp`, the streams' seq ranges and `log.seq_gap`; with each piece's
    result."""
    counts, per_stream = rows.tally()
    problems = rows.problems()
    got = [(x, counts.get(x.source_id, Counts())) for x in loaded]
    sources = [s for x, c in got if (s := x.source(c)) is not None]
    if sources:
        record_sources(con, sources, run_id)
    pieces = [x.piece(c) for x, c in got]
    record_pieces(con, pieces, run_id)
    if problems:
        rows.quarantine()
        for x, _ in got:
            if x.source_id in problems:
                log_findings.record_malformed(
                    con, run_id, x.resolved, x.file_key(con), rows.of_source(x.source_id)
                )
    rows.record_digests([(p.source_id, p.start, p.end) for p in pieces])
    rows.keep(bool(problems))
    by_id = {x.source_id: x for x in loaded}
    ahead = {} if rows.none_ahead(log_findings.AHEAD_TOLERANCE) else (
        log_findings.record_future_stamps(
            con, run_id, rows.kept_sql,
            lambda sid: (by_id[sid].resolved, by_id[sid].file_key(con)),
        ))
    if rows.staged:
        _extend_streams(con, run_id, rows)
    else:
        con.execute(
            "INSERT INTO stream_sources SELECT stream, source_id, min(seq), max(seq), count(*) "
            f"FROM ({rows.kept_sql}) GROUP BY stream, source_id"
        )
        log_findings.record_seq_gaps(con, run_id, f"SELECT DISTINCT stream FROM ({rows.kept_sql})")
    results = [
        x.result(
            c,
            per_stream.get(x.source_id, {}),
            [f"{escape_path(x.path)}:{n}: {one_line(r)}" for n, r in problems.get(x.source_id, [])],
        )
        for x, c in got
    ]
    for r, (x, _) in zip(results, got, strict=True):
        r.ahead = [f"{escape_path(x.path)}:{n}: {said}" for n, said in ahead.get(x.source_id, [])]
    return results


def _extend_streams(con: duckdb.DuckDBPyConnection, run_id: int, rows: Staging) -> None:
    """Widen each source's seq range per stream (`stream_sources`, a summary: one row per
    source and stream, so it does not grow with every poll), and find the seq gaps the new
    events open. Where a stream's new seqs follow its highest one by one, there is none. Where
    they are all past its highest, only gaps among them and after that highest can appear,
    and no standing gap closes: found among the new rows. Only a stream that got a seq below
    its highest is judged again whole (`log_findings.record_seq_gaps`)."""
    got = [r for r in rows.last_ranges() if r.lo is not None and r.hi is not None]
    rows.extended = got
    if not got:
        return
    columns = [("stream", "VARCHAR"), ("source_id", "BIGINT"), ("lo", "BIGINT"),
               ("hi", "BIGINT"), ("n", "BIGINT")]
    with given_rows(con, "piece_ranges", columns,
                    [[getattr(r, c) for r in got] for c, _ in columns]) as (ranges, params):
        had = set(
            con.execute(
                "UPDATE stream_sources SET min_seq = least(min_seq, p.lo), "
                f"max_seq = greatest(max_seq, p.hi), events = events + p.n FROM {ranges} p "
                "WHERE stream_sources.stream = p.stream "
                "AND stream_sources.source_id = p.source_id "
                "RETURNING stream_sources.stream, stream_sources.source_id", params
            ).fetchall()
        )
    new = [r for r in got if (r.stream, r.source_id) not in had]
    if new:  # a stream new to its source
        with given_rows(con, "piece_ranges", columns,
                        [[getattr(r, c) for r in new] for c, _ in columns]) as (ranges, params):
            con.execute(f"INSERT INTO stream_sources SELECT * FROM {ranges}", params)
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
        log_findings.record_new_gaps(
            con, run_id, rows.kept_sql, {s: tops[s] for s in sorted(gappy)}
        )
    if behind:
        log_findings.record_seq_gaps(con, run_id, ", ".join(quote(s) for s in sorted(behind)))
