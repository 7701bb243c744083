"""Load table event logs (event log v1, JSONL or JSONL.gz) into the audit database.

Each file is one transaction: its good lines become events, its bad lines go to quarantine
with the reason, and its hash goes to the sources manifest. Lines are split in Python (a few
vectorised numpy calls) and handed to DuckDB as Arrow, where `auditor.ingest.validate` checks them
all in one SELECT.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from auditor.errors import UserError
from auditor.ingest.validate import staging_select
from auditor.store import findings
from auditor.store.db import one, single
from auditor.store.events import FIELDS

SUFFIXES = (".jsonl", ".jsonl.gz")
GZIP_MAGIC = b"\x1f\x8b"
CHUNK_BYTES = 64 << 20
SMALL_FILE = 16 << 20  # files below this are validated together (see `ingest`)
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
    """What happened to one file; `status` is ingested, already_ingested, refused_altered or
    unreadable."""

    path: Path
    status: str
    sha256: str = ""
    size: int = 0
    lines: int = 0
    events: int = 0
    quarantined: int = 0
    duplicates: int = 0
    message: str = ""
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


def discover(paths: Sequence[Path | str]) -> tuple[list[Path], list[str]]:
    """Expand directories (recursively) to their log files.

    Returns the files and one sentence per path that gave none, so the good paths still load.
    """
    found: list[Path] = []
    errors: list[str] = []
    for p in map(Path, paths):
        if not p.exists():
            errors.append(f"{p}: no such file or directory")
        elif p.is_dir():
            logs = sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(SUFFIXES))
            if logs:
                found.extend(logs)
            else:
                errors.append(f"{p}: nothing to ingest (no .jsonl or .jsonl.gz files in it)")
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


def iter_blocks(path: Path, chunk_bytes: int | None = None) -> Iterator[tuple[bytes, int]]:
    """Blocks of whole lines, with the count of file bytes read so far (for progress)."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    gz = _is_gzip(path)
    if path.name.endswith(".gz") and not gz:
        raise UserError(f"{path}: not a gzip file (it does not start with the gzip signature)")
    with path.open("rb") as raw_fh:
        fh = gzip.GzipFile(fileobj=raw_fh, mode="rb") if gz else raw_fh
        rest = b""
        first = True
        while True:
            try:
                data = fh.read(chunk_bytes)
            except (OSError, EOFError, zlib.error) as e:
                raise UserError(f"{path}: corrupt gzip data ({e})") from None
            if first:
                # A UTF-8 byte order mark is not part of the first line (read enough to see).
                while len(data) < 3 and (more := fh.read(chunk_bytes)):
                    data += more
                if data.startswith(b"\xef\xbb\xbf"):
                    data = data[3:]
                    if not data:  # the mark was all of the first read; the lines follow
                        first = False
                        continue
                first = False
                if not data:
                    return
            if not data:
                if rest:
                    yield rest, raw_fh.tell()
                return
            data = rest + data
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                rest = data
                continue
            rest = data[cut:]
            yield data[:cut], raw_fh.tell()


def lines_table(block: bytes, first_line_no: int) -> pa.Table:
    """An Arrow table (line_no, line, utf8_ok) over `block` without copying the text."""
    utf8_ok = True
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        utf8_ok = False
    buf = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10) + 1
    if len(block) and block[-1:] != b"\n":
        ends = np.append(ends, len(block))
    n = len(ends)
    if utf8_ok:
        ok = np.ones(n, dtype=bool)
    else:
        ok, block = _mend_utf8(block, ends)
        buf = np.frombuffer(block, dtype=np.uint8)
        ends = np.flatnonzero(buf == 10) + 1
        if len(block) and block[-1:] != b"\n":
            ends = np.append(ends, len(block))
    offsets = np.zeros(n + 1, dtype=np.int64)
    offsets[1:] = ends
    lines = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(block))
    table = pa.table(
        {
            "line_no": np.arange(first_line_no, first_line_no + n, dtype=np.int64),
            "line": lines,
            "utf8_ok": ok,
        }
    )
    return pa.Table.from_batches(table.to_batches(max_chunksize=BATCH_ROWS), table.schema)


