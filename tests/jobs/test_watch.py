"""`watch`: the audit as the night goes (issue 14). Logs are written into a spool line by line,
as table systems write them (auditor.simulate.feed); the watched database must hold what a batch
`ingest` + `audit` of the finished files holds, finding for finding, and each round's findings
must be there as soon as the round's `round_end` is in."""

from __future__ import annotations

import datetime as dt
import gzip
import itertools
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from helpers.growing import table_night
from helpers.recall import AuditedNight, audited_night
from helpers.rules import panda8_rules
from helpers.tablelog import DECK, Log, deal_rounds
from helpers.watched import batch as _batch
from helpers.watched import findings_of as _findings
from helpers.watched import pauses_cut
from helpers.watched import sources_free as _sources_free

from auditor import config
from auditor.audit import chemin_order
from auditor.ingest import follow
from auditor.jobs.watch import Watch, WatchOptions
from auditor.rules.codes import REGISTRY
from auditor.simulate.feed import Feed, Line, schedule
from auditor.simulate.kinds import LIE_KINDS
from auditor.simulate.layout import GAMES
from auditor.store import closed_days, db, runs
from auditor.store.findings import short_id

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
BIN = Path(sys.executable).parent / "bacc-audit"
CONF = config.load(SAMPLE / "property.toml")


# Their message and evidence say when the round or the change was judged and when the late
# events were delivered: a watched database's own times, not a batch's.
DELIVERY_CODES = ("log.late_delivery", "notice.backdated", "log.future_stamp")


def _delivery_free(found: dict[str, tuple]) -> dict[str, tuple]:
    """The same, with what a delivery time shows (DELIVERY_CODES' sentences and evidence)
    left out: code, severity, rule, table, shoe, round and seq stay."""
    return {fp: row[:7] if row[0] in DELIVERY_CODES else row for fp, row in found.items()}


def _watch_fed(files: list[Path], spool: Path, path: Path, conf, speed: float, split=0.0,
               later: list[Path] | None = None, pause: float | None = None):
    """Feed `files` into `spool` at `speed` while a Watch follows it; returns the database
    and the watch once the feed is written and the watch has stopped. `later` files (a lying
    night's) are put in the spool after that, under their .jsonl names, and the same watch
    runs again until it has read and judged them. With `pause`, no pause of the feed lasts
    longer than that many seconds (helpers/watched.pauses_cut)."""
    con = db.connect(path)
    run_id = runs.start(con, "watch", {})
    spool.mkdir()
    w = Watch(con, spool, conf, run_id, WatchOptions(poll=0.02, rescan=0.05))
    stop = threading.Event()
    resent = [f for f in files if ".resent." in f.name]  # delivered after the night
    lines = schedule(files, speed, later=resent)
    lines = lines if pause is None else pauses_cut(lines, pause)
    feed = Feed(lines, spool, split=split).start()
    t = threading.Thread(target=w.run, args=(stop,))
    t.start()
    try:
        assert feed.join(120), "the feed did not finish"
    finally:
        stop.set()
        t.join(120)
    assert not t.is_alive()
    if later:
        for f in later:
            (spool / f.name.removesuffix(".later")).write_bytes(f.read_bytes())
        again = threading.Event()
        again.set()  # drains the spool, then sweeps
        w.run(again)
    return con, w


def _plain_copies(tmp_path: Path) -> list[Path]:
    """The sample night's logs as the table systems write them: plain, not yet gzipped."""
    out = tmp_path / "logs"
    out.mkdir()
    for src in sorted(SAMPLE.glob("2026-11-28_*.jsonl*")):
        data = gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes()
        (out / src.name.removesuffix(".gz")).write_bytes(data)
    return sorted(out.iterdir())


@pytest.mark.realtime
def test_sample_night_watched_as_written_gives_the_batch_findings(tmp_path, bacc_audit):
    files = _plain_copies(tmp_path)
    batch = _batch(files, tmp_path / "batch.duckdb", CONF)
    live, w = _watch_fed(files, tmp_path / "spool", tmp_path / "live.duckdb", CONF,
                         speed=6000.0, split=0.001)
    expected = _sources_free(_findings(batch))
    got = _sources_free(_findings(live))
    assert got == expected
    assert len(got) == 22  # the 12 planted round deviations, and the table and log ones
    # Nothing ingested twice, nothing lost: the same events.
    count = "SELECT count(*), count(DISTINCT (table_id, seq)) FROM events"
    assert live.execute(count).fetchone() == batch.execute(count).fetchone()
    # Most rounds were audited as their round_end came in, not by a sweep afterwards.
    assert w.stats.rounds_live > 2500
    rounds = "SELECT count(DISTINCT (table_id, shoe, round)) FROM round_audits"
    assert live.execute(rounds).fetchone() == batch.execute(rounds).fetchone()
    # And the shift's report is the batch one, but for its time of generation and its
    # ledger (each database's own: docs/ledger.md): the same files, hashes and counts (a
    # file read in pieces is listed whole), the same findings.
    live.close()
    batch.close()
    pages = {}
    for name in ("batch", "live"):
        out = tmp_path / f"{name}.html"
        r = bacc_audit("report", "--db", tmp_path / f"{name}.duckdb", "--config",
                       SAMPLE / "property.toml", "--shift", "2026-11-28/grave", "--out", out)
        assert r.code == 0, r.err
        text = out.read_text().replace(str(tmp_path / "logs") + "/", "")
        text = text.replace(str(tmp_path / "spool") + "/", "")
        pages[name] = [
            line for line in text.splitlines()
            if "dcterms." not in line and "<td>Generated</td>" not in line
            and "<td>Ledger" not in line
        ]
    assert pages["live"] == pages["batch"]
    assert any("draw.banker_missed" in line for line in pages["live"])


# MB-01's planted round deviations (sample_logs/README.md): (shoe, round).
MB01_PLANTED = {"draw.banker_missed": ("MB-01-1128-01", 72),
                "vig.wrong_amount": ("MB-01-1128-03", 47)}


