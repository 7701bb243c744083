"""`bacc-audit backfill` on a local Dask cluster of two workers gives what `ingest` then
`audit` give on one machine: the same findings (by fingerprint, with their status), the same
manifest, events and quarantine, and the same shift report but for its time of generation;
also when a worker is killed in the middle of a partition. The nights: seven gaming days of
simulated tables with every code planted, the tables' streams going on from one day to the
next (so sequence gaps, shoes and days cross files), a night past the gaming day's end, and
resent, altered and mixed files beside them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import pickle
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.nights import continue_streams
from helpers.pdfs import pdf_text
from helpers.pdfs import without_generation_time as _without_generation_time
from helpers.rules import panda8_rules
from helpers.shared import copy_of, once

from auditor import config
from auditor.audit.run import audit
from auditor.ingest.run import ingest
from auditor.jobs import backfill
from auditor.report import gather, render
from auditor.rules.codes import REGISTRY
from auditor.simulate.kinds import KIND_CODES, LIE_KINDS
from auditor.simulate.layout import GAMES
from auditor.simulate.planted import simulate
from auditor.store import db, runs

pytestmark = [pytest.mark.slow, pytest.mark.cluster]  # a local Dask cluster of two workers

CONF = config.PropertyConfig()
DAY1 = dt.date(2026, 11, 1)  # every night before any day the suite runs on
BANKING = ("mini_baccarat", "punto_banco")
# (tables, hours, seed, rate, games, patterns), one gaming day each from DAY1 on: between
# them they plant every kind, so every code (like the recall runs of
# tests/simulate/test_simulate.py; the first is smaller than theirs: make_logs checks that
# every kind is still planted); the last runs 9 hours, past the gaming day's 06:00 start, so
# its shoes cross into the next gaming day.
NIGHTS: list[tuple[int, float, int, float, tuple[str, ...], dict[str, bool]]] = [
    (10, 2, 1, 0.3, GAMES, {}),
    (8, 3, 5, 0.3, BANKING, {}),
    (6, 1, 4, 0.05, GAMES, {}),
    (8, 2, 3, 0.03, GAMES, {"error_prone_dealer": True, "counting_seat": True}),
    (6, 3, 2, 0.0, BANKING, {"shoe_twice": True, "unshuffled": True}),
    (2, 2, 4, 0.0, ("mini_baccarat",), {"counting_seat": True}),
    (2, 2, 1, 0.0, ("mini_baccarat",), {"phantom_shoe": True, "shoe_reopened": True}),
    (2, 9, 7, 0.05, ("mini_baccarat",), {}),  # last: it runs into the next gaming day
]
LAST = DAY1 + dt.timedelta(days=len(NIGHTS) - 1)
_SEQ = re.compile(r'"seq":(\d+)')


def make_logs(base: Path) -> Path:
    """The nights in folders d1, d2, ... (one gaming day each, every stream going on from
    the night before), and the odd files of z-resent/."""
    logs = base / "logs"
    tops: dict[str, int] = {}
    kinds: set[str] = set()
    for i, (tables, hours, seed, rate, games, patterns) in enumerate(NIGHTS):
        night = logs / f"d{i + 1}"
        r = simulate(night, tables, hours, seed=seed, deviation_rate=rate, games=games,
                     day=DAY1 + dt.timedelta(days=i), **patterns)
        kinds |= {d["kind"] for d in r.deviations}
        (night / "ground_truth.ndjson").unlink()
        continue_streams(night, tops)
    # Every code planted but the lies of issue 28, whose files come after a night's audit
    # (tests/simulate/test_simulate.py and tests/jobs/test_watch.py find them).
    assert kinds == set(KIND_CODES) - set(LIE_KINDS)
    # In a folder of their own, read after the nights: half a file again under another
    # name (duplicates); a file with a payout changed (altered); and a floor file that
    # starts with one table's events and goes on with another's (all duplicates), which
    # puts one partition's events in another's streams.
    extra = logs / "z-resent"
    extra.mkdir()
    src = logs / "d3" / f"{DAY1 + dt.timedelta(days=2)}_MB-01.jsonl"
    lines = src.read_text().splitlines(keepends=True)
    (extra / "copy_MB-01.jsonl").write_text("".join(lines[: len(lines) // 2]))
    at = next(i for i, x in enumerate(lines) if '"type":"pay"' in x)
    lines[at] = re.sub(r'"amount":(\d+)', lambda m: f'"amount":{int(m[1]) + 5}', lines[at])
    assert lines[at] != src.read_text().splitlines(keepends=True)[at]
    (extra / "changed_MB-01.jsonl").write_text("".join(lines[: at + 3]))
    pb = (logs / "d1" / f"{DAY1}_PB-02.jsonl").read_text().splitlines(keepends=True)
    mb = (logs / "d1" / f"{DAY1}_MB-01.jsonl").read_text().splitlines(keepends=True)
    (extra / "floor.jsonl").write_text("".join(pb[:50] + mb[100:150]))
    # A file that starts with a notice of a pit of its own and goes on with a table's
    # stream after a gap: the table's stream then spans two partitions without overlap.
    notice = next(x for x in (logs / "d1").glob("*pit-notices.jsonl")).read_text()
    first = re.sub(r'"seq":\d+', '"seq":1', notice.splitlines(keepends=True)[0])
    first = re.sub(r'"pit":"[^"]+"', '"pit":"P9"', first)
    last = (logs / f"d{len(NIGHTS)}" / f"{LAST}_MB-02.jsonl").read_text()
    tail = last.splitlines(keepends=True)[-40:]
    top = tops["table:MB-02"]
    late = [_SEQ.sub(f'"seq":{top + 3 + i}', x, count=1) for i, x in enumerate(tail)]
    (extra / "late.jsonl").write_text(first + "".join(late))
    return logs


def one_machine(logs: Path | list[Path], path: Path) -> None:
    con = db.connect(path)
    ingest(con, logs if isinstance(logs, list) else [logs], runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), CONF)
    con.close()


@pytest.fixture(scope="module")
def house_rules(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The packs under which every code can be planted (panda 8 announced), through
    BACC_AUDIT_RULES: the workers of the local clusters started meanwhile inherit it, as
    workers of a real cluster must be given it (docs/scale-out.md)."""
    with pytest.MonkeyPatch.context() as mp:
        yield panda8_rules(tmp_path_factory.mktemp("rules"), mp)


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory, house_rules: Path) -> dict[str, Any]:
    """The logs and their one-machine audit, made once a run (helpers/shared.py) even when
    this module's tests run on both workers: read them, do not change them. `base` is this
    worker's own folder, for the databases its tests write."""
    base = once(tmp_path_factory, "backfill-nights",
                lambda folder: one_machine(make_logs(folder), folder / "one.duckdb"))
    return {"base": tmp_path_factory.mktemp("backfill"), "logs": base / "logs",
            "one": base / "one.duckdb"}


