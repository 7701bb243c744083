"""The sample night as tests read it: its audit database built from sample_logs (with or
without MB-01's log, which a test can then store while a board or a reader runs), a board's
test client on a loopback Host, and a page's text as a reader sees it."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import duckdb
import pytest
from starlette.testclient import TestClient

from auditor import config
from auditor.audit.run import audit
from auditor.ingest.run import ingest
from auditor.store import db, runs

from .shared import copy_of, once

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
CONFIG = SAMPLE / "property.toml"
MB01 = SAMPLE / "2026-11-28_MB-01.jsonl"
SHIFT = "2026-11-28/grave"
LOCAL = "http://127.0.0.1"  # a board without a login answers to a loopback Host only


def build(path: Path, with_mb01: bool) -> Path:
    """The sample night's audit database at `path` (20 findings without MB-01, 22 with)."""
    con = db.connect(path)
    logs = [f for f in sorted(SAMPLE.glob("2026-11-28_*")) if with_mb01 or f != MB01]
    ingest(con, logs, runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.load(CONFIG))
    con.close()
    return path


def built(factory: pytest.TempPathFactory, path: Path, with_mb01: bool) -> Path:
    """`build`'s database at `path`: a copy of the one built once for the whole run
    (tests/helpers/shared.py), not one ingest and audit per module and worker."""
    key = "sample-full" if with_mb01 else "sample-night"
    folder = once(factory, key, lambda d: build(d / "audit.duckdb", with_mb01))
    return copy_of(folder / "audit.duckdb", path)


def store_mb01(con: duckdb.DuckDBPyConnection) -> None:
    """What `bacc-audit watch` does when MB-01's log arrives: ingest it, audit it."""
    ingest(con, [MB01], runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.load(CONFIG))


def local_client(app: Any, **kw: Any) -> TestClient:
    return TestClient(app, base_url=LOCAL, follow_redirects=False, **kw)


def plain(page: str) -> str:
    """A page's text as a reader sees it: tags out, entities decoded, spaces collapsed."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", page)))
