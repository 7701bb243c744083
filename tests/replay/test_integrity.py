"""Shoe integrity (docs/shoe-integrity.md): the sums behind the run lengths, the k-gram index,
new-pack runs, the shuffle test against fair shuffles, and the audit finding exactly the
orders the simulator plants, across tables and days, once."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import re
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from helpers.shared import built_once, copy_of

from auditor.audit.integrity import STEP, K
from auditor.audit.run import audit
from auditor.config import PropertyConfig
from auditor.ingest.run import ingest
from auditor.replay import integrity as I
from auditor.rules.cards import RANKS, SUITS
from auditor.simulate.kinds import ORDER_KINDS
from auditor.simulate.planted import simulate
from auditor.store import db, runs, shoe_index

# --- the sums -------------------------------------------------------------------------------


def test_card_codes_cover_the_52_cards_once():
    codes = {I.card_code(r + s) for r in RANKS for s in SUITS}
    assert codes == set(range(52))
    assert (I.card_code("Ac"), I.card_code("As"), I.card_code("Ks")) == (0, 3, 51)
    assert I.card_code("10h") == I.card_code("Th") == 9 * 4 + 2
    assert all(I.card_text(I.card_code(r + s)) == r + s for r in RANKS for s in SUITS)


def test_run_chance_by_hand():
    # Two given cards, in order, in an 8-deck shoe: 8/416 then 8/415.
    assert I.run_chance(2, 8) == pytest.approx(8 / 416 * 8 / 415)
    # Six decks make a run likelier than eight: the smallest shoe is the one assumed.
    assert I.run_chance(12, 6) > I.run_chance(12, 8)


def test_the_year_at_100_tables_gives_12_cards_repeated_and_8_in_pack_order():
    v = I.YEAR_AT_100_TABLES
    assert v.positions == 100 * 30 * 365 * 416 == 455_520_000
    pairs = v.positions * (v.positions - 1) / 2
    by_hand_12 = pairs * math.prod(6 / (312 - i) for i in range(12))
    assert I.chance_repeats(12) == pytest.approx(by_hand_12)
    assert I.chance_repeats(11) > v.target > I.chance_repeats(12)
    assert 3e-4 < I.chance_repeats(12) < 4e-4  # docs/shoe-integrity.md's figure
    assert I.MIN_REPEAT == 12
    by_hand_8 = v.positions * 2 * 6 / 311 * math.prod(6 / (312 - i) for i in range(2, 8))
    assert I.pack_run_chance(8) == pytest.approx(by_hand_8)
    assert I.pack_run_chance(7) > v.target > I.pack_run_chance(8)
    assert I.MIN_PACK_RUN == 8
    # A smaller property needs shorter runs, never longer ones.
    assert I.min_repeat_run(I.Volume(tables=10)) <= 12


def test_seed_layout_finds_every_run_of_the_minimum():
    k, step = I.seed_layout(12)
    assert (k, step) == (11, 2)
    # A run of 12 in an indexed shoe, wherever it starts, holds a kept k-gram.
    for start in range(10):
        kept = [p for p in range(start, start + 12 - k + 1) if p % step == 0]
        assert kept


def test_grams_are_base_52_and_never_cross_shoes():
    a, b = [1, 2, 3, 4], [5, 6, 7]
    shoe, pos, gram = I.grams([*a, *b], [0, 4, 7], 3)
    assert shoe.tolist() == [0, 0, 1]
    assert pos.tolist() == [0, 1, 0]
    assert gram.tolist() == [(1 * 52 + 2) * 52 + 3, (2 * 52 + 3) * 52 + 4, (5 * 52 + 6) * 52 + 7]
    # eleven cards of code 51 still fit a signed 64-bit integer
    _, _, big = I.grams([51] * 11, [0, 11], 11)
    assert big.tolist() == [52**11 - 1]


def test_extend_finds_the_whole_diagonal():
    a = [9, 1, 2, 3, 4, 5, 8]
    b = [7, 7, 1, 2, 3, 4, 5, 6]
    assert I.extend(a, b, 3, 4) == (1, 2, 5)


def test_pack_runs_up_and_down_and_the_minimum():
    spades = [I.card_code(r + "s") for r in RANKS]
    noise = [I.card_code(c) for c in ("7h", "2c", "Qd")]
    up = I.pack_runs(noise + spades + noise)
    assert up == [I.Run(3, 13, 1)]
    down = I.pack_runs(list(reversed(spades[:9])))
    assert down == [I.Run(0, 9, -1)]
    assert I.pack_runs(spades[:7]) == []  # 7 cards: chance does that a few times a century
    assert I.pack_runs(spades[:8]) == [I.Run(0, 8, 1)]
    # ranks one apart but suits changing: not a pack's order
    mixed = [I.card_code(c) for c in ("Ac", "2d", "3c", "4d", "5c", "6d", "7c", "8d", "9c")]
    assert I.pack_runs(mixed) == []


def _shoe(rng: random.Random, decks: int = 8) -> list[int]:
    cards = list(range(52)) * decks
    rng.shuffle(cards)
    return cards


def _riffle(cards: list[int], rng: random.Random) -> list[int]:
    cut = sum(rng.random() < 0.5 for _ in cards)
    left, right, out = cards[:cut], cards[cut:], []
    while left or right:
        pile = left if rng.random() * (len(left) + len(right)) < len(left) else right
        out.append(pile.pop(0))
    return out


@pytest.mark.stats
def test_kept_pairs_false_alarms_on_fair_shuffles():
    """2,000 pairs of fairly shuffled 8-deck shoes, 400 cards dealt of each: none flagged,
    and z has mean near 0 and sd near 1 (the binomial approximation holds)."""
    rng = random.Random(20261201)
    zs = []
    for _ in range(2000):
        t = I.kept_pairs(_shoe(rng)[:400], _shoe(rng)[:400], 8)
        zs.append(t.z)
        assert not t.flagged
    mean = sum(zs) / len(zs)
    sd = math.sqrt(sum((z - mean) ** 2 for z in zs) / (len(zs) - 1))
    assert abs(mean) < 0.1 and 0.85 < sd < 1.2, (mean, sd)


def test_kept_pairs_catches_two_riffles_and_an_unshuffled_shoe():
    rng = random.Random(7)
    caught = 0
    for _ in range(100):
        previous = _shoe(rng)
        t = I.kept_pairs(previous[:400], _riffle(_riffle(previous, rng), rng)[:400], 8)
        caught += t.flagged
    assert caught >= 97  # 99 of these 100 (docs/shoe-integrity.md: 100% of 300 elsewhere)
    same = _shoe(rng)
    t = I.kept_pairs(same[:400], same[:400], 8)
    assert t.kept == 399  # every pair kept
    assert t.z > 40


def _mixed_shoes(rng: random.Random) -> list[list[int]]:
    """Shoes the pass meets: fair, riffled twice, with a new pack's run up or down (at the
    very start and at the very end), cut short, one card, none; 6 and 8 decks."""
    spades = [I.card_code(r + "s") for r in RANKS]
    shoes: list[list[int]] = []
    for i in range(40):
        shoe = _shoe(rng, 6 if i % 3 == 0 else 8)[: rng.choice((400, 312, 20))]
        if i % 4 == 1:
            shoe = _riffle(_riffle(shoe, rng), rng)
        if i % 5 == 2:
            shoe = spades[:9] + shoe
        if i % 7 == 3:
            shoe = shoe + list(reversed(spades))
        shoes.append(shoe)
    return [*shoes, [], [5], spades[:8], spades[:7]]


def test_pack_runs_of_shoes_equals_pack_runs_shoe_by_shoe():
    shoes = _mixed_shoes(random.Random(11))
    codes = np.array([c for s in shoes for c in s], np.int64)
    offsets = np.cumsum([0, *(len(s) for s in shoes)])
    got = I.pack_runs_of_shoes(codes, offsets)
    want = {i: I.pack_runs(s) for i, s in enumerate(shoes) if I.pack_runs(s)}
    assert got == want
    assert len(want) >= 10  # the planted runs are there, at both ends of shoes too
    # a run across two shoes' boundary is no run: the end of one, the start of the next
    ends = [spades for spades in ([I.card_code(r + "h") for r in RANKS[:5]],
                                  [I.card_code(r + "h") for r in RANKS[5:10]])]
    assert I.pack_runs_of_shoes(np.array(ends[0] + ends[1]), np.array([0, 5, 10])) == {}


def test_kept_pairs_of_shoes_equals_kept_pairs_pair_by_pair(monkeypatch):
    rng = random.Random(12)
    shoes = _mixed_shoes(rng)
    previous = [shoes[i - 1] for i in range(1, len(shoes))] + [shoes[3]]
    # every fourth shoe riffled twice from its previous one: those are caught
    current = [_riffle(_riffle(p, rng), rng) if i % 4 == 0 else c
               for i, (p, c) in enumerate(zip(previous[:-1], shoes[1:], strict=True))] + [shoes[3]]
    decks = [6 if i % 3 == 0 else 8 for i in range(len(current))]
    want = [I.kept_pairs(p, c, d) for p, c, d in zip(previous, current, decks, strict=True)]
    monkeypatch.setattr(I, "PAIRS_CHUNK", 7)  # several chunks, one short
    got = I.kept_pairs_of_shoes([np.array(p, np.int64) for p in previous],
                                [np.array(c, np.int64) for c in current], decks)
    assert got == want  # the same floats, not just close ones
    assert sum(t.flagged for t in got) >= 10 and got[-1].kept == len(shoes[3]) - 1


# --- the audit ---------------------------------------------------------------------------------


def _audit(db_path: Path, *folders: Path) -> None:
    """Each folder ingested, then audited, in turn: one night after another."""
    con = db.connect(db_path)
    try:
        for folder in folders:
            ingest(con, sorted(folder.glob("*.jsonl")), runs.start(con, "ingest", {}))
            audit(con, runs.start(con, "audit", {}), PropertyConfig())
    finally:
        con.close()


ORDER_CODES = tuple(dict.fromkeys(ORDER_KINDS.values()))


def _found(db_path: Path, codes: tuple[str, ...] = ORDER_CODES) -> list[tuple]:
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return con.execute(
            "SELECT code, table_id, shoe, round, dealer, seq, source, evidence "
            "FROM current_findings WHERE code IN (SELECT unnest(?)) ORDER BY ALL",
            [list(codes)],
        ).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """The night with a shoe dealt twice and an unshuffled one, simulated and audited once a
    run (its logs in the shared folder), and this module's copy of its database."""

    def make(base: Path) -> Any:
        r = simulate(base / "logs", 6, 3, seed=2, games=("mini_baccarat", "punto_banco"),
                     shoe_twice=True, unshuffled=True)
        _audit(base / "a.duckdb", base / "logs")
        return r

    base, r = built_once(tmp_path_factory, "integrity-planted", make)
    return r, copy_of(base / "a.duckdb", tmp_path_factory.mktemp("orders") / "a.duckdb")