def _run(nights: dict[str, Any], name: str, **kw: Any) -> tuple[Path, backfill.BackfillResult, int]:
    path = nights["base"] / f"{name}.duckdb"
    said: list[str] = []
    result, code = backfill.run_backfill(
        path, [nights["logs"]], CONF, workers=2, partition_bytes=1 << 20, say=said.append, **kw
    )
    result.said = said  # type: ignore[attr-defined]
    return path, result, code


@pytest.fixture(scope="module")
def backfilled(
    nights: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, backfill.BackfillResult, int]:
    """The cluster's backfill of all the nights, run once a run (helpers/shared.py) even
    when this module's tests run on both workers; each worker gets its own copy of the
    database and the run's result."""

    def make(folder: Path) -> None:
        _, result, code = _run({**nights, "base": folder}, "cluster")
        kept = dataclasses.replace(result, local=None)  # the driver's ingest holds a hash
        kept.said = result.said  # type: ignore[attr-defined]
        (folder / "result.pickle").write_bytes(pickle.dumps((kept, code)))

    folder = once(tmp_path_factory, "backfill-cluster", make)
    result, code = pickle.loads((folder / "result.pickle").read_bytes())
    return copy_of(folder / "cluster.duckdb", nights["base"] / "cluster.duckdb"), result, code


