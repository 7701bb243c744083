"""An event stamped after its own delivery (`log.future_stamp`): reported, and it closes no
gaming day, in the watch or in batch. The forger's line: another table's table_close
stamped 2126-01-01, read while MB-01 is dealing the night's last round before 06:00."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import duckdb
import pytest
from helpers.tablelog import Log
from helpers.watched import batch

from auditor import config
from auditor.audit.load import load_latest_ts
from auditor.ingest.log_findings import FutureStamp, future_finding
from auditor.ingest.run import ingest
from auditor.jobs.watch import Watch, WatchOptions
from auditor.store import db, runs
from auditor.words import duration

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
CONF = config.load(SAMPLE / "property.toml")  # gaming day from 06:00, New York
FORGED = "2126-01-01T05:51:00.000-05:00"


def night(when: str = "05:59:55") -> tuple[list[str], list[str], list[str]]:
    """MB-01 deals round 1 from `when` (its first 10 lines reach the round's last card);
    MB-02 opens at 05:50 and its table_close is stamped 2126-01-01; the same MB-02 closing
    honestly at 06:31 instead."""
    natural = [("player", "2c"), ("banker", "9d"), ("player", "3c"), ("banker", "Kd")]
    log = Log()
    log.open("MB-01", "P1", "05:40")
    log.shoe_start("MB-01", "05:41", "S1")
    log.burn("MB-01", "S1", ["Ac", "Kd"])
    log.round("MB-01", "S1", 1, natural, [("pay", 3), ("vig", 3)], when=when,
              after_cards=[("announce", {"kind": "result", "player": 5, "banker": 9,
                                         "winner": "banker"})])
    log.open("MB-02", "P1", "05:50")
    honest = log.emit("table:MB-02", "06:31", "table_close")
    mb02 = log.lines(["table:MB-02"])
    forged = dict(honest, ts=FORGED)
    return (log.lines(["table:MB-01"]), mb02,
            [*mb02[:-1], json.dumps(forged, separators=(",", ":"))])


def codes(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.execute("SELECT code, table_id, round FROM current_findings "
                       "ORDER BY code, table_id, round").fetchall()


def _watched(tmp_path: Path) -> tuple[duckdb.DuckDBPyConnection, Path, Watch]:
    """A database, its spool and a Watch stepped by hand (no sweep but when asked)."""
    spool = tmp_path / "spool"
    spool.mkdir()
    con = db.connect(tmp_path / "w.duckdb")
    return con, spool, Watch(con, spool, CONF, runs.start(con, "watch", {}),
                             WatchOptions(rescan=0, sweep_every=1e9, idle_sweep=1e9))


def test_the_words_of_a_future_stamp() -> None:
    delivered = dt.datetime(2026, 11, 29, 10, 52, 4, tzinfo=dt.UTC)
    f = future_finding(FutureStamp(
        "table:MB-02", "/logs/b.jsonl:2", "k1", 3, 2, "table_close", FORGED,
        dt.timedelta(days=33, hours=0, minutes=58, seconds=56),
        dt.timedelta(days=33, hours=2), delivered,
        dt.datetime(2026, 11, 29, 10, 50, tzinfo=dt.UTC)))
    assert f.message == (
        "Table MB-02: seq 2 (table_close) is stamped 2126-01-01T05:51:00.000-05:00, 33 days "
        "after its line was delivered (2026-11-29 10:52:04 UTC); 3 events of this delivery "
        "are stamped ahead of it, the furthest 33 days 2 hours. No event is logged before it "
        "happens: the stamp is an edit or a clock set wrong, and it closes no gaming day.")
    assert f.fingerprint == "log.future_stamp|table:MB-02|k1"
    assert (f.table, f.pit, f.seq, f.source) == ("MB-02", None, 2, "/logs/b.jsonl:2")
    assert f.expected == {"stamped_by": "2026-11-29T10:57:04+00:00"}
    assert f.observed == {"ts": FORGED, "delivered_at": "2026-11-29T10:52:04+00:00",
                          "events": 3}
    assert f.ts == dt.datetime(2026, 11, 29, 10, 50, tzinfo=dt.UTC)


@pytest.mark.parametrize(("delta", "words"), [
    (dt.timedelta(seconds=2), "2 seconds"),
    (dt.timedelta(minutes=14, seconds=11), "14 minutes 11 seconds"),
    (dt.timedelta(hours=4, minutes=58, seconds=3), "4 hours 58 minutes"),
    (dt.timedelta(days=1, minutes=3), "1 day"),
    (dt.timedelta(days=28, hours=20, minutes=59), "28 days 20 hours"),
    (dt.timedelta(0), "0 seconds"),
])
def test_a_duration_in_words(delta: dt.timedelta, words: str) -> None:
    assert duration(delta) == words


def test_the_watch_reports_the_forged_stamp_and_judges_no_round_before_its_end(tmp_path):
    mb01, _, forged = night()
    con, spool, w = _watched(tmp_path)
    (spool / "2026-11-28_MB-01.jsonl").write_text("\n".join(mb01[:10]) + "\n")
    (spool / "2026-11-28_MB-02.jsonl").write_text("\n".join(forged) + "\n")
    w.step()
    w.sweep()
    # Before: settle.unsettled, vig.missing, result.misannounced and log.table_unclosed of
    # MB-01, judged from the 7 events logged so far, and nothing about the stamp.
    assert codes(con) == [("log.future_stamp", "MB-02", None)]
    assert con.execute("SELECT count(*) FROM round_audits").fetchone() == (0,)
    [(message, seq, source, ts, observed)] = con.execute(
        "SELECT message, seq, source, ts, observed FROM current_findings").fetchall()
    assert message.startswith(f"Table MB-02: seq 2 (table_close) is stamped {FORGED}, ")
    assert (seq, source) == (2, f"{spool / '2026-11-28_MB-02.jsonl'}:2")
    assert ts == dt.datetime(2026, 11, 29, 10, 50, tzinfo=dt.UTC)  # MB-02's open, 05:50 EST
    delivered = dt.datetime.fromisoformat(json.loads(observed)["delivered_at"])
    assert [(delivered,)] == con.execute(
        "SELECT max(ingested_at) FROM source_extents").fetchall()
    assert load_latest_ts(con) == dt.datetime(2026, 11, 29, 11, 0, 1, tzinfo=dt.UTC)
    # The round ends: judged whole, clean (11 events), as if the line had not been there.
    (spool / "2026-11-28_MB-01.jsonl").write_text("\n".join(mb01) + "\n")
    w.step()
    w.sweep()
    assert con.execute("SELECT events FROM round_audits").fetchall() == [(11,)]
    assert codes(con) == [("log.future_stamp", "MB-02", None)]


def test_one_finding_for_a_file_whose_clock_runs_ahead_piece_after_piece(tmp_path):
    """A table system an hour ahead: every piece the watch reads has stamps ahead; one
    finding for the file, and none of them closes the day."""
    log = Log()
    log.open("MB-02", "P1", "05:00")
    log.shoe_start("MB-02", "05:01", "S1")
    lines = log.lines(["table:MB-02"])
    now = dt.datetime.now(dt.UTC)
    ahead = [json.dumps(dict(json.loads(x), ts=(now + dt.timedelta(hours=1, minutes=i))
                             .isoformat()), separators=(",", ":"))
             for i, x in enumerate(lines)]
    con, spool, w = _watched(tmp_path)
    f = spool / "2026-11-28_MB-02.jsonl"
    f.write_text(ahead[0] + "\n")
    w.step()
    f.write_text("\n".join(ahead) + "\n")
    w.step()
    assert con.execute("SELECT count(*) FROM source_extents").fetchone() == (2,)
    assert con.execute("SELECT code, seq FROM findings").fetchall() == [
        ("log.future_stamp", 1)]
    assert load_latest_ts(con) is None


def test_a_line_stamped_ahead_in_a_later_piece_of_a_followed_file_is_reported(tmp_path):
    """The forger's line comes in a piece the watch stages (the file's first piece was in
    time): the poll's staged rows are judged in Python (auditor.ingest.staged_rows), and a
    stamp past the tolerance still reaches the statement that reports it."""
    log = Log()
    log.open("MB-02", "P1", "05:00")
    log.shoe_start("MB-02", "05:01", "S1")
    first, second = (json.loads(x) for x in log.lines(["table:MB-02"]))
    now = dt.datetime.now(dt.UTC)
    first["ts"] = (now - dt.timedelta(hours=1)).isoformat()
    second["ts"] = (now + dt.timedelta(minutes=7)).isoformat()
    con, spool, w = _watched(tmp_path)
    f = spool / "2026-11-28_MB-02.jsonl"
    f.write_text(json.dumps(first) + "\n")
    w.step()
    assert codes(con) == []
    with f.open("a") as fh:
        fh.write(json.dumps(second) + "\n")
    w.step()
    assert con.execute("SELECT count(*) FROM source_extents").fetchone() == (2,)
    assert con.execute("SELECT code, seq FROM findings").fetchall() == [
        ("log.future_stamp", 2)]


def test_within_the_clocks_tolerance_a_stamp_ahead_is_no_finding(tmp_path):
    """Stamped 4 minutes past the delivery: clocks apart, not a lie; 6 minutes: a finding,
    counting every event of the delivery so stamped."""
    now = dt.datetime.now(dt.UTC)
    path = tmp_path / "2026-11-28_MB-02.jsonl"
    log = Log()
    log.open("MB-02", "P1", "05:00")
    log.shoe_start("MB-02", "05:01", "S1")
    events = [json.loads(x) for x in log.lines()]
    events[0]["ts"] = (now - dt.timedelta(minutes=30)).isoformat()
    events[1]["ts"] = (now + dt.timedelta(minutes=4)).isoformat()
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    con = db.connect(tmp_path / "a.duckdb")
    result = ingest(con, [path], runs.start(con, "ingest", {}))
    assert result.errors == []
    assert codes(con) == []
    assert load_latest_ts(con) == dt.datetime.fromisoformat(events[1]["ts"])
    later = tmp_path / "2026-11-28_MB-03.jsonl"
    ahead = [dt.timedelta(minutes=6), dt.timedelta(days=400, minutes=1)]
    late = [dict(e, table="MB-03", ts=(now + d).isoformat())
            for e, d in zip(events, ahead, strict=True)]
    later.write_text("".join(json.dumps(e) + "\n" for e in late))
    ingest(con, [later], runs.start(con, "ingest", {}))
    found = con.execute("SELECT code, table_id, seq, message FROM current_findings").fetchall()
    assert [f[:3] for f in found] == [("log.future_stamp", "MB-03", 1)]
    assert "; 2 events of this delivery are stamped ahead of it, the furthest 400 days" in (
        found[0][3])
    assert load_latest_ts(con) == dt.datetime.fromisoformat(events[1]["ts"])


def test_in_batch_the_forged_stamp_closes_no_day(tmp_path):
    """`ingest` + `audit`: the forged close is reported, and MB-01, whose log stops in its
    round at 05:50, is not called unclosed for a day no honest line shows over; the honest
    close at 06:31 shows it over (log.table_unclosed), the tool's rule for closing a day."""
    mb01, honest, forged = night("05:50:00")
    files = []
    for name, lines in (("MB-01", mb01[:10]), ("MB-02", forged)):
        files.append(tmp_path / "forged" / f"2026-11-28_{name}.jsonl")
        files[-1].parent.mkdir(exist_ok=True)
        files[-1].write_text("\n".join(lines) + "\n")
    con = batch(files, tmp_path / "forged.duckdb", CONF)
    found = codes(con)
    assert ("log.future_stamp", "MB-02", None) in found
    assert ("log.table_unclosed", "MB-01", None) not in found
    assert con.execute("SELECT count(*) FROM closed_days").fetchone() == (0,)
    (files[1]).write_text("\n".join(honest) + "\n")
    con = batch(files, tmp_path / "honest.duckdb", CONF)
    found = codes(con)
    assert ("log.table_unclosed", "MB-01", None) in found
    assert not any(code == "log.future_stamp" for code, *_ in found)


