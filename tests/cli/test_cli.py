"""The `bacc-audit` command, run in-process through `auditor.cli.app.main` with sys.argv set:
ingest exit codes and output, the --json summary, findings export (jsonl, csv, filters), and
"database busy" when another process holds the database.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import gc
import hashlib
import io
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.cli import Run
from helpers.db import AuditDb, open_audit
from helpers.events import contract_lines, event, line
from helpers.processes import holder
from rich.console import Console

from auditor.cli import ingest as ingest_cli
from auditor.errors import DatabaseBusy, UserError
from auditor.shipped import shipped
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


@pytest.mark.slow
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
        "1 file: 1 ingested, 0 already ingested, 0 refused, 0 unreadable; "
        "15 events loaded, 0 lines quarantined",
    ]

    again = bacc_audit("ingest", tmp_path / "logs", "--db", dbp)  # a directory this time
    assert again.code == 0, again
    assert f"{log}: already ingested on " in again.out
    assert again.out.splitlines()[-1] == (
        "1 file: 0 ingested, 1 already ingested, 0 refused, 0 unreadable; "
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


@pytest.mark.slow
def test_ingest_with_quarantined_lines_exits_1(bacc_audit: Any, tmp_path: Path) -> None:
    dbp = tmp_path / "a.duckdb"
    log = write(tmp_path / "night.jsonl", [*L[:2], "not json", *L[2:]])
    r = bacc_audit("ingest", log, "--db", dbp)
    assert r.code == 1, r
    assert r.err.splitlines() == [f"quarantined: {log}:3: not valid JSON"]
    assert f"{log}: 15 events, 1 quarantined" in r.out.splitlines()
    assert r.out.splitlines()[-1] == (
        "1 file: 1 ingested, 0 already ingested, 0 refused, 0 unreadable; "
        "15 events loaded, 1 line quarantined"
    )
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


@pytest.mark.slow
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


@pytest.mark.slow
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
        "stamped_ahead",
    }
    assert all(set(f) == file_keys for f in summary["files"])
    assert all(f["stamped_ahead"] == [] for f in summary["files"])
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


@pytest.mark.slow
def test_ingest_prints_paths_with_brackets_verbatim(bacc_audit: Any, tmp_path: Path) -> None:
    log = write(tmp_path / "logs[old]" / "a.jsonl", [L[0], "bad", event("wager", pit="[bold]")])
    r = bacc_audit("ingest", log, "--db", tmp_path / "a.duckdb")
    assert r.err.splitlines() == [
        f"quarantined: {log}:2: not valid JSON",
        f"quarantined: {log}:3: pit has U+005B at character 1: an id is 1-32 characters of "
        "A-Z a-z 0-9 . _ -, with no space, invisible or non-ASCII character",
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


@pytest.mark.slow
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
    """findings-v1 may be extended, never broken: its fields in its order, then `fingerprint`,
    `id` and v1.1's `dealer` (docs/findings-format.md)."""
    r = bacc_audit("findings", "--db", findings_db, "--format", fmt)
    extended = [*CONTRACT_FIELDS, "fingerprint", "id", "dealer"]
    if fmt == "jsonl":
        keys = [list(json.loads(x)) for x in r.out.splitlines()]
        assert keys and all(k == extended for k in keys)
    else:
        assert r.out.splitlines()[0].split(",") == extended


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_each_finding_id_is_f_and_the_sha256_of_its_fingerprint(
    bacc_audit: Any, findings_db: Path, fmt: str
) -> None:
    r = bacc_audit("findings", "--db", findings_db, "--format", fmt)
    assert r.code == 0, r
    if fmt == "jsonl":
        rows = [json.loads(x) for x in r.out.splitlines()]
    else:
        rows = list(csv.DictReader(io.StringIO(r.out)))
    assert len(rows) == 5
    for row in rows:
        digest = hashlib.sha256(row["fingerprint"].encode()).hexdigest()
        assert row["id"] == "F" + digest[:12], row
    gap = next(x for x in rows if x["fingerprint"] == "log.seq_gap|table:MB-07|4|8")
    assert gap["id"] == "Fd202b0e7d246"


@pytest.mark.slow
def test_findings_table_starts_with_each_findings_id(bacc_audit: Any, findings_db: Path) -> None:
    """The table view is what an officer reads; its first column is what `ack` takes."""
    ids = [x["id"] for x in findings_jsonl(bacc_audit, findings_db)]
    r = bacc_audit("findings", "--db", findings_db)
    assert r.code == 0, r
    cells = [line.split("│")[1].strip() for line in r.out.splitlines() if line.startswith("│")]
    assert [c for c in cells if c] == ids
    header = next(line for line in r.out.splitlines() if line.startswith("┃"))
    assert header.split("┃")[1].strip() == "id"


def test_a_findings_time_no_clock_can_show_is_said_naming_it_in_every_format(
    bacc_audit: Any, findings_db: Path, tmp_path: Path
) -> None:
    """A finding's row edited (or written by an earlier bacc-audit) to a time past the year
    9999 was an internal error (exit 3); now every format refuses with the finding's id
    (exit 2), rather than export the others without it."""
    edited = tmp_path / "edited.duckdb"
    shutil.copy2(findings_db, edited)
    gap = next(x for x in findings_jsonl(bacc_audit, edited)
               if x["code"] == "log.seq_gap" and x["table"] == "MB-07")
    con = duckdb.connect(str(edited))
    con.execute("UPDATE findings SET ts = TIMESTAMPTZ '10000-01-01 00:00:00+00' "
                "WHERE code = 'log.seq_gap' AND table_id = 'MB-07'")
    con.close()
    for fmt in ("table", "jsonl", "csv"):
        r = bacc_audit("findings", "--db", edited, "--format", fmt)
        assert r.code == 2, (fmt, r)
        assert r.out == ""
        assert f"finding {gap['id']}: its time is stored as 10000-01-01 00:00:00+00, which no " \
               "clock can show" in r.err, r.err
        assert "bacc-audit verify" in r.err and "Traceback" not in r.err


