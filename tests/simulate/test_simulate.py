"""`simulate`: a night of N tables with deviations planted at random, deterministic for a seed,
with a ground truth the audit must find exactly (the recall test)."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.recall import audited_night
from helpers.rules import panda8_rules

from auditor import config
from auditor.audit.run import audit
from auditor.ingest.run import ingest
from auditor.rules.codes import REGISTRY
from auditor.rules.pack import load_pack
from auditor.simulate.kinds import (
    BANKING_KINDS,
    CHEMIN_KINDS,
    KIND_CODES,
    LIE_KINDS,
    SHOE_KINDS,
    shoe_kinds,
    table_kinds,
)
from auditor.simulate.layout import GAMES, simulated_night
from auditor.simulate.output import SimulationResult
from auditor.simulate.planted import simulate
from auditor.store import db, runs

ALL_GAMES = GAMES  # mini_baccarat, punto_banco, chemin_de_fer, nz
ROUND_KINDS = set(BANKING_KINDS) | set(CHEMIN_KINDS)
# No shipped pack makes "panda 8" due; a house pack may, and then it is planted too.
@pytest.fixture
def house_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shipped packs, NJ mini-baccarat announcing panda 8 hands at no-vigorish tables."""
    return panda8_rules(tmp_path, monkeypatch)


def _bytes(result: SimulationResult) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in [*result.files, result.ground_truth]}


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_same_seed_same_bytes_another_seed_other_bytes(tmp_path):
    a = simulate(tmp_path / "a", 4, 0.5, seed=7, deviation_rate=0.2, games=ALL_GAMES)
    b = simulate(tmp_path / "b", 4, 0.5, seed=7, deviation_rate=0.2, games=ALL_GAMES)
    c = simulate(tmp_path / "c", 4, 0.5, seed=8, deviation_rate=0.2, games=ALL_GAMES)
    assert _bytes(a) == _bytes(b)
    assert a.deviations == b.deviations and a.rounds == b.rounds and a.events == b.events
    # The table files and the ground truth; which tables have a file resent is drawn too.
    logs = {name for name in _bytes(a) if ".resent." not in name}
    assert logs == {name for name in _bytes(c) if ".resent." not in name}
    for name in logs:
        assert _bytes(a)[name] != _bytes(c)[name], name