@pytest.mark.slow
def test_the_planted_orders_are_found_and_nothing_else(planted):
    r, path = planted
    truth = sorted((d["code"], d["table"], d["shoe"]) for d in r.deviations)
    assert [d["kind"] for d in r.deviations] == ["weak_shuffle", "pack_run", "shoe_twice"]
    assert sorted(f[:3] for f in _found(path)) == truth


def test_a_repeated_shoe_names_the_earlier_one_and_the_run(planted):
    r, path = planted
    twice = next(d for d in r.deviations if d["kind"] == "shoe_twice")
    (_, table, shoe, rnd, dealer, seq, source, evidence), = (
        f for f in _found(path) if f[0] == "shoe.repeated_order")
    ev = json.loads(evidence)
    assert (table, shoe, rnd) == (twice["table"], twice["shoe"], None)
    assert ev["earlier_shoe"]["table"] == "MB-01" and ev["earlier_shoe"]["shoe"].endswith("-01")
    con = duckdb.connect(str(path), read_only=True)
    try:
        def dealt(t: str, s: str) -> list[str]:
            return [c for (c,) in con.execute(
                "SELECT card FROM events WHERE type = 'card' AND table_id = ? AND shoe = ? "
                "ORDER BY seq", [t, s]).fetchall()]
        mine, theirs = dealt(table, shoe), dealt("MB-01", ev["earlier_shoe"]["shoe"])
        first = con.execute(
            "SELECT seq, dealer FROM events WHERE table_id = ? AND shoe = ? AND type = 'card' "
            "ORDER BY seq LIMIT 1", [table, shoe]).fetchall()[0]
        start_dealer = con.execute(
            "SELECT dealer FROM events WHERE type = 'shoe_start' AND table_id = ? AND shoe = ?",
            [table, shoe]).fetchall()[0][0]
    finally:
        con.close()
    # The whole dealt shoe repeats: the run is as long as the shorter of the two.
    n = min(len(mine), len(theirs))
    assert mine[:n] == theirs[:n] and ev["run_cards"] == n
    assert ev["cards"] == mine[:24]
    assert (seq, dealer) == (first[0], start_dealer)
    file, line = source.rsplit(":", 1)
    event = json.loads(Path(file).read_text().splitlines()[int(line) - 1])
    assert Path(file).name.endswith(f"_{table}.jsonl")
    assert (event["type"], event["seq"], event["card"]) == ("card", seq, mine[0])


