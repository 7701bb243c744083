"""Arrow columns read back as Python values, where pyarrow's own conversion is slow.

The audit hands the replay its events as Python objects. pyarrow makes a datetime of a
time zone's timestamp at about 8 µs a value (DuckDB's fetchall at about 4 µs), most of what
reading a flagged round's events cost; the same datetime made from the integer microseconds
costs a fifth of that. The values are the ones pyarrow gives: equal, in the same zone object.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa

# pyarrow names a UTC column's zone by its key and gives zoneinfo's object for it.
_UTC = ZoneInfo("UTC")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=_UTC)
_MICROS = dt.timedelta(microseconds=1)


def utc_times(col: pa.Array | pa.ChunkedArray) -> list[dt.datetime | None]:
    """A `timestamp[us, tz=UTC]` column as datetimes (None for a null); any other type of
    column as pyarrow converts it."""
    t = col.type
    if not (pa.types.is_timestamp(t) and t.unit == "us" and t.tz == "UTC"):
        return col.to_pylist()
    return [None if m is None else _EPOCH + m * _MICROS
            for m in col.cast(pa.int64()).to_pylist()]


def py_columns(batch: pa.RecordBatch | pa.Table) -> dict[str, list[Any]]:
    """`batch.to_pydict()`, its UTC times made by `utc_times`. Of two columns of one name the
    last is kept, as to_pydict keeps it."""
    return {
        name: utc_times(col) if pa.types.is_timestamp(col.type) else col.to_pylist()
        for name, col in zip(batch.schema.names, batch.columns, strict=True)
    }
