"""What the board's pages show, read from the database as plain values: the floor, a finding,
a round, and the one write the board makes, an acknowledgement.

Each function takes a cursor of its own (feed.reading) and the zone times are shown in;
the templates in reports/templates/board/ only lay the values out. Card faces, evidence text
and money are formatted by the report's own functions (auditor/report/formatting.py), so a
card or an amount reads the same on the board as in the PDF.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeVar

import duckdb

from auditor.audit.load import load_latest_ts
from auditor.board.feed import RECORD_SQL, record
from auditor.config import PropertyConfig
from auditor.report import reads
from auditor.report.formatting import card_faces, evidence_text, money, point_counts
from auditor.rules.codes import REGISTRY, SEVERITIES
from auditor.rules.pack import PackCache, RulePack, card_values, video_retention_days
from auditor.store import acks
from auditor.store.db import has_table
from auditor.store.stamps import FIRST_INSTANT, LAST_INSTANT

T = TypeVar("T")

# Event columns a round page shows, in this order, with the words they read as.
EVENT_FIELDS = (
    ("seat", "seat"),
    ("bet", ""),
    ("amount", ""),
    ("to_hand", "to"),
    ("card", ""),
    ("kind", ""),
    ("player_count", "Player"),
    ("banker_count", "Banker"),
    ("winner", "winner"),
    ("count", "count"),
    ("mode", ""),
    ("hand", "hand"),
    ("choice", "choice"),
    ("from_seat", "from seat"),
    ("to_seat", "to seat"),
    ("void_reason", "reason"),
    ("disposition", "disposition"),
)


def acked_fingerprints(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """The standing acknowledgement of each acknowledged finding (who, what, when)."""
    return {
        fp: {"by": a.reviewer, "disposition": a.disposition, "note": a.note,
             "at": a.recorded_at}
        for fp, a in acks.latest_acks(con).items()
    }


def table_pack(
    con: duckdb.DuckDBPyConnection, packs: PackCache, table: str | None, pit: str | None,
    at: dt.datetime,
) -> RulePack | None:
    """The rule pack of the table (or, for a pit-level finding, of a table of the pit) as its
    latest table_open before `at` declared it."""
    if table:
        where, param = "table_id = ?", table
    elif pit:
        where, param = "pit = ?", pit
    else:
        return None
    rows = con.execute(
        f"SELECT jurisdiction, game FROM events WHERE type = 'table_open' AND {where} "
        "ORDER BY (ts <= ?) DESC, ts DESC, seq DESC LIMIT 1",
        [param, at],
    ).fetchall()
    return packs.get(*rows[0]) if rows else None


def detail(
    con: duckdb.DuckDBPyConnection,
    rec: dict[str, Any],
    at: dt.datetime,
    zone: dt.tzinfo,
    packs: PackCache,
    now: dt.datetime,
) -> dict[str, Any]:
    """A finding as its page shows it: the record, what its code means, its round's cards,
    expected against observed, and the date the surveillance video must be pulled by."""
    code = REGISTRY.get(rec["code"])
    pack = table_pack(con, packs, rec["table"], rec["pit"], at)
    retention = video_retention_days(pack)
    cards: list[tuple[int, str, str]] = []
    if rec["table"] and rec["shoe"] is not None and rec["round"] is not None:
        key = (rec["table"], rec["shoe"], rec["round"])
        cards = reads.round_cards(con, [key]).get(key, [])
    video_by = at + dt.timedelta(days=retention)
    return {
        **rec,
        "title": code.title if code else rec["code"],
        "why": code.why if code else "",
        "rule_text": code.rule if code else "",  # the rule in words; rec["rule"] cites it
        "local": at.astimezone(zone),
        "video_by": video_by.astimezone(zone),
        "video_days_left": (video_by - now).total_seconds() / 86400,
        "retention_days": retention,
        "retention_from_pack": pack is not None,
        "cards": card_faces(cards),
        "counts": point_counts(cards, card_values(pack)),
        "expected_text": evidence_text(rec["expected"], zone),
        "observed_text": evidence_text(rec["observed"], zone),
    }


def finding_page(
    con: duckdb.DuckDBPyConnection, fingerprint: str, zone: dt.tzinfo, packs: PackCache,
    now: dt.datetime,
) -> dict[str, Any] | None:
    """The finding's latest row with its details, every row it has had (recorded,
    withdrawn) and every acknowledgement of it, oldest first."""
    rows = con.execute(
        f"SELECT id, status, ts, recorded_at, {RECORD_SQL} FROM findings "
        "WHERE fingerprint = ? ORDER BY id",
        [fingerprint],
    ).fetchall()
    if not rows:
        return None
    last = rows[-1]
    f = detail(con, record(last[4:], zone), last[2], zone, packs, now)
    history = [
        {"cursor": r[0], "status": r[1], "recorded": r[3].astimezone(zone)} for r in rows
    ]
    reviews: list[dict[str, Any]] = []
    if has_table(con, "acknowledgements"):
        reviews = [
            {**a, "at": a["recorded_at"].astimezone(zone)}
            for a in reads.rows(
                con,
                "SELECT id, reviewer AS by, disposition, note, recorded_at "
                "FROM acknowledgements WHERE fingerprint = ? ORDER BY id",
                [fingerprint],
            )
        ]
    return {"f": f, "status": last[1], "history": history, "reviews": reviews}


def _event_text(e: dict[str, Any]) -> str:
    parts = []
    for col, word in EVENT_FIELDS:
        v = e.get(col)
        if v is None or col == "card":
            continue
        if isinstance(v, Decimal):
            v = money(v)
        parts.append(f"{word} {v}".strip())
    return ", ".join(parts)


def _in_zone(ts: dt.datetime | None, zone: dt.tzinfo) -> dt.datetime | None:
    """`ts` in the property's zone; None when it has none, or when the zone would carry it
    past the year 9999 (a stamp at the edge of what a datetime holds)."""
    try:
        return None if ts is None else ts.astimezone(zone)
    except (OverflowError, ValueError):
        return None


def round_page(
    con: duckdb.DuckDBPyConnection,
    table: str,
    shoe: str,
    rnd: int,
    zone: dt.tzinfo,
    packs: PackCache,
    now: dt.datetime,
) -> dict[str, Any] | None:
    """A round: its events in seq order with the file and line each came from, the cards
    in dealing order, the table's game and procedure at the time, and its standing findings
    with their details."""
    cols = ", ".join(f"e.{c}" for c, _ in EVENT_FIELDS)
    # A stamp outside the years 1 to 9999 (a database loaded by an earlier bacc-audit, or
    # edited since) is shown as stored: no Python datetime holds it.
    events = reads.rows(
        con,
        f"SELECT e.seq, CASE WHEN e.ts BETWEEN {FIRST_INSTANT} AND {LAST_INSTANT} "
        f"THEN e.ts END AS ts, CAST(e.ts AS VARCHAR) AS stored, e.type, e.dealer, {cols}, "
        "s.path, e.line_no "
        "FROM events e JOIN sources s ON s.id = e.source_id "
        "WHERE e.table_id = ? AND e.shoe = ? AND e.round = ? ORDER BY e.seq",
        [table, shoe, rnd],
    )
    if not events:
        return None
    start = next((e["ts"] for e in events if e["ts"] is not None), None)
    opened = reads.rows(
        con,
        "SELECT pit, game, jurisdiction, variant FROM events WHERE type = 'table_open' "
        "AND table_id = ? AND ts <= ? ORDER BY ts DESC, seq DESC LIMIT 1",
        [table, start],
    )
    procedure = con.execute(
        "SELECT procedure FROM events WHERE table_id = ? AND ts <= ? AND procedure IS NOT NULL "
        "AND type IN ('table_open', 'procedure_change') ORDER BY ts DESC, seq DESC LIMIT 1",
        [table, start],
    ).fetchall()
    where = opened[0] if opened else {"pit": None, "game": None, "jurisdiction": None,
                                      "variant": None}
    pack = packs.get(where["jurisdiction"], where["game"])
    cards = [(e["seq"], e["to_hand"], e["card"]) for e in events if e["type"] == "card"]
    found = con.execute(
        f"SELECT ts, {RECORD_SQL} FROM current_findings WHERE table_id = ? AND shoe = ? "
        "AND round = ? ORDER BY seq NULLS FIRST, code",
        [table, shoe, rnd],
    ).fetchall()
    reviewed = acked_fingerprints(con)
    details = []
    for r in found:
        d = detail(con, record(r[1:], zone), r[0], zone, packs, now)
        d["ack"] = reviewed.get(d["fingerprint"])
        details.append(d)
    neighbours = {
        n for (n,) in con.execute(
            "SELECT DISTINCT round FROM events WHERE table_id = ? AND shoe = ? "
            "AND round IN (?, ?) AND type = 'round_start'",
            [table, shoe, rnd - 1, rnd + 1],
        ).fetchall()
    }
    return {
        "table": table,
        "shoe": shoe,
        "round": rnd,
        "where": where,
        "procedure": procedure[0][0] if procedure else None,
        "started": _in_zone(start, zone),
        "dealer": next((e["dealer"] for e in events if e["dealer"]), None),
        "events": [
            {
                "seq": e["seq"],
                "local": _in_zone(e["ts"], zone),
                "stored": e["stored"],
                "type": e["type"],
                "card": card_faces([(e["seq"], e["to_hand"] or "", e["card"])])[0]
                if e["card"] else None,
                "text": _event_text(e),
                "source": f"{e['path']}:{e['line_no']}",
            }
            for e in events
        ],
        "faces": card_faces(cards),
        "counts": point_counts(cards, card_values(pack)),
        "findings": details,
        "previous": rnd - 1 if rnd - 1 in neighbours else None,
        "next": rnd + 1 if rnd + 1 in neighbours else None,
    }


def floor_day(
    con: duckdb.DuckDBPyConnection, conf: PropertyConfig, zone: dt.tzinfo
) -> dt.date | None:
    """The gaming day the floor shows by default: that of the latest round dealt (so at
    06:05, before the new day's first round, the night just ended is still on the board).
    How far the logs reach is read as the audit reads it (load_latest_ts): a line stamped a
    century ahead of its delivery (log.future_stamp) would have opened the board on an
    empty floor that day."""
    latest = load_latest_ts(con)
    if latest is None:
        return None
    # Not after `latest`: a round_start stamped ahead of its delivery (or past the year
    # 9999, in a database loaded by an earlier bacc-audit or edited since) is not the floor.
    last_round = con.execute(
        "SELECT max(ts) FROM events WHERE type = 'round_start' AND ts BETWEEN ? AND ?",
        [latest - dt.timedelta(days=2), latest],
    ).fetchall()[0][0]
    local = (last_round or latest).astimezone(zone)
    day = local.date()
    if local.time() < conf.gaming_day_start:
        day -= dt.timedelta(days=1)
    return day


def floor(
    con: duckdb.DuckDBPyConnection, conf: PropertyConfig, zone: dt.tzinfo, day: dt.date
) -> dict[str, Any]:
    """Pit by pit, table by table, as the logs show the floor in gaming day `day`: open or
    closed, game and variant, the procedure in force, the current shoe, rounds so far, and
    the standing findings of the day by severity (those not yet acknowledged apart).

    The state is read from the events of the day and the day before only, so the page
    costs the same however many years the database holds.
    """
    start, end = conf.gaming_day_window(day, zone)
    shoe_rounds = _shoe_rounds(con, start, end)
    standing, acked = _findings_by_place(con, start, end)
    pits: dict[str, dict[str, Any]] = {}
    for t in _floor_tables(con, start, end):
        if t["rounds"] == 0 and t["last_event"] < start:
            continue  # closed before the day began and not dealt since: not on today's floor
        _pit(pits, conf, t["pit"])["tables"].append(
            _floor_table(t, conf, zone, shoe_rounds.get((t["table_id"], t["shoe"]), 0),
                         standing[(t["pit"], t["table_id"])], acked[(t["pit"], t["table_id"])])
        )
    _count_off_the_tables(pits, conf, standing, acked)
    ordered = sorted(pits.values(), key=lambda p: p["pit"])
    for p in ordered:
        p["tables"].sort(key=lambda t: t["table_id"])
        p["open"] = [(s, p["open"].get(s, 0)) for s in SEVERITIES]
        p["rounds"] = sum(t["rounds"] for t in p["tables"])
    return {
        "day": day,
        "start": start.astimezone(zone),
        "end": end.astimezone(zone),
        "pits": ordered,
        "tables_open": sum(t["open"] for p in ordered for t in p["tables"]),
        "tables": sum(len(p["tables"]) for p in ordered),
    }


def _floor_tables(
    con: duckdb.DuckDBPyConnection, start: dt.datetime, end: dt.datetime
) -> list[dict]:
    """Each table's state as its events from the day before `start` to `end` last show it."""
    return reads.rows(
        con,
        """
        SELECT table_id,
          arg_max(type, (ts, seq)) FILTER (WHERE type IN ('table_open', 'table_close')) AS state,
          arg_max(pit, (ts, seq)) FILTER (WHERE type = 'table_open') AS pit,
          arg_max(game, (ts, seq)) FILTER (WHERE type = 'table_open') AS game,
          arg_max(variant, (ts, seq)) FILTER (WHERE type = 'table_open') AS variant,
          arg_max(jurisdiction, (ts, seq)) FILTER (WHERE type = 'table_open') AS jurisdiction,
          arg_max(procedure, (ts, seq)) FILTER (
            WHERE type IN ('table_open', 'procedure_change') AND procedure IS NOT NULL
          ) AS procedure,
          arg_max(shoe, (ts, seq)) FILTER (WHERE type = 'shoe_start') AS shoe,
          arg_max(type, (ts, seq)) FILTER (WHERE type IN ('shoe_start', 'shoe_end')) AS shoe_state,
          count(DISTINCT (shoe, round)) FILTER (WHERE type = 'round_start' AND ts >= ?) AS rounds,
          max(ts) AS last_event
        FROM events
        WHERE ts >= ? AND ts < ? AND table_id IS NOT NULL
        GROUP BY table_id
        """,
        [start, start - dt.timedelta(days=1), end],
    )


def _shoe_rounds(
    con: duckdb.DuckDBPyConnection, start: dt.datetime, end: dt.datetime
) -> dict[tuple[str, str], int]:
    """Rounds dealt from each shoe since the day before `start`."""
    return {
        (t, s): n
        for t, s, n in con.execute(
            "SELECT table_id, shoe, count(DISTINCT round) FROM events WHERE type = 'round_start' "
            "AND ts >= ? AND ts < ? GROUP BY ALL",
            [start - dt.timedelta(days=1), end],
        ).fetchall()
    }


Place = tuple[str | None, str | None]  # the pit and table of a finding


def _findings_by_place(
    con: duckdb.DuckDBPyConnection, start: dt.datetime, end: dt.datetime
) -> tuple[defaultdict[Place, Counter[str]], Counter[Place]]:
    """The day's standing findings by (pit, table): those nobody has acknowledged by
    severity, and how many are acknowledged."""
    reviewed = acked_fingerprints(con)
    standing: defaultdict[Place, Counter[str]] = defaultdict(Counter)
    acked: Counter[Place] = Counter()
    for fp, table, pit, severity in con.execute(
        "SELECT fingerprint, table_id, pit, severity FROM current_findings "
        "WHERE ts >= ? AND ts < ?",
        [start, end],
    ).fetchall():
        key = (pit, table)
        if fp in reviewed:
            acked[key] += 1
        else:
            standing[key][severity] += 1
    return standing, acked


def _pit(pits: dict[str, dict[str, Any]], conf: PropertyConfig, name: str | None) -> dict:
    """The floor's entry for pit `name` (a table without a pit is under ""), made on first use."""
    key = name or ""
    return pits.setdefault(key, {
        "pit": key, "tables": [], "approved": conf.pit_procedures.get(key),
        "open": Counter(), "acked": 0,
    })


def _floor_table(
    t: dict[str, Any], conf: PropertyConfig, zone: dt.tzinfo, shoe_rounds: int,
    standing: Counter[str], acked: int,
) -> dict[str, Any]:
    """A table's line on the floor: the procedure the log shows, else the pit's approved one
    (said so), its shoe and the findings at it."""
    approved = conf.pit_procedures.get(t["pit"] or "")
    return {
        **t,
        "open": t["state"] == "table_open",
        "procedure_shown": t["procedure"] if t["procedure"] is not None else approved,
        "procedure_from": "log" if t["procedure"] is not None
        else ("approved for the pit" if approved is not None else None),
        "shoe_open": t["shoe_state"] == "shoe_start",
        "shoe_rounds": shoe_rounds,
        "findings": [(s, standing.get(s, 0)) for s in SEVERITIES],
        "acked": acked,
        "last": t["last_event"].astimezone(zone),
    }


def _count_off_the_tables(
    pits: dict[str, dict[str, Any]], conf: PropertyConfig,
    standing: defaultdict[Place, Counter[str]], acked: Counter[Place],
) -> None:
    """Findings of no table on the floor (a pit's own, or of a table not dealt today) are
    counted on their pit."""
    on_floor = {t["table_id"] for p in pits.values() for t in p["tables"]}
    for (pit, table), counts in standing.items():
        if table is None or table not in on_floor:
            _pit(pits, conf, pit)["open"].update(counts)
    for (pit, table), n in acked.items():
        if table is None or table not in on_floor:
            _pit(pits, conf, pit)["acked"] += n


def acknowledge(
    con: duckdb.DuckDBPyConnection,
    finding: str,
    *,
    by: str,
    disposition: str,
    note: str,
    client: dict[str, Any],
) -> dict[str, Any]:
    """Record an acknowledgement as `bacc-audit ack` does: the finding named by id or
    fingerprint, a run of its own (command `ack`, the board and the client in its args), and
    the row through `acks.add_ack`, the one append-only writer of acknowledgements."""
    a, status = acks.acknowledge(
        con, finding, by=by, disposition=disposition, note=note,
        args={"via": "board", **client},
    )
    return acks.as_dict(a) | {"finding_status": status}


def retried(write: Callable[[], T]) -> T:
    """`write()`, tried again when a transaction of the writer's touching the same catalog
    made DuckDB refuse it: a record from the board is retried rather than lost."""
    for attempt in range(3):
        try:
            return write()
        except duckdb.TransactionException:
            if attempt == 2:
                raise
            time.sleep(0.1 * (attempt + 1))
    raise AssertionError("unreachable")