def test_a_stamp_ahead_in_the_middle_of_a_night_moves_no_round_out_of_it(tmp_path):
    """The sample's MB-01 with one no_more_bets at 23:30 stamped 2126-11-28: every round
    finding of the table keeps its time, so the night's report still holds it. Taken as the
    stream's latest time, the stamp made every later event run back from it: the checks
    took them at 2126-11-28 (their rounds counted in a shift a century away, out of the
    night's report) and one log.time_reversed covered them all."""
    honest = (SAMPLE / "2026-11-28_MB-01.jsonl").read_text().splitlines()
    at = next(i for i, x in enumerate(honest) if '"no_more_bets"' in x
              and json.loads(x)["ts"] >= "2026-11-28T23:30")
    forged = list(honest)
    event = json.loads(forged[at])
    forged[at] = json.dumps(dict(event, ts=event["ts"].replace("2026-", "2126-", 1)),
                            separators=(",", ":"))
    found = {}
    for name, lines in (("honest", honest), ("forged", forged)):
        path = tmp_path / name / "2026-11-28_MB-01.jsonl"
        path.parent.mkdir()
        path.write_text("\n".join(lines) + "\n")
        con = batch([path], tmp_path / f"{name}.duckdb", CONF)
        found[name] = con.execute(
            "SELECT code, shoe, round, ts FROM current_findings "
            "WHERE code NOT LIKE 'log.%' ORDER BY ALL").fetchall()
        logs = con.execute("SELECT code, seq FROM current_findings "
                           "WHERE code LIKE 'log.%' ORDER BY ALL").fetchall()
        if name == "forged":
            assert logs == [("log.future_stamp", event["seq"])]
    rounds = [f for f in found["honest"] if f[2] is not None]
    # a finding of a round dealt after 23:30 EST (04:30 UTC), the forged line's place
    assert [f[:3] for f in rounds if f[3] > dt.datetime(2026, 11, 29, 4, 30, tzinfo=dt.UTC)] == [
        ("vig.wrong_amount", "MB-01-1128-03", 47)]
    assert found["forged"] == found["honest"]