@pytest.mark.parametrize(("table", "column", "command"), [
    ("runs", "started_at", ["runs"]),
    ("runs", "started_at", ["report", "--shift", "2026-11-28/grave", "--out", "r.html"]),
    ("change_audits", "audited_at", ["report", "--shift", "2026-11-28/grave", "--out", "r.html"]),
    ("events", "effective", ["report", "--shift", "2026-11-28/grave", "--out", "r.pdf"]),
    ("events", "effective", ["audit"]),
])
def test_a_time_no_clock_can_show_anywhere_in_the_database_is_said_naming_where(
    bacc_audit: Any, sample_audited: tuple[Path, Any], tmp_path: Path, table: str,
    column: str, command: list[str],
) -> None:
    """Each of these was an internal error (exit 3) halfway through: a report half gathered,
    a listing cut short. Now the command refuses first (exit 2), naming the table, column and
    row, and writes nothing."""
    edited = tmp_path / "edited.duckdb"
    shutil.copy2(sample_audited[0], edited)
    con = duckdb.connect(str(edited))
    [(rowid,)] = con.execute(
        f"SELECT min(rowid) FROM {table} WHERE {column} IS NOT NULL").fetchall()
    con.execute(f"UPDATE {table} SET {column} = TIMESTAMPTZ '10000-01-01 00:00:00+00' "
                "WHERE rowid = ?", [rowid])
    con.close()
    r = bacc_audit(*command, "--db", edited)
    assert r.code == 2, r
    assert f"the audit database holds 10000-01-01 00:00:00+00 in {table}.{column} (row " \
           f"{rowid}), outside the years 1 to 9999 in UTC, which no clock can show" in r.err, r.err
    assert "Traceback" not in r.err and not (tmp_path / "r.html").exists()
    assert not (tmp_path / "r.pdf").exists()


@pytest.mark.parametrize(("table", "column", "command"), [
    ("acknowledgements", "recorded_at", ["ack", "list"]),
    ("notices", "given_at", ["notice", "list"]),
])
def test_a_listing_refuses_a_time_no_clock_can_show_in_its_own_table(
    bacc_audit: Any, sample_audited: tuple[Path, Any], tmp_path: Path, table: str,
    column: str, command: list[str],
) -> None:
    """`ack list` and `notice list` were internal errors (exit 3) over an acknowledgement or
    a notice whose time was edited past the year 9999; now exit 2 naming where."""
    edited = tmp_path / "edited.duckdb"
    shutil.copy2(sample_audited[0], edited)
    [first] = findings_jsonl(bacc_audit, edited)[:1]
    assert bacc_audit("ack", first["id"], "--by", "R. Vale", "--disposition", "video reviewed",
                      "--db", edited).code == 0
    assert bacc_audit("notice", "add", "--pit", "P1", "--procedure", "2", "--effective",
                      "2026-11-28T23:30:00-05:00", "--recipient", "division", "--given-at",
                      "2026-11-28T22:30:00-05:00", "--by", "R. Vale", "--db", edited).code == 0
    for listing in (["ack", "list"], ["notice", "list"]):
        assert bacc_audit(*listing, "--db", edited).code == 0, listing
    con = duckdb.connect(str(edited))
    con.execute(f"UPDATE {table} SET {column} = TIMESTAMPTZ '10000-01-01 00:00:00+00'")
    con.close()
    r = bacc_audit(*command, "--db", edited)
    assert r.code == 2, r
    assert f"10000-01-01 00:00:00+00 in {table}.{column} (row 0), outside the years 1 to " \
           "9999 in UTC" in r.err, r.err


@pytest.mark.slow
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
    with holder(HOLDER, path) as pid:
        yield path, pid


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


@pytest.mark.slow
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


# --------------------------------------------------------------------------------------------
# doctor: finds what would break a command or the nightly job (issue 19)
# --------------------------------------------------------------------------------------------

NOBODY = 65534
SPOOL_ADVICE = (
    "     create it or correct --spool (BACC_AUDIT_SPOOL): the folder the table systems "
    "deliver their logs to"
)


def _fails(r: Run) -> list[str]:
    """Each FAIL line with the advice line under it."""
    lines = r.out.splitlines()
    return [f"{x}\n{lines[i + 1]}" for i, x in enumerate(lines) if x.startswith("FAIL ")]


