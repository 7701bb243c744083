"""The report over several gaming days (issue 17): the By dealer page's shift against the last
30 gaming days, the trend of findings per 1,000 rounds, and the chart of a seat's side wagers
against the count. Every number is read back from the PDF and checked against the database,
counted here in SQL of its own."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import defaultdict
from pathlib import Path

import pytest
from helpers.nights import continue_streams
from helpers.pdfs import page_texts
from helpers.shared import copy_of, once, value_once

from auditor import config
from auditor.audit.run import audit
from auditor.finding import Finding, fingerprint
from auditor.ingest.run import ingest
from auditor.report import gather, render
from auditor.rules.codes import REGISTRY
from auditor.simulate.planted import simulate
from auditor.store import db, findings, runs

ZONE = "America/New_York"
SHIFT = "2026-11-30/grave"
LAST = dt.date(2026, 11, 30)
# Three small nights: 11-29 has none (a gap), 11-27 and 11-30 the same dealers (seed 5).
NIGHTS = ((dt.date(2026, 11, 27), 5, 0.1), (dt.date(2026, 11, 28), 6, 0.05), (LAST, 5, 0.04))
# shoe, round, true count, amount ("0": no side wager that round): 40 rounds, a wager in 12
SERIES = [["MB-01-1130-01", i + 1, round(-2 + i * 0.2, 2), str(25 * (i // 4)) if i >= 28 else "0"]
          for i in range(40)]
SIDE_BET = {
    "table": "MB-01", "seat": 3, "bet": "dragon7", "shift": SHIFT, "rho": 0.4567, "z": 9.04,
    "threshold": 4.0, "rounds": 40, "side_wagers": 12, "series": SERIES,
}


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The nights simulated, ingested and audited once a run (their logs in the shared
    folder), and this module's copy of the database."""
    folder = once(tmp_path_factory, "trends-days", _days)
    return copy_of(folder / "audit.duckdb", tmp_path_factory.mktemp("days") / "audit.duckdb")


def _days(tmp: Path) -> None:
    files: list[Path] = []
    last: dict[str, int] = {}
    for i, (day, seed, rate) in enumerate(NIGHTS):
        r = simulate(tmp / f"night{i}", tables=2, hours=1, seed=seed, deviation_rate=rate,
                     day=day)
        continue_streams(tmp / f"night{i}", last)  # each table's seq runs on across nights
        files += r.files
    path = tmp / "audit.duckdb"
    con = db.connect(path)
    ingest(con, files, runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.PropertyConfig(time_zone=ZONE))
    # A play.side_bet_counting finding as its detector records one (inserted here: the
    # report charts what a finding's evidence holds, whoever raised it).
    at = dt.datetime(2026, 12, 1, 4, 30, tzinfo=dt.UTC)  # 23:30 EST, in the shift
    found = Finding(
        "play.side_bet_counting", None,
        "Seat 3 of MB-01 wagers on dragon7 as the count rises", None, None, None,
        fingerprint=fingerprint("play.side_bet_counting", SHIFT, "MB-01", 3, "dragon7"),
        table="MB-01", pit="P1", ts=at, evidence=SIDE_BET,
    )
    findings.staged(con, "side_bet_findings", [found])
    assert findings.record(con, runs.start(con, "test", {}),
                           "SELECT * FROM side_bet_findings", staged=True) == 1
    con.close()


@pytest.fixture(scope="module")
def report(days: Path, tmp_path_factory: pytest.TempPathFactory):
    """The shift's report (its context and its pages' text), rendered once a run."""
    return value_once(tmp_path_factory, "trends-report", lambda d: _report(days, d))


def _report(days: Path, folder: Path) -> tuple[dict, list[str]]:
    con = db.connect(days, read_only=True)
    conf = config.PropertyConfig(name="Harbor Point Casino", time_zone=ZONE)
    scope = gather.scope_for(conf, con, shift=SHIFT)
    pdf = render.write_report(con, conf, scope, folder / "r.pdf")
    context = gather.gather(con, conf, scope)
    con.close()
    pages = page_texts(pdf)
    return context, pages


# --- the database, counted here -------------------------------------------------------------

