"""What the report covers (Scope) and what more than one of its sections reads (Basis): the
tables in scope, their rule packs, the findings with their acknowledgements, the last 30
gaming days; read once per report.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import duckdb

from auditor.audit import dealers as dealer_counts
from auditor.config import PropertyConfig
from auditor.errors import UserError
from auditor.report import reads
from auditor.rules.codes import SEVERITIES
from auditor.rules.pack import PackCache, RulePack, card_values
from auditor.store import findings
from auditor.store.acks import latest_acks


@dataclass(frozen=True)
class Scope:
    """What a report covers: a UTC window, optionally one pit or table."""

    title: str
    slug: str
    start: dt.datetime
    end: dt.datetime
    zone: dt.tzinfo
    pit: str | None = None
    table: str | None = None


def _tables_in_scope(con: duckdb.DuckDBPyConnection, scope: Scope) -> list[dict]:
    """Tables with a round in the window, with what their latest table_open declared."""
    return reads.rows(
        con,
        """
        WITH active AS (
          SELECT table_id, count(DISTINCT (shoe, round)) AS rounds FROM events
          WHERE type = 'round_start' AND ts >= ? AND ts < ? GROUP BY table_id
        ), opened AS (
          SELECT DISTINCT ON (table_id) table_id, pit, game, jurisdiction, variant, seats,
                 side_bets, procedure
          FROM events WHERE type = 'table_open' AND ts < ? ORDER BY table_id, seq DESC
        )
        SELECT a.table_id, a.rounds, o.pit, o.game, o.jurisdiction, o.variant, o.seats,
               o.side_bets, o.procedure
        FROM active a LEFT JOIN opened o USING (table_id)
        WHERE (? IS NULL OR o.pit = ?) AND (? IS NULL OR a.table_id = ?)
        ORDER BY o.pit, a.table_id
        """,
        [scope.start, scope.end, scope.end, scope.pit, scope.pit, scope.table, scope.table],
    )


def _load_packs(
    tables: list[dict], cache: PackCache
) -> dict[tuple[str, str], RulePack | None]:
    """The rule pack of each (jurisdiction, game) in scope, in table order; None: no usable
    pack."""
    return {(t["jurisdiction"], t["game"]): cache.get(t["jurisdiction"], t["game"])
            for t in tables}


def _scope_findings(con: duckdb.DuckDBPyConnection, scope: Scope, tables: set[str]) -> list[dict]:
    rows = findings.select(con, window=(scope.start, scope.end), zone=scope.zone, dealer=True)
    pits = {scope.pit} if scope.pit else None
    kept = []
    for f in rows:
        if f["table"] is not None:
            if f["table"] in tables:
                kept.append(f)
        elif scope.table is None and (pits is None or f["pit"] in pits):
            kept.append(f)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    kept.sort(key=lambda f: (order[f["severity"]], f["ts"], f["table"] or "", f["seq"] or 0))
    return kept


def hour_ticks(scope: Scope) -> list[dt.datetime]:
    """The whole hours of the window (every third past 12 hours), for the charts' axes."""
    first = scope.start.replace(minute=0, second=0, microsecond=0)
    if first < scope.start:
        first += dt.timedelta(hours=1)
    ticks, t = [], first
    step = dt.timedelta(hours=1 if (scope.end - scope.start) <= dt.timedelta(hours=12) else 3)
    while t <= scope.end:
        ticks.append(t)
        t += step
    return ticks


@dataclass(frozen=True)
class Basis:
    """What more than one section reads, read once: every section sees the same tables and
    the same findings (acknowledgements attached), in the same order."""

    con: duckdb.DuckDBPyConnection
    conf: PropertyConfig
    scope: Scope
    tables: list[dict]  # _tables_in_scope: one row a table, pit then table order
    names: set[str]
    rounds: int
    packs: dict[tuple[str, str], RulePack | None]
    pack_cache: PackCache  # every pack the report looked up, for any other it needs
    any_pack: RulePack | None  # card values and video retention come from the first pack
    values: Mapping[str, int]
    found: list[dict]  # gravest first, each with its `ack`
    per_table_findings: Counter[str]
    # The property's last HISTORY_DAYS gaming days, ending with the scope's end: the By
    # dealer page's comparison and the trend (one pair of grouped queries for both).
    history: dealer_counts.History


def read_basis(con: duckdb.DuckDBPyConnection, conf: PropertyConfig, scope: Scope) -> Basis:
    """The Basis of a report on `scope`; a UserError when no round was dealt in it."""
    tables = _tables_in_scope(con, scope)
    if not tables:
        raise UserError(
            f"no rounds in the {scope.title} ({scope.start.astimezone(scope.zone):%Y-%m-%d %H:%M}"
            f" to {scope.end.astimezone(scope.zone):%Y-%m-%d %H:%M}): nothing to report; "
            "check the date, shift and that its logs were ingested"
        )
    names = {t["table_id"] for t in tables}
    pack_cache = PackCache()
    packs = _load_packs(tables, pack_cache)
    any_pack = next((p for p in packs.values() if p), None)
    values = card_values(any_pack)
    found = _scope_findings(con, scope, names)
    _attach_acks(con, found, scope.zone)
    return Basis(
        con=con,
        conf=conf,
        scope=scope,
        tables=tables,
        names=names,
        rounds=sum(t["rounds"] for t in tables),
        packs=packs,
        pack_cache=pack_cache,
        any_pack=any_pack,
        values=values,
        found=found,
        per_table_findings=Counter(f["table"] for f in found if f["table"]),
        history=dealer_counts.history(
            con, conf, scope.zone, dealer_counts.gaming_day_of(scope.start, conf, scope.zone),
            until=scope.end,
        ),
    )


def _attach_acks(con: duckdb.DuckDBPyConnection, found: list[dict], zone: dt.tzinfo) -> None:
    """Give each finding its standing acknowledgement (`ack`: who, what was decided, when,
    or None), so the officer signing sees what has been dealt with. The time is the one
    recorded in the database, never the clock of the render, so the report stays
    deterministic."""
    acks = latest_acks(con)
    for f in found:
        a = acks.get(f["fingerprint"])
        f["ack"] = None if a is None else {
            "id": a.id,
            "by": a.reviewer,
            "disposition": a.disposition,
            "note": a.note,
            "at": a.recorded_at.astimezone(zone),
        }
