"""Dealers: the dealer on round and shoe findings, the p-chart, dealer.error_rate, the
planted error-prone dealer, and `bacc-audit dealers` (docs/dealers.md)."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers.shared import built_once, copy_of, value_once

from auditor import config
from auditor.audit.run import audit
from auditor.ingest.run import ingest
from auditor.replay.dealers import (
    TAIL,
    DealerCount,
    binomial_tail,
    error_rate_findings,
    p_chart,
)
from auditor.simulate.layout import GAMES
from auditor.simulate.planted import simulate
from auditor.store import db, findings, runs

SHIFT = "2026-12-01/grave"
T0 = dt.datetime(2026, 12, 2, 3, 0, tzinfo=dt.UTC)


def _counts(*rows: tuple[str, int, int]) -> list[DealerCount]:
    return [DealerCount(SHIFT, d, n, e, T0, ("MB-01",)) for d, n, e in rows]


def test_p_chart_limits_are_p_bar_plus_three_sigma_for_each_dealers_rounds():
    chart = {r.count.dealer: r for r in p_chart(_counts(("A", 100, 2), ("B", 200, 3),
                                                         ("C", 100, 20)))}
    p = 25 / 400
    assert all(r.expected == pytest.approx(p) for r in chart.values())
    for name, n in (("A", 100), ("B", 200), ("C", 100)):
        sigma = math.sqrt(p * (1 - p) / n)
        assert chart[name].upper == pytest.approx(p + 3 * sigma)
        assert chart[name].lower == pytest.approx(max(0.0, p - 3 * sigma))
    assert chart["A"].upper == pytest.approx(0.13512, abs=1e-5)
    assert chart["B"].upper == pytest.approx(0.11385, abs=1e-5)
    assert chart["C"].rate == 0.2 and chart["C"].above and chart["C"].flagged
    assert not chart["A"].above and not chart["B"].above
    assert chart["C"].tail < TAIL


def test_a_short_stint_above_the_limit_is_not_flagged():
    # One round with a finding in one dealt: 100% is above any limit, and proves nothing.
    chart = {r.count.dealer: r for r in p_chart(_counts(("A", 500, 10), ("B", 1, 1)))}
    b = chart["B"]
    assert b.above and not b.flagged
    assert b.tail == pytest.approx(11 / 501)
    assert error_rate_findings(_counts(("A", 500, 10), ("B", 1, 1))) == []


def test_binomial_tail():
    assert binomial_tail(0, 10, 0.1) == 1.0
    assert binomial_tail(1, 10, 0.1) == pytest.approx(1 - 0.9**10)
    assert binomial_tail(3, 5, 0.5) == pytest.approx(0.5)
    assert binomial_tail(11, 10, 0.5) == 0.0
    assert binomial_tail(1, 10, 0.0) == 0.0


def test_no_findings_no_alarm():
    chart = p_chart(_counts(("A", 60, 0), ("B", 60, 0)))
    assert [(r.expected, r.upper, r.above) for r in chart] == [(0.0, 0.0, False)] * 2


def test_the_finding_names_dealer_shift_and_limit_with_a_fixed_fingerprint():
    [f] = error_rate_findings(_counts(("A", 100, 2), ("B", 200, 3), ("C", 100, 20)))
    assert f.code == "dealer.error_rate" and f.dealer == "C" and f.table is None
    assert f.fingerprint == "dealer.error_rate|2026-12-01/grave|C"
    assert f.ts == T0
    ev = f.evidence or {}
    assert (ev["shift"], ev["rounds"], ev["error_rounds"]) == (SHIFT, 100, 20)
    assert ev["expected_rate"] == 0.0625 and ev["upper_limit"] == 0.135118
    assert (ev["shift_rounds"], ev["shift_error_rounds"], ev["dealers"]) == (400, 25, 3)
    assert f.observed == {"rounds": 100, "error_rounds": 20, "error_rate": 0.2}


def test_p_chart_refuses_two_periods():
    with pytest.raises(ValueError, match="one period"):
        p_chart([DealerCount("a", "A", 1, 0), DealerCount("b", "B", 1, 0)])


# --- simulated nights -----------------------------------------------------------------------


def _audited(tmp_path: Path, **kw: Any):
    r = simulate(tmp_path / "logs", **kw)
    path = tmp_path / "a.duckdb"
    con = db.connect(path)
    ingest(con, r.files, runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    return r, con, path


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory):
    """The night with an error-prone dealer, simulated and audited once a run (its logs in
    the shared folder), and this module's copy of its database."""

    def make(folder: Path) -> Any:
        r, con, _ = _audited(folder, tables=8, hours=2, seed=3, deviation_rate=0.03,
                             games=GAMES, error_prone_dealer=True)
        con.close()
        return r

    folder, r = built_once(tmp_path_factory, "dealers-planted", make)
    return r, copy_of(folder / "a.duckdb", tmp_path_factory.mktemp("dealer") / "a.duckdb")