@pytest.mark.slow
def test_a_rounds_findings_are_in_as_soon_as_its_round_end_is(tmp_path):
    """Step by step: write lines up to a round's round_end, one poll, and its finding is
    stored; its round's later events are not needed. The steps are the ends of the rounds
    around each planted round (the three before it, itself, the one after): the rounds
    between go in one poll each stretch, as stepping through each of the night's 269 rounds
    only cost time (a poll each). Once both planted rounds are found, the rest of the night
    goes in one poll, and each planted finding is still the one of its round."""
    files = sorted(SAMPLE.glob("2026-11-28_MB-01.jsonl"))
    lines = schedule(files, 1.0)
    every = [i for i, line in enumerate(lines) if line.round_end is not None]
    planted = [k for k, i in enumerate(every)
               if lines[i].round_end[1:] in MB01_PLANTED.values()]  # type: ignore[index]
    assert len(planted) == 2
    ends = [every[k] for k in sorted({k + d for k in planted for d in range(-3, 2)})]
    con = db.connect(tmp_path / "live.duckdb")
    spool = tmp_path / "spool"
    spool.mkdir()
    told: list[str] = []
    w = Watch(con, spool, CONF, runs.start(con, "watch", {}), WatchOptions(rescan=0),
              say=told.append)
    target = spool / lines[0].name
    written = 0
    found_at: dict[str, int] = {}
    with target.open("ab") as fh:
        for end in ends:
            fh.write(b"".join(line.data for line in lines[written:end + 1]))
            fh.flush()
            written = end + 1
            w.step()
            for (code,) in con.execute("SELECT code FROM current_findings").fetchall():
                found_at.setdefault(code, end)
            if {"draw.banker_missed", "vig.wrong_amount"} <= set(found_at):
                break
        fh.write(b"".join(line.data for line in lines[written:]))
        fh.flush()
        w.step()
    # MB-01's planted round deviations (sample_logs/README.md), each found at its round's end.
    assert {"draw.banker_missed", "vig.wrong_amount"} <= set(found_at)
    for code in ("draw.banker_missed", "vig.wrong_amount"):
        [(rnd,)] = con.execute(
            "SELECT round FROM current_findings WHERE code = ?", [code]
        ).fetchall()
        key = lines[found_at[code]].round_end
        assert key is not None and key[1:] == MB01_PLANTED[code] and key[2] == rnd, code
    # Whoever reads watch's log learns what each finding is and where, not "1 new finding".
    ids = dict(con.execute(
        "SELECT code, fingerprint FROM current_findings WHERE code IN "
        "('draw.banker_missed', 'vig.wrong_amount')").fetchall())
    assert f"new finding {short_id(ids['draw.banker_missed'])}: critical draw.banker_missed at " \
        "table MB-01, shoe MB-01-1128-01 round 72" in told, told
    assert f"new finding {short_id(ids['vig.wrong_amount'])}: major vig.wrong_amount at table " \
        "MB-01, shoe MB-01-1128-03 round 47" in told, told
    assert not any(re.fullmatch(r"\d+ new findings?", line) for line in told)


# (seed, tables, hours, rate, games, patterns): simulated nights that between them plant every
# code (tests/simulate/test_simulate.py's recall runs; tests/replay/test_dealers.py's night with
# a dealer making ten times the errors, with a seat counting Dragon 7;
# tests/replay/test_integrity.py's night of planted shoe orders; a night of issue 28's shoe
# lies; the lying night, whose `later` files come after its audit).
EVERY_CODE_NIGHTS: list[tuple[int, int, float, float, tuple[str, ...], dict[str, bool]]] = [
    (4, 6, 1, 0.05, GAMES, {}),
    (5, 8, 3, 0.3, ("mini_baccarat", "punto_banco"), {}),
    (1, 16, 2.5, 0.3, GAMES, {}),
    (3, 8, 2, 0.03, GAMES, {"error_prone_dealer": True}),
    (4, 2, 2, 0.03, ("mini_baccarat",), {"counting_seat": True}),
    (2, 6, 3, 0.0, ("mini_baccarat", "punto_banco"), {"shoe_twice": True, "unshuffled": True}),
    (1, 2, 2, 0.0, ("mini_baccarat",), {"phantom_shoe": True, "shoe_reopened": True}),
    (1, 6, 2, 0.05, GAMES, {"lying": True}),
]


@pytest.mark.slow  # not realtime: what it checks does not depend on how fast the watch keeps up
@pytest.mark.parametrize("night", range(len(EVERY_CODE_NIGHTS)))
def test_every_code_is_found_live_as_in_batch(night, tmp_path, tmp_path_factory, monkeypatch):
    """The simulator's planted nights fed line by line at speed: each night's findings are
    the batch audit's, field for field (but the delivery times of DELIVERY_CODES), and the
    nights plant every code of the registry between them (the next test). The nights and
    their batch audits are made once a run (helpers/recall.py; the recall test audits the
    first three too); one test a night, so that two workers share them. However far the
    watch falls behind the feed on a loaded machine, it must end with the batch audit's
    findings: the pace decides only how the logs are cut into polls, so the test runs with
    the others, and the hours a night's table stays shut before it opens again in the
    morning are fed as a second's pause, not waited through (11-13 s in each night that has
    one)."""
    panda8_rules(tmp_path, monkeypatch)
    audited = _every_code_night(tmp_path_factory, night)
    files, later = list(audited.night.files), list(audited.night.later)
    batch = db.connect(audited.database(tmp_path / "batch.duckdb"))
    live, w = _watch_fed(files, tmp_path / "spool", tmp_path / "live.duckdb",
                         config.PropertyConfig(), speed=4000.0, later=later, pause=1.0)
    got = _delivery_free(_sources_free(_findings(live)))
    assert got == _delivery_free(_sources_free(_findings(batch)))
    batch.close()
    live.close()
    if EVERY_CODE_NIGHTS[night][5].get("lying"):
        _lies_found_live(got, audited.night.deviations, w)


