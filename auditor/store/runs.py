"""Runs: every writing command is recorded with its start, end, outcome and tool version;
`recorded` is the one way a command, job, acknowledgement or notice records its run, and
seals it in the ledger (store/ledger.py): its start when it starts, every row it wrote and
its end when it ends."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from auditor import __version__
from auditor.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, UserError
from auditor.store import ledger, serving, shared
from auditor.store.db import interrupted, session, setup_error
from auditor.store.records import Run

# The runs this process has open, by database file: alive, so never sealed on their behalf
# by another run's start (ledger.seal_start). A board's acknowledgement runs beside `watch`.
_OPEN: set[tuple[str, int]] = set()


def _database(con: duckdb.DuckDBPyConnection) -> str:
    rows = con.execute(
        "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchall()
    return str(rows[0][0]) if rows and rows[0][0] else f"memory:{id(con)}"


def _sealed_start(con: duckdb.DuckDBPyConnection, run_id: int, where: str) -> None:
    """The run's start on the record: the ledger's genesis or the rows of runs that died
    before their seal, when this process owns the database (a command it serves leaves that
    to its owner), then the run's own start."""
    if isinstance(con, shared.RemoteConnection):
        ledger.seal_start(con, run_id, None)
        return
    first = serving.first_served_run(con)
    alive = {rid for db_, rid in _OPEN if db_ == where}
    if first is not None:  # runs from its start on are its own or those it serves
        alive |= set(range(first, run_id + 1))
    ledger.seal_start(con, run_id, alive)


def start(con: duckdb.DuckDBPyConnection, command: str, args: dict) -> int:
    run = Run(
        command=command,
        args=json.dumps(args, sort_keys=True, default=str),
        tool_version=__version__,
        started_at=dt.datetime.now(dt.UTC),
    )
    with session(con) as s:
        s.add(run)
        s.commit()
        s.refresh(run)
        assert run.id is not None
        return run.id


def finish(
    con: duckdb.DuckDBPyConnection, run_id: int, status: str, exit_code: int, summary: dict
) -> None:
    with session(con) as s:
        run = s.get(Run, run_id)
        assert run is not None
        run.finished_at = dt.datetime.now(dt.UTC)
        run.status = status
        run.exit_code = exit_code
        run.summary = json.dumps(summary, sort_keys=True, default=str)
        s.add(run)
        s.commit()


@dataclass
class Recording:
    """The run being recorded: its id, and the exit code and summary it ends with when its
    block ends without an exception (`done`)."""

    id: int
    exit_code: int = EXIT_OK
    summary: dict[str, Any] = field(default_factory=dict)

    def done(self, exit_code: int, summary: dict[str, Any]) -> None:
        self.exit_code, self.summary = exit_code, summary


@contextmanager
def recorded(
    con: duckdb.DuckDBPyConnection, command: str, args: dict[str, Any], *, keep_error: bool = True
) -> Iterator[Recording]:
    """Record a run around the block: started now, finished when the block ends, with the
    outcome the exception says (the error goes on up, for the command to say it):

    - none: 'done', with what the block gave `Recording.done` (else exit 0, no summary);
    - a UserError: 'failed', with its exit code and its sentence;
    - Ctrl-C (db.interrupted): 'interrupted', exit 130, the operator's choice, not a failure
      of the tool;
    - a disk full or memory exhausted under DuckDB (db.setup_error): 'failed', exit 2,
      raised on as that UserError;
    - anything else: 'failed', exit 3 (an internal failure), with the error as Python
      writes it.

    With `keep_error` false a failed run's summary is empty: the notice commands' records
    have never carried the error.
    """
    run = Recording(start(con, command, args))
    where = _database(con)
    _OPEN.add((where, run.id))

    def failed(status: str, code: int, error: str) -> None:
        finish(con, run.id, status, code, {"error": error} if keep_error else {})
        # the error that ended the run is the one to say; the next run that owns the
        # database seals what this one wrote (ledger.seal_start)
        with contextlib.suppress(Exception):
            ledger.seal(con, run.id)

    try:
        _sealed_start(con, run.id, where)
        yield run
    except UserError as e:
        failed("failed", e.exit_code, str(e))
        raise
    except BaseException as e:
        full = setup_error(e)
        if interrupted(e):
            failed("interrupted", EXIT_INTERRUPTED, "interrupted")
        elif full is not None:
            failed("failed", full.exit_code, str(full))
            raise full from e
        else:
            failed("failed", EXIT_INTERNAL, repr(e))
        raise
    finally:
        _OPEN.discard((where, run.id))
    finish(con, run.id, "done", run.exit_code, run.summary)
    ledger.seal(con, run.id)  # every row the run wrote, and its end


