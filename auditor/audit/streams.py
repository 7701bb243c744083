"""Each stream read in its order (issue 28): where time runs backwards (`log.time_reversed`),
and the *ordered time* every time-dependent check uses instead of a stamp that contradicts
the stream.

The ordered time of an event is the latest of its own stamp and the ordered times before it
in its stream (seq order); a procedure_change or table_open is first capped by the stamp of
the next event of its stream, since a change takes effect no later than the first event
after it (auditor.replay.stream_order.CAPPED_BY_NEXT). So a change stamped 22:45 between a
round that ended at 22:30:02 and one that began at 22:30:49 takes effect by 22:30:49, and
does not push the events after it to 22:45.

One pass an audit, in SQL, over the streams that changed since their last check
(`stream_checks`, a record per check): one window (a lag) over those streams' events finds
the streams where an event is stamped before the one before it; only those are read again,
with the windows that give the ordered times and the runs, and only their events whose
ordered time differs from their stamp are kept, in `ordered_times`, which the checks join (a
clean stream has none there). A stream not changed is not read again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import duckdb

from auditor.audit.load import DELIVERED_AT, DELIVERY_JOIN
from auditor.finding import Finding
from auditor.ingest.log_findings import AHEAD_SQL, FUTURE_CODE
from auditor.ingest.stage import id_list
from auditor.replay.log_ends import StreamEvent
from auditor.replay.stream_order import (
    CAPPED_BY_NEXT,
    TIME_TOLERANCE,
    Reversal,
    reversal_finding,
)
from auditor.store import db, findings, set_logs
from auditor.store.sql import quote, stream_name_sql

CODE = "log.time_reversed"
_CAPPED = ", ".join(map(quote, CAPPED_BY_NEXT))
_TOLERANCE = f"INTERVAL {int(TIME_TOLERANCE.total_seconds() * 1_000_000)} MICROSECONDS"

# The streams whose events changed since their last check (or never checked).
_CHANGED = """
CREATE OR REPLACE TEMP TABLE changed_streams AS
SELECT s.stream, s.events, s.max_seq FROM (
  SELECT stream, sum(events) AS events, max(max_seq) AS max_seq FROM stream_sources
  GROUP BY ALL
) s
LEFT JOIN (
  SELECT DISTINCT ON (stream) stream, events, max_seq FROM stream_checks
  ORDER BY stream, checked_at DESC
) c USING (stream)
WHERE c.stream IS NULL OR c.events <> s.events OR c.max_seq <> s.max_seq
"""

# The changed streams where something is off: an event stamped before the one logged just
# before it (a run back in time starts so, and so does a change stamped after the next event),
# or one stamped ahead of its delivery, which ingest found (log.future_stamp: it may be the
# stream's last; never withdrawn, so read from `findings` itself, not from the window of
# current_findings over every finding). One window of one lag over their events, the
# cheapest that tells (a running maximum over every event costs about five times more); a
# stream with none (nearly all) has every ordered time equal to its stamp, and is done.
_OFF = f"""
CREATE OR REPLACE TEMP TABLE stream_off AS
SELECT DISTINCT stream FROM (
  SELECT stream, ts, lag(ts) OVER (PARTITION BY stream ORDER BY seq) AS prev_ts
  FROM events
  WHERE source_id IN ({{sources}}) AND stream IN (SELECT stream FROM changed_streams)
) WHERE ts < prev_ts
UNION
SELECT json_extract_string(evidence, '$.stream') FROM findings
WHERE code = {quote(FUTURE_CODE)}
  AND json_extract_string(evidence, '$.stream') IN (SELECT stream FROM changed_streams)
