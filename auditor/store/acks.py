"""Acknowledgements: who reviewed a finding and what was decided, kept beside the findings.

A finding says what the logs show; an acknowledgement says what the property did about it
(video pulled, patron paid, dealer retrained, no action). Append-only: a changed decision is a
new acknowledgement, never an edit, and the latest one per fingerprint is the one that stands
and that the shift report prints.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
import time
from typing import Any

import duckdb

from auditor.errors import EXIT_OK, UserError
from auditor.store import runs
from auditor.store.db import add_row, all_rows, has_table, one
from auditor.store.findings import SHORT_ID_HEX, SHORT_ID_SQL, short_id
from auditor.store.records import Acknowledgement

ACK_TRIES = 3  # a bulk acknowledgement beside a busy writer

_SHORT_ID = re.compile(rf"[Ff][0-9A-Fa-f]{{{SHORT_ID_HEX}}}")


def finding_status(con: duckdb.DuckDBPyConnection, fingerprint: str) -> str | None:
    """The latest status of the finding ('open' or 'withdrawn'), or None if no finding ever
    had this fingerprint."""
    row = one(
        con,
        "SELECT status FROM findings WHERE fingerprint = ? ORDER BY id DESC LIMIT 1",
        [fingerprint],
    )
    return row[0] if row else None


def check_fingerprint(con: duckdb.DuckDBPyConnection, fingerprint: str) -> str:
    """The finding's status; a fingerprint no finding ever had is a UserError naming the
    closest ones, since a typo must not file a review against nothing."""
    status = finding_status(con, fingerprint)
    if status is not None:
        return status
    known = [r[0] for r in con.execute("SELECT DISTINCT fingerprint FROM findings").fetchall()]
    close = difflib.get_close_matches(fingerprint, known, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise UserError(
        f"no finding has the fingerprint {fingerprint!r}{hint} "
        "(`bacc-audit findings --format jsonl` shows each finding's fingerprint)"
    )


def resolve(con: duckdb.DuckDBPyConnection, finding: str) -> str:
    """The full fingerprint `finding` names: a fingerprint (it always has `|` separators) is
    itself; anything else is a short id (`findings.short_id`, any case), since an officer acks
    from the table view or the PDF, which show ids. An id no finding has, or (should two
    fingerprints ever share one) that names several, is a UserError: acknowledging a guess
    would file a review against the wrong finding."""
    if "|" in finding:
        return finding
    given = finding.strip()
    if not _SHORT_ID.fullmatch(given):
        shape = f"F and {SHORT_ID_HEX} hex digits, e.g. {short_id('example')}"
        raise UserError(
            f"{finding!r} is neither a finding id ({shape}) nor a fingerprint"
            f"{_closest_ids(con, given)} "
            "(`bacc-audit findings` shows each finding's id in its first column)"
        )
    wanted = "F" + given[1:].lower()
    named = [
        r[0]
        for r in con.execute(
            f"SELECT DISTINCT fingerprint FROM findings WHERE {SHORT_ID_SQL} = ? "
            "ORDER BY fingerprint",
            [wanted],
        ).fetchall()
    ]
    if len(named) == 1:
        return named[0]
    if named:
        raise UserError(
            f"the id {wanted} names {len(named)} findings ({', '.join(repr(f) for f in named)}); "
            "give the full fingerprint instead"
        )
    raise UserError(
        f"no finding has the id {wanted}{_closest_ids(con, wanted)} "
        "(`bacc-audit findings` shows each finding's id in its first column)"
    )


def _closest_ids(con: duckdb.DuckDBPyConnection, given: str) -> str:
    """"; did you mean F...?" with the ids nearest to what was typed (a digit left out or
    added, two swapped, any case), or "" when none is near."""
    typed = given.strip()
    if not typed or len(typed) > 4 * SHORT_ID_HEX:
        return ""
    typed = "F" + typed[1:].lower() if typed[0] in "Ff" else "F" + typed.lower()
    known = [r[0] for r in con.execute(f"SELECT DISTINCT {SHORT_ID_SQL} FROM findings").fetchall()]
    close = difflib.get_close_matches(typed, known, n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def add_ack(
    con: duckdb.DuckDBPyConnection,
    fingerprint: str,
    *,
    by: str,
    disposition: str,
    run_id: int,
    note: str = "",
    recorded_at: dt.datetime | None = None,
) -> Acknowledgement:
    """Record one acknowledgement of a known finding; every problem is a UserError sentence."""
    if not by.strip():
        raise UserError("say who reviewed the finding (--by NAME)")
    if not disposition.strip():
        raise UserError("say what was decided (--disposition TEXT)")
    check_fingerprint(con, fingerprint)
    when = recorded_at or dt.datetime.now(dt.UTC)
    if when.tzinfo is None:
        raise UserError(f"an acknowledgement time needs a time zone, not {when.isoformat()}")
    row = Acknowledgement(
        fingerprint=fingerprint,
        reviewer=by.strip(),
        disposition=disposition.strip(),
        note=note.strip(),
        recorded_at=when.astimezone(dt.UTC),
        run_id=run_id,
    )
    return add_row(con, row)


def acknowledge(
    con: duckdb.DuckDBPyConnection,
    finding: str,
    *,
    by: str,
    disposition: str,
    note: str = "",
    args: dict[str, Any] | None = None,
) -> tuple[Acknowledgement, str]:
    """Acknowledge the finding named by id or fingerprint, in a run of its own (command
    `ack`, `args` added to its record): what `bacc-audit ack` and the board's form both do.
    Returns the acknowledgement and the finding's status when it was acknowledged."""
    fingerprint = resolve(con, finding)
    status = check_fingerprint(con, fingerprint)
    with runs.recorded(con, "ack", {"fingerprint": fingerprint, "by": by, **(args or {})}) as run:
        a = add_ack(con, fingerprint, by=by, disposition=disposition, note=note, run_id=run.id)
        run.done(EXIT_OK, {"acknowledgement": a.id})
    return a, status


