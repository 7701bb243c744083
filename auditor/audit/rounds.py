"""Which rounds an audit replays, and each round's events as the round stood (issue 28).

A round is what its stream logged between its round_start and its round_end (at chemin de
fer, with the bank's passing right after the round_end, before anything else of the table).
Round events placed after its round_end, or after the table's table_close, are not part of
it; nor are events delivered after the round was judged with its end in. Those are kept in
`round_exclusions` and reported beside the round (`log.after_round_end`,
`log.late_delivery`, worded by auditor.replay.stream_order), and a round judged keeps the
findings it had: its events as it stood do not change, so it is not replayed again.
Before that, a round logged again under a round's key (its round_start and what follows)
after another shoe's shoe_start is placed in that shoe: not late, not the round's, counted
in the shoe being dealt (auditor.audit.load.load_rounds' split; shoe.reopened names it).

*Judged* means: a row of `round_audits` for the round recorded after its round_end was
delivered (at chemin de fer, after the event that follows its bank's passing was), the
first such. *Delivered* means the ingest of the piece of a file that holds the event's line
(`source_extents.ingested_at`): a later file, or a later piece of the same file as it grows
(`watch`, or `ingest` of a file grown since). Both are records, so a rerun (`audit
--rerun`) takes the same events for every round.

Cost: the rounds' spans are one aggregate over the new rounds' events (as before); only the
rounds that show something out of place (an event after the round_end or the close, or
more events than when they were judged) are read event by event, with their delivery.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import duckdb
import numpy as np

from auditor.audit.load import DELIVERED_AT, DELIVERY_JOIN, ORDERED_JOIN, ORDERED_TS
from auditor.config import PropertyConfig
from auditor.replay.log_ends import StreamEvent
from auditor.replay.stream_order import LateEvent, LateRound, late_findings
from auditor.store import db, findings, set_logs
from auditor.store.events import ROUND_EVENTS
from auditor.store.sql import is_stream_sql, quote, stream_name_sql

ROUND_TYPES = ", ".join(map(quote, ROUND_EVENTS))
CHEMIN = "chemin_de_fer"
LATE_CODES = ("log.after_round_end", "log.late_delivery")
# The places of late_placed that are late events (the findings of LATE_CODES).
LATE_WHYS = ("after_end", "late_delivery")

# A round's span over its events (`round_spans`; auditor.audit.listed reads the same).
SPAN_AGGREGATES = (
    "min(seq) AS first_seq, max(seq) AS last_seq, count(*) AS n, min(ts) AS ts, "
    "min(seq) FILTER (type = 'round_end') AS end_seq, "
    "max(seq) FILTER (type <> 'bank_pass') AS last_core"
)

# The events that give a round its table context, and the closes that end its rounds;
# `watch` keeps them in a table of its own.
CONTEXT_EVENTS_SQL = (
    "SELECT table_id, seq, type, pit, game, jurisdiction, variant, seats, side_bets, "
    "procedure FROM events WHERE type IN ('table_open', 'procedure_change', 'table_close')"
)

# A round event as check_round is given it, at its ordered time (auditor.audit.streams).
EVENT_SELECT = (
    f"e.seq, e.type, {ORDERED_TS} AS ts, s.path || ':' || e.line_no AS source, e.to_hand, "
    "e.card, e.seat, e.bet, e.amount, e.kind, e.player_count, e.banker_count, e.winner, "
    "e.count, e.mode, e.void_reason, e.disposition, e.shoe, e.round, e.hand, e.choice, "
    "e.from_seat, e.to_seat"
)


def round_events_sql(rounds: str, bounded: bool = False, excluded: bool = True) -> str:
    """The events of the rounds listed in table `rounds` (shaped like `todo`) as they stood
    (without `round_excluded`), each row with its round's table context, in round and seq
    order: what check_round is given.

    `bounded`: only events stamped at or after the one parameter, the `since` select_rounds
    counted the rounds' events from (`watch`): then a round's events read are the `n` it
    counted, and DuckDB reads only the night's last row groups instead of every event of the
    database. Not for rounds read one by one (`late_seen`), whose `n` has no bound.
    `excluded`: leave out the events of `round_excluded` (False: select_rounds read no
    round one by one, and left none out)."""
    since = "AND e.ts >= ?" if bounded else ""
    left_out = (
        "LEFT JOIN round_excluded x ON x.table_id = e.table_id AND x.seq = e.seq"
        if excluded else ""
    )
    kept = "AND x.seq IS NULL" if excluded else ""
    return f"""
        SELECT t.table_id, t.shoe, t.round, t.n, t.last_seq, t.pit, t.game, t.jurisdiction,
               t.variant, t.seats, t.side_bets, t.procedure, {EVENT_SELECT},
               e.dealer AS event_dealer
        FROM {rounds} t
        JOIN events e ON e.table_id = t.table_id AND e.shoe = t.shoe AND e.round = t.round
        JOIN sources s ON s.id = e.source_id
        {ORDERED_JOIN}
        {left_out}
        WHERE e.type IN ({ROUND_TYPES}) {kept} {since}
        ORDER BY t.table_id, t.shoe, t.round, e.seq
        """


class JudgedBefore:
    """Where `watch` looks up whether a poll's rounds were judged before: among the
    round_audits rows of its own run on (the table's tail, appended while it watches: DuckDB
    skips the row groups before it by their run ids), unless a round's shoe had a round
    judged before the watch began (a watch restarted mid-shoe, a round logged again under an
    old key); then among every row, as a batch audit does. Read whole, the table made every
    poll cost more with each night the database keeps.

    Exact while no other run writes round_audits under an earlier run's id during the watch
    (only audits write it, and a watch owns its database). A row forged there then is not
    read by the polls (the round is judged again); the sweeps, batch audits that read every
    row, still count it against its run's digest (store/derived.py)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, run_id: int) -> None:
        self.run_id = int(run_id)
        pairs = con.execute(
            "SELECT DISTINCT table_id, shoe FROM round_audits WHERE run_id < ?", [self.run_id]
        ).fetchall()
        # hashes, not the pairs: a year of 500 tables' shoes in 12 MB; a collision reads more
        self._shoes = np.unique(np.fromiter((hash((t, s)) for t, s in pairs), np.int64,
                                            len(pairs)))

    def any_before(self, keys: Iterable[tuple[str, str, int]]) -> bool:
        """Whether a round of `keys` may have been judged before the watch began."""
        if not self._shoes.size:
            return False
        shoes = np.fromiter((hash((t, s)) for t, s, _ in keys), np.int64)
        return bool(np.isin(shoes, self._shoes).any())

    def audits_sql(self, keys: Iterable[tuple[str, str, int]]) -> str:
        """The SQL of the round_audits rows that can be of the rounds `keys`."""
        if self.any_before(keys):
            return "round_audits"
        return f"(SELECT * FROM round_audits WHERE run_id >= {self.run_id})"


