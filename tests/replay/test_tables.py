"""Procedures in force, their notices (N.J.A.C. 13:69F-7.10(c)3), one procedure per pit
(7.10(c)1-2) and undeclared changes, through the whole path: JSONL written, ingested, audited.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest
from helpers.tablelog import Log, TablePassDb, at
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.audit.run import audit
from auditor.audit.table_pass import OWNED_CODES, covered_rounds, supersede_round_mismatches
from auditor.config import PropertyConfig
from auditor.ingest.run import ingest
from auditor.replay.procedures import Change, Notice, ProcedureRules, judge_change
from auditor.replay.tables import RoundOrder, round_kind, run_spans, undeclared_runs
from auditor.replay.text import minutes
from auditor.rules.pack import load_pack
from auditor.store import notices, runs

NOTICE = "procedure.notice_"


def change_at_two(notice_at: str | None = None, **notice: Any) -> Log:
    """MB-01 in pit P1 opens on procedure 1 and changes to 2 at 02:00."""
    log = Log()
    log.open("MB-01", "P1", "22:00", procedure=1)
    if notice_at:
        log.notice("P1", notice_at, notice.pop("procedure", 2), notice.pop("effective", "02:00"),
                   **notice)
    log.change("MB-01", "02:00", 2)
    log.close("MB-01", "06:00")
    return log


def audited(tmp_path: Path, log: Log, config: PropertyConfig | None = None) -> TablePassDb:
    a = TablePassDb(tmp_path, config)
    a.ingest(log)
    a.run()
    return a


# --- notices: 13:69F-7.10(c)3 -------------------------------------------------------------


def test_written_notice_to_both_exactly_30_minutes_before_the_change_is_on_time(tmp_path):
    a = audited(tmp_path, change_at_two("01:30"))
    assert a.findings(NOTICE) == []


def test_written_notice_29_minutes_59_seconds_before_the_change_is_late(tmp_path):
    a = audited(tmp_path, change_at_two("01:30:01"))
    [f] = a.findings(NOTICE)
    assert (f["code"], f["table_id"], f["pit"]) == ("procedure.notice_late", "MB-01", "P1")
    assert f["observed"]["lead_seconds"] == 29 * 60 + 59
    assert "29 minutes 59 seconds before" in f["message"]
    assert f["seq"] == 2 and f["source"].endswith("log1.jsonl:4")  # after the 2 notices
    assert {n["recipient"] for n in f["evidence"]["notices"]} == {"division", "surveillance"}
    assert f["evidence"]["interval"][1] == at("02:00").astimezone(dt.UTC).isoformat()


def test_change_with_no_notice_at_all_is_missing(tmp_path):
    a = audited(tmp_path, change_at_two())
    [f] = a.findings(NOTICE)
    assert f["code"] == "procedure.notice_missing"
    assert f["observed"]["missing_recipients"] == ["division", "surveillance"]
    assert f["observed"]["change"]["from"] == 1 and f["observed"]["change"]["to"] == 2


@pytest.mark.slow
def test_notice_to_the_division_only_is_missing_for_surveillance(tmp_path):
    a = audited(tmp_path, change_at_two("01:00", recipients=("division",)))
    [f] = a.findings(NOTICE)
    assert f["code"] == "procedure.notice_missing"
    assert f["observed"]["missing_recipients"] == ["surveillance"]
    assert "only the Division was notified" in f["message"]


@pytest.mark.slow
def test_notice_not_in_writing_does_not_count(tmp_path):
    a = audited(tmp_path, change_at_two("01:00", written=False))
    [f] = a.findings(NOTICE)
    assert f["code"] == "procedure.notice_missing"
    assert {n["reason"] for n in f["observed"]["notices"]} == {"not in writing"}


@pytest.mark.slow
def test_notice_for_another_pit_does_not_count(tmp_path):
    log = Log()
    log.open("MB-01", "P1", "22:00", procedure=1)
    log.notice("P9", "01:00", 2, "02:00")
    log.change("MB-01", "02:00", 2)
    a = audited(tmp_path, log)
    [f] = a.findings(NOTICE)
    assert f["code"] == "procedure.notice_missing"
    assert all("for pit P9" in n["reason"] for n in f["observed"]["notices"])


def test_notice_for_other_tables_of_the_pit_does_not_count(tmp_path):
    a = audited(tmp_path, change_at_two("01:00", tables=["MB-02", "MB-03"]))
    [f] = a.findings(NOTICE)
    assert f["code"] == "procedure.notice_missing"
    assert "for tables MB-02, MB-03 only" in f["message"]


def test_notice_listing_the_table_counts(tmp_path):
    a = audited(tmp_path, change_at_two("01:00", tables=["MB-01", "MB-02"]))
    assert a.findings(NOTICE) == []


def test_notice_for_another_procedure_does_not_count(tmp_path):
    a = audited(tmp_path, change_at_two("01:00", procedure=3))
    [f] = a.findings(NOTICE)
    assert f["code"] == "procedure.notice_missing"
    assert "for procedure 3, not 2" in f["message"]


@pytest.mark.slow
def test_notice_given_after_the_change_is_missing_not_late(tmp_path):
    a = audited(tmp_path, change_at_two("02:05"))
    [f] = a.findings(NOTICE)
    assert f["code"] == "procedure.notice_missing"
    assert "after the change" in f["message"]


def test_change_before_the_time_the_notice_announced_is_not_covered_by_it(tmp_path):
    a = audited(tmp_path, change_at_two("00:30", effective="03:00"))
    [f] = a.findings(NOTICE)
    assert f["code"] == "procedure.notice_missing"
    assert "later than the change" in f["message"]


def test_notice_for_an_earlier_change_does_not_cover_a_later_one(tmp_path):
    log = Log()
    log.open("MB-01", "P1", "22:00", procedure=1)
    log.notice("P1", "01:00", 2, "02:00")
    log.change("MB-01", "02:00", 2)  # noticed
    log.notice("P1", "02:00", 1, "03:00")
    log.change("MB-01", "03:00", 1)  # noticed
    log.change("MB-01", "04:00", 2)  # back to 2: the 01:00 notice was for 02:00's change
    a = audited(tmp_path, log)
    [f] = a.findings(NOTICE)
    assert (f["code"], f["seq"]) == ("procedure.notice_missing", 4)
    assert "for the earlier change at 2026-11-29 02:00:00 (seq 2)" in f["message"]


@pytest.mark.slow
def test_notice_entered_by_hand_withdraws_the_missing_finding(tmp_path):
    a = audited(tmp_path, change_at_two())
    [f] = a.findings(NOTICE)
    assert f["code"] == "procedure.notice_missing"
    for who in ("division", "surveillance"):
        notices.add_notice(a.con, pit="P1", procedure=2, effective=at("02:00"), recipient=who,
                           given_at=at("01:00"), entered_by="shift manager",
                           note="letter in the pit binder")
    summary = a.run()
    assert summary["findings_withdrawn"] == 1 and summary["findings_new"] == 0
    assert summary["notices_entered_by_hand"] == 2
    assert a.findings(NOTICE) == []
    rows = a.con.execute(
        "SELECT status FROM findings WHERE fingerprint = ? ORDER BY id", [f["fingerprint"]]
    ).fetchall()
    assert rows == [("open",), ("withdrawn",)]


@pytest.mark.slow
def test_notice_entered_by_hand_too_late_turns_missing_into_late(tmp_path):
    a = audited(tmp_path, change_at_two("01:00", recipients=("division",)))
    notices.add_notice(a.con, pit="P1", procedure=2, effective=at("02:00"),
                       recipient="surveillance", given_at=at("01:50"), entered_by="ann")
    a.run()
    [f] = a.findings(NOTICE)
    assert f["code"] == "procedure.notice_late"
    assert f["observed"]["lead_seconds"] == 600
    assert any(n["key"].startswith("hand:") for n in f["evidence"]["notices"])


@pytest.mark.slow
def test_rerunning_the_table_pass_adds_nothing(tmp_path):
    a = audited(tmp_path, change_at_two("01:40"))
    before = a.con.execute("SELECT count(*) FROM findings").fetchall()
    summary = a.run()
    assert summary["findings_new"] == 0 and summary["findings_withdrawn"] == 0
    assert a.con.execute("SELECT count(*) FROM findings").fetchall() == before


@pytest.mark.slow
def test_table_opening_on_another_procedure_than_the_pit_baseline_needs_notice(tmp_path):
    log = Log()
    log.open("MB-01", "P1", "22:00", procedure=2)
    a = audited(tmp_path, log, PropertyConfig(pit_procedures={"P1": 1}))
    [f] = a.findings(NOTICE)
    assert f["code"] == "procedure.notice_missing"
    assert "opened at 2026-11-28 22:00:00 on procedure 2 where procedure 1" in f["message"]


def test_table_opening_on_the_pit_baseline_needs_no_notice(tmp_path):
    log = Log()
    log.open("MB-01", "P1", "22:00", procedure=1)
    a = audited(tmp_path, log, PropertyConfig(pit_procedures={"P1": 1}))
    assert a.findings(NOTICE) == []


def test_without_a_baseline_the_first_declared_procedure_needs_no_notice(tmp_path):
    log = Log()
    log.open("MB-01", "P1", "22:00", procedure=4)
    a = audited(tmp_path, log)
    assert a.findings(NOTICE) == []


@pytest.mark.slow
def test_reopening_on_another_procedure_than_the_table_closed_on_needs_notice(tmp_path):
    log = Log()
    log.open("MB-01", "P1", "20:00", procedure=1)
    log.close("MB-01", "21:00")
    log.open("MB-01", "P1", "22:00", procedure=3)
    a = audited(tmp_path, log)
    [f] = a.findings(NOTICE)
    assert f["code"] == "procedure.notice_missing" and f["observed"]["change"]["from"] == 1


def test_pit_change_gives_one_finding_per_changing_table_naming_the_others(tmp_path):
    log = Log()
    for t in ("MB-01", "MB-02"):
        log.open(t, "P1", "22:00", procedure=1)
    log.notice("P1", "01:45", 2, "02:00")
    for t in ("MB-01", "MB-02"):
        log.change(t, "02:00", 2)
    a = audited(tmp_path, log)
    found = a.findings(NOTICE)
    assert [(f["code"], f["table_id"]) for f in found] == [
        ("procedure.notice_late", "MB-01"), ("procedure.notice_late", "MB-02")]
    assert found[0]["evidence"]["pit_change"]["tables"] == ["MB-01", "MB-02"]


def test_judge_change_exact_boundary_is_pure():
    rules = ProcedureRules.of(load_pack("NJ", "mini_baccarat"))
    assert rules is not None
    t = at("02:00")
    change = Change("MB-01", "P1", "mini_baccarat", 5, t, "f:5", 2, 1, "change", rules)

    def both(given: dt.datetime) -> list[Notice]:
        return [Notice(f"pit:P1#{i}", "P1", None, 2, t, r, True, given, "n")
                for i, r in enumerate(("division", "surveillance"))]

    assert judge_change(change, both(t - dt.timedelta(minutes=30)), [change]).code is None
    late = judge_change(change, both(t - dt.timedelta(minutes=29, seconds=59)), [change])
    assert late.code == "procedure.notice_late" and late.lead is not None
    assert minutes(late.lead) == "29 minutes 59 seconds"


# --- one procedure per pit: 13:69F-7.10(c)1-2 ---------------------------------------------


def three_tables(log: Log) -> None:
    for t in ("MB-01", "MB-02", "MB-03"):
        log.open(t, "P1", "22:00", procedure=1)
    log.notice("P1", "01:00", 2, "02:00")


def test_pit_where_one_of_three_mini_tables_changes_alone_is_inconsistent(tmp_path):
    log = Log()
    three_tables(log)
    log.change("MB-02", "02:00", 2)
    for t in ("MB-01", "MB-02", "MB-03"):
        log.close(t, "04:00")
    a = audited(tmp_path, log)
    [f] = a.findings("procedure.pit_inconsistent")
    assert (f["table_id"], f["pit"]) == (None, "P1")
    assert f["observed"]["tables"] == {"MB-01": [1], "MB-02": [2], "MB-03": [1]}
    assert f["evidence"]["interval"] == [at("02:00").astimezone(dt.UTC).isoformat(),
                                         at("04:00").astimezone(dt.UTC).isoformat()]
    assert "(120 minutes); mini-baccarat tables of one pit must use one procedure." in f["message"]
    assert f["rule"] == "N.J.A.C. 13:69F-7.10(c)1-2"
    assert a.findings(NOTICE) == []


def test_pit_whose_three_mini_tables_change_together_stays_consistent(tmp_path):
    log = Log()
    three_tables(log)
    for t in ("MB-01", "MB-02", "MB-03"):
        log.change(t, "02:00", 2)
    a = audited(tmp_path, log)
    assert a.findings("procedure.pit_inconsistent") == []


@pytest.mark.slow
def test_tables_changing_minutes_apart_are_inconsistent_for_those_minutes_only(tmp_path):
    log = Log()
    three_tables(log)
    log.change("MB-01", "02:00", 2)
    log.change("MB-02", "02:03", 2)
    log.change("MB-03", "02:05", 2)
    for t in ("MB-01", "MB-02", "MB-03"):
        log.close(t, "04:00")
    a = audited(tmp_path, log)
    [f] = a.findings("procedure.pit_inconsistent")
    assert "(5 minutes)" in f["message"]
    assert len(f["observed"]["states"]) == 2
    a2 = TablePassDb(tmp_path / "grace")
    a2.ingest(log)
    a2.run(changeover_grace=dt.timedelta(minutes=10))
    assert a2.findings("procedure.pit_inconsistent") == []


def test_inconsistency_ends_when_the_odd_table_closes(tmp_path):
    log = Log()
    three_tables(log)
    log.change("MB-03", "02:00", 2)
    log.close("MB-03", "02:30")
    for t in ("MB-01", "MB-02"):
        log.close(t, "04:00")
    a = audited(tmp_path, log)
    [f] = a.findings("procedure.pit_inconsistent")
    assert "(30 minutes)" in f["message"] and not f["observed"]["open_ended"]


def test_inconsistency_lasting_to_the_end_of_the_log_says_so(tmp_path):
    log = Log()
    three_tables(log)
    log.change("MB-03", "02:00", 2)
    log.close("MB-01", "03:00")
    log.close("MB-02", "03:00")
    log.shoe_start("MB-03", "03:00", "S1")  # MB-03's log stops here, still open
    a = audited(tmp_path, log)
    [f] = a.findings("procedure.pit_inconsistent")
    assert f["observed"]["end"] == at("03:00").astimezone(dt.UTC).isoformat()


def test_mini_table_on_another_procedure_than_the_punto_banco_table_in_its_pit(tmp_path):
    log = Log()
    log.open("PB-01", "P1", "22:00", game="punto_banco", procedure=1, seats=12)
    log.open("MB-01", "P1", "22:10", procedure=2)
    log.close("MB-01", "23:10")
    log.close("PB-01", "23:30")
    a = audited(tmp_path, log)
    [f] = a.findings("procedure.pit_inconsistent")
    assert "7.10(c)2" in f["observed"]["states"][0]["rules"]
    assert f["observed"]["tables"] == {"MB-01": [2], "PB-01": [1]}
    assert "(60 minutes)" in f["message"]


@pytest.mark.slow
def test_mini_table_on_the_punto_banco_tables_procedure_is_consistent(tmp_path):
    log = Log()
    log.open("PB-01", "P1", "22:00", game="punto_banco", procedure=2, seats=12)
    log.open("MB-01", "P1", "22:10", procedure=2)
    a = audited(tmp_path, log)
    assert a.findings("procedure.pit_inconsistent") == []


@pytest.mark.slow
def test_tables_of_different_pits_may_use_different_procedures(tmp_path):
    log = Log()
    log.open("MB-01", "P1", "22:00", procedure=1)
    log.open("MB-02", "P2", "22:00", procedure=3)
    log.open("NZ-01", "P1", "22:00", jurisdiction="NZ", procedure=None)
    a = audited(tmp_path, log)
    assert a.findings("procedure.") == []


# --- undeclared changes --------------------------------------------------------------------

# Two Banker winners at seats 7 and 4, paid in each procedure's order (13:69F-7.10(b)1-4).
ORDER = {
    1: [("pay", 7), ("pay", 4), ("vig", 7), ("vig", 4)],
    2: [("vig", 7), ("vig", 4), ("pay", 7), ("pay", 4)],
    3: [("pay", 7), ("vig", 7), ("pay", 4), ("vig", 4)],
    4: [("vig", 7), ("pay", 7), ("vig", 4), ("pay", 4)],
}
BANKER_NATURAL = [("player", "2c"), ("banker", "4d"), ("player", "3h"), ("banker", "5s")]


def rounds(log: Log, table: str, shoe: str, orders: list[list[tuple[str, int]]],
           first: int = 1) -> None:
    for i, moves in enumerate(orders):
        log.round(table, shoe, first + i, BANKER_NATURAL, moves)


def table_on_three(log: Log) -> None:
    log.open("MB-01", "P2", "22:00", procedure=3)
    log.shoe_start("MB-01", "22:01", "S1")
    log.burn("MB-01", "S1", ["Ac", "Kd"])


@pytest.mark.slow
def test_three_rounds_paid_by_procedure_4_under_declared_3_are_one_undeclared_change(tmp_path):
    log = Log()
    table_on_three(log)
    rounds(log, "MB-01", "S1", [ORDER[3], ORDER[4], ORDER[4], ORDER[4], ORDER[3]])
    a = audited(tmp_path, log)
    [f] = a.findings("procedure.undeclared_change")
    assert (f["table_id"], f["shoe"], f["round"]) == ("MB-01", "S1", 2)
    assert f["expected"] == {"procedure": 3}
    assert f["observed"]["consistent_procedures"] == [4]
    assert (f["observed"]["first"]["round"], f["observed"]["last"]["round"]) == (2, 4)
    assert f["evidence"]["covered_rounds"] == [["S1", 2], ["S1", 3], ["S1", 4]]
    assert "from shoe S1 round 2 to shoe S1 round 4" in f["message"]


@pytest.mark.slow
def test_only_tables_with_a_round_in_another_order_are_read_round_by_round(
    tmp_path, monkeypatch
):
    """The table pass reads payment orders round by round (times, sources) only at tables
    where a run can start (an informative round fitting another procedure, not the declared)
    and there only the rounds where one can lie (replay.tables.run_spans)."""
    from auditor.audit import load

    log = Log()
    for t in ("MB-01", "MB-02", "MB-03"):
        log.open(t, "P2", "22:00", procedure=3)
        log.shoe_start(t, "22:01", "S1")
        log.burn(t, "S1", ["Ac", "Kd"])
    rounds(log, "MB-01", "S1", [ORDER[3], ORDER[4], ORDER[4], ORDER[4], ORDER[3]])
    rounds(log, "MB-02", "S1", [ORDER[3]] * 4 + [[("vig", 5), ("pay", 5)]])  # one winner: 2 or 4
    rounds(log, "MB-03", "S1", [ORDER[3], ORDER[4], ORDER[4], ORDER[3], ORDER[3]])
    seen: list = []
    real = load.load_round_orders

    def spy(*args, **kw):
        spans = real(*args, **kw)
        seen.append((kw.get("only"), [[(r.table, r.round) for r in s] for s in spans]))
        return spans

    monkeypatch.setattr(load, "load_round_orders", spy)
    a = audited(tmp_path, log)
    # MB-03's two rounds paid as 4 are too few for a run: none of its rounds is built
    assert seen == [(["MB-01", "MB-03"], [[("MB-01", 2), ("MB-01", 3), ("MB-01", 4)]])]
    [f] = a.findings("procedure.undeclared_change")
    assert (f["table_id"], f["round"]) == ("MB-01", 2)
    assert a.run()["rounds_with_payout_order"] == 15


def test_the_orders_read_once_give_each_round_as_it_stood_and_over_all_its_events(tmp_path):
    """load_orders serves both readers with one read: tables_with_other_orders takes a round
    as it stood, load_round_orders over every event that names it. A void logged after its
    round's end is left out of the round (log.after_round_end): void over all its events,
    not as it stood."""
    from auditor.audit import load

    log = Log()
    table_on_three(log)
    rounds(log, "MB-01", "S1", [ORDER[3], ORDER[4]])
    late = log.emit("table:MB-01", log._next("MB-01"), "void", shoe="S1", round=2,
                    reason="insufficient_cards")
    rounds(log, "MB-01", "S1", [ORDER[3]], first=3)
    db = TablePassDb(tmp_path)
    db.ingest(log)
    audit(db.con, runs.start(db.con, "audit", {}), db.config)
    assert db.con.execute("SELECT round, seq, why FROM round_exclusions").fetchall() == [
        (2, late["seq"], "after_end")]
    firsts = {e["round"]: e["seq"] for e in reversed(log.streams["table:MB-01"])
              if e.get("round") is not None}
    tables = cast(Any, SimpleNamespace(declared={"MB-01": None}, rules={"MB-01": None}))
    got = load.load_orders(db.con, tables).sort_by("round").to_pylist()
    assert [(r["round"], r["first_seq_all"], r["first_seq"], r["void_stood"], r["void"],
             r["moves"]) for r in got] == [
        (1, firsts[1], firsts[1], False, False, "pay 7 vig 7 pay 4 vig 4"),
        (2, firsts[2], firsts[2], False, True, "vig 7 pay 7 vig 4 pay 4"),
        (3, firsts[3], firsts[3], False, False, "pay 7 vig 7 pay 4 vig 4"),
    ]
    # the table pass counts the three rounds as they stood
    assert db.run()["rounds_with_payout_order"] == 3


def test_two_rounds_in_another_procedures_order_stay_single_round_mismatches(tmp_path):
    log = Log()
    table_on_three(log)
    rounds(log, "MB-01", "S1", [ORDER[4], ORDER[4], ORDER[3], ORDER[4], ORDER[4]])
    a = audited(tmp_path, log)
    assert a.findings("procedure.undeclared_change") == []


@pytest.mark.slow
def test_single_winner_rounds_neither_start_nor_break_a_run(tmp_path):
    single_like_3 = [("pay", 5), ("vig", 5)]  # fits 1 and 3: the declared 3 among them
    single_like_4 = [("vig", 5), ("pay", 5)]  # fits 2 and 4
    log = Log()
    table_on_three(log)
    rounds(log, "MB-01", "S1", [single_like_4] * 4 + [ORDER[4], single_like_3, ORDER[4],
                                                      single_like_4, ORDER[4]])
    a = audited(tmp_path, log)
    [f] = a.findings("procedure.undeclared_change")
    assert (f["observed"]["first"]["round"], f["observed"]["last"]["round"]) == (5, 9)
    assert f["observed"]["informative_rounds"] == 3
    # the single-winner round paid like 4 inside the run is covered; the one like 3 is not
    assert f["evidence"]["covered_rounds"] == [["S1", 5], ["S1", 7], ["S1", 8], ["S1", 9]]


@pytest.mark.slow
def test_no_vigorish_rounds_are_ambiguous(tmp_path):
    log = Log()
    log.open("MB-01", "P2", "22:00", procedure=3, variant="no_vig_dragon7")
    log.shoe_start("MB-01", "22:01", "S1")
    rounds(log, "MB-01", "S1", [[("pay", 7), ("pay", 4)]] * 5)
    a = audited(tmp_path, log)
    assert a.findings("procedure.undeclared_change") == []


@pytest.mark.slow
def test_a_declared_change_ends_the_run(tmp_path):
    log = Log()
    table_on_three(log)
    log.notice("P2", "22:00", 4, "22:30")
    rounds(log, "MB-01", "S1", [ORDER[4], ORDER[4]])
    log.change("MB-01", "23:00", 4)
    rounds(log, "MB-01", "S1", [ORDER[4]] * 3, first=3)
    a = audited(tmp_path, log)
    assert a.findings("procedure.undeclared_change") == []


def test_undeclared_runs_is_pure_and_honours_the_minimum():
    t = at("23:00")

    def r(n: int, fits: set[int], informative: bool = True) -> RoundOrder:
        return RoundOrder("MB-01", "S1", n, n * 10, n * 10 + 5, t, "f", 3, frozenset(fits),
                          informative)

    seq = [r(1, {4}), r(2, set()), r(3, {4}), r(4, {2, 4}, False), r(5, {4})]
    [run] = undeclared_runs(seq, 3)
    assert [x.round for x in run.rounds] == [1, 3, 5]
    assert [x.round for x in run.covered] == [1, 3, 4, 5]  # round 2 fits nothing: not covered
    assert undeclared_runs(seq, 4) == []
    assert undeclared_runs([r(1, {4}), r(2, {2}), r(3, {4})], 2) == []


def _spans_rounds(draw: Any) -> list[RoundOrder]:
    t = at("23:00")
    kinds = st.tuples(st.sampled_from([None, 1, 3, 3, 3]),
                      st.frozensets(st.integers(1, 4), max_size=3), st.booleans())
    return [RoundOrder("MB-01", "S1", n, n * 10, n * 10 + 5, t, "f", d, fits, informative)
            for n, (d, fits, informative) in enumerate(draw(st.lists(kinds, max_size=40)), 1)]


@settings(max_examples=400, deadline=None)
@given(st.data(), st.integers(1, 4))
def test_the_runs_found_span_by_span_are_those_found_over_every_round(data, min_rounds):
    """The table pass builds RoundOrders only for run_spans' rounds: each span alone must give
    undeclared_runs what all the rounds give it, runs, covered rounds and all."""
    rounds = _spans_rounds(data.draw)
    spans = _spans(rounds, min_rounds)
    assert all(lo < hi for lo, hi in spans)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    by_span = [run for lo, hi in spans for run in undeclared_runs(rounds[lo:hi], min_rounds)]
    assert by_span == undeclared_runs(rounds, min_rounds)


def _spans(rounds: list[RoundOrder], min_rounds: int) -> list[tuple[int, int]]:
    declared = np.array([-1 if r.declared is None else r.declared for r in rounds], np.int64)
    kinds = np.array([round_kind(r.declared, r.fits, r.informative) for r in rounds], np.int8)
    return run_spans(declared, kinds, min_rounds)


def test_run_spans_cut_where_a_run_must_close():
    t = at("23:00")
    s, i, two = frozenset({4}), frozenset({3}), frozenset({2})  # 3 and 4 declared below
    facts = [(3, s, True), (3, s, True), (3, i, True), (3, s, True), (3, s, True),
             (3, frozenset(), True), (3, s, True), (4, two, True), (4, two, True),
             (None, s, True)]
    rounds = [RoundOrder("MB-01", "S1", n, n, n, t, "f", d, fits, informative)
              for n, (d, fits, informative) in enumerate(facts)]
    assert _spans(rounds, 3) == [(3, 7)]  # the 4-fitting rounds after the declared-fit one
    assert _spans(rounds, 2) == [(0, 2), (3, 7), (7, 9)]  # and a declared change cuts
    assert _spans(rounds[:2], 3) == []
    assert _spans([], 1) == []


@pytest.mark.slow
def test_round_mismatches_covered_by_an_undeclared_run_are_superseded_and_reopened(tmp_path):
    log = Log()
    table_on_three(log)
    rounds(log, "MB-01", "S1", [ORDER[4]] * 3)
    a = TablePassDb(tmp_path)
    a.ingest(log)
    audit(a.con, runs.start(a.con, "audit", {}), a.config, tables=False)
    assert len(a.findings("order.procedure_mismatch")) == 3
    a.run()
    assert set(covered_rounds(a.con)) == {("MB-01", "S1", n) for n in (1, 2, 3)}
    moved = supersede_round_mismatches(a.con, runs.start(a.con, "audit", {}))
    assert moved == {"mismatches_superseded": 3, "mismatches_reopened": 0}
    assert a.findings("order.procedure_mismatch") == []
    # With a longer minimum the run no longer stands: its rounds' mismatches come back.
    a.run(min_undeclared_rounds=4)
    assert a.findings("procedure.undeclared_change") == []
    moved = supersede_round_mismatches(a.con, runs.start(a.con, "audit", {}))
    assert moved == {"mismatches_superseded": 0, "mismatches_reopened": 3}
    back = a.findings("order.procedure_mismatch")
    assert len(back) == 3 and all("superseded_by" not in f["evidence"] for f in back)


@pytest.mark.parametrize("procedure", [1, 2, 3, 4])
def test_every_procedures_own_order_fits_it(procedure):
    from auditor.replay.order import consistent_procedures

    assert procedure in consistent_procedures(ORDER[procedure], True)


# --- the sample night ----------------------------------------------------------------------

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"


def readme_late_changes() -> set[str]:
    """Tables sample_logs/README.md says changed procedure with late notices: the tables of
    each pit listed with `procedure.notice_late` that were still open at the change (a table
    whose hours end before the change never changed)."""
    text = (SAMPLE / "README.md").read_text()
    hours = {t: close for t, close in re.findall(
        r"^\| (\S+) \|(?:[^|]*\|){7} \d\d:\d\d-(\d\d:\d\d) \|",
        text, re.M)}
    changed = set()
    section = text.split("## Procedure changes")[1]
    for tables, effective in re.findall(
        r"^- Pit \S+ \(([^)]*)\): procedure \d from (\d\d:\d\d),.*`procedure\.notice_late`",
        section, re.M,
    ):
        for t in tables.split(", "):
            if at(hours[t]) > at(effective):
                changed.add(t)
    return changed


@pytest.fixture(scope="module")
def sample_night(tmp_path_factory):
    a = TablePassDb(tmp_path_factory.mktemp("sample"))
    ingest(a.con, [SAMPLE], runs.start(a.con, "ingest", {}))
    summary = a.run()
    yield a, summary
    a.con.close()


@pytest.mark.slow
def test_sample_night_gives_exactly_the_planted_table_pit_and_shoe_deviations(sample_night):
    a, summary = sample_night
    owned = [(f["code"], f["table_id"]) for f in a.findings() if f["code"] in OWNED_CODES]
    expected = readme_late_changes()
    assert expected == {"MB-03", "MB-05"}  # MB-04 closed at 02:00, before P2's 03:00 change
    assert sorted(owned) == sorted(("procedure.notice_late", t) for t in expected)
    # CF-01's four shoes are checked under the NJ chemin de fer pack like the others.
    assert summary["shoes"] == 45 and summary["shoes_without_rule_pack"] == 0
    assert summary["procedure_changes"] == 5 and summary["changes_duly_notified"] == 3


@pytest.mark.slow
def test_sample_night_late_notices_are_the_pit_p2_change_at_three(sample_night):
    a, _ = sample_night
    for f in a.findings("procedure.notice_late"):
        assert f["pit"] == "P2"
        # Each table changes between rounds, at its first round from 03:00.
        assert at("03:00") <= f["ts"] < at("03:03")
        assert 20 * 60 <= f["observed"]["lead_seconds"] < 23 * 60
        assert f["evidence"]["pit_change"]["tables"] == ["MB-03", "MB-05"]
        assert [n["key"] for n in f["evidence"]["notices"]] == ["pit:P2#1", "pit:P2#2"]


@pytest.mark.slow
def test_sample_night_with_the_example_config_baseline_finds_the_same(tmp_path):
    from auditor import config

    conf = config.load(Path(__file__).resolve().parents[2] / "docs" / "property.example.toml")
    a = TablePassDb(tmp_path, conf)
    ingest(a.con, [SAMPLE], runs.start(a.con, "ingest", {}))
    a.run()
    owned = sorted((f["code"], f["table_id"]) for f in a.findings() if f["code"] in OWNED_CODES)
    assert owned == [("procedure.notice_late", "MB-03"), ("procedure.notice_late", "MB-05")]
