"""A poll's rounds replayed from the rows `watch` holds are the rounds read back from `events`
(auditor.audit.round_rows, issue 32).

A lying night of every game is written into a spool in parts, a poll of `watch` after each,
a sweep every few (its stream check writes the ordered times of the lying clocks), the watch
started again late in the night, the resent files after it. Whenever the held rows answer
for a poll's rounds, the read they stand for (round_events_sql over the same `todo`, bounded
alike) runs too, and both must give the same values in the same order, down to their types;
when they cannot answer, the poll reads back as before."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from decimal import Decimal
from typing import Any

import duckdb
from helpers.rules import panda8_rules
from helpers.watched import watched_in_parts

from auditor.audit import round_rows
from auditor.audit.listed import make_todo
from auditor.audit.round_rows import RoundRows
from auditor.audit.rounds import round_events_sql
from auditor.jobs.watch import Watch
from auditor.simulate.feed import schedule
from auditor.simulate.layout import GAMES
from auditor.simulate.planted import simulate
from auditor.store import db
from auditor.store.columns import py_columns

UTC = dt.UTC


def _read(con: duckdb.DuckDBPyConnection, since: dt.datetime | None) -> dict[str, list[Any]]:
    """What the replay reads for the listed path's `todo`, as it reads it."""
    return py_columns(con.sql(round_events_sql("todo", since is not None, excluded=False),
                              params=None if since is None else [since]).to_arrow_table())


def _typed(cols: dict[str, list[Any]]) -> dict[str, list[str]]:
    return {k: [repr(v) for v in vals] for k, vals in sorted(cols.items())}


def test_held_rounds_are_the_rounds_read_back(tmp_path, monkeypatch):
    panda8_rules(tmp_path, monkeypatch)
    r = simulate(tmp_path / "logs", tables=5, hours=1.5, seed=3, deviation_rate=0.05,
                 games=GAMES, lying=True)
    seen: Counter[str] = Counter()
    columns = RoundRows.columns

    def both(self, con, todo, since):
        got = columns(self, con, todo, since)
        seen["polls"] += 1
        if got is None:
            seen["read back"] += 1
            return None
        make_todo(con, list(todo))  # not made for the replay when held
        assert _typed(got) == _typed(_read(con, since))
        seen["held"] += 1
        seen["rounds held"] += len(todo)
        seen["events held"] += len(got["seq"])
        seen["bounded"] += since is not None
        seen["amounts"] += sum(isinstance(a, Decimal) for a in got["amount"])
        return got

    monkeypatch.setattr(round_rows.RoundRows, "columns", both)
    lines = schedule(list(r.files), 1.0, later=[f for f in r.files if ".resent." in f.name])
    con = db.connect(tmp_path / "live.duckdb")
    spool = tmp_path / "spool"
    spool.mkdir()
    ordered_seen = [0]

    def sweep(w: Watch, part: int) -> None:
        if part % 6 == 5:
            w.sweep()
            ordered_seen.append(len(w._held._ordered))

    watched_in_parts(con, spool, lines, r.later, 60, 45, sweep)
    assert seen["held"] > 30 and seen["rounds held"] > 100, seen
    assert seen["read back"] > 0 and seen["bounded"] > 0 and seen["amounts"] > 100, seen
    assert max(ordered_seen) > 0  # the lying clocks gave some events an ordered time
    con.close()


def _rows(table: str, shoe: str, rnd: int, seqs: list[int], source: int = 1) -> Any:
    import pyarrow as pa

    n = len(seqs)
    at = dt.datetime(2026, 11, 28, 3, 0, tzinfo=UTC)
    return pa.table({
        "table_id": [table] * n, "shoe": [shoe] * n, "round": pa.array([rnd] * n, pa.int64()),
        "seq": pa.array(seqs, pa.int64()), "type": ["card"] * n,
        "ts": pa.array([at + dt.timedelta(seconds=s) for s in seqs],
                       pa.timestamp("us", tz="UTC")),
        "source_id": pa.array([source] * n, pa.int64()),
        "line_no": pa.array(seqs, pa.int64()),
        **{c: pa.nulls(n, pa.string()) for c in (
            "to_hand", "card", "bet", "kind", "winner", "mode", "void_reason", "disposition",
            "hand", "choice", "dealer")},
        **{c: pa.nulls(n, pa.int64()) for c in (
            "seat", "player_count", "banker_count", "count", "from_seat", "to_seat")},
        "amount": pa.nulls(n, pa.decimal128(18, 2)),
    })


def _todo(table: str, shoe: str, rnd: int, first: int, last: int, n: int) -> tuple:
    return (table, shoe, rnd, first, last, n, None, "P1", "mini_baccarat", "nj", "standard",
            7, None, None, False, False)