def test_an_unshuffled_shoe_shows_its_run_and_its_kept_pairs(planted):
    found = {json.loads(f[7])["test"]: json.loads(f[7]) for f in _found(planted[1])
             if f[0] == "shoe.unshuffled"}
    run = found["pack_order"]["runs"][0]
    assert run["dealt"] == [r + "s" for r in RANKS] and run["from_card"] == 21
    pairs = found["previous_order"]
    assert pairs["z"] >= I.PAIR_Z and pairs["kept"] > pairs["expected"] + 6 * pairs["sd"]


@pytest.mark.slow
def test_a_second_audit_adds_nothing_and_the_index_holds_every_shoe_once(planted):
    _, path = planted
    before = _found(path)
    _audit(path)
    con = db.connect(path)
    try:
        audit(con, runs.start(con, "audit", {}), PropertyConfig())
    finally:
        con.close()
    assert _found(path) == before
    con = duckdb.connect(str(path), read_only=True)
    try:
        shoes = con.execute("SELECT count(DISTINCT (table_id, shoe)) FROM events "
                            "WHERE type = 'card'").fetchall()[0][0]
        indexed = con.execute("SELECT count(*), count(DISTINCT (table_id, shoe)), "
                              "count(DISTINCT shoe_no) FROM shoe_orders").fetchall()[0]
        cards = con.execute("SELECT count(*) FROM events WHERE type = 'card'").fetchall()[0][0]
        in_index = con.execute("SELECT sum(len(codes)) FROM shoe_orders").fetchall()[0][0]
    finally:
        con.close()
    assert indexed == (shoes, shoes, shoes) and in_index == cards


