"""Side-bet counting (docs/side-bets.md): the published counts, the running and true count of a
shoe, the rank test of a seat's side wagers against the count, the planted counting seat found,
and clean nights that raise nothing."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from helpers.tablelog import Log, TablePassDb, deal_rounds

from auditor import config
from auditor.audit import sidebets
from auditor.audit.run import audit
from auditor.ingest.run import ingest
from auditor.replay.sidebets import (
    FALSE_ALARM,
    MIN_ROUNDS,
    MIN_SIDE_WAGERS,
    Z_THRESHOLD,
    Observation,
    SeatSeries,
    Segment,
    average_ranks,
    counting_findings,
    seat_test,
    shoe_counts,
    spearman,
    true_count,
)
from auditor.rules.counts import counts_path, load_counts
from auditor.rules.pack import list_packs
from auditor.simulate.generator import Night, write_night
from auditor.simulate.layout import SIM_DATE, mini_specs
from auditor.simulate.planted import simulate
from auditor.store import db, runs

CODE = "play.side_bet_counting"
SHIFT = "2026-12-01/grave"


# --- the counts -------------------------------------------------------------------------------


def test_the_counts_are_the_published_tags_with_their_citations():
    counts = load_counts()
    assert sorted(counts) == ["dragon7", "panda8"]
    d7, p8 = counts["dragon7"], counts["panda8"]
    assert [d7.tags[r] for r in "A23456789TJQK"] == [0, 0, 0, -1, -1, -1, -1, 2, 2, 0, 0, 0, 0]
    assert [p8.tags[r] for r in "A23456789TJQK"] == [1, 1, -2, -2, -2, -1, -1, -2, 4, 1, 1, 1, 1]
    assert "Jacobson" in d7.citation and d7.bet_at_true_count == 4
    assert "Shackleford" in p8.citation and "Co-Card Counting" in p8.citation
    for c in (d7, p8):  # balanced: a deck sums to 0
        assert sum(c.tags[r] * 4 for r in "A23456789TJQK") == 0
    assert d7.tag("10S") == d7.tag("Kd") == 0 and d7.tag("8h") == 2 and p8.tag("9c") == 4


def test_the_counts_file_is_no_rule_pack():
    assert counts_path().parent.name == "surveillance"
    assert counts_path().parent.parent == list_packs()[0].path.parent
    assert all("surveillance" not in str(p.path) for p in list_packs())


# A one-deck shoe: the burn shows an 8 and burns 8 unseen; round 1 deals 4 cards; round 2 has a
# 9 found face up (2 more burned unseen with it) and deals 5 cards.
SEGMENTS = [
    Segment(None, ("8h",), 8),
    Segment(1, ("4c", "9d", "Ts", "7h")),
    Segment(2, ("9c", "5s", "6d", "Kd", "2h", "4h"), 2),
    Segment(3, ("Ac", "3d", "Qs", "8d")),
]


def test_running_and_true_count_before_each_round_by_hand():
    d7 = load_counts()["dragon7"]
    got = [(c.round, c.running, c.cards_out) for c in shoe_counts(d7, 1, SEGMENTS)]
    # Before 1: the 8 (+2); 9 cards out. Round 1: 4 -1, 9 +2, T 0, 7 -1 = 0.
    # Round 2: 9 +2, 5 -1, 6 -1, K 0, 2 0, 4 -1 = -1; 6 seen and 2 unseen out.
    assert got == [(1, 2, 9), (2, 2, 13), (3, 1, 21)]
    tcs = [c.true for c in shoe_counts(d7, 1, SEGMENTS)]
    assert tcs == pytest.approx([2 * 52 / 43, 2 * 52 / 39, 1 * 52 / 31])
    assert tcs == pytest.approx([2.4186, 2.6667, 1.6774], abs=1e-4)
    p8 = load_counts()["panda8"]
    # 8 -2; then 4 -2, 9 +4, T +1, 7 -1 = +2; then 9 +4, 5 -2, 6 -1, K +1, 2 +1, 4 -2 = +1.
    assert [c.running for c in shoe_counts(p8, 1, SEGMENTS)] == [-2, 0, 1]
    # Eight decks: the same running count is worth less.
    assert shoe_counts(d7, 8, SEGMENTS)[0].true == pytest.approx(2 * 52 / (416 - 9))
    assert true_count(3, 0) == 3 * 52  # never divides by zero


def test_ranks_and_spearman_with_ties():
    assert average_ranks([3.0, 1.0, 3.0, 2.0]) == [3.5, 1.0, 3.5, 2.0]
    ys = [Decimal(v) for v in (0, 0, 1, 1, 2)]
    assert spearman([1.0, 2.0, 3.0, 4.0, 5.0], ys) == pytest.approx(9 / math.sqrt(90))
    assert spearman([1.0, 2.0, 3.0], [Decimal(5)] * 3) is None  # a seat that never varies
    assert spearman([4.0, 3.0, 2.0, 1.0], [Decimal(v) for v in (1, 2, 3, 4)]) == pytest.approx(-1)


def _walk(n: int, rng: random.Random) -> list[float]:
    """True counts that wander as a shoe's do."""
    x, out = 0.0, []
    for i in range(n):
        if i % 80 == 0:
            x = 0.0
        x += rng.gauss(0, 0.6)
        out.append(x)
    return out


