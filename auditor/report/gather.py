"""What the shift audit report shows, read from the database (DuckDB does the sums).

The page is built section by section: each `section_*` function below gives the keys of the
template context its part of reports/templates/report.html.j2 reads, from a `Basis` that
holds what several sections share (the tables in scope, their rule packs, the findings), read
once. `gather` only assembles them, so a new section of the report is one function here and
one block in the template. Turning the context into HTML and PDF is auditor.report.render.
Nothing here reads the clock of the machine that renders: the same database and arguments
give the same context.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import duckdb

from auditor import __version__
from auditor.audit import dealers as dealer_counts
from auditor.audit.load import load_notices
from auditor.config import PropertyConfig, parse_date, parse_shift
from auditor.errors import UserError
from auditor.report import charts, reads
from auditor.report.formatting import (
    card_face,
    evidence_text,
    local_time,
    money,
    pct,
    point_counts,
)
from auditor.rules.codes import REGISTRY, SEVERITIES, severity_rank
from auditor.rules.pack import PackCache, RulePack, card_values, video_retention_days
from auditor.store import findings
from auditor.store import notices as hand_notices
from auditor.store.acks import latest_acks

DETAIL_LIMIT = 100  # findings shown in full in the body (gravest first); all are in the appendix
# The appendix is fixed-width text in blocks: weasyprint lays out 10,000 table rows in about
# a minute and a half, the same lines as preformatted blocks of 100 in a few seconds.
APPENDIX_BLOCK = 100
LISTING_ROWS = 150  # past this many tables, changes or sources, fixed-width lines, not a table
NEEDS_ACTION_LIMIT = 15  # lines of "Needs action" on the cover; the rest are counted


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


def scope_for(
    conf: PropertyConfig,
    con: duckdb.DuckDBPyConnection,
    shift: str | None = None,
    date: str | None = None,
    pit: str | None = None,
    table: str | None = None,
) -> Scope:
    zone = conf.zone_for(con)
    if shift:
        day, name = parse_shift(shift)
        start, end = conf.shift_window(day, name, zone)
        title, slug = f"{name} shift of gaming day {day:%Y-%m-%d}", f"{day:%Y-%m-%d}_{name}"
    elif date:
        day = parse_date(date)
        start, end = conf.gaming_day_window(day, zone)
        title, slug = f"gaming day {day:%Y-%m-%d}", f"{day:%Y-%m-%d}"
    else:
        raise UserError("name the period: --shift GAMING-DAY/NAME or --date GAMING-DAY")
    if pit:
        title, slug = f"{title}, pit {pit}", f"{slug}_{pit}"
    if table:
        title, slug = f"{title}, table {table}", f"{slug}_{table}"
    return Scope(title, slug, start, end, zone, pit, table)


# --- gathering ---------------------------------------------------------------------------


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


def _load_packs(tables: list[dict]) -> dict[tuple[str, str], RulePack | None]:
    """The rule pack of each (jurisdiction, game) in scope, in table order; None: no usable
    pack."""
    cache = PackCache()
    return {(t["jurisdiction"], t["game"]): cache.get(t["jurisdiction"], t["game"])
            for t in tables}


def _money_by_table(con: duckdb.DuckDBPyConnection, scope: Scope) -> dict[str, dict]:
    rows = reads.rows(
        con,
        """
        WITH r AS (
          SELECT DISTINCT table_id, shoe, round FROM events
          WHERE type = 'round_start' AND ts >= ? AND ts < ?
        )
        SELECT e.table_id,
               coalesce(sum(amount) FILTER (type IN ('wager', 'banco')), 0) AS handle,
               coalesce(sum(amount) FILTER (type = 'collect'), 0) AS collected,
               coalesce(sum(amount) FILTER (type = 'pay'), 0) AS paid,
               coalesce(sum(amount) FILTER (type = 'vig'), 0) AS vig,
               coalesce(sum(amount) FILTER (type = 'commission'), 0) AS commission
        FROM events e JOIN r USING (table_id, shoe, round)
        WHERE e.type IN ('wager', 'banco', 'collect', 'pay', 'vig', 'commission')
        GROUP BY e.table_id
        """,
        [scope.start, scope.end],
    )
    return {r["table_id"]: r for r in rows}


def _handle_by_bet(con: duckdb.DuckDBPyConnection, scope: Scope) -> dict[str, dict[str, Decimal]]:
    out: dict[str, dict[str, Decimal]] = defaultdict(dict)
    for t, bet, amount in con.execute(
        """
        WITH r AS (
          SELECT DISTINCT table_id, shoe, round FROM events
          WHERE type = 'round_start' AND ts >= ? AND ts < ?
        )
        SELECT e.table_id, e.bet, sum(e.amount) FROM events e JOIN r USING (table_id, shoe, round)
        WHERE e.type = 'wager' GROUP BY ALL
        """,
        [scope.start, scope.end],
    ).fetchall():
        out[t][bet] = amount
    return out


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


def _sources(con: duckdb.DuckDBPyConnection, scope: Scope, tables: set[str]) -> list[dict]:
    """The log files the window's events came from, one row per file however it was read:
    whole, or in pieces as it grew (`watch`, an ingest run twice over a growing file). A
    file's SHA-256 and line count are those of all that was read of it (its last piece's
    prefix hash), its events and quarantined lines the sum of its pieces; so a watched night
    lists the same files, hashes and counts as a batch ingest of the finished files."""
    only = ""
    params: list[Any] = [scope.start, scope.end]
    if scope.pit or scope.table:
        only = "AND table_id IN (SELECT unnest(?::VARCHAR[]))"
        params.append(sorted(tables))
    return reads.rows(
        con,
        f"""
        WITH used AS (
          SELECT DISTINCT source_id FROM events WHERE ts >= ? AND ts < ? {only}
        ), files AS (
          SELECT DISTINCT file_id FROM source_extents SEMI JOIN used USING (source_id)
        )
        SELECT x.file_id AS id, arg_max(x.path, x.end_byte) AS path,
               arg_max(x.prefix_sha256, x.end_byte) AS sha256, max(x.last_line) AS lines,
               sum(x.events)::BIGINT AS events, sum(x.quarantined)::BIGINT AS quarantined
        FROM source_extents x SEMI JOIN files USING (file_id)
        GROUP BY x.file_id
        ORDER BY path
        """,
        params,
    )


def _procedures(
    con: duckdb.DuckDBPyConnection, scope: Scope, tables: list[dict], found: list[dict]
) -> dict[str, Any]:
    """Procedure in force per table over the window, its changes and the notices given."""
    names = [t["table_id"] for t in tables]
    changes = reads.rows(
        con,
        """
        SELECT table_id, ts, seq, type, procedure FROM events
        WHERE type IN ('table_open', 'procedure_change', 'table_close')
          AND ts < ? AND table_id IN (SELECT unnest(?::VARCHAR[]))
        ORDER BY table_id, seq
        """,
        [scope.end, names],
    )
    pits = sorted({t["pit"] for t in tables if t["pit"]})
    # Logged notices and those entered by hand (bacc-audit notice add), as the audit sees them.
    notices: list[dict[str, Any]] = [
        {"pit": n.pit, "ts": n.given_at, "procedure": n.procedure, "effective": n.effective,
         "recipient": n.recipient, "written": n.written, "tables": n.tables, "source": n.source,
         # A notice typed in with `bacc-audit notice add` says so, by whom and when.
         "by_hand": n.source if n.key.startswith("hand:") else None}
        for n in load_notices(con)
        if n.pit in pits and scope.start - dt.timedelta(days=1) <= n.effective < scope.end
    ]
    notices.sort(key=lambda n: (n["pit"], n["effective"], n["ts"], n["recipient"]))
    span = (scope.end - scope.start).total_seconds()

    def pos(t: dt.datetime) -> float:
        return min(max((t - scope.start).total_seconds() / span, 0.0), 1.0)

    lanes: list[dict[str, Any]] = []
    drawn: list[charts.Lane] = []
    rows: list[dict[str, Any]] = []
    pit_of = {t["table_id"]: t["pit"] for t in tables}
    flagged = {(f["table"], f["code"]) for f in found if f["code"].startswith("procedure.")}
    by_table: dict[str, list[dict]] = defaultdict(list)
    for c in changes:
        by_table[c["table_id"]].append(c)
    for name in names:
        mine = by_table[name]
        for c in mine:
            if c["type"] != "procedure_change" or c["ts"] < scope.start:
                continue
            given = [
                n
                for n in notices
                if n["pit"] == pit_of[name]
                and n["procedure"] == c["procedure"]
                and (not n["tables"] or name in n["tables"])
            ]
            rows.append(
                {
                    "table": name,
                    "pit": pit_of[name],
                    "procedure": c["procedure"],
                    "at": c["ts"].astimezone(scope.zone),
                    "seq": c["seq"],
                    "notices": [
                        {
                            **n,
                            "given": n["ts"].astimezone(scope.zone),
                            "lead_minutes": (c["ts"] - n["ts"]).total_seconds() / 60,
                        }
                        for n in given
                    ],
                    "flagged": sorted(code for t, code in flagged if t == name),
                }
            )
        if len(names) <= LISTING_ROWS:
            spans, closes = _open_spans(mine, scope.start, scope.end)
            lanes.append({
                "table": name,
                "spans": [
                    {"from": a.astimezone(scope.zone), "to": b.astimezone(scope.zone),
                     "procedure": p}
                    for a, b, p in spans
                ],
                "closed": [t.astimezone(scope.zone) for t in closes],
            })
            marks = [
                (pos(n["ts"]), f"notice to {n['recipient']} {n['ts'].astimezone(scope.zone):%H:%M}")
                for n in notices
                if n["pit"] == pit_of[name] and scope.start <= n["ts"] < scope.end
            ]
            drawn.append((
                name,
                [(pos(a), pos(b), str(p)) for a, b, p in spans],
                marks,
                [(pos(t), f"closed {t.astimezone(scope.zone):%H:%M}") for t in closes],
            ))
    svg = ""
    if drawn:  # one lane a table: past LISTING_ROWS tables the changes are listed instead
        svg = charts.timeline(
            drawn,
            [(pos(h), f"{h.astimezone(scope.zone):%H:%M}") for h in _hour_ticks(scope)],
            "Procedure in force per table (▼ written notice given)",
        )
    listing = _listing([_change_line(c) for c in rows]) if len(rows) > LISTING_ROWS else []
    # Findings that a notice entered by hand withdrew, beside the logged notices of their
    # change: what someone typed in must never clear a finding unseen.
    cleared = reads.rows(
        con,
        """
        SELECT code, table_id, seq, ts, message,
               json_extract_string(evidence, '$.withdrawn_because.entered') AS entered
        FROM (
          SELECT *, row_number() OVER (PARTITION BY fingerprint ORDER BY id DESC) AS rn
          FROM findings WHERE code LIKE 'procedure.notice_%'
        )
        WHERE rn = 1 AND status = 'withdrawn'
          AND json_extract(evidence, '$.withdrawn_because') IS NOT NULL
          AND ts >= ? AND ts < ? AND table_id IN (SELECT unnest(?::VARCHAR[]))
        ORDER BY ts, table_id
        """,
        [scope.start, scope.end, names],
    )
    for f in cleared:
        f["at"] = f["ts"].astimezone(scope.zone)
        f["entered"] = "; ".join(json.loads(f["entered"] or "[]"))
        f["logged"] = "; ".join(
            f"{n['recipient']} {n['ts'].astimezone(scope.zone):%H:%M}"
            for n in notices
            if not n["by_hand"] and n["pit"] == pit_of.get(f["table_id"])
            and abs((n["effective"] - f["ts"]).total_seconds()) <= 3600
        ) or "none"
    # Notices entered by hand and withdrawn since: they no longer count, and say so here.
    gone = hand_notices.withdrawals(con)
    withdrawn = [
        {
            "id": n.id,
            "pit": n.pit,
            "procedure": n.procedure,
            "recipient": n.recipient,
            "effective": n.effective.astimezone(scope.zone),
            "given": n.given_at.astimezone(scope.zone),
            "entered_by": n.entered_by,
            "by": w.withdrawn_by,
            "at": w.withdrawn_at.astimezone(scope.zone),
            "reason": w.reason,
        }
        for n in hand_notices.list_notices(con)
        if (w := gone.get(n.id or 0)) is not None
        and n.pit in pits and scope.start - dt.timedelta(days=1) <= n.effective < scope.end
    ]
    return {
        "withdrawn_notices": withdrawn,
        "cleared_by_hand": cleared,
        "changes": rows,
        "lanes": lanes,
        "timeline_svg": svg,
        "notices": notices,
        "listing": listing,
    }


def _open_spans(
    events: list[dict], start: dt.datetime, end: dt.datetime
) -> tuple[list[tuple[dt.datetime, dt.datetime, int]], list[dt.datetime]]:
    """The procedure in force while the table is open, as (from, to, procedure) spans inside
    the window, and its closes inside the window.

    A closed table has no procedure in force on the floor: drawing the last one until the end
    of the shift would show a pit as mixed when it is not. A span ends at a table_close or a
    change; a reopening starts a new one. As in the audit (replay/tables.py), the procedure
    carries across a close, and a table_open that declares none keeps it.
    """
    spans: list[tuple[dt.datetime, dt.datetime, int]] = []
    closes: list[dt.datetime] = []
    current: int | None = None
    opened: dt.datetime | None = None  # start of the running span while the table is open

    def cut(at: dt.datetime) -> None:
        if opened is not None and current is not None:
            spans.append((opened, at, current))

    for e in events:  # seq order
        ts = e["ts"]
        if e["type"] == "table_open":
            cut(ts)  # an opening without a close: the old span ends here
            current = e["procedure"] if e["procedure"] is not None else current
            opened = ts
        elif e["type"] == "procedure_change":
            if e["procedure"] is not None and e["procedure"] != current:
                cut(ts)
                opened = ts if opened is not None else None
                current = e["procedure"]
        elif e["type"] == "table_close":
            if opened is not None and current is not None and start <= ts < end:
                closes.append(ts)  # a lane that ends here: a table without procedures has none
            cut(ts)
            opened = None
    cut(end)
    kept = [(max(a, start), min(b, end), p) for a, b, p in spans if b > start and a < end]
    return [(a, b, p) for a, b, p in kept if b > a], closes


def _change_line(c: dict) -> str:
    notices = "; ".join(
        f"{n['recipient']}{'' if n['written'] else ' (not written)'} {n['given']:%H:%M} "
        f"({n['lead_minutes']:.0f} min{', ' + n['by_hand'] if n['by_hand'] else ''})"
        for n in c["notices"]
    ) or "none"
    return (
        f"{c['table']:<10} {c['pit']:<6} {c['at']:%H:%M:%S} {c['seq']:>9} {c['procedure']:>3}  "
        f"{notices}  [{', '.join(c['flagged']) or 'none'}]"
    )


def _hour_ticks(scope: Scope) -> list[dt.datetime]:
    first = scope.start.replace(minute=0, second=0, microsecond=0)
    if first < scope.start:
        first += dt.timedelta(hours=1)
    ticks, t = [], first
    step = dt.timedelta(hours=1 if (scope.end - scope.start) <= dt.timedelta(hours=12) else 3)
    while t <= scope.end:
        ticks.append(t)
        t += step
    return ticks


def _generated_at(con: duckdb.DuckDBPyConnection) -> dt.datetime:
    """SOURCE_DATE_EPOCH when set; else when the database last changed (its latest run), so
    the same database renders the same report."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        return dt.datetime.fromtimestamp(int(epoch), dt.UTC)
    row = con.execute("SELECT max(coalesce(finished_at, started_at)) FROM runs").fetchall()
    return row[0][0] or dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


