"""The table, pit and shoe pass of an audit: procedures and their notices, one procedure per
pit, undeclared changes, the shoe checks, table logs that stop without their close or a shoe's
end, and the irregularities' dispositions, over the whole database.

`table_findings` reads what it needs (events, notices entered by hand, rule packs), lets the
pure checks of `auditor.replay.procedures`, `.tables` and `.shoes` decide, then records the
findings and withdraws the standing ones of its own codes that no longer hold (a notice entered
by hand later, a file that fills a gap or completes a table's night) in one transaction.
Rerunning adds nothing.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import duckdb
import pyarrow as pa

from auditor.audit import dealers, load, shoe_reads
from auditor.config import PropertyConfig
from auditor.finding import Finding
from auditor.replay import log_ends, procedures, shoe_labels
from auditor.replay import shoes as shoe_checks
from auditor.replay import tables as table_checks
from auditor.replay.irregular import irregularity_findings
from auditor.replay.procedures import Notice, ProcedureRules
from auditor.replay.tables import MIN_UNDECLARED_ROUNDS
from auditor.rules.codes import REGISTRY
from auditor.rules.pack import PackCache, RulePack
from auditor.store import closed_days, db, findings
from auditor.store import notices as hand_notices
from auditor.store.sql import quote

# The codes this pass raises: the only ones it ever withdraws.
OWNED_CODES = (
    "procedure.notice_missing",
    "procedure.notice_late",
    "procedure.pit_inconsistent",
    "procedure.undeclared_change",
    "shoe.too_few_decks",
    "shoe.composition",
    "shoe.batch_not_alternated",
    "shoe.burn",
    "shoe.cut_card",
    "shoe.end_of_shoe",
    "shoe.void_required",
    "shoe.not_started",
    "shoe.reopened",
    "irregularity.disposition",
    "log.table_unclosed",
    "log.shoe_unfinished",
    "notice.backdated",
)
# dealer.error_rate has a step of its own (`dealer_findings`), after the mismatches a run of
# rounds supersedes are withdrawn: it counts standing round findings, and counted before that
# it would change on the next run with nothing new in the logs.
DEALER_CODES = ("dealer.error_rate",)
MISMATCH = "order.procedure_mismatch"
UNDECLARED = "procedure.undeclared_change"


def _cited(f: Finding, pack_of: Mapping[str, RulePack | None]) -> Finding:
    """The finding with the provision of its table's rule pack; a pit finding cites the pack
    of each table it names (two when a pit mixes games). The log codes keep the registry's
    text: the event log format, not a jurisdiction, defines them."""
    if not REGISTRY[f.code].games:
        return f
    tables = [f.table] if f.table else list((f.evidence or {}).get("tables") or ())
    texts = dict.fromkeys(p.cite(f.code) for t in tables if (p := pack_of.get(t)) is not None)
    return replace(f, rule="; ".join(texts) or None)


def _table_packs(
    con: duckdb.DuckDBPyConnection, packs: PackCache
) -> tuple[dict[str, RulePack | None], dict[str, bool | None]]:
    """Per table (its last table_open): the rule pack, and whether its variant charges
    vigorish (None: no pack or an unknown variant)."""
    pack_of: dict[str, RulePack | None] = {}
    charged: dict[str, bool | None] = {}
    for table, jurisdiction, game, variant in con.execute(
        """
        SELECT table_id, arg_max(jurisdiction, seq), arg_max(game, seq), arg_max(variant, seq)
        FROM events WHERE type = 'table_open' GROUP BY ALL
        """
    ).fetchall():
        pack = pack_of[table] = packs.get(jurisdiction, game)
        if pack is None or variant not in pack.variants:
            charged[table] = None
        else:
            charged[table] = bool(pack.variant(variant).vig_charged.value)
    return pack_of, charged


@dataclass(frozen=True)
class Judged:
    """What `table_findings` records beside the findings: the changes (table, seq) answered
    by notices entered by hand, and every change judged against its notices (the first
    judgement of each goes in `change_audits`: a notice delivered after it does not count)."""

    by_hand: dict[tuple[str, int], list[Notice]]
    changes: tuple[tuple[str, int], ...] = ()


def compute(
    con: duckdb.DuckDBPyConnection,
    config: PropertyConfig,
    *,
    min_undeclared_rounds: int = MIN_UNDECLARED_ROUNDS,
    changeover_grace: dt.timedelta | None = None,
    day_grace: dt.timedelta = dt.timedelta(0),
) -> tuple[list[Finding], dict[str, Any], Judged]:
    """Every table-, pit- and shoe-level finding the database supports now, counts of what
    was examined, and what was judged (`Judged`). Reads only (the notices table is created
    if missing).

    The ends of table logs are judged for the gaming days closed (store/closed_days.py), and
    for a day the database shows over: an event at or after its end plus `day_grace`; those
    days are in the counts' `gaming_days_closed`, for table_findings to record."""
    hand_notices.ensure_table(con)
    zone = config.zone_for(con)
    packs = PackCache()

    def procedure_rules(jurisdiction: str | None, game: str | None) -> ProcedureRules | None:
        pack = packs.get(jurisdiction, game)
        return None if pack is None else ProcedureRules.of(pack)

    timeline = procedures.table_timeline(
        load.load_table_events(con),
        config.pit_procedures,
        procedure_rules,
        load.load_last_ts(con),
    )
    notices = load.load_notices(con)
    verdicts = procedures.notice_verdicts(timeline.changes, notices, zone,
                                          load.load_change_audits(con))
    found = procedures.notice_findings(verdicts, zone)
    found += procedures.backdated_findings(verdicts, zone)
    pack_of, charged = _table_packs(con, packs)
    if changeover_grace is None:
        changeover_grace = _changeover_grace(pack_of)
    episodes = table_checks.pit_episodes(timeline.segments, changeover_grace)
    found += table_checks.pit_findings(episodes, zone)
    closed = log_ends.ClosedDays(
        log_ends.GamingDays(config.gaming_day_start, zone),
        frozenset(closed_days.closed_days(con)), load.load_latest_ts(con), day_grace)
    batches = _by_batch(con, config, packs, timeline, charged, min_undeclared_rounds, closed)
    found += batches.found
    found += table_checks.undeclared_findings(batches.runs, timeline.pits, notices, zone)
    irregular, unjudged = irregularity_findings(load.load_irregularities(con), pack_of)
    found += irregular
    found = dealers.place_dealers(con, [_cited(f, pack_of) for f in found])
    stats = {
        "tables_with_procedures": len(timeline.rules),
        "procedure_changes": len(timeline.changes),
        "changes_duly_notified": sum(1 for v in verdicts if v.code is None),
        "notices": len(notices),
        "notices_entered_by_hand": sum(1 for n in notices if n.key.startswith("hand:")),
        "rounds_with_payout_order": batches.counts["rounds"],
        "undeclared_runs": len(batches.runs),
        "shoes": batches.counts["shoes"],
        "shoes_without_rule_pack": batches.counts["no_pack"],
        "shoes_with_seq_gap": batches.counts["gap"],
        "irregularities_not_judged": unjudged,
        "rule_packs_missing": packs.unusable(),
        "gaming_days_closed": [f"{d:%Y-%m-%d}" for d in sorted(closed.newly)],
    }
    changes = tuple(sorted({(v.change.table, v.change.seq) for v in verdicts}))
    return found, stats, Judged(_answered_by_hand(verdicts), changes)