def test_a_log_that_stops_on_a_stamp_ahead_stops_where_its_stamps_were_in_time(tmp_path):
    """MB-01's log stops at 01:00 without its close, its last line stamped a century ahead: the
    table is unclosed for the night (closed on record), as when that line is stamped in
    time; taken as written, the log went on for a century and no day closed over it."""
    from auditor.audit.run import audit
    from auditor.store import closed_days

    honest = (SAMPLE / "2026-11-28_MB-01.jsonl").read_text().splitlines()
    cut = next(i for i, x in enumerate(honest) if json.loads(x)["ts"] >= "2026-11-29T01:00")
    last = json.loads(honest[cut])
    forged = [*honest[:cut], json.dumps(dict(last, ts=last["ts"].replace("2026-", "2126-", 1)))]
    found = {}
    for name, lines in (("honest", honest[:cut + 1]), ("forged", forged)):
        path = tmp_path / name / "2026-11-28_MB-01.jsonl"
        path.parent.mkdir()
        path.write_text("\n".join(lines) + "\n")
        con = db.connect(tmp_path / f"{name}.duckdb")
        ingest(con, [path], runs.start(con, "ingest", {}))
        closed_days.close(con, [dt.date(2026, 11, 28)], runs.start(con, "close-day", {}),
                          "close-day")
        audit(con, runs.start(con, "audit", {}), CONF)
        found[name] = con.execute("SELECT code, shoe, round FROM current_findings "
                                  "WHERE code <> 'log.future_stamp' ORDER BY ALL").fetchall()
        assert ("log.future_stamp" in {c for c, in con.execute(
            "SELECT code FROM current_findings").fetchall()}) == (name == "forged")
    assert ("log.table_unclosed", None, None) in found["honest"]
    assert found["forged"] == found["honest"]