def acknowledge_all(
    con: duckdb.DuckDBPyConnection,
    findings: list[str],
    *,
    by: str,
    disposition: str,
    note: str = "",
    args: dict[str, Any] | None = None,
) -> list[Acknowledgement]:
    """Acknowledge each of `findings` (ids or fingerprints) with one disposition and note:
    an acknowledgement of its own per finding (add_ack, as one at a time), recorded in one
    run (command `ack`, the fingerprints in its arguments). Every finding is checked before
    any is written, so a wrong id leaves nothing half done."""
    prints = list(dict.fromkeys(resolve(con, f) for f in findings))
    for fp in prints:
        check_fingerprint(con, fp)
    record = {"fingerprints": prints, "by": by, **(args or {})}
    with runs.recorded(con, "ack", record) as run:
        done = [_add_retried(con, fp, by, disposition, note, run.id) for fp in prints]
        run.done(EXIT_OK, {"acknowledgements": [a.id for a in done]})
    return done


def _add_retried(con: duckdb.DuckDBPyConnection, fp: str, by: str, disposition: str,
                 note: str, run_id: int) -> Acknowledgement:
    """add_ack, tried again when a writer's transaction on the same catalog made DuckDB refuse
    it. Each finding is retried alone: retrying the whole batch would record again the
    acknowledgements already written."""
    for attempt in range(ACK_TRIES):
        try:
            return add_ack(con, fp, by=by, disposition=disposition, note=note, run_id=run_id)
        except duckdb.TransactionException:
            if attempt == ACK_TRIES - 1:
                raise
            time.sleep(0.1 * (attempt + 1))
    raise AssertionError("unreachable")


def list_acks(con: duckdb.DuckDBPyConnection) -> list[Acknowledgement]:
    """Every acknowledgement, oldest first ([] when none was ever recorded)."""
    if not has_table(con, "acknowledgements"):
        return []
    return all_rows(con, Acknowledgement)


def latest_acks(con: duckdb.DuckDBPyConnection) -> dict[str, Acknowledgement]:
    """The standing acknowledgement of each acknowledged finding: its latest row."""
    return {a.fingerprint: a for a in list_acks(con)}


def as_dict(a: Acknowledgement) -> dict[str, Any]:
    """An acknowledgement as JSON-ready values (time in UTC, RFC 3339)."""
    return {
        "id": a.id,
        "fingerprint": a.fingerprint,
        "finding_id": short_id(a.fingerprint),
        "by": a.reviewer,
        "disposition": a.disposition,
        "note": a.note,
        "recorded_at": a.recorded_at.astimezone(dt.UTC).isoformat(),
        "run_id": a.run_id,
    }