def select_rounds(
    con: duckdb.DuckDBPyConnection,
    config: PropertyConfig,
    rerun: tuple[dt.datetime, dt.datetime] | None,
    tables_in: tuple[str, str] | None = None,
    *,
    keys: str | None = None,
    since: dt.datetime | None = None,
    closed_before: dt.datetime | None = None,
    contexts: str = "events",
    audits: str = "round_audits",
) -> bool:
    """Temp table `todo`: the rounds to audit, each with its table's context and its events
    as it stood (`n`, `first_seq`, `last_seq`; `partial` when events of it are left out),
    of the tables in `tables_in` (an inclusive range of ids) or of every table; with `keys`,
    only the rounds that table lists, whose events are no older than `since`. Temp table
    `round_excluded` (table_id, shoe, round, seq, why): the events left out, and `late_seen`:
    the rounds whose events were read one by one (their late events' findings are theirs).

    A round is audited when it never was, or when its events as it stood differ from what
    was audited (a round judged before its round_end came, say), or when it started in the
    `rerun` window. With `closed_before`, only the rounds that can get no more events: those
    with their round_end (at chemin de fer, where the bank's passing follows the round_end,
    not enough), those their table has gone past (a later event in its stream), and those
    that started before `closed_before`. With `keys`, the same but for the day's end.

    `contexts`: where the table_open, procedure_change and table_close events are read
    (`watch` keeps them in a small table, CONTEXT_EVENTS_SQL, instead of scanning the night
    each poll). `audits`: where the rounds' audits are looked up (JudgedBefore).

    Returns whether a round was read one by one (`late_seen` holds it). When none was and
    the rounds were listed (`keys`: a poll of `watch`), `round_proper`, `round_excluded`
    and `late_seen` are not made at all: the caller tells record_late and the replay so,
    instead of three statements a poll making them empty."""
    pits = (
        ", ".join(f"({quote(p)}, {int(n)})" for p, n in config.pit_procedures.items())
        or "(NULL, NULL)"
    )
    these = db.table_range_sql(tables_in)
    params: list[Any] = []  # in the order of their placeholders
    listed, recent = "", "true"
    if keys is not None:
        assert rerun is None, "a rerun window audits whole tables"
        these = f"table_id IN (SELECT table_id FROM {keys})"
        listed = f"SEMI JOIN {keys} USING (table_id, shoe, round)"
        if since is not None:
            recent = "ts >= ?"
            params.append(since)
    window = "false"
    if rerun:
        window = "r.ts >= ? AND r.ts < ?"
        params += [rerun[0], rerun[1]]
    chemin = f"coalesce(o.game = {quote(CHEMIN)}, false)"
    # Something out of place: an event after the round_end (but the bank's passing right
    # after it at chemin de fer), or, in a round without one, after a table_close logged
    # since the round began.
    overrun = (
        "((r.end_seq IS NOT NULL AND (r.last_core > r.end_seq OR (r.last_seq > r.end_seq "
        f"AND NOT ({chemin} AND r.last_seq = r.end_seq + 1)))) "
        "OR x.close_seq IS NOT NULL)"
    )
    changed = "(d.events <> r.n OR d.last_seq <> r.last_seq)"
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE round_spans AS
        WITH rounds AS MATERIALIZED (
          SELECT table_id, shoe, round, {SPAN_AGGREGATES}
          FROM events {listed}
          WHERE type IN ({ROUND_TYPES}) AND shoe IS NOT NULL AND {these} AND {recent}
          GROUP BY ALL
        ), done AS (
          SELECT DISTINCT ON (table_id, shoe, round) table_id, shoe, round, events, last_seq
          FROM {audits} {listed} WHERE {these} ORDER BY table_id, shoe, round, audited_at DESC
        ), opens AS (
          SELECT table_id, seq, pit, game, jurisdiction, variant, seats, side_bets, procedure
          FROM {contexts} WHERE type = 'table_open' AND {these}
        ), changes AS (
          SELECT table_id, seq, procedure FROM {contexts}
          WHERE type IN ('table_open', 'procedure_change') AND procedure IS NOT NULL
            AND {these}
        ), closes AS (
          SELECT table_id, seq FROM {contexts} WHERE type = 'table_close' AND {these}
        ), unended AS (
          -- a round with its round_end and an event after a close has one after its end:
          -- only the few rounds without one are looked up among the closes
          SELECT r.table_id, r.shoe, r.round, c.seq AS close_seq FROM rounds r
          ASOF JOIN closes c ON c.table_id = r.table_id AND r.last_seq > c.seq
          WHERE r.end_seq IS NULL AND c.seq > r.first_seq
        ), tops AS (
          SELECT {stream_name_sql("table", "stream")} AS table_id, max(max_seq) AS top
          FROM stream_sources WHERE {is_stream_sql("table", "stream")} GROUP BY ALL
        ), baseline(pit, procedure) AS (VALUES {pits})
        SELECT r.*, o.pit, o.game, o.jurisdiction, o.variant, o.seats, o.side_bets,
               coalesce(c.procedure, b.procedure) AS procedure,
               d.table_id IS NOT NULL AS audited_before,
               (d.table_id IS NOT NULL AND {changed}) OR {overrun} AS suspect,
               {chemin} AS chemin, t.top
        FROM rounds r
        LEFT JOIN done d USING (table_id, shoe, round)
        ASOF LEFT JOIN opens o ON o.table_id = r.table_id AND r.first_seq > o.seq
        ASOF LEFT JOIN changes c ON c.table_id = r.table_id AND r.first_seq > c.seq
        LEFT JOIN unended x USING (table_id, shoe, round)
        LEFT JOIN baseline b ON b.pit = o.pit
        LEFT JOIN tops t ON t.table_id = r.table_id
        WHERE d.table_id IS NULL OR {changed} OR ({window}) OR {overrun}
        """,
        params,
    )
    return todo_from_spans(con, rerun, tables_in, listed=keys is not None,
                           closed_before=closed_before, contexts=contexts, audits=audits)


def todo_from_spans(
    con: duckdb.DuckDBPyConnection,
    rerun: tuple[dt.datetime, dt.datetime] | None,
    tables_in: tuple[str, str] | None,
    *,
    listed: bool,
    closed_before: dt.datetime | None,
    contexts: str,
    audits: str,
) -> bool:
    """select_rounds from temp table `round_spans` on (made by it, or for a poll's listed
    rounds by auditor.audit.listed): the suspect rounds read one by one, then `todo`.
    `listed`: the rounds were listed (a poll), so the day's end closes none."""
    late = _as_they_stood(con, None if listed else tables_in, contexts,
                          empty_tables=not listed)
    # A round's round_end closes it, but at chemin de fer the bank's passing follows it
    # (bank_pass is a round event): there the table must have gone on past the round.
    ended = "(r.end_seq IS NOT NULL AND NOT r.chemin)"
    closed = "true"
    tail: list[Any] = []
    if closed_before is not None:
        closed = f"({ended} OR r.last_seq < r.top OR r.ts < ?)"
        tail.append(closed_before)
    elif listed:
        closed = f"({ended} OR r.last_seq < r.top)"
    if not late:  # every round as it stands: what the statement below gives then
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE todo AS
            SELECT r.table_id, r.shoe, r.round, r.first_seq, r.last_seq, r.n, r.ts, r.pit,
                   r.game, r.jurisdiction, r.variant, r.seats, r.side_bets, r.procedure,
                   r.audited_before, false AS partial
            FROM round_spans r WHERE {closed}
            """,
            tail,
        )
        con.execute("DROP TABLE round_spans")
        return False
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE todo AS
        SELECT r.table_id, r.shoe, r.round,
               CASE WHEN r.suspect THEN p.first_seq ELSE r.first_seq END AS first_seq,
               CASE WHEN r.suspect THEN p.last_seq ELSE r.last_seq END AS last_seq,
               CASE WHEN r.suspect THEN p.n ELSE r.n END AS n,
               CASE WHEN r.suspect THEN p.ts ELSE r.ts END AS ts,
               r.pit, r.game, r.jurisdiction, r.variant, r.seats, r.side_bets, r.procedure,
               r.audited_before, coalesce(r.suspect AND p.n <> r.n, false) AS partial
        FROM round_spans r
        LEFT JOIN round_proper p USING (table_id, shoe, round)
        LEFT JOIN (SELECT DISTINCT ON (table_id, shoe, round) table_id, shoe, round, events,
                          last_seq
                   FROM {audits} SEMI JOIN round_proper USING (table_id, shoe, round)
                   ORDER BY table_id, shoe, round, audited_at DESC) d
          USING (table_id, shoe, round)
        WHERE (NOT r.suspect OR (p.n IS NOT NULL
               AND (d.table_id IS NULL OR d.events <> p.n OR d.last_seq <> p.last_seq
                    OR ({"p.ts >= ? AND p.ts < ?" if rerun else "false"}))))
          AND {closed}
        """,
        ([rerun[0], rerun[1]] if rerun else []) + tail,
    )
    con.execute("DROP TABLE round_spans")
    return True


