"""`simulate_bulk`: the vectorised generator must write what the reference generator writes
(shapes, rules, shoes) and a ground truth the audit finds exactly."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from helpers.cli import run_cli

from auditor import config
from auditor.audit.run import audit
from auditor.ingest.run import ingest
from auditor.rules.cards import RANKS, SUITS, card_value
from auditor.rules.draw import play_round
from auditor.rules.pack import load_pack
from auditor.simulate.bulk import BULK_CODES, BULK_DATE, simulate_bulk
from auditor.simulate.bulk_deal import BULK_KINDS, SHOE_CARDS
from auditor.simulate.kinds import KIND_CODES
from auditor.simulate.output import SimulationResult
from auditor.simulate.planted import simulate
from auditor.store import db, runs

DRAW_KINDS = {"banker_missed", "player_extra", "player_missed", "banker_extra"}


def _bytes(r: SimulationResult) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in [*r.files, r.ground_truth]}


def _events(r: SimulationResult) -> list[dict]:
    return [json.loads(line) for p in r.files for line in p.read_text().splitlines()]


def _audit(r: SimulationResult, path: Path) -> tuple[int, int, list[tuple]]:
    con = db.connect(path)
    quarantined = ingest(con, r.files, runs.start(con, "ingest", {})).quarantined
    res = audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    rows = con.execute("SELECT code, table_id, shoe, round FROM current_findings").fetchall()
    con.close()
    assert dict(res.skipped) == {}
    return quarantined, res.rounds, rows


def test_same_seed_same_bytes_whatever_the_batches_another_seed_other_bytes(tmp_path):
    a = simulate_bulk(tmp_path / "a", 5, 1, seed=7, deviation_rate=0.1)
    b = simulate_bulk(tmp_path / "b", 5, 1, seed=7, deviation_rate=0.1, batch_tables=2)
    c = simulate_bulk(tmp_path / "c", 5, 1, seed=8, deviation_rate=0.1)
    assert _bytes(a) == _bytes(b)
    assert (a.rounds, a.events, a.deviations) == (b.rounds, b.events, b.deviations)
    assert _bytes(a).keys() == _bytes(c).keys()
    for name in _bytes(a):
        assert _bytes(a)[name] != _bytes(c)[name], name
    assert a.events == len(_events(a))


def _shape(e: dict) -> tuple[str, str]:
    return e["type"], e.get("kind", "") if e["type"] == "announce" else ""


def test_every_event_has_the_reference_keys_order_and_value_types(tmp_path):
    ref = simulate(tmp_path / "ref", 2, 2.5, seed=2, deviation_rate=0.0, games=["mini_baccarat"])
    bulk = simulate_bulk(tmp_path / "bulk", 3, 2, seed=2, deviation_rate=0.1)
    ref_keys: dict[tuple[str, str], list[str]] = {}
    ref_types: dict[tuple[tuple[str, str], str], set[type]] = defaultdict(set)
    for e in _events(ref):
        ref_keys.setdefault(_shape(e), list(e))
        assert ref_keys[_shape(e)] == list(e)  # the reference is consistent itself
        for k, v in e.items():
            ref_types[_shape(e), k].add(type(v))
    seen = set()
    for e in _events(bulk):
        shape = _shape(e)
        seen.add(shape)
        assert list(e) == ref_keys[shape], shape
        for k, v in e.items():
            assert type(v) in ref_types[shape, k] or (k == "amount" and type(v) in (int, str)), (
                shape, k, v)
    assert {t for t, _ in seen} == {
        "table_open", "shoe_start", "burn", "round_start", "wager", "no_more_bets", "card",
        "announce", "collect", "pay", "push", "vig", "round_end", "cut_card", "shoe_end",
        "table_close", "procedure_change", "procedure_notice",
    }
    first = _events(bulk)[0]
    assert first["ts"] == "2026-12-01T06:00:00.000-05:00"
    assert (first["game"], first["variant"], first["jurisdiction"]) == (
        "mini_baccarat", "standard", "NJ")


@pytest.mark.slow
def test_clean_day_audits_with_no_finding_and_full_shoes(tmp_path):
    r = simulate_bulk(tmp_path / "logs", 4, 4, seed=3)
    quarantined, rounds, rows = _audit(r, tmp_path / "a.duckdb")
    assert quarantined == 0 and rounds == r.rounds > 0
    assert rows == [] and r.deviations == [] and r.ground_truth.read_text() == ""
    # Every shoe is 8 whole decks: burned + dealt + remaining, each card 8 times at most.
    shoes: dict[str, Counter] = defaultdict(Counter)
    remaining: dict[str, int] = {}
    pits: dict[str, set] = defaultdict(set)
    for e in _events(r):
        if e["type"] == "burn":
            shoes[e["shoe"]].update(e["cards"])
        elif e["type"] == "card":
            shoes[e["shoe"]][e["card"]] += 1
        elif e["type"] == "shoe_end":
            remaining[e["shoe"]] = e["remaining"]
        elif e["type"] == "table_open":
            pits[e["pit"]].add(e["procedure"])
    assert len(shoes) >= 8 and shoes.keys() == remaining.keys()
    for shoe, cards in shoes.items():
        assert set(cards) <= {r + s for r in RANKS for s in SUITS}
        assert max(cards.values()) <= 8
        assert sum(cards.values()) + remaining[shoe] == SHOE_CARDS
    assert all(len(p) == 1 for p in pits.values())  # one procedure per pit
    # Each pit changes procedure at half time on written notices 45 minutes before.
    notices = [e for e in _events(r) if e["type"] == "procedure_notice"]
    changes = [e for e in _events(r) if e["type"] == "procedure_change"]
    assert r.files[-1].name == "2026-12-01_pit-notices.jsonl"
    assert len(notices) == 2 and {n["recipient"] for n in notices} == {"division", "surveillance"}
    assert notices[0]["effective"] == "2026-12-01T08:00:00-05:00"
    assert notices[0]["ts"] == "2026-12-01T07:15:00.000-05:00"
    assert sorted(c["table"] for c in changes) == notices[0]["tables"]
    assert {(c["ts"], c["procedure"]) for c in changes} == {
        ("2026-12-01T08:00:00.000-05:00", notices[0]["procedure"])}
    assert notices[0]["procedure"] not in pits["P1"]


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "rate"), [(1, 0.05), (2, 0.3), (3, 0.3)])
def test_the_audit_finds_exactly_the_ground_truth(tmp_path, seed, rate):
    r = simulate_bulk(tmp_path / "logs", 8, 3, seed=seed, deviation_rate=rate)
    quarantined, rounds, rows = _audit(r, tmp_path / "a.duckdb")
    assert quarantined == 0 and rounds == r.rounds
    truth = [json.loads(line) for line in r.ground_truth.read_text().splitlines()]
    assert truth == r.deviations
    planted = {(d["code"], d["table"], d["shoe"], d["round"]) for d in truth}
    assert len(planted) == len(truth) > 0
    assert sorted(rows) == sorted(planted)
    assert all(d["code"] == KIND_CODES[d["kind"]] == BULK_CODES[d["kind"]] for d in truth)
    assert 0.5 * rate * r.rounds < len(truth) < 1.5 * rate * r.rounds


def test_every_bulk_kind_is_planted_across_two_seeds(tmp_path):
    kinds: set[str] = set()
    for seed in (1, 2):
        kinds |= {d["kind"] for d in simulate_bulk(tmp_path / str(seed), 8, 3, seed=seed,
                                                   deviation_rate=0.3).deviations}
    assert kinds == set(BULK_KINDS)


def test_third_cards_follow_the_draw_rules_except_the_planted_errors(tmp_path):
    r = simulate_bulk(tmp_path, 6, 3, seed=4, deviation_rate=0.1)
    pack = load_pack("NJ", "mini_baccarat")
    planted = {(d["table"], d["shoe"], d["round"]): d["kind"] for d in r.deviations}
    rounds: dict[tuple, list[dict]] = defaultdict(list)
    for e in _events(r):
        if e["type"] == "card":
            rounds[e["table"], e["shoe"], e["round"]].append(e)
    assert len(rounds) == r.rounds
    wrong: Counter[str] = Counter()
    for key, cards in rounds.items():
        assert [c["to"] for c in cards[:4]] == ["player", "banker", "player", "banker"]
        dealt = (sum(c["to"] == "player" for c in cards), sum(c["to"] == "banker" for c in cards))
        values = [card_value(c["card"]) for c in cards]
        # The rules' hands from these cards in shoe order (the reference decides with them).
        expected = play_round(pack, [*values, 0, 0])[:2]
        kind = planted.get(key, "")
        if kind in DRAW_KINDS:
            wrong[kind] += 1
            assert dealt != expected, (key, kind)
            hand = 0 if kind.startswith("player") else 1
            assert dealt[hand] - expected[hand] == (1 if kind.endswith("extra") else -1), key
        else:
            assert dealt == expected, key
    assert set(wrong) == DRAW_KINDS & set(planted.values()) and wrong


@pytest.mark.slow
def test_tables_without_time_for_a_round_open_and_close(tmp_path):
    r = simulate_bulk(tmp_path / "logs", 8, 0.055, seed=1)  # 3.3 minutes: some tables play
    per_table = [[json.loads(line)["type"] for line in p.read_text().splitlines()]
                 for p in r.files]
    assert ["table_open", "table_close"] in per_table
    assert any("round_start" in types for types in per_table)
    quarantined, rounds, rows = _audit(r, tmp_path / "a.duckdb")
    assert (quarantined, rounds, rows) == (0, r.rounds, [])


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="tables"):
        simulate_bulk(tmp_path, 0, 1)
    with pytest.raises(ValueError, match="hours"):
        simulate_bulk(tmp_path, 1, 24.5)
    with pytest.raises(ValueError, match="deviation_rate"):
        simulate_bulk(tmp_path, 1, 1, deviation_rate=1.5)


def test_cli_simulate_bulk(tmp_path, monkeypatch, capsys):
    from auditor.cli import app as cli

    monkeypatch.setattr("sys.argv", ["bacc-audit", "simulate", "--bulk", "--out", str(tmp_path),
                                     "--tables", "5", "--hours", "0.5", "--deviation-rate",
                                     "0.1"])
    with pytest.raises(SystemExit) as e:
        cli.main()
    text = capsys.readouterr().out
    assert e.value.code in (0, None)
    assert "5 tables" in text and "rounds/s" in text and "ground_truth.ndjson" in text
    assert sorted(p.name for p in tmp_path.glob("*.jsonl")) == [
        f"2026-12-01_MB-000{i}.jsonl" for i in range(1, 6)]


# --- the output folder and the gaming day (issue 19) ----------------------------------------


def test_cli_simulate_bulk_refuses_a_folder_that_is_not_empty_unless_replace(
    tmp_path, monkeypatch, capsys
):
    out = tmp_path / "sim"
    out.mkdir()
    old = {"2026-12-01_MB-0009.jsonl": b'{"old":1}\n', "ground_truth.ndjson": b"",
           "2026-11-30_MB-0001.jsonl.gz": b"old"}
    kept = {"notes.txt": b"mine\n", "summary.json": b"{}\n"}
    for name, data in (old | kept).items():
        (out / name).write_bytes(data)
    args = ("simulate", "--bulk", "--out", str(out), "--tables", "5", "--hours", "2",
            "--deviation-rate", "0.1")
    r = run_cli(monkeypatch, capsys, *args)
    assert r.code == 2, r
    assert r.err.startswith(f"error: {out} is not empty: simulated logs would mix")
    assert r.err.count("\n") == 1 and r.out == ""
    assert {p.name: p.read_bytes() for p in out.iterdir()} == old | kept  # nothing written

    r = run_cli(monkeypatch, capsys, *args, "--replace")
    assert r.code == 0, r
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    for name, data in kept.items():
        assert after.pop(name) == data, name
    assert sorted(after) == sorted(
        [f"2026-12-01_MB-000{i}.jsonl" for i in range(1, 6)]
        + ["2026-12-01_pit-notices.jsonl", "ground_truth.ndjson"])
    truth = after["ground_truth.ndjson"].decode().splitlines()
    assert truth and f"{len(truth)} deviations planted" in r.out
    fresh = simulate_bulk(tmp_path / "fresh", 5, 2, seed=1, deviation_rate=0.1)
    assert _bytes(fresh) == after  # the old MB-0009 log is gone, nothing else leaked in


def test_date_moves_the_day_and_nothing_else(tmp_path, monkeypatch, capsys):
    r = run_cli(monkeypatch, capsys, "simulate", "--bulk", "--out", str(tmp_path / "d"),
                "--tables", "5", "--hours", "3", "--deviation-rate", "0.1", "--date",
                "2027-02-14")
    assert r.code == 0, r
    moved = sorted((tmp_path / "d").glob("*.jsonl"))
    assert [p.name for p in moved] == [f"2027-02-14_MB-000{i}.jsonl" for i in range(1, 6)] + [
        "2027-02-14_pit-notices.jsonl"]
    events = [json.loads(line) for p in moved for line in p.read_text().splitlines()]
    assert {e["ts"][:16] for e in events if e["type"] == "table_open"} == {"2027-02-14T06:00"}
    assert {e["ts"][:11] for e in events} == {"2027-02-14T"}
    assert {e["shoe"].split("-")[2] for e in events if "shoe" in e} == {"0214"}
    # The default day, given or not, writes the bytes it always wrote; another day only
    # changes the dates.
    default = simulate_bulk(tmp_path / "default", 5, 3, seed=1, deviation_rate=0.1)
    given = simulate_bulk(tmp_path / "given", 5, 3, seed=1, deviation_rate=0.1,
                          day=BULK_DATE)
    assert _bytes(default) == _bytes(given)
    for name, data in _bytes(default).items():
        text = data.decode().replace("2026-12-01", "2027-02-14").replace("-1201-", "-0214-")
        path = tmp_path / "d" / name.replace("2026-12-01", "2027-02-14")
        assert path.read_text() == text, name
