"""The Tables section: each table's money (handle, win, hold against the rule pack's
theoretical hold) and the round outcomes counted from the cards against their exact odds.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

import duckdb

from auditor.report import charts, formatting
from auditor.report.basis import Basis, Scope
from auditor.report.formatting import (
    listing,
    money,
    pct,
)
from auditor.rules.pack import RulePack


def _money(
    con: duckdb.DuckDBPyConnection, scope: Scope
) -> tuple[dict[str, dict], dict[str, dict[str, Decimal]]]:
    """The money of each table's rounds started in the window (handle, collected, paid, vig,
    commission) and its wagers by bet, in one read of the events: read apart, the two took
    16 s of a 10M-round day's report."""
    money: dict[str, dict] = {}
    by_bet: dict[str, dict[str, Decimal]] = defaultdict(dict)
    for t, bet, wagered, handle, collected, paid, vig, commission, whole in con.execute(
        """
        WITH r AS (
          SELECT DISTINCT table_id, shoe, round FROM events
          WHERE type = 'round_start' AND ts >= ? AND ts < ?
        )
        SELECT e.table_id, e.bet,
               sum(amount) FILTER (type = 'wager'),
               coalesce(sum(amount) FILTER (type IN ('wager', 'banco')), 0),
               coalesce(sum(amount) FILTER (type = 'collect'), 0),
               coalesce(sum(amount) FILTER (type = 'pay'), 0),
               coalesce(sum(amount) FILTER (type = 'vig'), 0),
               coalesce(sum(amount) FILTER (type = 'commission'), 0),
               grouping(e.bet) = 1
        FROM events e JOIN r USING (table_id, shoe, round)
        WHERE e.type IN ('wager', 'banco', 'collect', 'pay', 'vig', 'commission')
        GROUP BY GROUPING SETS ((e.table_id), (e.table_id, e.bet))
        """,
        [scope.start, scope.end],
    ).fetchall():
        if whole:
            money[t] = {"table_id": t, "handle": handle, "collected": collected, "paid": paid,
                        "vig": vig, "commission": commission}
        elif wagered is not None:
            by_bet[t][bet] = wagered
    return money, by_bet


def _decks_by_table(con: duckdb.DuckDBPyConnection, scope: Scope) -> dict[str, int]:
    return dict(
        con.execute(
            "SELECT table_id, mode(decks) FROM events WHERE type = 'shoe_start' AND ts < ? "
            "GROUP BY table_id",
            [scope.end],
        ).fetchall()
    )


def _outcomes(
    con: duckdb.DuckDBPyConnection, scope: Scope, values: Mapping[str, int]
) -> dict[str, Counter[str]]:
    """Winner of every round in the window, from the cards dealt (not the announcements)."""
    case = " ".join(f"WHEN '{rank}' THEN {v}" for rank, v in values.items())
    out: dict[str, Counter[str]] = defaultdict(Counter)
    for t, winner, n in con.execute(
        f"""
        WITH r AS (
          SELECT DISTINCT table_id, shoe, round FROM events
          WHERE type = 'round_start' AND ts >= ? AND ts < ?
        ), hands AS (
          SELECT e.table_id, e.shoe, e.round,
                 sum(CASE left(e.card, 1) {case} END) FILTER (e.to_hand = 'player') % 10 AS p,
                 sum(CASE left(e.card, 1) {case} END) FILTER (e.to_hand = 'banker') % 10 AS b,
                 count(*) AS n
          FROM events e JOIN r USING (table_id, shoe, round)
          WHERE e.type = 'card' GROUP BY ALL
        )
        SELECT table_id, CASE WHEN p > b THEN 'player' WHEN b > p THEN 'banker' ELSE 'tie' END,
               count(*)
        FROM hands WHERE n >= 4 GROUP BY ALL
        """,
        [scope.start, scope.end],
    ).fetchall():
        out[t][winner] += n
    return out


