"""Replay the ingested rounds against their rule packs and record the deviations; then the
checks across rounds, tables and pits (auditor.tablecheck).

DuckDB finds the rounds not yet audited (or audited before more of their events arrived),
the table each was played at and the procedure in force; the pure per-round replay
(`auditor.replay.round.check_round`) decides; the findings go back in bulk. Each audited
round is recorded (append-only), so a rerun replays only what changed.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa

from auditor import findings
from auditor.config import PropertyConfig
from auditor.events import ROUND_EVENTS
from auditor.replay.model import Event, TableContext
from auditor.replay.round import check_round
from auditor.rulepack import RulePack, RulePackError, load_pack

ROUND_TYPES = ", ".join(f"'{t}'" for t in ROUND_EVENTS)
BATCH_ROWS = 200_000

@dataclass
class AuditResult:
    run_id: int
    rounds: int = 0
    findings_new: int = 0
    findings_withdrawn: int = 0
    by_code: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> rounds not audited
    tables: dict[str, Any] = field(default_factory=dict)  # the table/pit/shoe pass summary

    def summary(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "rounds_audited": self.rounds,
            "findings_new": self.findings_new,
            "findings_withdrawn": self.findings_withdrawn,
            "findings_by_code": dict(sorted(self.by_code.items())),
            "rounds_not_audited": dict(sorted(self.skipped.items())),
            "tables": self.tables,
        }


def audit(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    config: PropertyConfig,
    rerun: tuple[dt.datetime, dt.datetime] | None = None,
    tables: bool = True,
) -> AuditResult:
    """Audit every round not yet audited; with `rerun` (a UTC window), also every round that
    started in it. One transaction: a crash leaves no partial audit behind. Then, unless
    `tables` is false, the table, pit and shoe pass."""
    from auditor.tablecheck import supersede_round_mismatches, table_findings

    result = AuditResult(run_id)
    con.execute("BEGIN TRANSACTION")
    try:
        _select_rounds(con, config, rerun)
        _replay(con, run_id, result)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    if not tables:
        return result
    # Across rounds, tables and pits: recomputed over the whole database every time (each
    # in its own transaction), so a crash between the passes is mended by the next run.
    result.tables = table_findings(con, run_id, config)
    result.tables["mismatches_superseded"] = supersede_round_mismatches(con, run_id)
    return result


def _select_rounds(
    con: duckdb.DuckDBPyConnection,
    config: PropertyConfig,
    rerun: tuple[dt.datetime, dt.datetime] | None,
) -> None:
    """Temp table `todo`: the rounds to audit, each with its table's context."""
    pits = ", ".join(f"('{p}', {n})" for p, n in config.pit_procedures.items()) or "(NULL, NULL)"
    window = "false"
    params: list[Any] = []
    if rerun:
        window = "r.ts >= ? AND r.ts < ?"
        params = [rerun[0], rerun[1]]
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE todo AS
        WITH rounds AS (
          SELECT table_id, shoe, round, min(seq) AS first_seq, max(seq) AS last_seq,
                 count(*) AS n, min(ts) AS ts
          FROM events WHERE type IN ({ROUND_TYPES}) AND shoe IS NOT NULL
          GROUP BY ALL
        ), done AS (
          SELECT DISTINCT ON (table_id, shoe, round) table_id, shoe, round, events, last_seq
          FROM round_audits ORDER BY table_id, shoe, round, audited_at DESC
        ), opens AS (
          SELECT table_id, seq, pit, game, jurisdiction, variant, seats, side_bets, procedure
          FROM events WHERE type = 'table_open'
        ), changes AS (
          SELECT table_id, seq, procedure FROM events
          WHERE type IN ('table_open', 'procedure_change') AND procedure IS NOT NULL
        ), baseline(pit, procedure) AS (VALUES {pits})
        SELECT r.*, o.pit, o.game, o.jurisdiction, o.variant, o.seats, o.side_bets,
               coalesce(c.procedure, b.procedure) AS procedure,
               d.table_id IS NOT NULL AS audited_before
        FROM rounds r
        LEFT JOIN done d USING (table_id, shoe, round)
        ASOF LEFT JOIN opens o ON o.table_id = r.table_id AND r.first_seq > o.seq
        ASOF LEFT JOIN changes c ON c.table_id = r.table_id AND r.first_seq > c.seq
        LEFT JOIN baseline b ON b.pit = o.pit
        WHERE d.table_id IS NULL OR d.events <> r.n OR d.last_seq <> r.last_seq OR ({window})
        """,
        params,
    )


_EVENT_COLS = (
    "seq", "type", "ts", "source", "to_hand", "card", "seat", "bet", "amount", "kind",
    "player_count", "banker_count", "winner", "count", "mode", "void_reason", "disposition",
    "shoe", "round",
)


def _replay(con: duckdb.DuckDBPyConnection, run_id: int, result: AuditResult) -> None:
    contexts: dict[tuple, TableContext | str] = {}
    packs: dict[tuple[str, str], RulePack | str] = {}
    rows: list[tuple] = []
    audited: list[tuple] = []
    reader = con.sql(
        f"""
        SELECT t.table_id, t.shoe, t.round, t.n, t.last_seq, t.pit, t.game, t.jurisdiction,
               t.variant, t.seats, t.side_bets, t.procedure,
               e.seq, e.type, e.ts, s.path || ':' || e.line_no AS source, e.to_hand, e.card,
               e.seat, e.bet, e.amount, e.kind, e.player_count, e.banker_count, e.winner,
               e.count, e.mode, e.void_reason, e.disposition, e.shoe, e.round
        FROM todo t
        JOIN events e ON e.table_id = t.table_id AND e.shoe = t.shoe AND e.round = t.round
        JOIN sources s ON s.id = e.source_id
        WHERE e.type IN ({ROUND_TYPES})
        ORDER BY t.table_id, t.shoe, t.round, e.seq
        """
    ).to_arrow_reader(BATCH_ROWS)
    key: tuple | None = None
    head: tuple = ()
    events: list[Event] = []

    def flush() -> None:
        if key is None:
            return
        ctx = _context(head, contexts, packs)
        if isinstance(ctx, str):
            result.skipped[ctx] += 1
            return
        found = check_round(ctx, events)
        result.rounds += 1
        seen: Counter[tuple[str, int | None]] = Counter()
        for f in found:
            k = seen[(f.code, f.seq)]
            seen[(f.code, f.seq)] += 1
            ev = next((e for e in events if e.seq == f.seq), events[0])
            rows.append((
                f"{f.code}|{key[0]}|{key[1]}|{key[2]}|{f.seq}|{k}", f.code, key[0], ctx.pit,
                key[1], key[2], f.seq, ev.ts, f.message, json.dumps(f.expected, default=str),
                json.dumps(f.observed, default=str), f.source or ev.source,
                json.dumps({"round_events": [events[0].seq, events[-1].seq]}),
            ))
            result.by_code[f.code] += 1
        audited.append((*key, head[3], head[4], len(found)))

    for batch in reader:
        cols = batch.to_pydict()
        n = batch.num_rows
        for i in range(n):
            k = (cols["table_id"][i], cols["shoe"][i], cols["round"][i])
            if k != key:
                flush()
                key = k
                head = tuple(cols[c][i] for c in (
                    "table_id", "shoe", "round", "n", "last_seq", "pit", "game",
                    "jurisdiction", "variant", "seats", "side_bets", "procedure"))
                events = []
            events.append(_event(cols, i))
    flush()
    _store(con, run_id, rows, audited, result)


def _event(cols: dict[str, list], i: int) -> Event:
    amount = cols["amount"][i]
    return Event(
        seq=cols["seq"][i], type=cols["type"][i], ts=cols["ts"][i], source=cols["source"][i],
        to=cols["to_hand"][i], card=cols["card"][i], seat=cols["seat"][i], bet=cols["bet"][i],
        amount=None if amount is None else Decimal(amount),
        kind=cols["kind"][i], player=cols["player_count"][i], banker=cols["banker_count"][i],
        winner=cols["winner"][i], count=cols["count"][i], mode=cols["mode"][i],
        reason=cols["void_reason"][i], disposition=cols["disposition"][i],
        shoe=cols["shoe"][i], round=cols["round"][i],
    )


def _context(
    head: tuple, contexts: dict[tuple, TableContext | str], packs: dict
) -> TableContext | str:
    """The round's TableContext, or the reason it cannot be audited."""
    table, _, _, _, _, pit, game, jurisdiction, variant, seats, side_bets, procedure = head
    ck = (table, pit, game, jurisdiction, variant, seats, tuple(side_bets or ()), procedure)
    if ck in contexts:
        return contexts[ck]
    if game is None:
        reason = "no table_open event before the round"
    elif game == "chemin_de_fer":
        reason = "chemin de fer (no chemin de fer replay yet)"
    else:
        pk = (jurisdiction, game)
        if pk not in packs:
            try:
                packs[pk] = load_pack(jurisdiction, game)
            except (RulePackError, FileNotFoundError, KeyError) as e:
                packs[pk] = f"no usable rule pack for {jurisdiction} {game} ({e})"
        pack = packs[pk]
        if isinstance(pack, str):
            reason = pack
        elif variant not in pack.variants:
            reason = f"variant {variant!r} not in rule pack {pack.id}"
        else:
            ctx = TableContext(table, pit, game, jurisdiction, variant, procedure, seats,
                               tuple(side_bets or ()), pack)
            contexts[ck] = ctx
            return ctx
    contexts[ck] = reason
    return reason


