"""The pure wording and rules of a stream read in its order (auditor.replay.stream_order) and
of back-dated notices (auditor.replay.procedures.backdated_why): issue 28."""

from __future__ import annotations

import datetime as dt

from auditor.finding import Finding
from auditor.replay import procedures
from auditor.replay.log_ends import StreamEvent
from auditor.replay.procedures import Change, Notice, ProcedureRules, backdated_findings
from auditor.replay.stream_order import (
    TIME_TOLERANCE,
    LateEvent,
    LateRound,
    Reversal,
    duration,
    late_findings,
    reversal_finding,
)

EST = dt.timezone(dt.timedelta(hours=-5))


def evidence(f: Finding) -> dict:
    assert f.evidence is not None
    return f.evidence


def t(hhmmss: str) -> dt.datetime:
    h, m, s = map(int, hhmmss.split(":"))
    return dt.datetime(2026, 11, 28, h, m, s, tzinfo=EST)


def test_durations_read_as_people_say_them():
    assert duration(dt.timedelta(seconds=2)) == "2 seconds"
    assert duration(dt.timedelta(minutes=14, seconds=11)) == "14 minutes 11 seconds"
    assert duration(dt.timedelta(hours=4, minutes=58, seconds=53)) == "4 hours 58 minutes"
    assert duration(dt.timedelta(hours=1)) == "1 hour"
    assert duration(dt.timedelta(0)) == "0 seconds"
    assert dt.timedelta(seconds=2) == TIME_TOLERANCE


def test_a_run_of_time_running_back_names_both_events_and_how_far():
    change = StreamEvent("MB-07", 5, t("22:45:00"), "procedure_change", "a.jsonl:5")
    first = StreamEvent("MB-07", 6, t("22:30:49"), "round_start", "a.jsonl:6", "S1", 32)
    f = reversal_finding(Reversal("table:MB-07", "MB-07", None, first, change, 40, 35,
                                  dt.timedelta(minutes=14, seconds=11), t("22:30:49")), EST)
    assert (f.code, f.table, f.pit, f.shoe, f.round, f.seq) == (
        "log.time_reversed", "MB-07", None, None, None, 6)
    assert f.fingerprint == "log.time_reversed|table:MB-07|6|40"
    assert f.ts == t("22:30:49")
    assert f.message == (
        "Table MB-07: time runs backwards at round_start of round 32 of shoe S1, seq 6 at "
        "2026-11-28 22:30:49, 14 minutes 11 seconds before procedure_change, seq 5 at "
        "2026-11-28 22:45:00, which is logged before it; 35 events, to seq 40, are stamped "
        "before a time already logged (at most 14 minutes 11 seconds before). The checks "
        "that depend on time take each event at its place in the stream (this one at "
        "2026-11-28 22:30:49).")
    assert [e["seq"] for e in evidence(f)["events"]] == [5, 6]
    assert f.observed["back_seconds"] == 851 and f.observed["events"] == 35
    pit = reversal_finding(Reversal("pit:P2", None, "P2", first, change, 6, 1,
                                    dt.timedelta(minutes=30), t("22:45:00")), EST)
    assert pit.message.startswith("Pit P2: ") and evidence(pit)["tables"] == []


