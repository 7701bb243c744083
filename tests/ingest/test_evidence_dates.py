"""Log findings are dated by the events they concern, not by when ingest ran (issue 15, part
3): a file refused as altered days later, or a garbage first line, shows in the report of the
night whose events it concerns."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from helpers.pdfs import pdf_text

pytestmark = pytest.mark.slow  # each test ingests, audits and reports through the CLI

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
CONFIG = SAMPLE / "property.toml"
MB01 = SAMPLE / "2026-11-28_MB-01.jsonl"


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events))
    return path


def _findings(bacc_audit: Any, db: Path, code: str) -> list[dict[str, Any]]:
    r = bacc_audit("findings", "--db", db, "--code", code, "--format", "jsonl")
    assert r.code == 0, r.err
    return [json.loads(line) for line in r.out.splitlines()]


def _utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(dt.UTC)


def _report_text(bacc_audit: Any, db: Path, out: Path) -> str:
    r = bacc_audit(
        "report", "--db", db, "--config", CONFIG, "--date", "2026-11-28", "--out", out
    )
    assert r.code == 0, r.err
    return pdf_text(out)


def test_a_log_changed_after_ingest_is_dated_by_its_first_event(
    bacc_audit: Any, tmp_path: Path
) -> None:
    log = tmp_path / "MB-01.jsonl"
    events = _events(MB01)
    _write(log, events)
    db = tmp_path / "audit.duckdb"
    assert bacc_audit("ingest", log, "--db", db).code == 0
    wager = next(e for e in events if e["type"] == "wager")
    wager["amount"] = "5000.00"  # the same path, its content changed since
    _write(log, events)
    assert bacc_audit("ingest", log, "--db", db).code == 1
    (altered,) = _findings(bacc_audit, db, "log.altered")
    assert _utc(altered["ts"]) == _utc(events[0]["ts"])  # 22:00 on the night, not today
    assert bacc_audit("audit", "--db", db, "--config", CONFIG).code in (0, 1)
    assert "log.altered" in _report_text(bacc_audit, db, tmp_path / "day.pdf")


def test_a_resend_that_changes_an_event_is_dated_by_that_event(
    bacc_audit: Any, tmp_path: Path
) -> None:
    events = _events(MB01)
    db = tmp_path / "audit.duckdb"
    assert bacc_audit("ingest", _write(tmp_path / "MB-01.jsonl", events), "--db", db).code == 0
    later = [e for e in events if e["type"] == "wager"][40]
    resend = [dict(e) for e in events if e["seq"] >= later["seq"]]
    resend[0]["amount"] = "5000.00"
    assert bacc_audit("ingest", _write(tmp_path / "resend.jsonl", resend), "--db", db).code == 1
    (altered,) = _findings(bacc_audit, db, "log.altered")
    assert _utc(altered["ts"]) == _utc(later["ts"])
    assert f"seq {later['seq']}" in altered["message"]


def test_a_garbage_first_line_is_dated_by_the_line_after_it(
    bacc_audit: Any, tmp_path: Path
) -> None:
    events = _events(MB01)[:50]
    log = tmp_path / "MB-01.jsonl"
    log.write_text(
        "\x00garbage from the spool\n"
        + "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
    )
    db = tmp_path / "audit.duckdb"
    assert bacc_audit("ingest", log, "--db", db).code == 1  # lines quarantined
    (bad,) = _findings(bacc_audit, db, "log.malformed")
    assert bad["source"].endswith("MB-01.jsonl:1")
    assert _utc(bad["ts"]) == _utc(events[0]["ts"])