def rows(path: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return sorted(con.execute(sql).fetchall(), key=repr)
    finally:
        con.close()


FINDINGS = (
    "SELECT fingerprint, status, code, severity, table_id, pit, shoe, round, seq, ts, rule, "
    "message, expected::VARCHAR, observed::VARCHAR, source, dealer FROM current_findings"
)
SOURCES = (
    "SELECT path, sha256, size, lines, events, quarantined, duplicates, first_ts, last_ts, "
    "status FROM sources"
)


def assert_same_as_one_machine(one: Path, other: Path, log_codes: bool = True) -> None:
    found = rows(other, FINDINGS)
    assert found == rows(one, FINDINGS)
    codes = {r[2] for r in found}
    assert "log.altered" in codes
    if log_codes:
        assert {"log.seq_gap", "log.malformed"} <= codes, codes
    assert rows(other, SOURCES) == rows(one, SOURCES)
    for sql in (
        "SELECT count(*), count(DISTINCT (stream, seq)), sum(hash(raw)) FROM events",
        "SELECT line_no, reason, raw FROM quarantine",
        "SELECT stream, min_seq, max_seq, events FROM stream_sources",
        "SELECT path, start_byte, end_byte, first_line, last_line, prefix_sha256, events "
        "FROM source_extents",
        "SELECT DISTINCT ON (table_id, shoe, round) table_id, shoe, round, events, last_seq, "
        "findings FROM round_audits ORDER BY table_id, shoe, round, audited_at DESC",
    ):
        assert rows(other, sql) == rows(one, sql), sql


def test_backfill_on_two_workers_finds_what_one_machine_finds(nights, backfilled):
    path, result, code = backfilled
    assert code == 1  # quarantined lines, an altered file, findings
    assert result.workers == 2 and len(result.partitions) >= 4
    # Every partition went through the engine, on both workers, and was merged, but the
    # one with the floor file: its events meet another partition's streams, so the driver
    # ingested its files itself, as `ingest` would, and replayed their rounds.
    assert len({p["worker"] for p in result.partitions}) == 2
    assert len(result.redone_locally) == 1
    assert result.merged == len(result.partitions) - 1
    redone = result.partitions[result.redone_locally[0]]
    assert any(f["path"].endswith("floor.jsonl") for f in redone["files"])
    assert result.audit is not None and result.audit.rounds > redone["rounds"]
    # MB-02's stream goes on in late.jsonl, in another partition: its gap is found across
    # partitions, and its rounds were replayed again on the merged database.
    assert "table:MB-02" in result.spanning
    assert_same_as_one_machine(nights["one"], path)
    # Every code of the registry was raised, and so compared, but the two only a delivery
    # after an audit raises (no night here is audited before another file comes), and a
    # stamp ahead of its delivery (the lying night's, not planted here: its finding names
    # the delivery, which differs from one machine to the other).
    assert {r[0] for r in rows(path, "SELECT DISTINCT code FROM current_findings")} == set(
        REGISTRY
    ) - {"log.late_delivery", "notice.backdated", "log.future_stamp"}
    # The runs say who ingested what: every source and finding is the backfill's.
    assert rows(path, "SELECT DISTINCT run_id FROM sources") == [(result.run_id,)]
    assert rows(path, "SELECT command, status, exit_code FROM runs") == [("backfill", "done", 1)]
    summary = json.loads(rows(path, "SELECT summary FROM runs")[0][0])
    assert summary["merged"] == result.merged and summary["exit_code"] == 1
    assert summary["redone_by_driver"] == result.redone_locally


def _report_text(path: Path, day: dt.date, shift: str, out: Path) -> str:
    con = db.connect(path, read_only=True)
    try:
        scope = gather.scope_for(CONF, con, shift=f"{day}/{shift}")
        pdf = render.write_report(con, CONF, scope, out)
    finally:
        con.close()
    return pdf_text(pdf)


# The third night's grave shift, and the day shift of the gaming day that the last night
# runs into past 06:00 (its shoes cross the boundary).
@pytest.mark.parametrize(
    ("day", "shift"), [(DAY1 + dt.timedelta(days=2), "grave"), (LAST + dt.timedelta(days=1), "day")]
)
def test_reports_differ_only_in_their_time_of_generation(nights, backfilled, tmp_path, day, shift):
    one = _report_text(nights["one"], day, shift, tmp_path / "one.pdf")
    other = _report_text(backfilled[0], day, shift, tmp_path / "other.pdf")
    assert len(one) > 2000
    assert _without_generation_time(other) == _without_generation_time(one)


def test_a_worker_killed_mid_partition_loses_nothing_and_doubles_nothing(
    nights, monkeypatch, tmp_path
):
    """On the last two nights and the resent files (the first two take long): one worker
    kills itself in the middle of the first partition it runs; Dask runs it again."""
    logs = nights["logs"]
    paths = [logs / "d3", logs / f"d{len(NIGHTS)}", logs / "z-resent"]
    one = tmp_path / "one.duckdb"
    one_machine(paths, one)
    marker = tmp_path / "killed"
    monkeypatch.setenv(backfill.KILL_HOOK, str(marker))
    path = tmp_path / "killed.duckdb"
    result, _ = backfill.run_backfill(path, paths, CONF, workers=2, partition_bytes=1 << 20)
    assert marker.exists()  # a worker did die in the middle of its partition
    assert len(result.partitions) >= 3
    assert_same_as_one_machine(one, path, log_codes=False)


def test_a_second_backfill_of_the_same_logs_adds_nothing(nights, backfilled, tmp_path):
    path = tmp_path / "again.duckdb"
    shutil.copy(backfilled[0], path)
    before = rows(path, FINDINGS)
    result, _ = backfill.run_backfill(path, [nights["logs"]], CONF, workers=2)
    # Every file is known to the database: the driver's ingest judges them all, as a second
    # `ingest` would: already ingested, and the altered ones refused again (on the record).
    assert not result.partitions
    statuses = {f["status"] for f in result.files}
    assert statuses == {"already_ingested", "refused_altered"}
    assert rows(path, FINDINGS) == before
    assert rows(path, "SELECT count(*) FROM events") == rows(
        backfilled[0], "SELECT count(*) FROM events"
    )
    assert rows(path, f"SELECT DISTINCT status FROM sources WHERE run_id = {result.run_id}") == [
        ("refused_altered",)
    ]


def test_the_command(nights, bacc_audit, tmp_path, monkeypatch):
    """`bacc-audit backfill` prints its summary and exits as ingest then audit would; then
    `findings` reads the result; its user errors are one sentence and exit 2."""
    db_path = tmp_path / "cli.duckdb"
    run = bacc_audit("backfill", nights["logs"] / "d3", "--db", db_path, "--workers", "2",
                     "--json")
    assert run.code == 1, run.err
    summary = json.loads(run.out)
    assert summary["exit_code"] == 1 and summary["workers"] == 2 and summary["merged"] >= 1
    run = bacc_audit("findings", "--db", db_path, "--format", "jsonl")
    assert run.code == 0 and run.out.count("\n") == rows(
        db_path, "SELECT count(*) FROM current_findings"
    )[0][0]
    monkeypatch.setattr(backfill, "CONNECT_TIMEOUT", "2s")
    for args, says in (
        ((tmp_path / "nope",), "no such file or directory"),
        ((nights["logs"] / "d3", "--engine", "ray"), "--engine ray is not supported"),
        ((nights["logs"] / "d3", "--engine", "spark"), "unknown engine"),
        ((nights["logs"] / "d3", "--address", "tcp://127.0.0.1:9"), "cannot reach a Dask"),
        ((nights["logs"] / "d3", "--workers", "0"), "give at least 1"),
    ):
        run = bacc_audit("backfill", *args, "--db", tmp_path / "err.duckdb")
        assert run.code == 2, (args, run.err)
        assert run.err.startswith("error: ") and says in run.err, run.err
        assert run.err.count("\n") == 1 and "Traceback" not in run.err
    assert not (tmp_path / "err.duckdb").exists()
