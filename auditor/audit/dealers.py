"""Dealers in the audit database: who dealt each round and shoe, and how often their rounds
had findings, per period (docs/dealers.md).

A round's dealer is the `dealer` of its round_start, else that of its shoe's shoe_start; a
shoe's dealer, that of its shoe_start. The counts are read here in SQL (a day holds millions
of rounds, so they are aggregated in DuckDB, never listed in Python); the p-chart and the
decision are `auditor.replay.dealers`. Used by the table pass (dealer.error_rate per shift),
`bacc-audit dealers` and the report: its "By dealer" page (the shift against the last 30
gaming days) and its trend of findings per gaming day (`history`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from auditor.config import PropertyConfig
from auditor.finding import Finding
from auditor.replay.dealers import DealerCount, DealerRate, error_rate_findings, p_chart
from auditor.rules.codes import REGISTRY, SEVERITIES
from auditor.store.sql import quote

# An error round is a round with at least one standing finding of these scopes: what the
# round replay writes (docs/dealers.md). Shoe findings are counted per dealer but do not make
# an error round: a shoe is the shuffler's and the pit's work as much as the dealer's.
ROUND_SCOPES = ("round", "chemin")
SHOE_SCOPES = ("shoe",)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Window:
    """A period: its label (`2026-12-01/grave`, `2026-12-01`, `2026-12-01..2026-12-03`) and
    its UTC bounds [start, end)."""

    label: str
    start: dt.datetime
    end: dt.datetime


def _codes(scopes: Sequence[str]) -> str:
    return ", ".join(quote(c.code) for c in REGISTRY.values() if c.scope in scopes)


def _ts(t: dt.datetime) -> str:
    return f"TIMESTAMPTZ {quote(t.astimezone(dt.UTC).isoformat())}"


def windows_sql(windows: Sequence[Window]) -> str:
    """The shift windows as SQL constants `w(label, ws, we)`, for the dealers' and the side
    bets' passes to join rounds to their shift."""
    rows = ", ".join(f"({quote(w.label)}, {_ts(w.start)}, {_ts(w.end)})" for w in windows)
    return f"(VALUES {rows}) AS w(label, ws, we)"


# The shoes' dealers, and the rounds of the windows with theirs (round_start, else shoe_start).
# A round is in the window of its round_start's ordered time (auditor.audit.streams): a
# round_start stamped earlier than its stream's order allows still counts where it was
# dealt (the second part: the few in ordered_times, stamped before the windows).
_ROUNDS_CTE = """
ss AS (
  SELECT table_id, shoe, arg_min(dealer, seq) AS dealer FROM events
  WHERE type = 'shoe_start' AND dealer IS NOT NULL GROUP BY ALL
), rs AS (
  SELECT table_id, shoe, round, min(ts) AS ts, arg_min(dealer, seq) AS dealer FROM (
    SELECT e.table_id, e.shoe, e.round, e.seq, e.dealer, coalesce(o.ts, e.ts) AS ts
    FROM events e LEFT JOIN ordered_times o ON o.stream = e.stream AND o.seq = e.seq
    WHERE e.type = 'round_start' AND e.shoe IS NOT NULL AND e.ts >= ? AND e.ts < ?
    UNION ALL
    SELECT e.table_id, e.shoe, e.round, e.seq, e.dealer, o.ts
    FROM ordered_times o JOIN events e ON e.stream = o.stream AND e.seq = o.seq
    WHERE e.type = 'round_start' AND e.shoe IS NOT NULL AND o.ts >= ? AND e.ts < ?
  ) GROUP BY ALL
), r AS (
  SELECT w.label, rs.table_id, rs.shoe, rs.round, rs.ts, coalesce(rs.dealer, ss.dealer) AS dealer
  FROM rs LEFT JOIN ss USING (table_id, shoe)
  JOIN {windows} ON rs.ts >= w.ws AND rs.ts < w.we
)"""


def _bounds(windows: Sequence[Window]) -> list[dt.datetime]:
    """_ROUNDS_CTE's parameters: the windows' first start and last end, twice."""
    return [min(w.start for w in windows), max(w.end for w in windows)] * 2