def _lies_found_live(got: dict, deviations: list[dict], w: Watch) -> None:
    """A lying night's (simulate --lying, its later files after the night): every kind of
    lie planted and found live by the code that names it; what each lie hid stands at its
    severity; and its rounds were judged as their lines came in, not only by the sweep at
    the end."""
    lie_codes = set(LIE_KINDS.values())
    planted = {LIE_KINDS[d["kind"]] for d in deviations if d["kind"] in LIE_KINDS}
    assert planted == lie_codes
    assert {row[0] for row in got.values()} & lie_codes == planted
    hidden = {(d["code"], d["table"], d["shoe"], d["round"]): d["severity"]
              for d in deviations if "hidden_by" in d}
    assert hidden
    standing = {(row[0], row[3], row[4], row[5]): row[1] for row in got.values()}
    assert {k: standing.get(k) for k in hidden} == hidden
    assert w.stats.rounds_live > 100


@pytest.mark.slow
def test_chemin_de_fer_orders_kept_short_still_give_the_batch_findings(
    tmp_path, tmp_path_factory, monkeypatch
):
    """The watch keeps each chemin de fer table's order of rounds from poll to poll
    (auditor.audit.chemin_order), from a floor on; kept to a few rounds here, the polls are
    answered from what is kept, past its floor, and read again whole when a round may look
    back past it, and the night's findings are still the batch audit's."""
    panda8_rules(tmp_path, monkeypatch)
    monkeypatch.setattr(chemin_order, "TAIL_ROUNDS", 4)
    monkeypatch.setattr(chemin_order, "TRIM_AT", 2)
    served: Counter[str] = Counter()
    real = chemin_order.CheminTails.orders

    def orders(self, con, tables, todo):
        got = real(self, con, tables, todo)
        served["from a floor"] += len(got[2])
        served["read"] += len(tables) - len(got[2])
        return got

    monkeypatch.setattr(chemin_order.CheminTails, "orders", orders)
    audited = _every_code_night(tmp_path_factory, 2)
    batch = db.connect(audited.database(tmp_path / "batch.duckdb"))
    # written in 60 parts, a poll after each: the same polls however loaded the machine
    lines = schedule(list(audited.night.files), 1.0,
                     later=[f for f in audited.night.files if ".resent." in f.name])
    live = db.connect(tmp_path / "live.duckdb")
    spool = tmp_path / "spool"
    spool.mkdir()
    w = Watch(live, spool, config.PropertyConfig(), runs.start(live, "watch", {}),
              WatchOptions(rescan=0))
    cuts = [len(lines) * i // 60 for i in range(61)]
    for lo, hi in itertools.pairwise(cuts):
        _append(spool, lines[lo:hi])
        w.step()
    for f in audited.night.later:
        (spool / f.name.removesuffix(".later")).write_bytes(f.read_bytes())
    done = threading.Event()
    done.set()  # drains the spool, then sweeps
    w.run(done)
    assert _delivery_free(_sources_free(_findings(live))) == \
        _delivery_free(_sources_free(_findings(batch)))
    assert served["from a floor"] > 20 and served["read"] > 0, served
    batch.close()
    live.close()


@pytest.mark.slow
def test_the_every_code_nights_plant_every_code(tmp_path, tmp_path_factory, monkeypatch):
    """Between them, the batch audits of EVERY_CODE_NIGHTS find every code of the registry;
    the test above finds each night's live as in batch."""
    panda8_rules(tmp_path, monkeypatch)
    codes: set[str] = set()
    for i in range(len(EVERY_CODE_NIGHTS)):
        with duckdb.connect(str(_every_code_night(tmp_path_factory, i).db),
                            read_only=True) as batch:
            codes |= {c for c, in batch.execute(
                "SELECT DISTINCT code FROM current_findings").fetchall()}
    assert codes == set(REGISTRY)


def _every_code_night(factory: pytest.TempPathFactory, i: int) -> AuditedNight:
    seed, tables, hours, rate, games, patterns = EVERY_CODE_NIGHTS[i]
    return audited_night(factory, panda8=True, seed=seed, tables=tables, hours=hours,
                         rate=rate, games=games, **patterns)


@pytest.mark.slow  # two ingests and audits of a table's evening
def test_findings_are_worded_in_the_logs_zone_when_the_watch_began_before_any_log(tmp_path):
    """The every-code test's other failure: with no zone configured, times are shown in the
    offset the logs carry, and a watch whose first sweep ran over an empty database kept UTC
    for the rest of its run (its sentences then said 05:24 where batch says 00:24). Here the
    watch starts on an empty spool; a table's night (at -05:00) then comes in with a Banker
    card logged after its round ended: the finding reads as batch's, in the logs' zone."""
    conf = config.PropertyConfig()
    assert conf.time_zone is None
    lines = list(table_night()[:400])
    last = json.loads(lines[-1])
    late = {"v": 1, "ts": last["ts"], "type": "card", "table": last["table"],
            "seq": last["seq"] + 1, "shoe": json.loads(lines[40])["shoe"], "round": 2,
            "to": "banker", "card": "5c"}
    lines.append((json.dumps(late) + "\n").encode())
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "2026-11-28_MB-07.jsonl"
    log.write_bytes(b"".join(lines))
    batch = _batch([log], tmp_path / "batch.duckdb", conf)
    spool = tmp_path / "spool"
    spool.mkdir()
    con = db.connect(tmp_path / "live.duckdb")
    w = Watch(con, spool, conf, runs.start(con, "watch", {}),
              WatchOptions(rescan=0, sweep_every=1e9, idle_sweep=1e9))
    w.step()  # nothing yet: its first sweep runs over an empty database
    (spool / log.name).write_bytes(log.read_bytes())
    w.step()
    w.sweep()
    got = _sources_free(_findings(con))
    assert got == _sources_free(_findings(batch))
    [message] = [row[7] for row in got.values() if row[0] == "log.after_round_end"]
    stamped = dt.datetime.fromisoformat(late["ts"])
    assert f"stamped {stamped:%Y-%m-%d %H:%M:%S}" in message  # as logged, at -05:00


class _StatThen:
    """The `os` module as auditor.ingest.follow sees it, but that the first stat of a file
    named `name` runs `then` once the file was looked at: a writer writing between two
    reads of one poll."""

    def __init__(self, name: str, then) -> None:
        self.name, self.then = name, then

    def __getattr__(self, attr: str):
        return getattr(os, attr)

    def stat(self, path, *args, **kwargs):
        seen = os.stat(path, *args, **kwargs)
        if self.then is not None and Path(path).name == self.name:
            then, self.then = self.then, None
            then()
        return seen


@pytest.mark.slow  # an ingest that refuses a file costs a few seconds, batch and live
def test_a_resend_seen_with_its_streams_own_lines_is_refused_as_in_batch(tmp_path, monkeypatch):
    """The every-code test's failure (a critical deal.order live, not in batch): a table
    system resends the end of a round with a payout changed (log.altered), and the watch,
    lagging, meets that file in the poll that also reads the table's own lines of that
    round: both written before the poll, or written while the poll reads (after it read the
    table's file, before it read the resend; at either turn of the poll's rotation). Batch
    refuses the resend; live must too, not take the resend's seqs first and then refuse the
    table's own file from there on (its round judged from the resend's lines alone, the rest
    of the night lost)."""
    night = table_night()
    ends = [i for i, x in enumerate(night) if b'"round_end"' in x]
    lines, end = night[:ends[12] + 1], ends[6]
    resent = [json.loads(x) for x in lines[end - 3:end + 2]]
    [paid] = [e for e in resent if e["type"] in ("pay", "collect", "push")][:1]
    paid["amount"] = int(paid["amount"]) + 10
    logs = tmp_path / "logs"
    logs.mkdir()
    main, again = logs / "2026-11-28_MB-07.jsonl", logs / "2026-11-28_MB-07.resent.jsonl"
    main.write_bytes(b"".join(lines))
    again.write_text("".join(json.dumps(e) + "\n" for e in resent))
    batch = _batch([main, again], tmp_path / "batch.duckdb", CONF)
    expected = _sources_free(_findings(batch))
    assert [row[:3] for row in expected.values() if row[0] == "log.altered"] == [
        ("log.altered", "critical", "Event log v1; the audit database is evidence")]
    for case, turns in (("before the poll", 0), ("during the poll", 0), ("during the poll", 1)):
        spool = tmp_path / f"spool-{case}-{turns}".replace(" ", "-")
        spool.mkdir()
        con = db.connect(spool.with_suffix(".duckdb"))
        w = Watch(con, spool, CONF, runs.start(con, "watch", {}),
                  WatchOptions(rescan=0, sweep_every=1e9, idle_sweep=1e9))
        (spool / main.name).write_bytes(b"".join(lines[:end - 6]))  # round 7 under way
        (spool / again.name).touch()  # the writer has opened it: followed, nothing in it
        for _ in range(1 + turns):
            w.step()

        def write_rest(at: Path = spool) -> None:
            (at / main.name).write_bytes(b"".join(lines))
            (at / again.name).write_bytes(again.read_bytes())

        if case == "before the poll":
            write_rest()
        else:  # right after the poll looks at the table's own file
            monkeypatch.setattr(follow, "os", _StatThen(main.name, write_rest))
        w.step()  # both files in one poll
        monkeypatch.setattr(follow, "os", os)
        w.step()
        w.step()
        w.sweep()
        # The table's own lines all in, the resend refused whole: the batch's findings.
        for c in (con, batch):
            assert c.execute("SELECT count(*), max(seq) FROM events").fetchone() == (
                len(lines), len(lines)), (case, turns)
            assert c.execute("SELECT DISTINCT status FROM sources WHERE path LIKE '%.resent.%'"
                             ).fetchall() == [("refused_altered",)], (case, turns)
        assert _sources_free(_findings(con)) == expected, (case, turns)
        con.close()


def _append(spool: Path, lines: list[Line]) -> None:
    """The lines appended to their files in the spool, at once (no pace)."""
    for x in lines:
        with (spool / x.name).open("ab") as fh:
            fh.write(x.data)


def _stepped(tmp_path: Path) -> tuple[duckdb.DuckDBPyConnection, Path, Watch]:
    """A database, its spool and a Watch stepped by hand: no sweep but its first poll's."""
    con = db.connect(tmp_path / "live.duckdb")
    spool = tmp_path / "spool"
    spool.mkdir()
    return con, spool, Watch(con, spool, CONF, runs.start(con, "watch", {}),
                             WatchOptions(rescan=0, sweep_every=1e9, idle_sweep=1e9))


@pytest.mark.slow
def test_an_event_after_a_judged_rounds_end_is_judged_as_it_comes_in(tmp_path):
    """MB-01's round 72 is judged at its round_end (its missed Banker draw); a Banker card
    for it appended to the file later is judged by the next poll, with no sweep between:
    log.after_round_end, and the missed draw stands."""
    files = sorted(SAMPLE.glob("2026-11-28_MB-01.jsonl"))
    lines = schedule(files, 1.0)
    end = next(i for i, x in enumerate(lines) if x.round_end == ("MB-01", "MB-01-1128-01", 72))
    upto = end + 40
    con, spool, w = _stepped(tmp_path)
    target = spool / lines[0].name
    target.write_bytes(b"".join(x.data for x in lines[:upto]))
    w.step()  # its first poll sweeps once (what a restart left), then no more
    assert [r[0] for r in con.execute(
        "SELECT code FROM current_findings WHERE round = 72").fetchall()] == [
        "draw.banker_missed"]
    last = json.loads(lines[upto - 1].data)
    card = {"v": 1, "ts": last["ts"], "type": "card", "table": "MB-01", "seq": last["seq"] + 1,
            "shoe": "MB-01-1128-01", "round": 72, "to": "banker", "card": "5c"}
    sweeps = w.stats.sweeps
    with target.open("ab") as fh:
        fh.write((json.dumps(card) + "\n").encode())
    w.step()
    assert w.stats.sweeps == sweeps
    assert sorted(con.execute(
        "SELECT code, severity, seq FROM current_findings WHERE round = 72").fetchall()) == [
        ("draw.banker_missed", "critical", 1149), ("log.after_round_end", "major", card["seq"])]


@pytest.mark.slow
def test_a_round_judged_before_a_restart_and_completed_after_it_is_judged_again(tmp_path):
    """MB-01's round 72 is logged without its collect, pay and round_end, and judged once
    the table has gone on (the first poll's sweep): two wagers unsettled. That watch stops;
    another starts, and the three lines come. Its poll must find the round judged by the
    run before it (polls look among their own run's audits unless a round's shoe was judged
    before the watch began: auditor.audit.rounds.JudgedBefore), judge it again whole and
    withdraw what the missing lines made; a batch audit of the file finds the missed draw
    alone."""
    files = sorted(SAMPLE.glob("2026-11-28_MB-01.jsonl"))
    lines = schedule(files, 1.0)
    end = next(i for i, x in enumerate(lines) if x.round_end == ("MB-01", "MB-01-1128-01", 72))
    held = range(end - 2, end + 1)  # its collect, pay and round_end
    con, spool, w = _stepped(tmp_path)
    target = spool / lines[0].name
    target.write_bytes(b"".join(x.data for i, x in enumerate(lines[:end + 40]) if i not in held))
    w.step()
    at_72 = "SELECT code, severity, seq FROM current_findings WHERE round = 72 ORDER BY ALL"
    assert con.execute(at_72).fetchall() == [
        ("draw.banker_missed", "critical", 1149), ("settle.unsettled", "major", 1150),
        ("settle.unsettled", "major", 1150)]
    again = Watch(con, spool, CONF, runs.start(con, "watch", {}),
                  WatchOptions(rescan=0, sweep_every=1e9, idle_sweep=1e9))
    with target.open("ab") as fh:
        fh.write(b"".join(lines[i].data for i in held))
    again.step()
    assert again.stats.rounds_live == 1 and again.stats.findings_withdrawn == 2
    assert con.execute(at_72).fetchall() == [("draw.banker_missed", "critical", 1149)]
    assert con.execute(
        "SELECT events, last_seq FROM round_audits WHERE round = 72 ORDER BY audited_at"
    ).fetchall() == [(9, 1150), (12, 1153)]


@pytest.mark.slow
def test_the_contexts_a_watch_keeps_are_the_events_own_poll_after_poll(tmp_path):
    """live_contexts (table opens, procedure changes, closes) is made whole once, then given
    the new ones of each poll that loaded one: after every poll of the sample night written
    in twenty parts, it holds what CONTEXT_EVENTS_SQL reads from every event."""
    from auditor.audit.rounds import CONTEXT_EVENTS_SQL

    lines = schedule(_plain_copies(tmp_path), 1.0)
    con, spool, w = _stepped(tmp_path)
    sizes = []
    cuts = [len(lines) * i // 20 for i in range(21)]
    for lo, hi in itertools.pairwise(cuts):
        _append(spool, lines[lo:hi])
        w.step()
        if con.execute("SELECT 1 FROM duckdb_tables() WHERE table_name = 'live_contexts'"
                       ).fetchall():
            kept = sorted(con.execute("SELECT * FROM live_contexts").fetchall(), key=repr)
            assert kept == sorted(con.execute(CONTEXT_EVENTS_SQL).fetchall(), key=repr)
            sizes.append(len(kept))
    assert len(set(sizes)) >= 3 and sizes[-1] == 21, sizes  # given more twice or more


def _reader(db_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN), *args, "--db", str(db_path)], capture_output=True, text=True, timeout=120,
    )


