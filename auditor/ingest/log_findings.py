"""The `log.*` findings ingest raises, in SQL over the rows it stages: a line that could not be
read (`log.malformed`), a file refused as altered (`log.altered`), seqs missing from a stream
(`log.seq_gap`), events stamped after their own delivery (`log.future_stamp`). Their
fingerprints are spelled as `auditor.finding` spells them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from auditor.finding import Finding, fingerprint
from auditor.ingest.stage import id_list
from auditor.store import findings
from auditor.store.sql import quote, stream_key_sql, stream_name_sql
from auditor.words import count, duration

# The gaps found, from `_find_gaps` to the end of the function that asked for them.
_DROP_GAPS = "DROP TABLE IF EXISTS gaps"

# How far past its delivery an event may be stamped before the stamp is impossible: the
# table systems' clocks and the auditor's are kept apart, and one not kept by NTP drifts by
# minutes. A constant of the event log format, like the 2 seconds of log.time_reversed.
AHEAD_TOLERANCE = dt.timedelta(minutes=5)
AHEAD_SQL = f"INTERVAL {int(AHEAD_TOLERANCE.total_seconds())} SECONDS"
FUTURE_CODE = "log.future_stamp"


def record_malformed(
    con: duckdb.DuckDBPyConnection, run_id: int, path: str, file_key: str, rows: str
) -> None:
    """One `log.malformed` per quarantined line, dated by the events around it: its own time
    if it has one, else the good line before it, else the good line after it (a bad first
    line); the time of ingest only when the file has no good line at all. `rows` is the SQL
    of the file's rows, good and rejected.

    The fingerprint is the file's key (the SHA-256 of its first line, as source_files knows
    it; a gzip file or one with a blank first line: the SHA-256 of the bytes it was read
    in), the line's number and the start of the SHA-256 of the line itself. So the same
    bad line is the same finding whether its file was read whole or in pieces as it grew
    (`watch`), and another line at that place in a file starting alike is another."""
    findings.record(
        con,
        run_id,
        f"""
        SELECT 'log.malformed|{file_key}|' || q.line_no || '|' || left(sha256(q.raw), 16)
                 AS fingerprint, 'log.malformed' AS code,
               try(json_extract_string(q.raw, '$.table')) AS table_id,
               try(json_extract_string(q.raw, '$.pit')) AS pit,
               try(json_extract_string(q.raw, '$.shoe')) AS shoe,
               try(CAST(json_extract(q.raw, '$.round') AS BIGINT)) AS round,
               try(CAST(json_extract(q.raw, '$.seq') AS BIGINT)) AS seq,
               coalesce(q.ts, g.ts, h.ts, now()) AS ts,
               'Line ' || q.line_no || ' of ' || {quote(Path(path).name)} ||
                 ' could not be read: ' ||
                 q.reason || '; it is kept in quarantine' AS message,
               to_json('a line of event log v1') AS expected,
               to_json({{'reason': q.reason, 'line': left(q.raw, 500)}}) AS observed,
               {quote(path)} || ':' || q.line_no AS source,
               to_json({{'line_no': q.line_no}}) AS evidence
        FROM (SELECT *, rejected AS reason FROM {rows} WHERE rejected IS NOT NULL) q
        ASOF LEFT JOIN (SELECT line_no, ts FROM {rows} WHERE rejected IS NULL) g
          ON q.line_no >= g.line_no
        ASOF LEFT JOIN (SELECT line_no, ts FROM {rows} WHERE rejected IS NULL) h
          ON q.line_no <= h.line_no
        """,
    )


def record_seq_gaps(con: duckdb.DuckDBPyConnection, run_id: int, streams_sql: str) -> None:
    """Recompute `log.seq_gap` over the whole of each stream named by `streams_sql`.

    A stream may span files; a gap one file leaves may be filled by the next, so standing gap
    findings that no longer hold are withdrawn.
    """
    # Only the files that hold these streams are read (constants, so DuckDB skips the
    # row groups of every other file).
    sources = id_list(
        con, f"SELECT DISTINCT source_id FROM stream_sources WHERE stream IN ({streams_sql})"
    )
    _find_gaps(con, f"SELECT stream, seq, ts, source_id, line_no FROM events "
                    f"WHERE source_id IN ({sources}) AND stream IN ({streams_sql})")
    _record_gaps(con, run_id)
    findings.withdraw(
        con,
        run_id,
        f"""code = 'log.seq_gap'
            AND ((table_id IS NOT NULL AND {stream_key_sql("table", "table_id")} IN ({streams_sql}))
              OR (pit IS NOT NULL AND {stream_key_sql("pit", "pit")} IN ({streams_sql})))
            AND fingerprint NOT IN (
              SELECT 'log.seq_gap|' || stream || '|' || prev_seq || '|' || seq FROM gaps)""",
    )
    con.execute(_DROP_GAPS)


def _find_gaps(con: duckdb.DuckDBPyConnection, rows_sql: str) -> None:
    """Temp table `gaps`: each row of `rows_sql` (stream, seq, ts, source_id, line_no) whose
    seq is more than one past the one before it in its stream, with that one's seq, source
    and line (what _record_gaps records)."""
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE gaps AS
        SELECT * FROM (
          SELECT stream, seq, ts, source_id, line_no,
                 lag(seq) OVER w AS prev_seq, lag(source_id) OVER w AS prev_source,
                 lag(line_no) OVER w AS prev_line
          FROM ({rows_sql})
          WINDOW w AS (PARTITION BY stream ORDER BY seq)
        ) WHERE seq > prev_seq + 1
        """
    )