"""
# The ordered times of the streams with something off (windows over those only),
# and whether each event is stamped more than the tolerance before the peak. An event stamped
# ahead of its own delivery (log.future_stamp) neither raises the peak nor the ordered times
# after it: one line stamped next year would otherwise put every later event of its stream,
# and their rounds, in next year; it is taken at the ordered time before it.
_TIMES = f"""
CREATE OR REPLACE TEMP TABLE stream_times AS
WITH d AS (
  SELECT e.stream, e.seq, e.ts, e.type,
         coalesce(e.ts > {DELIVERED_AT} + {AHEAD_SQL}, false) AS ahead
  FROM events e {DELIVERY_JOIN}
  WHERE e.source_id IN ({{sources}}) AND e.stream IN (SELECT stream FROM stream_off)
), w AS (
  SELECT stream, seq, ts, type, ahead,
         lead(ts) OVER s AS next_ts, lag(seq) OVER s AS prev_seq,
         max(ts) FILTER (NOT ahead)
           OVER (s ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS peak_ts
  FROM d
  WINDOW s AS (PARTITION BY stream ORDER BY seq)
), o AS (
  SELECT *, coalesce(
           max(CASE WHEN ahead THEN NULL
                    WHEN type IN ({_CAPPED}) AND next_ts < ts THEN next_ts ELSE ts END)
             OVER (PARTITION BY stream ORDER BY seq ROWS UNBOUNDED PRECEDING),
           ts) AS ordered_ts
  FROM w
)
SELECT stream, seq, ts, prev_seq, peak_ts, ordered_ts,
       coalesce(ts < peak_ts - {_TOLERANCE}, false) AS back
FROM o WHERE ordered_ts <> ts OR ts < peak_ts - {_TOLERANCE}
"""

# Runs of consecutive events stamped back (an event whose previous event is not stamped back
# starts one), with the event each run's first one runs back from (the latest stamp before
# it; the last such event if several share it).
_RUNS = f"""
WITH b AS (
  SELECT t.*, p.seq IS NULL AS starts FROM stream_times t
  LEFT JOIN stream_times p ON p.stream = t.stream AND p.seq = t.prev_seq AND p.back
  WHERE t.back
), r AS (
  SELECT *, sum(starts::INT) OVER (PARTITION BY stream ORDER BY seq) AS run FROM b
), runs AS (
  SELECT stream, run, min(seq) AS first_seq, max(seq) AS last_seq, count(*) AS n,
         arg_min(ts, seq) AS first_ts, arg_min(peak_ts, seq) AS peak_ts,
         arg_min(ordered_ts, seq) AS ordered_ts, max(peak_ts - ts) AS back
  FROM r GROUP BY ALL
)
SELECT u.stream, {stream_name_sql("table", "u.stream")}, {stream_name_sql("pit", "u.stream")},
       u.first_seq, u.first_ts, f.type, fs.path || ':' || f.line_no, f.shoe, f.round,
       p.seq, p.ts, p.type, ps.path || ':' || p.line_no, p.shoe, p.round,
       u.last_seq, u.n, u.back, u.ordered_ts
FROM runs u
JOIN events f ON f.stream = u.stream AND f.seq = u.first_seq
JOIN sources fs ON fs.id = f.source_id
JOIN (
  SELECT e.stream, e.seq, e.ts, e.type, e.line_no, e.source_id, e.shoe, e.round, r.first_seq
  FROM events e JOIN runs r ON e.stream = r.stream AND e.ts = r.peak_ts AND e.seq < r.first_seq
  WHERE e.source_id IN ({{sources}})
  QUALIFY row_number() OVER (PARTITION BY e.stream, r.first_seq ORDER BY e.seq DESC) = 1
) p ON p.stream = u.stream AND p.first_seq = u.first_seq
JOIN sources ps ON ps.id = p.source_id
WHERE f.source_id IN ({{sources}})
ORDER BY u.stream, u.first_seq
"""


# The time of the event logged just before a peak, at its ordered time (`stream_times` holds
# those of the streams checked that differ from their stamps).
_BEFORE_PEAK = """
SELECT coalesce(t.ordered_ts, e.ts) FROM events e
LEFT JOIN stream_times t ON t.stream = e.stream AND t.seq = e.seq
WHERE e.source_id IN ({sources}) AND e.stream = $stream AND e.seq < $seq
ORDER BY e.seq DESC LIMIT 1
"""


def reversals(con: duckdb.DuckDBPyConnection, sources: str) -> list[Reversal]:
    """The runs of time running backwards in temp table `stream_times`, each dated by the
    event before its peak (few runs: a statement each)."""
    out = []
    for (stream, table, pit, first_seq, first_ts, first_type, first_source, shoe, rnd,
         peak_seq, peak_ts, peak_type, peak_source, peak_shoe, peak_round, last_seq, n, back,
         ordered) in con.execute(_RUNS.format(sources=sources)).fetchall():
        before = con.execute(_BEFORE_PEAK.format(sources=sources),
                             {"stream": stream, "seq": peak_seq}).fetchall()
        out.append(Reversal(
            stream, table, pit,
            StreamEvent(table, first_seq, first_ts, first_type, first_source, shoe, rnd),
            StreamEvent(table, peak_seq, peak_ts, peak_type, peak_source, peak_shoe,
                        peak_round),
            last_seq, n, back, ordered, before[0][0] if before else None,
        ))
    return out


def check_streams(
    con: duckdb.DuckDBPyConnection, run_id: int, zone: dt.tzinfo
) -> dict[str, Any]:
    """Check the streams changed since their last check: record log.time_reversed for each
    run of time running backwards (withdrawing those of these streams no longer found, as a
    run that grew), and keep their events' ordered times where they differ from the stamps.
    One transaction. Returns a JSON-ready summary."""
    with db.transaction(con):
        con.execute(_CHANGED)
        changed = con.execute("SELECT count(*) FROM changed_streams").fetchall()[0][0]
        if not changed:
            return {"streams_checked": 0, "findings_new": 0, "findings_withdrawn": 0}
        sources = id_list(
            con, "SELECT DISTINCT source_id FROM stream_sources "
                 "WHERE stream IN (SELECT stream FROM changed_streams)")
        con.execute(_OFF.format(sources=sources))
        off = id_list(con, "SELECT DISTINCT source_id FROM stream_sources "
                           "WHERE stream IN (SELECT stream FROM stream_off)")
        con.execute(_TIMES.format(sources=off))
        con.execute("DROP TABLE stream_off")
        found = [reversal_finding(r, zone) for r in reversals(con, off)]
        new, withdrawn = _record(con, run_id, found)
        con.execute("DELETE FROM ordered_times WHERE stream IN "
                    "(SELECT stream FROM changed_streams)")
        con.execute("INSERT INTO ordered_times SELECT stream, seq, ordered_ts FROM stream_times "
                    "WHERE ordered_ts <> ts")
        set_logs.record(con, set_logs.ORDERED_TIMES, run_id, "changed_streams")
        reordered = con.execute(
            "SELECT count(*) FROM stream_times WHERE ordered_ts <> ts").fetchall()[0][0]
        con.execute(
            f"INSERT INTO stream_checks SELECT c.stream, c.events, c.max_seq, "
            f"(SELECT count(*) FROM stream_times t WHERE t.stream = c.stream AND t.back), "
            f"{int(run_id)}, now() FROM changed_streams c"
        )
        con.execute("DROP TABLE stream_times")
    return {"streams_checked": changed, "events_reordered": reordered, "findings": len(found),
            "findings_new": new, "findings_withdrawn": withdrawn}


def _record(
    con: duckdb.DuckDBPyConnection, run_id: int, found: Sequence[Finding]
) -> tuple[int, int]:
    new = findings.record_staged(con, run_id, "stream_findings", found)
    withdrawn = findings.withdraw(
        con, run_id,
        f"code = {quote(CODE)} AND json_extract_string(evidence, '$.stream') IN "
        "(SELECT stream FROM changed_streams) "
        "AND fingerprint NOT IN (SELECT fingerprint FROM stream_findings)",
    )
    con.execute("DROP TABLE stream_findings")
    return new, withdrawn
