"""How often `watch` polls and when it tells the board (issue 32, docs/live.md "What happens
in a poll"): 0.05 s after a poll that loaded lines, the rest doubling after each poll that
found nothing, never past --poll from one poll's start to the next; and the board told after
each step that committed rows, before a sweep and not when nothing was written; the next
sweep after a share of the last one's CPU."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from auditor import config
from auditor.jobs.watch import Watch, WatchOptions
from auditor.simulate.feed import schedule

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
CONF = config.load(SAMPLE / "property.toml")


def test_the_rest_after_a_poll_follows_what_it_loaded(
    con: duckdb.DuckDBPyConnection, run_id: int, tmp_path: Path
) -> None:
    w = Watch(con, tmp_path, CONF, run_id, WatchOptions(poll=0.2, poll_busy=0.05))
    # Lines came: back soon; then quiet polls: 0.1, 0.2, and 0.2 from start to start.
    assert w.next_wait(12, 0.01) == pytest.approx(0.05)
    assert [w.next_wait(0, 0.01) for _ in range(4)] == pytest.approx([0.1, 0.19, 0.19, 0.19])
    assert w.next_wait(0, 0.5) == 0.0  # a poll longer than --poll: the next at once
    assert w.next_wait(3, 0.01) == pytest.approx(0.05)  # lines again: soon again
    slow = Watch(con, tmp_path, CONF, run_id, WatchOptions(poll=2.0))
    assert [slow.next_wait(0, 0.0) for _ in range(7)] == pytest.approx(
        [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0])
    quick = Watch(con, tmp_path, CONF, run_id, WatchOptions(poll=0.02))
    assert quick.next_wait(5, 0.0) == pytest.approx(0.02)  # --poll below poll_busy: --poll


def test_a_costly_poll_rests_for_its_share_but_never_past_poll(
    con: duckdb.DuckDBPyConnection, run_id: int, tmp_path: Path
) -> None:
    """At real speed every poll loads a few lines: back to back (0.05 s apart) their fixed
    cost took most of a core. A poll of 40 ms that loaded lines now rests 4 times that, so
    polls take a fifth of the time (`poll_share`), still within --poll from start to start."""
    w = Watch(con, tmp_path, CONF, run_id, WatchOptions(poll=0.2, poll_busy=0.05))
    assert w.next_wait(30, 0.04) == pytest.approx(0.16)
    assert w.next_wait(30, 0.02) == pytest.approx(0.08)
    assert w.next_wait(30, 0.1) == pytest.approx(0.1)  # 0.4 s by its share: --poll caps it
    assert w.next_wait(30, 0.005) == pytest.approx(0.05)  # cheap: poll_busy as before
    half = Watch(con, tmp_path, CONF, run_id, WatchOptions(poll=1.0, poll_share=0.5))
    assert half.next_wait(30, 0.3) == pytest.approx(0.3)
    # On a loaded machine: 150 ms of wall for 20 ms of CPU rests by the CPU, within --poll.
    assert w.next_wait(30, 0.15, 0.02) == pytest.approx(0.05)
    assert w.next_wait(30, 0.05, 0.02) == pytest.approx(0.08)


def test_a_sweep_waits_for_its_share_of_its_cpu_not_of_its_wall_time(
    con: duckdb.DuckDBPyConnection, run_id: int, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sweep's statements run on DuckDB's threads and its shoe-integrity pass beside its
    table pass: 3 s of the process's CPU in a sweep of a few ms of wall time puts the next
    19 times the CPU later (`sweep_share` 0.05), as the polls rest by their CPU."""
    import time

    from auditor.jobs import watch as watch_mod

    clock = {"cpu": 100.0}

    class Clock:
        monotonic = staticmethod(time.monotonic)

        @staticmethod
        def process_time() -> float:
            return clock["cpu"]

    def costing(seconds: float) -> object:
        def sweep_audit(*args: object, **kwargs: object) -> object:
            clock["cpu"] += seconds
            return watch_mod.AuditResult(run_id)
        return sweep_audit

    monkeypatch.setattr(watch_mod, "time", Clock)
    monkeypatch.setattr(watch_mod, "audit", costing(3.0))
    w = Watch(con, tmp_path, CONF, run_id, WatchOptions(sweep_every=10.0))
    before = time.monotonic()
    w.sweep()
    assert w._sweep_after - before == pytest.approx(57.0, abs=0.5)
    cheap = Watch(con, tmp_path, CONF, run_id, WatchOptions(sweep_every=10.0))
    # 0.1 s of CPU: 1.9 s by the share, so the 10 s floor
    monkeypatch.setattr(watch_mod, "audit", costing(0.1))
    before = time.monotonic()
    cheap.sweep()
    assert cheap._sweep_after - before == pytest.approx(10.0, abs=0.5)