def count_rounds(
    con: duckdb.DuckDBPyConnection, windows: Sequence[Window]
) -> tuple[list[DealerCount], Counter[str]]:
    """Per window and dealer: rounds dealt (rounds with a round_start in the window), error
    rounds, the first round's time and the tables dealt at; and per window the rounds that
    name no dealer (left off the chart). Windows must not overlap."""
    if not windows:
        return [], Counter()
    rows = con.execute(
        f"""
        WITH {_ROUNDS_CTE.format(windows=windows_sql(windows))}, bad AS (
          SELECT DISTINCT table_id, shoe, round FROM current_findings
          WHERE round IS NOT NULL AND code IN ({_codes(ROUND_SCOPES)})
        )
        SELECT r.label, r.dealer, count(*), count(b.round), min(r.ts),
               list(DISTINCT r.table_id ORDER BY r.table_id)
        FROM r LEFT JOIN bad b USING (table_id, shoe, round)
        GROUP BY ALL ORDER BY r.label, r.dealer
        """,
        _bounds(windows),
    ).fetchall()
    counts, unnamed = [], Counter[str]()
    for label, dealer, n, errors, first, tables in rows:
        if dealer is None:
            unnamed[label] += n
        else:
            counts.append(DealerCount(label, dealer, n, errors, first, tuple(tables)))
    return counts, unnamed


def findings_by_severity(
    con: duckdb.DuckDBPyConnection, windows: Sequence[Window]
) -> dict[tuple[str, str | None], Counter[str]]:
    """(window, dealer) -> standing round and shoe findings by severity: a round finding is
    its round's dealer's (in the window its round started in), a shoe finding (dated in the
    window) its shoe_start's dealer's. Those of rounds and shoes that name no dealer are
    under dealer None (the report's trend counts them; no chart does)."""
    if not windows:
        return {}
    out: dict[tuple[str, str | None], Counter[str]] = defaultdict(Counter)
    ws = windows_sql(windows)
    for label, dealer, severity, n in con.execute(
        f"""
        WITH {_ROUNDS_CTE.format(windows=ws)}
        SELECT r.label, r.dealer, f.severity, count(*)
        FROM current_findings f JOIN r USING (table_id, shoe, round)
        WHERE f.code IN ({_codes(ROUND_SCOPES)})
        GROUP BY ALL
        UNION ALL
        SELECT w.label, ss.dealer, f.severity, count(*)
        FROM current_findings f LEFT JOIN ss USING (table_id, shoe)
        JOIN {ws} ON f.ts >= w.ws AND f.ts < w.we
        WHERE f.code IN ({_codes(SHOE_SCOPES)})
        GROUP BY ALL
        """,
        _bounds(windows),
    ).fetchall():
        out[(label, dealer)][severity] += n
    return out


def gaming_day_of(t: dt.datetime, config: PropertyConfig, zone: dt.tzinfo) -> dt.date:
    """The gaming day a time belongs to (the day whose gaming_day_start precedes it)."""
    start = config.gaming_day_start
    local = t.astimezone(zone) - dt.timedelta(hours=start.hour, minutes=start.minute)
    return local.date()


def shift_windows(
    con: duckdb.DuckDBPyConnection, config: PropertyConfig, zone: dt.tzinfo
) -> list[Window]:
    """Every shift of each gaming day that holds a round (by its round_start's stamp or its
    ordered time), sorted by start (shifts never overlap: config refuses it).

    Only the days with rounds, not every day from the first to the last: one round_start
    stamped a century ahead made the audit chart 109,000 empty shifts (25 s), one in the
    year 9000 2.6 million days' (90 s only to list them)."""
    hours = con.execute(
        """
        SELECT DISTINCT epoch_us(ts) // 3600000000 FROM (
          SELECT ts FROM events WHERE type = 'round_start'
          UNION ALL
          SELECT o.ts FROM ordered_times o JOIN events e ON e.stream = o.stream AND e.seq = o.seq
          WHERE e.type = 'round_start'
        )
        """
    ).fetchall()
    days = set()
    for (hour,) in hours:
        start = EPOCH + dt.timedelta(hours=hour)  # a UTC hour holds at most two gaming days
        days |= {gaming_day_of(start, config, zone),
                 gaming_day_of(start + dt.timedelta(hours=1, microseconds=-1), config, zone)}
    out = []
    for day in sorted(days):
        for s in config.shifts:
            start, end = config.shift_window(day, s.name, zone)
            out.append(Window(f"{day:%Y-%m-%d}/{s.name}", start, end))
    return sorted(out, key=lambda w: w.start)


def shift_findings(
    con: duckdb.DuckDBPyConnection, config: PropertyConfig, zone: dt.tzinfo
) -> tuple[list[Finding], int]:
    """dealer.error_rate over every shift in the database: each shift's p-chart over all its
    dealers. Returns the findings and the number of (shift, dealer) pairs charted."""
    counts, _ = count_rounds(con, shift_windows(con, config, zone))
    by_shift: dict[str, list[DealerCount]] = defaultdict(list)
    for c in counts:
        by_shift[c.period].append(c)
    found = [f for shift in sorted(by_shift) for f in error_rate_findings(by_shift[shift])]
    return found, len(counts)