# --- the page, one section at a time -------------------------------------------------------


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
    any_pack: RulePack | None  # card values and video retention come from the first pack
    values: Mapping[str, int]
    found: list[dict]  # gravest first, each with its `ack`
    per_table_findings: Counter[str]
    # The property's last HISTORY_DAYS gaming days, ending with the scope's end: the By
    # dealer page's comparison and the trend (one pair of grouped queries for both).
    history: dealer_counts.History


def _basis(con: duckdb.DuckDBPyConnection, conf: PropertyConfig, scope: Scope) -> Basis:
    tables = _tables_in_scope(con, scope)
    if not tables:
        raise UserError(
            f"no rounds in the {scope.title} ({scope.start.astimezone(scope.zone):%Y-%m-%d %H:%M}"
            f" to {scope.end.astimezone(scope.zone):%Y-%m-%d %H:%M}): nothing to report; "
            "check the date, shift and that its logs were ingested"
        )
    names = {t["table_id"] for t in tables}
    packs = _load_packs(tables)
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
        any_pack=any_pack,
        values=values,
        found=found,
        per_table_findings=Counter(f["table"] for f in found if f["table"]),
        history=dealer_counts.history(
            con, conf, scope.zone, dealer_counts.gaming_day_of(scope.start, conf, scope.zone),
            until=scope.end,
        ),
    )