@pytest.fixture
def nightly_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A config, spool, archive and database that are all good."""
    monkeypatch.delenv("BACC_AUDIT_SPOOL", raising=False)
    monkeypatch.delenv("BACC_AUDIT_ARCHIVE", raising=False)
    s = {"config": tmp_path / "property.toml", "spool": tmp_path / "spool",
         "archive": tmp_path / "archive", "db": tmp_path / "a.duckdb"}
    s["config"].write_text('[property]\nname = "Harbor Point"\ntime_zone = "America/New_York"\n')
    s["spool"].mkdir()
    write(s["spool"] / "2026-11-28_MB-07.jsonl", L)
    s["archive"].mkdir()
    db.connect(s["db"]).close()
    return s


def _doctor(s: dict[str, Path], **changed: Path) -> list[str | Path]:
    s = s | changed
    return ["doctor", "--config", s["config"], "--spool", s["spool"], "--archive", s["archive"],
            "--db", s["db"]]


@pytest.mark.slow
def test_doctor_all_good_exits_0(
    bacc_audit: Any, nightly_setup: dict[str, Path], tmp_path: Path
) -> None:
    from auditor.cli.doctor import AS_ROOT

    s = nightly_setup
    r = bacc_audit(*_doctor(s))
    assert r.code == 0, r
    assert _fails(r) == [] and r.err == ""
    lines = r.out.splitlines()
    for expected in (
        f"ok   property config: {s['config']}",
        f"ok   nightly archive {s['archive']}: writable",
        f"ok   nightly spool {s['spool']}: readable, 1 files",
        f"ok   database folder {tmp_path}: writable",
        f"ok   {s['db']}: readable and writable, 0 events",
    ):
        assert expected in lines, expected
    assert (f"note {AS_ROOT}" in lines) == (os.geteuid() == 0)
    # Nothing of the nightly job given: its folders are not checked, and that is said.
    r = bacc_audit("doctor", "--db", s["db"])
    assert r.code == 0, r
    assert (
        "note nightly spool and archive: not checked (no --spool or BACC_AUDIT_SPOOL, no "
        "--archive, BACC_AUDIT_ARCHIVE or [property] archive)"
    ) in r.out.splitlines()
    assert sorted(p.name for p in tmp_path.iterdir()) == [  # doctor's probes leave nothing
        "a.duckdb", "archive", "property.toml", "spool"]


def test_doctor_notes_a_missing_font_subsetter_without_failing(monkeypatch: Any) -> None:
    import weasyprint.text.ffi as ffi

    from auditor.cli.doctor import _font_subsetter

    if ffi.harfbuzz_subset is not None:
        assert _font_subsetter() == (
            True, "HarfBuzz subsetter (libharfbuzz-subset) writes the PDFs' fonts", "")
    monkeypatch.setattr(ffi, "harfbuzz_subset", None)
    ok, what, _ = _font_subsetter()
    assert ok is None  # a note: the PDFs are the same, only slower to write
    assert what.endswith("`apt-get install libharfbuzz-subset0`")


@pytest.mark.slow
def test_doctor_reports_the_config_every_command_would_stop_on(
    bacc_audit: Any, nightly_setup: dict[str, Path], tmp_path: Path, monkeypatch: Any
) -> None:
    s = nightly_setup
    (tmp_path / "bacc-audit.toml").write_text("[property]\nname = 'unclosed\n")  # ./ is found
    r = bacc_audit("doctor", "--spool", s["spool"], "--db", s["db"])
    assert r.code == 2, r
    [fail] = _fails(r)
    assert fail.startswith("FAIL property config: bacc-audit.toml: not valid TOML (")
    assert fail.endswith(
        "\n     fix the config file (docs/property.example.toml shows every key), or point "
        "--config (BACC_AUDIT_CONFIG) at another"
    )
    assert "note nightly archive: not checked (the property config did not load)" in r.out
    assert f"ok   nightly spool {s['spool']}: readable, 1 files" in r.out
    # The same file stops a command, with the same sentence.
    cmd = bacc_audit("findings", "--db", s["db"])
    assert cmd.code == 2 and cmd.err.startswith("error: bacc-audit.toml: not valid TOML (")
    # From the environment too.
    monkeypatch.setenv("BACC_AUDIT_CONFIG", str(tmp_path / "gone.toml"))
    r = bacc_audit("doctor", *_doctor(s)[3:])  # no --config
    assert r.code == 2, r
    assert [f.splitlines()[0] for f in _fails(r)] == [
        f"FAIL property config: {tmp_path / 'gone.toml'}: no such config file"]


@pytest.mark.slow
def test_doctor_missing_spool_alone_exits_2(
    bacc_audit: Any, nightly_setup: dict[str, Path], tmp_path: Path
) -> None:
    r = bacc_audit(*_doctor(nightly_setup, spool=tmp_path / "spoool"))
    assert r.code == 2, r
    assert _fails(r) == [f"FAIL nightly spool {tmp_path / 'spoool'}: no such folder\n"
                         + SPOOL_ADVICE]
    r = bacc_audit(*_doctor(nightly_setup, spool=nightly_setup["config"]))
    assert r.code == 2, r
    assert _fails(r) == [f"FAIL nightly spool {nightly_setup['config']}: not a folder\n"
                         + SPOOL_ADVICE]


@pytest.mark.slow
def test_doctor_missing_archive_alone_exits_2_given_by_the_environment(
    bacc_audit: Any, nightly_setup: dict[str, Path], tmp_path: Path, monkeypatch: Any
) -> None:
    s = nightly_setup
    monkeypatch.setenv("BACC_AUDIT_SPOOL", str(s["spool"]))
    monkeypatch.setenv("BACC_AUDIT_ARCHIVE", str(tmp_path / "pdf"))
    r = bacc_audit("doctor", "--config", s["config"], "--db", s["db"])
    assert r.code == 2, r
    assert _fails(r) == [
        f"FAIL nightly archive {tmp_path / 'pdf'}: no such folder\n"
        f"     create it (mkdir -p {tmp_path / 'pdf'}) writable by the user of the job, or "
        "correct --archive (BACC_AUDIT_ARCHIVE, or [property] archive in the config)"
    ]
    (tmp_path / "pdf").mkdir()
    assert bacc_audit("doctor", "--config", s["config"], "--db", s["db"]).code == 0


@pytest.mark.slow
def test_doctor_finds_the_archive_where_nightly_would(
    bacc_audit: Any, nightly_setup: dict[str, Path], tmp_path: Path
) -> None:
    s = nightly_setup
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "p.toml").write_text('[property]\narchive = "pdfs"\n')  # relative to the file
    r = bacc_audit("doctor", "--config", etc / "p.toml", "--db", s["db"])
    assert r.code == 2, r
    assert [f.splitlines()[0] for f in _fails(r)] == [
        f"FAIL nightly archive {etc / 'pdfs'}: no such folder"]
    assert "note nightly spool: not checked (no --spool or BACC_AUDIT_SPOOL)" in r.out
    (etc / "pdfs").mkdir()
    r = bacc_audit("doctor", "--config", etc / "p.toml", "--db", s["db"])
    assert r.code == 0, r
    assert f"ok   nightly archive {etc / 'pdfs'}: writable" in r.out.splitlines()
    # --archive wins over the config; no archive anywhere: nightly's reports/archive.
    assert bacc_audit("doctor", "--config", etc / "p.toml", "--archive", s["archive"],
                      "--db", s["db"]).code == 0
    r = bacc_audit("doctor", "--spool", s["spool"], "--db", s["db"])
    assert [f.splitlines()[0] for f in _fails(r)] == [
        f"FAIL nightly archive {Path('reports') / 'archive'}: no such folder"]


@pytest.mark.slow
def test_doctor_database_that_is_not_one_or_has_no_folder_exits_2(
    bacc_audit: Any, nightly_setup: dict[str, Path], tmp_path: Path
) -> None:
    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database\n")
    r = bacc_audit(*_doctor(nightly_setup, db=junk))
    assert r.code == 2, r
    [fail] = _fails(r)
    assert fail.startswith(f"FAIL {junk}: ")
    assert fail.endswith(
        "\n     point --db (BACC_AUDIT_DB) at the audit database, or check the file's permissions"
    )
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).close()  # DuckDB, but no audit tables
    r = bacc_audit(*_doctor(nightly_setup, db=other))
    assert r.code == 2, r
    assert [f.splitlines()[0] for f in _fails(r)] == [
        f"FAIL {other}: a DuckDB file, but not an audit database (Catalog Error: Table with "
        "name events does not exist!)"]
    r = bacc_audit(*_doctor(nightly_setup, db=tmp_path / "var" / "a.duckdb"))
    assert r.code == 2, r
    assert _fails(r) == [
        f"FAIL database folder {tmp_path / 'var'}: no such folder\n"
        f"     create it (mkdir -p {tmp_path / 'var'}) or point --db (BACC_AUDIT_DB) elsewhere"
    ]


@contextlib.contextmanager
def _as_unprivileged() -> Iterator[None]:
    """Root may read and write anywhere, so a read-only folder is read-only only to another
    user: as root (CI), the block runs with nobody's effective user and no groups."""
    if os.geteuid() != 0:
        yield
        return
    groups = os.getgroups()
    os.setgroups([])
    os.setegid(NOBODY)
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)
        os.setgroups(groups)