def _mend_utf8(block: bytes, ends: np.ndarray) -> tuple[np.ndarray, bytes]:
    """Mark lines that are not UTF-8 and replace their bad bytes, so the rest can load."""
    ok = np.ones(len(ends), dtype=bool)
    parts: list[bytes] = []
    start = 0
    for i, end in enumerate(ends.tolist()):
        line = block[start:end]
        try:
            line.decode("utf-8")
            parts.append(line)
        except UnicodeDecodeError:
            ok[i] = False
            parts.append(line.decode("utf-8", errors="replace").encode("utf-8"))
        start = end
    return ok, b"".join(parts)


def ingest(
    con: duckdb.DuckDBPyConnection,
    paths: Sequence[Path | str],
    run_id: int,
    progress: Progress | None = None,
) -> IngestResult:
    """Ingest every log file under `paths`; one file's failure does not stop the others.

    Files under SMALL_FILE bytes are validated together, up to CHUNK_BYTES at a time, in one
    transaction (the bulk check has a fixed cost per statement that thousands of table files
    a day would otherwise pay one by one); bigger files load alone, each in its own."""
    files, errors = discover(paths)
    results: list[FileResult] = []
    batch: list[_Offer] = []

    def flush() -> None:
        if batch:
            results.extend(_ingest_batch(con, batch, run_id, progress))
            batch.clear()

    for f in files:
        try:
            offer = _offer(con, f, run_id)
            if isinstance(offer, FileResult):
                results.append(offer)
            elif offer.size >= SMALL_FILE:
                flush()
                results.append(_ingest_offer(con, offer, run_id, progress))
            else:
                if any(o.sha == offer.sha or o.resolved == offer.resolved for o in batch):
                    flush()  # the earlier copy must be committed for this one to be judged
                    results.append(ingest_file(con, f, run_id, progress))
                    continue
                batch.append(offer)
                if sum(o.size for o in batch) >= CHUNK_BYTES:
                    flush()
        except UserError as e:
            results.append(FileResult(f, "unreadable", message=str(e)))
    flush()
    order = {f: i for i, f in enumerate(files)}
    results.sort(key=lambda r: order.get(r.path, len(order)))
    return IngestResult(run_id, results, errors)


@dataclass
class _Offer:
    """A file that passed the manifest checks and is to be loaded."""

    path: Path
    resolved: str
    sha: str
    size: int


def _offer(con: duckdb.DuckDBPyConnection, path: Path, run_id: int) -> _Offer | FileResult:
    """Check a file against the manifest: already ingested, or altered since, end here."""
    try:
        sha, size = sha256_of(path)
    except OSError as e:
        return FileResult(path, "unreadable", message=f"{path}: cannot read ({e.strerror})")
    resolved = str(path.resolve())
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
            message=f"{path}: already ingested{where} on {when}; nothing new",
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


def ingest_file(
    con: duckdb.DuckDBPyConnection, path: Path, run_id: int, progress: Progress | None = None
) -> FileResult:
    """One file, in its own transaction."""
    offer = _offer(con, path, run_id)
    if isinstance(offer, FileResult):
        return offer
    return _ingest_offer(con, offer, run_id, progress)


def _ingest_offer(
    con: duckdb.DuckDBPyConnection, o: _Offer, run_id: int, progress: Progress | None
) -> FileResult:
    con.execute("BEGIN TRANSACTION")
    try:
        result = _load(con, o.path, o.resolved, o.sha, o.size, run_id, progress)
    except BaseException:
        con.execute("ROLLBACK")
        raise
    if result.status == "refused_altered":
        con.execute("ROLLBACK")
        return _refuse_altered(con, o.path, o.resolved, o.sha, o.size, run_id, result.message)
    con.execute("COMMIT")
    return result


