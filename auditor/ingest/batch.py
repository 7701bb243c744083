"""Small files loaded together: read and split in a second thread (`prepare_batch`), then
staged and finished in one transaction (`store_batch`), so that thousands of table files a day
do not each pay a statement's fixed cost. A batch that meets anything unusual goes file by file
(auditor.ingest.load), judged exactly as a file alone."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np

from auditor.errors import UserError
from auditor.ingest import commit, load, reader
from auditor.ingest.commit import Loading
from auditor.ingest.lines import Rows, read_together, with_ids
from auditor.ingest.manifest import Offer
from auditor.ingest.reader import Block, LongLine, Progress
from auditor.ingest.result import FileResult
from auditor.ingest.stage import bulk, staging


@dataclass
class Prepared:
    """A batch of small files read and split between the two paths (`prepare_batch`),
    waiting for its transaction (`store_batch`). The rows carry `file` (an index into
    `readable`) where the events table has source_id, which only the transaction gives."""

    readable: list[tuple[Offer, list[LongLine], int]]  # offer, long lines, lines
    rows: Rows | None
    results: list[FileResult]  # the files that could not be read
    alone: list[Offer]  # turned out too big for a batch
    later: list[Offer]  # left over once a batch's bytes were held


def prepare_batch(offers: list[Offer], progress: Progress | None) -> Prepared:
    """Read a batch of small files and split their lines between the fast path and the
    per-line path: no database, so it runs in a second thread while the previous batch
    loads.

    Memory is bounded by what is read, not by what the sizes promised: a file that holds
    SMALL_FILE bytes of text or more goes alone, and once `CHUNK_BYTES` are held the files
    left over make a batch of their own."""
    out = Prepared([], None, [], [], [])
    blocks: list[list[Block]] = []
    read: list[tuple[Offer, list[LongLine]]] = []
    held = 0
    for k, o in enumerate(offers):
        if held >= reader.CHUNK_BYTES:
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
        out.rows, counts = read_together(blocks)
        out.readable = [(o, long, n) for (o, long), n in zip(read, counts, strict=True)]
    return out


def store_batch(
    con: duckdb.DuckDBPyConnection, p: Prepared, run_id: int, progress: Progress | None
) -> list[FileResult]:
    """A prepared batch in one transaction. Only the common case is done in bulk
    (`stage.bulk`): when a file repeats a seq or shares a stream's seq range with another
    file (here or already ingested), the batch is rolled back and each file goes alone, so
    duplicates and altered files are judged exactly as `load.ingest_file` judges them."""
    results = list(p.results)
    one_by_one = False
    if p.readable:
        with staging(con, len(p.readable)) as rows:
            ids = np.array(rows.ids)
            if p.rows is not None:
                rows.insert([Rows(with_ids(p.rows.typed, ids), with_ids(p.rows.lines, ids),
                                  p.rows.n_lines)])
            for i, (_, long_lines, _) in zip(rows.ids, p.readable, strict=True):
                rows.insert_long_lines(i, long_lines)
            one_by_one = not bulk(rows.ranges(named=True, stored=True), past_top=False)
            if not one_by_one:
                loaded = [
                    Loading(o, i, n) for (o, _, n), i in zip(p.readable, rows.ids, strict=True)
                ]
                results += commit.finish(con, rows, loaded, run_id)
                rows.commit()
        if one_by_one:
            results += [load.ingest_alone(con, o, run_id, progress) for o, _, _ in p.readable]
    results += [load.ingest_alone(con, o, run_id, progress) for o in p.alone]
    if p.later:  # offered again: a copy of one of them may have been committed since
        again = [commit.judge(con, o.path, run_id) for o in p.later]
        results += [x for x in again if isinstance(x, FileResult)]
        rest = [x for x in again if isinstance(x, Offer)]
        if rest:
            results += store_batch(con, prepare_batch(rest, progress), run_id, progress)
    return results


def _read_small(
    o: Offer, progress: Progress | None
) -> tuple[list[Block], list[LongLine], int] | None:
    """A small file's blocks, its long lines and its bytes of text; None once it turns out to
    hold SMALL_FILE bytes or more (a gzip trailer that understated)."""
    parts: list[Block] = []
    long_lines: list[LongLine] = []
    text_bytes = 0
    for b in o.blocks():
        text_bytes += len(b.data)
        if text_bytes >= reader.SMALL_FILE:
            return None
        parts.append(b)
        long_lines += b.long_lines
        if progress:
            progress(o.path, b.read)
    return parts, long_lines, text_bytes
