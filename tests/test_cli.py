"""The `bacc-audit` command, run in-process through `auditor.cli.app.main` with sys.argv set:
ingest exit codes and output, the --json summary, findings export (jsonl, csv, filters), and
"database busy" when another process holds the database.
"""

from __future__ import annotations

import csv
import datetime as dt
import gc
import io
import json
import re
import select
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.db import AuditDb, open_audit
from helpers.events import contract_lines, event, line
from rich.console import Console

from auditor.cli import app as cli
from auditor.errors import DatabaseBusy, UserError
from auditor.store import db

L = contract_lines()

# The findings contract (spec/findings-v1.md), in its order.
CONTRACT_FIELDS = [
    "code",
    "severity",
    "table",
    "pit",
    "shoe",
    "round",
    "seq",
    "ts",
    "rule",
    "message",
    "expected",
    "observed",
    "source",
]
SEVERITIES = ("critical", "major", "minor", "info")
RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"


class Run:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:  # shown when an assertion fails
        return f"Run(code={self.code}, out={self.out!r}, err={self.err!r})"


@pytest.fixture
def bacc_audit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> Iterator[Any]:
    """Run `bacc-audit ARGS...` in-process; returns Run(exit code, stdout, stderr).

    The CLI's rich consoles decide on colour when the module is imported; plain ones (same
    settings, no colour) keep the output parseable however pytest is run. Whether markup is
    interpreted is taken from the CLI's own consoles, so the tests see what users see.
    """
    for name, stderr in (("out", False), ("err", True)):
        real: Console = getattr(cli, name)
        plain = Console(
            stderr=stderr,
            highlight=False,
            soft_wrap=True,
            color_system=None,
            markup=real._markup,  # rich keeps it private; the CLI sets markup=False
        )
        monkeypatch.setattr(cli, name, plain)
    monkeypatch.delenv("BACC_AUDIT_DB", raising=False)
    monkeypatch.delenv("BACC_AUDIT_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./bacc-audit.toml or ./bacc-audit.duckdb of the checkout

    def run(*args: str | Path) -> Run:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["bacc-audit", *map(str, args)])
        code: Any = "no exit"
        try:
            cli.main()
        except SystemExit as e:
            code = e.code
        if args and args[0] == "ingest":
            # ingest leaves its read-write connection to the garbage collector, and the
            # exception's traceback kept it alive; DuckDB refuses a read-only connection in
            # this process while a read-write one to the same file is open.
            gc.collect()
        captured = capsys.readouterr()
        assert code != "no exit", "bacc-audit returned without exiting"
        return Run(0 if code is None else int(code), captured.out, captured.err)

    yield run


def write(path: Path, lines: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((x if isinstance(x, str) else line(x)) + "\n" for x in lines))
    return path


def count(db_path: Path, sql: str) -> Any:
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return con.execute(sql).fetchall()[0][0]
    finally:
        con.close()


# --------------------------------------------------------------------------------------------
# ingest: exit codes and what it prints
# --------------------------------------------------------------------------------------------


def test_ingest_clean_exits_0_again_nothing_new_altered_exits_1(
    bacc_audit: Any, tmp_path: Path
) -> None:
    dbp = tmp_path / "a.duckdb"
    log = write(tmp_path / "logs" / "night.jsonl", L)
    r = bacc_audit("ingest", log, "--db", dbp)
    assert r.code == 0, r
    assert r.err == ""
    assert r.out.splitlines() == [
        f"{log}: 15 events, 0 quarantined",
        "events per stream:",
        f"  {'table MB-07':<24} {15:>10,}",
        "1 files: 1 ingested, 0 already ingested, 0 refused, 0 unreadable; "
        "15 events loaded, 0 lines quarantined",
    ]

    again = bacc_audit("ingest", tmp_path / "logs", "--db", dbp)  # a directory this time
    assert again.code == 0, again
    assert f"{log}: already ingested on " in again.out
    assert again.out.splitlines()[-1] == (
        "1 files: 0 ingested, 1 already ingested, 0 refused, 0 unreadable; "
        "0 events loaded, 0 lines quarantined"
    )
    assert count(dbp, "SELECT count(*) FROM events") == 15

    # Changed after it was ingested: refused, exit 1.
    write(log, L[:14])
    refused = bacc_audit("ingest", log, "--db", dbp)
    assert refused.code == 1, refused
    [msg] = refused.err.splitlines()
    assert msg.startswith(f"error: {log}: refused: its content changed since it was ingested")
    assert "0 ingested, 0 already ingested, 1 refused, 0 unreadable" in refused.out
    assert count(dbp, "SELECT list(exit_code ORDER BY id) FROM runs") == [0, 0, 1]