def place_dealers(con: duckdb.DuckDBPyConnection, found: Sequence[Finding]) -> list[Finding]:
    """The findings with their dealer: one naming a round gets the round's dealer, one naming
    only a shoe the shoe's; others (tables, pits, logs) keep theirs (None)."""
    rounds = sorted({(f.table, f.shoe, f.round) for f in found
                     if f.dealer is None and f.table and f.shoe and f.round is not None})
    shoes = sorted({(f.table, f.shoe) for f in found if f.dealer is None and f.table and f.shoe})
    if not shoes:
        return list(found)
    shoe_keys = ", ".join(f"({quote(t)}, {quote(s)})" for t, s in shoes)
    of_shoe = {
        (t, s): d
        for t, s, d in con.execute(
            f"""
            SELECT table_id, shoe, arg_min(dealer, seq) FROM events
            SEMI JOIN (VALUES {shoe_keys}) AS k(table_id, shoe) USING (table_id, shoe)
            WHERE type = 'shoe_start' AND dealer IS NOT NULL GROUP BY ALL
            """
        ).fetchall()
    }
    of_round: dict[tuple, str] = {}
    if rounds:
        round_keys = ", ".join(
            f"({quote(t)}, {quote(s)}, {int(r)})" for t, s, r in rounds
        )
        of_round = {
            (t, s, r): d
            for t, s, r, d in con.execute(
                f"""
                SELECT table_id, shoe, round, arg_min(dealer, seq) FROM events
                SEMI JOIN (VALUES {round_keys}) AS k(table_id, shoe, round)
                     USING (table_id, shoe, round)
                WHERE type = 'round_start' AND dealer IS NOT NULL GROUP BY ALL
                """
            ).fetchall()
        }
    out = []
    for f in found:
        if f.dealer is None and f.table and f.shoe:
            who = of_round.get((f.table, f.shoe, f.round)) if f.round is not None else None
            f = dataclasses.replace(f, dealer=who or of_shoe.get((f.table, f.shoe)))
        out.append(f)
    return out


# The fields of a `bacc-audit dealers` record, in order (docs/dealers.md).
RECORD_FIELDS = (
    "period", "dealer", "rounds", "error_rounds", "rate_per_1000", "expected_per_1000",
    "upper_limit_per_1000", "lower_limit_per_1000", "above_limit", "flagged", *SEVERITIES,
)


@dataclass(frozen=True)
class DealerRow:
    """One line of `bacc-audit dealers` and of the report's "By dealer" page."""

    period: str
    dealer: str
    rounds: int
    error_rounds: int
    rate: float  # error rounds / rounds
    expected: float  # p̄ of the period
    upper: float
    lower: float
    above: bool  # above the upper limit
    flagged: bool  # above it and as unlikely as the limit promises (what raises the code)
    findings: Counter[str]  # standing round and shoe findings by severity

    def record(self) -> dict[str, object]:
        """The JSON/CSV record: rates per 1,000 rounds, rounded to a thousandth."""
        per = 1000
        return {
            "period": self.period,
            "dealer": self.dealer,
            "rounds": self.rounds,
            "error_rounds": self.error_rounds,
            "rate_per_1000": round(self.rate * per, 3),
            "expected_per_1000": round(self.expected * per, 3),
            "upper_limit_per_1000": round(self.upper * per, 3),
            "lower_limit_per_1000": round(self.lower * per, 3),
            "above_limit": self.above,
            "flagged": self.flagged,
            **{s: self.findings.get(s, 0) for s in SEVERITIES},
        }


def dealer_rows(
    con: duckdb.DuckDBPyConnection, window: Window
) -> tuple[list[DealerRow], int]:
    """The p-chart of one period, a row per dealer (by name), and the rounds that name no
    dealer (left off the chart, and out of p̄)."""
    counts, unnamed = count_rounds(con, [window])
    severities = findings_by_severity(con, [window])
    rows = [
        DealerRow(window.label, r.count.dealer, r.count.rounds, r.count.error_rounds, r.rate,
                  r.expected, r.upper, r.lower, r.above, r.flagged,
                  severities.get((window.label, r.count.dealer), Counter()))
        for r in p_chart(counts)
    ]
    return rows, unnamed[window.label]


# --- over gaming days: the report's 30-day comparison and trend ------------------------------

HISTORY_DAYS = 30  # the report compares a shift with the gaming days ending with its own


@dataclass(frozen=True)
class Day:
    """One gaming day of a History: rounds started in it (those naming no dealer too) and
    the standing round and shoe findings counted as `findings_by_severity` counts them."""

    day: dt.date
    rounds: int
    findings: int

    @property
    def per_1000(self) -> float | None:
        """Findings per 1,000 rounds; None for a day without rounds (no rate, not zero)."""
        return 1000 * self.findings / self.rounds if self.rounds else None