def _ingest_batch(
    con: duckdb.DuckDBPyConnection,
    offers: list[_Offer],
    run_id: int,
    progress: Progress | None,
) -> list[FileResult]:
    """Small files in one statement and one transaction. Only the common case is done in
    bulk: when a file repeats a seq or shares a stream's seq range with another file (here
    or already ingested), the batch is rolled back and each file goes alone, so duplicates
    and altered files are judged exactly as `ingest_file` judges them."""
    readable: list[tuple[_Offer, list[pa.Table]]] = []
    results: list[FileResult] = []
    for o in offers:
        try:
            parts: list[pa.Table] = []
            lines = 0
            for block, read in iter_blocks(o.path):
                parts.append(lines_table(block, lines + 1))
                lines += parts[-1].num_rows
                if progress:
                    progress(o.path, read)
        except UserError as e:
            results.append(FileResult(o.path, "unreadable", message=str(e)))
            continue
        readable.append((o, parts))
    if not readable:
        return results
    con.execute("BEGIN TRANSACTION")
    try:
        ids = [int(single(con, "SELECT nextval('source_id_seq')")[0]) for _ in readable]
        parts = [
            t.append_column("source_id", pa.array(np.full(t.num_rows, i, dtype=np.int64)))
            for i, (_, tables) in zip(ids, readable, strict=True)
            for t in tables
        ]
        if parts:
            con.register("chunk", pa.concat_tables(parts))
            cols = ", ".join((*EVENT_COLUMNS, "rejected"))
            select = staging_select("chunk", "source_id")
            con.execute(f"INSERT INTO events ({cols}) SELECT {cols} FROM ({select})")
            con.unregister("chunk")
        con.execute(
            "CREATE OR REPLACE TEMP VIEW this AS SELECT * FROM events "
            f"WHERE source_id IN ({', '.join(map(str, ids))})"
        )
        one_by_one = _batch_needs_one_by_one(con)
        if not one_by_one:
            counts = [sum(t.num_rows for t in tables) for _, tables in readable]
            results += _finish_batch(
                con, [(o, i, n) for (o, _), i, n in zip(readable, ids, counts, strict=True)],
                run_id,
            )
    except BaseException:
        con.execute("ROLLBACK")
        raise
    if one_by_one:
        con.execute("ROLLBACK")
        return results + [_ingest_offer(con, o, run_id, progress) for o, _ in readable]
    con.execute("COMMIT")
    return results