@pytest.fixture
def shared_setup(bacc_audit: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    """A good nightly setup in a folder every user can reach (pytest's tmp_path is private to
    its owner), made the working directory."""
    monkeypatch.delenv("BACC_AUDIT_SPOOL", raising=False)
    monkeypatch.delenv("BACC_AUDIT_ARCHIVE", raising=False)
    top = Path(tempfile.mkdtemp(prefix="bacc-audit-doctor-"))
    top.chmod(0o755)
    monkeypatch.chdir(top)
    s = {"spool": top / "spool", "archive": top / "archive", "data": top / "data"}
    for folder, mode in (("spool", 0o755), ("archive", 0o777), ("data", 0o777)):
        s[folder].mkdir()
        s[folder].chmod(mode)
    write(s["spool"] / "2026-11-28_MB-07.jsonl", L).chmod(0o644)
    s["db"] = s["data"] / "a.duckdb"
    db.connect(s["db"]).close()
    os.chown(s["db"], NOBODY, NOBODY)  # the job's user's own, private as bacc-audit makes it
    # The rule packs too: the checkout itself may be private to its owner (a mktemp -d clone).
    rules = shutil.copytree(shipped("rules"), top / "rules")
    for f in [rules, *rules.iterdir()]:
        f.chmod(0o755 if f.is_dir() else 0o644)
    monkeypatch.setenv("BACC_AUDIT_RULES", str(rules))
    try:
        yield s
    finally:
        for p in [top, *(p for p in top.iterdir() if p.is_dir())]:
            p.chmod(0o755)
        shutil.rmtree(top)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("broken", "mode", "fail"),
    [
        ("data", 0o555, "FAIL database folder {data}: cannot be written (Permission denied); "
         "the database, its .wal and the nightly lock go there"),
        ("db", 0o400, "FAIL {db}: readable, 0 events, but cannot be written (Permission denied)"),
        ("archive", 0o555, "FAIL nightly archive {archive}: cannot be written (Permission "
         "denied)"),
        ("spool", 0o311, "FAIL nightly spool {spool}: cannot be read (Permission denied)"),
        ("spool", 0o644, "FAIL nightly spool {spool}: cannot be read (Permission denied)"),
    ],
)
def test_doctor_permissions_as_the_user_of_the_job(
    bacc_audit: Any, shared_setup: dict[str, Path], broken: str, mode: int, fail: str
) -> None:
    s = shared_setup
    args = ["doctor", "--spool", s["spool"], "--archive", s["archive"], "--db", s["db"]]
    # Once as this user first: it also loads every module doctor imports lazily, which
    # nobody could not read (the interpreter may live under /root).
    assert bacc_audit(*args).code == 0
    with _as_unprivileged():
        good = bacc_audit(*args)
    assert good.code == 0, good
    s[broken].chmod(mode)
    if os.geteuid() == 0:  # root passes: the note says to run doctor as the job's user
        r = bacc_audit(*args)
        assert r.code == 0 and "note permissions checked as root" in r.out, r
    with _as_unprivileged():
        r = bacc_audit(*args)
    assert r.code == 2, r
    [line] = [f.splitlines()[0] for f in _fails(r)]
    assert line == fail.format(**s)
    assert os.geteuid() == os.getuid()  # the privileges came back


# --------------------------------------------------------------------------------------------
# Errors a user causes must not look like bugs (issue 19)
# --------------------------------------------------------------------------------------------

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
SHIFT = "2026-11-28/grave"


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory, sample_ingested: Path) -> Path:
    """The sample night ingested (rounds to report on); closed, so the CLI can open it: a
    copy of the session's (conftest.py)."""
    return Path(shutil.copy(sample_ingested, tmp_path_factory.mktemp("sample") / "sample.duckdb"))


def runs_rows(db_path: Path) -> list[tuple[str, str, int]]:
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return con.execute("SELECT command, status, exit_code FROM runs ORDER BY id").fetchall()
    finally:
        con.close()


