"""Replay the ingested rounds against their rule packs and record the deviations; then the
checks across rounds, tables and pits (auditor.audit.table_pass).

DuckDB finds the rounds not yet audited (or audited before more of their events arrived),
the table each was played at and the procedure in force; the pure per-round replay
(`auditor.replay.round.check_round`, or `auditor.replay.chemin` at a chemin de fer table)
decides; the findings go back in bulk. Each audited round is recorded (append-only), so a
rerun replays only what changed.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from auditor.audit import dealers, facts
from auditor.audit.chemin_history import CheminHistory, RoundKey
from auditor.audit.chemin_order import CheminTails
from auditor.audit.event_rows import (
    CHEMIN_COLUMNS,
    EVENT_COLUMNS,
    HEAD_COLUMNS,
    card_ok,
    changed_card,
)
from auditor.audit.listed import Chosen, Listed, select_listed
from auditor.audit.load import refuse_impossible_stamps
from auditor.audit.round_rows import chemin_rounds
from auditor.audit.rounds import (
    CHEMIN,
    record_late,
    round_events_sql,
    select_rounds,
)
from auditor.audit.streams import check_streams
from auditor.config import PropertyConfig
from auditor.finding import Finding
from auditor.replay import verdict
from auditor.replay.chemin import replay_chemin_round
from auditor.replay.chemin_model import CheminEvent, CheminRules, RoundFacts
from auditor.replay.model import Event, TableContext
from auditor.replay.round import check_round, in_round
from auditor.rules.pack import PackCache, RulePack, RulePackError
from auditor.store import db, derived, findings
from auditor.store.columns import py_columns
from auditor.store.given_rows import given_rows
from auditor.store.sql import quote

BATCH_ROWS = 200_000
# Below this many rounds the verdict is skipped and check_round judges every round: the
# verdict's dozen statements cost more than a few hundred replays. Its contract (a round it
# calls clean has no finding from check_round) makes both ways give the same findings.
VERDICT_MIN_ROUNDS = 200


# The passes `audit` runs after the table pass, each summarised under its key in
# AuditResult.tables: the shoe-integrity search, the dealers' p-chart, the side-bet counters.
LATER_PASSES = ("shoe_integrity", "dealers", "side_bets")


@dataclass
class AuditResult:
    run_id: int
    rounds: int = 0
    findings_new: int = 0
    findings_withdrawn: int = 0
    by_code: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> rounds not audited
    tables: dict[str, Any] = field(default_factory=dict)  # the table/pit/shoe pass summary
    # audit_rounds with `listed`: the listed rounds audited now or before (`watch`)
    judged: set[RoundKey] | None = None

    @property
    def passes_new(self) -> int:
        """New findings of the table pass and of the passes after it (LATER_PASSES)."""
        return self.tables.get("findings_new", 0) + sum(
            self.tables.get(p, {}).get("findings_new", 0) for p in LATER_PASSES)

    @property
    def passes_withdrawn(self) -> int:
        return self.tables.get("findings_withdrawn", 0) + sum(
            self.tables.get(p, {}).get("findings_withdrawn", 0) for p in LATER_PASSES)

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


# progress(step, done, total): `step` is the work now under way, `done` of `total` units are
# finished. The library prints nothing itself; the CLI turns the calls into a bar or lines.
Progress = Callable[[str, int, int], None]


def audit(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    config: PropertyConfig,
    rerun: tuple[dt.datetime, dt.datetime] | None = None,
    tables: bool = True,
    progress: Progress | None = None,
    closed_before: dt.datetime | None = None,
    known: Known | None = None,
    day_close: tuple[str, dt.timedelta] = ("audit", dt.timedelta(0)),
) -> AuditResult:
    """Audit every round not yet audited; with `rerun` (a UTC window), also every round that
    started in it; with `closed_before` (`watch`), only the rounds that can get no more
    events (see select_rounds). One transaction: a crash leaves no partial audit behind.
    Then, unless `tables` is false, the table, pit and shoe pass, which records closed the
    gaming days the database shows over (`day_close`: who closes them, and the grace after
    a day's end; table_pass.table_findings).

    `progress` is told after each batch of tables and around the table pass: a 10M-round
    day takes many minutes, and an operator (or cron's log) should see it moving.
    """
    from auditor.audit.integrity import integrity_findings
    from auditor.audit.sidebets import side_bet_findings
    from auditor.audit.table_pass import (
        dealer_findings,
        supersede_round_mismatches,
        table_findings,
    )

    refuse_impossible_stamps(con)
    derived.refuse_untrusted(con, run_id)
    result = AuditResult(run_id)
    known = known or Known()
    zone = known.zone_of(con, config)
    if tables:  # before the rounds: their times are the streams' ordered times
        result.tables["streams"] = check_streams(con, run_id, zone)
    batches = db.table_batches(con)
    total = len(batches) + (1 if tables else 0)
    with _rounds_transaction(con, run_id):
        for i, tables_in in enumerate(batches):
            if progress:
                progress(_batch_step(i, len(batches)), i, total)
            late = select_rounds(con, config, rerun, tables_in, closed_before=closed_before)
            _late(result, record_late(con, run_id, zone, late))
            _replay(con, run_id, result, known, late=late)
    if not tables:
        if progress:
            progress("rounds replayed", total, total)
        return result
    if progress:
        progress("tables, pits and shoes", len(batches), total)
    # Across rounds, tables and pits: recomputed over the whole database every time (each
    # in its own transaction), so a crash between the passes is mended by the next run.
    streams = result.tables["streams"]
    # The shoe-integrity pass shares nothing with the table pass but `findings`, where each
    # appends only its own codes (and the table pass withdraws only its own): it runs beside
    # it, on a cursor of its own.
    with beside(con, lambda cur: integrity_findings(
            cur, run_id, config, finished_only=closed_before is not None)) as integrity:
        result.tables = table_findings(con, run_id, config, day_close=day_close)
        result.tables["mismatches_superseded"] = supersede_round_mismatches(con, run_id)
    result.tables["findings_new"] += streams["findings_new"]
    result.tables["findings_withdrawn"] += streams["findings_withdrawn"]
    result.tables["streams"] = streams
    # Before the dealers: a shoe finding counts against the shoe's dealer.
    result.tables["shoe_integrity"] = integrity.result()
    result.tables["dealers"] = dealer_findings(con, run_id, config)
    result.tables["side_bets"] = side_bet_findings(con, run_id, config)
    if progress:
        progress("tables, pits and shoes", total, total)
    return result


@contextmanager
def beside(
    con: duckdb.DuckDBPyConnection, work: Callable[[duckdb.DuckDBPyConnection], Any]
) -> Iterator[Future[Any]]:
    """`work(cursor)` in a thread, on a cursor of `con` (its own transactions), while the
    block runs: two passes over the database take both cores where each alone leaves one
    mostly idle in its Python (the 1M-round day's table and integrity passes: about a
    quarter less wall time together, docs/benchmarks.md, session 65). The block's end
    waits for the work whatever happened in it, so the cursor never outlives the block; the
    block's own error is raised before the work's, and `.result()` gives the work's result
    or raises its error."""
    cur = con.cursor()
    try:
        cur.execute("SET TimeZone = 'UTC'")  # a session setting (db.connect), not inherited
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-beside") as pool:
            yield pool.submit(work, cur)
    finally:
        cur.close()


def audit_rounds(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    config: PropertyConfig,
    keys: str,
    since: dt.datetime | None,
    known: Known | None = None,
    contexts: str = "events",
    audits: str = "round_audits",
    listed: Listed | None = None,
) -> AuditResult:
    """Audit the rounds listed in table `keys` (table_id, shoe, round) that are not yet
    audited, or were audited before more of their events arrived: what `watch` calls as the
    rounds end, with the same replay and the same writer as `audit`, so a watched night's
    findings are a batch audit's.

    `since` bounds the events read: no event of these rounds is older (`watch` knows it of
    every event it loaded: auditor.jobs.earliest), so DuckDB skips the row groups before it
    (appended in time order). Were one older all the same (loaded before the watch began),
    the round is recorded with the events it was judged on, and the next sweep (a batch
    audit) finds it changed and judges it again whole. `known` carries contexts, packs,
    Terms, chemin de fer facts and shoes' dealers from one call to the next. `contexts`,
    `audits`: see select_rounds; with `listed`, auditor.audit.listed chooses the rounds
    (and lifts `since` for one with no round_start at or after it). One transaction.
    """
    result = AuditResult(run_id)
    known = known or Known()
    with _rounds_transaction(con, run_id, gathered=False):
        chosen = (
            select_listed(con, config, keys, listed.rounds, since, listed.index,
                          contexts=contexts, audits=audits, stream_tops=listed.tops,
                          spans=listed.spans)
            if listed is not None else
            Chosen(select_rounds(con, config, None, keys=keys, since=since,
                                 contexts=contexts, audits=audits), since, None, None))
        _late(result, record_late(con, run_id, known.zone_of(con, config), chosen.late))
        written: set[RoundKey] = set()
        held = None if listed is None else listed.held_events(con, chosen, VERDICT_MIN_ROUNDS)
        _replay(con, run_id, result, known, chosen.since, late=chosen.late,
                into="round_audits", todo=chosen.todo,
                written=None if chosen.judged is None else written, held=held)
        if chosen.judged is not None:
            result.judged = chosen.judged | written
    return result


def _late(result: AuditResult, counts: tuple[int, int]) -> None:
    """The late events' findings (record_late) counted with the rounds': theirs."""
    result.findings_new += counts[0]
    result.findings_withdrawn += counts[1]


@contextmanager
def _rounds_transaction(
    con: duckdb.DuckDBPyConnection, run_id: int, gathered: bool = True
) -> Iterator[None]:
    """One transaction for _replay calls, their audited rounds gathered in `audited_rounds`
    and stored at the end: rows appended to round_audits in the transaction would be read
    in full by each later batch (no zonemaps until commit). Not `gathered`: one _replay
    call, which writes round_audits itself (`into`)."""
    with db.transaction(con):
        if gathered:
            con.execute(
                "CREATE OR REPLACE TEMP TABLE audited_rounds AS "
                "SELECT * EXCLUDE (run_id, audited_at) FROM round_audits LIMIT 0"
            )
        yield
        if gathered:
            con.execute(f"INSERT INTO round_audits SELECT *, {int(run_id)}, now() "
                        "FROM audited_rounds")
            con.execute("DROP TABLE audited_rounds")


def _batch_step(i: int, n: int) -> str:
    return f"rounds, tables batch {i + 1} of {n}" if n > 1 else "rounds"


@dataclass
class Known:
    """What the batches of one audit share: table contexts (or why a round cannot be
    audited), rule packs, and the verdict's Terms by (jurisdiction, game, variant,
    procedure, side bets) and their tables by outcome_key, each worked out once."""

    contexts: dict[tuple, TableContext | str] = field(default_factory=dict)
    packs: PackCache = field(default_factory=PackCache)
    terms: dict[tuple, verdict.Terms | str] = field(default_factory=dict)
    # their per-outcome tables, by verdict.outcome_key: the same for every procedure
    outcomes: dict[tuple, verdict.OutcomeTables | str] = field(default_factory=dict)
    zone: dt.tzinfo | None = None  # the property's, for the findings' sentences
    # Kept from one call to the next (`watch`'s polls), so a poll does not read the whole
    # database again for them: the facts of chemin de fer rounds replayed or read back (a
    # round's events as it stood do not change once judged; one judged again is recorded
    # again), and each shoe's dealer (None: its shoe_start names none), which only a new
    # shoe_start of its table can change (forget_shoes).
    chemin_facts: dict[RoundKey, RoundFacts] = field(default_factory=dict)
    shoe_dealers: dict[tuple[str, str], str | None] = field(default_factory=dict)
    # `watch`'s: the chemin de fer tables' rounds in log order, told of each poll's events
    # (auditor.audit.chemin_order); None: read from the events by each call.
    chemin_tails: CheminTails | None = None

    def forget_shoes(self, tables: set[str]) -> None:
        """A shoe_start of these tables was loaded: their shoes' dealers are read again."""
        if tables:
            self.shoe_dealers = {k: v for k, v in self.shoe_dealers.items()
                                 if k[0] not in tables}

    def zone_of(self, con: duckdb.DuckDBPyConnection, config: PropertyConfig) -> dt.tzinfo:
        """config.zone_for, kept once known (without a configured zone it reads the logs).
        Not kept while the database holds no log: `watch` asks before its first lines come,
        and the UTC of an empty database would word every later finding in UTC, not in the
        zone a batch audit of the same logs shows."""
        if self.zone is None:
            known = config.zone_known(con)
            if known is None:
                return config.zone()
            self.zone = known
        return self.zone


def _replay(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    result: AuditResult,
    known: Known,
    since: dt.datetime | None = None,
    *,
    late: bool = True,
    into: str = "audited_rounds",
    todo: list[tuple[RoundKey, bool]] | None = None,
    written: set[RoundKey] | None = None,
    held: dict[str, list[Any]] | None = None,
) -> None:
    """The verdict (auditor.replay.verdict, over per-round facts) settles which rounds are
    exactly right; every other round (flagged, void, irregular, chemin de fer, at a table
    without a usable pack) goes through the reference, in table order, which alone writes
    round findings. `since`: select_rounds' bound (audit_rounds). `late`: what
    select_rounds returned (False: no round read one by one, no `late_seen` to look in).
    `into`: where the rounds audited go (_rounds_transaction). `todo`: its rounds, each
    with whether it was audited before, when the caller knows them. `written`: given the
    rounds audited, if given. `held`: todo's events as the read would give them
    (auditor.audit.round_rows), which are then not read."""
    contexts, packs = known.contexts, known.packs
    todo_rounds, again = (len(todo), any(a for _, a in todo)) if todo is not None else (
        db.single(con, "SELECT count(*), coalesce(bool_or(audited_before), false) FROM todo"))
    verdict_run = todo_rounds >= VERDICT_MIN_ROUNDS
    if verdict_run:
        clean = clean_rounds(con, known)
        con.execute(
            "CREATE OR REPLACE TEMP TABLE todo_py AS SELECT t.* FROM todo t "
            "ANTI JOIN todo_clean c USING (table_id, shoe, round)"
        )
    else:  # a few rounds (watch, as they end): the verdict's fixed cost is not worth it
        clean = 0
    result.rounds += clean
    py_rounds = "todo_py" if verdict_run else "todo"
    rows: list[Finding] = []
    audited: list[tuple] = []
    # before the reader: DuckDB streams one result at a time
    chemin = CheminHistory.load(con, packs, known.chemin_facts, known.chemin_tails,
                                None if held is None else chemin_rounds(held))
    shoe_dealers = dealers.of_shoes(con, py_rounds, known.shoe_dealers,
                                    None if todo is None or verdict_run else
                                    {(t, s) for (t, s, _), _ in todo})
    # Rounds read one by one counted every event of theirs, with no bound.
    bounded = since is not None and not (late and con.execute(
        f"SELECT 1 FROM late_seen SEMI JOIN {py_rounds} USING (table_id, shoe, round) LIMIT 1"
    ).fetchall())
    reader = None if held is not None else con.sql(
        round_events_sql(py_rounds, bounded, excluded=late),
        params=[since] if bounded else None,
    ).to_arrow_reader(BATCH_ROWS)
    key: tuple | None = None
    head: tuple = ()
    events: list[Event] = []
    dealer: str | None = None  # of the round's round_start

    def flush() -> None:
        if key is None:
            return
        ctx = _context(head, contexts, packs)
        if isinstance(ctx, str):
            result.skipped[ctx] += 1
            chemin.forget(key)
            return
        found: list[Finding]
        if ctx.game == CHEMIN:
            found, played = replay_chemin_round(ctx, events, chemin.before(key))
            chemin.record(key, played)
        else:
            found = check_round(ctx, events)
        result.rounds += 1
        who = dealer if dealer is not None else shoe_dealers.get((key[0], key[1]))
        rows.extend(in_round(found, ctx, key[1], key[2], events, who))
        result.by_code.update(f.code for f in found)
        audited.append((*key, head[3], head[4], len(found)))

    try:
        for cols in [held or {}] if reader is None else map(py_columns, reader):
            tables, shoes, rounds, types, cards = (
                cols[c] for c in ("table_id", "shoe", "round", "type", "card"))
            heads = [cols[c] for c in HEAD_COLUMNS]
            plain = zip(*(cols[c] for c in EVENT_COLUMNS), strict=True)
            chemin_only = zip(*(cols[c] for c in CHEMIN_COLUMNS), strict=True)
            for i, (row, more) in enumerate(zip(plain, chemin_only, strict=True)):
                k = (tables[i], shoes[i], rounds[i])
                if k != key:
                    flush()
                    key = k
                    head = tuple(c[i] for c in heads)
                    events = []
                    dealer = None
                if dealer is None and types[i] == "round_start":
                    dealer = cols["event_dealer"][i]
                if not card_ok(types[i], cards[i]):
                    raise changed_card(tables[i], row[0], row[3], cards[i])
                events.append(CheminEvent(*row, *more) if head[6] == CHEMIN else Event(*row))
        flush()
    finally:
        # Whatever went wrong, the stream is let go first: DuckDB refuses the rollback and
        # the run's record on a connection with a result still open, and says only that.
        if reader is not None:
            reader.close()
    _store(con, run_id, rows, audited, result, again=again,
           clean="todo_clean" if verdict_run else None, into=into)
    if written is not None:
        written.update((t, s, r) for t, s, r, *_ in audited)
        if verdict_run:
            written.update(con.execute("SELECT table_id, shoe, round FROM todo_clean").fetchall())


def clean_rounds(con: duckdb.DuckDBPyConnection, known: Known) -> int:
    """Temp table `todo_clean`: the rounds of `todo` the verdict calls exactly right (they
    need no replay and have no findings). Returns their number."""
    all_terms = fast_rounds(con, known)
    rounds, stakes = facts.build(con, "todo_fast")
    ok = verdict.clean(rounds, stakes, all_terms)
    con.register("verdict_ok", pa.table({"rid": pa.array(np.flatnonzero(ok) + 1, pa.int64())}))
    try:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE todo_clean AS SELECT table_id, shoe, round, n, "
            "last_seq FROM todo_fast SEMI JOIN verdict_ok USING (rid)"
        )
    finally:
        con.unregister("verdict_ok")
    con.execute("DROP TABLE todo_fast")
    return int(ok.sum())