def _record_gaps(con: duckdb.DuckDBPyConnection, run_id: int) -> None:
    """A `log.seq_gap` for each row of the temp table `gaps` (stream, seq, ts, source_id,
    line_no, prev_seq, prev_source, prev_line) not already standing."""
    findings.record(
        con,
        run_id,
        f"""
        SELECT 'log.seq_gap|' || g.stream || '|' || g.prev_seq || '|' || g.seq AS fingerprint,
               'log.seq_gap' AS code,
               {stream_name_sql("table", "g.stream")} AS table_id,
               {stream_name_sql("pit", "g.stream")} AS pit,
               NULL AS shoe, NULL::BIGINT AS round, g.seq, g.ts,
               upper(left(g.stream, 1)) || replace(substr(g.stream, 2), ':', ' ') ||
                 ': seq ' || g.prev_seq || ' is followed by seq ' || g.seq || '; ' ||
                 (g.seq - g.prev_seq - 1) ||
                 CASE WHEN g.seq - g.prev_seq = 2 THEN ' event is' ELSE ' events are' END ||
                 ' missing' AS message,
               to_json({{'seq': g.prev_seq + 1}}) AS expected,
               to_json({{'seq': g.seq, 'previous_seq': g.prev_seq,
                        'missing': g.seq - g.prev_seq - 1}}) AS observed,
               s.path || ':' || g.line_no AS source,
               to_json({{'previous': p.path || ':' || g.prev_line}}) AS evidence
        FROM gaps g JOIN sources s ON s.id = g.source_id
        JOIN sources p ON p.id = g.prev_source
        """,
    )