def _said(proc: subprocess.Popen[str], start: str, seconds: float) -> str:
    """Wait until a line of `proc`'s stderr starts with `start` (read from the pipe itself,
    so nothing it said after is held back in a buffer); returns what it read."""
    assert proc.stderr is not None
    fd, seen = proc.stderr.fileno(), b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(fd, 4096) if ready else b""
        seen += chunk
        if any(x.startswith(start.encode()) for x in seen.splitlines()):
            return seen.decode()
        if ready and not chunk:  # it ended
            break
    pytest.fail(f"`watch` did not say {start!r} in {seconds:.0f} s (exit {proc.poll()}): "
                f"{seen.decode(errors='replace')}")


def _killed_and_started_again(tmp_path: Path, started: list[subprocess.Popen[str]]):
    """The sample night written into a spool while `bacc-audit watch` follows it, SIGKILLed
    halfway and started again, then stopped with SIGTERM: its JSON summary, the batch
    database of the same files, and the watched database."""
    files = _plain_copies(tmp_path)
    spool, db_path = tmp_path / "spool", tmp_path / "live.duckdb"
    spool.mkdir()
    lines = schedule(files, 4000.0)
    half = len(lines) // 2

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(BIN), "watch", "--spool", str(spool), "--db", str(db_path), "--config",
             str(SAMPLE / "property.toml"), "--poll", "0.02", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    first = start()
    started.append(first)
    # Its run is recorded before it says it follows the spool: only then does the feed start,
    # so a machine slow to start a process (a loaded CI) still kills a watch that ran.
    _said(first, "watch: following ", 120)
    feed = Feed(lines[:half], spool).start()
    time.sleep(2.0)  # killed while lines are still coming in and being loaded
    assert not feed.done, "the first half was written before the kill: nothing was interrupted"
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    assert feed.join(60)
    second = start()
    started.append(second)
    Feed([Line(0.0, x.name, x.data, x.round_end) for x in lines[half:]], spool).run()
    # A reader through the watcher: wait until the night's 22 findings are in.
    deadline = time.monotonic() + 120
    while True:
        r = _reader(db_path, "findings", "--format", "jsonl", "--config",
                    str(SAMPLE / "property.toml"))
        assert r.returncode == 0, r.stderr
        if len(r.stdout.splitlines()) >= 22 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    runs_out = _reader(db_path, "runs", "--command", "watch")
    assert runs_out.returncode == 0, runs_out.stderr
    assert "interrupted" in runs_out.stdout and "running" in runs_out.stdout
    second.send_signal(signal.SIGTERM)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    summary = json.loads(out)
    batch = _batch(files, tmp_path / "batch.duckdb", CONF)
    live = duckdb.connect(str(db_path), read_only=True)
    return summary, batch, live


