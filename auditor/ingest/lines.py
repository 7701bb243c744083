"""Lines into Arrow rows: a block of whole lines split between the fast path (typed in bulk by
`auditor.ingest.fast`) and the per-line path (checked in SQL by `auditor.ingest.validate`).

No database here: the rows are handed to `auditor.ingest.stage`, which inserts them."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from auditor.ingest import fast
from auditor.ingest.reader import Block

BATCH_ROWS = 1 << 16


def line_ends(block: bytes) -> np.ndarray:
    """The offset just past each line of `block` (its newline, or the end of the block).
    Found 4 MB at a time: a fresh 64 MB temporary costs more in page faults than the work."""
    whole = np.frombuffer(block, dtype=np.uint8)
    step = 4 << 20
    parts = [np.flatnonzero(whole[lo : lo + step] == 10) + (lo + 1)
             for lo in range(0, len(whole), step)]
    ends = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if len(block) and block[-1:] != b"\n":
        ends = np.append(ends, len(block))
    return ends


def lines_table(
    block: bytes, ends: np.ndarray, first_line_no: int
) -> tuple[pa.Table, bytes, np.ndarray]:
    """An Arrow table (line_no, line, utf8_ok, raw_bytes) over `block` without copying the
    text; `raw_bytes` holds a line's own bytes where they are not UTF-8 (`line` shows them
    as U+FFFD), else null. With it, the block as that text and the text's line ends."""
    utf8_ok = True
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        utf8_ok = False
    n = len(ends)
    if utf8_ok:
        ok = np.ones(n, dtype=bool)
        kept = pa.nulls(n, pa.binary())
    else:
        ok, block, originals = _mend_utf8(block, ends)
        kept = pa.array(originals, pa.binary())
        ends = line_ends(block)
    offsets = np.zeros(n + 1, dtype=np.int64)
    offsets[1:] = ends
    lines = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(block))
    table = pa.table(
        {
            "line_no": np.arange(first_line_no, first_line_no + n, dtype=np.int64),
            "line": lines,
            "utf8_ok": ok,
            "raw_bytes": kept,
        }
    )
    batches = table.to_batches(max_chunksize=BATCH_ROWS)
    return pa.Table.from_batches(batches, table.schema), block, ends


class Rows(NamedTuple):
    """A block's lines as the two paths take them: `typed`, accepted by the fast path
    (`auditor.ingest.fast`), and `lines`, left to the per-line check (`lines_table` rows)."""

    typed: pa.Table | None
    lines: pa.Table | None
    n_lines: int  # lines in the block, blank ones included


def read_rows(block: bytes, first_line_no: int) -> Rows:
    """A block's lines, split between the fast path and the per-line path; a line that is
    not UTF-8 always takes the per-line path, which quarantines it with its bytes."""
    lines, text, ends = lines_table(block, line_ends(block), first_line_no)
    if not fast.ENABLED:
        return Rows(None, lines, len(ends))
    bad = np.flatnonzero(~lines.column("utf8_ok").to_numpy())
    split = fast.split_block(text, ends, first_line_no, bad)
    slow = lines.take(pa.array(split.slow)) if len(split.slow) else None
    return Rows(split.typed, slow, len(ends))


def read_ahead(blocks: Iterator[Block]) -> Iterator[tuple[Block, Rows]]:
    """Each block with its rows, the next one read (parsed, checked) in a second thread
    while the caller loads this one: both cores stay busy, since pyarrow and DuckDB let go
    of the GIL while they work. At most two blocks are held."""

    def read(b: Block) -> tuple[Block, Rows]:
        return b, read_rows(b.data, b.first_line)

    with ThreadPoolExecutor(1, thread_name_prefix="ingest-read") as pool:
        ahead: Future[tuple[Block, Rows]] | None = None
        for b in blocks:
            nxt = pool.submit(read, b)
            if ahead is not None:
                yield ahead.result()
            ahead = nxt
        if ahead is not None:
            yield ahead.result()


def _mend_utf8(
    block: bytes, ends: np.ndarray
) -> tuple[np.ndarray, bytes, list[bytes | None]]:
    """Mark lines that are not UTF-8 and replace their bad bytes, so the rest can load; the
    bytes they had are given back (without the line ending, as `raw` is kept) for quarantine."""
    ok = np.ones(len(ends), dtype=bool)
    parts: list[bytes] = []
    originals: list[bytes | None] = [None] * len(ends)
    start = 0
    for i, end in enumerate(ends.tolist()):
        line = block[start:end]
        try:
            line.decode("utf-8")
            parts.append(line)
        except UnicodeDecodeError:
            ok[i] = False
            originals[i] = line.rstrip(b"\r\n")
            parts.append(line.decode("utf-8", errors="replace").encode("utf-8"))
        start = end
    return ok, b"".join(parts), originals


def with_ids(t: pa.Table | None, ids: np.ndarray) -> pa.Table | None:
    """A prepared table's `file` column as the files' source ids."""
    if t is None:
        return None
    source_ids = pa.array(ids[t.column("file").to_numpy()])
    return fast.aligned(t.drop_columns(["file"]).append_column("source_id", source_ids))


def read_together(files: list[list[Block]]) -> tuple[Rows, list[int]]:
    """The blocks of many small files read as one (`read_rows` has a fixed cost a call, which
    thousands of table files would otherwise pay one by one), each row then given back its
    file (column `file`, an index into `files`) and line number; with each file's count of
    lines."""
    texts: list[bytes] = []
    owner: list[int] = []  # per block
    firsts: list[int] = []
    sizes: list[int] = []
    counts = []
    for k, blocks in enumerate(files):
        n = 0
        for b in blocks:
            text = b.data if b.data.endswith(b"\n") else b.data + b"\n"
            texts.append(text)
            owner.append(k)
            firsts.append(b.first_line)
            sizes.append(text.count(b"\n"))
            n += sizes[-1]
        counts.append(n)
    rows = read_rows(b"".join(texts), 0)
    begins = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)

    def tagged(t: pa.Table | None) -> pa.Table | None:
        if t is None:
            return None
        at = t.column("line_no").to_numpy()
        block = np.searchsorted(begins, at, side="right") - 1
        line_no = np.asarray(firsts)[block] + at - begins[block]
        t = t.set_column(t.schema.get_field_index("line_no"), "line_no", pa.array(line_no))
        return fast.aligned(t.append_column("file", pa.array(np.asarray(owner)[block])))

    return Rows(tagged(rows.typed), tagged(rows.lines), rows.n_lines), counts
