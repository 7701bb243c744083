"""Runs: every writing command is recorded with its start, end, outcome and tool version."""

from __future__ import annotations

import datetime as dt
import json

import duckdb

from auditor import __version__
from auditor.db import session
from auditor.records import Run


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
