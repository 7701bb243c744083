"""One writer, many readers (issue 14; docs/database.md): while a process has the database
open for writing through `db.connect`, `findings`, `report`, `runs`, `ack` and `doctor` in
other processes still answer, through it, with what they say when nobody writes.

The writer is a real second process (DuckDB's lock only bites between processes), and the
commands are the real console script. A few tests of the mechanics (permissions, a socket
path too long, a refused user, write conflicts) serve from the test process itself.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pypdf
import pytest
from helpers.cli import Run
from helpers.processes import holder

from auditor import config as cfg
from auditor.audit.run import audit
from auditor.errors import DatabaseBusy
from auditor.ingest.run import ingest
from auditor.store import acks, db, runs, serving, shared, wire
from auditor.store.findings import short_id
from auditor.store.records import Acknowledgement

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_logs"
CONFIG = SAMPLE / "property.toml"
SHIFT = "2026-11-28/swing"  # the sample's shortest report (5 pages; the grave's 15)
TRY_AGAIN = "try again when it has finished"

# The writer: opens the database read-write through db.connect (so it owns and serves it),
# then does what the test writes to its stdin, one command a line, and answers each.
WRITER = """
    import select, sys, time
    from pathlib import Path
    from auditor.store import db, runs

    con = db.connect(Path(sys.argv[1]))
    print("ready", flush=True)
    while line := sys.stdin.readline():
        cmd = line.split()[0]
        if cmd == "run":  # a run of its own, in progress
            print(runs.start(con, "watch", {}), flush=True)
        elif cmd == "pairs":  # commit a row to each of two tables, again and again
            con.execute("CREATE TABLE IF NOT EXISTS pair_a (i BIGINT)")
            con.execute("CREATE TABLE IF NOT EXISTS pair_b (i BIGINT)")
            print("inserting", flush=True)
            n = 0
            while not select.select([sys.stdin], [], [], 0)[0]:
                con.execute("BEGIN TRANSACTION")
                con.execute("INSERT INTO pair_a VALUES (?)", [n])
                con.execute("INSERT INTO pair_b VALUES (?)", [n])
                con.execute("COMMIT")
                n += 1
                time.sleep(0.002)  # a busy writer, not a spinning one: the readers need a CPU
            sys.stdin.readline()
            print(n, flush=True)
        elif cmd == "close":
            con.close()
            print("closed", flush=True)
"""

# An older bacc-audit (or any program) writing: the lock, and no owner file of its own.
PLAIN_HOLDER = """
    import sys, time
    import duckdb
    con = duckdb.connect(sys.argv[1])
    print("ready", flush=True)
    time.sleep(120)
"""


class Writer:
    """The writer process: `say` sends a command and returns its answer."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(WRITER), str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.pid = self.proc.pid
        assert self._line() == "ready"

    def _line(self, seconds: float = 60) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], seconds)
        line = self.proc.stdout.readline().strip() if ready else ""
        if not line:
            self.kill()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            pytest.fail(f"the writer did not answer: {err}")
        return line

    def say(self, command: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._line()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)

    def end(self) -> str:
        """Close stdin and wait: what the writer wrote to stderr (nothing, we expect)."""
        _, err = self.proc.communicate(timeout=30)  # closes stdin: the writer's loop ends
        return err


@contextmanager
def writer(path: Path) -> Iterator[Writer]:
    w = Writer(path)
    try:
        yield w
    finally:
        if w.proc.poll() is None:
            w.kill()
        for stream in (w.proc.stdin, w.proc.stdout, w.proc.stderr):
            if stream and not stream.closed:
                stream.close()


def command(*args: str | Path) -> list[str]:
    script = Path(sys.executable).with_name("bacc-audit")
    head = [str(script)] if script.exists() else [sys.executable, "-m", "auditor.cli.app"]
    return [*head, *map(str, args)]


ENV = {k: v for k, v in os.environ.items() if not k.startswith("BACC_AUDIT_")}


