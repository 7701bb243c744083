"""`simulate`: a night of N tables with deviations planted at random, deterministic for a seed,
with a ground truth the audit must find exactly (the recall test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditor import config, db, runs
from auditor.audit import audit
from auditor.ingest import ingest
from auditor.simulate import (
    CHEMIN_KINDS,
    GAMES,
    KIND_CODES,
    SimulationResult,
    simulate,
    simulated_night,
    table_kinds,
)

ALL_GAMES = GAMES  # mini_baccarat, punto_banco, chemin_de_fer, nz
TABLE_LEVEL = ("log.", "procedure.", "shoe.")


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
    assert _bytes(a).keys() == _bytes(c).keys()
    for name in _bytes(a):
        assert _bytes(a)[name] != _bytes(c)[name], name


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


def test_ground_truth_agrees_with_the_logs(tmp_path):
    r = simulate(tmp_path, 8, 1, seed=5, deviation_rate=0.2, games=ALL_GAMES)
    truth = [json.loads(line) for line in r.ground_truth.read_text().splitlines()]
    assert truth == r.deviations and len(truth) > 20
    night = simulated_night(8, 1, 5, ALL_GAMES)
    specs = {s.table: s for s in night.tables}
    rounds = {
        (e["table"], e["shoe"], e["round"])
        for p in r.files[:-1]
        for e in _events(p)
        if e["type"] == "round_start"
    }
    where = [(d["table"], d["shoe"], d["round"]) for d in truth]
    assert len(set(where)) == len(where)  # at most one deviation a round
    for d in truth:
        assert set(d) == {"code", "table", "shoe", "round", "kind"}
        assert (d["table"], d["shoe"], d["round"]) in rounds
        assert d["code"] == KIND_CODES[d["kind"]]
        assert d["kind"] in table_kinds(specs[d["table"]])
    # About the rate asked for (a deviation waits for a round that shows it cleanly).
    assert 0.1 * r.rounds < len(truth) < 0.3 * r.rounds


def _audit(result: SimulationResult, path: Path):
    con = db.connect(path)
    ingest(con, result.files, runs.start(con, "ingest", {}))
    res = audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    rows = con.execute("SELECT code, table_id, shoe, round FROM current_findings").fetchall()
    con.close()
    return res, rows


@pytest.mark.parametrize(
    ("seed", "tables", "rate", "all_kinds"),
    [(1, 6, 0.05, False), (2, 16, 0.3, True)],
)
def test_recall_every_planted_deviation_is_found_and_nothing_else(
    tmp_path, seed, tables, rate, all_kinds
):
    r = simulate(tmp_path / "logs", tables, 1, seed=seed, deviation_rate=rate, games=ALL_GAMES)
    res, rows = _audit(r, tmp_path / "a.duckdb")
    assert res.rounds == r.rounds and dict(res.skipped) == {}
    planted = {(d["code"], d["table"], d["shoe"], d["round"]) for d in r.deviations}
    assert planted
    missed = planted - set(rows)
    assert not missed, f"planted but not found: {sorted(missed)}"
    round_level = [row for row in rows if not row[0].startswith(TABLE_LEVEL)]
    at = {(t, s, n) for _, t, s, n in planted}
    stray = [row for row in round_level if (row[1], row[2], row[3]) not in at]
    assert not stray, f"findings on rounds without a planted deviation: {stray}"
    # In fact exactly the planted deviations: no other finding at all, one per round.
    assert sorted(rows) == sorted(planted)
    if all_kinds:
        assert {d["kind"] for d in r.deviations} == set(KIND_CODES)


def test_every_kind_is_planted_across_a_few_seeds(tmp_path):
    """12 tables of the four games: three mini-baccarat layouts, the third with total card
    wagers (five seeds: the no-vigorish layout's kinds are rarer since there are more)."""
    kinds: set[str] = set()
    for seed in (1, 2, 3, 4, 5):
        r = simulate(tmp_path / str(seed), 12, 1, seed=seed, deviation_rate=0.2, games=ALL_GAMES)
        kinds |= {d["kind"] for d in r.deviations}
    assert kinds == set(KIND_CODES)
    assert set(CHEMIN_KINDS) <= kinds
    # Every draw, deal, announcement, settlement and vigorish code has a kind that plants it.
    assert {
        "draw.player_missed", "draw.player_extra", "draw.banker_missed", "draw.banker_extra",
        "deal.order", "announce.total_cards_missing", "announce.total_cards_wrong",
        "settle.unsettled", "vig.missing", "vig.wrong_amount", "vig.not_allowed",
    } <= {KIND_CODES[k] for k in kinds}


def test_cli_simulate(tmp_path, monkeypatch, capsys):
    from auditor import cli

    def run(*args: str) -> int:
        monkeypatch.setattr("sys.argv", ["bacc-audit", *args])
        with pytest.raises(SystemExit) as e:
            cli.main()
        return e.value.code

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


def test_ingesting_the_output_folder_takes_only_the_logs(tmp_path):
    from auditor.ingest import ingest

    r = simulate(tmp_path / "out", tables=2, hours=1, seed=3, deviation_rate=0.1)
    con = db.connect(tmp_path / "a.duckdb")
    result = ingest(con, [tmp_path / "out"], runs.start(con, "ingest", {}))
    assert sorted(f.path.name for f in result.files) == sorted(p.name for p in r.files)
    assert result.quarantined == 0
    con.close()