def _renamed(src: Path, dst: Path, tables: dict[str, str]) -> None:
    """The table files of `src` with each table (and so its shoes) renamed: another table
    dealing the very same shoes."""
    dst.mkdir(parents=True)
    for f in src.glob("*.jsonl"):
        if "pit" in f.name:
            continue
        text = f.read_text()
        for old, new in tables.items():
            text = re.sub(rf"\b{re.escape(old)}\b", new, text)
        (dst / f.name.replace(*next(iter(tables.items())))).write_text(text)


@pytest.mark.slow
def test_a_shoe_dealt_again_another_day_at_another_table(tmp_path):
    """Day one is audited; days later a table deals day one's MB-01 shoes again (the same
    seed, the table renamed): each of its shoes is found against day one's, in a later
    ingest and audit, through the index."""
    simulate(tmp_path / "d1", 2, 2, seed=9, games=("mini_baccarat",))
    simulate(tmp_path / "d9", 2, 2, seed=9, games=("mini_baccarat",))
    _renamed(tmp_path / "d9", tmp_path / "again", {"MB-01": "MB-21", "MB-02": "MB-22"})
    path = tmp_path / "a.duckdb"
    _audit(path, tmp_path / "d1")
    assert _found(path) == []
    _audit(path, tmp_path / "again")
    found = _found(path)
    for f, ev in _whole_shoes_repeated(path, found, ("MB-21", "MB-22")):
        assert ev["earlier_shoe"]["shoe"] == f[2].replace("MB-2", "MB-0")