ROUND_CODES = sorted(c.code for c in REGISTRY.values() if c.scope in ("round", "chemin"))
SHOE_CODES = sorted(c.code for c in REGISTRY.values() if c.scope == "shoe")
# The gaming day of a time: 06:00 to 06:00 in the property's zone.
DAY = f"CAST(timezone('{ZONE}', {{}}) - INTERVAL 6 HOUR AS DATE)"
ROUNDS = f"""
    SELECT table_id, shoe, round, {DAY.format('min(ts)')} AS day, min(ts) AS ts,
           coalesce(arg_min(dealer, seq), (
             SELECT arg_min(s.dealer, s.seq) FROM events s WHERE s.type = 'shoe_start'
               AND s.table_id = e.table_id AND s.shoe = e.shoe AND s.dealer IS NOT NULL
           )) AS dealer
    FROM events e WHERE type = 'round_start' AND shoe IS NOT NULL GROUP BY table_id, shoe, round
"""


def _in(codes: list[str]) -> str:
    return ", ".join(f"'{c}'" for c in codes)


def _per_day(path: Path) -> dict[dt.date, tuple[int, int]]:
    """Gaming day -> (rounds started, standing round and shoe findings)."""
    con = db.connect(path, read_only=True)
    rounds = dict(con.execute(f"SELECT day, count(*) FROM ({ROUNDS}) GROUP BY day").fetchall())
    found: dict[dt.date, int] = defaultdict(int)
    for day, n in con.execute(
        f"""
        SELECT r.day, count(*) FROM current_findings f JOIN ({ROUNDS}) r
          ON f.table_id = r.table_id AND f.shoe = r.shoe AND f.round = r.round
        WHERE f.code IN ({_in(ROUND_CODES)}) GROUP BY r.day
        UNION ALL
        SELECT {DAY.format('ts')}, count(*) FROM current_findings
        WHERE code IN ({_in(SHOE_CODES)}) GROUP BY ALL
        """
    ).fetchall():
        found[day] += n
    con.close()
    return {day: (n, found[day]) for day, n in rounds.items()}


def _dealers(path: Path, since: dt.datetime, until: dt.datetime) -> dict[str, tuple[int, int]]:
    """Dealer -> (rounds dealt, rounds with a standing round finding) in [since, until)."""
    con = db.connect(path, read_only=True)
    rows = con.execute(
        f"""
        SELECT r.dealer, count(*), count(*) FILTER (WHERE EXISTS (
          SELECT 1 FROM current_findings f WHERE f.code IN ({_in(ROUND_CODES)})
            AND f.table_id = r.table_id AND f.shoe = r.shoe AND f.round = r.round))
        FROM ({ROUNDS}) r WHERE r.ts >= ? AND r.ts < ? AND r.dealer IS NOT NULL GROUP BY ALL
        """,
        [since, until],
    ).fetchall()
    con.close()
    return {d: (n, e) for d, n, e in rows}


def _limit(p: float, n: int) -> float:
    return p + 3 * math.sqrt(p * (1 - p) / n)


def _local(day: dt.date, hour: int) -> dt.datetime:
    from zoneinfo import ZoneInfo

    return dt.datetime.combine(day, dt.time(hour), ZoneInfo(ZONE))


# --- the pages -------------------------------------------------------------------------------


@pytest.mark.slow
def test_by_dealer_page_sets_the_shift_against_the_last_30_gaming_days(days, report):
    context, pages = report
    [page] = [p for p in pages if "By dealer" in p and "error rounds" in p]
    first = LAST - dt.timedelta(days=29)
    shift = _dealers(days, _local(LAST, 22), _local(LAST + dt.timedelta(days=1), 6))
    span = _dealers(days, _local(first, 6), _local(LAST + dt.timedelta(days=1), 6))
    assert shift and set(shift) <= set(span)
    p_shift = sum(e for _, e in shift.values()) / sum(n for n, _ in shift.values())
    rounds, errors = sum(n for n, _ in span.values()), sum(e for _, e in span.values())
    p_span = errors / rounds
    # The same dealers dealt on 11-27: their 30 days are more than this shift.
    assert any(span[d][0] > shift[d][0] for d in shift)
    for dealer, (n, e) in shift.items():
        n30, e30 = span[dealer]
        row = (rf"{dealer} {n:,} {e} {1000 * e / n:.1f} {1000 * _limit(p_shift, n):.1f} "
               rf"(FLAGGED |above the limit, too few rounds to flag )?"
               rf"{n30:,} {e30} {1000 * e30 / n30:.1f} {1000 * _limit(p_span, n30):.1f}( |$)")
        assert re.search(row, page), row
    assert (f"against the property's rate over them, {1000 * p_span:.1f} per 1,000 "
            f"({errors} of {rounds} rounds of {len(span)} dealers)") in page
    assert f"bacc-audit dealers --from {first} --to {LAST} gives the same numbers" in page
    assert "Only 3 of the 30 gaming days have rounds (the first: 2026-11-27)" in page
    assert context["span"]["days_with_rounds"] == 3