def _answered_by_hand(
    verdicts: Sequence[procedures.NoticeVerdict],
) -> dict[tuple[str, int], list[Notice]]:
    """Changes a notice entered by hand clears (no finding left, a hand notice counted): a
    notice finding of theirs withdrawn now says so (see _store)."""
    return {
        (v.change.table, v.change.seq): hand
        for v in verdicts
        if v.code is None
        and (hand := [n for n in v.counted.values() if n.key.startswith("hand:")])
    }


def _changeover_grace(pack_of: Mapping[str, RulePack | None]) -> dt.timedelta:
    """The packs' house option procedures.changeover_minutes (the longest, if they differ)."""
    return dt.timedelta(minutes=max(
        (int(p.value("procedures.changeover_minutes", 0)) for p in pack_of.values() if p),
        default=0,
    ))


@dataclass
class _Batches:
    """What the batches of tables gave: shoe and log-end findings, undeclared runs, counts."""

    found: list[Finding] = field(default_factory=list)
    runs: list[table_checks.Run] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)


def _by_batch(
    con: duckdb.DuckDBPyConnection,
    config: PropertyConfig,
    packs: PackCache,
    timeline: procedures.Timeline,
    charged: Mapping[str, bool | None],
    min_undeclared_rounds: int,
    closed: log_ends.ClosedDays,
) -> _Batches:
    """Rounds and shoes a batch of tables at a time: a run of rounds and a shoe stay at one
    table, and a day of millions of rounds would not fit in memory at once."""
    shoe_rules_of: dict[tuple[str | None, str | None], shoe_checks.ShoeRules | None] = {}

    def shoe_rules(jurisdiction: str | None, game: str | None) -> shoe_checks.ShoeRules | None:
        key = (jurisdiction, game)
        if key not in shoe_rules_of:
            pack = packs.get(jurisdiction, game)
            shoe_rules_of[key] = (None if pack is None
                                  else shoe_checks.ShoeRules.of(pack, config.house_options))
        return shoe_rules_of[key]

    out = _Batches()
    for tables_in in db.table_batches(con):
        every_round = load.load_rounds(con, tables_in)
        orders = load.load_orders(con, timeline, tables_in, every_round)
        suspects, n = load.tables_with_other_orders(timeline, lambda t: charged.get(t), orders)
        out.counts["rounds"] += n
        if suspects:
            for span in load.load_round_orders(con, timeline, lambda t: charged.get(t),
                                               tables_in, only=suspects,
                                               min_rounds=min_undeclared_rounds, orders=orders):
                out.runs += table_checks.undeclared_runs(span, min_undeclared_rounds)
        del orders
        shoes = shoe_reads.load_shoes(con, shoe_rules, tables_in, every_round)
        del every_round
        excess, used = shoe_reads.load_composition(con, tables_in, shoes)
        last_cards = shoe_reads.load_last_round_cards(con, shoes)
        out.found += shoe_checks.shoe_findings(shoes, excess, used, last_cards)
        out.found += shoe_labels.label_findings(shoes)
        out.found += log_ends.log_end_findings(load.load_streams(con, tables_in), shoes,
                                               closed)
        out.counts["shoes"] += len(shoes)
        out.counts["no_pack"] += sum(1 for s in shoes if s.rules is None)
        out.counts["gap"] += sum(1 for s in shoes if s.gap)
    return out