def _whole_shoes_repeated(
    path: Path, found: list[tuple], tables: tuple[str, ...]
) -> list[tuple[tuple, dict[str, Any]]]:
    """Checks that `found` is one shoe.repeated_order for every shoe dealt at `tables`, each
    repeating its earlier shoe from the first card; each finding with its evidence."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        shoes = {s for (s,) in con.execute(
            "SELECT DISTINCT shoe FROM events WHERE table_id IN (SELECT unnest(?)) "
            "AND type = 'card'", [list(tables)]).fetchall()}
    finally:
        con.close()
    assert shoes and {f[2] for f in found} == shoes
    assert all(f[0] == "shoe.repeated_order" for f in found)
    out = [(f, json.loads(f[7])) for f in found]
    for _, ev in out:
        assert ev["earlier_shoe"]["from_card"] == ev["this_shoe"]["from_card"] == 1
    return out


def _index_calls(monkeypatch: pytest.MonkeyPatch, shoes_a_batch: int) -> list[int]:
    """Sets the pass's batches to about `shoes_a_batch` shoes (whole tables); returns the
    list that each `_index` call then adds its number of shoes to."""
    from auditor.audit import integrity

    calls: list[int] = []
    real = integrity._index

    def counted(con: Any, touched: list[tuple[str, str]]) -> Any:
        calls.append(len(touched))
        return real(con, touched)

    monkeypatch.setattr(integrity, "SHOES_A_BATCH", shoes_a_batch)
    monkeypatch.setattr(integrity, "_index", counted)
    return calls


def _index_rows(path: Path) -> list[tuple]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("SELECT shoe_no, table_id, shoe, codes, rounds FROM shoe_orders "
                           "ORDER BY shoe_no").fetchall()
    finally:
        con.close()


@pytest.mark.slow
def test_the_pass_in_batches_of_tables_finds_what_it_finds_at_once(
    planted, tmp_path, monkeypatch
):
    """A gaming day's shoes are indexed and probed a few thousand at a time (the day's 49 M
    cards at once ran DuckDB out of memory): a table a batch here, the planted night gives
    the same findings, evidence and index as the pass over all its shoes at once."""
    _, path = planted
    at_once = _found(path)
    logs = Path(at_once[0][6].rsplit(":", 1)[0]).parent
    calls = _index_calls(monkeypatch, 1)
    _audit(tmp_path / "b.duckdb", logs)
    assert _found(tmp_path / "b.duckdb") == at_once
    assert _index_rows(tmp_path / "b.duckdb") == _index_rows(path)
    tables = {t for _, t, *_ in _index_rows(path)}
    assert len(calls) == len(tables) == 6 and sum(calls) == len(_index_rows(path))


@pytest.mark.slow
def test_a_pass_cut_short_leaves_the_rest_pending_for_the_next(planted, tmp_path, monkeypatch):
    """Each batch commits its index rows and findings and records its shoes done
    (shoe_index_done): a pass that fails in its third batch keeps the two before, leaves
    the rest pending (the lines are marked read), and the next pass indexes them, to the
    same findings and index as one pass."""
    from auditor.audit import integrity

    _, path = planted
    logs = Path(_found(path)[0][6].rsplit(":", 1)[0]).parent
    calls = _index_calls(monkeypatch, 1)
    real = integrity.repeats

    def fails_third(*a: Any, **kw: Any) -> Any:
        if len(calls) == 3:
            raise RuntimeError("cut short")
        return real(*a, **kw)

    monkeypatch.setattr(integrity, "repeats", fails_third)
    dbp = tmp_path / "b.duckdb"
    with pytest.raises(RuntimeError, match="cut short"):
        _audit(dbp, logs)
    con = duckdb.connect(str(dbp), read_only=True)
    try:
        indexed = {t for (t,) in con.execute("SELECT DISTINCT table_id FROM shoe_orders")
                   .fetchall()}
        pending = {t for t, _ in con.execute(shoe_index.PENDING_SQL).fetchall()}
    finally:
        con.close()
    tables = sorted({t for _, t, *_ in _index_rows(path)})
    assert (indexed, pending) == (set(tables[:2]), set(tables[2:])) and len(tables) == 6
    monkeypatch.setattr(integrity, "repeats", real)
    con = db.connect(dbp)
    try:
        audit(con, runs.start(con, "audit", {}), PropertyConfig())
    finally:
        con.close()
    assert len(calls) == 3 + 4
    assert _found(dbp) == _found(path) and _index_rows(dbp) == _index_rows(path)


@pytest.mark.slow
def test_a_repeat_whose_later_shoe_is_in_an_earlier_batch(tmp_path, monkeypatch):
    """Batches go in table order, not time order: MB-01 and MB-02 deal on the second day the
    shoes MB-11 and MB-12 dealt on the first, all ingested together. MB-01's batch comes
    first and finds nothing yet; MB-11's finds the repeat, which is still MB-01's shoe's
    finding (the later one), naming MB-11's as the earlier, as the pass over all at once."""
    day = dt.date(2026, 3, 2)
    simulate(tmp_path / "d2", 2, 2, seed=9, games=("mini_baccarat",), day=day)
    simulate(tmp_path / "d1", 2, 2, seed=9, games=("mini_baccarat",),
             day=day - dt.timedelta(days=1))
    _renamed(tmp_path / "d1", tmp_path / "logs", {"MB-01": "MB-11", "MB-02": "MB-12"})
    for f in (tmp_path / "d2").glob("*.jsonl"):
        f.rename(tmp_path / "logs" / f.name)
    _audit(tmp_path / "a.duckdb", tmp_path / "logs")
    calls = _index_calls(monkeypatch, 1)
    _audit(tmp_path / "b.duckdb", tmp_path / "logs")
    found = _found(tmp_path / "b.duckdb")
    assert found == _found(tmp_path / "a.duckdb") and len(calls) == 4
    for f, ev in _whole_shoes_repeated(tmp_path / "b.duckdb", found, ("MB-01", "MB-02")):
        assert ev["earlier_shoe"]["table"] == f[1].replace("MB-0", "MB-1")


@pytest.mark.slow
def test_integrity_pass_reads_only_new_lines(tmp_path):
    """A second pass with nothing new indexes nothing; the summary says what was done."""
    from auditor.audit.integrity import integrity_findings

    simulate(tmp_path / "logs", 2, 1, seed=4, games=("mini_baccarat",))
    path = tmp_path / "a.duckdb"
    _audit(path, tmp_path / "logs")
    con = db.connect(path)
    try:
        run_id = runs.start(con, "audit", {})
        summary = integrity_findings(con, run_id, PropertyConfig())
    finally:
        con.close()
    assert summary == {"shoes_indexed": 0, "findings": 0, "findings_new": 0}


