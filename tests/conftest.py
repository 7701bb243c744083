"""Shared fixtures: a fresh audit database per test.

`audit` is the one most tests use: an `AuditDb` (tests/helpers/db.py) in tmp_path, opened with
`auditor.store.db.connect` (the real schema), with a run id from `auditor.store.runs.start`.
`db_path`, `con` and `run_id` are its parts. `bacc_audit` runs the command in-process
(tests/helpers/cli.py). `sample_audited` is the sample night ingested and audited once a
session (once a pytest-xdist worker), for the modules that read it: each reads a copy of its
own; `sample_ingested` is the same night ingested only, for tests that audit or annotate it
their own way (a copy each). Helpers that are not fixtures live in tests/helpers/.
"""

from __future__ import annotations

import gc
import os
import pickle
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest
from helpers.cli import Run, in_process
from helpers.db import AuditDb, new_database
from helpers.shared import copy_of, once

from auditor.audit import run as audit_run
from auditor.config import PropertyConfig
from auditor.ingest.run import ingest
from auditor.store import db, runs

SAMPLE = Path(__file__).resolve().parents[1] / "sample_logs"


# Under pytest-xdist each worker's DuckDB runs on one thread (BACC_AUDIT_THREADS): the
# workers already fill the cores, and a second thread each only adds scheduling (about 5% of
# the suite's CPU). Commands a test starts inherit it; a test of the threads sets its own.
# (So a query whose order depends on threads is met here only single-threaded: every query
# that needs an order must say ORDER BY, store/db.py.)
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("BACC_AUDIT_THREADS", "1")

# The umask the session started with (read by setting it, then setting it back).
SESSION_UMASK = os.umask(0o022)
os.umask(SESSION_UMASK)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What the process holds once the tests are collected (the modules, the items, their
    parameters: ~200,000 objects) lives to the end of the run: frozen, so that no garbage
    collection walks it again. The CLI helper's full collection after each command
    (helpers/cli.py) then takes milliseconds instead of ~0.15-0.3 s of CPU, and so do
    Python's own full collections during the run. Garbage made later is collected as before."""
    gc.collect()
    gc.freeze()
    _frozen_at[0] = len(sys.modules)


_frozen_at = [0]  # modules loaded at the last freeze


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    """Modules a test imported for the first time (the PDF renderer, the board, the cluster:
    about a thousand modules, ~90,000 objects, over a worker's run) are frozen as well, once
    the test is over: unfrozen, every later full collection walked them again (the CLI helper's
    collection: 17.7 ms median over `tests/cli`, 0.6 ms with them frozen). What the worker
    holds at that moment is frozen with them: a cycle of it that dies later is never
    collected; the freeze came 10 and 13 times on the two workers of a whole run."""
    if len(sys.modules) > _frozen_at[0]:
        gc.collect()
        gc.freeze()
        _frozen_at[0] = len(sys.modules)


@pytest.fixture(autouse=True)
def _umask_restored() -> Iterator[None]:
    """The product makes its files private by tightening the process umask once it opens a
    database (auditor.errors.private_files): right for a command, a leak between tests run in
    one process. Each test runs with the umask the session started with."""
    os.umask(SESSION_UMASK)
    yield
    os.umask(SESSION_UMASK)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "audit.duckdb"


@pytest.fixture
def con(db_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    c = new_database(db_path)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def run_id(con: duckdb.DuckDBPyConnection) -> int:
    return runs.start(con, "test", {"test": True})


@pytest.fixture
def audit(tmp_path: Path, con: duckdb.DuckDBPyConnection, run_id: int) -> AuditDb:
    logs = tmp_path / "logs"
    logs.mkdir()
    return AuditDb(logs, con, run_id)


@pytest.fixture
def bacc_audit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> Callable[..., Run]:
    """`bacc-audit ARGS...` in-process from tmp_path; returns Run(exit code, stdout, stderr)."""
    return in_process(monkeypatch, capsys, tmp_path)


@pytest.fixture(scope="session")
def sample_audited(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, audit_run.AuditResult]:
    """sample_logs/ ingested, then audited under the default property config, and closed:
    the database file (copy it before opening it) and the audit's result. Built once for
    the whole run (tests/helpers/shared.py), whichever worker asks first."""

    def make(folder: Path) -> None:
        c = db.connect(folder / "audit.duckdb")
        try:
            ingest(c, [SAMPLE], runs.start(c, "ingest", {}))
            result = audit_run.audit(c, runs.start(c, "audit", {}), PropertyConfig())
        finally:
            c.close()
        (folder / "result.pickle").write_bytes(pickle.dumps(result))

    folder = once(tmp_path_factory, "sample-audited", make)
    path = copy_of(folder / "audit.duckdb", tmp_path_factory.mktemp("sample") / "audit.duckdb")
    return path, pickle.loads((folder / "result.pickle").read_bytes())


@pytest.fixture(scope="session")
def sample_ingested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sample_logs/ ingested into a database, closed: copy it before opening it (~2 s of CPU
    once a run instead of once a test)."""

    def make(folder: Path) -> None:
        c = db.connect(folder / "audit.duckdb")
        try:
            ingest(c, [SAMPLE], runs.start(c, "ingest", {}))
        finally:
            c.close()

    folder = once(tmp_path_factory, "sample-ingested", make)
    return copy_of(folder / "audit.duckdb",
                   tmp_path_factory.mktemp("sample-ingested") / "audit.duckdb")


@pytest.fixture(scope="session")
def sample_full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample night (MB-01's log too: 22 findings) ingested and audited under the sample
    property config, once a run: the board's desk tests copy it (`night_copy`)."""
    from helpers.sample import built  # Starlette's client with it: only where it is needed

    return built(tmp_path_factory, tmp_path_factory.mktemp("desk") / "full.duckdb",
                 with_mb01=True)


@pytest.fixture
def night_copy(sample_full: Path, tmp_path: Path) -> Path:
    """A private copy of `sample_full`, for a test that writes to it."""
    import shutil

    dst = tmp_path / "audit.duckdb"
    shutil.copy2(sample_full, dst)
    return dst