def test_the_spool_is_walked_again_only_when_a_folder_changed(
    con: duckdb.DuckDBPyConnection, run_id: int, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A walk of 500 files cost more than the polls between two: the spool is walked again
    once a folder of it changed (a file added, even in a subfolder), else every FULL_RESCAN."""
    from auditor.jobs import watch as watch_mod

    walks: list[int] = []
    walk = watch_mod.logs_in

    def counted(*args: object, **kwargs: object) -> object:
        walks.append(1)
        return walk(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(watch_mod, "logs_in", counted)
    spool = tmp_path / "spool"
    (spool / "pit-2").mkdir(parents=True)
    (spool / "a.jsonl").write_bytes(b"")

    def settled() -> None:  # the folders changed long ago: no clock tick to wait out
        for folder in (spool, spool / "pit-2"):
            os.utime(folder, ns=(10**18, 10**18))

    settled()
    w = Watch(con, spool, CONF, run_id, WatchOptions(rescan=0, sweep_every=1e9, idle_sweep=1e9))
    w.step()
    assert (len(walks), w.follower.paths) == (1, [spool / "a.jsonl"])
    w.step()
    assert len(walks) == 1  # nothing changed: not walked
    (spool / "pit-2" / "b.jsonl").write_bytes(b"")
    w.step()
    assert (len(walks), w.follower.paths) == (2, [spool / "a.jsonl", spool / "pit-2" / "b.jsonl"])
    settled()
    w.step()
    w.step()
    assert len(walks) == 3  # changed since the walk (the utime): walked once, then not
    monkeypatch.setattr(watch_mod, "FULL_RESCAN", 0.0)
    w.step()
    assert len(walks) == 4  # FULL_RESCAN passed: walked whatever


@pytest.mark.slow  # a table's three rounds ingested and audited
def test_the_board_is_told_after_each_step_that_committed(
    con: duckdb.DuckDBPyConnection, run_id: int, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    told: list[int] = []
    w = Watch(con, spool, CONF, run_id,
              WatchOptions(rescan=0, sweep_every=1e9, idle_sweep=1e9, seal_every=1e9))
    w.on_commit = lambda: told.append(int(
        con.execute("SELECT count(*) FROM findings").fetchall()[0][0]))
    lines = schedule(sorted(SAMPLE.glob("2026-11-28_MB-01.jsonl")), 1.0)
    w.step()  # an empty spool (its first sweep finds nothing): nothing committed, nothing told
    assert told == []
    ends = [i for i, line in enumerate(lines) if line.round_end is not None]
    with (spool / lines[0].name).open("ab") as fh:
        fh.write(b"".join(line.data for line in lines[: ends[2] + 1]))  # three rounds
    w.step()
    assert len(told) == 1
    assert w.stats.rounds_live == 3
    # What the board reads when told: the three rounds' findings, already committed.
    assert told[0] == con.execute("SELECT count(*) FROM findings").fetchall()[0][0]
    w.step()  # nothing new
    assert len(told) == 1
