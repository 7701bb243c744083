"""`watch` polls with one DuckDB thread (WatchOptions.poll_threads) and sweeps with the
count its connection came with, which the run leaves behind."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import duckdb
import pytest

from auditor import config
from auditor.jobs import watch as watching
from auditor.jobs.watch import Watch, WatchOptions
from auditor.store import db, runs

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"


def _threads(con: duckdb.DuckDBPyConnection) -> int:
    return int(db.single(con, "SELECT current_setting('threads')")[0])


@pytest.mark.parametrize("poll_threads, polling", [(1, 1), (0, 3)])
def test_polls_use_one_thread_and_sweeps_the_connections_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, poll_threads: int, polling: int
) -> None:
    con = db.connect(tmp_path / "live.duckdb")
    con.execute("SET threads = 3")
    spool = tmp_path / "spool"
    spool.mkdir()
    lines = (SAMPLE / "2026-11-28_MB-01.jsonl").read_bytes().splitlines(keepends=True)
    (spool / "MB-01.jsonl").write_bytes(b"".join(lines[:40]))
    swept: list[int] = []
    audit = watching.audit

    def counted(*args: Any, **kwargs: Any) -> Any:
        swept.append(_threads(con))
        return audit(*args, **kwargs)

    monkeypatch.setattr(watching, "audit", counted)
    w = Watch(con, spool, config.load(SAMPLE / "property.toml"), runs.start(con, "watch", {}),
              WatchOptions(rescan=0, poll_threads=poll_threads))
    assert _threads(con) == polling
    assert w.step() > 0  # the first poll sweeps too (what a kill left unaudited)
    assert _threads(con) == polling
    stop = threading.Event()
    stop.set()
    w.run(stop)  # drains, sweeps once more, and gives the count back
    assert swept == [3, 3]
    assert _threads(con) == 3
    con.close()
