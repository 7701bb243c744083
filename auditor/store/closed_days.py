"""Gaming days closed: the record on which the end of a table's log is judged (issue 28).

A table whose log stops without its table_close (log.table_unclosed), or a shoe without its
shoe_end where the log stops (log.shoe_unfinished), can only be told from a night still being
delivered once the gaming day is over. Which days are over is not guessed from the clock at
each audit: it is written down here, once, by whoever closed the day (`nightly`, `close-day`,
`watch`, or an `audit` whose database held an event at or after the day's end), and the
table pass judges from this record alone. Append-only, like every record: a day is closed
once; closing it again records nothing.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import duckdb

from auditor.config import PropertyConfig

# Who closed a day: `nightly` (the day it reports), `close-day` (by hand), `watch` (the next
# gaming day begun plus its grace), `audit` (the database held an event at or after the
# day's end).
HOW = ("nightly", "close-day", "watch", "audit")

DDL = """
CREATE TABLE IF NOT EXISTS closed_days (
  gaming_day DATE NOT NULL,
  closed_at TIMESTAMPTZ NOT NULL,
  run_id BIGINT NOT NULL,
  how VARCHAR NOT NULL
)"""


@dataclass(frozen=True)
class Closed:
    """The record of one closed gaming day."""

    day: dt.date
    closed_at: dt.datetime
    run_id: int
    how: str


def closed_days(con: duckdb.DuckDBPyConnection) -> dict[dt.date, Closed]:
    """Every closed gaming day with the record that closed it (the first)."""
    if not con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'closed_days'"
    ).fetchall()[0][0]:
        return {}  # a database opened read-only from before the record
    rows = con.execute(
        "SELECT gaming_day, closed_at, run_id, how FROM closed_days ORDER BY closed_at, run_id"
    ).fetchall()
    out: dict[dt.date, Closed] = {}
    for day, at, run_id, how in rows:
        out.setdefault(day, Closed(day, at, run_id, how))
    return out


def close(
    con: duckdb.DuckDBPyConnection,
    days: list[dt.date] | tuple[dt.date, ...],
    run_id: int,
    how: str,
    at: dt.datetime | None = None,
) -> list[dt.date]:
    """Record `days` closed by run `run_id`, those not closed yet; returns them. Call it inside
    the caller's transaction where the closing goes with other records."""
    if how not in HOW:
        raise ValueError(f"how must be one of {', '.join(HOW)}, not {how!r}")
    already = closed_days(con)
    new = sorted(d for d in set(days) if d not in already)
    when = at or dt.datetime.now(dt.UTC)
    for day in new:
        con.execute("INSERT INTO closed_days VALUES (?, ?, ?, ?)", [day, when, run_id, how])
    return new


def not_over(
    conf: PropertyConfig, day: dt.date, zone: dt.tzinfo, now: dt.datetime | None = None
) -> str | None:
    """Why gaming day `day` cannot be closed yet, "not over until 2026-12-02 06:00 EST" (it
    has not ended by the clock), or None: closed early, every table still playing would be
    reported as a log that stops."""
    end = conf.gaming_day_window(day, zone)[1]
    if end <= (now or dt.datetime.now(dt.UTC)):
        return None
    return f"not over until {end.astimezone(zone):%Y-%m-%d %H:%M %Z}"