def section_cover(basis: Basis) -> dict[str, Any]:
    """The cover and its sign-off block: what was audited, under which rules and config, by
    which version of the tool, as of which change to the database."""
    scope = basis.scope
    generated = _generated_at(basis.con)
    return {
        "property": basis.conf.name,
        "config_source": basis.conf.source,
        "scope": scope,
        "local_start": scope.start.astimezone(scope.zone),
        "local_end": scope.end.astimezone(scope.zone),
        "zone_name": str(scope.zone),
        "generated_at": generated.astimezone(scope.zone),
        "tool_version": __version__,
        "packs": sorted({p.label for p in basis.packs.values() if p}),
        "rounds": basis.rounds,
        "findings": basis.found,
    }


def section_summary(basis: Basis) -> dict[str, Any]:
    """Summary: how many findings of each severity and code, how many rounds they touch, and
    when and where they fell."""
    scope, found, rounds = basis.scope, basis.found, basis.rounds
    by_sev = Counter(f["severity"] for f in found)
    by_code = Counter(f["code"] for f in found)
    rounds_with = len({(f["table"], f["shoe"], f["round"]) for f in found if f["round"]})
    hours = _hour_ticks(scope)[:-1] or [scope.start]
    per_hour = Counter(
        dt.datetime.fromisoformat(f["ts"]).astimezone(scope.zone).strftime("%H") for f in found
    )
    return {
        "by_severity": [(s, by_sev.get(s, 0)) for s in SEVERITIES],
        # Gravest codes first (the code's severity in the registry), then the most frequent.
        "by_code": sorted(
            by_code.items(),
            key=lambda kv: (severity_rank(REGISTRY[kv[0]].severity), -kv[1], kv[0]),
        ),
        "rounds_with_findings": rounds_with,
        "per_thousand": (1000 * rounds_with / rounds) if rounds else 0.0,
        "chart_hours": charts.bar_chart(
            [f"{h.astimezone(scope.zone):%H}" for h in hours],
            [per_hour.get(f"{h.astimezone(scope.zone):%H}", 0) for h in hours],
            "Findings by hour (local)",
        ),
        "chart_tables": charts.bar_chart(
            [t["table_id"] for t in basis.tables],
            [basis.per_table_findings.get(t["table_id"], 0) for t in basis.tables],
            "Findings by table",
        ),
    }