def section_tables(basis: Basis) -> dict[str, Any]:
    """Tables: the money (handle, win, hold against the rule pack's theoretical hold) and the
    round outcomes counted from the cards against their exact probabilities."""
    from auditor.rules.odds import house_edges, probabilities

    con, scope, tables = basis.con, basis.scope, basis.tables
    packs, per_table_findings = basis.packs, basis.per_table_findings
    money, by_bet = _money(con, scope)
    decks = _decks_by_table(con, scope)
    outcomes = _outcomes(con, scope, basis.values)
    totals: Counter[str] = Counter()  # every table's outcomes (the Tables listing)
    banking: Counter[str] = Counter()  # the chart's: tables whose pack gives exact odds
    exact_weighted: dict[str, float] = defaultdict(float)
    left_out: Counter[str] = Counter()  # rounds not in the chart, by why
    # The exact odds of a pack, deck count and variant, worked out once: each is an
    # enumeration of the shoe (14 ms), and a property-wide day has thousands of tables.
    odds: dict[tuple[int, int, str], tuple[dict, dict]] = {}

    def odds_of(pack: RulePack, n_decks: int, variant: str) -> tuple[dict, dict]:
        key = (id(pack), n_decks, variant)
        if key not in odds:
            odds[key] = (house_edges(pack, n_decks, variant), probabilities(pack, n_decks))
        return odds[key]

    rows = []
    for t in tables:
        name = t["table_id"]
        m = money.get(name, {})
        handle = m.get("handle", Decimal(0))
        win = (
            m.get("collected", Decimal(0))
            + m.get("vig", Decimal(0))
            + m.get("commission", Decimal(0))
            - m.get("paid", Decimal(0))
        )
        pack = packs.get((t["jurisdiction"], t["game"]))
        theo = None
        if pack and t["game"] != "chemin_de_fer" and t["variant"] in pack.variants:
            n_decks = decks.get(name) or 8
            edges = odds_of(pack, n_decks, t["variant"])[0]
            bets = by_bet.get(name, {})
            covered = sum((a for b, a in bets.items() if b in edges), Decimal(0))
            if covered:  # exact, so that the order the bets come in cannot move a digit
                theo = float(sum((Fraction(a) * edges[b] for b, a in bets.items() if b in edges),
                                 Fraction(0)) / Fraction(covered))
        o = outcomes.get(name, Counter())
        totals.update(o)
        decided = sum(o.values())
        if pack and t["game"] != "chemin_de_fer" and t["variant"] in pack.variants:
            # Each table's exact odds weigh as many rounds as its observed bars count.
            probs = odds_of(pack, decks.get(name) or 8, t["variant"])[1]
            for k in ("banker", "player", "tie"):
                exact_weighted[k] += float(probs[k]) * decided
            banking.update(o)
        elif decided:
            left_out["chemin de fer" if t["game"] == "chemin_de_fer" else "no exact odds"] += (
                decided
            )
        if t["game"] == "chemin_de_fer":
            win = m.get("commission", Decimal(0))
        rows.append(
            {
                **t,
                "handle": handle,
                "win": win,
                "hold": (float(win) / float(handle)) if handle else None,
                "theo_hold": theo,
                "findings": per_table_findings.get(name, 0),
                "pack": pack.label if pack else "no rule pack",
                "outcomes": dict(o),
                "decks": decks.get(name),
            }
        )
    charted = sum(banking.values())
    shares = {k: banking[k] / charted if charted else 0.0 for k in ("banker", "player", "tie")}
    exact = {k: exact_weighted[k] / charted if charted else 0.0
             for k in ("banker", "player", "tie")}
    return {
        "tables": rows,
        "tables_listing": listing([_table_line(t) for t in rows])
        if len(rows) > formatting.LISTING_ROWS else [],
        "outcomes": {k: totals.get(k, 0) for k in ("banker", "player", "tie")},
        "outcomes_charted": charted,
        "outcomes_exact": exact,
        "outcomes_left_out": dict(left_out),
        "chart_outcomes": charts.paired_bars(
            ["Banker", "Player", "Tie"],
            [shares[k] for k in ("banker", "player", "tie")],
            [exact[k] for k in ("banker", "player", "tie")],
            f"Round outcomes of the banking games: observed ({charted:,} rounds) against "
            "exact probability",
            ("observed", "exact (rule pack)"),
        ) if charted else "",
    }


def _table_line(t: dict) -> str:
    rules = f"{(t['game'] or '?').replace('_', ' ')}, {t['jurisdiction'] or '?'}, " + (
        f"{t['variant'] or '?'}" + (f", {t['decks']} decks" if t["decks"] else "")
    )
    return (
        f"{t['pit'] or '':<6} {t['table_id']:<10} {rules:<38} {t['rounds']:>7,} "
        f"{money(t['handle']):>15} {money(t['win']):>14} {pct(t['hold']):>8} "
        f"{pct(t['theo_hold']):>8} {t['findings']:>6}"
    )
