"""`simulate --days N` and `simulate --continue DIR` (issue 30): a history of gaming days in
one folder, each table's and pit's seq going on across the days, that ingests as one
property's logs (no log.altered) with exactly the findings of its ground truth, and fills the
report's 30-day page with one point a day."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections import Counter
from pathlib import Path

import pytest
from helpers.cli import run_cli

from auditor import config
from auditor.audit.run import audit
from auditor.ingest.paths import discover
from auditor.ingest.run import ingest
from auditor.report import gather
from auditor.simulate.history import seq_tops, simulate_days
from auditor.simulate.planted import NightSettings, simulate
from auditor.store import db, runs

FIRST = dt.date(2026, 11, 27)
DAYS = [FIRST + dt.timedelta(days=k) for k in range(4)]


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def month(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three days by --days, a fourth by --continue, through the command as a user runs it."""
    from typer.testing import CliRunner

    from auditor.cli.app import app

    out = tmp_path_factory.mktemp("history") / "sim"
    common = ["--tables", "2", "--hours", "1", "--seed", "7", "--deviation-rate", "0.05"]
    for args in (["--out", str(out), "--date", f"{FIRST}", "--days", "3"],
                 ["--continue", str(out)]):
        r = CliRunner().invoke(app, ["simulate", *args, *common])
        assert r.exit_code == 0, r.output
    return out


def test_each_stream_goes_on_across_the_days(month: Path):
    names = sorted(p.name for p in month.glob("*.jsonl"))
    assert {n[:10] for n in names} == {f"{d}" for d in DAYS}
    for table in ("MB-01", "PB-01"):
        days = [_events(month / f"{d}_{table}.jsonl") for d in DAYS]
        for before, after in itertools.pairwise(days):
            assert after[0]["type"] == "table_open"
            assert after[0]["seq"] == max(e["seq"] for e in before) + 1
            # It opens under the procedure in force when the day before ended: no change
            # between the days that nobody gave notice of.
            declared = [e["procedure"] for e in before if "procedure" in e
                        and e["type"] in ("table_open", "procedure_change")]
            assert after[0]["procedure"] == declared[-1]
        # The same dealers every day: a dealer's record spans the days.
        dealers = [{e["dealer"] for e in day if e.get("dealer")} for day in days]
        assert dealers[0] == dealers[1] == dealers[3]
    shoes = [e["shoe"] for p in month.glob("*.jsonl") for e in _events(p)
             if e["type"] == "shoe_start"]
    assert len(shoes) == len(set(shoes)) and {s.split("-")[2] for s in shoes} == {
        f"{d:%m%d}" for d in DAYS}
    # The pits' notices number on too.
    pits = [seq_tops([month / f"{d}_pit-notices.jsonl"]) for d in DAYS]
    firsts = [min(e["seq"] for e in _events(month / f"{d}_pit-notices.jsonl")) for d in DAYS]
    assert firsts[1:] == [top["pit:P1"] + 1 for top in pits[:-1]]


@pytest.mark.slow  # ingest, audit and the report's figures of four days: about 5 s
def test_the_history_ingests_with_the_findings_of_its_ground_truth(month: Path, tmp_path):
    con = db.connect(tmp_path / "a.duckdb")
    files = discover([month])[0]
    ingest(con, files, runs.start(con, "ingest", {}))
    res = audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    found = Counter(con.execute(
        "SELECT code, table_id, shoe, round FROM current_findings").fetchall())
    truth = [json.loads(line) for line in (month / "ground_truth.ndjson").read_text().splitlines()]
    planted = Counter((d["code"], d["table"], d["shoe"], d["round"]) for d in truth)
    assert planted and dict(res.skipped) == {}
    assert not planted - found, f"planted but not found: {sorted(planted - found, key=str)}"
    assert not found - planted, f"found but not planted: {sorted(found - planted, key=str)}"
    assert not [k for k in found if k[0] == "log.altered"]
    # Every day planted something, and the ground truth names every day's shoes.
    assert {d["shoe"].split("-")[2] for d in truth if d["shoe"]} == {f"{d:%m%d}" for d in DAYS}

    # The report's 30 days: one point for each simulated day, the dealers over all four.
    conf = config.PropertyConfig(time_zone="America/New_York")
    scope = gather.scope_for(conf, con, shift=f"{DAYS[-1]}/grave")
    context = gather.gather(con, conf, scope)
    con.close()
    points = [(d.day, d.rounds > 0) for d in context["trend_days"]]
    assert points == [(d, True) for d in DAYS]
    assert context["trend_days_with_rounds"] == 4 and context["chart_trend"]
    assert context["span"]["days_with_rounds"] == 4
    first_seen = {r.count.first_ts.date() for r in context["dealers_span"].values()}
    assert min(first_seen) == FIRST + dt.timedelta(days=1)  # 22:00 EST is 03:00 UTC


def test_the_first_day_is_simulates_night_and_continue_equals_days(tmp_path):
    """--days 2 then --continue writes what --days 3 writes; its first day is simulate's."""
    settings = NightSettings(2, 0.5, seed=3, deviation_rate=0.1,
                             games=("mini_baccarat", "punto_banco"), day=FIRST)
    three = simulate_days(tmp_path / "three", settings, 3)
    simulate_days(tmp_path / "two", settings, 2)
    simulate_days(tmp_path / "two", settings, 1, continuing=True)
    one = simulate(tmp_path / "one", 2, 0.5, seed=3, deviation_rate=0.1,
                   games=("mini_baccarat", "punto_banco"), day=FIRST)

    def tree(folder: Path) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in folder.iterdir()}

    assert tree(tmp_path / "two") == tree(tmp_path / "three")
    assert {p.name: p.read_bytes() for p in one.files} == {
        n: b for n, b in tree(tmp_path / "three").items() if n.startswith(f"{FIRST}_")}
    assert three.rounds == sum(1 for p in (tmp_path / "three").glob("*.jsonl")
                               for e in _events(p) if e["type"] == "round_start")


def test_bad_history_arguments(tmp_path, monkeypatch, capsys):
    def run(*args: str):
        return run_cli(monkeypatch, capsys, "simulate", *args)

    r = run("--continue", str(tmp_path / "none"), "--tables", "2", "--hours", "1")
    assert r.code == 2 and f"--continue {tmp_path / 'none'}: no such folder" in r.err
    (tmp_path / "empty").mkdir()
    r = run("--continue", str(tmp_path / "empty"), "--tables", "2", "--hours", "1")
    assert r.code == 2 and "no simulated logs there" in r.err
    r = run("--continue", str(tmp_path / "empty"), "--tables", "2", "--hours", "1",
            "--date", "2026-11-01")
    assert r.code == 2 and "not with --date" in r.err
    r = run("--out", str(tmp_path / "o"), "--tables", "2", "--hours", "1", "--days", "0")
    assert r.code == 2 and "--days must be at least 1" in r.err
    r = run("--out", str(tmp_path / "o"), "--tables", "2", "--hours", "1", "--days", "2",
            "--bulk")
    assert r.code == 2 and "not with --bulk" in r.err
    r = run("--tables", "2", "--hours", "1")
    assert r.code == 2 and "--out is needed" in r.err
    assert not (tmp_path / "o").exists()