def section_tables(basis: Basis) -> dict[str, Any]:
    """Tables: the money (handle, win, hold against the rule pack's theoretical hold) and the
    round outcomes counted from the cards against their exact probabilities."""
    from auditor.rules.odds import house_edges, probabilities

    con, scope, tables, rounds = basis.con, basis.scope, basis.tables, basis.rounds
    packs, per_table_findings = basis.packs, basis.per_table_findings
    money = _money_by_table(con, scope)
    by_bet = _handle_by_bet(con, scope)
    decks = _decks_by_table(con, scope)
    outcomes = _outcomes(con, scope, basis.values)
    totals: Counter[str] = Counter()
    exact_weighted: Counter[str] = Counter()
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
            edges = house_edges(pack, n_decks, t["variant"])
            bets = by_bet.get(name, {})
            covered = sum((a for b, a in bets.items() if b in edges), Decimal(0))
            if covered:
                theo = sum(float(a) * float(edges[b]) for b, a in bets.items() if b in edges)
                theo = theo / float(covered)
            probs = probabilities(pack, n_decks)
            for k in ("banker", "player", "tie"):
                exact_weighted[k] += float(probs[k]) * t["rounds"]
        if t["game"] == "chemin_de_fer":
            win = m.get("commission", Decimal(0))
        o = outcomes.get(name, Counter())
        totals.update(o)
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
    total_outcomes = sum(totals.values())
    exact = {k: exact_weighted[k] / rounds for k in ("banker", "player", "tie")} if rounds else {}
    return {
        "tables": rows,
        "tables_listing": _listing([_table_line(t) for t in rows])
        if len(rows) > LISTING_ROWS else [],
        "outcomes": {k: totals.get(k, 0) for k in ("banker", "player", "tie")},
        "chart_outcomes": charts.paired_bars(
            ["Banker", "Player", "Tie"],
            [
                totals.get(k, 0) / total_outcomes if total_outcomes else 0
                for k in ("banker", "player", "tie")
            ],
            [exact.get(k, 0) for k in ("banker", "player", "tie")],
            f"Round outcomes: observed ({total_outcomes:,} rounds) against exact probability",
            ("observed", "exact (rule pack)"),
        ),
    }


