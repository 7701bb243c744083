"""Each stream's highest seq on record and the source holding it, kept by the follower from
poll to poll (issue 32).

A poll's checks ask `stream_sources` for the highest seq of every stream its rows name
(auditor.ingest.staged_rows.from_arrow): a statement of about 3 ms a poll in `watch` at 500
tables, asking what the follower's own previous commits wrote. In a watch the follower is
the one writer of `stream_sources` (ingest, backfill and nightly take the database for
themselves; what other processes write through the watch's connection is an
acknowledgement, a notice or a run's row). So the answer is kept, and each commit of the
follower's small pieces moves it as its UPDATE moved the table (`committed`); a stream is
asked again when that cannot be told exactly:

- two sources reach the same highest seq (a resend): the table's `arg_max` chooses among
  them, and the choice is left to it;
- a poll stores first pieces the batch way (`forget`: every stream asked again).

tests/ingest/test_stream_tops.py holds what is kept against the table after every poll of a
lying night.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import duckdb

# The highest seq ingested of each of the streams given, and the source holding it.
TOPS_SQL = """
SELECT stream, max(max_seq), arg_max(source_id, max_seq) FROM stream_sources
WHERE stream IN (SELECT unnest(?::VARCHAR[])) GROUP BY stream
"""

Top = tuple[int | None, int | None]  # (highest seq, its source); (None, None): no row yet
_NONE: Top = (None, None)


class Extended(Protocol):
    """What a commit wrote to `stream_sources` for one stream and source (stage.Range)."""

    @property
    def stream(self) -> str: ...
    @property
    def source_id(self) -> int: ...
    @property
    def hi(self) -> int | None: ...


def read_tops(con: duckdb.DuckDBPyConnection, streams: Sequence[str]) -> dict[str, Top]:
    """The streams' highest seqs and their sources, from the table; a stream without a row
    is left out."""
    if not streams:
        return {}
    return {s: (top, source) for s, top, source in con.execute(TOPS_SQL, [list(streams)])
            .fetchall()}


class StreamTops:
    """What `stream_sources` says of each stream asked, as of the follower's last commit."""

    def __init__(self) -> None:
        self._tops: dict[str, Top] = {}
        self.reads = 0  # statements asked (tests, benches)

    def read(self, con: duckdb.DuckDBPyConnection, streams: Iterable[str]) -> dict[str, Top]:
        """`read_tops` of `streams`, asking the table only for those not kept."""
        wanted = sorted(set(streams))
        missing = [s for s in wanted if s not in self._tops]
        if missing:
            self.reads += 1
            got = read_tops(con, missing)
            for s in missing:
                self._tops[s] = got.get(s, _NONE)
        return {s: top for s in wanted if (top := self._tops[s]) != _NONE}

    def committed(self, extended: Iterable[Extended]) -> None:
        """The follower committed these ranges to `stream_sources` (each source's max_seq
        raised to at least `hi`): the kept highest seqs move the same way. Call it right
        after the COMMIT, never before (a rolled-back poll moved nothing)."""
        for r in extended:
            if r.hi is None or r.stream not in self._tops:
                continue
            top, source = self._tops[r.stream]
            if top is None or r.hi > top:
                self._tops[r.stream] = (r.hi, r.source_id)
            elif r.hi == top and r.source_id != source:
                del self._tops[r.stream]  # a tie: the table's arg_max chooses

    def forget(self) -> None:
        """Ask the table again for every stream (written otherwise: first pieces)."""
        self._tops.clear()

    def kept(self) -> dict[str, Top]:
        """What is kept (tests)."""
        return dict(self._tops)
