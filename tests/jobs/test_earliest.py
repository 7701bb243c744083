"""auditor.jobs.earliest: from when `watch` reads the rounds a poll judges. Checked against
the plain answer (the earliest stamp of every event of the round loaded since it was first
seen) over random polls, and on the sample night watched poll by poll. And where a poll
looks up whether its rounds were judged before (auditor.audit.rounds.JudgedBefore)."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

from helpers.growing import rounds_touched

from auditor.audit.rounds import JudgedBefore
from auditor.ingest.follow import Follower
from auditor.jobs.earliest import EarliestSeen
from auditor.simulate.feed import schedule
from auditor.store import db, runs

T0 = dt.datetime(2026, 11, 29, 3, 0, tzinfo=dt.UTC)
SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def test_a_round_is_read_from_its_earliest_stamp_loaded() -> None:
    e = EarliestSeen()
    a, b = ("MB-01", "S1", 1), ("MB-02", "S1", 1)
    e.loaded({a: at(10)})
    e.loaded({a: at(-20), b: at(11)})  # a card of `a` stamped 30 minutes back
    e.loaded({b: at(12)})
    assert e.since([a]) == at(-20)
    assert e.since([b]) == at(11)
    assert e.since([a, b]) == at(-20)
    e.judged([a])
    e.loaded({a: at(30)})  # late: what it had before is not in its earliest any more
    assert e.since([a]) is None
    c = ("MB-01", "S1", 2)
    e.loaded({c: at(14)})
    e.loaded({c: None})  # an event without a stamp: no bound for it
    e.loaded({c: at(1)})
    assert e.since([c]) is None
    assert e.since([("PB-01", "S9", 4)]) is None  # never seen begin (before the watch)
    assert e.since([b, ("PB-01", "S9", 4)]) is None
    assert e.since([]) is None


def test_random_polls_match_the_plain_answer() -> None:
    rng = random.Random(48)
    e = EarliestSeen()
    seen: dict[tuple[str, str, int], list[dt.datetime | None]] = {}
    judged: set[tuple[str, str, int]] = set()
    keys = [("T", "S", i) for i in range(40)]
    for poll in range(1, 600):
        touched = {k: None if rng.random() < 0.01 else at(poll * 0.2 - rng.expovariate(0.5))
                   for k in rng.sample(keys, rng.randrange(0, 4))}
        e.loaded(touched)
        for k, ts in touched.items():
            if k not in judged:
                seen.setdefault(k, []).append(ts)
        asked = rng.sample(keys, rng.randrange(1, 4))
        stamps = [s for k in asked for s in seen.get(k, [None])]
        plain = None if None in stamps else min(s for s in stamps if s is not None)
        assert e.since(asked) == plain, poll
        if rng.random() < 0.3:
            done = rng.sample(asked, 1)
            e.judged(done)
            judged.update(done)
            for k in done:
                seen.pop(k, None)


def test_a_poll_tells_each_round_its_earliest_stamp(tmp_path: Path) -> None:
    """Poll.rounds_touched, as `watch` gets it: MB-01's lines written in two parts (a file's
    first piece, then a piece it grew by), the second cutting a round in two, and one line
    of it stamped 30 minutes back; each round's earliest stamp is that of its earliest line
    in the part."""
    [log] = sorted(SAMPLE.glob("2026-11-28_MB-01.jsonl"))
    data = [x.data for x in schedule([log], 1.0)]
    back = json.loads(data[462])
    assert back["type"] == "card"
    back["ts"] = (dt.datetime.fromisoformat(back["ts"]) - dt.timedelta(minutes=30)).isoformat()
    data[462] = (json.dumps(back) + "\n").encode()
    con = db.connect(tmp_path / "live.duckdb")
    follower = Follower(runs.start(con, "watch", {}))
    spool = tmp_path / "spool"
    spool.mkdir()
    target = spool / log.name
    target.write_bytes(b"")
    follower.follow(target)
    for part in (data[:400], data[400:550]):
        with target.open("ab") as fh:
            fh.write(b"".join(part))
        poll = follower.poll(con)
        want = rounds_touched(part)
        assert poll.rounds_touched == want
        assert len(want) > 5
    assert want[(back["table"], back["shoe"], back["round"])] == dt.datetime.fromisoformat(
        back["ts"])


def test_a_poll_looks_up_its_own_runs_audits_unless_a_shoe_was_judged_before(tmp_path):
    """JudgedBefore: a round of a shoe no earlier run judged a round of is looked up among
    the watch's own run's audits only (the table's tail); one of a shoe judged before the
    watch began, among all of them."""
    con = db.connect(tmp_path / "a.duckdb")
    con.execute(
        "INSERT INTO round_audits VALUES ('MB-01', 'S1', 1, 12, 12, 0, 3, now()), "
        "('MB-01', 'S1', 2, 12, 24, 0, 4, now()), ('MB-02', 'S9', 7, 12, 90, 1, 9, now())")
    judged = JudgedBefore(con, 9)
    assert judged.audits_sql([("MB-01", "S2", 1), ("MB-02", "S1", 2)]) == (
        "(SELECT * FROM round_audits WHERE run_id >= 9)")
    assert judged.audits_sql([("MB-01", "S2", 1), ("MB-01", "S1", 3)]) == "round_audits"
    # MB-02's S9 was judged by run 9 itself: its own rows are read anyway
    assert judged.audits_sql([("MB-02", "S9", 8)]) == (
        "(SELECT * FROM round_audits WHERE run_id >= 9)")
    assert con.execute(
        f"SELECT table_id, round FROM {judged.audits_sql([])}").fetchall() == [("MB-02", 7)]
    assert JudgedBefore(con, 3).audits_sql([("MB-01", "S1", 1)]) == (
        "(SELECT * FROM round_audits WHERE run_id >= 3)")