_CONTEXT_HASH = "hash(pit, game, jurisdiction, variant, seats, side_bets, procedure)"


def fast_rounds(con: duckdb.DuckDBPyConnection, known: Known) -> list[verdict.Terms]:
    """Temp table `todo_fast`: the rounds of `todo` the verdict can judge (a usable context
    that is not chemin de fer, a pack it encodes), numbered from 1 as `rid`, with `ctx` the
    index of their Terms in the list returned."""
    # One row per table context; rounds find theirs by table and a hash of the rest.
    keys = con.execute(
        f"SELECT DISTINCT table_id, pit, game, jurisdiction, variant, seats, side_bets, "
        f"procedure, {_CONTEXT_HASH} FROM todo"
    ).fetchall()
    index: dict[tuple, int | None] = {}
    all_terms: list[verdict.Terms] = []
    ctx_of: list[int | None] = []
    # Two contexts of one table with the same hash would be told apart by nothing: their
    # rounds go to check_round.
    hashed = Counter((k[0], k[8]) for k in keys)
    for table, pit, game, jurisdiction, variant, seats, side_bets, procedure, ch in keys:
        head = (table, None, None, None, None, pit, game, jurisdiction, variant, seats,
                side_bets, procedure)
        ctx = _context(head, known.contexts, known.packs)
        at: int | None = None
        if not isinstance(ctx, str) and ctx.game != CHEMIN and hashed[(table, ch)] == 1:
            tk = (jurisdiction, game, variant, procedure, tuple(side_bets or ()))
            if tk not in known.terms:
                ok = verdict.outcome_key(ctx)
                if ok not in known.outcomes:
                    known.outcomes[ok] = verdict.shared_outcome_tables(ctx)
                known.terms[tk] = verdict.terms(ctx, known.outcomes[ok])
            if tk not in index:
                t = known.terms[tk]
                index[tk] = None if isinstance(t, str) else len(all_terms)
                if not isinstance(t, str):
                    all_terms.append(t)
            at = index[tk]
        ctx_of.append(at)
    con.register(
        "verdict_contexts",
        pa.table(
            {
                "table_id": pa.array([k[0] for k in keys], pa.string()),
                "ch": pa.array([k[8] for k in keys], pa.uint64()),
                "ctx": pa.array(ctx_of, pa.int64()),
            }
        ),
    )
    try:
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE todo_fast AS
            SELECT (row_number() OVER ())::BIGINT AS rid,
                   t.table_id, t.shoe, t.round, t.first_seq, t.last_seq, t.n, c.ctx
            FROM (SELECT *, {_CONTEXT_HASH} AS ch FROM todo WHERE NOT partial) t
            JOIN (SELECT * FROM verdict_contexts WHERE ctx IS NOT NULL) c USING (table_id, ch)
            """
        )
    finally:
        con.unregister("verdict_contexts")
    return all_terms


def _context(
    head: tuple, contexts: dict[tuple, TableContext | str], packs: PackCache
) -> TableContext | str:
    """The round's TableContext, or the reason it cannot be audited."""
    table, _, _, _, _, pit, game, jurisdiction, variant, seats, side_bets, procedure = head
    ck = (table, pit, game, jurisdiction, variant, seats, tuple(side_bets or ()), procedure)
    if ck in contexts:
        return contexts[ck]
    if game is None:
        reason = "no table_open event before the round"
    else:
        pack = packs.lookup(jurisdiction, game)
        if isinstance(pack, Exception):
            reason = f"no usable rule pack for {jurisdiction} {game} ({pack})"
        elif variant not in pack.variants:
            reason = f"variant {variant!r} not in rule pack {pack.id}"
        elif game == CHEMIN and (problem := _chemin_problem(pack)):
            reason = f"no usable rule pack for {jurisdiction} {game} ({problem})"
        else:
            ctx = TableContext(
                table,
                pit,
                game,
                jurisdiction,
                variant,
                procedure,
                seats,
                tuple(side_bets or ()),
                pack,
            )
            contexts[ck] = ctx
            return ctx
    contexts[ck] = reason
    return reason