def read_only_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the kernel answers for a file in a read-only folder (EROFS). chmod cannot stand in
    for it: these tests may run as root, whom permissions do not stop."""
    import errno
    import os

    from auditor.report import render

    def refuse(path: Path, data: bytes) -> None:
        tmp = path.with_name(f".{path.name}.partial")
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp))

    monkeypatch.setattr(render, "write_whole", refuse)


@pytest.mark.slow
def test_report_into_a_read_only_folder_exits_2_naming_the_file(
    bacc_audit: Any, sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_only_output(monkeypatch)
    out = tmp_path / "ro" / "grave.html"
    r = bacc_audit("report", "--db", sample_db, "--shift", SHIFT, "--out", out)
    assert r.code == 2, r
    assert r.err == (
        f"error: {out}: cannot write the report there (Read-only file system); choose another "
        "--out, in a folder this user may write to\n"
    )
    assert r.out == ""


CONFIGS = {
    "shifts as a table": (
        '[shifts]\nname = "day"\nstart = "06:00"\nend = "14:00"\n',
        "shifts must be an array of tables: write each shift under its own [[shifts]] header "
        "(two brackets), with name, start and end",
    ),
    "timezone": (
        '[property]\ntimezone = "America/New_York"\n',
        "unknown key in [property]: 'timezone'; did you mean 'time_zone'? "
        "(known here: name, time_zone, gaming_day_start, archive)",
    ),
    "[[shift]]": (
        '[[shift]]\nname = "day"\nstart = "06:00"\nend = "18:00"\n',
        "unknown key 'shift'; did you mean 'shifts'? "
        "(known here: property, shifts, procedures, house_options, board, signing)",
    ),
    "a shift's key": (
        '[[shifts]]\nname = "day"\nbegin = "06:00"\nend = "18:00"\n',
        "unknown key in shifts[0]: 'begin' (known here: name, start, end)",
    ),
    "overlapping shifts": (
        '[[shifts]]\nname = "day"\nstart = "06:00"\nend = "15:00"\n'
        '[[shifts]]\nname = "swing"\nstart = "14:00"\nend = "22:00"\n',
        "shifts 'day' (06:00-15:00) and 'swing' (14:00-22:00) overlap; a time belongs to one "
        "shift",
    ),
    "overlapping past midnight": (
        '[[shifts]]\nname = "grave"\nstart = "22:00"\nend = "07:00"\n'
        '[[shifts]]\nname = "day"\nstart = "06:00"\nend = "22:00"\n',
        "shifts 'grave' (22:00-07:00) and 'day' (06:00-22:00) overlap; a time belongs to one "
        "shift",
    ),
    "hours in no shift": (
        '[[shifts]]\nname = "day"\nstart = "06:00"\nend = "14:00"\n'
        '[[shifts]]\nname = "swing"\nstart = "15:00"\nend = "21:00"\n'
        '[[shifts]]\nname = "grave"\nstart = "22:00"\nend = "06:00"\n',
        "the shifts leave 14:00-15:00, 21:00-22:00 uncovered; every time of the gaming day "
        "must belong to a shift, or its rounds are in no shift report",
    ),
    "procedures not a table": (
        'procedures = "P1=1"\n',
        "[procedures] must be a table of keys (a [procedures] header with key = value lines), "
        "not str 'P1=1'",
    ),
}


@pytest.mark.parametrize("case", list(CONFIGS))
def test_a_config_mistake_exits_2_naming_the_key(
    bacc_audit: Any, findings_db: Path, tmp_path: Path, case: str
) -> None:
    text, words = CONFIGS[case]
    conf = tmp_path / "bacc-audit.toml"
    conf.write_text(text)
    r = bacc_audit("findings", "--db", findings_db, "--config", conf)
    assert r.code == 2, r
    assert r.err == f"error: {conf}: {words}\n"


def test_shifts_that_meet_end_to_start_are_accepted(tmp_path: Path) -> None:
    from auditor import config

    conf = tmp_path / "c.toml"
    conf.write_text(
        '[[shifts]]\nname = "day"\nstart = "06:00"\nend = "18:00"\n'
        '[[shifts]]\nname = "night"\nstart = "18:00"\nend = "06:00"\n'
    )
    assert [s.name for s in config.load(conf).shifts] == ["day", "night"]
    assert [s.name for s in config.load(SAMPLE / "property.toml").shifts] == [
        "day", "swing", "grave"
    ]
    example = Path(__file__).resolve().parents[2] / "docs" / "property.example.toml"
    assert config.load(example).pit_procedures == {"P1": 1, "P2": 3}


def interrupt_at(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, exc: BaseException
) -> None:
    def stop(*_args: Any, **_kw: Any) -> Any:
        raise exc

    monkeypatch.setattr(module, name, stop)


@pytest.mark.slow
@pytest.mark.parametrize(
    "exc", [KeyboardInterrupt(), RuntimeError("Query interrupted")], ids=["python", "duckdb"]
)
def test_ctrl_c_during_ingest_exits_130_and_the_run_reads_interrupted(
    bacc_audit: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: BaseException
) -> None:
    """Ctrl-C reaches Python code as KeyboardInterrupt, and a DuckDB query (which catches
    SIGINT itself) as RuntimeError("Query interrupted")."""
    dbp = tmp_path / "a.duckdb"
    interrupt_at(monkeypatch, ingest_cli, "ingest", exc)
    r = bacc_audit("ingest", write(tmp_path / "night.jsonl", L), "--db", dbp)
    assert r.code == 130, r
    assert (r.out, r.err) == ("", "interrupted\n")
    assert runs_rows(dbp) == [("ingest", "interrupted", 130)]
    shown = bacc_audit("runs", "--db", dbp, "--json")
    assert [(x["status"], x["exit_code"]) for x in json.loads(shown.out)] == [("interrupted", 130)]


@pytest.mark.slow
def test_ctrl_c_during_audit_exits_130_and_the_run_reads_interrupted(
    bacc_audit: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from auditor.audit import run as audit_run

    dbp = tmp_path / "a.duckdb"
    assert bacc_audit("ingest", write(tmp_path / "night.jsonl", L), "--db", dbp).code == 0
    interrupt_at(monkeypatch, audit_run, "audit", RuntimeError("Query interrupted"))
    r = bacc_audit("audit", "--db", dbp)
    assert r.code == 130, r
    assert (r.out, r.err) == ("", "interrupted\n")
    assert runs_rows(dbp) == [("ingest", "done", 0), ("audit", "interrupted", 130)]


FULL = duckdb.IOException('IO Error: Could not write file "/srv/a.duckdb.tmp/duckdb_temp_7.tmp": '
                          "No space left on device")
FULL_SAID = ("error: /srv/a.duckdb.tmp/duckdb_temp_7.tmp: no space left on the device; free "
             "space there (a large check or audit spills temporary files beside the database, "
             "in DB.tmp) and run the command again")


def test_a_full_disk_is_one_sentence_and_exit_2_in_a_run_and_in_a_reader(
    bacc_audit: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB's "No space left on device" (a large verify spilled its sort to DB.tmp on the
    10M-round day) is the machine's setup, not an internal error."""
    from auditor.cli import findings as findings_cli

    dbp = tmp_path / "a.duckdb"
    interrupt_at(monkeypatch, ingest_cli, "ingest", FULL)
    r = bacc_audit("ingest", write(tmp_path / "night.jsonl", L), "--db", dbp)
    assert (r.code, r.out) == (2, ""), r
    assert " ".join(r.err.split()) == FULL_SAID
    assert runs_rows(dbp) == [("ingest", "failed", 2)]
    interrupt_at(monkeypatch, findings_cli.findings, "select", FULL)  # no run: main says it
    r = bacc_audit("findings", "--db", dbp)
    assert r.code == 2, r
    assert " ".join(r.err.split()) == FULL_SAID


def _masked_out_of_memory() -> duckdb.Error:
    """What the 10M-round day's audit raised: DuckDB out of memory in a query of the
    shoe-integrity pass, then "transaction is aborted" from the cleanup in its `finally`."""
    try:
        raise duckdb.OutOfMemoryException(
            "Out of Memory Error: failed to allocate data of size 1.8 MiB (2.3 GiB/2.3 GiB "
            "used)\nPossible solutions:\n* Reducing the number of threads (SET threads=X)")
    except duckdb.OutOfMemoryException:
        try:
            raise duckdb.TransactionException(
                "TransactionContext Error: Current transaction is aborted (please ROLLBACK)")
        except duckdb.TransactionException as cleanup:
            return cleanup
    raise AssertionError("unreachable")