def test_a_round_stamped_centuries_ahead_adds_its_own_days_shifts_not_every_day_between(
    tmp_path,
):
    """The dealers' and side bets' passes chart each shift of a day with rounds (its last
    round, 06:00:20, moved to the year 9000, is in the gaming day 9000-11-29). Every day
    from the first round to the last made one round_start stamped in the year 9000 cost
    2.6 million days of shifts (and the test of a century ahead 25 s of audit, not 2)."""
    from auditor.audit.dealers import shift_windows

    lines = (SAMPLE / "2026-11-28_MB-01.jsonl").read_text().splitlines()
    i = max(i for i, x in enumerate(lines) if json.loads(x)["type"] == "round_start")
    last = json.loads(lines[i])
    lines[i] = json.dumps(dict(last, ts=last["ts"].replace("2026-", "9000-", 1)))
    path = tmp_path / "2026-11-28_MB-01.jsonl"
    path.write_text("\n".join(lines) + "\n")
    con = db.connect(tmp_path / "a.duckdb")
    ingest(con, [path], runs.start(con, "ingest", {}))
    windows = shift_windows(con, CONF, CONF.zone())
    assert sorted({w.label.split("/")[0] for w in windows}) == ["2026-11-28", "9000-11-29"]
    assert [w.label for w in windows[:3]] == [
        "2026-11-28/day", "2026-11-28/swing", "2026-11-28/grave"]
    assert windows[0].start == dt.datetime(2026, 11, 28, 11, 0, tzinfo=dt.UTC)  # 06:00 EST