def test_a_round_is_held_only_whole_and_without_ordered_times(tmp_path):
    """Columns come only when every listed round's count and seq range are those held and no
    event of it has an ordered time; a round judged is no longer held."""
    con = db.connect(tmp_path / "a.duckdb")
    con.execute("INSERT INTO sources (id, path, sha256, size, lines, events, quarantined, "
                "duplicates, note, status, run_id, ingested_at) VALUES "
                "(1, 'logs/T1.jsonl', 'x', 1, 1, 1, 0, 0, '', 'ingested', 1, now())")
    held = RoundRows()
    held.loaded([_rows("T1", "S1", 1, [5, 3, 4]), _rows("T1", "S1", 2, [7, 8])])
    cols = held.columns(con, [_todo("T1", "S1", 2, 7, 8, 2), _todo("T1", "S1", 1, 3, 5, 3)],
                        None)
    assert cols is not None
    assert list(zip(cols["round"], cols["seq"], cols["source"], strict=True)) == [
        (1, 3, "logs/T1.jsonl:3"), (1, 4, "logs/T1.jsonl:4"), (1, 5, "logs/T1.jsonl:5"),
        (2, 7, "logs/T1.jsonl:7"), (2, 8, "logs/T1.jsonl:8")]
    assert cols["n"] == [3, 3, 3, 2, 2] and cols["last_seq"] == [5, 5, 5, 8, 8]
    assert cols["seats"] == [7] * 5 and cols["game"] == ["mini_baccarat"] * 5
    # an event not held (another path, before the watch): the count differs
    assert held.columns(con, [_todo("T1", "S1", 1, 2, 5, 4)], None) is None
    assert held.columns(con, [_todo("T1", "S1", 1, 3, 6, 3)], None) is None  # last seq
    assert held.columns(con, [_todo("T1", "S1", 3, 9, 9, 1)], None) is None  # none held
    # bounded: the events stamped before `since` are not counted, nor given
    since = dt.datetime(2026, 11, 28, 3, 0, 4, tzinfo=UTC)
    cols = held.columns(con, [_todo("T1", "S1", 1, 4, 5, 2)], since)
    assert cols is not None and cols["seq"] == [4, 5]
    # an ordered time at or past a round's first seq: read back
    con.execute("INSERT INTO ordered_times VALUES ('table:T1', 6, now())")
    held.ordered(con)
    assert held.columns(con, [_todo("T1", "S1", 2, 7, 8, 2)], None) is not None
    assert held.columns(con, [_todo("T1", "S1", 1, 3, 5, 3)], None) is None
    held.forget([("T1", "S1", 2)])
    assert held.columns(con, [_todo("T1", "S1", 2, 7, 8, 2)], None) is None
    con.close()


def _typed_rows(table: str, shoe: str, rnd: int, seqs: list[int], types: list[str]) -> Any:
    import pyarrow as pa

    rows = _rows(table, shoe, rnd, seqs)
    return rows.set_column(rows.schema.get_field_index("type"), "type", pa.array(types))


def test_spans_come_from_what_is_held_only_when_nothing_else_can_stand_there(monkeypatch):
    """listed's spans (first and last seq, events, earliest stamp, round_end's seq, last seq
    but a bank_pass, round_starts) over the rows stamped at or after `since`; None for a
    round given a row not held, let go of, or with a row on record before the watch that
    late, and without a bound."""
    at = dt.datetime(2026, 11, 28, 3, 0, tzinfo=UTC)
    s = dt.timedelta(seconds=1)
    a, b, c = ("T1", "S1", 1), ("T1", "S1", 2), ("T2", "S1", 1)
    held = RoundRows(stamped_to=at + 2 * s)
    held.loaded([_typed_rows("T1", "S1", 1, [3, 4, 5, 6, 7],
                             ["round_start", "card", "card", "round_end", "bank_pass"])])
    held.loaded([_typed_rows("T1", "S1", 2, [9, 8], ["card", "round_start"]),
                 _typed_rows("T2", "S1", 1, [4], ["round_start"])], touched=[a, b, c],
                unheld=[c])
    assert held.spans([a], at + 3 * s) == [(*a, 3, 7, 5, at + 3 * s, 6, 6, 1)]
    assert held.spans([a, b], at + 5 * s) == [
        (*a, 5, 7, 3, at + 5 * s, 6, 6, 0), (*b, 8, 9, 2, at + 8 * s, None, 9, 1)]
    assert held.spans([a], at + 8 * s) is None  # none of it stamped that late: read
    assert held.spans([a], None) is None
    assert held.spans([a], at + 2 * s) is None  # an event before the watch may be as late
    assert held.spans([a, c], at + 3 * s) is None  # c was given a row not held
    assert held.spans([("T9", "S1", 1)], at + 3 * s) is None  # never held
    # a poll too large to hold: every round it touched is read from then on
    monkeypatch.setattr(round_rows, "ROWS_HELD", 1)
    held.loaded([_typed_rows("T1", "S1", 2, [10, 11], ["card", "round_end"])], touched=[b])
    assert held.spans([b], at + 3 * s) is None
    assert held.spans([a], at + 3 * s) is not None
    # rounds let go of, the oldest first, past ROUNDS_HELD: read
    monkeypatch.setattr(round_rows, "ROWS_HELD", 50_000)
    monkeypatch.setattr(round_rows, "ROUNDS_HELD", 2)
    d = ("T3", "S1", 2)
    held.loaded([_typed_rows("T3", "S1", 1, [10], ["round_start"]),
                 _typed_rows(*d, [20], ["round_start"])])
    assert held.spans([a], at + 3 * s) is None
    assert held.spans([d], at + 3 * s) == [(*d, 20, 20, 1, at + 20 * s, None, 20, 1)]
    # rounds judged are not remembered; past UNHELD_KEPT rounds remembered, no spans at all
    # for the rest of the watch
    monkeypatch.setattr(round_rows, "UNHELD_KEPT", 4)
    held.forget([a, b, c])
    held.loaded([], unheld=[("T8", "S1", i) for i in range(3)])
    assert held.spans([d], at + 3 * s) is not None
    held.loaded([], unheld=[("T8", "S1", 3), ("T8", "S1", 4)])
    assert held.spans([d], at + 3 * s) is None