# The events of the rounds that show something out of place, with when each was delivered,
# the first table_close after each round began, and whether each is `away`: from a
# round_start of the round's key logged after another shoe's shoe_start (one after the round
# began) on, the events are a round dealt from that shoe, whatever shoe they name, and are
# placed there before any lateness is judged (auditor.audit.load.load_rounds' `split_at`;
# shoe.reopened names them). Stray events of the round without a round_start of their own
# stay the round's late events.
_SUSPECT_EVENTS = f"""
CREATE OR REPLACE TEMP TABLE late_events AS
WITH ev AS (
  SELECT e.table_id, e.shoe, e.round, e.seq, e.type, e.ts, e.source_id, e.line_no,
         {DELIVERED_AT} AS delivered_at, r.chemin, r.close_seq
  FROM events e
  JOIN (SELECT s.table_id, s.shoe, s.round, s.chemin,
               (SELECT min(c.seq) FROM {{contexts}} c WHERE c.type = 'table_close'
                  AND c.table_id = s.table_id AND c.seq > s.first_seq) AS close_seq
        FROM round_spans s WHERE s.suspect) r
    USING (table_id, shoe, round)
  {DELIVERY_JOIN}
  WHERE e.type IN ({ROUND_TYPES}) AND {{these}}
), started AS (
  SELECT f.table_id, f.shoe, f.round, min(st.seq) AS start_seq
  FROM (SELECT table_id, shoe, round, min(seq) AS lo FROM ev GROUP BY ALL) f
  JOIN events st ON st.table_id = f.table_id AND st.type = 'shoe_start'
    AND st.shoe <> f.shoe AND st.seq > f.lo
  GROUP BY ALL
), away AS (
  SELECT ev.table_id, ev.shoe, ev.round, min(ev.seq) AS away_seq
  FROM ev JOIN started s USING (table_id, shoe, round)
  WHERE ev.type = 'round_start' AND ev.seq > s.start_seq
  GROUP BY ALL
)
SELECT ev.*, coalesce(ev.seq >= a.away_seq, false) AS away
FROM ev LEFT JOIN away a USING (table_id, shoe, round)
"""
# When each was judged: the first round_audits row after its round_end was delivered (at
# chemin de fer, after the event following the round's end and its own bank_pass was).
_JUDGED = f"""
CREATE OR REPLACE TEMP TABLE late_judged AS
WITH ends AS (
  SELECT table_id, shoe, round, any_value(chemin) AS chemin,
         arg_min(seq, delivered_at) FILTER (type = 'round_end') AS end_seq,
         min(delivered_at) FILTER (type = 'round_end') AS end_at
  FROM late_events WHERE NOT away GROUP BY ALL
), after_end AS (
  SELECT n.table_id, n.shoe, n.round, arg_min({DELIVERED_AT}, e.seq) AS next_at
  FROM (SELECT *, end_seq + 1 AS at FROM ends WHERE chemin
        UNION ALL SELECT *, end_seq + 2 FROM ends WHERE chemin) n
  JOIN events e ON e.table_id = n.table_id AND e.seq = n.at
  {DELIVERY_JOIN}
  WHERE NOT (e.type = 'bank_pass' AND e.shoe = n.shoe AND e.round = n.round)
  GROUP BY ALL
), closed AS (
  SELECT s.table_id, s.shoe, s.round,
         CASE WHEN NOT s.chemin THEN s.end_at WHEN a.next_at IS NOT NULL
              THEN greatest(s.end_at, a.next_at) END AS closed_at
  FROM ends s LEFT JOIN after_end a USING (table_id, shoe, round)
)
SELECT c.table_id, c.shoe, c.round, min(ra.audited_at) AS judged_at
FROM closed c JOIN round_audits ra USING (table_id, shoe, round)
WHERE ra.audited_at > c.closed_at
GROUP BY ALL
"""
# Each event's place: NULL (in the round as it stood), 'other_shoe' (dealt from a shoe
# started after the round began: not the round's, not late, counted in that shoe),
# 'after_end' (after the round_end the round was judged with, or after the table's close:
# the stream's order shows it), or 'late_delivery' (within the round by its seq, but
# delivered after the round was judged).
_PLACED = """
CREATE OR REPLACE TEMP TABLE late_placed AS
WITH b AS (
  SELECT e.*, j.judged_at, coalesce(e.delivered_at > j.judged_at, false) AS after_judged
  FROM late_events e LEFT JOIN late_judged j USING (table_id, shoe, round)
), eb AS (
  SELECT *, min(seq) FILTER (type = 'round_end' AND NOT after_judged AND NOT away)
              OVER (PARTITION BY table_id, shoe, round) AS end_seq
  FROM b
), w AS (
  SELECT *,
    count(*) FILTER (seq > end_seq AND NOT away) OVER r AS after_n,
    count(*) FILTER (seq > end_seq AND NOT away AND type <> 'bank_pass') OVER r AS after_other
  FROM eb
  WINDOW r AS (PARTITION BY table_id, shoe, round ORDER BY seq ROWS UNBOUNDED PRECEDING)
)
SELECT *, CASE
    WHEN away THEN 'other_shoe'
    WHEN close_seq IS NOT NULL AND seq > close_seq THEN 'after_end'
    WHEN end_seq IS NOT NULL AND seq > end_seq
         AND NOT (chemin AND after_other = 0 AND after_n = seq - end_seq) THEN 'after_end'
    WHEN after_judged THEN 'late_delivery'
  END AS why
FROM w
"""