def section_procedures(basis: Basis) -> dict[str, Any]:
    """Payout procedures and notices: see _procedures."""
    return {
        "procedures": _procedures(basis.con, basis.scope, basis.tables, basis.found),
        "listing_rows": LISTING_ROWS,
    }


def _retention_days(basis: Basis) -> int:
    """How long the house keeps surveillance video: the first pack's word for it."""
    return video_retention_days(basis.any_pack)


def section_needs_action(basis: Basis) -> dict[str, Any]:
    """The cover's "Needs action": the open critical and major findings nobody has
    acknowledged yet, each with the date its video is gone, soonest first, so the officer
    who reads one page knows what to pull before it is too late."""
    retention = _retention_days(basis)
    graver = {"critical", "major"}
    pending = []
    for f in basis.found:
        if f["severity"] not in graver or f.get("ack"):
            continue
        ts = dt.datetime.fromisoformat(f["ts"])
        pending.append({**f, "video_by": (ts + dt.timedelta(days=retention))
                        .astimezone(basis.scope.zone)})
    pending.sort(key=lambda f: (f["video_by"], severity_rank(f["severity"]), f["id"]))
    return {"needs_action": pending[:NEEDS_ACTION_LIMIT],
            "needs_action_more": max(0, len(pending) - NEEDS_ACTION_LIMIT),
            "needs_action_total": len(pending)}


