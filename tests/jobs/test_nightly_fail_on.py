"""`nightly --fail-on` and acknowledged findings (issue 31): a finding someone acknowledged
still counts (it stands, and the report shows it); `--fail-on SEVERITY:unacknowledged`
leaves out those someone acknowledged, so a night whose critical findings were all reviewed
can exit 0."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.cli import Run
from helpers.sample import CONFIG, SAMPLE

pytestmark = pytest.mark.slow

# The sample night's tables with a critical finding each (sample_logs/README.md: MB-01's
# missed Banker draw, PB-01's extra Player card, MB-04's short payment, NZ-01's tie settled
# as a loss), each with major findings beside it, and the pit's notices: every nightly run
# below renders the shifts' reports again, so the night is cut to what the test is about.
TABLES = ("MB-01", "PB-01", "MB-04", "NZ-01", "pit-notices")


def test_acknowledged_findings_count_unless_fail_on_says_unacknowledged(
    bacc_audit: Callable[..., Run], tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    for f in sorted(SAMPLE.glob("*.jsonl*")):
        if f.name.split("_", 1)[1].split(".")[0] in TABLES:
            shutil.copy2(f, spool / f.name)
    assert len(list(spool.iterdir())) == len(TABLES)
    base = ["--spool", spool, "--date", "2026-11-28", "--archive", tmp_path / "archive",
            "--db", tmp_path / "audit.duckdb", "--config", CONFIG, "--json"]

    def nightly(fail_on: str) -> dict:
        r = bacc_audit("nightly", *base, "--fail-on", fail_on)
        assert r.code in (0, 1), r
        summary = json.loads(r.out)
        assert summary["exit_code"] == r.code
        return summary

    first = nightly("critical")
    critical = [json.loads(x) for x in bacc_audit(
        "findings", "--db", tmp_path / "audit.duckdb", "--config", CONFIG, "--date",
        "2026-11-28", "--severity", "critical", "--format", "jsonl").out.splitlines()]
    assert first["findings"]["at_or_above_fail_on"] == len(critical) == 4
    assert {f["table"] for f in critical} == set(TABLES[:4])
    assert first["findings"]["by_severity"]["major"] > 0  # they do not count
    for f in critical[:-1]:
        acked = bacc_audit("ack", f["id"], "--by", "a.chen", "--disposition",
                           "video reviewed, patron paid", "--db", tmp_path / "audit.duckdb")
        assert acked.code == 0, acked
    # One critical finding left unreviewed: it alone fails the night.
    one_left = nightly("critical:unacknowledged")
    assert (one_left["exit_code"], one_left["findings"]["at_or_above_fail_on"]) == (1, 1)
    assert bacc_audit("ack", critical[-1]["id"], "--by", "a.chen", "--disposition", "no action",
                      "--db", tmp_path / "audit.duckdb").code == 0
    reviewed = nightly("critical:unacknowledged")
    assert (reviewed["exit_code"], reviewed["findings"]["at_or_above_fail_on"]) == (0, 0)
    assert reviewed["findings"]["fail_on"] == "critical:unacknowledged"
    # Without it, acknowledged findings still count (they stand): exit 1, as documented.
    counted = nightly("critical")
    assert (counted["exit_code"], counted["findings"]["at_or_above_fail_on"]) == (
        1, len(critical))
    # The text summary says which rule it applied.
    text = bacc_audit("nightly", *base[:-1], "--fail-on", "critical:unacknowledged")
    assert text.code == 0 and text.out.splitlines()[-1] == (
        "exit 0: clean: no findings at or above critical:unacknowledged")
    wrong = bacc_audit("nightly", *base, "--fail-on", "critical:acked")
    assert wrong.code == 2 and "--fail-on critical:acked: a severity, or a severity and " \
        ":unacknowledged" in wrong.out + wrong.err