@pytest.mark.slow
def test_tables_games_pits_and_notices(tmp_path):
    r = simulate(tmp_path, 9, 1, seed=3, deviation_rate=0.0, games=ALL_GAMES)
    assert r.tables == 9 and len(r.files) == 10  # 9 tables and the pits' notices
    assert r.deviations == [] and r.ground_truth.read_text() == ""
    opens = [_events(p)[0] for p in r.files[:-1]]
    games = {(e["game"], e["jurisdiction"]) for e in opens}
    assert games == {
        ("mini_baccarat", "NJ"), ("punto_banco", "NJ"), ("chemin_de_fer", "NJ"),
        ("mini_baccarat", "NZ"),
    }
    # One procedure per pit; chemin de fer and NZ tables declare none.
    by_pit: dict[str, set] = {}
    for e in opens:
        by_pit.setdefault(e["pit"], set()).add(e.get("procedure"))
    assert all(len(p) == 1 for p in by_pit.values())
    notices = _events(r.files[-1])
    assert notices and {n["type"] for n in notices} == {"procedure_notice"}
    changed = {
        e["table"] for p in r.files[:-1] for e in _events(p) if e["type"] == "procedure_change"
    }
    assert changed == {t for n in notices for t in n["tables"]}
    assert r.events == sum(len(_events(p)) for p in r.files)
    assert r.rounds == sum(
        1 for p in r.files[:-1] for e in _events(p) if e["type"] == "round_start"
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown games"):
        simulated_night(2, 1, 1, ("blackjack",))
    with pytest.raises(ValueError, match="hours"):
        simulated_night(2, 14, 1, ("nz",))
    with pytest.raises(ValueError, match="tables"):
        simulated_night(0, 1, 1, ("nz",))


@pytest.mark.slow
def test_ground_truth_agrees_with_the_logs(tmp_path):
    r = simulate(tmp_path, 8, 1, seed=5, deviation_rate=0.2, games=ALL_GAMES)
    truth = [json.loads(line) for line in r.ground_truth.read_text().splitlines()]
    assert truth == r.deviations and len(truth) > 20
    night = simulated_night(8, 1, 5, ALL_GAMES)
    specs = {s.table: s for s in night.tables}
    events = [e for p in r.files for e in _events(p)]
    rounds = {(e["table"], e["shoe"], e["round"]) for e in events if e["type"] == "round_start"}
    shoes = {(e["table"], e["shoe"]) for e in events if e["type"] == "shoe_start"}
    for d in truth:
        assert set(d) == {"code", "table", "shoe", "round", "kind"}
        assert d["code"] == KIND_CODES[d["kind"]]
        if d["kind"] in ROUND_KINDS:
            assert (d["table"], d["shoe"], d["round"]) in rounds
            assert d["kind"] in table_kinds(specs[d["table"]])
        elif d["kind"] in SHOE_KINDS:
            assert (d["table"], d["shoe"]) in shoes
            assert d["kind"] in shoe_kinds(specs[d["table"]])
    # At most one planted deviation of a code a round.
    where = [(d["code"], d["table"], d["shoe"], d["round"]) for d in truth
             if d["kind"] in ROUND_KINDS]
    assert len(set(where)) == len(where)
    # About the rate asked for (a deviation waits for a round that shows it cleanly).
    assert 0.1 * r.rounds < len(where) < 0.3 * r.rounds


def _audit(result: SimulationResult, path: Path):
    """The night ingested and audited; then its `later` files (a lying night's), and the
    audit again: the ground truth is what that stands on."""
    con = db.connect(path)
    ingest(con, result.files, runs.start(con, "ingest", {}))
    res = audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    if result.later:
        ingest(con, result.later, runs.start(con, "ingest", {}))
        audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    con.close()
    return res, _findings(path)


def _findings(path: Path) -> list[tuple]:
    """The audit database's standing findings as (code, table, shoe, round), once each cites
    its table's pack."""
    con = db.connect(path)
    rows = con.execute("SELECT code, table_id, shoe, round FROM current_findings").fetchall()
    _assert_each_finding_cites_its_tables_pack(con)
    con.close()
    return rows


def _assert_each_finding_cites_its_tables_pack(con) -> None:
    """Every finding cites the provision its own table's rule pack gives for its code (a
    pit finding: those of the packs of the tables it names); the log codes cite the format."""
    opened = dict(con.execute(
        "SELECT table_id, arg_max(jurisdiction || ' ' || game, seq) FROM events "
        "WHERE type = 'table_open' GROUP BY ALL"
    ).fetchall())
    packs = {t: load_pack(*jg.split(" ")) for t, jg in opened.items()}
    checked: Counter[str] = Counter()
    for code, table, evidence, rule in con.execute(
        "SELECT code, table_id, evidence, rule FROM current_findings"
    ).fetchall():
        if not REGISTRY[code].games:
            assert rule == REGISTRY[code].rule, code
            continue
        tables = [table] if table else json.loads(evidence)["tables"]
        assert all(packs[t].can_raise(code) for t in tables), (code, tables)
        assert rule == "; ".join(dict.fromkeys(packs[t].citations[code] for t in tables))
        checked[code] += 1
    assert checked


# (seed, tables, hours, rate, games): a quiet night, and busy ones long enough for shoes to
# reach their cutting card and for automated shufflers to deal several shoes.
# Between them they plant every kind (the seeds are chosen so; see the test below).
RECALL_RUNS = [
    (4, 6, 1, 0.05, ALL_GAMES),
    (1, 16, 2.5, 0.3, ALL_GAMES),
    (5, 8, 3, 0.3, ("mini_baccarat", "punto_banco")),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("seed", "tables", "hours", "rate", "games"),
    # The busy 16-table night takes seconds: slow (the full run still has it).
    [pytest.param(*run, marks=pytest.mark.slow) if run[1] == 16 else run for run in RECALL_RUNS],
)
def test_recall_every_planted_deviation_is_found_and_nothing_else(
    tmp_path, tmp_path_factory, house_rules, seed, tables, hours, rate, games
):
    """The night and its batch audit are made once a run (helpers/recall.py): the
    every-code test of tests/jobs/test_watch.py feeds the same nights to a watch."""
    audited = audited_night(tmp_path_factory, panda8=True, seed=seed, tables=tables,
                            hours=hours, rate=rate, games=games)
    r, res = audited.night, audited.result
    rows = _findings(audited.database(tmp_path / "a.duckdb"))
    assert res.rounds == r.rounds and dict(res.skipped) == {}
    planted = Counter((d["code"], d["table"], d["shoe"], d["round"]) for d in r.deviations)
    assert planted
    found = Counter(rows)
    missed = planted - found
    assert not missed, f"planted but not found: {sorted(missed.items(), key=str)}"
    stray = found - planted
    assert not stray, f"found but not planted: {sorted(stray.items(), key=str)}"


@pytest.mark.slow
def test_recall_of_the_shoe_lies_among_a_nights_deviations(tmp_path, house_rules):
    """Issue 28's shoe lies planted with their ground truth (the card too many, the lie, the
    raised remaining), among the night's other deviations: found exactly, nothing else."""
    r = simulate(tmp_path / "logs", 4, 2, seed=3, deviation_rate=0.05, games=ALL_GAMES,
                 phantom_shoe=True, shoe_reopened=True)
    kinds = Counter(d["kind"] for d in r.deviations)
    assert kinds["phantom_shoe"] == kinds["earlier_shoe"] == 1
    assert kinds["remaining_raised"] == 2
    res, rows = _audit(r, tmp_path / "a.duckdb")
    assert res.rounds == r.rounds and dict(res.skipped) == {}
    planted = Counter((d["code"], d["table"], d["shoe"], d["round"]) for d in r.deviations)
    found = Counter(rows)
    assert planted - found == Counter() and found - planted == Counter()


@pytest.mark.slow
def test_every_code_is_planted_across_the_recall_runs(tmp_path, tmp_path_factory, house_rules):
    """The recall runs between them plant every kind, and so every code of the registry."""
    kinds: set[str] = set()
    for seed, tables, hours, rate, games in RECALL_RUNS:  # the recall test's own nights
        r = audited_night(tmp_path_factory, panda8=True, seed=seed, tables=tables,
                          hours=hours, rate=rate, games=games).night
        kinds |= {d["kind"] for d in r.deviations}
    # The dealer, seat and shoe-order patterns are planted only when asked (tests/replay/'s
    # test_dealers.py, test_sidebets.py and test_integrity.py find them).
    r = simulate(tmp_path / "dealer", 8, 2, seed=3, deviation_rate=0.03, games=ALL_GAMES,
                 error_prone_dealer=True, counting_seat=True)
    kinds |= {d["kind"] for d in r.deviations}
    r = simulate(tmp_path / "orders", 6, 3, seed=2, games=("mini_baccarat", "punto_banco"),
                 shoe_twice=True, unshuffled=True)
    kinds |= {d["kind"] for d in r.deviations}
    # So is the counting seat (tests/replay/test_sidebets.py finds it).
    r = simulate(tmp_path / "counter", 2, 2, seed=4, games=("mini_baccarat",),
                 counting_seat=True)
    kinds |= {d["kind"] for d in r.deviations}
    # And the shoe lies (issue 28; tests/audit/test_shoe_lies.py edits a night by hand).
    r = simulate(tmp_path / "lies", 2, 2, seed=1, games=("mini_baccarat",),
                 phantom_shoe=True, shoe_reopened=True)
    kinds |= {d["kind"] for d in r.deviations}
    # And the logs' lies (issue 28; found by the test below and tests/jobs/test_watch.py).
    r = simulate(tmp_path / "lying", *LYING_NIGHT[1:3], seed=LYING_NIGHT[0], lying=True)
    kinds |= {d["kind"] for d in r.deviations}
    assert kinds == set(KIND_CODES)
    assert {KIND_CODES[k] for k in kinds} == set(REGISTRY)


# (seed, tables, hours): the lying night (one table per lie, on a small night).
LYING_NIGHT = (1, 6, 2)


@pytest.mark.slow
@pytest.mark.parametrize("rate", [0.0, 0.05])
def test_recall_a_lying_night_finds_each_lie_and_the_deviation_it_hid(tmp_path, rate):
    """`simulate(lying=True)`: every lie is found by its code, and every deviation a lie
    tried to hide stands at its own severity; nothing else is found. The files delivered
    after the night's audit are left out of `ingest FOLDER`."""
    seed, tables, hours = LYING_NIGHT
    r = simulate(tmp_path / "logs", tables, hours, seed=seed, deviation_rate=rate, lying=True)
    lies = {d["kind"] for d in r.deviations} & set(LIE_KINDS)
    assert lies == set(LIE_KINDS)
    hidden = [d for d in r.deviations if "hidden_by" in d]
    # stamped_ahead hides nothing a batch audit judges (it would close a day early live).
    assert {d["hidden_by"] for d in hidden} == set(LIE_KINDS) - {"stamped_ahead"}
    assert {(d["code"], d["severity"]) for d in hidden} == {
        ("vig.wrong_amount", "major"), ("draw.banker_missed", "critical"),
        ("procedure.notice_late", "major")}
    assert [p.name.endswith(".jsonl.later") for p in r.later] == [True, True, True]
    from auditor.ingest.paths import discover
    assert sorted(discover([tmp_path / "logs"])[0]) == sorted(r.files)
    res, rows = _audit(r, tmp_path / "a.duckdb")
    assert res.rounds == r.rounds and dict(res.skipped) == {}
    planted = Counter((d["code"], d["table"], d["shoe"], d["round"]) for d in r.deviations)
    found = Counter(rows)
    assert not planted - found, f"planted but not found: {sorted(planted - found, key=str)}"
    assert not found - planted, f"found but not planted: {sorted(found - planted, key=str)}"
    con = db.connect(tmp_path / "a.duckdb")
    severity = {(c, t, s, n): v for c, t, s, n, v in con.execute(
        "SELECT code, table_id, shoe, round, severity FROM current_findings").fetchall()}
    con.close()
    for d in hidden:
        assert severity[(d["code"], d["table"], d["shoe"], d["round"])] == d["severity"], d


def test_cli_simulate(tmp_path, monkeypatch, capsys):
    from auditor.cli import app as cli

    def run(*args: str) -> int:
        monkeypatch.setattr("sys.argv", ["bacc-audit", *args])
        with pytest.raises(SystemExit) as e:
            cli.main()
        return int(e.value.code or 0)

    code = run(
        "simulate", "--out", str(tmp_path), "--tables", "3", "--hours", "0.5", "--seed", "4",
        "--deviation-rate", "0.1", "--games", "mini_baccarat,nz",
    )
    text = capsys.readouterr().out
    assert code in (0, None)
    assert "ground_truth.ndjson" in text and "rounds/s" in text
    assert (tmp_path / "2026-12-01_NZ-01.jsonl").is_file()
    assert not list(tmp_path.glob("*CF-*"))
    assert run("simulate", "--out", str(tmp_path), "--tables", "2", "--hours", "1",
               "--games", "craps") == 2


@pytest.mark.slow
def test_ingesting_the_output_folder_takes_only_the_logs(tmp_path):
    from auditor.ingest.run import ingest

    r = simulate(tmp_path / "out", tables=2, hours=1, seed=3, deviation_rate=0.1)
    con = db.connect(tmp_path / "a.duckdb")
    result = ingest(con, [tmp_path / "out"], runs.start(con, "ingest", {}))
    assert sorted(f.path.name for f in result.files) == sorted(p.name for p in r.files)
    assert result.quarantined == sum(d["code"] == "log.malformed" for d in r.deviations)
    con.close()


def test_log_deviations_are_where_the_ground_truth_says(tmp_path):
    r = simulate(tmp_path, 6, 1, seed=2, deviation_rate=0.5, games=ALL_GAMES)
    kinds = Counter(d["kind"] for d in r.deviations)
    assert kinds["bad_line"] and kinds["seq_skipped"] and kinds["resent_changed"]
    by_name = {p.name: p for p in r.files}
    for d in r.deviations:
        if d["kind"] == "bad_line":  # the round_start without its offset, then the real one
            lines = by_name[f"2026-12-01_{d['table']}.jsonl"].read_text().splitlines()
            bad = [i for i, line in enumerate(lines) if json.loads(line)["ts"][-6:-5] not in "+-"]
            assert len(bad) == 1
            e, again = json.loads(lines[bad[0]]), json.loads(lines[bad[0] + 1])
            assert (e["type"], e["shoe"], e["round"]) == ("round_start", d["shoe"], d["round"])
            assert e["seq"] == again["seq"] and again["ts"].startswith(e["ts"])
        if d["kind"] == "seq_skipped":
            seqs = [e["seq"] for e in _events(by_name[f"2026-12-01_{d['table']}.jsonl"])]
            assert seqs[-1] == seqs[-2] + 2
    resent = sorted(p for p in r.files if ".resent." in p.name)
    assert len(resent) == kinds["resent_changed"]
    for path in resent:  # after its table's file in name order, one event changed
        table_file = path.with_name(path.name.replace(".resent", ""))
        assert sorted([table_file.name, path.name])[0] == table_file.name
        original = {e["seq"]: e for e in _events(table_file)}
        changed = [e for e in _events(path) if original[e["seq"]] != e]
        assert [e["type"] for e in changed] == ["pay"]


def test_payments_show_the_order_only_when_procedures_differ():
    from auditor.simulate.orders import shows_order

    def lines(*moves: tuple[str, int]) -> list[str]:
        return [json.dumps({"type": kind, "seat": seat}) for kind, seat in moves]

    one_seat = lines(("pay", 5), ("vig", 5))
    assert shows_order(one_seat, 1) == "none"
    assert shows_order(lines(("pay", 7), ("pay", 4)), 3) == "none"  # no vigorish
    by_seat = lines(("pay", 7), ("vig", 7), ("pay", 4), ("vig", 4))
    assert shows_order(by_seat, 3) == "declared" and shows_order(by_seat, 1) == "other"
    # A side wager paid at another seat: procedures 1 and 3 give the same order.
    side = lines(("pay", 5), ("pay", 1), ("vig", 1))
    assert shows_order(side, 1) == shows_order(side, 3) == "declared"


# --- the output folder and the gaming day (issue 19) ----------------------------------------


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_cli_simulate_refuses_a_folder_that_is_not_empty(tmp_path, monkeypatch, capsys):
    out = tmp_path / "sim"
    out.mkdir()
    (out / "2026-12-01_MB-01.jsonl").write_text('{"old": true}\n')
    (out / "notes.txt").write_text("mine\n")
    before = _tree(out)
    r = run_cli(monkeypatch, capsys, "simulate", "--out", str(out), "--tables", "2",
                "--hours", "0.5", "--games", "mini_baccarat")
    assert r.code == 2, r
    assert r.err == (
        f"error: {out} is not empty: simulated logs would mix with what is there; choose an "
        "empty or new folder, or add --replace to remove the logs and ground truth already "
        "there (other files are kept)\n"
    )
    assert r.out == ""
    assert _tree(out) == before  # nothing written, nothing removed
    # A file is not a folder; a bad --date is refused before anything is touched.
    r = run_cli(monkeypatch, capsys, "simulate", "--out", str(out / "notes.txt"), "--tables",
                "2", "--hours", "0.5")
    assert (r.code, r.err) == (
        2, f"error: {out / 'notes.txt'} is a file; --out takes a folder to write the logs into\n")
    r = run_cli(monkeypatch, capsys, "simulate", "--out", str(out), "--tables", "2", "--hours",
                "0.5", "--replace", "--date", "2026-02-30")
    assert (r.code, r.err) == (
        2, "error: --date: a date must look like 2026-11-28, not '2026-02-30'\n")
    # --replace with arguments the generator refuses: the old logs stay.
    r = run_cli(monkeypatch, capsys, "simulate", "--out", str(out), "--tables", "0", "--hours",
                "0.5", "--replace")
    assert (r.code, r.err) == (2, "error: tables must be at least 1\n")
    assert _tree(out) == before


def test_cli_simulate_replace_removes_only_what_a_simulation_writes(
    tmp_path, monkeypatch, capsys
):
    out = tmp_path / "sim"
    (out / "keep").mkdir(parents=True)
    for name in ("2026-11-30_MB-09.jsonl", "2026-11-30_MB-09.resent.jsonl",
                 "2026-11-30_NZ-01.jsonl.gz", "ground_truth.ndjson"):
        (out / name).write_text("old\n")
    kept = {"notes.txt": b"mine\n", "property.toml": b"[property]\n",
            "ground_truth.ndjson.bak": b"old\n", "keep/a.jsonl": b"in a subfolder\n"}
    for name, data in kept.items():
        (out / name).write_bytes(data)
    r = run_cli(monkeypatch, capsys, "simulate", "--out", str(out), "--tables", "3", "--hours",
                "1", "--seed", "2", "--deviation-rate", "0.3", "--games", "mini_baccarat,nz",
                "--replace")
    assert r.code == 0, r
    tree = _tree(out)
    for name, data in kept.items():
        assert tree.pop(name) == data, name
    # What is left is exactly this run's output: its logs (as printed) and its ground truth.
    printed = {Path(line).name for line in r.out.splitlines()[:-1]}
    assert set(tree) == printed and "ground_truth.ndjson" in printed
    assert all(name.startswith("2026-12-01_") for name in printed - {"ground_truth.ndjson"})
    truth = [json.loads(line) for line in tree["ground_truth.ndjson"].splitlines()]
    assert truth and f"{len(truth)} deviations planted" in r.out
    # The same run into a new folder writes the same bytes: nothing old leaked in.
    fresh = simulate(tmp_path / "fresh", 3, 1, seed=2, deviation_rate=0.3,
                     games=("mini_baccarat", "nz"))
    assert _bytes(fresh) == tree


@pytest.mark.slow
def test_cli_simulate_date_names_the_gaming_day(tmp_path, monkeypatch, capsys):
    out = tmp_path / "sim"
    r = run_cli(monkeypatch, capsys, "simulate", "--out", str(out), "--tables", "4", "--hours",
                "0.5", "--seed", "3", "--deviation-rate", "0.2", "--games",
                "mini_baccarat,punto_banco", "--date", "2027-02-14")
    assert r.code == 0, r
    logs = sorted(p.name for p in out.glob("*.jsonl"))
    assert logs and all(name.startswith("2027-02-14_") for name in logs)
    events = [e for name in logs for e in _events(out / name)]
    # Open from 22:00 for half an hour: the night is on the 14th; only a cut night's file
    # goes on with the table's next opening, the next morning.
    night = [e for e in events if e["ts"][:11] == "2027-02-14T"]
    morning = [e for e in events if e not in night]
    assert len(night) > 100
    assert {(e["type"], e["ts"]) for e in morning} <= {
        ("table_open", "2027-02-15T06:30:00.000-05:00")}
    assert min(e["ts"] for e in events if e["type"] == "table_open").startswith(
        "2027-02-14T22:00")
    shoes = {e["shoe"] for e in events if "shoe" in e}
    assert shoes and all("-0214-" in s for s in shoes)
    # The default day is the one the help names, and only the dates differ from it.
    default = simulate(tmp_path / "default", 4, 0.5, seed=3, deviation_rate=0.2,
                       games=("mini_baccarat", "punto_banco"))
    assert default.files[0].name.startswith("2026-12-01_")
    for p in default.files:
        moved = p.read_text().replace("2026-12-01", "2027-02-14").replace("-1201-", "-0214-")
        moved = moved.replace("2026-12-02T", "2027-02-15T")  # a cut night's next opening
        assert (out / p.name.replace("2026-12-01", "2027-02-14")).read_text() == moved, p.name


def test_cli_simulate_help_tells_both_generators_apart():
    import typer.main

    from auditor.cli import app as cli

    command = typer.main.get_command(cli.app).commands["simulate"]  # type: ignore[attr-defined]
    helps = {p.name: p.help for p in command.params}
    assert helps["hours"] == (
        "Hours each table is open: from 22:00 on --date (at most 13), or with --bulk from "
        "06:00 (at most 24)."
    )
    assert "default 2026-12-01" in helps["date"]
    assert "*.jsonl, *.jsonl.gz, *.jsonl.later and ground_truth.ndjson" in helps["replace"]
    assert "nothing else is touched" in helps["replace"]
    # The help's figures are the generators' own.
    from auditor.simulate import bulk, layout

    told = (layout.SIM_DATE, bulk.BULK_DATE, layout.SIM_OPENS, layout.MAX_HOURS,
            bulk.MAX_HOURS, bulk.BULK_OPENS)
    assert told == (dt.date(2026, 12, 1), dt.date(2026, 12, 1), "22:00", 13, 24, dt.time(6))