def section_dealers(basis: Basis) -> dict[str, Any]:
    """By dealer: the period's p-chart over every dealer of the property in it (rounds, error
    rounds, rate, limit, flagged; docs/dealers.md), whatever pit or table the report covers:
    a dealer's limit is drawn against the whole shift. Beside it, each of those dealers over
    the last 30 gaming days (Basis.history): rounds, error rounds, rate, and the limit of the
    p-chart of those days, whose p̄ is the property's rate over them."""
    scope, span = basis.scope, basis.history
    rows, unnamed = dealer_counts.dealer_rows(
        basis.con, dealer_counts.Window(scope.title, scope.start, scope.end)
    )
    with_rounds = [d.day for d in span.days if d.rounds]
    return {
        "dealers": rows,
        "dealers_unnamed": unnamed,
        "dealers_expected": rows[0].expected if rows else 0.0,
        "dealers_rounds": sum(r.rounds for r in rows),
        "dealers_error_rounds": sum(r.error_rounds for r in rows),
        # dealer -> DealerRate over the span (every dealer of the shift dealt in it)
        "dealers_span": {r.dealer: span.dealers[r.dealer] for r in rows
                         if r.dealer in span.dealers},
        "span": {
            "label": span.label,
            "first": span.days[0].day,
            "last": span.days[-1].day,
            "days": len(span.days),
            "days_with_rounds": len(with_rounds),
            "first_with_rounds": with_rounds[0] if with_rounds else None,
            "expected": span.expected,
            "rounds": sum(r.count.rounds for r in span.dealers.values()),
            "error_rounds": sum(r.count.error_rounds for r in span.dealers.values()),
            "dealers": len(span.dealers),
            "unnamed": span.unnamed,
            "zone": str(scope.zone),
            "day_start": f"{basis.conf.gaming_day_start:%H:%M}",
        },
    }


