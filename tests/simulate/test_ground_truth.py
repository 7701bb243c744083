"""Ground truth = findings (issue 30): for every `bacc-audit simulate` command line the README
shows, run at a small size, the audit of the logs finds exactly what ground_truth.ndjson
lists (code, table, shoe, round), and each pattern asked for that the night could not plant,
or planted below what the audit's tests detect at that size, is said on stderr and is a
`not_planted` line with its reason, never a finding promised."""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from pathlib import Path

import pytest
from helpers.cli import run_cli

from auditor import config
from auditor.audit.run import audit
from auditor.ingest.paths import discover
from auditor.ingest.run import ingest
from auditor.simulate.planted import simulate
from auditor.store import db, runs

README = Path(__file__).parents[2] / "README.md"
SMALL = {"--tables": 4, "--hours": 1.5, "--days": 2}  # at most these: the test stays cheap
LIVE_SPEED = 1_000_000  # --live: a 1.5-hour night fed in about 5 ms


def readme_commands() -> list[str]:
    """Every `bacc-audit simulate ...` the README shows: the Use block's lines (with their
    continuation), and those quoted in its prose."""
    text = README.read_text()
    lines = re.findall(r"^(bacc-audit simulate [^#\n]*?)\s*(?:#.*)?$", text, re.M)
    lines += re.findall(r"`(bacc-audit simulate [^`]*--out[^`]*)`", text)
    return sorted({" ".join(line.split()) for line in lines})


def small(command: str, out: Path) -> list[str]:
    """The README's command at a small size, writing into `out`."""
    args = shlex.split(command)[2:]
    for i, a in enumerate(args[:-1]):
        if a in SMALL:
            args[i + 1] = str(min(type(SMALL[a])(args[i + 1]), SMALL[a]))
        if a in ("--out", "--continue"):
            args[i + 1] = str(out)
        if a == "--live":  # fed into a spool of the test's own, at once
            args[i + 1] = str(out.parent / "spool")
        if a == "--speed":
            args[i + 1] = str(LIVE_SPEED)
    if "--live" in args and "--out" not in args:  # kept, to read its ground truth
        args += ["--out", str(out)]
    return args


def _truth(folder: Path) -> tuple[Counter, list[dict]]:
    lines = [json.loads(x) for x in (folder / "ground_truth.ndjson").read_text().splitlines()]
    planted = Counter((d["code"], d["table"], d["shoe"], d["round"]) for d in lines
                      if "code" in d)
    return planted, [d for d in lines if "not_planted" in d]