def test_memory_exhausted_is_one_sentence_and_exit_2_even_behind_the_cleanups_error(
    bacc_audit: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB's "Out of Memory Error" under BACC_AUDIT_MEMORY_LIMIT is the setup's limit,
    said as such: not the "transaction is aborted" of the cleanup that followed it, and not
    an internal error asking for a bug report."""
    from auditor.audit import run as audit_run

    dbp = tmp_path / "a.duckdb"
    assert bacc_audit("ingest", write(tmp_path / "night.jsonl", L), "--db", dbp).code == 0
    monkeypatch.setenv("BACC_AUDIT_MEMORY_LIMIT", "2.5GB")
    interrupt_at(monkeypatch, audit_run, "audit", _masked_out_of_memory())
    r = bacc_audit("audit", "--db", dbp)
    assert (r.code, r.out) == (2, ""), r
    assert " ".join(r.err.split()) == (
        "error: the database ran out of memory (failed to allocate data of size 1.8 MiB "
        "(2.3 GiB/2.3 GiB used)) under BACC_AUDIT_MEMORY_LIMIT=2.5GB; the step that failed "
        "was rolled back: raise the limit, or run on a machine with more memory, and run "
        "the command again")
    assert "internal error" not in r.err and "Traceback" not in r.err
    assert runs_rows(dbp) == [("ingest", "done", 0), ("audit", "failed", 2)]


SIGINT_INGEST = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    import auditor.ingest.lines as lines
    from auditor.cli.app import main

    marker, real = Path(sys.argv[1]), lines.read_rows

    def announced(*args, **kwargs):  # the load is under way: the test's cue, nothing else
        if not marker.exists():
            marker.touch()
        return real(*args, **kwargs)

    lines.read_rows = announced
    sys.argv = ["bacc-audit", "ingest", *sys.argv[2:]]
    main()
    """
)


