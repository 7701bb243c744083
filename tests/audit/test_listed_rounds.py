"""A poll's rounds as auditor.audit.listed chooses them are select_rounds' (issue 32).

Two planted nights are written into a spool in parts, a poll of `watch` after each, and their
later files after the night: a lying one of every game (rounds judged again as more events
come, events after a round_end or a close, late deliveries, resends, chemin de fer's bank
passing after the round_end) and one whose shoes are dealt again under old keys, the watch
started again late in the night (rounds begun before it end after it). At every
poll select_rounds runs first, with its `since` lifted as `watch` lifted it before (a round
without a round_start at or after it), then the listed way: both must leave the same `todo`,
say the same about rounds read one by one, and bound the events read the same; where the
watch gave the rounds' spans from the rows it holds, they are what `events` gives."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from helpers.rules import panda8_rules
from helpers.watched import watched_in_parts

from auditor.audit import run as audit_run
from auditor.audit.listed import ContextIndex, _spans, make_todo
from auditor.audit.rounds import select_rounds
from auditor.jobs import watch as watch_module
from auditor.simulate.feed import schedule
from auditor.simulate.layout import GAMES
from auditor.simulate.planted import simulate
from auditor.store import db

NIGHTS = {
    "lying": dict(tables=6, hours=2, seed=1, deviation_rate=0.05, games=GAMES, lying=True),
    "shoes dealt again": dict(tables=2, hours=2, seed=1, games=("mini_baccarat",),
                              phantom_shoe=True, shoe_reopened=True),
}


def _started_before(con: duckdb.DuckDBPyConnection, keys: str, since: dt.datetime) -> bool:
    """How `watch` lifted the bound before: a listed round without a round_start stamped at
    or after it."""
    [(n,)] = con.execute(
        f"""SELECT count(*) FROM {keys} k WHERE NOT EXISTS (
              SELECT 1 FROM events e WHERE e.ts >= ? AND e.type = 'round_start'
                AND e.table_id = k.table_id AND e.shoe = k.shoe AND e.round = k.round)""",
        [since]).fetchall()
    return bool(n)


def _todo(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.execute("SELECT * FROM todo ORDER BY table_id, shoe, round").fetchall()


@pytest.mark.slow
@pytest.mark.parametrize("night", sorted(NIGHTS))
def test_a_polls_rounds_are_select_rounds_poll_after_poll(night, tmp_path, monkeypatch):
    panda8_rules(tmp_path, monkeypatch)
    r = simulate(tmp_path / "logs", **NIGHTS[night])  # type: ignore[arg-type]
    seen: Counter[str] = Counter()
    listed = audit_run.select_listed

    def both(con, conf, keys, n_keys, since, index, *, contexts, audits, stream_tops=None,
             spans=None):
        if spans is not None:  # from what the watch holds: as read, and none judged before
            read, audited = _spans(con, keys, since, audits)
            assert (sorted(spans), audited) == (sorted(read), [])
            seen["spans held"] += 1
        bound = None if since is None or _started_before(con, keys, since) else since
        late = select_rounds(con, conf, None, keys=keys, since=bound, contexts=contexts,
                             audits=audits)
        want = _todo(con)
        before = set(con.execute(f"SELECT table_id, shoe, round FROM {audits} "
                                 f"SEMI JOIN {keys} USING (table_id, shoe, round)").fetchall())
        got = listed(con, conf, keys, n_keys, since, index, contexts=contexts, audits=audits,
                     stream_tops=stream_tops, spans=spans)
        seen["tops kept"] += stream_tops is not None
        if got.rows is not None:  # todo's rows, made when a statement reads them
            make_todo(con, got.rows)
        assert (_todo(con), got.late, got.since, got.judged) == (want, late, bound, before)
        if got.todo is not None:  # what the replay is told of todo
            assert sorted(got.todo) == [(row[:3], row[-2]) for row in want]
        seen["polls"] += 1
        seen["rounds"] += len(want)
        seen["read one by one"] += late
        seen["bound lifted"] += since is not None and bound is None
        seen["partial"] += any(row[-1] for row in want)
        return got

    monkeypatch.setattr(audit_run, "select_listed", both)
    audit_rounds = audit_run.audit_rounds

    def judged(con, *args, **kwargs):  # the rounds the watch counts as audited
        result = audit_rounds(con, *args, **kwargs)
        assert result.judged == set(con.execute(
            f"SELECT table_id, shoe, round FROM {kwargs['audits']} SEMI JOIN {args[2]} "
            "USING (table_id, shoe, round)").fetchall())
        seen["judged"] += len(result.judged)
        return result

    monkeypatch.setattr(watch_module, "audit_rounds", judged)
    lines = schedule(list(r.files), 1.0, later=[f for f in r.files if ".resent." in f.name])
    con = db.connect(tmp_path / "live.duckdb")
    spool = tmp_path / "spool"
    spool.mkdir()
    def sweep(w: watch_module.Watch, part: int) -> None:  # rounds judged between polls
        if part % 4 == 3:
            w.sweep()

    w = watched_in_parts(con, spool, lines, r.later, 50, 38, sweep)
    # the index the polls chose by is the contexts' own, once given the last (made as a
    # poll needs them)
    if w._contexts_stale:
        w._update_contexts()
    assert w._contexts.rows() == ContextIndex.read(con, "events").rows()
    assert seen["polls"] >= 40 and seen["rounds"] > 200 and seen["judged"] > 200, seen
    assert seen["bound lifted"] > 0 and seen["tops kept"] == seen["polls"], seen
    assert 0 < seen["spans held"] < seen["polls"], seen
    if night == "lying":
        assert seen["read one by one"] > 0, seen
    con.close()


def test_the_context_index_answers_as_the_asof_joins(tmp_path: Path) -> None:
    """Opens, procedures and closes looked up by seq: the last before it, and a close only
    between a round's first and last seq."""
    index = ContextIndex()
    pb = ("P1", "punto_banco", "nj", "standard", 7, ["dragon7"])
    cf = ("P1", "chemin_de_fer", "nj", "standard", 9, None)
    index.add([
        ("T1", 10, "table_open", *pb, 2),
        ("T1", 50, "procedure_change", *(None,) * 6, 3),
        ("T1", 90, "table_close", *(None,) * 6, None),
        ("T1", 100, "table_open", *cf, None),
        ("T1", 30, "procedure_change", *(None,) * 6, None),  # names none: not in force
    ])
    assert index.opened("T1", 10) is None
    assert index.opened("T1", 11) == (10, *pb)
    assert index.opened("T1", 100) == (10, *pb)
    assert index.opened("T1", 101) == (100, *cf)
    assert index.opened("T2", 101) is None
    assert [index.procedure("T1", s) for s in (10, 11, 50, 51, 120)] == [None, 2, 2, 3, 3]
    assert index.close_within("T1", 80, 95) == 90
    assert index.close_within("T1", 90, 95) is None  # the close is the round's first seq
    assert index.close_within("T1", 80, 90) is None  # ...or its last
    assert index.close_within("T1", 20, 60) is None