@pytest.mark.realtime
@pytest.mark.slow
def test_watch_killed_and_started_again_loses_and_repeats_nothing(tmp_path):
    """`bacc-audit watch` as a process: SIGKILLed halfway through the night, started again,
    it ends with the batch audit's findings and events, each once; readers answer while it
    runs; SIGTERM stops it cleanly."""
    started: list[subprocess.Popen[str]] = []
    try:
        summary, batch, live = _killed_and_started_again(tmp_path, started)
    finally:
        for p in started:
            if p.poll() is None:
                p.kill()
                p.wait(30)
    assert summary["findings_new"] >= 1 and summary["events"] > 0
    assert _sources_free(_findings(live)) == _sources_free(_findings(batch))
    count = "SELECT count(*), count(DISTINCT (table_id, seq)) FROM events"
    assert live.execute(count).fetchone() == batch.execute(count).fetchone()
    dup = "SELECT count(*) FROM (SELECT fingerprint FROM findings GROUP BY ALL HAVING count(*) > 1)"
    assert live.execute(dup).fetchone() == (0,)


@pytest.mark.slow
def test_watch_started_while_a_reader_has_the_database_waits_for_it(tmp_path):
    """A report or export that opened the database while no writer had it holds it for a
    while: `watch`, a service, waits for it and then runs, rather than fail at start."""
    db_path, spool = tmp_path / "live.duckdb", tmp_path / "spool"
    spool.mkdir()
    db.connect(db_path).close()
    reader = duckdb.connect(str(db_path), read_only=True)
    watch = subprocess.Popen(
        [str(BIN), "watch", "--spool", str(spool), "--db", str(db_path), "--poll", "0.05"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        # It says so once it has met the reader (however long a loaded machine takes to
        # start it), and the rest of its stderr follows what was read here.
        said = _said(watch, "watch: waiting for the database:", 120)
        assert watch.poll() is None  # still there, waiting
        reader.close()
        for f in [f for f in _plain_copies(tmp_path) if "_MB-01." in f.name]:
            (spool / f.name).write_bytes(f.read_bytes())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r = _reader(db_path, "findings", "--format", "jsonl")
            if r.returncode == 0 and "draw.banker_missed" in r.stdout:
                break
            time.sleep(0.5)
        watch.send_signal(signal.SIGTERM)
        _, err = watch.communicate(timeout=60)
        err = said + err
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait(30)
    assert watch.returncode == 0, err
    assert "watch: waiting for the database:" in err and "database busy" in err
    assert "draw.banker_missed" in r.stdout  # MB-01's planted round, audited live


def test_watch_closes_a_gaming_day_once_the_next_has_begun_plus_its_grace(tmp_path):
    """Issue 28: a table whose log stops at a round boundary is reported once its gaming day
    is closed. `watch` closes the day when the logs reach its end plus CLOSE_GRACE (06:30 for
    a 06:00 gaming day), records so (closed_days, how 'watch'), and the finding follows."""
    night = Log()
    night.open("MB-01", "P1", "22:00")
    night.shoe_start("MB-01", "22:01", "S1")
    night.burn("MB-01", "S1", ["Ac", "Kd"])
    for rnd, cards in enumerate(deal_rounds(DECK, 2, 2), start=1):
        night.round("MB-01", "S1", rnd, cards)  # and its log stops: no shoe_end, no close
    night.open("MB-02", "P1", "22:00")
    night.close("MB-02", "05:30")
    con = db.connect(tmp_path / "live.duckdb")
    spool = tmp_path / "spool"
    spool.mkdir()
    w = Watch(con, spool, config.PropertyConfig(), runs.start(con, "watch", {}),
              WatchOptions(rescan=0))
    night.write(spool / "night.jsonl")
    unclosed = "SELECT code, table_id FROM current_findings WHERE code LIKE 'log.%'"

    def morning(table: str, when: str) -> None:
        log = Log()
        log.open(table, "P1", when)
        log.write(spool / f"{table}.jsonl")
        w.step()
        w.sweep()

    w.step()
    w.sweep()
    assert con.execute(unclosed).fetchall() == []
    morning("MB-03", "06:20")  # the next day has begun, within the grace
    assert con.execute(unclosed).fetchall() == []
    assert con.execute("SELECT count(*) FROM closed_days").fetchone() == (0,)
    morning("MB-04", "06:30")  # 06:00 plus the grace: the day is closed
    assert con.execute(unclosed).fetchall() == [("log.table_unclosed", "MB-01")]
    assert con.execute(
        "SELECT gaming_day::VARCHAR, how FROM closed_days").fetchall() == [("2026-11-28", "watch")]


@pytest.mark.slow
def test_a_round_dealt_across_the_gaming_days_start_is_not_judged_before_its_end(tmp_path):
    """MB-01 deals a round from 05:59:55 to 06:00:06; MB-02's first event of the new gaming
    day (06:00:05) is read while MB-01's log has reached only the round's cards. A sweep
    then must not judge MB-01's round (it judged it final because another table had begun
    the next day: a false settle.unsettled, recorded and withdrawn later, and evidence cut
    short on what stood). It is judged with its round_end; and a table whose log stops in a
    round has it judged once the day is closed (06:30), as batch does."""
    conf = config.load(SAMPLE / "property.toml")  # gaming day from 06:00, New York
    natural = [("player", "2c"), ("banker", "9d"), ("player", "3c"), ("banker", "Kd")]
    log = Log()
    log.open("MB-01", "P1", "05:40")
    log.shoe_start("MB-01", "05:41", "S1")
    log.burn("MB-01", "S1", ["Ac", "Kd"])
    banker = {"kind": "result", "player": 5, "banker": 9, "winner": "banker"}
    log.round("MB-01", "S1", 1, natural, [("pay", 3), ("vig", 3)], when="05:59:55",
              after_cards=[("announce", banker)])
    dealt = log.lines(["table:MB-01"])
    assert json.loads(dealt[9])["type"] == "card" and json.loads(dealt[13])["type"] == (
        "round_end")
    log.close("MB-01", "06:05")
    log.open("MB-02", "P1", "06:00:05")
    log.close("MB-02", "06:31")
    whole, mb02 = log.lines(["table:MB-01"]), log.lines(["table:MB-02"])
    mb01_round = ("SELECT code FROM current_findings WHERE table_id = 'MB-01' "
                  "AND round IS NOT NULL ORDER BY code")

    def watched(name: str, mb01: list[str], mb02_upto: int):
        spool = tmp_path / name
        spool.mkdir()
        con = db.connect(tmp_path / f"{name}.duckdb")
        w = Watch(con, spool, conf, runs.start(con, "watch", {}),
                  WatchOptions(rescan=0, sweep_every=1e9, idle_sweep=1e9))
        (spool / "2026-11-28_MB-01.jsonl").write_text("\n".join(mb01) + "\n")
        (spool / "2026-11-28_MB-02.jsonl").write_text("\n".join(mb02[:mb02_upto]) + "\n")
        w.step()
        w.sweep()
        return spool, con, w

    def same_as_batch(spool: Path, con) -> None:
        batch = _batch(sorted(spool.glob("*.jsonl")), tmp_path / f"{spool.name}-b.duckdb",
                       conf)
        assert _sources_free(_findings(con)) == _sources_free(_findings(batch))

    # MB-02 at 06:00:05, MB-01 in its round's cards: not judged yet.
    spool, con, w = watched("across", dealt[:10], 1)
    assert con.execute(
        "SELECT count(*) FROM round_audits WHERE table_id = 'MB-01'").fetchone() == (0,)
    assert con.execute(mb01_round).fetchall() == []
    (spool / "2026-11-28_MB-01.jsonl").write_text("\n".join(whole) + "\n")
    w.step()
    w.sweep()
    assert con.execute(
        "SELECT events, last_seq FROM round_audits WHERE table_id = 'MB-01'").fetchall() == [
        (11, 14)]
    assert con.execute(mb01_round).fetchall() == []  # a clean round, never judged unended
    assert con.execute("SELECT count(*) FROM findings WHERE table_id = 'MB-01' "
                       "AND code = 'settle.unsettled'").fetchone() == (0,)
    same_as_batch(spool, con)
    # MB-01's log stops in the round; MB-02 logs on past 06:30: the day is over.
    spool, con, w = watched("stopped", dealt[:10], 2)
    assert con.execute(
        "SELECT events, last_seq FROM round_audits WHERE table_id = 'MB-01'").fetchall() == [
        (7, 10)]
    assert ("settle.unsettled",) in con.execute(mb01_round).fetchall()
    same_as_batch(spool, con)
    # Or the day closed on record (`close-day`) before the logs reach 06:30.
    spool, con, w = watched("closed", dealt[:10], 1)
    assert con.execute("SELECT count(*) FROM round_audits").fetchone() == (0,)
    closed_days.close(con, [dt.date(2026, 11, 28)], runs.start(con, "close-day", {}),
                      "close-day")
    w.sweep()
    assert con.execute(
        "SELECT events, last_seq FROM round_audits WHERE table_id = 'MB-01'").fetchall() == [
        (7, 10)]


@pytest.mark.slow
def test_each_poll_that_wrote_is_sealed_and_the_run_stays_verifiable(tmp_path):
    """`watch` seals after each poll that wrote something (`seal_every` 0: every such poll),
    its pieces and findings while the run still goes; a poll that wrote nothing adds no
    head."""
    from auditor.jobs import verify as verifying
    from auditor.store import ledger

    files = sorted(SAMPLE.glob("2026-11-28_MB-01.jsonl"))
    lines = schedule(files, 1.0)
    con = db.connect(tmp_path / "live.duckdb")
    spool = tmp_path / "spool"
    spool.mkdir()
    with runs.recorded(con, "watch", {}) as run:
        w = Watch(con, spool, CONF, run.id, WatchOptions(rescan=0, seal_every=0))
        target = spool / lines[0].name
        half = len(lines) // 2
        with target.open("ab") as fh:
            for part in (lines[:half], lines[half:]):
                fh.write(b"".join(line.data for line in part))
                fh.flush()
                w.step()
                unsealed = con.execute(
                    "SELECT count(*) FROM source_extents e WHERE NOT EXISTS (SELECT 1 FROM "
                    "ledger l WHERE l.kind = 'piece' AND l.record_key = e.source_id || ':' || "
                    "e.start_byte || '-' || e.end_byte)").fetchall()[0][0]
                assert unsealed == 0
                assert con.execute("SELECT count(*) FROM findings f WHERE NOT EXISTS (SELECT 1 "
                                   "FROM ledger l WHERE l.kind = 'finding' AND l.record_key = "
                                   "CAST(f.id AS VARCHAR))").fetchall()[0][0] == 0
        heads = len(ledger.heads(con))
        w.step()  # nothing new in the spool
        assert len(ledger.heads(con)) == heads
        v = verifying.verify(con)
        assert v.ok and v.pending == {}  # the run's end is all that waits
        pieces = con.execute("SELECT count(*) FROM ledger WHERE kind = 'piece'").fetchall()[0][0]
        assert pieces == 2
        run.done(0, {})
    assert verifying.verify(con).ok
    con.close()


@pytest.mark.slow
def test_a_card_stamped_long_before_its_round_is_judged_with_it_live(tmp_path):
    """A poll reads the rounds it judges from the earliest stamp it loaded since they began
    (auditor.jobs.earliest), not the whole database: a card of MB-01's round stamped 30
    minutes before the rest, loaded a poll before the round_end, is still one of the round's
    events when the round is judged (before, the read began 10 minutes before the round_end's
    poll: the round was counted one event short)."""
    files = sorted(SAMPLE.glob("2026-11-28_MB-01.jsonl"))
    lines = schedule(files, 1.0)
    events = [json.loads(x.data) for x in lines]
    end = next(i for i, e in enumerate(events) if e["type"] == "round_end"
               and e["ts"] >= "2026-11-28T22:45" and e["shoe"] == "MB-01-1128-01")
    key = lines[end].round_end
    assert key is not None
    cards = [i for i, e in enumerate(events[:end])
             if e["type"] == "card" and (e["table"], e["shoe"], e["round"]) == key]
    back = dict(events[cards[-1]])
    stamped = dt.datetime.fromisoformat(back["ts"]) - dt.timedelta(minutes=30)
    back["ts"] = stamped.isoformat(timespec="milliseconds")
    data = [x.data for x in lines]
    data[cards[-1]] = (json.dumps(back) + "\n").encode()
    con, spool, w = _stepped(tmp_path)
    target = spool / lines[0].name
    target.write_bytes(b"".join(data[:cards[-1] + 1]))
    w.step()  # up to the card stamped back; its first poll sweeps once, then no more
    sweeps = w.stats.sweeps
    with target.open("ab") as fh:
        fh.write(b"".join(data[cards[-1] + 1:end + 1]))
    w.step()  # the rest of the round, its round_end last: judged now
    assert w.stats.sweeps == sweeps
    total = con.execute("SELECT count(*) FROM events WHERE table_id = ? AND shoe = ? "
                        "AND round = ?", list(key)).fetchone()
    judged = con.execute("SELECT events FROM round_audits WHERE table_id = ? AND shoe = ? "
                         "AND round = ?", list(key)).fetchall()
    assert total is not None and judged == [(total[0],)]
    # Judged on all its cards: no draw or settlement finding for a card it did not see.
    assert con.execute("SELECT code FROM current_findings WHERE round = ?",
                       [key[2]]).fetchall() == []


@pytest.mark.slow
def test_a_shoe_start_delivered_late_names_the_dealer_of_the_rounds_judged_after(tmp_path):
    """Shoes' dealers are kept from poll to poll (Known.shoe_dealers), and a shoe_start
    loaded makes its table's shoes read again: MB-01's third shoe, whose round_starts name
    no dealer, dealt before its shoe_start is in (a file of its own, delivered later); its
    round 47's planted vig.wrong_amount, judged after, counts against the dealer that
    shoe_start names, as in a batch audit."""
    [log] = sorted(SAMPLE.glob("2026-11-28_MB-01.jsonl"))
    shoe = "MB-01-1128-03"
    events = [json.loads(line) for line in log.read_bytes().splitlines()]
    start = next(e for e in events if e["type"] == "shoe_start" and e["shoe"] == shoe)
    for e in events:
        if e.get("shoe") == shoe and e["type"] == "round_start":
            del e["dealer"]
    kept = [e for e in events if e is not start]

    def end_of(rnd: int) -> int:
        return next(i for i, e in enumerate(kept) if e["type"] == "round_end"
                    and e["shoe"] == shoe and e["round"] == rnd)

    def lines(part: list[dict]) -> bytes:
        return b"".join((json.dumps(e) + "\n").encode() for e in part)

    con, spool, w = _stepped(tmp_path)
    target = spool / log.name
    target.write_bytes(lines(kept[:end_of(2) + 1]))
    w.step()  # the third shoe's first two rounds judged: no dealer known for them
    (spool / "2026-11-28_MB-01.shoe.jsonl").write_bytes(lines([start]))
    w.step()
    with target.open("ab") as fh:
        fh.write(lines(kept[end_of(2) + 1:end_of(47) + 1]))
    w.step()
    assert con.execute(
        "SELECT code, dealer FROM current_findings WHERE shoe = ? AND round = 47", [shoe]
    ).fetchall() == [("vig.wrong_amount", start["dealer"])]


def test_a_day_closed_beside_the_watch_is_swept_at_its_next_poll(tmp_path):
    """`close-day` written through a running watch: its next poll sees the day closed (the
    count it keeps, `Watch._entered_beside`) and sweeps, though no line came."""
    con = db.connect(tmp_path / "live.duckdb")
    spool = tmp_path / "spool"
    spool.mkdir()
    shutil.copy(SAMPLE / "2026-11-28_MB-01.jsonl", spool)
    w = Watch(con, spool, CONF, runs.start(con, "watch", {}),
              WatchOptions(rescan=0, sweep_every=0, sweep_share=1.0, idle_sweep=1e9))
    w.step()  # the lines, and the first sweep
    swept = w.stats.sweeps
    w.step()
    assert w.stats.sweeps == swept  # nothing new: no sweep
    closed_days.close(con, [dt.date(2026, 11, 28)], runs.start(con, "close-day", {}),
                      "close-day")
    w.step()
    assert w.stats.sweeps == swept + 1
    w.step()
    assert w.stats.sweeps == swept + 1