def test_ingest_with_quarantined_lines_exits_1(bacc_audit: Any, tmp_path: Path) -> None:
    dbp = tmp_path / "a.duckdb"
    log = write(tmp_path / "night.jsonl", [*L[:2], "not json", *L[2:]])
    r = bacc_audit("ingest", log, "--db", dbp)
    assert r.code == 1, r
    assert r.err.splitlines() == [f"quarantined: {log}:3: not valid JSON"]
    assert f"{log}: 15 events, 1 quarantined" in r.out.splitlines()
    # The run is recorded with its outcome and summary.
    con = duckdb.connect(str(dbp), read_only=True)
    try:
        status, exit_code, summary = con.execute(
            "SELECT status, exit_code, summary FROM runs"
        ).fetchall()[0]
    finally:
        con.close()
    assert (status, exit_code) == ("done", 1)
    assert json.loads(summary)["quarantined"] == 1


def test_ingest_missing_path_exits_2_and_the_other_files_still_load(
    bacc_audit: Any, tmp_path: Path
) -> None:
    dbp = tmp_path / "a.duckdb"
    log = write(tmp_path / "night.jsonl", [*L[:2], "not json", *L[2:]])
    missing = tmp_path / "nope.jsonl"
    r = bacc_audit("ingest", missing, log, "--db", dbp)
    assert r.code == 2, r  # the input error outranks the quarantined line
    assert f"error: {missing}: no such file or directory" in r.err.splitlines()
    assert f"quarantined: {log}:3: not valid JSON" in r.err.splitlines()
    assert count(dbp, "SELECT count(*) FROM events") == 15


def test_ingest_without_arguments_exits_2(bacc_audit: Any, tmp_path: Path) -> None:
    r = bacc_audit("ingest", "--db", tmp_path / "a.duckdb")
    assert r.code == 2, r
    assert "Missing argument" in r.err


def test_ingest_json_summary(bacc_audit: Any, tmp_path: Path) -> None:
    dbp = tmp_path / "a.duckdb"
    done = write(tmp_path / "a.jsonl", L[:3])
    assert bacc_audit("ingest", done, "--db", dbp).code == 0

    night = write(
        tmp_path / "b.jsonl",
        [*L[3:5], "oops", *L[7:], event("procedure_notice", seq=1)],
    )
    not_gz = write(tmp_path / "c.jsonl.gz", ["plain"])
    missing = tmp_path / "d.jsonl"
    r = bacc_audit("ingest", done, night, not_gz, missing, "--db", dbp, "--json")
    assert r.code == 2, r
    summary = json.loads(r.out)
    assert set(summary) == {
        "run_id",
        "files",
        "errors",
        "events",
        "quarantined",
        "streams",
        "exit_code",
    }
    assert summary["run_id"] == 2
    assert (summary["events"], summary["quarantined"], summary["exit_code"]) == (11, 1, 2)
    assert summary["errors"] == [f"{missing}: no such file or directory"]
    assert summary["streams"] == {"pit:P3": 1, "table:MB-07": 10}
    file_keys = {
        "path",
        "status",
        "sha256",
        "lines",
        "events",
        "quarantined",
        "duplicates",
        "message",
        "problems",
    }
    assert all(set(f) == file_keys for f in summary["files"])
    by_path = {f["path"]: f for f in summary["files"]}
    assert list(by_path) == [str(done), str(night), str(not_gz)]
    assert by_path[str(done)]["status"] == "already_ingested"
    b = by_path[str(night)]
    assert (b["status"], b["lines"], b["events"], b["quarantined"], b["duplicates"]) == (
        "ingested",
        12,
        11,
        1,
        0,
    )
    assert b["problems"] == [f"{night}:3: not valid JSON"]
    assert b["message"] == f"{night}: 11 events, 1 quarantined"
    assert len(b["sha256"]) == 64
    c = by_path[str(not_gz)]
    assert (c["status"], c["message"]) == (
        "unreadable",
        f"{not_gz}: not a gzip file (it does not start with the gzip signature)",
    )
    assert r.err == ""  # --json keeps stderr quiet; everything is in the summary


def test_ingest_prints_paths_with_brackets_verbatim(bacc_audit: Any, tmp_path: Path) -> None:
    log = write(tmp_path / "logs[old]" / "a.jsonl", [L[0], "bad", event("wager", pit="[bold]")])
    r = bacc_audit("ingest", log, "--db", tmp_path / "a.duckdb")
    assert r.err.splitlines() == [
        f"quarantined: {log}:2: not valid JSON",
        f'quarantined: {log}:3: pit must be 1-32 of A-Z a-z 0-9 . _ -, not "[bold]"',
    ]
    assert f"{log}: 1 events, 2 quarantined" in r.out.splitlines()