def bacc(*args: str | Path) -> Run:
    p = subprocess.run(command(*args), cwd=ROOT, env=ENV, capture_output=True, text=True,
                       timeout=120)
    return Run(p.returncode, p.stdout, p.stderr)


def together(commands: dict[str, list[str | Path]]) -> dict[str, Run]:
    """Several commands at once, as several people would run them."""
    procs = {
        name: subprocess.Popen(command(*args), cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        for name, args in commands.items()
    }
    done = {}
    for name, p in procs.items():
        out, err = p.communicate(timeout=120)
        done[name] = Run(p.returncode, out, err)
    return done


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample night ingested and audited, closed: each test works on a copy."""
    path = tmp_path_factory.mktemp("night") / "night.duckdb"
    con = db.connect(path)
    run = runs.start(con, "ingest", {})
    runs.finish(con, run, "done", 0, {"events": ingest(con, [SAMPLE], run).events})
    run = runs.start(con, "audit", {})
    summary = audit(con, run, cfg.load(CONFIG)).summary()
    runs.finish(con, run, "done", 1, summary)
    con.close()
    return path


@pytest.fixture
def work(night: Path, tmp_path: Path) -> Path:
    path = tmp_path / "audit.duckdb"
    shutil.copy(night, path)
    (tmp_path / "night").symlink_to(night)
    return path


def night_of(work: Path) -> Path:
    """The closed original the test's copy was made from (readable while a writer holds
    the copy)."""
    return (work.parent / "night").resolve()


def first_finding(path: Path) -> dict[str, Any]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        fp = con.execute(
            "SELECT fingerprint FROM current_findings ORDER BY fingerprint LIMIT 1"
        ).fetchall()[0][0]
    finally:
        con.close()
    return {"fingerprint": fp, "id": short_id(fp)}


def pdf_text(path: Path) -> str:
    return " ".join(p.extract_text() for p in pypdf.PdfReader(path).pages)


def served_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.endswith((".sock", ".owner")))


# --------------------------------------------------------------------------------------------
# the commands, while a writer writes
# --------------------------------------------------------------------------------------------


def findings_count(path: Path) -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return int(con.execute("SELECT count(*) FROM current_findings").fetchall()[0][0])
    finally:
        con.close()


def alone_and_beside_a_writer(path: Path, readers: Any) -> tuple[dict[str, Run], dict[str, Run]]:
    """The readers' answers with nobody writing, then while a writer keeps committing."""
    alone = readers("alone")
    with writer(path) as w:
        assert w.say("pairs") == "inserting"
        beside = readers("beside")
        assert int(w.say("stop")) > 0
        assert w.say("close") == "closed"
        assert w.end() == ""
    assert served_files(path) == []  # the writer closed: its socket and owner file went too
    for name, r in alone.items():
        assert r.code == 0, (name, r)
        assert beside[name].code == 0, (name, beside[name])
        assert beside[name].err == r.err, name
    return alone, beside


@pytest.mark.slow
def test_readers_answer_as_they_do_without_a_writer(work: Path) -> None:
    alone, beside = alone_and_beside_a_writer(work, lambda tag: together({
        "findings": ["findings", "--db", work, "--config", CONFIG, "--format", "jsonl"],
        "runs": ["runs", "--db", work, "--json"],
        "acks": ["ack", "list", "--db", work, "--json"],
        "doctor": ["doctor", "--db", work, "--config", CONFIG],
    }))
    for name, r in alone.items():
        assert beside[name].out == r.out, name
    assert len(beside["findings"].out.splitlines()) == findings_count(work) > 0
    assert [r["status"] for r in json.loads(beside["runs"].out)] == ["done", "done"]
    assert re.search(r"ok +\S+: readable and writable, [\d,]+ events", beside["doctor"].out)