@pytest.mark.slow
def test_the_error_prone_dealer_is_found_and_nothing_else(planted):
    r, path = planted
    truth = [d for d in r.deviations if d["kind"] == "error_prone_dealer"]
    assert truth == [{"code": "dealer.error_rate", "table": None, "shoe": None, "round": None,
                      "kind": "error_prone_dealer", "dealer": "D8364", "shift": SHIFT}]
    con = db.connect(path, read_only=True)
    rows = con.execute(
        "SELECT code, table_id, shoe, round, dealer, fingerprint, CAST(evidence AS VARCHAR) "
        "FROM current_findings"
    ).fetchall()
    con.close()
    flagged = [(r_[4], json.loads(r_[6])) for r_ in rows if r_[0] == "dealer.error_rate"]
    assert [(d, ev["shift"], ev["rounds"], ev["error_rounds"], ev["tables"])
            for d, ev in flagged] == [("D8364", SHIFT, 64, 14, ["MB-01"])]
    # Everything else is exactly the planted deviations (the recall contract).
    planted_rest = Counter((d["code"], d["table"], d["shoe"], d["round"]) for d in r.deviations
                           if d["kind"] != "error_prone_dealer")
    found_rest = Counter(r_[:4] for r_ in rows if r_[0] != "dealer.error_rate")
    assert found_rest == planted_rest
    assert [r_[5] for r_ in rows if r_[0] == "dealer.error_rate"] == [
        "dealer.error_rate|2026-12-01/grave|D8364"]


def test_round_and_shoe_findings_carry_their_dealer_and_unchanged_fingerprints(planted):
    _, path = planted
    con = db.connect(path, read_only=True)
    rows = con.execute(
        """
        SELECT f.code, f.dealer, f.fingerprint, f.table_id, f.shoe, f.round, r.dealer, s.dealer
        FROM current_findings f
        LEFT JOIN (SELECT table_id, shoe, round, any_value(dealer) AS dealer FROM events
                   WHERE type = 'round_start' GROUP BY ALL) r USING (table_id, shoe, round)
        LEFT JOIN (SELECT table_id, shoe, any_value(dealer) AS dealer FROM events
                   WHERE type = 'shoe_start' GROUP BY ALL) s USING (table_id, shoe)
        WHERE f.shoe IS NOT NULL AND f.code NOT LIKE 'log.malformed'
        """
    ).fetchall()
    con.close()
    assert len(rows) > 20
    for code, dealer, fp, table, shoe, rnd, round_dealer, shoe_dealer in rows:
        assert dealer == (round_dealer if rnd is not None and round_dealer else shoe_dealer), code
        assert dealer is not None and "D" not in fp.split("|")[0]
        assert fp.startswith(f"{code}|{table}|{shoe}|")  # the dealer is not in it
    assert {"shoe.burn", "settle.wrong_amount"} & {r_[0] for r_ in rows}