@pytest.mark.slow
def test_trend_gives_findings_per_1000_rounds_for_each_gaming_day(days, report):
    context, pages = report
    page = " ".join(pages)
    counted = _per_day(days)
    assert sorted(counted) == [dt.date(2026, 11, 27), dt.date(2026, 11, 28), LAST]
    assert all(f for _, f in counted.values())  # every night has findings to count
    for day, (n, f) in counted.items():
        assert f"{day} {n:,} {f:,} {1000 * f / n:.1f}" in page
    assert "2026-11-29 no rounds" in page  # a day without data says so, in its place
    assert "No rounds on the 26 gaming days from 2026-11-01 to 2026-11-26" in page
    total_n = sum(n for n, _ in counted.values())
    total_f = sum(f for _, f in counted.values())
    assert (f"Over the 3 days with rounds: {total_f:,} findings in {total_n:,} rounds, "
            f"{1000 * total_f / total_n:.1f} per 1,000") in page
    # The chart: a point for each day with rounds, the other 27 shaded as gaps, not zeros.
    svg = context["chart_trend"]
    assert svg.count("<circle") == 3 and svg.count('fill-opacity="0.5"') == 27
    for n, f in counted.values():
        assert f">{1000 * f / n:.1f}</text>" in svg
    # The line is broken at 11-29: two points joined (11-27, 11-28), 11-30 alone.
    assert svg.count("<polyline") == 1


@pytest.mark.slow
def test_the_trend_counts_the_property_whatever_table_the_report_covers(days):
    con = db.connect(days, read_only=True)
    conf = config.PropertyConfig(time_zone=ZONE)
    whole = gather.gather(con, conf, gather.scope_for(conf, con, shift=SHIFT))
    one = gather.gather(con, conf, gather.scope_for(conf, con, shift=SHIFT, table="PB-01"))
    con.close()
    assert one["trend_days"] == whole["trend_days"] and one["span"] == whole["span"]


@pytest.mark.slow
def test_a_side_bet_counting_finding_gets_its_chart(report):
    context, pages = report
    title = "MB-01, seat 3, dragon7: rho 0.46, z 9.0"
    [chart] = context["side_bets"]
    assert chart["title"] == title and chart["points"] == 40
    assert (chart["rounds"], chart["side_wagers"]) == (40, 12)
    [page] = [p for p in pages if "Side wagers against the count" in p]
    assert title in page
    assert "40 rounds, side wagers in 12; the finding's threshold: 4.0" in page
    # One dot per round: the rounds without a side wager pale, those with one solid.
    assert chart["chart"].count('fill-opacity="0.7"') == 12
    assert chart["chart"].count("<circle") == 40


@pytest.mark.slow
def test_the_30_days_stop_at_the_end_of_the_report(days: Path) -> None:
    """A shift's report does not change when a later shift of its gaming day is logged: the
    last of the 30 days is counted only up to the report's end."""
    from zoneinfo import ZoneInfo

    from auditor.audit import dealers

    zone = ZoneInfo(ZONE)
    conf = config.PropertyConfig(time_zone=ZONE)
    half_way = dt.datetime(2026, 11, 30, 22, 30, tzinfo=zone)  # the night runs 22:00-23:00
    con = db.connect(days, read_only=True)
    try:
        whole = dealers.history(con, conf, zone, LAST)
        cut = dealers.history(con, conf, zone, LAST, until=half_way)
        before = con.execute(
            "SELECT count(*) FROM events WHERE type = 'round_start' AND ts >= ? AND ts < ?",
            [dt.datetime(2026, 11, 30, 6, tzinfo=zone), half_way]).fetchall()[0][0]
    finally:
        con.close()
    assert cut.days[:-1] == whole.days[:-1]
    assert cut.days[-1].rounds == before and 0 < before < whole.days[-1].rounds
