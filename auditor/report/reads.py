"""The database reads the report and the board share: rows as records, and rounds' cards."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import duckdb

RoundKey = tuple[str, str, int]  # table, shoe, round
Card = tuple[int, str, str]  # seq, hand, card


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> list[dict]:
    """The result of `sql` as one dict a row, keyed by column name."""
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def round_cards(
    con: duckdb.DuckDBPyConnection, keys: Iterable[RoundKey]
) -> dict[RoundKey, list[Card]]:
    """The cards dealt in each round of `keys`, in dealing order (a round without cards is
    absent): one query however many rounds a report shows."""
    wanted = list(dict.fromkeys(keys))  # each round once, however often it is asked for
    out: dict[RoundKey, list[Card]] = defaultdict(list)
    if not wanted:
        return out
    tables, shoes, rounds = (list(column) for column in zip(*wanted, strict=True))
    for t, s, r, seq, hand, card in con.execute(
        """
        SELECT e.table_id, e.shoe, e.round, e.seq, e.to_hand, e.card
        FROM events e
        JOIN (SELECT unnest(?::VARCHAR[]) AS t, unnest(?::VARCHAR[]) AS s,
                     unnest(?::BIGINT[]) AS r) k
          ON e.table_id = k.t AND e.shoe = k.s AND e.round = k.r
        WHERE e.type = 'card'
        ORDER BY e.table_id, e.shoe, e.round, e.seq
        """,
        [tables, shoes, rounds],
    ).fetchall():
        out[(t, s, r)].append((seq, hand, card))
    return out