def _as_they_stood(
    con: duckdb.DuckDBPyConnection, tables_in: tuple[str, str] | None, contexts: str,
    empty_tables: bool = True,
) -> bool:
    """For the rounds of `round_spans` marked suspect: temp tables `round_proper` (their
    events as they stood: first and last seq, count, first time), `round_excluded` (the
    events left out, and why) and `late_seen` (the rounds read so), and their rows of
    `round_exclusions` replaced. Returns whether there were any; if not, the tables are
    made empty only if `empty_tables`."""
    if not con.execute("SELECT 1 FROM round_spans WHERE suspect LIMIT 1").fetchall():
        if not empty_tables:
            return False
        con.execute("CREATE OR REPLACE TEMP TABLE round_proper AS SELECT table_id, shoe, round, "
                    "first_seq, last_seq, n, ts FROM round_spans LIMIT 0")
        con.execute("CREATE OR REPLACE TEMP TABLE round_excluded AS SELECT table_id, shoe, "
                    "round, last_seq AS seq, 'after_end' AS why FROM round_spans LIMIT 0")
        con.execute("CREATE OR REPLACE TEMP TABLE late_seen AS SELECT table_id, shoe, round "
                    "FROM round_spans LIMIT 0")
        return False
    these = db.table_range_sql(tables_in, "e.table_id")
    con.execute(_SUSPECT_EVENTS.format(these=these, contexts=contexts))
    con.execute(_JUDGED)
    con.execute(_PLACED)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE round_proper AS SELECT table_id, shoe, round, "
        "min(seq) AS first_seq, max(seq) AS last_seq, count(*) AS n, min(ts) AS ts "
        "FROM late_placed WHERE why IS NULL GROUP BY ALL"
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE round_excluded AS SELECT table_id, shoe, round, seq, why "
        "FROM late_placed WHERE why IS NOT NULL"
    )
    con.execute("CREATE OR REPLACE TEMP TABLE late_seen AS SELECT table_id, shoe, round "
                "FROM round_spans WHERE suspect")
    con.execute("DELETE FROM round_exclusions WHERE (table_id, shoe, round) IN "
                "(SELECT (table_id, shoe, round) FROM late_seen)")
    # Events dealt from another shoe stay in that shoe's counts: only the late are kept out.
    con.execute("INSERT INTO round_exclusions SELECT * FROM round_excluded "
                f"WHERE why IN ({', '.join(map(quote, LATE_WHYS))})")
    return True


