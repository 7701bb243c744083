"""A file loaded alone, in its own transaction: its blocks read ahead in a second thread and
staged in `events`, held against what is ingested, then finished or refused as altered."""

from __future__ import annotations

from pathlib import Path

import duckdb

from auditor.errors import UserError
from auditor.ingest import commit, lines
from auditor.ingest.commit import Loading
from auditor.ingest.manifest import Offer, Refusal
from auditor.ingest.reader import Progress
from auditor.ingest.result import FileResult
from auditor.ingest.stage import staging


def ingest_file(
    con: duckdb.DuckDBPyConnection, path: Path, run_id: int, progress: Progress | None = None
) -> FileResult:
    """One file, in its own transaction."""
    offer = commit.judge(con, path, run_id)
    if isinstance(offer, FileResult):
        return offer
    return ingest_offer(con, offer, run_id, progress)


def ingest_alone(
    con: duckdb.DuckDBPyConnection, o: Offer, run_id: int, progress: Progress | None
) -> FileResult:
    """One offer in its own transaction; a file that turns out unreadable (corrupt, a
    decompression bomb) is reported as such and the others go on."""
    try:
        return ingest_offer(con, o, run_id, progress)
    except UserError as e:
        return FileResult(o.path, "unreadable", o.sha, o.size, message=str(e))


def ingest_offer(
    con: duckdb.DuckDBPyConnection, o: Offer, run_id: int, progress: Progress | None
) -> FileResult:
    """Load every line of the piece straight into `events` (the one full copy of the data),
    then hold them against what is ingested and finish them, all inside the file's
    transaction; a line that differs from an ingested event refuses the file instead."""
    with staging(con, 1) as rows:
        [source_id] = rows.ids
        last_line = o.first_line - 1
        for b, r in lines.read_ahead(o.blocks()):
            last_line = b.first_line - 1 + r.n_lines
            rows.insert([r], source_id)
            rows.insert_long_lines(source_id, b.long_lines)
            if progress:
                progress(o.path, b.read)
        o.hashes()  # computed meanwhile; a file that changed while it was read ends here
        rows.reject_repeated_seq(source_id)
        altered, concerns = rows.check_overlap(source_id, o.file_id, o.known, o.altered)
        if not altered:
            loaded = Loading(o, source_id, last_line - o.first_line + 1)
            [result] = commit.finish(con, rows, [loaded], run_id)
            rows.commit()
            return result
    return commit.refuse(
        con, Refusal(o.path, o.resolved, o.sha, o.size, altered, concerns), run_id
    )