@dataclass(frozen=True)
class History:
    """The gaming days `first`..`last` (the property's gaming days: gaming_day_start in its
    zone): each day's totals, and the p-chart of the whole span over every dealer who dealt
    in it, as `bacc-audit dealers --from FIRST --to LAST` draws it."""

    label: str  # "2026-11-02..2026-12-01", the dealers command's label of the range
    days: list[Day]  # every day of the span, oldest first, those without rounds included
    dealers: dict[str, DealerRate]  # by dealer
    unnamed: int  # rounds of the span that name no dealer (left off the chart)

    @property
    def days_with_rounds(self) -> int:
        return sum(1 for d in self.days if d.rounds)

    @property
    def rounds(self) -> int:
        return sum(d.rounds for d in self.days)

    @property
    def findings(self) -> int:
        return sum(d.findings for d in self.days)

    @property
    def expected(self) -> float:
        """p̄ of the span: error rounds / rounds over every dealer of it."""
        return next(iter(self.dealers.values())).expected if self.dealers else 0.0


def gaming_days(
    config: PropertyConfig, zone: dt.tzinfo, last: dt.date, days: int = HISTORY_DAYS
) -> list[Window]:
    """The windows of the `days` gaming days ending with `last`, oldest first, each labelled
    by its date."""
    return [
        Window(f"{d:%Y-%m-%d}", *config.gaming_day_window(d, zone))
        for d in (last - dt.timedelta(days=i) for i in range(days - 1, -1, -1))
    ]


def history(
    con: duckdb.DuckDBPyConnection,
    config: PropertyConfig,
    zone: dt.tzinfo,
    last: dt.date,
    days: int = HISTORY_DAYS,
    until: dt.datetime | None = None,
) -> History:
    """The `days` gaming days ending with `last`: two grouped queries over all of them (the
    rounds and error rounds per day and dealer, the findings per day and dealer), summed
    here per day for the trend and per dealer for the span's p-chart. With `until`, the last
    day stops there (a shift's report does not change when a later shift is logged)."""
    windows = gaming_days(config, zone, last, days)
    if until is not None and until < windows[-1].end:
        windows[-1] = Window(windows[-1].label, windows[-1].start, until)
    label = f"{windows[0].label}..{windows[-1].label}"
    counts, unnamed = count_rounds(con, windows)
    found = findings_by_severity(con, windows)
    rounds: Counter[str] = Counter(unnamed)
    summed: dict[str, list[DealerCount]] = defaultdict(list)
    for c in counts:
        rounds[c.period] += c.rounds
        summed[c.dealer].append(c)
    per_day: Counter[str] = Counter()
    for (period, _), by_severity in found.items():
        per_day[period] += sum(by_severity.values())
    span = [
        DealerCount(
            label, dealer, sum(c.rounds for c in cs), sum(c.error_rounds for c in cs),
            min((c.first_ts for c in cs if c.first_ts is not None), default=None),
            tuple(sorted({t for c in cs for t in c.tables})),
        )
        for dealer, cs in sorted(summed.items())
    ]
    return History(
        label,
        [Day(dt.date.fromisoformat(w.label), rounds[w.label], per_day[w.label])
         for w in windows],
        {r.count.dealer: r for r in p_chart(span)},
        sum(unnamed.values()),
    )


def of_shoes(
    con: duckdb.DuckDBPyConnection, rounds: str, known: dict[tuple[str, str], str | None],
    shoes: set[tuple[str, str]] | None = None,
) -> dict[tuple[str, str], str | None]:
    """(table, shoe) -> the dealer of the shoe's first shoe_start (None: none names one), for
    the shoes of the rounds in table `rounds` (or `shoes`, when the caller knows them): a
    round whose round_start names no dealer was dealt by its shoe's. `known` holds those
    read before: when a shoe is not in it, every shoe's is read (the same scan of the
    events' types as for a few), so the next new shoe is one that started since."""
    if shoes is None:
        shoes = set(con.execute(f"SELECT DISTINCT table_id, shoe FROM {rounds}").fetchall())
    new = [k for k in shoes if k not in known]
    if new:
        known.update(
            ((t, s), d)
            for t, s, d in con.execute(
                "SELECT table_id, shoe, arg_min(dealer, seq) FILTER (dealer IS NOT NULL) "
                "FROM events WHERE type = 'shoe_start' GROUP BY ALL"
            ).fetchall()
        )
        known.update((k, None) for k in new if k not in known)
    return known