def table_findings(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    config: PropertyConfig,
    *,
    min_undeclared_rounds: int = MIN_UNDECLARED_ROUNDS,
    changeover_grace: dt.timedelta | None = None,
    day_close: tuple[str, dt.timedelta] = ("audit", dt.timedelta(0)),
) -> dict[str, Any]:
    """Compute the table, pit and shoe findings over the whole database and record them.

    New findings are appended; standing findings of OWNED_CODES that the data no longer
    supports are withdrawn. Fingerprints are deterministic, so a rerun on the same data adds
    and withdraws nothing. The gaming days the database shows over (an event at or after the
    day's end plus the grace of `day_close`) are recorded closed, by its `how`, with the
    findings. Runs its own transaction (call it outside any other). Returns a JSON-ready
    summary.
    """
    how, grace = day_close
    found, stats, judged = compute(
        con, config, min_undeclared_rounds=min_undeclared_rounds,
        changeover_grace=changeover_grace, day_grace=grace,
    )
    con.execute("BEGIN TRANSACTION")
    try:
        closed_days.close(con, [dt.date.fromisoformat(d) for d in stats["gaming_days_closed"]],
                          run_id, how)
        new, withdrawn = _store(con, run_id, found, judged.by_hand)
        _record_judged_changes(con, run_id, judged.changes)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return {
        "run_id": run_id,
        "findings": len(found),
        "findings_new": new,
        "findings_withdrawn": withdrawn,
        "findings_by_code": dict(sorted(Counter(f.code for f in found).items())),
        **stats,
    }


def dealer_findings(
    con: duckdb.DuckDBPyConnection, run_id: int, config: PropertyConfig
) -> dict[str, Any]:
    """dealer.error_rate over every shift in the database (each shift's p-chart over all its
    dealers, auditor.replay.dealers), recorded, and the standing ones the data no longer
    supports withdrawn, in one transaction. Call it after the round replay and
    supersede_round_mismatches: it counts the round findings that stand after both."""
    found, charted = dealers.shift_findings(con, config, config.zone_for(con))
    new, withdrawn = findings.replace_pass(con, run_id, "dealer_pass_findings", found,
                                           DEALER_CODES)
    return {"dealer_shifts": charted, "findings": len(found), "findings_new": new,
            "findings_withdrawn": withdrawn}


def _store(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    found: Sequence[Finding],
    by_hand: dict[tuple[str, int], list[Notice]] | None = None,
) -> tuple[int, int]:
    dupes = [fp for fp, n in Counter(f.fingerprint for f in found).items() if n > 1]
    if dupes:
        raise AssertionError(f"two table findings share a fingerprint: {dupes[:3]}")
    new = findings.record_staged(con, run_id, "table_pass_findings", found)
    withdrawn = _withdraw_answered_by_hand(con, run_id, by_hand or {})
    owned = ", ".join(map(quote, OWNED_CODES))
    withdrawn += findings.withdraw(
        con, run_id,
        f"code IN ({owned}) AND fingerprint NOT IN (SELECT fingerprint FROM table_pass_findings)",
    )
    return new, withdrawn


def _record_judged_changes(
    con: duckdb.DuckDBPyConnection, run_id: int, changes: Sequence[tuple[str, int]]
) -> None:
    """`change_audits`: the changes judged for the first time now."""
    if not changes:
        return
    con.register("judged_changes", pa.table({
        "table_id": pa.array([c[0] for c in changes], pa.string()),
        "seq": pa.array([c[1] for c in changes], pa.int64()),
    }))
    try:
        con.execute(
            f"INSERT INTO change_audits SELECT table_id, seq, {int(run_id)}, now() "
            "FROM judged_changes ANTI JOIN change_audits USING (table_id, seq)"
        )
    finally:
        con.unregister("judged_changes")