@pytest.mark.slow
def test_the_report_made_beside_a_writer_is_the_same_pdf(work: Path, tmp_path: Path) -> None:
    alone_and_beside_a_writer(work, lambda tag: together({
        "report": ["report", "--shift", SHIFT, "--db", work, "--config", CONFIG,
                   "--out", tmp_path / f"{tag}.pdf"],
        "findings": ["findings", "--db", work, "--format", "csv"],
    }))
    assert (tmp_path / "beside.pdf").read_bytes() == (tmp_path / "alone.pdf").read_bytes()
    text = pdf_text(tmp_path / "beside.pdf")
    assert "Harbor Point Casino (sample)" in text and "MB-04" in text


@pytest.mark.slow
def test_an_ack_and_a_notice_made_while_the_writer_runs_are_stored(work: Path) -> None:
    finding = first_finding(work)
    with writer(work) as w:
        r = bacc("ack", finding["id"].lower(), "--by", "R. Vale", "--disposition",
                 "video reviewed, patron paid", "--db", work)
        assert r == Run(0, f"ack 1: {finding['fingerprint']} by R. Vale: video reviewed, "
                           "patron paid\n", ""), r
        listed = json.loads(bacc("ack", "list", "--json", "--db", work).out)
        assert [(a["fingerprint"], a["by"]) for a in listed] == [
            (finding["fingerprint"], "R. Vale")
        ]
        r = bacc("notice", "add", "--pit", "P1", "--procedure", "2", "--effective",
                 "2026-11-29 02:40", "--recipient", "division", "--given-at", "2026-11-29 01:00",
                 "--by", "R. Vale", "--db", work, "--config", CONFIG)
        assert r.code == 0 and r.out.startswith("notice 1: pit P1 (the whole pit)"), r
        # A typo is still the ack's own sentence (exit 2), not the owner's business.
        r = bacc("ack", "F000000000000", "--by", "R. Vale", "--disposition", "x", "--db", work)
        assert r.code == 2 and r.err.startswith("error: no finding has the id F000000000000")
        assert w.say("close") == "closed"
        assert w.end() == ""
    con = duckdb.connect(str(work), read_only=True)
    try:
        stored = con.execute(
            "SELECT fingerprint, reviewer, disposition, run_id FROM acknowledgements"
        ).fetchall()
        ack_runs = con.execute(
            "SELECT id, status, exit_code FROM runs WHERE command = 'ack' ORDER BY id"
        ).fetchall()
        notices = con.execute("SELECT pit, procedure, entered_by FROM notices").fetchall()
    finally:
        con.close()
    assert stored == [(finding["fingerprint"], "R. Vale", "video reviewed, patron paid",
                       ack_runs[0][0])]
    assert [(s, c) for _, s, c in ack_runs] == [("done", 0)]  # the typo recorded no run
    assert notices == [("P1", 2, "R. Vale")]


@pytest.mark.slow
def test_runs_shows_the_writers_run_as_running_until_it_is_killed(work: Path) -> None:
    with writer(work) as w:
        run_id = int(w.say("run"))
        listed = {r["id"]: r for r in json.loads(bacc("runs", "--json", "--db", work).out)}
        assert listed[run_id]["status"] == "running"
        assert listed[1]["status"] == "done"
        w.kill()  # SIGKILL: it cannot close, so its socket and owner file stay behind
        assert served_files(work) == ["audit.duckdb.owner", "audit.duckdb.sock"]
    listed = {r["id"]: r for r in json.loads(bacc("runs", "--json", "--db", work).out)}
    assert listed[run_id]["status"] == "interrupted"