@pytest.mark.parametrize("card", [None, "Zz", "Qx", "Q"])
def test_a_card_changed_in_the_database_into_no_card_stops_the_pass_and_says_where(
    tmp_path, card
):
    """Ingest stores only cards; a card event changed since to no card (NULL, or a text no
    card code reads) is refused by name, nothing indexed, rather than read as some card."""
    from auditor.audit.integrity import integrity_findings
    from auditor.errors import UserError

    simulate(tmp_path / "logs", 2, 1, seed=4, games=("mini_baccarat",))
    con = db.connect(tmp_path / "a.duckdb")
    try:
        ingest(con, sorted((tmp_path / "logs").glob("*.jsonl")), runs.start(con, "ingest", {}))
        table, shoe, seq = con.execute(
            "SELECT table_id, shoe, seq FROM events WHERE type = 'card' ORDER BY table_id, seq "
            "LIMIT 1 OFFSET 7").fetchall()[0]
        con.execute("UPDATE events SET card = ? WHERE table_id = ? AND seq = ?",
                    [card, table, seq])
        with pytest.raises(UserError) as e:
            integrity_findings(con, runs.start(con, "audit", {}), PropertyConfig())
        assert str(e.value).startswith(
            f"table {table} shoe {shoe}: the events table holds a card event whose card is "
            "no card (card ")
        assert con.execute("SELECT count(*) FROM shoe_orders").fetchall() == [(0,)]
    finally:
        con.close()


@pytest.mark.slow
def test_cli_simulate_plants_the_orders_on_request(bacc_audit, tmp_path):
    res = bacc_audit("simulate", "--out", str(tmp_path / "s"), "--tables", "6", "--hours", "3",
                     "--seed", "2", "--games", "mini_baccarat,punto_banco", "--shoe-twice",
                     "--unshuffled")
    assert res.code == 0, res.err
    truth = [json.loads(x) for x in (tmp_path / "s" / "ground_truth.ndjson").read_text()
             .splitlines()]
    assert sorted(d["kind"] for d in truth) == ["pack_run", "shoe_twice", "weak_shuffle"]
    plain = bacc_audit("simulate", "--out", str(tmp_path / "p"), "--tables", "6", "--hours",
                       "3", "--seed", "2", "--games", "mini_baccarat,punto_banco")
    assert plain.code == 0 and (tmp_path / "p" / "ground_truth.ndjson").read_text() == ""
    bulk = bacc_audit("simulate", "--out", str(tmp_path / "b"), "--tables", "1", "--hours",
                      "1", "--bulk", "--shoe-twice")
    assert bulk.code == 2
    assert bulk.err.strip() == ("error: --shoe-twice: not with --bulk, whose generator plants "
                                "only round deviations; leave out --bulk")


@pytest.mark.slow
def test_the_report_names_a_whole_shoe_without_a_round(planted, bacc_audit, tmp_path):
    import pypdf

    _, path = planted
    pdf = tmp_path / "r.pdf"
    res = bacc_audit("report", "--db", str(path), "--shift", "2026-12-01/grave", "--out",
                     str(pdf))
    assert res.code == 0, res.err
    text = "\n".join(p.extract_text() for p in pypdf.PdfReader(pdf).pages)
    assert "None" not in text
    assert re.search(r"critical shoe\.repeated_order MB-03 MB-03-1201-02 2026-12-08", text)
    assert re.search(r"table MB-03 shoe MB-03-1201-02 · seq \d+", text)
    assert re.search(r"shoe\.repeated_order +MB-03 +MB-03-1201-02 +\d+ ", text)


@pytest.mark.slow
def test_a_careless_shoe_does_not_stop_the_pass(tmp_path):
    """A shoe whose id never changed (33,000 cards, past a SMALLINT) and a round number past
    32 bits: indexed and searched, nothing cut short or wrapped."""
    cards = [r + s for r in RANKS for s in SUITS]
    rng = random.Random(5)
    lines: list[dict[str, object]] = [
        {"type": "table_open", "pit": "P1", "game": "mini_baccarat", "jurisdiction": "NJ",
         "variant": "standard", "procedure": 1, "seats": 7, "side_bets": ["tie"]},
        {"type": "shoe_start", "shoe": "S1", "decks": 8, "shuffle": "manual", "batch": "red"},
        {"type": "round_start", "shoe": "S1", "round": 3_000_000_000},
        *({"type": "card", "shoe": "S1", "round": 3_000_000_000, "to": "player",
           "card": rng.choice(cards)} for _ in range(33_000)),
        {"type": "round_end", "shoe": "S1", "round": 3_000_000_000},
        {"type": "shoe_end", "shoe": "S1"},
    ]
    start = dt.datetime(2026, 11, 28, 22, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "t.jsonl").write_text("".join(
        json.dumps({"v": 1, "ts": (start + dt.timedelta(seconds=i)).isoformat(),
                    "table": "MB-99", "seq": i + 1, **e}) + "\n"
        for i, e in enumerate(lines)))
    path = tmp_path / "a.duckdb"
    _audit(path, logs)
    con = duckdb.connect(str(path), read_only=True)
    try:
        [(n, last_round)] = con.execute(
            "SELECT len(codes), rounds[-1] FROM shoe_orders WHERE shoe = 'S1'").fetchall()
        top = con.execute("SELECT max(pos) FROM shoe_grams").fetchall()[0][0]
    finally:
        con.close()
    assert (n, last_round) == (33_000, 3_000_000_000)
    assert top == 33_000 - I.SEED - (33_000 - I.SEED) % 2  # the last kept position