def late_rounds(con: duckdb.DuckDBPyConnection) -> list[LateRound]:
    """The rounds of `late_placed` with events left out, as auditor.replay.stream_order
    words them."""
    if not con.execute("SELECT 1 FROM round_excluded LIMIT 1").fetchall():
        return []
    whys = ", ".join(map(quote, LATE_WHYS))
    rows = con.execute(
        f"""
        WITH k AS (SELECT DISTINCT table_id, shoe, round FROM round_excluded
                   WHERE why IN ({whys})),
        ends AS (
          SELECT p.table_id, p.shoe, p.round, p.judged_at, p.end_seq, p.close_seq
          FROM late_placed p SEMI JOIN k USING (table_id, shoe, round)
          QUALIFY row_number() OVER (PARTITION BY p.table_id, p.shoe, p.round) = 1
        ), pits AS (
          SELECT table_id, arg_max(pit, seq) AS pit FROM events
          WHERE type = 'table_open' AND table_id IN (SELECT table_id FROM k) GROUP BY ALL
        )
        SELECT d.table_id, pt.pit, d.shoe, d.round, d.judged_at,
               en.seq, en.ts, es.path || ':' || en.line_no,
               cl.seq, cl.ts, cs.path || ':' || cl.line_no,
               p.seq, p.why, e.ts, ps.path || ':' || e.line_no, e.type, p.delivered_at,
               e.seat, e.bet, CAST(e.amount AS VARCHAR), e.card, e.to_hand
        FROM late_placed p JOIN ends d USING (table_id, shoe, round)
        JOIN events e ON e.table_id = p.table_id AND e.seq = p.seq
        JOIN sources ps ON ps.id = e.source_id
        LEFT JOIN pits pt ON pt.table_id = d.table_id
        LEFT JOIN events en ON en.table_id = d.table_id AND en.seq = d.end_seq
        LEFT JOIN sources es ON es.id = en.source_id
        LEFT JOIN events cl ON cl.table_id = d.table_id AND cl.seq = d.close_seq
        LEFT JOIN sources cs ON cs.id = cl.source_id
        WHERE p.why IN ({whys})
        ORDER BY d.table_id, d.shoe, d.round, p.seq
        """
    ).fetchall()
    head: dict[tuple, tuple] = {}
    late: dict[tuple, dict[str, list[LateEvent]]] = defaultdict(lambda: defaultdict(list))
    last_late: dict[tuple, int] = {}
    for row in rows:
        last_late[(row[0], row[2], row[3])] = row[11]  # rows run in seq order
    for (table, pit, shoe, rnd, judged, end_seq, end_ts, end_src, close_seq, close_ts,
         close_src, seq, why, ts, source, type_, delivered, seat, bet, amount, card,
         to) in rows:
        key = (table, shoe, rnd)
        if key not in head:
            end = None if end_seq is None else StreamEvent(table, end_seq, end_ts, "round_end",
                                                           end_src, shoe, rnd)
            # The close only where a late event follows it: until then it is not the
            # round's business (and `watch` may not have it yet).
            close = None if close_seq is None or close_seq > last_late[key] else StreamEvent(
                table, close_seq, close_ts, "table_close", close_src)
            head[key] = (pit, end, close, judged)
        late[key][why].append(LateEvent(seq, ts, type_, source, delivered, seat, bet,
                                        amount, card, to))
    return [
        LateRound(t, head[(t, s, r)][0], s, r, head[(t, s, r)][1], head[(t, s, r)][2],
                  head[(t, s, r)][3], tuple(late[(t, s, r)]["after_end"]),
                  tuple(late[(t, s, r)]["late_delivery"]))
        for t, s, r in head
    ]