def rule_pack_hashes(rules_dir: Path | str | None = None) -> dict[str, str]:
    """SHA-256 of every rule pack file present, by file name: a run's record then says exactly
    which rules it applied, even after the packs are edited. Hashes the bytes without loading
    them, so a broken pack is still named (the audit itself refuses it with a sentence)."""
    from auditor.rules.pack import list_packs

    return {
        ref.path.name: hashlib.sha256(ref.path.read_bytes()).hexdigest()
        for ref in list_packs(rules_dir)
    }


# The counts a run's summary carries at its top level, in the order `bacc-audit runs` shows
# them; a list counts its items (ingest's and nightly's `files`).
COUNT_KEYS = (
    "files",
    "events",
    "quarantined",
    "rounds_audited",
    "findings_new",
    "findings_withdrawn",
    "pdfs",
)


def counts(summary: dict[str, Any]) -> dict[str, int]:
    """The headline numbers of a run summary (whatever command wrote it)."""
    out: dict[str, int] = {}
    for key in COUNT_KEYS:
        value = summary.get(key)
        if isinstance(value, list):
            value = len(value)
        if isinstance(value, int) and not isinstance(value, bool):
            out[key] = value
    return out


def listing(
    con: duckdb.DuckDBPyConnection,
    live: Collection[int] = (),
    *,
    command: str | None = None,
    status: str | None = None,
) -> list[dict[str, Any]]:
    """Every run, oldest first, with the status a reader should see; or only those with this
    `command` and this shown `status`.

    The status filter is on the status shown, so `interrupted` finds the runs whose process
    died too (their row still says 'running').

    A run whose row still says 'running' but is not in `live` is shown as 'interrupted': its
    process died without finishing (SIGKILL, power loss), which a row cannot record about
    itself. Nothing is written: the stored row keeps 'running' (`recorded_status`), so the
    records stay append-only evidence. Callers pass as `live` the runs whose process is known
    to be alive: the holder of the nightly lock, and the runs of the process that owns the
    database and serves this reader (db.served_runs; docs/database.md). Any other writer is
    dead, since DuckDB admits one process with the file open for writing.
    """
    rows = con.execute(
        "SELECT id, command, args, tool_version, started_at, finished_at, status, exit_code, "
        "summary FROM runs WHERE ? IS NULL OR command = ? ORDER BY id",
        [command, command],
    ).fetchall()
    out = []
    for rid, name, args, version, started, finished, recorded, code, summary in rows:
        parsed = json.loads(summary) if summary else {}
        shown = "interrupted" if recorded == "running" and rid not in live else recorded
        if status is not None and shown != status:
            continue
        out.append(
            {
                "id": rid,
                "command": name,
                "started_at": started.astimezone(dt.UTC).isoformat(),
                "finished_at": finished.astimezone(dt.UTC).isoformat() if finished else None,
                "status": shown,
                "recorded_status": recorded,
                "exit_code": code,
                "tool_version": version,
                "counts": counts(parsed) if isinstance(parsed, dict) else {},
                "args": json.loads(args) if args else {},
                "summary": parsed,
            }
        )
    return out