@pytest.mark.slow
def test_a_killed_writers_socket_is_stale_and_the_next_writer_replaces_it(work: Path) -> None:
    with writer(work) as dead:
        dead.proc.send_signal(signal.SIGKILL)
        dead.proc.wait(timeout=10)
    stale = (work.parent / "audit.duckdb.sock").stat().st_ino
    # Locked by a program that serves nobody, with the dead owner's files still there:
    # nobody answers on the socket (connection refused), so the sentence is as before.
    with holder(PLAIN_HOLDER, work) as pid:
        for args in (["findings"], ["ack", "F000000000000", "--by", "x", "--disposition", "y"]):
            r = bacc(*args, "--db", work)
            assert r == Run(4, "", f"error: {work}: database busy: another process (PID {pid}) "
                                   f"has it open for writing; {TRY_AGAIN}\n"), r
    with writer(work) as w:
        assert (work.parent / "audit.duckdb.sock").stat().st_ino != stale
        owner = json.loads((work.parent / "audit.duckdb.owner").read_text())
        assert owner["pid"] == w.pid
        r = bacc("findings", "--format", "jsonl", "--db", work, "--config", CONFIG)
        assert r.code == 0 and len(r.out.splitlines()) == findings_count(night_of(work)), r
        assert w.say("close") == "closed"
    assert served_files(work) == []


@pytest.mark.slow
def test_a_command_that_writes_in_bulk_is_refused_naming_the_writer(work: Path) -> None:
    with writer(work) as w:
        r = bacc("ingest", SAMPLE, "--db", work)
        assert r == Run(4, "", f"error: {work}: database busy: python (PID {w.pid}) has it "
                               f"open for writing; {TRY_AGAIN}\n"), r


@pytest.mark.slow
def test_a_reader_sees_one_moment_while_the_writer_commits(work: Path) -> None:
    with writer(work) as w:
        assert w.say("pairs") == "inserting"
        con = db.connect(work, read_only=True)
        assert isinstance(con, shared.RemoteConnection)
        seen = set()
        started = time.monotonic()
        while time.monotonic() - started < 1.0:
            a, b = con.execute(
                "SELECT (SELECT count(*) FROM pair_a), (SELECT count(*) FROM pair_b)"
            ).fetchall()[0]
            seen.add((a, b))
            con.commit()  # a reader's commit ends nothing: its moment stays
        assert len(seen) == 1, seen  # one snapshot for the reader's whole life
        (a, b), = seen
        assert a == b
        # Meanwhile the writer went on committing: a new reader sees a later moment, and
        # still never one table ahead of the other.
        later = con.cursor()
        a2, b2 = later.execute(
            "SELECT (SELECT count(*) FROM pair_a), (SELECT count(*) FROM pair_b)"
        ).fetchall()[0]
        assert a2 == b2 > a
        con.close()
        assert int(w.say("stop")) >= a2


# --------------------------------------------------------------------------------------------
# the remote connection answers as DuckDB does
# --------------------------------------------------------------------------------------------

KINDS = """
CREATE TABLE kinds AS SELECT
  42::INTEGER i, 9007199254740993::BIGINT b, 170141183460469231731687303715884105727::HUGEINT h,
  12.34::DECIMAL(10, 2) d, 1.5::DOUBLE f, 'text' v, '{"a": [1, 2]}'::JSON j,
  TIMESTAMPTZ '2026-11-28 23:59:59.123456+00' tz, TIMESTAMP '2026-11-28 01:02:03' ts,
  DATE '2026-11-28' dd, TIME '12:34:56' t, INTERVAL 3 DAY iv, [1, 2, NULL] l,
  {'k': 1, 's': 'x'} st, MAP {'a': 1} m, 'ab\\x00c'::BLOB bl, true bo, NULL::VARCHAR nothing,
  '8f1c9f6e-0d6a-4a4b-9a59-2f0c1f0b6c11'::UUID u
"""