def record_late(
    con: duckdb.DuckDBPyConnection, run_id: int, zone: dt.tzinfo, late: bool | None = None
) -> tuple[int, int]:
    """The late events of the rounds select_rounds read one by one (`late_seen`) as
    findings: new ones recorded, the standing ones of those rounds no longer found (a round
    that got more late events) withdrawn. In the caller's transaction. Returns (new,
    withdrawn). `late`: what select_rounds returned (None: look in `late_seen`)."""
    if late is False or (
        late is None and not con.execute("SELECT 1 FROM late_seen LIMIT 1").fetchall()
    ):
        return 0, 0
    set_logs.record(con, set_logs.EXCLUSIONS, run_id, "late_seen")  # _as_they_stood's sets
    found = [f for r in late_rounds(con) for f in late_findings(r, zone)]
    new = findings.record_staged(con, run_id, "late_findings", found)
    codes = ", ".join(map(quote, LATE_CODES))
    withdrawn = findings.withdraw(
        con, run_id,
        f"code IN ({codes}) AND (table_id, shoe, round) IN "
        "(SELECT (table_id, shoe, round) FROM late_seen) "
        "AND fingerprint NOT IN (SELECT fingerprint FROM late_findings)",
    )
    con.execute("DROP TABLE late_findings")
    return new, withdrawn
