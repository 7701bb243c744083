"""Rows a statement is given from Python: a poll's few as list parameters, unnested in the
statement; more as an Arrow table registered for it.

Registering a table for a statement costs about 0.8 ms whatever it holds (the scan of a
registered table included), and a poll makes a few such statements; parameters cost
about 0.5 ms less for a few rows, but about 4 us a row of six columns, ten times Arrow's, so
past FEW rows the table is registered (docs/benchmarks.md, session 57).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb
import pyarrow as pa

FEW = 256
_ARROW = {"BIGINT": pa.int64(), "VARCHAR": pa.string()}


@contextmanager
def given_rows(
    con: duckdb.DuckDBPyConnection,
    name: str,
    columns: Sequence[tuple[str, str]],
    values: Sequence[Sequence[Any]],
) -> Iterator[tuple[str, list[list[Any]]]]:
    """The relation (SQL) of rows whose columns are `columns` ((name, BIGINT or VARCHAR)),
    one sequence of `values` a column, with the parameters it takes; registered as `name`
    while the block runs when they are more than FEW."""
    if not values or len(values[0]) <= FEW:
        yield ("(SELECT " + ", ".join(f"unnest(?::{t}[]) AS {n}" for n, t in columns) + ")",
               [list(v) for v in values] if values else [[] for _ in columns])
        return
    con.register(name, pa.table({n: pa.array(v, _ARROW[t])
                                 for (n, t), v in zip(columns, values, strict=True)}))
    try:
        yield name, []
    finally:
        con.unregister(name)
