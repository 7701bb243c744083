"""auditor.audit.chemin_order: the chemin de fer rounds' order `watch` keeps from poll to poll
must be the events' own order (read_orders, what a batch audit reads) from its floor on,
whatever the polls bring: new rounds, events of rounds begun long before, events stamped
out of their seq order, a key logged again under an old shoe's name, cut cards."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from auditor.audit import chemin_order
from auditor.audit.chemin_order import CheminTails, read_orders
from auditor.store import db

TABLES = ("CF-01", "CF-02")


_COLUMNS = ("source_id", "line_no", "stream", "seq", "type", "table_id", "shoe", "round")


def _insert(con, rows: list[tuple]) -> None:
    con.register("new_rows", pa.table({c: [r[i] for r in rows] for i, c in enumerate(_COLUMNS)}))
    con.execute(f"INSERT INTO events ({', '.join(_COLUMNS)}, raw) "
                f"SELECT {', '.join(_COLUMNS)}, '{{}}' FROM new_rows")
    con.unregister("new_rows")


class _Log:
    """Round events written straight into `events`, poll by poll, with what a Poll says of
    them (auditor.ingest.follow.Poll.round_seqs, .cut_cards)."""

    def __init__(self, con, rng: random.Random) -> None:
        self.con, self.rng = con, rng
        self.top = {t: 0 for t in TABLES}  # last seq used, by 10s: gaps left to fill later
        self.free: dict[str, list[int]] = {t: [] for t in TABLES}  # seqs left free
        self.shoe = {t: 1 for t in TABLES}
        self.round = {t: 0 for t in TABLES}
        self.keys: list[tuple[str, str, int]] = []
        self.rows: list[tuple] = []
        self.line = 0

    def _seq(self, t: str, late: bool) -> int:
        if late and self.free[t]:
            return self.free[t].pop(self.rng.randrange(len(self.free[t])))
        self.top[t] += 10
        self.free[t] += [self.top[t] - d for d in (3, 6)]
        return self.top[t]

    def event(self, t: str, shoe: str, rnd: int, type_: str, late: bool = False) -> None:
        self.line += 1
        self.rows.append((1, self.line, f"table:{t}", self._seq(t, late), type_, t, shoe, rnd))

    def new_round(self, t: str) -> None:
        if self.round[t] and self.rng.random() < 0.15:
            self.shoe[t] += 1
            self.round[t] = 0
        self.round[t] += 1
        shoe, rnd = f"{t}-S{self.shoe[t]}", self.round[t]
        self.keys.append((t, shoe, rnd))
        for type_ in ("round_start", "card", "card", "round_end"):
            self.event(t, shoe, rnd, type_)
        if self.rng.random() < 0.1:
            self.event(t, shoe, rnd, "cut_card")

    def poll(self) -> tuple[dict[tuple[str, str, int], int], set[tuple[str, str, int]]]:
        if self.rows:
            _insert(self.con, self.rows)
        seqs: dict[tuple[str, str, int], int] = {}
        cuts: set[tuple[str, str, int]] = set()
        for *_, seq, type_, t, shoe, rnd in self.rows:
            if type_ == "cut_card":
                cuts.add((t, shoe, rnd))
            else:
                seqs[(t, shoe, rnd)] = min(seq, seqs.get((t, shoe, rnd), seq))
        self.rows = []
        return seqs, cuts


@pytest.mark.parametrize("seed", range(4))
def test_the_kept_order_is_the_events_order_from_its_floor_on(tmp_path, monkeypatch, seed):
    monkeypatch.setattr(chemin_order, "TAIL_ROUNDS", 5)
    monkeypatch.setattr(chemin_order, "TRIM_AT", 3)
    rng = random.Random(seed)
    con = db.connect(tmp_path / "o.duckdb")
    log, tails = _Log(con, rng), CheminTails()
    served = read_again = 0
    for step in range(120):
        for _ in range(rng.randint(0, 3)):
            log.new_round(rng.choice(TABLES))
        if log.keys and rng.random() < 0.3:  # an event of a round begun before, or long before
            t, shoe, rnd = rng.choice(log.keys[-40:] if rng.random() < 0.7 else log.keys)
            log.event(t, shoe, rnd, rng.choice(("card", "pay", "cut_card")),
                      late=rng.random() < 0.5)
        if log.keys and rng.random() < 0.05:  # a key logged again under an old shoe's name
            t, shoe, _ = rng.choice(log.keys)
            log.event(t, shoe, 999 + step, "round_start")
            log.keys.append((t, shoe, 999 + step))
        tails.loaded(*log.poll())
        if not log.keys:
            continue
        todo = set(rng.sample(log.keys[-6:], min(3, len(log.keys))))
        if rng.random() < 0.1:
            todo.add(rng.choice(log.keys))
        tables = sorted({k[0] for k in todo})
        orders, cuts, from_floor = tails.orders(con, tables, todo)
        full, full_cuts = read_orders(con, tables)
        for t in tables:
            every = [k for k, _ in full[t]]
            assert orders[t] == every[len(every) - len(orders[t]):], (step, t)
            assert {k for k in todo if k[0] == t} <= set(orders[t])
            if t in from_floor:
                served += len(orders[t]) < len(every)  # a suffix indeed
            else:
                read_again += len(orders[t]) == len(every)
        for t, shoe, _ in todo:
            assert cuts.get((t, shoe)) == full_cuts.get((t, shoe)), (step, t, shoe)
    assert served > 20 and read_again > 0  # both ways were taken


def test_a_round_that_may_look_back_past_what_is_kept_gets_its_tables_whole_order(
    tmp_path, monkeypatch
):
    """Kept: the last shoe of CF-01 (TAIL_ROUNDS 1). Its first round, judged again, would
    find nothing before it in what is kept; its History must still be the batch's: the
    previous shoe's last round (a Player win), and past a stand off the round before."""
    from decimal import Decimal

    from auditor.audit.chemin_history import CheminHistory
    from auditor.replay.chemin_model import RoundFacts
    from auditor.rules.pack import PackCache

    monkeypatch.setattr(chemin_order, "TAIL_ROUNDS", 1)
    con = db.connect(tmp_path / "o.duckdb")
    rows = [(1, i, "table:CF-01", i, "round_start", "CF-01", shoe, rnd)
            for i, (shoe, rnd) in enumerate(
                [("S1", 1), ("S1", 2), ("S2", 1), ("S2", 2), ("S2", 3)], start=1)]
    _insert(con, rows)
    tails = CheminTails()
    tails.read(con, ["CF-01"])
    facts = {("CF-01", "S1", 1): RoundFacts("S1", 1, 3, Decimal(100), "player"),
             ("CF-01", "S1", 2): RoundFacts("S1", 2, 3, Decimal(100), "tie"),
             ("CF-01", "S2", 2): RoundFacts("S2", 2, 3, Decimal(100), "banker")}
    con.execute("CREATE TEMP TABLE todo AS SELECT 'CF-01' AS table_id, 'S2' AS shoe, "
                "1::BIGINT AS round, 'chemin_de_fer' AS game")
    h = CheminHistory.load(con, PackCache(), facts, tails)
    assert h.order["CF-01"] == [("CF-01", s, r) for _, _, _, _, _, _, s, r in rows]
    got = h.before(("CF-01", "S2", 1))
    assert (got.previous, got.counted) == (facts[("CF-01", "S1", 2)], facts[("CF-01", "S1", 1)])
    # its shoe's last round looks back no further than the one before it: what is kept
    con.execute("UPDATE todo SET round = 3")
    h = CheminHistory.load(con, PackCache(), facts, tails)
    assert h.order["CF-01"] == [("CF-01", "S2", r) for r in (1, 2, 3)]