def _batch_needs_one_by_one(con: duckdb.DuckDBPyConnection) -> bool:
    """A seq repeated within a file, or a stream seq range shared with another file of the
    batch or an earlier one: cases the per-file path judges line by line."""
    return bool(
        single(
            con,
            """
            WITH ranges AS (
              SELECT source_id, stream, min(seq) AS lo, max(seq) AS hi, count(*) AS n,
                     count(DISTINCT seq) AS seqs
              FROM this WHERE rejected IS NULL GROUP BY source_id, stream
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
    con.executemany(INSERT_SOURCE, rows)
    problems: dict[int, list[tuple[int, str]]] = {}
    for source_id, line_no, reason in con.execute(
        "SELECT source_id, line_no, rejected FROM this WHERE rejected IS NOT NULL "
        "ORDER BY source_id, line_no"
    ).fetchall():
        problems.setdefault(source_id, []).append((line_no, reason))
    if problems:
        con.execute(
            "INSERT INTO quarantine SELECT source_id, line_no, rejected, raw FROM this "
            "WHERE rejected IS NOT NULL ORDER BY source_id, line_no"
        )
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
                message=f"{o.path}: {events} events, {quarantined} quarantined",
                per_stream=per_stream.get(source_id, {}),
                problems=[f"{o.path}:{n}: {r}" for n, r in problems.get(source_id, [])],
            )
        )
    return out


def _load(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    resolved: str,
    sha: str,
    size: int,
    run_id: int,
    progress: Progress | None,
) -> FileResult:
    """Load every line straight into `events` (the one full copy of the data), then move
    the rejected lines to quarantine and drop duplicates, all inside the file's transaction.
    """
    source_id = int(single(con, "SELECT nextval('source_id_seq')")[0])
    select = staging_select("chunk", str(source_id))
    cols = ", ".join((*EVENT_COLUMNS, "rejected"))
    lines = 0
    for block, read in iter_blocks(path):
        chunk = lines_table(block, lines + 1)
        lines += chunk.num_rows
        con.register("chunk", chunk)
        con.execute(f"INSERT INTO events ({cols}) SELECT {cols} FROM ({select})")
        con.unregister("chunk")
        if progress:
            progress(path, read)
    # From here on the file's rows are `this`; committed rows of other files never change.
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW this AS SELECT * FROM events WHERE source_id = {source_id}"
    )

    _reject_repeated_seq(con, source_id)
    altered = _check_overlap(con)
    if altered:
        return FileResult(path, "refused_altered", sha, size, lines, message=altered)

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
    con.execute(
        "INSERT INTO quarantine SELECT source_id, line_no, rejected, raw FROM this "
        "WHERE rejected IS NOT NULL ORDER BY line_no"
    )
    _record_malformed(con, run_id, resolved, sha)
    problems = [
        f"{path}:{line_no}: {reason}"
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
        message=f"{path}: {events} events, {quarantined} quarantined{note}",
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


def _check_overlap(con: duckdb.DuckDBPyConnection) -> str:
    """Events of this file already in the database: identical ones are skipped as
    duplicates (table `dups`); a different one means a log was altered, and the message says
    where."""
    earlier = _ids(
        con,
        """
        SELECT DISTINCT r.source_id FROM stream_sources r
        JOIN (SELECT stream, min(seq) AS lo, max(seq) AS hi FROM this
              WHERE rejected IS NULL GROUP BY stream) t
          ON r.stream = t.stream AND r.min_seq <= t.hi AND r.max_seq >= t.lo
        """,
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE overlap AS
        SELECT s.line_no, s.stream, s.seq, e.source_id AS other_source, e.line_no AS other_line,
               (s.raw = e.raw OR try(json(s.raw) = json(e.raw))) AS same
        FROM this s JOIN events e
          ON e.stream = s.stream AND e.seq = s.seq AND e.source_id <> s.source_id
        WHERE s.rejected IS NULL AND e.rejected IS NULL AND e.source_id IN ({earlier})
        """
    )
    differ = one(
        con,
        "SELECT o.stream, o.seq, o.line_no, src.path, o.other_line, "
        "count(*) OVER () FROM overlap o JOIN sources src ON src.id = o.other_source "
        "WHERE NOT coalesce(o.same, false) ORDER BY o.line_no LIMIT 1",
    )
    if differ:
        stream, seq, line_no, other, other_line, n = differ
        return (
            f"line {line_no} ({stream.replace(':', ' ')} seq {seq}) differs from the event "
            f"already ingested from {other}:{other_line} "
            f"({n} {'event differs' if n == 1 else 'events differ'})"
        )
    con.execute("CREATE OR REPLACE TEMP TABLE dups AS SELECT line_no FROM overlap WHERE same")
    return ""


def _refuse_altered(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    resolved: str,
    sha: str,
    size: int,
    run_id: int,
    reason: str,
) -> FileResult:
    """Keep a record of the refused offer and raise `log.altered`; load nothing from it."""
    message = f"{path}: refused: {reason}"
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
               NULL::BIGINT AS seq, ingested_at AS ts,
               path || ' was refused as altered: ' || note AS message,
               to_json({{'content': 'identical to the file already ingested'}}) AS expected,
               to_json({{'sha256': sha256, 'reason': note}}) AS observed,
               path AS source, to_json({{'source_id': id}}) AS evidence
        FROM sources WHERE id = {int(source_id)}
        """,
    )
    con.execute("COMMIT")
    return FileResult(path, "refused_altered", sha, size, message=message)


def _record_malformed(
    con: duckdb.DuckDBPyConnection, run_id: int, path: str, sha: str, view: str = "this"
) -> None:
    """One `log.malformed` per quarantined line, timed by the line or the good line before it."""
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
               coalesce(q.ts, g.ts, now()) AS ts,
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
