"""A poll's rounds counted from the rows `watch` holds (auditor.audit.round_rows.RoundRows.spans)
only where nothing else can stand under their keys: each time the held spans are given, the
statement they replace runs too and must agree, events and audits alike. Nights made by hand,
one poll at a time, each against one of the conditions: a round a sweep judged before its
round_end came; a round with an event on record from before the watch, stamped later than
the round's own; rounds given rows the watch does not hold (a file's first piece, a line the
per-line path typed); a round logged again under the key of one judged before the watch."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import duckdb
import pytest
from helpers.db import new_database
from helpers.tablelog import DECK, Log, deal_rounds

from auditor import config
from auditor.audit import run as audit_run
from auditor.audit.listed import _spans
from auditor.audit.run import audit
from auditor.ingest.run import ingest
from auditor.jobs.watch import Watch, WatchOptions
from auditor.store import runs

RoundKey = tuple[str, str, int]


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> dict[RoundKey, Counter[str]]:
    """Per round listed, how its spans came (`held` or `read`); held ones checked against
    the read."""
    seen: dict[RoundKey, Counter[str]] = {}
    listed = audit_run.select_listed

    def both(con, conf, keys, n_keys, since, index, *, contexts, audits, stream_tops=None,
             spans=None):
        rounds = con.execute(f"SELECT * FROM {keys}").fetchall()
        if spans is not None:
            read, audited = _spans(con, keys, since, audits)
            assert (sorted(spans), audited) == (sorted(read), [])
        for k in rounds:
            seen.setdefault(k, Counter())["read" if spans is None else "held"] += 1
        return listed(con, conf, keys, n_keys, since, index, contexts=contexts, audits=audits,
                      stream_tops=stream_tops, spans=spans)

    monkeypatch.setattr(audit_run, "select_listed", both)
    return seen


def _watch(con: duckdb.DuckDBPyConnection, spool: Path) -> Watch:
    return Watch(con, spool, config.PropertyConfig(), runs.start(con, "watch", {}),
                 WatchOptions(rescan=0, sweep_every=1e9, idle_sweep=1e9))


def _append(path: Path, lines: list[str]) -> None:
    with path.open("a") as fh:
        fh.write("".join(line + "\n" for line in lines))


def _unended(log: Log, table: str, shoe: str, rnd: int, cards: list[tuple[str, str]]) -> None:
    """A round dealt without its round_end."""
    stream = f"table:{table}"
    log.emit(stream, log._next(table, 20), "round_start", shoe=shoe, round=rnd)
    log.emit(stream, log._next(table), "no_more_bets", shoe=shoe, round=rnd)
    for to, card in cards:
        log.emit(stream, log._next(table), "card", shoe=shoe, round=rnd, to=to, card=card)


def test_a_round_a_sweep_judged_is_counted_from_events(tmp_path, checked):
    """Round 2 has no round_end when round 3 is dealt: the sweep judges it (its table went
    on). Its round_end, delivered after, lists it again: the held rows would count it as
    never judged; the poll reads it, and its audit, from the database."""
    log = Log()
    log.open("T1", "P1", "22:00")
    log.shoe_start("T1", "22:01", "S1")
    head = len(log.lines())
    one, two, three = deal_rounds(DECK, 0, 3)
    log.round("T1", "S1", 1, one)
    _unended(log, "T1", "S1", 2, two)
    log.round("T1", "S1", 3, three)
    dealt = len(log.lines())
    log.emit("table:T1", log._next("T1"), "round_end", shoe="S1", round=2)
    lines = log.lines()

    con = new_database(tmp_path / "live.duckdb")
    spool = tmp_path / "spool"
    spool.mkdir()
    path = spool / "T1.jsonl"
    _append(path, lines[:head])
    w = _watch(con, spool)
    w.step()  # a new file's first piece: loaded the batch way, nothing held
    _append(path, lines[head:dealt])
    w.step()
    assert checked == {("T1", "S1", 1): Counter(held=1), ("T1", "S1", 3): Counter(held=1)}
    w.sweep()
    [(n,)] = con.execute("SELECT count(*) FROM round_audits WHERE round = 2").fetchall()
    assert n == 1  # judged by the sweep, its table gone on past it
    _append(path, lines[dealt:])
    w.step()
    assert checked[("T1", "S1", 2)] == Counter(read=1)
    con.close()


def test_an_event_on_record_from_before_the_watch_is_counted(tmp_path, checked):
    """A card of round 2 came before the watch, in another file, stamped half an hour after
    the round's own events: a count from the rows held would leave it out. Round 3, dealt
    after that stamp, is counted from them."""
    log = Log()
    one, two, three = deal_rounds(DECK, 0, 3)
    log.open("T1", "P1", "22:00")
    log.shoe_start("T1", "22:01", "S1")
    log.emit("table:T1", "22:30", "card", shoe="S1", round=2, to="player", card=DECK[20])
    log.round("T1", "S1", 1, one, when="22:02")
    first = len(log.lines())
    log.round("T1", "S1", 2, two)
    ended = len(log.lines())
    log.round("T1", "S1", 3, three, when="22:45")
    lines = log.lines()

    con = new_database(tmp_path / "live.duckdb")
    before = tmp_path / "before.jsonl"
    _append(before, lines[:3])
    ingest(con, [before], runs.start(con, "ingest", {}))
    spool = tmp_path / "spool"
    spool.mkdir()
    path = spool / "T1.jsonl"
    w = _watch(con, spool)
    w.sweep()  # the watch's first: round 2 not judged (its table has not gone past it)
    _append(path, lines[3:first])
    w.step()  # the batch way: round 1 read
    _append(path, lines[first:ended])
    w.step()
    assert checked == {("T1", "S1", 1): Counter(read=1), ("T1", "S1", 2): Counter(read=1)}
    [(n,)] = con.execute("SELECT events FROM round_audits WHERE round = 2").fetchall()
    assert n == len(two) + 4  # its card from before the watch counted
    _append(path, lines[ended:])
    w.step()
    assert checked[("T1", "S1", 3)] == Counter(held=1)
    con.close()


def test_rounds_given_rows_not_held_are_counted_from_events(tmp_path, checked):
    """Round 1 begins in the file's first piece (loaded the batch way) and ends in a piece
    held; round 2 begins in a piece held and ends in one with a line the per-line path typed
    (a JSON escape), not held: both are read. Round 3, every row of it held, is counted from
    them."""
    log = Log()
    log.open("T1", "P1", "22:00")
    log.shoe_start("T1", "22:01", "S1")
    one, two, three = deal_rounds(DECK, 0, 3)
    log.round("T1", "S1", 1, one)
    cuts = [5, len(log.lines())]  # round 1's round_start, no_more_bets and first card
    log.round("T1", "S1", 2, two)
    cuts += [cuts[-1] + 3, len(log.lines())]
    log.round("T1", "S1", 3, three)
    lines = log.lines()
    cuts.append(len(lines))
    escaped = cuts[2] + 1  # a card of round 2
    assert '"type":"card"' in lines[escaped] and '"round":2' in lines[escaped]
    lines[escaped] = lines[escaped].replace('"shoe":"S1"', '"shoe":"S\\u0031"')

    con = new_database(tmp_path / "live.duckdb")
    spool = tmp_path / "spool"
    spool.mkdir()
    path = spool / "T1.jsonl"
    w = _watch(con, spool)
    start = 0
    for cut in cuts:
        _append(path, lines[start:cut])
        start = cut
        w.step()
    assert checked == {("T1", "S1", 1): Counter(read=1), ("T1", "S1", 2): Counter(read=1),
                       ("T1", "S1", 3): Counter(held=1)}
    assert con.execute("SELECT round, events FROM round_audits ORDER BY round").fetchall() == [
        (1, len(one) + 3), (2, len(two) + 3), (3, len(three) + 3)]
    con.close()


def test_a_round_of_a_shoe_judged_before_the_watch_is_counted_from_events(tmp_path, checked):
    """Round 1 was ingested and audited before the watch; after it began, the table logs a
    round under the same key again, every row of it held and stamped after everything on
    record: its audit before is read with it (JudgedBefore), so it is counted from
    `events`."""
    log = Log()
    log.open("T1", "P1", "22:00")
    log.shoe_start("T1", "22:01", "S1")
    one, two, again = deal_rounds(DECK, 0, 3)
    log.round("T1", "S1", 1, one)
    before = len(log.lines())
    log.round("T1", "S1", 2, two, when="22:20")
    first = len(log.lines())
    log.round("T1", "S1", 1, again, when="22:30")  # the same key, logged again
    lines = log.lines()

    con = new_database(tmp_path / "live.duckdb")
    earlier = tmp_path / "earlier.jsonl"
    _append(earlier, lines[:before])
    ingest(con, [earlier], runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    spool = tmp_path / "spool"
    spool.mkdir()
    path = spool / "T1.jsonl"
    _append(path, lines[before:first])
    w = _watch(con, spool)
    w.step()  # the batch way: round 2 read
    _append(path, lines[first:])
    w.step()
    assert checked == {("T1", "S1", 2): Counter(read=1), ("T1", "S1", 1): Counter(read=1)}
    con.close()