def _chemin_problem(pack: RulePack) -> str | None:
    """Why the chemin de fer replay cannot use `pack`, or None."""
    try:
        CheminRules.of(pack)
    except RulePackError as e:
        return str(e)
    return None


_AUDITED = [("table_id", "VARCHAR"), ("shoe", "VARCHAR"), ("round", "BIGINT"),
            ("events", "BIGINT"), ("last_seq", "BIGINT"), ("findings", "BIGINT")]


def _later_pass_codes() -> str:
    """The codes the passes after the round replay raise and withdraw, as SQL literals."""
    from auditor.audit import integrity, sidebets, table_pass

    codes = (*table_pass.OWNED_CODES, *table_pass.DEALER_CODES, *integrity.CODES, sidebets.CODE)
    return ", ".join(map(quote, codes))


def _store(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    rows: list[Finding],
    audited: list[tuple],
    result: AuditResult,
    *,
    again: bool,
    clean: str | None,
    into: str,
) -> None:
    """The findings and the rounds audited written: `again` if a round of `todo` was
    audited before; `clean`, the table of the rounds the verdict cleared (None: no verdict);
    `into`: `audited_rounds` (gathered for the transaction's end) or `round_audits`."""
    if rows or again:  # round_findings is what a withdrawal compares against
        result.findings_new += findings.record_staged(
            con, run_id, "round_findings" if again else None, rows)
    # A re-audited round's old findings that the replay no longer makes are withdrawn (a
    # watch's rounds, audited as they end, seldom were audited before: no query then). Only
    # the replay's own: a finding of a later pass that names the round (shoe.void_required)
    # is that pass's to keep or withdraw, else a rerun withdraws it and the pass opens it again.
    if again:
        result.findings_withdrawn += findings.withdraw(
            con,
            run_id,
            f"code NOT LIKE 'log.%' AND code NOT IN ({_later_pass_codes()}) "
            "AND EXISTS (SELECT 1 FROM todo t WHERE t.audited_before "
            "AND t.table_id = current_findings.table_id AND t.shoe = current_findings.shoe "
            "AND t.round = current_findings.round) "
            "AND fingerprint NOT IN (SELECT fingerprint FROM round_findings)",
        )
    stamp = f", {int(run_id)}, now()" if into == "round_audits" else ""
    cleared = (f" UNION ALL SELECT table_id, shoe, round, n, last_seq, 0 FROM {clean}"
               if clean else "")
    with given_rows(con, "done_rounds", _AUDITED, list(zip(*audited, strict=True))) as (
            done, params):
        con.execute(
            f"INSERT INTO {into} SELECT table_id, shoe, round, events, last_seq, findings"
            f"{stamp} FROM (SELECT * FROM {done}{cleared})", params)