def test_the_board_opens_on_the_night_not_on_the_forged_day(tmp_path):
    """The floor, the desk and the reports page open on the gaming day of the latest round
    dealt; with MB-02's table_close stamped 2126-01-01 among the night's logs they opened on
    2125-12-31, an empty floor."""
    from auditor.board.views import floor_day

    mb01, _, forged = night()
    con = db.connect(tmp_path / "a.duckdb")
    paths = []
    for name, lines in (("2026-11-28_MB-01.jsonl", mb01), ("2026-11-28_MB-02.jsonl", forged)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
        paths.append(tmp_path / name)
    ingest(con, paths, runs.start(con, "ingest", {}))
    assert floor_day(con, CONF, CONF.zone()) == dt.date(2026, 11, 28)


def test_ingest_says_which_lines_are_stamped_ahead(bacc_audit, tmp_path):
    """Loaded, and said beside the quarantined lines (stderr, and `stamped_ahead` in --json);
    the exit is 1, a finding, as for a quarantined line."""
    _, _, forged = night()
    path = tmp_path / "2026-11-28_MB-02.jsonl"
    path.write_text("\n".join(forged) + "\n")
    r = bacc_audit("ingest", str(path), "--db", str(tmp_path / "a.duckdb"))
    assert r.code == 1, r.err
    said = [x for x in r.err.splitlines() if x.startswith("stamped ahead: ")]
    assert len(said) == 1
    assert re.fullmatch(
        rf"stamped ahead: {re.escape(str(path))}:2: table MB-02 seq 2 \(table_close\) stamped "
        rf"{re.escape(FORGED)}, \d+ days?( \d+ hours?)? after its delivery \(loaded; reported as "
        r"log.future_stamp\)", said[0]), said[0]
    assert "2 events, 0 quarantined" in r.out
    again = tmp_path / "b" / path.name
    again.parent.mkdir()
    again.write_text(path.read_text())
    r = bacc_audit("ingest", str(again), "--db", str(tmp_path / "b.duckdb"), "--json")
    [f] = json.loads(r.out)["files"]
    assert [x.split(": ", 1)[0] for x in f["stamped_ahead"]] == [f"{again}:2"]
    assert (r.code, json.loads(r.out)["exit_code"]) == (1, 1)
    r = bacc_audit("ingest", str(again), "--db", str(tmp_path / "b.duckdb"))
    assert (r.code, "stamped ahead" in r.err) == (0, False)  # already ingested: nothing new


def test_a_stamp_ahead_but_before_the_delivery_is_reported_in_the_night_it_breaks(tmp_path):
    """A no_more_bets at 23:30 stamped three days later, 2026-12-01: before any delivery of
    the night's log, so no log.future_stamp, and the events after it run back from it
    (log.time_reversed; the checks hold them at its time). The finding is dated by the
    stream's last time before the forged one, 23:30 on the night, so the night's grave
    shift shows it: dated at the forged time it went to a report three days on, and the
    night's showed nothing of what moved."""
    honest = (SAMPLE / "2026-11-28_MB-01.jsonl").read_text().splitlines()
    at = next(i for i, x in enumerate(honest) if '"no_more_bets"' in x
              and json.loads(x)["ts"] >= "2026-11-28T23:30")
    event, before = json.loads(honest[at]), json.loads(honest[at - 1])
    forged = list(honest)
    forged[at] = json.dumps(dict(event, ts="2026-12-01T23:30:00.000-05:00"))
    path = tmp_path / "logs" / "2026-11-28_MB-01.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(forged) + "\n")
    con = batch([path], tmp_path / "a.duckdb", CONF)
    [(seq, ts, message)] = con.execute(
        "SELECT seq, ts, message FROM current_findings WHERE code = 'log.time_reversed'"
    ).fetchall()
    assert seq == event["seq"] + 1
    assert ts == dt.datetime.fromisoformat(before["ts"])
    assert "2026-12-01 23:30:00" in message
    assert con.execute("SELECT count(*) FROM current_findings "
                       "WHERE code = 'log.future_stamp'").fetchone() == (0,)