@pytest.mark.slow
def test_a_round_without_its_dealer_gets_its_shoes(tmp_path):
    r = simulate(tmp_path / "logs", 2, 1, seed=2, deviation_rate=0.3, games=("mini_baccarat",))
    for p in r.files:
        lines = []
        for line in p.read_text().splitlines():
            e = json.loads(line)
            if e.get("type") == "round_start":
                e.pop("dealer", None)
            lines.append(json.dumps(e, separators=(",", ":")))
        p.write_text("\n".join(lines) + "\n")
    con = db.connect(tmp_path / "a.duckdb")
    ingest(con, r.files, runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    rows = con.execute(
        """
        SELECT f.dealer, s.dealer FROM current_findings f
        JOIN (SELECT table_id, shoe, any_value(dealer) AS dealer FROM events
              WHERE type = 'shoe_start' GROUP BY ALL) s USING (table_id, shoe)
        WHERE f.round IS NOT NULL AND f.code NOT LIKE 'log.%'
        """
    ).fetchall()
    con.close()
    assert rows and all(a == b and a is not None for a, b in rows)


@pytest.mark.stats
@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12, 13])
def test_nights_without_a_planted_dealer_raise_no_dealer_error_rate(tmp_path, seed):
    r, con, _ = _audited(tmp_path, tables=8, hours=4, seed=seed, deviation_rate=0.05,
                         games=GAMES)
    assert not [d for d in r.deviations if d["code"] == "dealer.error_rate"]
    charted = con.execute(
        "SELECT count(*) FROM current_findings WHERE code = 'dealer.error_rate'"
    ).fetchone()
    con.close()
    assert charted == (0,)


@pytest.mark.slow
def test_a_night_without_findings_charts_every_dealer_at_zero(tmp_path, bacc_audit):
    _, con, path = _audited(tmp_path, tables=3, hours=1, seed=5, deviation_rate=0.0,
                            games=("mini_baccarat",))
    con.close()
    res = bacc_audit("dealers", "--db", path, "--shift", SHIFT, "--format", "jsonl")
    assert res.code == 0, res.err
    recs = [json.loads(x) for x in res.out.splitlines()]
    assert recs and all(r["error_rounds"] == 0 and r["upper_limit_per_1000"] == 0.0
                        and not r["flagged"] for r in recs)


# --- the export and the command -------------------------------------------------------------


@pytest.mark.slow
def test_dealers_command_matches_the_finding(planted, bacc_audit):
    _, path = planted
    res = bacc_audit("dealers", "--db", path, "--shift", SHIFT, "--format", "jsonl")
    assert res.code == 0, res.err
    recs = {r["dealer"]: r for r in map(json.loads, res.out.splitlines())}
    bad = recs["D8364"]
    assert (bad["rounds"], bad["error_rounds"], bad["flagged"], bad["above_limit"]) == (
        64, 14, True, True)
    assert bad["rate_per_1000"] == 218.75
    assert bad["expected_per_1000"] == 45.838 and bad["upper_limit_per_1000"] == 124.264
    assert bad["period"] == SHIFT
    assert sum(r["rounds"] for r in recs.values()) == 829
    assert sum(r["error_rounds"] for r in recs.values()) == 38
    assert [d for d, r in recs.items() if r["flagged"]] == ["D8364"]
    assert bad["critical"] + bad["major"] + bad["minor"] + bad["info"] >= 14
    csv = bacc_audit("dealers", "--db", path, "--date", "2026-12-01", "--format", "csv")
    head, *lines = csv.out.splitlines()
    assert head.split(",")[:4] == ["period", "dealer", "rounds", "error_rounds"]
    assert "2026-12-01,D8364,64,14,218.75,45.838,124.264,0.0,true,true," in "\n".join(lines)
    table = bacc_audit("dealers", "--db", path, "--from", "2026-12-01", "--to", "2026-12-01")
    assert "D8364" in table.out and "FLAGGED" in table.out and "829 rounds" in table.out


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--date", "2026-12-01", "--shift", "2026-12-01/grave"], "one period"),
        (["--from", "2026-12-01"], "go together"),
        (["--from", "2026-12-02", "--to", "2026-12-01"], "before --from"),
        (["--shift", "2026-12-01/lunch"], "no shift named 'lunch'"),
        (["--date", "2026-13-01"], "a date must look like"),
    ],
)
def test_dealers_command_refuses_bad_periods(planted, bacc_audit, args, words):
    _, path = planted
    res = bacc_audit("dealers", "--db", path, *args)
    assert res.code == 2 and words in res.err and "Traceback" not in res.err