# --------------------------------------------------------------------------------------------
# findings: export format v1 and filters
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def findings_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database with log.malformed (table MB-07 and no table), log.seq_gap (table MB-07 and
    pit P3) and log.altered findings; closed, so the CLI can open it."""
    audit: AuditDb = open_audit(tmp_path_factory.mktemp("findings"))
    night = audit.write(
        "night.jsonl",
        [
            *L[:4],
            "not json",
            L[4].replace('"amount":100', '"amount":-1'),
            *L[7:],
            event("procedure_notice", seq=1),
            event("procedure_notice", seq=3),
        ],
    )
    audit.ingest_file(night)
    audit.write("night.jsonl", L)
    assert audit.ingest_file(night).status == "refused_altered"
    path = Path(audit.con.execute("SELECT file FROM pragma_database_list").fetchall()[0][0])
    audit.con.close()
    return path


def findings_jsonl(bacc_audit: Any, dbp: Path, *args: str) -> list[dict[str, Any]]:
    r = bacc_audit("findings", "--db", dbp, "--format", "jsonl", *args)
    assert r.code == 0, r
    return [json.loads(x) for x in r.out.splitlines()]


def test_findings_jsonl_has_every_contract_field(bacc_audit: Any, findings_db: Path) -> None:
    rows = findings_jsonl(bacc_audit, findings_db)
    assert sorted(r["code"] for r in rows) == [
        "log.altered",
        "log.malformed",
        "log.malformed",
        "log.seq_gap",
        "log.seq_gap",
    ]
    for r in rows:
        assert set(CONTRACT_FIELDS) <= set(r), r
        assert r["severity"] in SEVERITIES
        for key in ("code", "rule", "message", "source", "ts"):
            assert isinstance(r[key], str) and r[key], (key, r)
        for key in ("table", "pit", "shoe"):
            assert r[key] is None or isinstance(r[key], str), (key, r)
        for key in ("round", "seq"):
            assert r[key] is None or (isinstance(r[key], int) and not isinstance(r[key], bool))
        # RFC 3339 with an offset (Z or the logs' own, depending on the config).
        assert re.fullmatch(RFC3339, r["ts"]), r["ts"]
    gap = next(r for r in rows if r["code"] == "log.seq_gap" and r["table"] == "MB-07")
    assert gap == gap | {
        "severity": "major",
        "pit": None,
        "shoe": None,
        "round": None,
        "seq": 8,
        "rule": "Event log v1: seq increases by 1 per event in a stream",
        "message": "Table MB-07: seq 4 is followed by seq 8; 3 events are missing",
        "expected": {"seq": 5},
        "observed": {"seq": 8, "previous_seq": 4, "missing": 3},
    }
    assert gap["source"].endswith("night.jsonl:7")
    assert dt.datetime.fromisoformat(gap["ts"]) == dt.datetime(
        2026, 11, 29, 3, 0, 43, tzinfo=dt.UTC
    )
    bad_amount = next(r for r in rows if r["code"] == "log.malformed" and r["table"])
    assert (bad_amount["table"], bad_amount["shoe"], bad_amount["round"], bad_amount["seq"]) == (
        "MB-07",
        "MB-07-0001",
        1,
        5,
    )
    assert bad_amount["observed"]["reason"] == "amount -1 is negative"
    altered = next(r for r in rows if r["code"] == "log.altered")
    assert (altered["severity"], altered["table"]) == ("critical", None)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_findings_export_has_the_contract_fields_then_the_fingerprint_extension(
    bacc_audit: Any, findings_db: Path, fmt: str
) -> None:
    """findings-v1 may be extended, never broken: its fields in its order, then `fingerprint`
    (docs/findings-format.md)."""
    r = bacc_audit("findings", "--db", findings_db, "--format", fmt)
    if fmt == "jsonl":
        keys = [list(json.loads(x)) for x in r.out.splitlines()]
        assert keys and all(k == [*CONTRACT_FIELDS, "fingerprint"] for k in keys)
    else:
        assert r.out.splitlines()[0].split(",") == [*CONTRACT_FIELDS, "fingerprint"]


def test_findings_csv(bacc_audit: Any, findings_db: Path) -> None:
    r = bacc_audit("findings", "--db", findings_db, "--format", "csv")
    assert r.code == 0, r
    header = r.out.splitlines()[0].split(",")
    assert header[: len(CONTRACT_FIELDS)] == CONTRACT_FIELDS
    rows = list(csv.DictReader(io.StringIO(r.out)))
    as_jsonl = findings_jsonl(bacc_audit, findings_db)
    assert [x["code"] for x in rows] == [x["code"] for x in as_jsonl]
    for c, j in zip(rows, as_jsonl, strict=True):
        assert json.loads(c["expected"]) == j["expected"]
        assert json.loads(c["observed"]) == j["observed"]
        assert c["source"] == j["source"] and c["message"] == j["message"]
        assert c["seq"] == ("" if j["seq"] is None else str(j["seq"]))


@pytest.mark.parametrize(
    ("args", "codes"),
    [
        (["--code", "log.*"], ["log.altered", "log.malformed", "log.seq_gap"]),
        (["--code", "log.seq_gap"], ["log.seq_gap"]),
        (["--code", "log.altered", "--code", "log.malformed"], ["log.altered", "log.malformed"]),
        (["--code", "draw.*"], []),
        (["--severity", "critical"], ["log.altered"]),
        (["--severity", "major"], ["log.altered", "log.malformed", "log.seq_gap"]),
        (["--severity", "info"], ["log.altered", "log.malformed", "log.seq_gap"]),
        (["--code", "log.*", "--severity", "critical"], ["log.altered"]),
        (["--table", "MB-07"], ["log.malformed", "log.seq_gap"]),
        (["--pit", "P3"], ["log.seq_gap"]),
    ],
)
def test_findings_filters(
    bacc_audit: Any, findings_db: Path, args: list[str], codes: list[str]
) -> None:
    rows = findings_jsonl(bacc_audit, findings_db, *args)
    assert sorted({r["code"] for r in rows}) == codes
    if "--table" in args:
        assert {r["table"] for r in rows} == {"MB-07"}
    if "--pit" in args:
        assert {r["pit"] for r in rows} == {"P3"}


def test_findings_bad_severity_exits_2(bacc_audit: Any, findings_db: Path) -> None:
    r = bacc_audit("findings", "--db", findings_db, "--severity", "urgent")
    assert r.code == 2, r
    assert r.err.strip() == (
        "error: --severity must be one of critical, major, minor, info, not 'urgent'"
    )


def test_findings_table_format(bacc_audit: Any, findings_db: Path) -> None:
    r = bacc_audit("findings", "--db", findings_db)
    assert r.code == 0, r
    assert r.out.rstrip().endswith("5 findings")


def test_findings_without_a_database_exits_2(bacc_audit: Any, tmp_path: Path) -> None:
    dbp = tmp_path / "none.duckdb"
    r = bacc_audit("findings", "--db", dbp)
    assert r.code == 2, r
    assert r.err.strip().startswith(f"error: {dbp}: no audit database here yet")
    assert not dbp.exists()


# --------------------------------------------------------------------------------------------
# Database busy: another process holds the database
# --------------------------------------------------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys, time
    import duckdb
    con = duckdb.connect(sys.argv[1])
    con.execute("CREATE TABLE IF NOT EXISTS held (x INTEGER)")
    print("ready", flush=True)
    time.sleep(120)
    """
)