def _obs(xs: list[float], amounts: list[int]) -> list[Observation]:
    t0 = dt.datetime(2026, 12, 2, 3, tzinfo=dt.UTC)
    return [Observation("S1", i + 1, t0 + dt.timedelta(minutes=i), x, Decimal(a))
            for i, (x, a) in enumerate(zip(xs, amounts, strict=True))]


def test_a_seat_betting_on_the_count_is_flagged_and_a_random_one_is_not():
    rng = random.Random(7)
    xs = _walk(200, rng)
    counter = [0 if x < 2 else 10 if x < 4 else 50 for x in xs]
    regular = [rng.choice((5, 10, 25)) if rng.random() < 0.12 else 0 for _ in xs]
    t = seat_test(_obs(xs, counter))
    assert t.flagged and t.z is not None and t.z > Z_THRESHOLD
    assert t.rounds == 200 and t.side_wagers == sum(1 for a in counter if a)
    assert t.z == pytest.approx((t.rho or 0) * math.sqrt(199))
    r = seat_test(_obs(xs, regular))
    assert not r.flagged and r.z is not None and abs(r.z) < 3
    # Too few rounds, or too few side wagers, is never flagged however they fall.
    assert not seat_test(_obs(xs[:MIN_ROUNDS - 1], counter[:MIN_ROUNDS - 1])).flagged
    top = sorted(range(200), key=lambda i: xs[i])[-4:]
    assert not seat_test(_obs(xs, [50 if i in top else 0 for i in range(200)])).flagged


def test_the_finding_shows_the_series_and_the_count():
    rng = random.Random(7)
    xs = _walk(120, rng)
    counter = [0 if x < 2 else 10 if x < 4 else 50 for x in xs]
    series = SeatSeries("MB-02", "P1", 2, "dragon7", SHIFT, tuple(_obs(xs, counter)))
    [f], tested = counting_findings([series], load_counts())
    assert tested == 1
    assert f.code == CODE and f.table == "MB-02" and f.pit == "P1"
    assert (f.shoe, f.round, f.dealer) == (None, None, None)
    assert f.fingerprint == "play.side_bet_counting|MB-02|2|dragon7|2026-12-01/grave"
    ev = f.evidence or {}
    assert (ev["table"], ev["seat"], ev["bet"], ev["shift"]) == ("MB-02", 2, "dragon7", SHIFT)
    assert ev["count"]["name"] == "Jacobson Dragon 7 count"
    assert "Jacobson" in ev["count"]["citation"]
    assert ev["rounds"] == 120 and ev["threshold"] == round(Z_THRESHOLD, 3)
    first = "0" if counter[0] == 0 else str(counter[0])
    assert ev["series"][0] == ["S1", 1, round(xs[0], 2), first]
    assert all(isinstance(a, str) for *_, a in ev["series"])
    assert "Seat 2" in f.message and "Dragon 7" in f.message