QUERIES: list[tuple[str, list[Any] | dict[str, Any] | None]] = [
    ("SELECT * FROM kinds", None),
    ("SELECT sum(b) AS s, count(*) AS n FROM kinds", None),
    ("SELECT 1 AS a, 2 AS a, 'x' AS \"we\"\"ird\"", None),
    ("SELECT ?::TIMESTAMPTZ AS at, ?::DATE AS d, ?::DECIMAL(10, 2) AS m, ?::BLOB AS b, "
     "? AS l, ? AS nothing, ?::INTERVAL AS iv",
     [dt.datetime(2026, 11, 28, 23, 0, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
      dt.date(2026, 11, 28), Decimal("12.34"), b"\x00\xff", [1, 2], None,
      dt.timedelta(days=1, seconds=2)]),
    ("SELECT $name AS name, $n + 1 AS n", {"name": "MB-04", "n": 41}),
    ("SELECT range AS r FROM range(2500) ORDER BY r", None),
]


def run(con: Any, sql: str, params: list[Any] | dict[str, Any] | None) -> Any:
    return con.execute(sql) if params is None else con.execute(sql, params)


def answers(con: Any) -> list[Any]:
    """What a connection answers to QUERIES, every way the code reads a result."""
    out: list[Any] = []
    for sql, params in QUERIES:
        cur = run(con, sql, params)
        out.append([(d[0], str(d[1])) for d in cur.description])
        out.append(cur.fetchall())
        run(con, sql, params)
        out.append((con.fetchone(), con.fetchmany(2), len(con.fetchall()), con.fetchone()))
    out.append(con.execute("SELECT range AS r FROM range(3)").fetchnumpy()["r"].tolist())
    out.append(str(con.sql("SELECT h, j, u FROM kinds").to_arrow_table().schema))
    con.execute("CREATE OR REPLACE TEMP TABLE keys (t VARCHAR, r BIGINT)")
    con.executemany("INSERT INTO keys VALUES (?, ?)", [["MB-01", 1], ["MB-02", 2]])
    out.append(con.execute("SELECT * FROM keys ORDER BY r").fetchall())
    out.append(db.one(con, "SELECT count(*) FROM events WHERE type = ?", ["round_start"]))
    out.append([(a.fingerprint, a.reviewer) for a in db.all_rows(con, Acknowledgement)])
    for bad in ("SELECT * FROM no_such_table", "SELEC 1", "SELECT 'x'::INTEGER"):
        with pytest.raises(duckdb.Error) as e:
            con.execute(bad)
        out.append((type(e.value), str(e.value)))
    out.append(con.execute("SELECT 1").fetchall())  # an error leaves the connection usable
    return out


def test_a_served_reader_gets_an_ordered_result_in_its_order(work: Path) -> None:
    """The owner runs with preserve_insertion_order = false; an executed query's Arrow
    result, which the owner sends, then came back in parallel pieces out of ORDER BY's order
    (a flaky failure of the test below: rows from 2048 first)."""
    with writer(work):
        remote = db.connect(work, read_only=True)
        assert isinstance(remote, shared.RemoteConnection)
        try:
            for _ in range(5):  # DuckDB's threads: the cores (2 here)
                got = [r for (r,) in remote.execute(
                    "SELECT range AS r FROM range(50000) ORDER BY r DESC").fetchall()]
                assert got == list(range(49999, -1, -1))
        finally:
            remote.close()


@pytest.mark.slow
def test_the_remote_connection_answers_as_duckdb_does(work: Path) -> None:
    con = db.connect(work)
    con.execute(KINDS)
    fp = first_finding_of(con)
    acks.add_ack(con, fp, by="R. Vale", disposition="no action", run_id=1)
    con.close()
    local = db.connect(work, read_only=True)
    expected = answers(local)
    local.close()
    with writer(work):
        remote = db.connect(work, read_only=True)
        assert isinstance(remote, shared.RemoteConnection)
        got = answers(remote)
        with pytest.raises(duckdb.TransactionException, match="read-only"):
            remote.execute("INSERT INTO kinds (i) VALUES (1)")  # a reader does not write
        remote.close()
        with pytest.raises(duckdb.ConnectionException):
            remote.execute("SELECT 1")
    for e, g in zip(expected, got, strict=True):
        assert g == e
    assert expected[0][-1] == ("u", "UUID") and expected[1][0][2] == 2**127 - 1


def first_finding_of(con: Any) -> str:
    return str(db.single(con, "SELECT min(fingerprint) FROM current_findings")[0])


@pytest.mark.slow
def test_records_written_through_the_owner_are_the_owners(work: Path) -> None:
    with writer(work) as w:
        con = db.connect(work, small_writes=True)
        assert isinstance(con, shared.RemoteConnection)
        run = runs.start(con, "ack", {"test": True})
        a = acks.add_ack(con, first_finding_of(con), by="R. Vale", disposition="paid",
                         run_id=run)
        runs.finish(con, run, "done", 0, {"acknowledgement": a.id})
        assert a.id == 1 and a.recorded_at.tzinfo is not None
        assert db.served_runs(con) == set()  # finished; the writer's own run starts below
        own = int(w.say("run"))
        assert db.served_runs(con) == {own}
        con.close()
        assert w.say("close") == "closed"
    con = db.connect(work, read_only=True)
    assert [(x.reviewer, x.run_id) for x in acks.list_acks(con)] == [("R. Vale", run)]
    assert db.served_runs(con) == set()  # nobody serves: a local connection
    con.close()


def test_a_readers_settings_are_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BACC_AUDIT_THREADS", "2")  # the owner's own count, whatever the run's
    path = tmp_path / "audit.duckdb"
    con = db.connect(path)
    remote = shared.reach(path, read_only=True)
    assert remote is not None
    try:
        # A plain SET of a global DuckDB setting would change the owner's too: refused.
        with pytest.raises(duckdb.CatalogException, match="cannot be set locally"):
            remote.execute("SET threads = 1")
        with pytest.raises(duckdb.InvalidInputException, match="SET SESSION"):
            remote.execute("SET GLOBAL TimeZone = 'Asia/Tokyo'")
        assert con.execute("SELECT current_setting('threads') > 1").fetchall() == [(True,)]
        # A setting of its own session is the reader's alone, and reads as DuckDB reads it.
        remote.execute("SET TimeZone = 'America/New_York'")
        (at,), = remote.execute("SELECT TIMESTAMPTZ '2026-11-29 03:00:00+00'").fetchall()
        assert at.isoformat() == "2026-11-28T22:00:00-05:00"
        assert con.execute("SELECT current_setting('TimeZone')").fetchall() == [("UTC",)]
    finally:
        remote.close()
        con.close()


# --------------------------------------------------------------------------------------------
# the owner's side: permissions, the socket's place, closing, conflicts
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_socket_is_the_users_alone_and_goes_with_the_connection(tmp_path: Path) -> None:
    path = tmp_path / "audit.duckdb"
    con = db.connect(path)
    assert isinstance(con, serving.OwnedConnection)
    sock, owner = tmp_path / "audit.duckdb.sock", tmp_path / "audit.duckdb.owner"
    assert stat.S_ISSOCK(sock.stat().st_mode)
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert stat.S_IMODE(owner.stat().st_mode) == 0o600
    record = json.loads(owner.read_text())
    assert (record["pid"], record["socket"], record["db"]) == (os.getpid(), str(sock), str(path))
    con.close()
    assert served_files(path) == []
    # Closed by an exception, and dropped without a close: the same.
    with pytest.raises(RuntimeError), db.connect(path):
        assert served_files(path) == ["audit.duckdb.owner", "audit.duckdb.sock"]
        raise RuntimeError("the writer failed")
    assert served_files(path) == []
    con = db.connect(path)
    del con
    gc.collect()
    assert served_files(path) == []
    duckdb.connect(str(path), read_only=True).close()  # and DuckDB let the file go


@pytest.mark.slow
def test_a_path_too_long_for_a_socket_is_served_from_the_users_runtime_folder(
    tmp_path: Path,
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / "audit.duckdb"
    con = db.connect(path)
    try:
        record = json.loads((deep / "audit.duckdb.owner").read_text())
        where = Path(record["socket"])
        assert where.parent != deep and len(os.fsencode(where)) <= serving.SOCKET_PATH_MAX
        assert stat.S_IMODE(where.parent.stat().st_mode) == 0o700
        assert served_files(path) == ["audit.duckdb.owner"]
        r = bacc("runs", "--json", "--db", path)  # from another process, through it
        assert r.code == 0 and json.loads(r.out) == [], r
    finally:
        con.close()
    assert not where.exists() and served_files(path) == []


def test_another_user_is_refused_with_a_sentence(tmp_path: Path, monkeypatch: Any) -> None:
    def peer(sock: Any) -> int:  # to the owner's thread, the reader is someone else
        serving = threading.current_thread().name.startswith("bacc-audit serves")
        return os.getuid() + (1 if serving else 0)

    monkeypatch.setattr(wire, "peer_uid", peer)
    path = tmp_path / "audit.duckdb"
    con = db.connect(path)
    try:
        with pytest.raises(DatabaseBusy) as e:
            shared.reach(path, read_only=True)
        assert e.value.exit_code == 4
        assert str(e.value) == (
            f"{path}: database busy: {serving.command_name()} (PID {os.getpid()}) has it open for "
            "writing and serves it only to processes of its own user; run this command as "
            "that user, or try again when it has finished"
        )
    finally:
        con.close()


@pytest.mark.realtime
def test_a_write_conflict_is_tried_again_then_said(tmp_path: Path) -> None:
    path = tmp_path / "audit.duckdb"
    con = db.connect(path)
    run = runs.start(con, "watch", {})
    remote = shared.reach(path, read_only=False)
    assert remote is not None
    try:
        # The owner holds the run's status in a transaction; a reader's change to that same
        # value waits for it (tried again), and goes through once the owner commits.
        con.execute("BEGIN TRANSACTION")
        con.execute("UPDATE runs SET status = 'owner' WHERE id = ?", [run])
        commit = threading.Timer(0.2, lambda: con.execute("COMMIT"))
        commit.start()
        remote.execute("UPDATE runs SET status = 'done' WHERE id = ?", [run])
        commit.join()
        assert remote.execute("SELECT status FROM runs").fetchall() == [("done",)]
        # Held for good: after the tries, a sentence (exit 4), and still a DuckDB error.
        con.execute("BEGIN TRANSACTION")
        con.execute("UPDATE runs SET status = 'held' WHERE id = ?", [run])
        started = time.monotonic()
        with pytest.raises(duckdb.TransactionException) as e:
            remote.execute("UPDATE runs SET status = 'failed' WHERE id = ?", [run])
        assert 1.0 < time.monotonic() - started < 5
        assert isinstance(e.value, DatabaseBusy) and e.value.exit_code == 4
        assert str(e.value) == (
            f"{path}: database busy: {serving.command_name()} (PID {os.getpid()}) is writing the "
            "same rows; this change was tried 6 times and not made; try again in a moment"
        )
        con.execute("ROLLBACK")
    finally:
        remote.close()
        con.close()


@pytest.mark.realtime
def test_the_owner_closes_at_once_and_its_readers_hear_it(tmp_path: Path) -> None:
    path = tmp_path / "audit.duckdb"
    con = db.connect(path)
    remote = shared.reach(path, read_only=True)
    assert remote is not None and remote.execute("SELECT count(*) FROM runs").fetchall() == [(0,)]
    started = time.monotonic()
    con.close()  # a reader's open snapshot does not hold the writer up
    assert time.monotonic() - started < 2
    with pytest.raises(DatabaseBusy) as e:
        remote.execute("SELECT 1")
    assert isinstance(e.value, duckdb.ConnectionException)
    assert "closed it meanwhile; try again" in str(e.value)