def _store(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    rows: list[tuple],
    audited: list[tuple],
    result: AuditResult,
) -> None:
    names = list(findings.FINDING_COLUMNS)
    table = pa.table(
        {n: [r[i] for r in rows] for i, n in enumerate(names)},
        schema=pa.schema([
            ("fingerprint", pa.string()), ("code", pa.string()), ("table_id", pa.string()),
            ("pit", pa.string()), ("shoe", pa.string()), ("round", pa.int64()),
            ("seq", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")),
            ("message", pa.string()), ("expected", pa.string()), ("observed", pa.string()),
            ("source", pa.string()), ("evidence", pa.string()),
        ]),
    )
    con.register("new_findings", table)
    result.findings_new = findings.record(
        con, run_id,
        "SELECT fingerprint, code, table_id, pit, shoe, round, seq, ts, message, "
        "CAST(expected AS JSON) AS expected, CAST(observed AS JSON) AS observed, source, "
        "CAST(evidence AS JSON) AS evidence FROM new_findings",
    )
    # A re-audited round's old findings that the replay no longer makes are withdrawn.
    result.findings_withdrawn = findings.withdraw(
        con, run_id,
        "code NOT LIKE 'log.%' AND EXISTS (SELECT 1 FROM todo t WHERE t.audited_before "
        "AND t.table_id = current_findings.table_id AND t.shoe = current_findings.shoe "
        "AND t.round = current_findings.round) "
        "AND fingerprint NOT IN (SELECT fingerprint FROM new_findings)",
    )
    con.unregister("new_findings")
    done = pa.table(
        {n: [a[i] for a in audited] for i, n in enumerate(
            ("table_id", "shoe", "round", "events", "last_seq", "findings"))},
    )
    con.register("done_rounds", done)
    con.execute(
        f"INSERT INTO round_audits SELECT table_id, shoe, round, events, last_seq, findings, "
        f"{int(run_id)}, now() FROM done_rounds"
    )
    con.unregister("done_rounds")
