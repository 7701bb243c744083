"""Arrow columns as Python values (auditor/store/columns.py): the same values pyarrow gives."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest

from auditor.audit.event_rows import event_at
from auditor.replay.model import Event
from auditor.store.columns import py_columns, utc_times


@pytest.fixture
def times() -> pa.Table:
    """Times as DuckDB hands them to the audit (its session in UTC, as db.connect sets)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    return con.sql(
        """
        SELECT * FROM (VALUES
          (1, TIMESTAMPTZ '2026-11-28 23:59:59.999999+00', 'a'),
          (2, TIMESTAMPTZ '2026-11-29 04:00:00.000001-05', 'b'),
          (3, NULL, NULL),
          (4, TIMESTAMPTZ '0001-01-01 00:00:00+00', 'd'),
          (5, TIMESTAMPTZ '9999-12-31 23:59:59.999999+00', 'e'),
          (6, TIMESTAMPTZ '1969-12-31 23:59:59.999999+00', 'f')
        ) t(seq, ts, shoe)
        """
    ).to_arrow_table()


def test_utc_times_are_pyarrows_datetimes_in_the_same_zone(times: pa.Table) -> None:
    ts = times.column("ts")
    assert ts.type == pa.timestamp("us", tz="UTC")
    got, want = utc_times(ts), ts.to_pylist()
    assert got == want
    assert got[1] == dt.datetime(2026, 11, 29, 9, 0, 0, 1, tzinfo=dt.UTC)
    assert got[2] is None
    assert [g.tzinfo for g in got if g] == [w.tzinfo for w in want if w]
    assert [g.isoformat() for g in got if g] == [w.isoformat() for w in want if w]


def test_a_column_not_in_utc_microseconds_is_converted_by_pyarrow() -> None:
    other = pa.array([0, 1_000], pa.timestamp("ms", tz="America/New_York"))
    assert utc_times(other) == other.to_pylist()
    assert utc_times(pa.array([1, None])) == [1, None]


def test_py_columns_is_to_pydict(times: pa.Table) -> None:
    twice = pa.table([times.column("seq"), times.column("shoe"), times.column("ts"),
                      pa.array(["x"] * times.num_rows)], names=["seq", "shoe", "ts", "shoe"])
    for batch in (times, twice, twice.to_batches()[0]):
        assert py_columns(batch) == batch.to_pydict()
    assert py_columns(twice)["shoe"] == ["x"] * 6  # the last of two names, as to_pydict


def test_an_event_row_fills_each_field_from_its_own_column() -> None:
    """`_replay` builds an Event from the columns by position: each field gets its column."""
    when = dt.datetime(2026, 11, 28, tzinfo=dt.UTC)
    row = {"seq": 7, "type": "pay", "ts": when,
           "source": "f.jsonl:9", "to_hand": "player", "card": "Ts", "seat": 3, "bet": "banker",
           "amount": Decimal("19.00"), "kind": "k", "player_count": 4, "banker_count": 5,
           "winner": "banker", "count": 6, "mode": "m", "void_reason": "r",
           "disposition": "d", "shoe": "S1", "round": 12}
    e = event_at({k: [v] for k, v in row.items()}, 0)
    assert e == Event(seq=7, type="pay", ts=when, source="f.jsonl:9", to="player",
                      card="Ts", seat=3, bet="banker", amount=Decimal("19.00"), kind="k",
                      player=4, banker=5, winner="banker", count=6, mode="m", reason="r",
                      disposition="d", shoe="S1", round=12)