@pytest.mark.realtime
@pytest.mark.slow
def test_sigint_mid_ingest_of_a_large_file_exits_130(tmp_path: Path) -> None:
    """The real thing: SIGINT to a process loading a large file (a query is running)."""
    import signal
    import time

    from auditor.simulate.bulk import simulate_bulk

    logs = simulate_bulk(tmp_path / "logs", 40, 24, 1, 0.0).files
    big = tmp_path / "big.jsonl"
    with big.open("wb") as fh:
        for f in logs:
            fh.write(f.read_bytes())
    dbp, loading = tmp_path / "a.duckdb", tmp_path / "loading"
    child = subprocess.Popen(
        [sys.executable, "-c", SIGINT_INGEST, str(loading), str(big), "--db", str(dbp)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As a terminal's foreground job: a suite started in the background (`make test &`,
        # nohup) passes SIGINT ignored to its children, and Python then keeps it ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # The child says when it reads the file's first block (its run recorded, its transaction
    # open); a moment on, the load is under way.
    deadline = time.monotonic() + 120
    while not loading.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 130, (out, err)
    assert (out, err) == ("", "interrupted\n")
    assert runs_rows(dbp) == [("ingest", "interrupted", 130)]
    assert count(dbp, "SELECT count(*) FROM events") == 0  # the file's transaction rolled back


DB_COMMANDS = {
    "ingest": ["ingest", "{log}"],
    "audit": ["audit"],
    "findings": ["findings"],
    "report": ["report", "--shift", SHIFT],
    "runs": ["runs"],
    "ack --list": ["ack", "--list"],
    "ack": ["ack", "fp", "--by", "me", "--disposition", "ok"],
    "notice list": ["notice", "list"],
    "nightly": ["nightly", "--spool", "{spool}"],
    "close-day": ["close-day", "2026-11-28"],
}


@pytest.mark.parametrize("command", list(DB_COMMANDS))
@pytest.mark.parametrize("content", [b"", L[0].encode() + b"\n"], ids=["empty", "a log"])
def test_a_db_that_is_not_a_duckdb_database_is_refused(
    bacc_audit: Any, tmp_path: Path, command: str, content: bytes
) -> None:
    """`--db garb.jsonl` once loaded the log as data in memory, said "events loaded" and saved
    nothing; now every command that opens the database refuses it and leaves it untouched."""
    garb = tmp_path / "garb.jsonl"
    garb.write_bytes(content)
    log = write(tmp_path / "night.jsonl", L)
    spool = tmp_path / "spool"
    spool.mkdir()
    args = [a.format(log=log, spool=spool) for a in DB_COMMANDS[command]]
    r = bacc_audit(*args, "--db", garb)
    assert r.code == 2, r
    what = "an empty file" if not content else "not a DuckDB database"
    assert r.err == (
        f"error: {garb}: {what}, so not an audit database; give --db (or BACC_AUDIT_DB) the "
        "audit database file, or a path where none exists yet to create one\n"
    )
    assert "another process" not in r.err + r.out
    assert garb.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["garb.jsonl", "night.jsonl", "spool"]


@pytest.mark.slow
def test_doctor_on_a_db_that_is_not_a_database_does_not_blame_another_process(
    bacc_audit: Any, tmp_path: Path
) -> None:
    garb = write(tmp_path / "garb.jsonl", L)
    r = bacc_audit("doctor", "--db", garb)
    assert r.code == 2, r
    assert f"FAIL {garb}: not a DuckDB database, so not an audit database" in r.out
    assert "another process" not in r.out


@pytest.mark.slow
def test_an_unknown_code_exits_2_and_names_the_near_one(
    bacc_audit: Any, findings_db: Path
) -> None:
    r = bacc_audit("findings", "--db", findings_db, "--code", "draw.banker_miss")
    assert r.code == 2, r
    assert r.err == (
        "error: --code draw.banker_miss: no such finding code; did you mean "
        "draw.banker_missed? (bacc-audit codes lists them; * matches any text, as in log.*)\n"
    )
    assert r.out == ""
    wild = bacc_audit("findings", "--db", findings_db, "--code", "drew.*")
    assert wild.code == 2, wild
    assert wild.err.startswith("error: --code drew.*: no such finding code")
    # A code that exists but has no findings is a clean answer, not a typo.
    assert bacc_audit("findings", "--db", findings_db, "--code", "vig.missing").code == 0


@pytest.mark.slow
def test_an_unknown_table_exits_2_and_names_the_near_one(
    bacc_audit: Any, findings_db: Path
) -> None:
    r = bacc_audit("findings", "--db", findings_db, "--table", "XX-99")
    assert r.code == 2, r
    assert r.err == "error: --table XX-99: no such table in this database (it holds MB-07)\n"
    near = bacc_audit("findings", "--db", findings_db, "--table", "MB-7")
    assert near.code == 2, near
    assert near.err == (
        "error: --table MB-7: no such table in this database; did you mean MB-07? "
        "(it holds MB-07)\n"
    )


def test_a_reversed_rerun_range_exits_2(bacc_audit: Any, tmp_path: Path) -> None:
    dbp = tmp_path / "a.duckdb"
    r = bacc_audit("audit", "--db", dbp, "--rerun", "2026-11-28..2026-11-27")
    assert r.code == 2, r
    assert r.err == (
        "error: --rerun 2026-11-28..2026-11-27: the range ends before it starts; write it "
        "FROM..TO, like 2026-11-27..2026-11-28\n"
    )
    assert not dbp.exists()  # refused before anything was opened or recorded


def test_report_with_shift_and_date_together_exits_2(bacc_audit: Any, sample_db: Path) -> None:
    r = bacc_audit("report", "--db", sample_db, "--shift", SHIFT, "--date", "2026-11-28")
    assert r.code == 2, r
    assert r.err == (
        "error: give --shift (one shift) or --date (the whole gaming day), not both\n"
    )


@pytest.mark.slow
def test_report_format_follows_the_out_suffix_and_a_contradiction_exits_2(
    bacc_audit: Any, sample_db: Path, tmp_path: Path
) -> None:
    html = tmp_path / "y.html"
    r = bacc_audit("report", "--db", sample_db, "--shift", SHIFT, "--out", html)
    assert r.code == 0, r
    assert r.out == f"{html}\n"
    assert html.read_bytes().startswith(b"<!DOCTYPE html>")

    pdf = tmp_path / "z.pdf"
    bad = bacc_audit("report", "--db", sample_db, "--shift", SHIFT, "--format", "html",
                     "--out", pdf)
    assert bad.code == 2, bad
    assert bad.err == (
        f"error: --format html contradicts --out {pdf}, whose suffix says pdf; make them "
        "agree (or leave --format out)\n"
    )
    txt = tmp_path / "z.txt"
    odd = bacc_audit("report", "--db", sample_db, "--shift", SHIFT, "--out", txt)
    assert odd.code == 2, odd
    assert odd.err == (
        f"error: --out {txt}: the report is PDF or HTML; name the file .pdf or .html, or say "
        "which with --format\n"
    )
    assert not pdf.exists() and not txt.exists()


@pytest.mark.slow
def test_an_empty_log_file_is_said_to_be_empty_exits_2_and_is_recorded(
    bacc_audit: Any, tmp_path: Path
) -> None:
    dbp = tmp_path / "a.duckdb"
    empty = tmp_path / "MB-09.jsonl"
    empty.write_bytes(b"")
    log = write(tmp_path / "night.jsonl", L)
    r = bacc_audit("ingest", empty, log, "--db", dbp)
    assert r.code == 2, r
    assert r.err == (
        f"error: {empty}: empty file, no events to load (recorded in the manifest as empty); "
        "check that its table system delivered its log\n"
    )
    assert r.out.splitlines()[-1] == (
        "2 files: 1 ingested, 0 already ingested, 0 refused, 0 unreadable, 1 empty; "
        "15 events loaded, 0 lines quarantined"
    )
    assert count(dbp, "SELECT list(status ORDER BY id) FROM sources") == ["empty", "ingested"]
    as_json = bacc_audit("ingest", empty, "--db", dbp, "--json")
    assert as_json.code == 2, as_json
    assert [f["status"] for f in json.loads(as_json.out)["files"]] == ["empty"]
    assert count(dbp, "SELECT count(*) FROM sources") == 2  # the same empty file: no new row


# --------------------------------------------------------------------------------------------
# a closed pipe (`bacc-audit findings | head -1`)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def many_findings_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1,000 log.malformed findings: each export is five times a pipe's 64 KiB buffer or
    more (jsonl 540 kB, csv 380 kB, table 355 kB), so the command is still writing when its
    reader goes away. (3,000 cost the table, which rich lays out whole, 9 s more.)"""
    audit: AuditDb = open_audit(tmp_path_factory.mktemp("many"))
    night = audit.write("night.jsonl", [*L, *(["not json"] * 1000)])
    audit.ingest_file(night)
    path = Path(audit.con.execute("SELECT file FROM pragma_database_list").fetchall()[0][0])
    audit.con.close()
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["findings", "--format", "jsonl"],
        ["findings", "--format", "csv"],
        ["findings", "--format", "table"],
        ["codes"],
        ["--help"],
    ],
    ids=["jsonl", "csv", "table", "codes", "help"],
)
def test_a_reader_that_stops_early_ends_the_command_quietly_with_exit_0(
    many_findings_db: Path, args: list[str]
) -> None:
    """`bacc-audit findings | head -1`: a real pipe, one line read, then closed. Exit 1 would
    read as "findings found", and a traceback as a bug."""
    child = subprocess.Popen(
        [sys.executable, "-c", "from auditor.cli.app import main; main()", *args,
         *(["--db", str(many_findings_db)] if args[0] == "findings" else [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    assert child.stdout.readline()
    child.stdout.close()
    err = child.stderr.read().decode()
    assert child.wait(timeout=60) == 0, err
    assert err == ""


AT_EXIT = """
import atexit, gc, os, sys
atexit.register(lambda: sys.stderr.write(
    f"frozen {gc.get_freeze_count()} blas {os.environ.get('OPENBLAS_NUM_THREADS')}\\n"))
"""


def test_the_command_runs_on_frozen_imports_and_one_blas_thread(
    tmp_path: Path, bacc_audit: Any
) -> None:
    """The installed `bacc-audit` freezes what its imports made before the command runs (a
    collection of the oldest generation, and the last at exit, would walk it all: about
    0.1 s of CPU a command) and starts numpy's BLAS with one thread unless told otherwise,
    as seen from inside the process at its exit. Run in-process, nothing is frozen: a
    test's own garbage would stay."""
    (tmp_path / "sitecustomize.py").write_text(AT_EXIT)
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env["PYTHONPATH"] = str(tmp_path)
    said = {}
    for blas in (None, "3"):
        run_env = env if blas is None else {**env, "OPENBLAS_NUM_THREADS": blas}
        done = subprocess.run([Path(sys.executable).parent / "bacc-audit", "--version"],
                              env=run_env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        said[blas] = done.stderr.split()
    assert said[None][0] == "frozen" and int(said[None][1]) > 50_000, said
    assert said[None][2:] == ["blas", "1"] and said["3"][2:] == ["blas", "3"], said
    before = gc.get_freeze_count()  # frozen objects still die by their count: no more
    assert bacc_audit("--version").code == 0
    assert gc.get_freeze_count() <= before


# --------------------------------------------------------------------------------------------
# conventions: usage errors, counts, -h, flags
# --------------------------------------------------------------------------------------------


def test_a_refused_value_reads_as_a_sentence_without_value_error(
    bacc_audit: Any, tmp_path: Path
) -> None:
    r = bacc_audit("findings", "--format", "xml")
    assert r.code == 2, r
    assert "Invalid value for '--format': 'xml' is not one of 'jsonl', 'csv', 'table'." in r.err
    assert "Value error" not in r.err


def test_counts_say_one_thing_in_the_singular() -> None:
    from auditor.words import count as counted

    assert [counted(n, "line") for n in (0, 1, 2, 1024)] == [
        "0 lines", "1 line", "2 lines", "1,024 lines",
    ]
    assert counted(1, "acknowledgement") == "1 acknowledgement"
    assert counted(3, "body", "bodies") == "3 bodies"


COMMANDS = [
    ["ingest"], ["audit"], ["findings"], ["codes"], ["report"], ["doctor"], ["odds"],
    ["nightly"], ["runs"], ["ack"], ["simulate"], ["notice"], ["notice", "add"],
    ["notice", "list"], ["close-day"],
]


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_dash_h_is_help_and_flags_are_shown_without_a_value(
    bacc_audit: Any, command: list[str]
) -> None:
    """`-h` as `--help`; a flag shown as `--json <bool>` reads as if it took a value, and
    `--json=true` is refused."""
    short = bacc_audit(*command, "-h")
    assert short.code == 0, short
    assert re.search(rf"Usage: .*bacc-audit {' '.join(command)} \[OPTIONS\]", short.out), short
    assert bacc_audit(*command, "--help").out == short.out
    assert "<bool>" not in short.out


# --------------------------------------------------------------------------------------------
# runs: --limit, --command, --status
# --------------------------------------------------------------------------------------------


@pytest.fixture
def many_runs_db(tmp_path: Path) -> Path:
    """55 ingest runs done, then an audit that failed, then one whose process died."""
    from auditor.store import runs

    path = tmp_path / "runs.duckdb"
    con = db.connect(path)
    for _ in range(55):
        runs.finish(con, runs.start(con, "ingest", {}), "done", 0, {})
    runs.finish(con, runs.start(con, "audit", {}), "failed", 3, {})
    runs.start(con, "nightly", {})  # never finished: shown as interrupted
    con.close()
    return path


@pytest.mark.slow
def test_runs_shows_the_latest_50_and_says_how_many_it_left_out(
    bacc_audit: Any, many_runs_db: Path
) -> None:
    r = bacc_audit("runs", "--db", many_runs_db, "--json")
    assert r.code == 0, r
    assert [row["id"] for row in json.loads(r.out)] == list(range(8, 58))
    text = bacc_audit("runs", "--db", many_runs_db)
    assert text.out.splitlines()[-1] == "50 runs (7 earlier left out: --limit 0 for all)"
    every = bacc_audit("runs", "--db", many_runs_db, "--limit", "0")
    assert every.out.splitlines()[-1] == "57 runs"


@pytest.mark.slow
def test_runs_filters_by_command_and_status(bacc_audit: Any, many_runs_db: Path) -> None:
    def ids(*args: str) -> list[tuple[int, str, str]]:
        r = bacc_audit("runs", "--db", many_runs_db, "--json", *args)
        assert r.code == 0, r
        return [(row["id"], row["command"], row["status"]) for row in json.loads(r.out)]

    assert ids("--command", "ingest", "--limit", "2") == [
        (54, "ingest", "done"), (55, "ingest", "done"),
    ]
    assert ids("--status", "failed") == [(56, "audit", "failed")]
    assert ids("--status", "interrupted") == [(57, "nightly", "interrupted")]
    assert ids("--command", "audit", "--status", "done") == []
    one = bacc_audit("runs", "--db", many_runs_db, "--command", "nightly")
    assert one.out.splitlines()[-1] == "1 run"


@pytest.mark.slow
def test_runs_refuses_a_command_or_status_that_cannot_match(
    bacc_audit: Any, many_runs_db: Path
) -> None:
    r = bacc_audit("runs", "--db", many_runs_db, "--command", "inget")
    assert r.code == 2, r
    assert r.err.startswith(
        "error: --command inget: no such command records runs; did you mean ingest?"
    )
    bad = bacc_audit("runs", "--db", many_runs_db, "--status", "ok")
    assert bad.code == 2, bad
    assert "Invalid value for '--status'" in bad.err


# --------------------------------------------------------------------------------------------
# progress of audit and report when stderr is not a terminal (cron)
# --------------------------------------------------------------------------------------------


def test_plain_progress_lines_come_every_10_percent_or_30_seconds_after_the_first_30(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from auditor.cli import progress

    now = [0.0]
    sink = io.StringIO()
    lines = progress.PlainLines(Console(file=sink, width=200), "audit", clock=lambda: now[0])
    for done, at in [(0, 0), (1, 10), (2, 31), (3, 32), (4, 40), (5, 75), (6, 76), (20, 80)]:
        now[0] = at
        lines("rounds", done, 20)
    assert sink.getvalue().splitlines() == [
        "audit: 10% rounds (31 s)",  # the first 30 s say nothing
        "audit: 20% rounds (40 s)",  # 10% on
        "audit: 25% rounds (75 s)",  # 30 s on, though under 10%
        "audit: 100% rounds (80 s)",
    ]


@pytest.mark.slow
def test_audit_and_report_write_plain_progress_lines_off_a_terminal(
    bacc_audit: Any, sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from auditor.cli import progress

    dbp = tmp_path / "a.duckdb"
    shutil.copy(sample_db, dbp)
    quiet = bacc_audit("audit", "--db", dbp, "--fail-on", "critical")
    assert "%" not in quiet.err  # done within 30 s: nothing said
    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.0)
    monkeypatch.setattr(db, "BATCH_EVENTS", 2_000)  # the sample night in several batches
    r = bacc_audit("audit", "--db", dbp, "--rerun", "2026-11-28", "--fail-on", "critical")
    assert r.code in (0, 1), r
    said = [x for x in r.err.splitlines() if x.startswith("audit: ")]
    assert re.fullmatch(r"audit: 0% rounds, tables batch 1 of (\d+) \(\d+ s\)", said[0]), said
    assert re.fullmatch(r"audit: 100% tables, pits and shoes \(\d+ s\)", said[-1]), said
    percents = [int(x.split()[1].rstrip("%")) for x in said]
    assert percents == sorted(percents) and len(said) >= 4
    assert all(b - a >= 10 or b == 100 for a, b in itertools.pairwise(percents)), said

    rep = bacc_audit(
        "report", "--db", dbp, "--shift", SHIFT, "--out", tmp_path / "r.html"
    )
    assert rep.code == 0, rep
    said = rep.err.splitlines()
    assert [re.sub(r" \(\d+ s\)$", "", x) for x in said[:-1]] == [
        "report: 0% gather", "report: 33% render HTML", "report: 66% write", "report: 100% written",
    ]
    # The ledger check's headline once the report is written (docs/ledger.md).
    assert said[-1].startswith("ledger verified: every record as sealed (")
    assert rep.out.strip() == str(tmp_path / "r.html")  # stdout stays the path alone