@pytest.fixture
def held_db(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A database file that another process has open for writing (and the holder's pid)."""
    path = tmp_path / "busy.duckdb"
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        started, _, _ = select.select([child.stdout], [], [], 60)
        ready = child.stdout.readline() if started else ""
        if ready.strip() != "ready":
            child.kill()
            _, err = child.communicate(timeout=10)
            pytest.fail(f"the process holding the database did not start: {err}")
        yield path, child.pid
    finally:
        child.kill()
        child.wait(timeout=10)
        for stream in (child.stdout, child.stderr):
            if stream:
                stream.close()


def test_connect_raises_database_busy(held_db: tuple[Path, int]) -> None:
    path, pid = held_db
    for read_only in (False, True):
        with pytest.raises(DatabaseBusy) as exc:
            db.connect(path, read_only=read_only)
        message = str(exc.value)
        assert "database busy" in message
        assert message.startswith(f"{path}: database busy: ")
        assert f"process {pid} is writing to it" in message or "another process" in message
        assert exc.value.exit_code == 4


def test_cli_exits_4_when_the_database_is_busy(
    bacc_audit: Any, held_db: tuple[Path, int], tmp_path: Path
) -> None:
    path, _ = held_db
    log = write(tmp_path / "night.jsonl", L)
    for args in (["ingest", log], ["findings"]):
        r = bacc_audit(*args, "--db", path)
        assert r.code == 4, r
        assert r.err.startswith(f"error: {path}: database busy: ")
        assert r.out == ""


def test_memory_limit_from_the_environment(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("BACC_AUDIT_MEMORY_LIMIT", "1GB")
    con = db.connect(tmp_path / "a.duckdb")
    limit = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    con.close()
    assert limit == "953.6 MiB"  # 1 GB = 10^9 bytes, shown in binary units
    monkeypatch.setenv("BACC_AUDIT_MEMORY_LIMIT", "lots")
    with pytest.raises(UserError, match=r"BACC_AUDIT_MEMORY_LIMIT=lots: not a memory size"):
        db.connect(tmp_path / "a.duckdb")