@pytest.mark.slow
def test_findings_export_has_dealer_last(planted, bacc_audit):
    _, path = planted
    res = bacc_audit("findings", "--db", path, "--format", "jsonl", "--code", "dealer.*")
    [rec] = [json.loads(x) for x in res.out.splitlines()]
    assert list(rec)[-2:] == ["id", "dealer"] and rec["dealer"] == "D8364"
    csv = bacc_audit("findings", "--db", path, "--format", "csv", "--code", "shoe.*")
    assert csv.out.splitlines()[0].endswith(",fingerprint,id,dealer")


def test_an_old_database_gets_the_dealer_column_and_keeps_its_rows(tmp_path):
    path = tmp_path / "old.duckdb"
    con = db.connect(path)
    con.execute("ALTER TABLE findings DROP COLUMN dealer")
    # A database of the versions before the column carried no schema fingerprint either.
    con.execute("DELETE FROM meta WHERE key = 'schema_fingerprint'")
    con.execute(
        "INSERT INTO findings (fingerprint, run_id, recorded_at, status, code, severity, rule, "
        "message, ts) VALUES ('x|1', 1, now(), 'open', 'deal.order', 'critical', 'r', 'm', now())"
    )
    con.close()
    ro = db.connect(path, read_only=True)  # not brought up to date: dealer is null
    assert [r["dealer"] for r in findings.select(ro)] == [None]
    assert "dealer" not in findings.select(ro, dealer=False)[0]
    ro.close()
    con = db.connect(path)
    assert con.execute("SELECT fingerprint, dealer FROM findings").fetchall() == [("x|1", None)]
    con.close()


# --- the report -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report(planted, tmp_path_factory: pytest.TempPathFactory):
    """The shift's report of the planted night (its context and its pages' text), rendered
    once a run."""
    return value_once(tmp_path_factory, "dealers-report", lambda d: _report(planted[1], d))


def _report(path: Path, folder: Path) -> tuple[dict, list[str]]:
    import pypdf

    from auditor.report import gather, render

    con = db.connect(path, read_only=True)
    conf = config.PropertyConfig(name="Harbor Point Casino")
    scope = gather.scope_for(conf, con, shift=SHIFT)
    pdf = render.write_report(con, conf, scope, folder / "r.pdf")
    context = gather.gather(con, conf, scope)
    con.close()
    reader = pypdf.PdfReader(pdf)
    pages = [" ".join(p.extract_text().split()) for p in reader.pages]
    return context, pages


@pytest.mark.slow
def test_report_codes_are_sorted_by_severity_then_count(report):
    from auditor.rules.codes import REGISTRY, severity_rank

    context, _ = report
    keys = [(severity_rank(REGISTRY[c].severity), -n) for c, n in context["by_code"]]
    assert keys == sorted(keys) and len(keys) > 5
    assert REGISTRY[context["by_code"][0][0]].severity == "critical"


@pytest.mark.slow
def test_report_first_page_lists_what_needs_action_with_video_deadlines(report):
    context, pages = report
    pending = context["needs_action"]
    assert pending and {f["severity"] for f in pending} <= {"critical", "major"}
    total = sum(1 for f in context["findings"]
                if f["severity"] in ("critical", "major") and not f["ack"])
    assert context["needs_action_total"] == total
    first = pages[0]
    assert "Needs action" in first and f"not yet acknowledged ({total})" in first
    f = pending[0]
    # The video deadline: the finding's time plus the pack's retention, shown local.
    ts = dt.datetime.fromisoformat(f["ts"])
    by = (ts + dt.timedelta(days=context["retention_days"])).astimezone(ts.tzinfo)
    assert f["id"] in first and f"{by:%Y-%m-%d %H:%M}" in first


@pytest.mark.slow
def test_report_has_a_by_dealer_page_with_the_flagged_dealer(report):
    context, pages = report
    [page] = [p for p in pages if "By dealer" in p and "error rounds" in p]
    rows = {d.dealer: d for d in context["dealers"]}
    assert (rows["D8364"].rounds, rows["D8364"].error_rounds, rows["D8364"].flagged) == (
        64, 14, True)
    assert [d for d, r in rows.items() if r.flagged] == ["D8364"]
    assert "D8364 64 14 218.8 124.3 FLAGGED" in page
    assert "45.8 per 1,000 (38 of 829 rounds)" in page