def _index_as_kept(path: Path) -> tuple[list[tuple], list[tuple], list[tuple]]:
    """(shoe_no, table, shoe, cards) of each indexed shoe, (shoe_no, k-grams) as stored and
    as rules.grams gives them from the stored order."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        orders = con.execute("SELECT shoe_no, table_id, shoe, codes FROM shoe_orders "
                             "ORDER BY shoe_no, table_id, shoe").fetchall()
        stored = con.execute("SELECT shoe_no, count(*) FROM shoe_grams GROUP BY ALL "
                             "ORDER BY ALL").fetchall()
    finally:
        con.close()
    want = []
    for no, _, _, codes in orders:
        _, pos, _ = I.grams(np.array(codes, np.int64), np.array([0, len(codes)]), K)
        want.append((no, int((pos % STEP == 0).sum())))
    return [(n, t, s, len(c)) for n, t, s, c in orders], stored, sorted(want)


@pytest.mark.slow
def test_a_shoe_indexed_again_keeps_its_number_and_a_new_shoe_takes_another(tmp_path):
    """A log read as it grows: the first pass indexes the first shoe as far as it was dealt
    (number 1); the next gives it its other cards and indexes the table's later shoes. Each
    keeps a number of its own and its own k-grams (a new shoe once took the number of the
    shoe indexed again, and the two shared their k-grams)."""
    simulate(tmp_path / "logs", 1, 3, seed=4, games=("mini_baccarat",))
    [log] = sorted((tmp_path / "logs").glob("*_MB-01.jsonl"))
    lines = log.read_text().splitlines(keepends=True)
    shoes = [json.loads(x).get("shoe") for x in lines]
    second = shoes.index(next(s for s in shoes if s and s != shoes[1]))
    (tmp_path / "grows").mkdir()
    grows = tmp_path / "grows" / log.name
    grows.write_text("".join(lines[:second // 2]))
    _audit(tmp_path / "a.duckdb", tmp_path / "grows")
    [(first_no, _, first_shoe, dealt)] = _index_as_kept(tmp_path / "a.duckdb")[0]
    assert (first_no, first_shoe) == (1, shoes[1])
    grows.write_text("".join(lines))
    _audit(tmp_path / "a.duckdb", tmp_path / "grows")
    orders, stored, want = _index_as_kept(tmp_path / "a.duckdb")
    assert len(orders) >= 3 and [n for n, *_ in orders] == list(range(1, len(orders) + 1))
    assert orders[0][:3] == (1, "MB-01", shoes[1]) and orders[0][3] > dealt
    assert stored == want


def test_an_index_from_before_its_bookkeeping_is_taken_in_once(tmp_path):
    """A database whose index was kept in the old mutable tables (`shoe_index_lines`,
    `shoe_index_pending`): the next pass takes its marks, its pending shoes and its index as
    found under its own run (whose end seals them), drops the old tables, and indexes only
    the pending shoes and those that shared a number (the old numbering's fault)."""
    from auditor.audit.integrity import integrity_findings

    simulate(tmp_path / "logs", 3, 1, seed=4, games=("mini_baccarat",))
    path = tmp_path / "a.duckdb"
    _audit(path, tmp_path / "logs")
    con = db.connect(path)
    try:
        shoes = con.execute("SELECT table_id, shoe, shoe_no FROM shoe_orders "
                            "ORDER BY shoe_no").fetchall()
        assert [n for *_, n in shoes] == [1, 2, 3]
        con.execute("CREATE TABLE shoe_index_lines AS SELECT source_id, max(last_line) AS "
                    "last_line FROM shoe_index_marks GROUP BY ALL")
        con.execute("CREATE TABLE shoe_index_pending AS SELECT ? AS table_id, ? AS shoe",
                    list(shoes[0][:2]))
        con.execute("UPDATE shoe_orders SET shoe_no = 2 WHERE shoe_no = 3")
        con.execute("UPDATE shoe_grams SET shoe_no = 2 WHERE shoe_no = 3")
        for t in ("shoe_index_marks", "shoe_index_queue", "shoe_index_done"):
            con.execute(f"DELETE FROM {t}")
        con.execute("DELETE FROM run_derived WHERE tab LIKE 'shoe_index%'")
        before = con.execute("SELECT table_id, shoe, codes FROM shoe_orders ORDER BY ALL"
                             ).fetchall()
        run_id = runs.start(con, "audit", {})
        summary = integrity_findings(con, run_id, PropertyConfig())
        assert summary["shoes_indexed"] == 3  # the pending one, the two that shared 2
        assert not db.has_table(con, "shoe_index_lines")
        assert not db.has_table(con, "shoe_index_pending")
        assert con.execute("SELECT DISTINCT run_id FROM shoe_index_marks").fetchall() == [
            (run_id,)]
        assert con.execute("SELECT table_id, shoe, codes FROM shoe_orders ORDER BY ALL"
                           ).fetchall() == before
        assert sorted(n for (n,) in con.execute("SELECT shoe_no FROM shoe_orders").fetchall()
                      ) == [1, 2, 3]  # the pending shoe keeps its number, the two take 2, 3
        # adopted: the first (then indexed again, pending); the two sharing: indexed anew
        assert con.execute("SELECT count(*) FROM shoe_index_done").fetchall() == [(4,)]
        n_shoes, grams, in_shoes, in_grams = shoe_index.counts(con)
        assert (n_shoes, grams) == (in_shoes, in_grams) and n_shoes == 3
        assert shoe_index.mismatches(con) == ([], 0)
    finally:
        con.close()


def test_the_shoes_read_flat_equal_their_cards_grouped_in_sql(tmp_path):
    """`_read_orders` cuts the cards, read flat, into each shoe's lists: the same rows as
    grouping them in SQL (the pass before session 65), with cards in other spellings the
    format allows, a card without a stamp or a round, a card excluded from its round, a
    touched shoe with no card, and a shoe indexed before."""
    from auditor.audit import integrity

    simulate(tmp_path / "logs", 2, 1, seed=4, games=("mini_baccarat",))
    con = db.connect(tmp_path / "a.duckdb")
    try:
        ingest(con, sorted((tmp_path / "logs").glob("*.jsonl")), runs.start(con, "ingest", {}))
        cards = con.execute("SELECT table_id, seq FROM events WHERE type = 'card' "
                            "ORDER BY table_id, seq").fetchall()
        for (table, seq), change in zip(cards[3:8], (
                "card = '10h'", "card = lower(card)", "ts = NULL", "round = NULL",
                "card = 'as'"), strict=True):
            con.execute(f"UPDATE events SET {change} WHERE table_id = ? AND seq = ?",
                        [table, seq])
        table, seq = cards[20]
        con.execute("INSERT INTO round_exclusions SELECT table_id, shoe, round, seq, 'test' "
                    "FROM events WHERE table_id = ? AND seq = ?", [table, seq])
        shoes = con.execute("SELECT DISTINCT table_id, shoe FROM events WHERE shoe IS NOT NULL "
                            "ORDER BY ALL").fetchall()
        first = shoes[0]
        con.execute("INSERT INTO shoe_orders (shoe_no, table_id, shoe, codes, rounds) "
                    "VALUES (7, ?, ?, [1, 2], [1, 1])", list(first))
        touched = [*shoes, ("MB-01", "no-such-shoe")]
        con.register("_touched_shoes", pa.table({"table_id": [t for t, _ in touched],
                                                 "shoe": [s for _, s in touched]}))
        sources = integrity._sources_of(con, {t for t, _ in touched})
        got, indexed = integrity._read_orders(con, sources)
        want = con.execute(
            f"""
            WITH cards AS (
              SELECT table_id, shoe, seq, ts, round, {integrity._CODE_SQL} AS code FROM events
              SEMI JOIN _touched_shoes USING (table_id, shoe)
              ANTI JOIN round_exclusions USING (table_id, seq)
              WHERE source_id IN ({sources}) AND type = 'card'
            ), starts AS (
              SELECT table_id, shoe, arg_min(decks, seq) AS decks,
                     arg_min(shuffle, seq) AS shuffle, arg_min(batch, seq) AS batch
              FROM events SEMI JOIN _touched_shoes USING (table_id, shoe)
              WHERE source_id IN ({sources}) AND type = 'shoe_start' GROUP BY ALL
            )
            SELECT o.shoe_no, c.table_id, c.shoe, min(c.ts), any_value(s.decks),
                   any_value(s.shuffle), any_value(s.batch),
                   list(c.code::UTINYINT ORDER BY c.seq), list(coalesce(c.round, 0) ORDER BY c.seq)
            FROM cards c LEFT JOIN starts s USING (table_id, shoe)
            LEFT JOIN shoe_orders o USING (table_id, shoe)
            GROUP BY c.table_id, c.shoe, o.shoe_no ORDER BY c.table_id, c.shoe
            """).fetchall()
    finally:
        con.close()
    rows = list(zip(*(got.column(c).to_pylist() for c in shoe_index.ORDER_COLUMNS),
                    strict=True))
    assert rows == want and indexed
    assert len(rows) == len(shoes) and rows[0][:3] == (7, *first)
    assert sum(len(r[7]) for r in rows) == len(cards) - 1  # the excluded card
    assert all(None not in r[7] and r[3] is not None for r in rows)  # every spelling read
    assert sum(r[8].count(0) for r in rows) == 1  # the card without its round
