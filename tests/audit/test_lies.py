"""Logs that lie (issue 28): each case is the sample night with one edit a dealer or a forger
could make, delivered and audited as files arrive. The deviation the edit tried to hide stands
at its severity, and a finding names the lie (tests/jobs/test_watch.py: the same live)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from helpers.lies import (
    CONF,
    card_after_round_end,
    deliver,
    find,
    finding,
    plain_sample,
    read,
    round_event,
    stamp,
    standing,
    when,
    write,
)

from auditor.audit.run import audit
from auditor.store import runs

VIG_ROUND = ("MB-01", "MB-01-1128-03", 47)  # vig.wrong_amount: 4.00 taken, 5.00 due
PAY_ROUND = ("MB-04", "MB-04-1128-01", 81)  # settle.wrong_amount (critical): 100 paid 90
DRAW_ROUND = ("MB-01", "MB-01-1128-01", 72)  # draw.banker_missed
LATE = ("log.after_round_end", "log.late_delivery", "log.time_reversed", "notice.backdated")
# Each case ingests and audits a few tables' night, twice for some: seconds each.
pytestmark = pytest.mark.slow


@pytest.fixture
def night(tmp_path):
    return plain_sample(tmp_path / "logs")


def _night_files(night, *tables: str) -> list:
    """The night's files of `tables` (all if none): a lie at one table needs only its own
    file and those it is judged against (its pit's notices and tables)."""
    return sorted(p for k, p in night.items() if not tables or k in tables)


P2 = ("MB-03", "MB-04", "MB-05", "pits")  # pit P2's change at 03:00, notified 20 min before


def _key(where: tuple[str, str, int]) -> dict:
    return {"table": where[0], "shoe": where[1], "round": where[2]}


def _after_close(night, tmp_path):
    """A later file for MB-01 and MB-04, going on with their streams after their
    table_close: the vigorish that makes round 47's whole, and the 10 that round 81's pay was
    short, stamped after the tables closed."""
    out = []
    for (table, shoe, rnd), make in (
        (VIG_ROUND, lambda like, t: round_event(like, "vig", t, seat=5, amount="1.00",
                                                mode="collect")),
        (PAY_ROUND, lambda like, t: round_event(like, "pay", t, seat=7, bet="player",
                                                amount="10.00")),
    ):
        events = read(night[table])
        like = events[find(events, shoe=shoe, round=rnd, type="round_end")]
        close = events[-1]
        assert close["type"] == "table_close"
        late = make(like, when(close) + dt.timedelta(minutes=20))
        late["seq"] = close["seq"] + 1
        out.append(write(tmp_path / f"later_{table}.jsonl", [late]))
    return out


@pytest.mark.parametrize("deliveries", ["together", "later"])
def test_events_after_table_close_never_mend_the_round(night, tmp_path, deliveries):
    later = _after_close(night, tmp_path)
    files = _night_files(night, "MB-01", "MB-04")
    plan = [files + later] if deliveries == "together" else [files, later]
    con, results = deliver(tmp_path / "a.duckdb", *plan)
    # The deviations the late events would have mended stand, at their severity.
    assert standing(con, "vig.wrong_amount", "settle.wrong_amount") == [
        ("settle.wrong_amount", "critical", *PAY_ROUND),
        ("vig.wrong_amount", "major", *VIG_ROUND),
    ]
    assert standing(con, *LATE) == [
        ("log.after_round_end", "major", *VIG_ROUND),
        ("log.after_round_end", "major", *PAY_ROUND),
    ]
    f = finding(con, "log.after_round_end", table_id="MB-01")
    assert f["seq"] == 7570 and f["observed"]["after_table_close"] is True
    assert f["evidence"]["events"][0] | {"source": ""} == {
        "seq": 7570, "ts": "2026-11-29T11:24:50+00:00", "type": "vig", "seat": 5,
        "amount": "1.00", "source": ""}
    assert f["evidence"]["round_end"]["seq"] == 3348
    assert f["evidence"]["table_close"]["seq"] == 7569
    assert "after the table closed (table_close seq 7569" in f["message"]
    # Nothing else moves: the shoes are counted, the orders judged, as the night showed.
    plain, _ = deliver(tmp_path / "plain.duckdb", files)
    assert [x for x in standing(con) if x[0] not in LATE] == standing(plain)
    if deliveries == "later":
        assert results[1].findings_withdrawn == 0 and results[1].findings_new == 2
    # A rerun over the night replays the same events: nothing new, nothing withdrawn.
    window = (dt.datetime(2026, 11, 29, 2, tzinfo=dt.UTC), dt.datetime(2026, 11, 29, 12,
                                                                       tzinfo=dt.UTC))
    again = audit(con, runs.start(con, "audit", {}), CONF, rerun=window)
    assert again.rounds > 700  # MB-01's and MB-04's
    assert (again.findings_new, again.findings_withdrawn, again.passes_new,
            again.passes_withdrawn) == (0, 0, 0, 0)


def test_a_card_logged_58_minutes_after_its_round_ended_leaves_the_missed_draw(night, tmp_path):
    events = read(night["MB-01"])
    card_after_round_end(events, DRAW_ROUND[1], DRAW_ROUND[2], minutes=58)
    write(night["MB-01"], events)
    con, _ = deliver(tmp_path / "a.duckdb", _night_files(night, "MB-01"))
    assert standing(con, "draw.banker_missed") == [("draw.banker_missed", "critical",
                                                    *DRAW_ROUND)]
    f = finding(con, "log.after_round_end", table_id="MB-01")
    assert (f["shoe"], f["round"], f["severity"]) == (DRAW_ROUND[1], DRAW_ROUND[2], "major")
    assert f["evidence"]["events"][0]["card"] == "5c"
    assert f["observed"]["seconds_after_round_end"] > 58 * 60
    assert f["observed"]["after_table_close"] is False
    assert "58 minutes" in f["message"]
    # The card is not the shoe's either: no composition error from it.
    assert standing(con, "shoe.composition") == []
    assert standing(con, *LATE) == [("log.after_round_end", "major", *DRAW_ROUND)]


def test_a_card_delivered_after_its_round_was_judged_leaves_the_missed_draw(night, tmp_path):
    """The night's file lost round 72's last card (a seq gap); the round is judged with the
    missed draw. A later file brings that seq, a Banker card: delivered after the judgement,
    it changes nothing of it."""
    events = read(night["MB-01"])
    i = find(events, shoe=DRAW_ROUND[1], round=DRAW_ROUND[2], type="announce")
    forged = round_event(events[i], "card", when(events[i]) - dt.timedelta(seconds=1),
                         to="banker", card="5c")
    forged["seq"] = events[i]["seq"]
    del events[i]  # the announcement's seq, left free in the night's file
    write(night["MB-01"], events)
    first_audit: dict = {}

    def judged(con, n):
        if n == 0:
            first_audit["found"] = standing(con)
    later = write(tmp_path / "later.jsonl", [forged])
    con, results = deliver(tmp_path / "a.duckdb", _night_files(night, "MB-01"), [later],
                           after=judged)
    assert ("draw.banker_missed", "critical", *DRAW_ROUND) in first_audit["found"]
    assert ("log.seq_gap", "major", "MB-01", None, None) in first_audit["found"]
    # The gap is filled (ingest withdraws it); the round's own findings stand.
    assert standing(con, "draw.banker_missed", "log.seq_gap") == [
        ("draw.banker_missed", "critical", *DRAW_ROUND)]
    round_findings = [f for f in first_audit["found"] if f[2:] == DRAW_ROUND]
    assert [f for f in standing(con) if f[2:] == DRAW_ROUND and f[0] not in LATE] == \
        round_findings
    f = finding(con, "log.late_delivery")
    assert (f["table_id"], f["shoe"], f["round"], f["seq"]) == (*DRAW_ROUND, forged["seq"])
    assert f["evidence"]["events"][0]["source"].endswith("later.jsonl:1")
    assert f["evidence"]["judged_at"] is not None
    assert "after the round was judged" in f["message"]
    assert results[1].rounds == 0  # the round is not replayed


def test_delivered_with_the_night_the_same_card_is_the_round(night, tmp_path):
    """Not a late delivery when the round had not been judged yet: a night delivered in two
    files at once is one night."""
    events = read(night["MB-01"])
    i = find(events, shoe=DRAW_ROUND[1], round=DRAW_ROUND[2], type="pay")
    moved = events.pop(i)
    write(night["MB-01"], events)
    other = write(tmp_path / "other.jsonl", [moved])
    con, _ = deliver(tmp_path / "a.duckdb", [*_night_files(night, "MB-01"), other])
    assert standing(con, *LATE) == []
    assert standing(con, "draw.banker_missed") == [("draw.banker_missed", "critical",
                                                    *DRAW_ROUND)]


def test_chemin_de_fer_bank_passing_after_round_end_is_part_of_the_round(night, tmp_path):
    con, _ = deliver(tmp_path / "a.duckdb", _night_files(night, "CF-01"))
    passes = con.execute("SELECT count(*) FROM events e JOIN events p ON p.table_id = "
                         "e.table_id AND p.seq = e.seq + 1 WHERE e.type = 'round_end' "
                         "AND p.type = 'bank_pass'").fetchall()[0][0]
    assert passes > 20
    assert standing(con, *LATE) == []
    assert con.execute("SELECT count(*) FROM round_exclusions").fetchall() == [(0,)]


# --- time that runs backwards ---------------------------------------------------------------


def _change(events):
    i = find(events, type="procedure_change")
    return i, events[i]


def test_a_change_stamped_after_the_rounds_that_follow_it_keeps_its_late_notice(night, tmp_path):
    """MB-03 changes to procedure 4 at 03:00:21 on notices given 02:40 (20 minutes). Its
    procedure_change line alone is stamped 15 minutes later, its seq left in place."""
    plain, _ = deliver(tmp_path / "plain.duckdb", _night_files(night, *P2))
    before = finding(plain, "procedure.notice_late", table_id="MB-03")
    events = read(night["MB-03"])
    i, change = _change(events)
    after = events[i + 1]
    change["ts"] = stamp(when(change) + dt.timedelta(minutes=15))
    write(night["MB-03"], events)
    con, _ = deliver(tmp_path / "a.duckdb", _night_files(night, *P2))
    # Still late: the change took effect no later than the round after it began.
    f = finding(con, "procedure.notice_late", table_id="MB-03")
    assert f["severity"] == before["severity"] == "major"
    assert f["seq"] == before["seq"] == change["seq"]
    assert dt.datetime.fromisoformat(f["observed"]["change"]["ts"]) == when(after)
    moved = when(after) - dt.datetime.fromisoformat(before["observed"]["change"]["ts"])
    assert moved == dt.timedelta(seconds=1)  # logged a second before that round, as it was
    assert f["observed"]["lead_seconds"] == before["observed"]["lead_seconds"] + 1
    assert f["observed"]["lead_seconds"] < 30 * 60
    # No pit finding for 03:00-03:15: MB-05 changed at 03:00:42, MB-03 before its next round.
    assert standing(con, "procedure.pit_inconsistent") == []
    r = finding(con, "log.time_reversed", table_id="MB-03")
    assert r["severity"] == "major" and r["seq"] == after["seq"]
    peak, first = r["evidence"]["events"]
    assert (peak["seq"], peak["type"]) == (change["seq"], "procedure_change")
    assert (first["seq"], first["type"]) == (after["seq"], after["type"])
    assert 14 * 60 < r["observed"]["back_seconds"] <= 15 * 60
    assert r["observed"]["events"] > 20  # the events stamped before 03:15
    assert standing(con, *LATE) == [("log.time_reversed", "major", "MB-03", None, None)]
    # Everything else is as on the night unedited.
    assert [x for x in standing(con) if x[0] != "log.time_reversed"] == standing(plain)


def test_the_issue_pit_change_on_a_hand_written_night(tmp_path):
    """The issue's case, by hand: notices given 22:15 for 22:30; MB-07 ends round 31 at
    22:30:02, logs its procedure_change, begins round 32 at 22:30:49; MB-08 changes at
    22:30. Stamped as it happened, and with MB-07's change line alone stamped 22:45."""
    from helpers.tablelog import Log

    from auditor.config import PropertyConfig

    def night(change_at: str, folder: str) -> list:
        log = Log()
        for table in ("MB-07", "MB-08"):
            log.open(table, "P3", "21:00", procedure=1)
        log.shoe_start("MB-07", "22:29:00", "S1")
        log.emit("table:MB-07", "22:29:50", "round_start", shoe="S1", round=31)
        log.emit("table:MB-07", "22:30:02", "round_end", shoe="S1", round=31)
        log.change("MB-07", change_at, 2)
        log.emit("table:MB-07", "22:30:49", "round_start", shoe="S1", round=32)
        log.emit("table:MB-07", "22:31:30", "round_end", shoe="S1", round=32)
        log.change("MB-08", "22:30", 2)
        log.notice("P3", "22:15", 2, "22:30")
        log.close("MB-07", "23:00")
        log.close("MB-08", "23:00")
        return [log.write(tmp_path / folder / "night.jsonl")]

    found = {}
    for name, at in (("honest", "22:30:02"), ("edited", "22:45")):
        con, _ = deliver(tmp_path / f"{name}.duckdb", night(at, name), conf=PropertyConfig())
        found[name] = con
        assert standing(con, "procedure.notice_late", "procedure.pit_inconsistent") == [
            ("procedure.notice_late", "major", "MB-07", None, None),
            ("procedure.notice_late", "major", "MB-08", None, None)]
    change = finding(found["edited"], "procedure.notice_late", table_id="MB-07")
    assert change["observed"]["change"]["ts"] == "2026-11-29T03:30:49+00:00"
    assert change["observed"]["lead_seconds"] == 15 * 60 + 49
    assert standing(found["edited"], *LATE) == [("log.time_reversed", "major", "MB-07", None,
                                                 None)]
    r = finding(found["edited"], "log.time_reversed")
    assert (r["seq"], r["observed"]["back_seconds"]) == (6, 14 * 60 + 11)
    assert standing(found["honest"], *LATE) == []


# --- notices -------------------------------------------------------------------------------


def _backdated_notices(pits: list[dict], t: str) -> list[dict]:
    """Pit P2's two notices again (seq 3-4), stamped `t` (50 minutes before the change)."""
    p2 = [e for e in pits if e["pit"] == "P2"]
    assert [e["seq"] for e in p2] == [1, 2]
    out = []
    for k, e in enumerate(p2):
        out.append({**e, "seq": 3 + k, "ts": t})
    return out


def test_backdated_notices_in_a_later_file_never_withdraw_the_late_notices(night, tmp_path):
    con0, _ = deliver(tmp_path / "plain.duckdb", _night_files(night, *P2))
    before = standing(con0, "procedure.notice_late")
    assert before == [("procedure.notice_late", "major", "MB-03", None, None),
                      ("procedure.notice_late", "major", "MB-05", None, None)]
    fingerprints = {r[0] for r in con0.execute(
        "SELECT fingerprint FROM current_findings WHERE code = 'procedure.notice_late'"
    ).fetchall()}
    later = write(tmp_path / "pit-later.jsonl",
                  _backdated_notices(read(night["pits"]), "2026-11-29T02:10:00.000-05:00"))
    con, results = deliver(tmp_path / "a.duckdb", _night_files(night, *P2), [later])
    assert standing(con, "procedure.notice_late") == before
    assert {r[0] for r in con.execute(
        "SELECT fingerprint FROM current_findings WHERE code = 'procedure.notice_late'"
    ).fetchall()} == fingerprints
    assert results[1].passes_withdrawn == 0
    backdated = standing(con, "notice.backdated")
    assert backdated == [("notice.backdated", "major", None, None, None)] * 2
    f = con.execute("SELECT seq, pit, message, evidence, rule FROM current_findings "
                    "WHERE code = 'notice.backdated' ORDER BY seq").fetchall()
    assert [(s, p) for s, p, *_ in f] == [(3, "P2"), (4, "P2")]
    assert "after the change had been judged" in f[0][2]
    assert json.loads(f[0][3])["tables"] == ["MB-03", "MB-05"]
    assert f[0][4] == "N.J.A.C. 13:69F-7.10(c)3"
    # Stamped 02:10 after seq 1-2 at 02:40: time runs back in the pit's stream.
    r = finding(con, "log.time_reversed")
    assert (r["pit"], r["table_id"], r["seq"]) == ("P2", None, 3)


def test_backdated_notices_in_the_night_file_count_at_their_place(night, tmp_path):
    pits = read(night["pits"])
    write(night["pits"], pits + _backdated_notices(pits, "2026-11-29T02:10:00.000-05:00"))
    con, _ = deliver(tmp_path / "a.duckdb", _night_files(night, *P2))
    # Given, by the pit's stream, at 02:40 like the first two: the changes are still late.
    assert standing(con, "procedure.notice_late") == [
        ("procedure.notice_late", "major", "MB-03", None, None),
        ("procedure.notice_late", "major", "MB-05", None, None)]
    assert standing(con, *LATE) == [("log.time_reversed", "major", None, None, None)]
    f = finding(con, "procedure.notice_late", table_id="MB-03")
    given = {n["key"]: n for n in f["observed"]["notices"]}
    assert set(given) == {"pit:P2#1", "pit:P2#2"}  # the earliest given count


def test_notices_logged_after_the_change_are_backdated(night, tmp_path):
    """Appended to the pit's stream after a notice given at 03:10 (after the change at
    03:00), two notices stamped 02:10 are logged after the change: they do not count."""
    pits = read(night["pits"])
    p2 = [e for e in pits if e["pit"] == "P2"]
    other = {**p2[0], "seq": 3, "ts": "2026-11-29T03:10:00.000-05:00", "procedure": 1,
             "effective": "2026-11-29T04:00:00-05:00"}
    late = _backdated_notices(pits, "2026-11-29T02:10:00.000-05:00")
    for e in late:
        e["seq"] += 1
    write(night["pits"], [*pits, other, *late])
    con, _ = deliver(tmp_path / "a.duckdb", _night_files(night, *P2))
    assert standing(con, "procedure.notice_late") == [
        ("procedure.notice_late", "major", "MB-03", None, None),
        ("procedure.notice_late", "major", "MB-05", None, None)]
    rows = con.execute("SELECT seq, message FROM current_findings "
                       "WHERE code = 'notice.backdated' ORDER BY seq").fetchall()
    assert [s for s, _ in rows] == [4, 5]
    assert "logged after the change in the pit's log" in rows[0][1]


def test_a_file_that_grows_continues_its_rounds_and_its_late_lines_are_late(night, tmp_path):
    """The same file read as it grows (ingest of a growing log): a round cut by the first
    read is completed by the next and replayed whole, with no late finding; a line appended
    later for a round judged with its end is log.after_round_end."""
    from auditor.ingest.run import ingest
    from auditor.store import db

    events = read(night["MB-01"])
    start = find(events, shoe=DRAW_ROUND[1], round=DRAW_ROUND[2], type="round_start")
    cut = find(events, shoe=DRAW_ROUND[1], round=DRAW_ROUND[2], type="card")  # mid-round
    grows = tmp_path / "MB-01.log"
    write(grows, events[:cut])
    con = db.connect(tmp_path / "a.duckdb")

    def deliver_and_audit():
        ingest(con, [grows], runs.start(con, "ingest", {}))
        return audit(con, runs.start(con, "audit", {}), CONF)

    deliver_and_audit()
    assert standing(con, *LATE) == []
    write(grows, events)  # the rest of the night, appended
    second = deliver_and_audit()
    assert second.findings_withdrawn >= 1  # the round cut mid-deal, judged again whole
    assert standing(con, "draw.banker_missed") == [("draw.banker_missed", "critical",
                                                    *DRAW_ROUND)]
    assert standing(con, *LATE) == []
    pieces = con.execute("SELECT count(*) FROM source_extents").fetchall()[0][0]
    assert pieces == 2
    late = round_event(events[start], "card", when(events[-1]) + dt.timedelta(minutes=5),
                       to="banker", card="5c")
    late["seq"] = events[-1]["seq"] + 1
    write(grows, [*events, late])
    deliver_and_audit()
    assert standing(con, *LATE) == [("log.after_round_end", "major", *DRAW_ROUND)]
    assert standing(con, "draw.banker_missed") == [("draw.banker_missed", "critical",
                                                    *DRAW_ROUND)]


def test_an_exclusion_removed_or_added_by_hand_is_named_before_an_audit_trusts_it(
    night, tmp_path
):
    """The late card kept out of round 72 is on the record (round_exclusion_log): taken out
    of round_exclusions by hand, the missed draw could be judged again with that card and
    mended; another round's card added there could mend it too. The next audit stops and
    `verify`'s check names the row; put back, the audit goes on."""
    from auditor.errors import UserError
    from auditor.store.ledger_verify import check_set_logs

    events = read(night["MB-01"])
    card = card_after_round_end(events, DRAW_ROUND[1], DRAW_ROUND[2], minutes=58)
    write(night["MB-01"], events)
    con, _ = deliver(tmp_path / "a.duckdb", _night_files(night, "MB-01"))
    try:
        kept = con.execute("SELECT table_id, shoe, round, seq, why FROM round_exclusions"
                           ).fetchall()
        assert kept == [(*DRAW_ROUND, card["seq"], "after_end")]
        assert con.execute(
            "SELECT table_id, shoe, round, seq, why FROM round_exclusion_log WHERE round >= 0"
        ).fetchall() == kept
        other = con.execute(
            "SELECT seq FROM events WHERE table_id = 'MB-01' AND shoe = ? AND round = ? "
            "AND type = 'card' ORDER BY seq LIMIT 1", [DRAW_ROUND[1], DRAW_ROUND[2] - 1]
        ).fetchall()[0][0]
        earlier = (*DRAW_ROUND[:2], DRAW_ROUND[2] - 1, other, "late_delivery")
        for forge, undo, what, (_, _, rnd, seq, _) in (
            ("DELETE FROM round_exclusions", "INSERT INTO round_exclusions VALUES "
             f"{(*DRAW_ROUND, card['seq'], 'after_end')}", "missing", kept[0]),
            (f"INSERT INTO round_exclusions VALUES {earlier}",
             f"DELETE FROM round_exclusions WHERE seq = {other}", "inserted", earlier),
        ):
            con.execute(forge)
            row = (f"table_id MB-01 shoe {DRAW_ROUND[1]} round {rnd} seq {seq} why "
                   f"{'after_end' if what == 'missing' else 'late_delivery'}")
            with pytest.raises(UserError) as e:
                audit(con, runs.start(con, "audit", {}), CONF)
            assert str(e.value).startswith(
                f"round_exclusions: an event left out of its round ({row}) is {what}: the "
                "table was changed outside the product since the audit wrote it, and an audit "
                "that trusted it could judge a round without a card dealt in it")
            assert [p.sentence() for p in check_set_logs(con).problems] == [
                f"{what}: round_exclusions {row}: " + (
                    "in the audit's log of what it wrote, no longer in the table"
                    if what == "missing" else "not in the audit's log of what it wrote")]
            con.execute(undo)
        assert check_set_logs(con).problems == []
        logged = con.execute("SELECT count(*) FROM round_exclusion_log").fetchall()
        audit(con, runs.start(con, "audit", {}), CONF)  # reads round 72 again: the same set
        assert con.execute("SELECT count(*) FROM round_exclusion_log").fetchall() == logged
        assert standing(con, "draw.banker_missed") == [("draw.banker_missed", "critical",
                                                        *DRAW_ROUND)]
        # a database from before the log: its exclusions taken in, as found, once
        con.execute("DELETE FROM round_exclusion_log")
        run = runs.start(con, "audit", {})
        audit(con, run, CONF)
        assert con.execute("SELECT table_id, shoe, round, seq, why, run_id FROM "
                           "round_exclusion_log ORDER BY round DESC").fetchall() == [
            (*kept[0], run), ("", "", -1, -2, "", run)]
    finally:
        con.close()


def test_an_ordered_time_moved_by_hand_is_named_before_an_audit_trusts_it(night, tmp_path):
    """MB-03's procedure_change stamped 15 minutes late is placed in time by its stream
    (ordered_times, the time the checks use); its ordered time is on the record
    (ordered_time_log). Moved by hand (the change put back at 03:15, its notice then early
    enough), the next audit stops and `verify`'s check names the row."""
    from auditor.errors import UserError
    from auditor.store.ledger_verify import check_set_logs

    events = read(night["MB-03"])
    _, change = _change(events)
    change["ts"] = stamp(when(change) + dt.timedelta(minutes=15))
    write(night["MB-03"], events)
    con, _ = deliver(tmp_path / "a.duckdb", _night_files(night, *P2))
    try:
        [(seq, ordered)] = con.execute(
            "SELECT seq, ts FROM ordered_times WHERE stream = 'table:MB-03' AND seq = ?",
            [change["seq"]]).fetchall()
        assert con.execute(
            "SELECT ts FROM ordered_time_log WHERE stream = 'table:MB-03' AND seq = ?",
            [seq]).fetchall() == [(ordered,)]
        con.execute("UPDATE ordered_times SET ts = ? WHERE stream = 'table:MB-03' AND seq = ?",
                    [when(change), seq])
        with pytest.raises(UserError) as e:
            audit(con, runs.start(con, "audit", {}), CONF)
        assert str(e.value).startswith(
            f"ordered_times: an event's ordered time (stream table:MB-03 seq {seq} ts ")
        assert "(and 1 more rows): the table was changed outside the product" in str(e.value)
        assert sorted((p.what, p.key.rsplit(" ts ", 1)[0]) for p in check_set_logs(con).problems
                      ) == [("inserted", f"stream table:MB-03 seq {seq}"),
                            ("missing", f"stream table:MB-03 seq {seq}")]
        con.execute("UPDATE ordered_times SET ts = ? WHERE stream = 'table:MB-03' AND seq = ?",
                    [ordered, seq])
        assert check_set_logs(con).problems == []
        audit(con, runs.start(con, "audit", {}), CONF)
        assert finding(con, "procedure.notice_late", table_id="MB-03")["severity"] == "major"
    finally:
        con.close()
