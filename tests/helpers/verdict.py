"""Hand-written rounds through the fast verdict, to hold it to its contract: a round it calls
clean gets no finding from check_round.

The round tests give check_round rounds written event by event; `Witness` keeps each (context,
events, findings), and `judge` puts them in a DuckDB events table as ingest would (one table
per round), builds their facts (auditor.audit.facts) and asks the verdict. Rounds ingest could
never hold (a repeated seq, an amount with more than two places, a negative number) are left
out: the audit never gives the verdict such a round.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest

from auditor.audit import facts
from auditor.finding import Finding
from auditor.replay import verdict
from auditor.replay.model import Event, TableContext
from auditor.store.events import ROUND_EVENTS

_COLUMNS: dict[str, pa.DataType] = {
    "table_id": pa.string(),
    "shoe": pa.string(),
    "round": pa.int64(),
    "seq": pa.int64(),
    "type": pa.string(),
    "to_hand": pa.string(),
    "card": pa.string(),
    "seat": pa.int64(),
    "bet": pa.string(),
    "amount": pa.decimal128(18, 2),
    "kind": pa.string(),
    "player_count": pa.int64(),
    "banker_count": pa.int64(),
    "winner": pa.string(),
    "count": pa.int64(),
}


def ingestible(events: Sequence[Event]) -> bool:
    """Whether ingest could have stored these events as they are (else the audit never
    gives them to the verdict)."""
    if not events or len({e.seq for e in events}) != len(events):
        return False
    for e in events:
        if e.type not in ROUND_EVENTS:
            return False
        ints = (e.seq, e.seat, e.player, e.banker, e.count)
        if any(v is not None and (not isinstance(v, int) or v < 0) for v in ints):
            return False
        if e.amount is not None and (
            e.amount < 0 or e.amount != e.amount.quantize(Decimal("0.01"))
        ):
            return False
    return True


def judge(rounds: Sequence[tuple[TableContext, Sequence[Event]]]) -> list[bool | None]:
    """Per round: whether the verdict calls it clean (None: it never reaches the verdict:
    a chemin de fer table, a pack the verdict does not encode, events ingest would refuse)."""
    out: list[bool | None] = [None] * len(rounds)
    all_terms: list[verdict.Terms] = []
    rows: dict[str, list] = {c: [] for c in _COLUMNS}
    heads: list[tuple] = []
    for i, (ctx, events) in enumerate(rounds):
        if ctx.game == "chemin_de_fer" or not ingestible(events):
            continue
        t = verdict.terms(ctx)
        if isinstance(t, str):
            continue
        all_terms.append(t)
        table = f"T{i}"
        ordered = sorted(events, key=lambda e: e.seq)
        for e in ordered:
            for c, v in (
                ("table_id", table), ("shoe", "S1"), ("round", 1), ("seq", e.seq),
                ("type", e.type), ("to_hand", e.to), ("card", e.card), ("seat", e.seat),
                ("bet", e.bet), ("amount", e.amount), ("kind", e.kind),
                ("player_count", e.player), ("banker_count", e.banker),
                ("winner", e.winner), ("count", e.count),
            ):
                rows[c].append(v)
        heads.append((i, table, ordered[0].seq, ordered[-1].seq, len(ordered), len(all_terms) - 1))
    if not heads:
        return out
    con = duckdb.connect()
    try:
        con.register("ev", pa.table({c: pa.array(v, t) for c, v in rows.items()
                                     for t in [_COLUMNS[c]]}))
        con.execute("CREATE TABLE events AS SELECT * FROM ev")
        con.register("rs", pa.table({
            "rid": pa.array(range(1, len(heads) + 1), pa.int64()),
            "table_id": [h[1] for h in heads],
            "shoe": ["S1"] * len(heads),
            "round": pa.array([1] * len(heads), pa.int64()),
            "first_seq": pa.array([h[2] for h in heads], pa.int64()),
            "last_seq": pa.array([h[3] for h in heads], pa.int64()),
            "n": pa.array([h[4] for h in heads], pa.int64()),
            "ctx": pa.array([h[5] for h in heads], pa.int64()),
        }))
        con.execute("CREATE TABLE todo_fast AS SELECT * FROM rs")
        r, s = facts.build(con, "todo_fast")
    finally:
        con.close()
    for (i, *_), ok in zip(heads, verdict.clean(r, s, all_terms), strict=True):
        out[i] = bool(ok)
    return out


@dataclass
class Witness:
    """The rounds a test module gave check_round (each with the test that gave it), judged by
    the verdict together when the module's tests have run."""

    pending: list[tuple[str, TableContext, list[Event], list[Finding]]] = field(
        default_factory=list
    )
    clean: int = 0
    flagged: int = 0

    def record(self, ctx: TableContext, events: Sequence[Event], found: list[Finding]) -> None:
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
        self.pending.append((test, ctx, list(events), list(found)))

    def check(self) -> None:
        """The contract: no round called clean has a finding."""
        pending, self.pending = self.pending, []
        verdicts = judge([(ctx, events) for _, ctx, events, _ in pending])
        for (test, _, events, found), ok in zip(pending, verdicts, strict=True):
            if ok is None:
                continue
            if ok:
                self.clean += 1
                assert not found, (
                    f"{test}: the verdict called a round clean that check_round finds "
                    f"{[f.code for f in found]} in: "
                    + "; ".join(
                        f"{e.seq} {e.type} {e.to or ''}{e.card or ''} {e.seat} {e.bet} "
                        f"{e.amount} {e.kind or ''}"
                        for e in events
                    )
                )
            else:
                self.flagged += 1


def witness_after_the_module(witness: Witness) -> Callable[[], Iterator[None]]:
    """An autouse fixture for a test module: once its tests have run (on this process), the
    rounds they gave check_round (witness.record) go to the verdict (witness.check) in one
    DuckDB database. The facts' statements cost the same for one round as for a thousand
    (~0.5 s of CPU): judged after each test, they were most of test_round's time. A round
    that breaks the contract fails the module's last test's teardown, naming its test."""

    @pytest.fixture(autouse=True, scope="module")
    def _verdict_witness() -> Iterator[None]:
        yield
        witness.check()

    return _verdict_witness