# --- a simulated night ------------------------------------------------------------------------


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _recount(path: Path, tags: dict[str, int]) -> dict[tuple[str, int], float]:
    """The true count before each round, straight from a table's log: the burn's first card,
    every card dealt, a card found face up, over the decks left."""
    out: dict[tuple[str, int], float] = {}
    rc: dict[str, int] = defaultdict(int)
    gone: dict[str, int] = defaultdict(int)
    size: dict[str, int] = {}
    for e in _events(path):
        shoe = str(e.get("shoe"))
        if e["type"] == "shoe_start":
            size[shoe] = 52 * e["decks"]
        elif e["type"] == "burn":
            rc[shoe] += tags[e["cards"][0][0]]
            gone[shoe] += len(e["cards"])
        elif e["type"] == "face_up_in_shoe":
            rc[shoe] += tags[e["card"][0]]
            gone[shoe] += 1 + len(e["burned"])
        elif e["type"] == "card":
            rc[shoe] += tags[e["card"][0]]
            gone[shoe] += 1
        elif e["type"] == "round_start":
            out[(shoe, e["round"])] = rc[shoe] * 52 / (size[shoe] - gone[shoe])
    return out


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("counting")
    r = simulate(tmp / "logs", 2, 2, seed=4, deviation_rate=0.03, games=("mini_baccarat",),
                 counting_seat=True)
    con = db.connect(tmp / "a.duckdb")
    ingest(con, r.files, runs.start(con, "ingest", {}))
    first = audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    again = audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    rows = con.execute(
        "SELECT code, table_id, shoe, round, fingerprint, CAST(evidence AS VARCHAR) "
        "FROM current_findings"
    ).fetchall()
    con.close()
    return r, rows, first.tables["side_bets"], again.tables["side_bets"], tmp / "a.duckdb"


@pytest.mark.slow
def test_the_counting_seat_is_found_and_nothing_else(counted):
    r, rows, first, again, _ = counted
    truth = [d for d in r.deviations if d["kind"] == "counting_seat"]
    assert truth == [{"code": CODE, "table": "MB-02", "shoe": None, "round": None,
                      "kind": "counting_seat", "seat": 2, "bet": "dragon7", "shift": SHIFT}]
    flagged = [(fp, json.loads(ev)) for code, *_, fp, ev in rows if code == CODE]
    assert [fp for fp, _ in flagged] == [
        "play.side_bet_counting|MB-02|2|dragon7|2026-12-01/grave"]
    ev = flagged[0][1]
    assert (ev["table"], ev["seat"], ev["bet"], ev["shift"]) == ("MB-02", 2, "dragon7", SHIFT)
    assert ev["z"] > ev["threshold"] and ev["side_wagers"] >= 5
    # The recall contract: every planted deviation found, nothing else.
    assert Counter(row[:4] for row in rows) == Counter(
        (d["code"], d["table"], d["shoe"], d["round"]) for d in r.deviations)
    assert first["findings_new"] == 1 and (again["findings_new"], again["findings_withdrawn"]) == (
        0, 0)
    assert first["seat_shift_bets_tested"] > 1


@pytest.mark.slow
def test_the_evidence_series_is_every_round_the_seat_played_at_its_true_count(counted):
    r, rows, _, _, _ = counted
    [ev] = [json.loads(row[5]) for row in rows if row[0] == CODE]
    series = ev["series"]
    assert len(series) == ev["rounds"] > 60
    [log] = [p for p in r.files if p.name == "2026-12-01_MB-02.jsonl"]
    tags = dict(load_counts()["dragon7"].tags)
    recount = _recount(log, tags)
    played = {(e["shoe"], e["round"]) for e in _events(log)
              if e["type"] == "wager" and e["seat"] == 2}
    assert {(shoe, rnd) for shoe, rnd, _, _ in series} == played
    for shoe, rnd, tc, amount in series:
        assert tc == round(recount[(shoe, rnd)], 2)
        assert amount in ("0", "10.00", "50.00")
        assert (amount != "0") == (recount[(shoe, rnd)] >= 2)
    assert sum(a != "0" for *_, a in series) == ev["side_wagers"]


@pytest.mark.slow
def test_the_screen_in_duckdb_keeps_every_series_the_test_flags(counted):
    """The audit tests every series in DuckDB and builds in Python only those at or near the
    threshold (auditor.audit.sidebets.compute): at thresholds that flag many series, it must
    find what the Python test over every series finds, finding for finding."""
    *_, path = counted
    con = db.connect(path)
    conf = config.PropertyConfig()
    counts = load_counts()
    series = sidebets.seat_series(con, conf, counts)
    zs = sorted(t.z for s in series if (t := seat_test(s.rounds)).z is not None
                and t.rounds >= MIN_ROUNDS and t.side_wagers >= MIN_SIDE_WAGERS)
    flagged = []
    for threshold in [*zs, Z_THRESHOLD]:  # each series exactly at the cut once
        want, tested = counting_findings(series, counts, threshold=threshold)
        got, screened = sidebets.compute(con, conf, threshold=threshold)
        assert screened == tested > 1
        assert [(f.fingerprint, f.message, f.evidence, f.ts, f.pit) for f in got] == [
            (f.fingerprint, f.message, f.evidence, f.ts, f.pit) for f in want]
        flagged.append(len(got))
    con.close()
    assert flagged == [*range(len(zs), 0, -1), 1]