def section_trend(basis: Basis) -> dict[str, Any]:
    """Findings per 1,000 rounds on each of the last 30 gaming days, the scope's last: a chart
    whose days without rounds are gaps, and the same numbers in a table. The findings are
    the kinds `bacc-audit dealers` counts against a dealer (standing round, chemin de fer and
    shoe findings), of the whole property whatever pit or table the report covers."""
    span = basis.history
    days = span.days
    shown = next((i for i, d in enumerate(days) if d.rounds), len(days) - 1)
    rate = 1000 * span.findings / span.rounds if span.rounds else None
    return {
        "trend_days": days[shown:],  # from the first day with rounds (the last day at least)
        "trend_before": days[:shown],  # days without rounds before the first that has some
        "trend_rate": rate,
        "trend_rounds": span.rounds,
        "trend_findings": span.findings,
        "chart_trend": charts.gap_line(
            [f"{d.day:%m-%d}" for d in days],
            [d.per_1000 for d in days],
            f"Findings per 1,000 rounds, gaming days {days[0].day:%Y-%m-%d} to "
            f"{days[-1].day:%Y-%m-%d}",
            rate,
            "30-day rate" if rate is not None else "",
        ),
    }


SIDE_BET_CODE = "play.side_bet_counting"


def _number(value: Any, digits: int) -> str:
    """A number of the evidence with `digits` decimals; anything else as it is."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:.{digits}f}"
    return "?" if value is None else str(value)


def section_side_bets(basis: Basis) -> dict[str, Any]:
    """Side wagers against the count: for each play.side_bet_counting finding of the scope,
    the seat's side wager of each round against the true count it was made at, from the
    finding's evidence (its `series`: shoe, round, true count, amount; "0" where the seat
    made none), titled with the table, seat, bet and the rank correlation and its z."""
    mine = [f for f in basis.found if f["code"] == SIDE_BET_CODE]
    if not mine:
        return {"side_bets": []}
    evidence = dict(basis.con.execute(
        "SELECT fingerprint, CAST(evidence AS VARCHAR) FROM current_findings "
        "WHERE code = ? AND fingerprint IN (SELECT unnest(?::VARCHAR[]))",
        [SIDE_BET_CODE, [f["fingerprint"] for f in mine]],
    ).fetchall())
    out = []
    for f in mine:
        ev = json.loads(evidence.get(f["fingerprint"]) or "null")
        ev = ev if isinstance(ev, dict) else {}
        points: list[tuple[float, float]] = []
        for item in ev.get("series") or []:
            try:
                points.append((float(item[2]), float(Decimal(str(item[3])))))
            except (TypeError, ValueError, IndexError, ArithmeticError):
                continue  # a malformed point is left off the chart, not the report
        table = ev.get("table") or f["table"] or "?"
        title = (f"{table}, seat {ev.get('seat', '?')}, {ev.get('bet', '?')}: "
                 f"rho {_number(ev.get('rho'), 2)}, z {_number(ev.get('z'), 1)}")
        wagers = sum(1 for _, y in points if y)
        out.append({
            "id": f["id"],
            "title": title,
            "rounds": ev.get("rounds", len(points)),
            "side_wagers": ev.get("side_wagers", wagers),
            "threshold": _number(ev.get("threshold"), 1),
            "shift": ev.get("shift") or "",
            "points": len(points),
            "chart": charts.scatter(points, title, "true count", "side wager")
            if points else "",
        })
    out.sort(key=lambda x: x["title"])
    return {"side_bets": out}


def section_findings(basis: Basis) -> dict[str, Any]:
    """Findings: the gravest DETAIL_LIMIT in full, with the round's cards and the date by which
    the surveillance video must be pulled before the house deletes it."""
    found, scope, values = basis.found, basis.scope, basis.values
    keys = {(f["table"], f["shoe"], f["round"]) for f in found if f["round"] is not None}
    cards = reads.round_cards(basis.con, keys)
    retention = _retention_days(basis)
    details = []
    for f in found[:DETAIL_LIMIT]:
        c = REGISTRY[f["code"]]
        ts = dt.datetime.fromisoformat(f["ts"])
        round_cards = cards.get((f["table"], f["shoe"], f["round"]), [])
        details.append(
            {
                **f,
                "title": c.title,
                "why": c.why,
                "local": ts.astimezone(scope.zone),
                "video_by": (ts + dt.timedelta(days=retention)).astimezone(scope.zone),
                "cards": [card_face(card, hand, seq) for seq, hand, card in round_cards],
                "counts": point_counts(round_cards, values),
                "expected_text": evidence_text(f["expected"], scope.zone),
                "observed_text": evidence_text(f["observed"], scope.zone),
            }
        )
    return {"details": details, "detail_limit": DETAIL_LIMIT, "retention_days": retention}


def section_appendix(basis: Basis) -> dict[str, Any]:
    """Appendix A: every finding, one line each, however many there are."""
    return {"appendix_blocks": _appendix_blocks(basis.found, basis.scope.zone)}


def section_sources(basis: Basis) -> dict[str, Any]:
    """Appendix B and the digest on the cover and every page: the logs the report rests on, so
    a reader can check they hold the same files."""
    sources = _sources(basis.con, basis.scope, basis.names)
    digest = hashlib.sha256("".join(sorted(s["sha256"] for s in sources)).encode()).hexdigest()
    return {
        "sources": sources,
        "sources_listing": _listing([_source_line(x) for x in sources])
        if len(sources) > LISTING_ROWS else [],
        "sources_digest": digest,
    }


Section = Callable[[Basis], dict[str, Any]]
# In the order of the page. Each section owns its keys: no two give the same one.
SECTIONS: tuple[Section, ...] = (
    section_cover,
    section_needs_action,
    section_summary,
    section_tables,
    section_procedures,
    section_dealers,
    section_trend,
    section_side_bets,
    section_findings,
    section_appendix,
    section_sources,
)


def gather(con: duckdb.DuckDBPyConnection, conf: PropertyConfig, scope: Scope) -> dict[str, Any]:
    """Everything the report shows, as plain values: the keys of every section together."""
    basis = _basis(con, conf, scope)
    context: dict[str, Any] = {}
    for section in SECTIONS:
        part = section(basis)
        assert not part.keys() & context.keys(), f"{section.__name__} repeats a key"
        context.update(part)
    return context


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


def _ack_text(ack: dict | None) -> str:
    if ack is None:
        return ""
    note = f" ({ack['note']})" if ack["note"] else ""
    return f"  [acknowledged {ack['at']:%Y-%m-%d %H:%M} by {ack['by']}: {ack['disposition']}{note}]"


def _appendix_blocks(found: list[dict], zone: dt.tzinfo) -> list[str]:
    """Every finding on one fixed-width line (wrapping only its message), in blocks. Each line
    carries its date: the lines run gravest first, not in time order, across midnight. The
    id before the message is what `bacc-audit ack` takes, so an officer acks from the PDF."""
    return _listing([
        f"{local_time(f['ts'], zone):<23} {f['severity']:<8} {f['code']:<28} "
        f"{f['table'] or f['pit'] or '':<8} "
        f"{_shoe_round(f):<18} {f['seq'] or '':>7}  "
        f"{f['id']:<13}  {f['message']}{_ack_text(f.get('ack'))}"
        for f in found
    ])


def _shoe_round(f: dict) -> str:
    """'SHOE/ROUND', or the shoe alone for a finding of a whole shoe."""
    if not f["shoe"]:
        return ""
    return f["shoe"] if f["round"] is None else f"{f['shoe']}/{f['round']}"


def _listing(lines: list[str]) -> list[str]:
    """Fixed-width lines in blocks of APPENDIX_BLOCK: a PDF table of thousands of rows takes
    minutes and gigabytes to lay out, a preformatted block a fraction of that."""
    return ["\n".join(lines[i : i + APPENDIX_BLOCK]) for i in range(0, len(lines), APPENDIX_BLOCK)]


def _table_line(t: dict) -> str:
    rules = f"{(t['game'] or '?').replace('_', ' ')}, {t['jurisdiction'] or '?'}, " + (
        f"{t['variant'] or '?'}" + (f", {t['decks']} decks" if t["decks"] else "")
    )
    return (
        f"{t['pit'] or '':<6} {t['table_id']:<10} {rules:<38} {t['rounds']:>7,} "
        f"{money(t['handle']):>15} {money(t['win']):>14} {pct(t['hold']):>8} "
        f"{pct(t['theo_hold']):>8} {t['findings']:>6}"
    )


def _source_line(s: dict) -> str:
    return f"{s['sha256']}  {s['lines']:>9} {s['events']:>9} {s['quarantined']:>5}  {s['path']}"