def _found(folder: Path, path: Path) -> Counter:
    """The folder ingested and audited; then its *.jsonl.later files, and the audit again."""
    con = db.connect(path)
    ingest(con, discover([folder])[0], runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    later = sorted(folder.glob("*.jsonl.later"))
    if later:
        ingest(con, later, runs.start(con, "ingest", {}))
        audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    found = Counter(con.execute(
        "SELECT code, table_id, shoe, round FROM current_findings").fetchall())
    con.close()
    return found


def test_the_readme_shows_the_commands_tested():
    commands = readme_commands()
    assert any("--error-prone-dealer" in c for c in commands)
    assert any("--shoe-twice" in c and "--counting-seat" in c for c in commands)
    assert any("--bulk" in c for c in commands) and any("--continue" in c for c in commands)
    assert len(commands) >= 8


@pytest.mark.slow  # each: a small night simulated, ingested and audited, 3-8 s
@pytest.mark.parametrize("command", readme_commands())
def test_every_readme_command_finds_its_ground_truth(command, tmp_path, monkeypatch, capsys):
    out = tmp_path / "sim"
    if "--continue" in command:  # it goes on from a previous simulation's folder
        r = run_cli(monkeypatch, capsys, "simulate", *small(
            command.replace("--continue", "--out"), out))
        assert r.code == 0, r
    r = run_cli(monkeypatch, capsys, "simulate", *small(command, out))
    assert r.code == 0, r
    planted, gaps = _truth(out)
    found = _found(out, tmp_path / "a.duckdb")
    assert not planted - found, f"planted but not found: {sorted(planted - found, key=str)}"
    assert not found - planted, f"found but not planted: {sorted(found - planted, key=str)}"
    # What was not planted is said, on stderr, each with its option and reason.
    told = [line for line in r.err.splitlines() if line.startswith("not planted: ")]
    said = [f"not planted: {g['option']} ({g['not_planted']}): {g['reason']}" for g in gaps]
    if "--continue" in command:  # the folder's lines hold the first run's too
        assert set(told) <= set(said)
    else:
        assert told == said
    for g in gaps:
        assert g["option"] in command and g["reason"]


def test_a_short_night_says_what_it_could_not_plant(tmp_path, monkeypatch, capsys):
    """Issue 30's cases: three tables with --shoe-twice and --counting-seat (no two tables
    alike, no Dragon 7 table), and the error-prone dealer of a short night (below the
    p-chart's power): nothing promised, each said with its reason."""
    r = run_cli(monkeypatch, capsys, "simulate", "--out", str(tmp_path / "sim"), "--tables",
                "3", "--hours", "1", "--deviation-rate", "0.02", "--shoe-twice",
                "--counting-seat", "--error-prone-dealer")
    assert r.code == 0, r
    planted, gaps = _truth(tmp_path / "sim")
    assert {code for code, *_ in planted} & {
        "dealer.error_rate", "play.side_bet_counting", "shoe.repeated_order"} == set()
    assert [(g["kind"], g["not_planted"]) for g in gaps] == [
        ("error_prone_dealer", "dealer.error_rate"),
        ("counting_seat", "play.side_bet_counting"),
        ("shoe_twice", "shoe.repeated_order")]
    dealer, seat, twice = (g["reason"] for g in gaps)
    assert re.fullmatch(r"dealer D\d{4}: \d+ of \d+ rounds with a deviation in shift "
                        r"2026-12-01/grave \(.*binomial tail [0-9.e-]+ against 0\.00135\): "
                        r"below what the audit's p-chart detects at this size; more hours "
                        r"or a higher --deviation-rate", dealer), dealer
    assert seat.startswith("no table with Dragon 7 wagers")
    assert twice.startswith("no two manual-shuffle banking tables alike")
    assert r.err.splitlines() == [
        f"not planted: --error-prone-dealer (dealer.error_rate): {dealer}",
        f"not planted: --counting-seat (play.side_bet_counting): {seat}",
        f"not planted: --shoe-twice (shoe.repeated_order): {twice}"]


@pytest.mark.slow  # a four-hour night audited: about 8 s
def test_a_detectable_dealer_is_promised_and_found(tmp_path):
    """Long enough and at a rate the p-chart sees: dealer.error_rate is in the ground truth
    (the audit's own decision on the simulator's counts), and the audit raises it."""
    r = simulate(tmp_path / "sim", 4, 4, seed=3, deviation_rate=0.05,
                 games=("mini_baccarat", "punto_banco"), error_prone_dealer=True)
    lines = [d for d in r.deviations if d["kind"] == "error_prone_dealer"]
    assert r.not_planted == [] and len(lines) == 1
    found = _found(tmp_path / "sim", tmp_path / "a.duckdb")
    assert found[("dealer.error_rate", None, None, None)] == 1


def test_an_unnotified_change_has_no_notice_and_is_promised_at_each_table(tmp_path):
    """--unnotified-change: pit P1's half-time change is logged at both its tables and nobody
    was given notice of it (no procedure_notice line anywhere), so each table's change is a
    procedure.notice_missing in the ground truth; the audit's finding of it is checked by the
    README's command above."""
    r = simulate(tmp_path / "sim", 2, 1, seed=7, games=("mini_baccarat",),
                 unnotified_change=True)
    events = [json.loads(x) for f in r.files for x in f.read_text().splitlines()]
    assert [(e["table"], e["procedure"]) for e in events if e["type"] == "procedure_change"] == [
        ("MB-01", 2), ("MB-02", 2)]
    assert [e for e in events if e["type"] == "procedure_notice"] == []
    assert [f.name for f in r.files] == ["2026-12-01_MB-01.jsonl", "2026-12-01_MB-02.jsonl"]
    assert r.deviations == [
        {"code": "procedure.notice_missing", "table": t, "shoe": None, "round": None,
         "kind": "notice_missing"} for t in ("MB-01", "MB-02")]
    assert r.not_planted == []


def test_an_unnotified_change_with_no_pit_to_make_it_is_said(tmp_path, monkeypatch, capsys):
    """A night of chemin de fer alone has no pit changing procedure: said, not promised."""
    r = run_cli(monkeypatch, capsys, "simulate", "--out", str(tmp_path / "sim"), "--tables",
                "1", "--hours", "0.5", "--games", "chemin_de_fer", "--unnotified-change")
    assert r.code == 0, r
    planted, gaps = _truth(tmp_path / "sim")
    assert planted == Counter()
    assert gaps == [{"not_planted": "procedure.notice_missing", "kind": "notice_missing",
                     "option": "--unnotified-change", "table": None,
                     "reason": "no NJ mini-baccarat or punto banco pit changing procedure in "
                               "the night (with --lying, a second one: the first carries the "
                               "lies' change)"}]
    assert r.err == f"not planted: --unnotified-change (procedure.notice_missing): " \
                    f"{gaps[0]['reason']}\n"
