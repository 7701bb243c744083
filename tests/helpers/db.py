"""An audit database for the ingest, CLI and schema-agreement tests.

`AuditDb` is a fresh audit database (opened with `auditor.store.db.connect`, so it has the real
schema) with one run from `auditor.store.runs.start`, and small helpers to write log files
(plain, CRLF, BOM, gzip, raw bytes), ingest them, and read the tables back as dicts.
tests/conftest.py's `audit` fixture gives one per test; `open_audit` one per module.
"""

from __future__ import annotations

import atexit
import gzip
import json
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from auditor.ingest import load, reader, run
from auditor.ingest.result import FileResult, IngestResult
from auditor.store import db, runs

from .events import Line, encode_lines


class AuditDb:
    """A fresh audit database with one run, and helpers around it."""

    def __init__(self, tmp_path: Path, con: duckdb.DuckDBPyConnection, run_id: int) -> None:
        self.dir = tmp_path
        self.con = con
        self.run_id = run_id

    # -- files ---------------------------------------------------------------------------
    def write(
        self,
        name: str,
        lines: Iterable[Line],
        *,
        gz: bool = False,
        newline: bytes = b"\n",
        bom: bool = False,
        final_newline: bool = True,
    ) -> Path:
        """Write `lines` (str, bytes or event dicts) to tmp_path/name; gzip it if `gz`."""
        data = encode_lines(lines, newline=newline, bom=bom, final_newline=final_newline)
        return self.write_bytes(name, gzip.compress(data, mtime=0) if gz else data)

    def write_bytes(self, name: str, data: bytes) -> Path:
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    # -- ingest --------------------------------------------------------------------------
    def ingest_file(self, path: Path, **kw: Any) -> FileResult:
        return load.ingest_file(self.con, path, self.run_id, **kw)

    def ingest(self, *paths: Path | str, **kw: Any) -> IngestResult:
        return run.ingest(self.con, list(paths), self.run_id, **kw)

    # -- reading back ----------------------------------------------------------------------
    def rows(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        cur = self.con.execute(sql, list(params))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def scalar(self, sql: str, *params: Any) -> Any:
        return self.con.execute(sql, list(params)).fetchall()[0][0]

    def events(self, where: str = "true", *params: Any) -> list[dict[str, Any]]:
        return self.rows(f"SELECT * FROM events WHERE {where} ORDER BY source_id, line_no", *params)

    def quarantine(self) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM quarantine ORDER BY source_id, line_no")

    def sources(self) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM sources ORDER BY id")

    def findings(self, code: str | None = None, table: str = "findings") -> list[dict[str, Any]]:
        """Findings rows (or current_findings with table=...), expected/observed/evidence as
        Python values."""
        out = self.rows(
            f"SELECT * FROM {table} WHERE ? IS NULL OR code = ? ORDER BY id", code, code
        )
        for r in out:
            for k in ("expected", "observed", "evidence"):
                r[k] = json.loads(r[k]) if r[k] is not None else None
        return out

    def current_findings(self, code: str | None = None) -> list[dict[str, Any]]:
        return self.findings(code, table="current_findings")

    def counts(self) -> dict[str, int]:
        return {
            t: self.scalar(f"SELECT count(*) FROM {t}")
            for t in ("events", "quarantine", "sources", "findings")
        }


_EMPTY: list[Path] = []  # this process's empty audit database, made on first use


def new_database(path: Path) -> duckdb.DuckDBPyConnection:
    """`db.connect(path)` of a new audit database: a copy of an empty one this process made
    once (its schema created once), opened as a command opens an existing database. About
    0.05 s of CPU less a test than creating the schema again; the same tables, empty."""
    if not _EMPTY:
        folder = Path(tempfile.mkdtemp(prefix="bacc-audit-empty-"))
        atexit.register(shutil.rmtree, folder, True)
        db.connect(folder / "audit.duckdb").close()
        _EMPTY.append(folder / "audit.duckdb")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_EMPTY[0], path)
        shutil.copymode(_EMPTY[0], path)  # 0600, as the product creates it
    return db.connect(path)


def open_audit(directory: Path) -> AuditDb:
    """A fresh audit database in `directory` (for module-scoped fixtures; close `.con`)."""
    con = new_database(directory / "audit.duckdb")
    logs = directory / "logs"
    logs.mkdir()
    return AuditDb(logs, con, runs.start(con, "test", {"test": True}))


def set_chunk_bytes(mp: pytest.MonkeyPatch, n: int) -> None:
    """Make ingest read files in blocks of `n` bytes, through the documented knob
    `auditor.ingest.reader.CHUNK_BYTES` (ingest/test_ingest.py checks that the knob takes
    effect)."""
    mp.setattr(reader, "CHUNK_BYTES", n)