def test_late_events_are_reported_once_each_way_with_how_late():
    end = StreamEvent("MB-01", 3348, t("01:31:09"), "round_end", "n.jsonl:3348", "S3", 47)
    close = StreamEvent("MB-01", 7569, t("06:04:50"), "table_close", "n.jsonl:7569")
    vig = LateEvent(7570, t("06:24:50"), "vig", "l.jsonl:1", t("07:00:00"), seat=5,
                    amount="1.00")
    card = LateEvent(3346, t("01:31:05"), "card", "later.jsonl:1", t("08:00:00"), card="5c",
                     to="banker")
    r = LateRound("MB-01", "P1", "S3", 47, end, close, t("07:30:00"), (vig,), (card,))
    after, delivered = late_findings(r, EST)
    assert (after.code, after.seq, after.shoe, after.round) == (
        "log.after_round_end", 7570, "S3", 47)
    assert after.message == (
        "MB-01 shoe S3 round 47: vig of 1.00 at seat 5 (seq 7570, stamped 2026-11-28 "
        "06:24:50) logged 4222 events and 4 hours 53 minutes after its round_end (seq 3348, "
        "2026-11-28 01:31:09) and after the table closed (table_close seq 7569, 2026-11-28 "
        "06:04:50). The round is judged as it stood at its end; these events are not part "
        "of it.")
    assert after.observed["after_table_close"] is True
    assert "delivered_at" not in evidence(after)["events"][0]  # the stream's order alone
    assert after.fingerprint == "log.after_round_end|MB-01|S3|47|7570"
    assert delivered.code == "log.late_delivery" and delivered.seq == 3346
    assert "arrived in later.jsonl after the round was judged at 2026-11-28 07:30:00" in \
        delivered.message
    assert evidence(delivered)["events"][0]["delivered_at"] == "2026-11-28T13:00:00+00:00"
    assert late_findings(LateRound("MB-01", None, "S3", 47, end, None, None), EST) == []


RULES = ProcedureRules("nj-mini_baccarat", (1, 2, 3, 4), 30, ("division", "surveillance"),
                       True, True, True)


def _change(at: str) -> Change:
    return Change("MB-07", "P3", "mini_baccarat", 5, t(at), "a.jsonl:5", 2, 1, "change", RULES)


def _notice(seq: int, given: str, **kw) -> Notice:
    return Notice(f"pit:P3#{seq}", "P3", None, 2, t("22:30:00"), kw.pop("recipient", "division"),
                  True, t(given), f"p.jsonl:{seq}", **kw)


def test_a_notice_counts_only_as_logged_before_the_change_and_delivered_before_its_judgement():
    change = _change("22:30:02")
    ok = _notice(1, "21:45:00", delivered_at=t("21:46:00"))
    v = procedures.judge_change(change, [ok], [change], EST, judged_at=t("22:31:00"))
    assert v.code == "procedure.notice_missing" and v.backdated == ()  # surveillance missing
    late = _notice(3, "21:45:00", delivered_at=t("23:00:00"), recipient="surveillance")
    v = procedures.judge_change(change, [ok, late], [change], EST, judged_at=t("22:31:00"))
    assert v.code == "procedure.notice_missing" and [n.key for n, _ in v.backdated] == [
        "pit:P3#3"]
    assert v.backdated[0][1] == ("delivered at 2026-11-28 23:00:00, after the change had been "
                                 "judged at 2026-11-28 22:31:00")
    # The same notice, delivered before the change was judged: it counts.
    v = procedures.judge_change(change, [ok, late], [change], EST, judged_at=t("23:30:00"))
    assert v.code is None and v.backdated == ()
    # Logged after the change in the pit's stream: given, by the stream, at 22:40.
    after = _notice(4, "22:40:00", stamped=t("21:45:00"), recipient="surveillance")
    v = procedures.judge_change(change, [ok, after], [change], EST)
    assert v.code == "procedure.notice_missing"
    assert v.backdated[0][1].startswith("stamped 2026-11-28 21:45:00 but logged after the "
                                        "change in the pit's log")
    # A notice entered by hand keeps its own rules (notice add): never back-dated here.
    hand = Notice("hand:7", "P3", None, 2, t("22:30:00"), "surveillance", True, t("21:45:00"),
                  "entered by hand", delivered_at=t("23:00:00"))
    v = procedures.judge_change(change, [ok, hand], [change], EST, judged_at=t("22:31:00"))
    assert v.code is None and v.backdated == ()
    f, = backdated_findings([procedures.judge_change(change, [ok, late], [change], EST,
                                                     judged_at=t("22:31:00"))], EST)
    assert (f.code, f.table, f.pit, f.seq, f.fingerprint) == (
        "notice.backdated", None, "P3", 3, "notice.backdated|pit:P3#3")
    assert evidence(f)["tables"] == ["MB-07"]
    assert "It does not count for the change of MB-07 at 2026-11-28 22:30:02" in f.message