def _withdraw_answered_by_hand(
    con: duckdb.DuckDBPyConnection, run_id: int, by_hand: dict[tuple[str, int], list[Notice]]
) -> int:
    """Withdraw the standing notice findings of changes that a notice entered by hand now
    answers, with the notices named in the withdrawal's evidence (`withdrawn_because`): a
    finding cleared by what someone typed in is on the record as such, and the report lists
    it beside the logged notices."""
    if not by_hand:
        return 0
    keys = sorted(by_hand)
    con.register("answered_by_hand", pa.table({
        "table_id": pa.array([k[0] for k in keys], pa.string()),
        "seq": pa.array([k[1] for k in keys], pa.int64()),
        "because": pa.array([json.dumps({
            "hand_notices": [n.key for n in by_hand[k]],
            "entered": [n.source for n in by_hand[k]],
        }) for k in keys], pa.string()),
    }))
    try:
        return findings.withdraw(
            con, run_id,
            "code IN ('procedure.notice_missing', 'procedure.notice_late') "
            "AND fingerprint NOT IN (SELECT fingerprint FROM table_pass_findings)",
            joined="JOIN answered_by_hand a USING (table_id, seq)",
            because=("withdrawn_because", "a.because::JSON"),
        )
    finally:
        con.unregister("answered_by_hand")


# --- order.procedure_mismatch and undeclared changes ---------------------------------------


def covered_rounds(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str, int], str]:
    """(table, shoe, round) -> fingerprint of the standing procedure.undeclared_change whose
    run covers the round. Those rounds' order.procedure_mismatch findings are that one
    deviation seen round by round: the contract reports it once for the run instead."""
    out: dict[tuple[str, str, int], str] = {}
    for table, fingerprint, evidence in con.execute(
        "SELECT table_id, fingerprint, CAST(evidence AS VARCHAR) FROM current_findings "
        "WHERE code = ? ORDER BY id",
        [UNDECLARED],
    ).fetchall():
        for shoe, rnd in json.loads(evidence or "{}").get("covered_rounds", []):
            out[(table, shoe, int(rnd))] = fingerprint
    return out


_FINDING_COLS = (
    "fingerprint, run_id, recorded_at, status, severity, rule, code, table_id, pit, shoe, "
    "round, seq, ts, message, expected, observed, source, evidence, dealer"
)


def supersede_round_mismatches(con: duckdb.DuckDBPyConnection, run_id: int) -> dict[str, int]:
    """Withdraw the standing order.procedure_mismatch findings of rounds covered by a standing
    undeclared-change run (marking `evidence.superseded_by` with the run's fingerprint), and
    reopen the ones this withdrew earlier whose run no longer stands. Call it after both the
    round replay and table_findings, in every audit, so the two stay in step.
    """
    cover = covered_rounds(con)
    con.register("covered_by_runs", pa.table({
        "table_id": pa.array([k[0] for k in cover], pa.string()),
        "shoe": pa.array([k[1] for k in cover], pa.string()),
        "round": pa.array([k[2] for k in cover], pa.int64()),
        "run_fp": pa.array(list(cover.values()), pa.string()),
    }))
    con.execute("BEGIN TRANSACTION")
    try:
        withdrawn = findings.withdraw(
            con, run_id, f"code = {quote(MISMATCH)}",
            joined="JOIN covered_by_runs c USING (table_id, shoe, round)",
            because=("superseded_by", "c.run_fp"),
        )
        reopened = con.execute(
            f"""
            INSERT INTO findings ({_FINDING_COLS})
            SELECT f.fingerprint, {int(run_id)}, now(), 'open', f.severity, f.rule, f.code,
                   f.table_id, f.pit, f.shoe, f.round, f.seq, f.ts, f.message, f.expected,
                   f.observed, f.source,
                   json_merge_patch(f.evidence, '{{"superseded_by": null}}'::JSON), f.dealer
            FROM (
              SELECT *, row_number() OVER (PARTITION BY fingerprint ORDER BY id DESC) AS rn
              FROM findings WHERE code = {quote(MISMATCH)}
            ) f
            WHERE f.rn = 1 AND f.status = 'withdrawn'
              AND json_extract_string(f.evidence, '$.superseded_by') IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM covered_by_runs c WHERE c.table_id = f.table_id
                              AND c.shoe = f.shoe AND c.round = f.round)
            """
        ).fetchall()[0][0]
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        con.unregister("covered_by_runs")
    return {"mismatches_superseded": withdrawn, "mismatches_reopened": reopened}