def test_the_true_counts_in_duckdb_are_the_counts_shoe_by_shoe(tmp_path):
    """sidebets.true_counts_sql against the Python count (load_segments, shoe_counts) on a
    table with what the count has to get right: a burn of several cards, a card found face
    up with cards burned under it, a round named twice, a shoe started again with other
    decks, a shoe never started."""
    log = Log()
    log.open("MB-01", "P1", "22:00", side_bets=["dragon7", "panda8"])
    log.shoe_start("MB-01", "22:01", "S1", decks=8)
    log.burn("MB-01", "S1", ["7h", "Kd", "2c"])
    deck = ["9s", "8d", "7c", "6h", "5s", "4d", "3c", "2h", "As", "Kc", "Qh", "Jd",
            "Ts", "9d", "8c", "7s", "6d", "5c", "4h", "3s"]
    hands = deal_rounds(deck, 0, 5)
    log.round("MB-01", "S1", 1, hands[0])
    log.face_up("MB-01", "S1", "8h", ["3d", "4c"])
    log.round("MB-01", "S1", 2, hands[1])
    log.round("MB-01", "S1", 1, hands[2])  # round 1 named again: its first count holds
    log.shoe_start("MB-01", "23:00", "S1", decks=6)
    log.round("MB-01", "S1", 3, hands[3])
    log.round("MB-01", "S2", 1, hands[4])  # S2 never started: no size, no count
    db_ = TablePassDb(tmp_path)
    db_.ingest(log)
    counts = load_counts()
    shoes = [("MB-01", "S1"), ("MB-01", "S2")]
    python = {(bet, t, s, r): c.true
              for (bet, t, s), by_round in sidebets.true_counts(db_.con, counts, shoes).items()
              for r, c in by_round.items()}
    db_.con.register("some_shoes", pa.table({"table_id": ["MB-01"] * 2, "shoe": ["S1", "S2"]}))
    with sidebets.true_counts_sql(db_.con, counts, "some_shoes") as query:
        rows = db_.con.execute(query).fetchall()
    duck = {(bet, t, s, r): x for bet, t, s, r, x in rows}
    assert duck == python
    assert sorted({k[2:] for k in duck}) == [("S1", 1), ("S1", 2), ("S1", 3)]
    # by hand, Dragon 7 (7, K, 2 burned: the 7 seen; 6 decks from the second start on):
    dragon = counts["dragon7"]
    seen = dragon.tag("7h")
    assert duck[("dragon7", "MB-01", "S1", 1)] == seen * 52 / (6 * 52 - 3)
    seen += sum(dragon.tag(card) for _, card in hands[0]) + dragon.tag("8h")
    assert duck[("dragon7", "MB-01", "S1", 2)] == seen * 52 / (6 * 52 - 3 - 4 - 3)


@pytest.mark.stats
@pytest.mark.slow
def test_clean_nights_raise_no_more_than_the_stated_false_alarm_rate(tmp_path):
    """100 nights of a Dragon 7 table (two hours of the generator's regular bettors, who
    wager on Dragon 7 and Panda 8 at random): at most FALSE_ALARM per seat, shift and bet
    tested, which over these ~1,000 tests is none."""
    logs = tmp_path / "logs"
    for k in range(100):
        spec = mini_specs(f"D{k:03d}", "P1", 1, 1)
        assert "dragon7" in spec.side_bets
        spec.opens, spec.closes = "22:00", "00:00"
        write_night(Night(SIM_DATE, dt.timedelta(hours=-5), [spec]), logs, seed=k)
    con = db.connect(tmp_path / "a.duckdb")
    ingest(con, [logs], runs.start(con, "ingest", {}))
    res = audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    found = con.execute("SELECT count(*) FROM current_findings WHERE code = ?",
                        [CODE]).fetchall()[0][0]
    con.close()
    tested = res.tables["side_bets"]["seat_shift_bets_tested"]
    assert tested > 800
    assert found <= FALSE_ALARM * tested
