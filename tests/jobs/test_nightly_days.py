"""`nightly` without --date on the files of older nights (issue 30): it names the gaming days
the files it ingested hold and reports each, instead of asking whether the logs of the latest
ended day were delivered."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from auditor.config import PropertyConfig
from auditor.errors import EXIT_INPUT
from auditor.jobs import nightly
from auditor.simulate.history import simulate_days
from auditor.simulate.planted import NightSettings

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)  # 07:00 local: 11-30 has just ended
OLDER = [dt.date(2026, 11, 24), dt.date(2026, 11, 25)]


def _spool(base: Path, first: dt.date, days: int) -> Path:
    spool = base / "spool"
    settings = NightSettings(2, 0.5, seed=4, deviation_rate=0.05,
                             games=("mini_baccarat", "punto_banco"), day=first)
    simulate_days(spool, settings, days)
    (spool / "ground_truth.ndjson").unlink()
    return spool


@pytest.mark.slow  # two nights ingested, audited and filed as PDFs: about 10 s
def test_the_files_of_two_older_nights_are_each_reported(tmp_path: Path):
    spool = _spool(tmp_path, OLDER[0], 2)
    said: list[str] = []
    r = nightly.run_nightly(tmp_path / "a.duckdb", spool, PropertyConfig(),
                            archive=tmp_path / "archive", now=NOW, say=said.append)
    assert r.held == OLDER and r.latest_ended == dt.date(2026, 11, 30)
    assert r.day == OLDER[1] and [e.day for e in r.earlier] == [OLDER[0]]
    assert not [p for p in r.problems if "no rounds" in p], r.problems
    assert "the files hold gaming days 2026-11-24, 2026-11-25: reporting each" in said
    for day, reports in ((OLDER[0], r.earlier[0].reports), (OLDER[1], r.reports)):
        grave = next(x for x in reports if x.shift == "grave")
        assert grave.rounds > 0 and grave.path == (
            tmp_path / "archive" / f"{day}" / f"{day}_grave.pdf")
        assert grave.path.is_file()
    lines = nightly.summary_lines(r)
    assert ("the files ingested hold gaming days 2026-11-24, 2026-11-25 (the latest ended "
            "is 2026-11-30): each is reported") in lines
    assert "reports of gaming day 2026-11-24 (" + str(tmp_path / "archive") + "):" in lines
    summary = r.summary()
    assert summary["gaming_day"] == "2026-11-25"
    assert summary["gaming_days_held"] == ["2026-11-24", "2026-11-25"]
    assert [d["gaming_day"] for d in summary["earlier_gaming_days"]] == ["2026-11-24"]
    assert summary["earlier_gaming_days"][0]["rounds_in_gaming_day"] > 0
    # Both days are closed: a table whose log stopped unclosed there is judged.
    assert r.day_closed == r.earlier[0].closed == "closed by this run"

    # Run again, nothing new: the latest ended day, and the question is the right one now.
    again = nightly.run_nightly(tmp_path / "a.duckdb", spool, PropertyConfig(),
                                archive=tmp_path / "archive", now=NOW)
    assert again.held == [] and again.day == dt.date(2026, 11, 30) and again.earlier == []
    assert again.exit_code == EXIT_INPUT
    assert "no rounds in gaming day 2026-11-30" in again.problems[0]


def test_days_to_report_names_the_days_held():
    said: list[str] = []
    latest = dt.date(2026, 11, 30)
    assert nightly.days_to_report([], latest, said.append) == ([latest], [])
    assert nightly.days_to_report([latest], latest, said.append) == ([latest], [latest])
    assert said == []
    older = dt.date(2026, 11, 25)
    assert nightly.days_to_report([older], latest, said.append) == ([older], [older])
    assert said == ["the files hold gaming day 2026-11-25: reporting each"]
    said.clear()
    # A night still going on waits; the older day and the latest are reported.
    held = [older, latest, dt.date(2026, 12, 1)]
    assert nightly.days_to_report(held, latest, said.append) == (
        [older, latest], [older, latest])
    assert said == [
        "gaming day 2026-12-01 is not over yet: reported by a run after it ends",
        "the files hold gaming days 2026-11-25, 2026-11-30: reporting each"]