def record_new_gaps(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    rows_sql: str,
    tops: dict[str, tuple[int | None, int | None]],
) -> None:
    """`log.seq_gap` among the new rows (`rows_sql`) of `tops`' streams, all past each
    stream's highest seq before (`tops`: that seq and its source; None for a new stream):
    the follower's pieces, which cannot close a standing gap."""
    con.register("tops", pa.table({
        "stream": list(tops),
        "top": pa.array([t for t, _ in tops.values()], pa.int64()),
        "top_source": pa.array([s for _, s in tops.values()], pa.int64()),
    }))
    _find_gaps(
        con,
        f"SELECT stream, seq, ts, source_id, line_no FROM ({rows_sql}) "
        "WHERE stream IN (SELECT stream FROM tops) "
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
    _record_gaps(con, run_id)
    con.execute(_DROP_GAPS)


def record_altered(
    con: duckdb.DuckDBPyConnection, run_id: int, source_id: int, concerns: dt.datetime | None
) -> None:
    """`log.altered` for the refused offer recorded as `source_id` (its note says why).

    The finding is dated by the events it concerns, so the report of their shift shows it:
    `concerns` (the ingested event a differing line would change), else the first event of
    the version of this path ingested before, else (nothing tells) the time of refusal."""
    at = "NULL::TIMESTAMPTZ" if concerns is None else f"TIMESTAMPTZ '{concerns.isoformat()}'"
    findings.record(
        con,
        run_id,
        f"""
        SELECT 'log.altered|' || path || '|' || sha256 AS fingerprint, 'log.altered' AS code,
               NULL AS table_id, NULL AS pit, NULL AS shoe, NULL::BIGINT AS round,
               NULL::BIGINT AS seq,
               coalesce({at}, (
                 SELECT min(e.ts) FROM events e JOIN sources p ON p.id = e.source_id
                 WHERE p.path = sources.path AND p.status = 'ingested' AND e.rejected IS NULL
               ), ingested_at) AS ts,
               path || ' was refused as altered: ' || note AS message,
               to_json({{'content': 'identical to the file already ingested'}}) AS expected,
               to_json({{'sha256': sha256, 'reason': note}}) AS observed,
               path AS source, to_json({{'source_id': id}}) AS evidence
        FROM sources WHERE id = {int(source_id)}
        """,
    )


def record_future_stamps(
    con: duckdb.DuckDBPyConnection, run_id: int, rows_sql: str,
    file_of: Callable[[int], tuple[str, str]],
) -> dict[int, list[tuple[int, str]]]:
    """`log.future_stamp` for the rows to load (`rows_sql`) stamped more than AHEAD_TOLERANCE
    after now(), the time their piece is recorded as ingested (`source_extents.ingested_at`,
    in the same transaction): one per stream and piece, anchored at its first such event.

    The fingerprint names the stream and the file (`file_of`: source id -> its path and its
    key, as log.malformed's), not the piece: a table system whose clock runs an hour ahead is one
    finding for its file, not one for every poll of the watch that reads a piece of it (the
    later ones are left out of closing a day all the same, auditor.audit.load). Returns, by
    source id, the line and a sentence for each stream of it stamped ahead, for ingest to
    say."""
    rows = con.execute(
        f"""
        SELECT stream, source_id, count(*), min(seq), arg_min(line_no, seq),
               arg_min(type, seq), arg_min(json_extract_string(raw, '$.ts'), seq),
               min_by(epoch(ts), seq) - epoch(now()), max(epoch(ts)) - epoch(now()), now()
        FROM ({rows_sql}) WHERE ts > now() + {AHEAD_SQL}
        GROUP BY stream, source_id ORDER BY source_id, min(seq)
        """
    ).fetchall()
    found = []
    said: dict[int, list[tuple[int, str]]] = {}
    for stream, sid, n, seq, line_no, type_, written, ahead, furthest, now in rows:
        # Dated by the stream's last event stamped in time before it (a stamp years ahead
        # would put it in a shift no one reads), else by its delivery.
        [(before,)] = con.execute(
            f"SELECT max(ts) FROM (SELECT ts, seq FROM ({rows_sql}) WHERE stream = $s "
            "UNION ALL SELECT ts, seq FROM events WHERE stream = $s AND source_id IN "
            "(SELECT source_id FROM stream_sources WHERE stream = $s)) "
            f"WHERE seq < $seq AND ts <= now() + {AHEAD_SQL}", {"s": stream, "seq": seq},
        ).fetchall()
        path, key = file_of(sid)
        f = FutureStamp(stream, f"{path}:{line_no}", key, n, seq, type_, written,
                        dt.timedelta(seconds=ahead), dt.timedelta(seconds=furthest), now,
                        before or now)
        found.append(future_finding(f))
        said.setdefault(sid, []).append((line_no, (
            f"{stream.replace(':', ' ')} seq {seq} ({type_}) stamped {written}, "
            f"{duration(f.ahead)} after its delivery"
            + (f", and {count(n - 1, 'event')} more" if n > 1 else "")
            + " (loaded; reported as log.future_stamp)")))
    if found:
        findings.record_staged(con, run_id, "future_findings", found)
        con.execute("DROP TABLE future_findings")
    return said


@dataclass(frozen=True)
class FutureStamp:
    """The events of one stream in one piece stamped ahead of the piece's delivery."""

    stream: str
    source: str  # path:line of the first
    file_key: str
    events: int
    seq: int  # the first's
    type: str
    written: str  # its stamp as its line wrote it
    ahead: dt.timedelta  # how far past the delivery it is stamped
    furthest: dt.timedelta  # the most any of them is
    delivered: dt.datetime
    dated: dt.datetime  # the finding's time: the stream's last event stamped in time


def future_finding(f: FutureStamp) -> Finding:
    """The words of one log.future_stamp. The stamp is shown as the line wrote it (its own
    offset) and the delivery in UTC: the property's zone is not known to ingest, and a
    stamp years ahead would be no clearer in it."""
    kind, _, name = f.stream.partition(":")
    table, pit = (name, None) if kind == "table" else (None, name)
    more = (f"; {count(f.events, 'event')} of this delivery are stamped ahead of it, the "
            f"furthest {duration(f.furthest)}" if f.events > 1 else "")
    delivered = f.delivered.astimezone(dt.UTC)
    message = (
        f"{kind.capitalize()} {name}: seq {f.seq} ({f.type}) is stamped {f.written}, "
        f"{duration(f.ahead)} after its line was delivered ({delivered:%Y-%m-%d %H:%M:%S} "
        f"UTC){more}. No event is logged before it happens: the stamp is an edit or a clock "
        "set wrong, and it closes no gaming day."
    )
    return Finding(
        code=FUTURE_CODE,
        fingerprint=fingerprint(FUTURE_CODE, f.stream, f.file_key),
        seq=f.seq,
        message=message,
        expected={"stamped_by": (delivered + AHEAD_TOLERANCE).isoformat()},
        observed={"ts": f.written, "delivered_at": delivered.isoformat(),
                  "events": f.events},
        source=f.source,
        table=table,
        pit=pit,
        ts=f.dated,
        evidence={"stream": f.stream, "delivered_at": delivered.isoformat(),
                  "events": [{"table": table, "seq": f.seq, "ts": f.written, "type": f.type,
                              "source": f.source}]},
    )
