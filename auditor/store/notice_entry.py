"""Entering and withdrawing a notice by hand, as `bacc-audit notice add` and `withdraw` do and
the board's notices page does: the same checks, the same run records, the same sentences.

The times an officer types are read here (an offset, or a local time in the property's zone,
refused where daylight saving time makes it ambiguous or skips it), so a notice typed on the
command line and one typed into the board are judged alike.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import duckdb

from auditor.config import PropertyConfig, local_moment
from auditor.errors import EXIT_OK, UserError
from auditor.store import notices, runs
from auditor.store.db import single
from auditor.store.notices import Notice, NoticeWithdrawal


def parse_time(text: str, zone: dt.tzinfo, what: str) -> dt.datetime:
    """RFC 3339 with an offset (`2026-11-29T02:40:00-05:00`, `...Z`), or a local date and time
    (`2026-11-29 02:40`) read in the property's zone; a local time the zone skips or passes
    twice (a change of daylight saving time) is refused, asking for the offset."""
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise UserError(
            f"{what} {text!r} is not a time: give RFC 3339 like 2026-11-29T02:40:00-05:00, "
            "or a local date and time like \"2026-11-29 02:40\""
        ) from None
    return local_moment(value, zone, what)


def known_places(
    con: duckdb.DuckDBPyConnection, conf: PropertyConfig
) -> tuple[set[str], set[str]]:
    """The pits (of the logs and the config) and tables (of the logs) a notice may name."""
    pits = {p for (p,) in con.execute(
        "SELECT DISTINCT pit FROM events WHERE pit IS NOT NULL").fetchall()}
    tables = {t for (t,) in con.execute(
        "SELECT DISTINCT table_id FROM events WHERE table_id IS NOT NULL").fetchall()}
    return pits | set(conf.pit_procedures), tables


def enter(
    con: duckdb.DuckDBPyConnection,
    zone: dt.tzinfo,
    *,
    pit: str,
    procedure: int,
    effective: str,
    recipients: Iterable[str],
    given_at: str,
    by: str,
    tables: str | None,
    written: bool,
    note: str,
    known: tuple[set[str], set[str]],
    late: bool,
    args: dict[str, Any] | None = None,
) -> list[Notice]:
    """Record a notice to each recipient (one row each), in a run of its own (command
    `notice add`, `args` added to its record). The times are as typed (parse_time, the
    option's name in a refusal); every problem is a UserError sentence and nothing is
    stored."""
    when = parse_time(effective, zone, "--effective")
    given = parse_time(given_at, zone, "--given-at")
    named = list(dict.fromkeys(recipients))
    record = {"pit": pit, "procedure": procedure, "recipients": named, **(args or {})}
    with runs.recorded(con, "notice add", record, keep_error=False) as run:
        stored = [
            notices.add_notice(
                con, pit=pit, procedure=procedure, effective=when, recipient=r,
                given_at=given, entered_by=by, tables=tables, written=written,
                note=note, known_pits=known[0], known_tables=known[1], late=late,
                run_id=run.id,
            )
            for r in named
        ]
        run.done(EXIT_OK, {"notices": [n.id for n in stored]})
    return stored


def withdraw(
    con: duckdb.DuckDBPyConnection, notice_id: int, *, by: str, reason: str,
    args: dict[str, Any] | None = None,
) -> NoticeWithdrawal:
    """Withdraw notice `notice_id` in a run of its own (command `notice withdraw`)."""
    with runs.recorded(con, "notice withdraw", {"notice": notice_id, "by": by, **(args or {})},
                       keep_error=False) as run:
        w = notices.withdraw_notice(con, notice_id, by=by, reason=reason, run_id=run.id)
        run.done(EXIT_OK, {"notice": notice_id})
    return w


def entered_sentence(n: Notice, zone: dt.tzinfo) -> str:
    """What was stored, as `notice add` prints it."""
    scope = f"tables {n.tables}" if n.tables else "the whole pit"
    return (
        f"notice {n.id}: pit {n.pit} ({scope}), procedure {n.procedure} from "
        f"{n.effective.astimezone(zone):%Y-%m-%d %H:%M:%S}, "
        f"{'written' if n.written else 'NOT written'} notice to {n.recipient} given "
        f"{n.given_at.astimezone(zone):%Y-%m-%d %H:%M:%S}; entered by {n.entered_by}"
    )


def withdrawn_sentence(w: NoticeWithdrawal, zone: dt.tzinfo) -> str:
    """What was withdrawn, as `notice withdraw` prints it."""
    when = w.withdrawn_at.astimezone(zone)
    return (f"notice {w.notice_id} withdrawn by {w.withdrawn_by} at {when:%Y-%m-%d %H:%M}: "
            f"{w.reason}; the next audit no longer counts it")


def entries(con: duckdb.DuckDBPyConnection) -> int:
    """How many notices and withdrawals were ever entered by hand: a number that grows with
    each, so a watcher sees that the notice checks have something new to count."""
    present = {name for (name,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE table_name IN "
        "('notices', 'notice_withdrawals')").fetchall()}
    parts: Sequence[str] = [f"(SELECT count(*) FROM {t})" for t in sorted(present)]
    if not parts:
        return 0
    return int(single(con, "SELECT " + " + ".join(parts))[0])
