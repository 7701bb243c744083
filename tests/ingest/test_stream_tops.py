"""The streams' highest seqs the follower keeps from poll to poll are what `stream_sources`
says (auditor.ingest.stream_tops, issue 32): after every poll of a lying night (resent
files, seqs repeated and out of order, a watch started again), each stream kept is asked of
the table and must answer the same, source included."""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from helpers.rules import panda8_rules
from helpers.watched import watched_in_parts

from auditor.ingest.stream_tops import StreamTops, read_tops
from auditor.jobs.watch import Watch
from auditor.simulate.feed import schedule
from auditor.simulate.layout import GAMES
from auditor.simulate.planted import simulate
from auditor.store import db


def test_the_kept_highest_seqs_are_the_tables_after_every_poll(tmp_path, monkeypatch):
    panda8_rules(tmp_path, monkeypatch)
    r = simulate(tmp_path / "logs", tables=5, hours=1.5, seed=5, deviation_rate=0.05,
                 games=GAMES, lying=True)
    lines = schedule(list(r.files), 1.0, later=[f for f in r.files if ".resent." in f.name])
    con = db.connect(tmp_path / "live.duckdb")
    spool = tmp_path / "spool"
    spool.mkdir()
    seen: Counter[str] = Counter()

    def same(w: Watch, part: int) -> None:
        tops = w.follower.tops
        kept = {s: t for s, t in tops.kept().items() if t != (None, None)}
        assert kept == read_tops(con, sorted(kept)), f"after part {part}"
        seen["polls"] += 1
        seen["kept"] += len(kept)
        seen["reads"] = tops.reads

    w = watched_in_parts(con, spool, lines, r.later, 30, 22, same)
    same(w, 30)
    assert seen["kept"] > 30 * 3  # the streams were kept, not asked every time
    assert seen["reads"] < seen["polls"] // 2, seen


class _R(NamedTuple):
    stream: str
    source_id: int
    hi: int | None


def test_a_tie_between_two_sources_is_left_to_the_table(tmp_path):
    con = db.connect(tmp_path / "a.duckdb")
    con.execute("INSERT INTO stream_sources VALUES ('table:A', 1, 1, 10, 10), "
                "('table:B', 1, 1, 5, 5)")
    tops = StreamTops()
    assert tops.read(con, ["table:A", "table:B", "table:C"]) == {
        "table:A": (10, 1), "table:B": (5, 1)}
    assert tops.reads == 1
    # A: another source reaches 10 too (a resend); B: its own source goes on; C: new
    con.execute("INSERT INTO stream_sources VALUES ('table:A', 2, 1, 10, 10), "
                "('table:C', 3, 1, 4, 4)")
    con.execute("UPDATE stream_sources SET max_seq = 8 WHERE stream = 'table:B'")
    tops.committed([_R("table:A", 2, 10), _R("table:B", 1, 8), _R("table:C", 3, 4)])
    assert tops.kept() == {"table:B": (8, 1), "table:C": (4, 3)}
    assert tops.read(con, ["table:A", "table:B", "table:C"]) == {
        **read_tops(con, ["table:A"]), "table:B": (8, 1), "table:C": (4, 3)}
    assert tops.reads == 2  # A only was asked again
    tops.forget()
    assert tops.kept() == {}
    con.close()
