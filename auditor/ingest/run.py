"""`ingest`: the orchestration of a run over many files, the policy of what loads alone and
what in batches, and the threads that hash and read ahead while the database works."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import duckdb
import pyarrow as pa

from auditor.errors import UserError
from auditor.ingest import batch, commit, load, reader
from auditor.ingest.batch import Prepared
from auditor.ingest.manifest import Offer, Scan, scan_file
from auditor.ingest.paths import discover
from auditor.ingest.reader import Progress
from auditor.ingest.result import FileResult, IngestResult
from auditor.store import stream_sources


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
    while this one loads; bigger files load alone, each in its own. A file that grew since
    a piece of it was ingested loads only what follows that piece (`manifest.decide`).
    Not over a per-stream summary changed outside the product (store/stream_sources.py):
    the seq gaps and resends of the new lines are judged through it."""
    stream_sources.refuse_untrusted(con)
    files, errors = discover(paths)
    results: list[FileResult] = []
    gathered: list[Offer] = []
    batch_bytes = 0

    # The hashes, paths and file identities of the batches not yet committed.
    held: set[str] = set()
    pending: Future[Prepared] | None = None

    def flush(wait: bool = False) -> None:
        """Hand the batch to the reader thread and commit the one before it, which was read
        meanwhile; with `wait`, commit this one too (before a file that must see it)."""
        nonlocal batch_bytes, pending
        ready = pending
        pending = (
            reading.submit(batch.prepare_batch, list(gathered), progress) if gathered else None
        )
        gathered.clear()
        batch_bytes = 0
        if ready is not None:
            results.extend(batch.store_batch(con, ready.result(), run_id, progress))
        if wait and pending is not None:
            ready, pending = pending, None
            results.extend(batch.store_batch(con, ready.result(), run_id, progress))
        ready = None
        pa.default_memory_pool().release_unused()  # give back what the batch held
        if pending is None:
            held.clear()

    with (
        ThreadPoolExecutor(1, thread_name_prefix="ingest-hash") as hasher,
        ThreadPoolExecutor(1, thread_name_prefix="ingest-read") as reading,
    ):
        ahead = _HashAhead(files, hasher)
        for i, f in enumerate(files):
            try:
                offer = commit.judge(con, f, run_id, ahead.scan(i), hasher)
                if isinstance(offer, FileResult):
                    results.append(offer)
                    continue
                text_bytes = offer.text_size
                if text_bytes >= reader.SMALL_FILE:
                    flush(wait=True)
                    results.append(load.ingest_alone(con, offer, run_id, progress))
                else:
                    keys = offer.keys()
                    if keys & held:
                        # An earlier copy or piece of it must be committed first; then it is
                        # judged again against that.
                        flush(wait=True)
                        results.append(load.ingest_file(con, f, run_id, progress))
                        continue
                    gathered.append(offer)
                    held.update(keys)
                    batch_bytes += text_bytes
                    if batch_bytes >= reader.CHUNK_BYTES:
                        flush()
            except UserError as e:
                results.append(FileResult(f, "unreadable", message=str(e)))
        flush(wait=True)
    order = {f: i for i, f in enumerate(files)}
    results.sort(key=lambda r: order.get(r.path, len(order)))
    return IngestResult(run_id, results, errors)


class _HashAhead:
    """The SHA-256 of the next small files, computed in a second thread while this one loads
    (hashlib lets go of the GIL). A big file is hashed while it loads instead
    (`manifest.decide`)."""

    AHEAD = 8

    def __init__(self, files: list[Path], hasher: ThreadPoolExecutor) -> None:
        self.files = files
        self.hasher = hasher
        self.pending: dict[int, Future[Scan]] = {}

    def scan(self, i: int) -> Future[Scan] | None:
        for k in range(i + 1, min(i + 1 + self.AHEAD, len(self.files))):
            if k not in self.pending and _size(self.files[k]) < reader.SMALL_FILE:
                self.pending[k] = self.hasher.submit(scan_file, self.files[k])
        return self.pending.pop(i, None)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return reader.SMALL_FILE  # not hashed ahead: the manifest says why it cannot be read
