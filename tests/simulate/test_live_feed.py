"""`bacc-audit simulate --live SPOOL --speed N` (issue 33): a simulated night written into a
spool line by line as table systems write it, so that `watch` can be tried without tables. A
watch following the spool must find what a batch audit of the same files finds."""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.cli import Run
from helpers.watched import batch, findings_of, sources_free

from auditor import config
from auditor.jobs.watch import Watch, WatchOptions
from auditor.simulate import feed
from auditor.store import db, runs

CONF = config.PropertyConfig(time_zone="America/New_York")
SMALL = ("--tables", "2", "--hours", "1", "--seed", "7", "--deviation-rate", "0.03")


@pytest.mark.realtime
def test_a_night_fed_live_is_watched_as_a_batch_audit_finds_it(
    tmp_path: Path, bacc_audit: Callable[..., Run]
) -> None:
    """Terminal 1 runs a watch on the spool, terminal 2 `simulate --live`: once the feed is
    written and the watch stopped, its findings are the batch audit's of the night's files,
    fingerprint for fingerprint, and the planted deviations are among them."""
    spool, logs = tmp_path / "spool", tmp_path / "night"
    spool.mkdir()
    con = db.connect(tmp_path / "live.duckdb")
    w = Watch(con, spool, CONF, runs.start(con, "watch", {}), WatchOptions(poll=0.02, rescan=0.05))
    stop = threading.Event()
    t = threading.Thread(target=w.run, args=(stop,))
    t.start()
    try:
        r = bacc_audit("simulate", "--live", spool, "--out", logs, *SMALL, "--speed", "2000")
    finally:
        stop.set()
        t.join(120)
    assert r.code == 0, r.err
    assert "into" in r.err and "Ctrl-C stops" in r.err
    files = sorted(logs.glob("*.jsonl"))
    assert [p.name for p in sorted(spool.iterdir())] == [p.name for p in files]
    assert [p.read_bytes() for p in sorted(spool.iterdir())] == [p.read_bytes() for p in files]
    assert f"fed {sum(len(p.read_bytes().splitlines()) for p in files):,} lines" in r.out
    got = sources_free(findings_of(con))
    expected = sources_free(findings_of(batch(files, tmp_path / "batch.duckdb", CONF)))
    assert got == expected
    planted = [json.loads(x) for x in (logs / "ground_truth.ndjson").read_text().splitlines()]
    assert planted, "the seed plants no deviation: choose another"
    found = {(f[0], f[3], f[5]) for f in got.values()}  # code, table, round
    assert {(d["code"], d["table"], d["round"]) for d in planted if d.get("round")} <= found
    assert w.stats.rounds_live > 50  # audited as they ended, not all by a sweep at the end


@pytest.mark.parametrize(("args", "words"), [
    (("--speed", "0"), "--speed 0: a positive number of times faster"),
    (("--speed", "-3"), "--speed -3: a positive number of times faster"),
    (("--speed", "nan"), "--speed nan: a positive number of times faster"),
    (("--speed", "inf"), "--speed inf: a positive number of times faster"),
])
def test_a_speed_that_is_no_pace_is_refused_in_a_sentence(
    args: tuple[str, ...], words: str, tmp_path: Path, bacc_audit: Callable[..., Run]
) -> None:
    r = bacc_audit("simulate", "--live", tmp_path / "spool", *SMALL, *args)
    assert (r.code, r.err.count("\n")) == (2, 1)
    assert r.err.startswith(f"error: {words}")
    assert not (tmp_path / "spool").exists()  # refused before anything was simulated


def test_speed_without_live_and_no_out_are_refused(
    tmp_path: Path, bacc_audit: Callable[..., Run]
) -> None:
    r = bacc_audit("simulate", "--out", tmp_path / "a", *SMALL, "--speed", "60")
    assert (r.code, r.err) == (2, "error: --speed 60: only with --live SPOOL (the pace a night "
                                  "is fed into a spool at)\n")
    r = bacc_audit("simulate", *SMALL)
    assert r.code == 2 and r.err.startswith("error: --out is needed: the folder")
    assert not (tmp_path / "a").exists()


def test_a_spool_holding_the_nights_files_is_not_appended_to(
    tmp_path: Path, bacc_audit: Callable[..., Run]
) -> None:
    """Fed twice into one spool, the second night's lines would follow the first's in the same
    files, which a watch reports as logs altered: refused, the file untouched."""
    spool = tmp_path / "spool"
    spool.mkdir()
    there = spool / "2026-12-01_MB-01.jsonl"
    there.write_bytes(b"the first night\n")
    r = bacc_audit("simulate", "--live", spool, *SMALL, "--speed", "1e9")
    assert r.code == 2
    assert r.err == (f"error: {there}: already in the spool; a night fed again would be "
                     "appended to its file, which watch reports as a log altered: feed into a "
                     "new or emptied spool\n")
    assert there.read_bytes() == b"the first night\n"
    assert sorted(p.name for p in spool.iterdir()) == [there.name]


def test_ctrl_c_stops_the_feed_on_whole_lines_with_exit_130(
    tmp_path: Path, bacc_audit: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C once the first write is done (the pit's two notices at 21:45; at 1000 times the
    pace the tables' first lines are due 0.9 s later): exit 130, what was written said, the
    spool holding those two whole lines, and the temporary --out removed."""
    real = feed.Feed.run

    def interrupted(self: feed.Feed, on_line: Callable[[feed.Line], None] | None = None) -> None:
        def ctrl_c(_line: feed.Line) -> None:
            raise KeyboardInterrupt

        real(self, on_line=ctrl_c)

    monkeypatch.setattr(feed.Feed, "run", interrupted)
    scratch = set(Path(tempfile.gettempdir()).glob("bacc-audit-live-*"))
    spool = tmp_path / "spool"
    r = bacc_audit("simulate", "--live", spool, *SMALL, "--speed", "1000")
    assert r.code == 130
    lines = r.err.splitlines()
    assert lines[-2].startswith("simulate: stopped after 2 of ")
    assert lines[-2].endswith(f" lines; the files in {spool} end on whole lines")
    assert lines[-1] == "interrupted"
    notices = spool / "2026-12-01_pit-notices.jsonl"
    assert list(spool.iterdir()) == [notices]
    assert [json.loads(x)["type"] for x in notices.read_bytes().splitlines()] == [
        "procedure_notice", "procedure_notice"]
    assert notices.read_bytes().endswith(b"\n")
    assert set(Path(tempfile.gettempdir()).glob("bacc-audit-live-*")) == scratch


def test_a_lying_nights_later_files_come_after_the_night_under_their_log_names(
    tmp_path: Path,
) -> None:
    """A file sent again comes whole at the night's last line; a `.jsonl.later` file (the lies
    delivered after the night's audit) comes whole LATE_DELIVERY seconds after, named as a
    log the watch follows."""
    def log(name: str, *times: str) -> Path:
        path = tmp_path / name
        path.write_text("".join(json.dumps({"v": 1, "ts": f"2026-12-01T{t}-05:00",
                                            "type": "card", "seq": i}) + "\n"
                                for i, t in enumerate(times, 1)))
        return path

    table = log("2026-12-01_MB-01.jsonl", "22:00:00", "22:01:00", "22:02:00")
    resent = log("2026-12-01_MB-01.resent.jsonl", "22:00:30")
    later = log("2026-12-01_MB-02.jsonl.later", "22:00:10", "22:00:20")
    lines = feed.night_schedule([table, resent], [later], speed=60.0)
    assert [(x.at, x.name, json.loads(x.data)["seq"]) for x in lines] == [
        (0.0, table.name, 1), (1.0, table.name, 2), (2.0, table.name, 3),
        (2.0, resent.name, 1),
        (2.0 + feed.LATE_DELIVERY, "2026-12-01_MB-02.jsonl", 1),
        (2.0 + feed.LATE_DELIVERY, "2026-12-01_MB-02.jsonl", 2),
    ]
    spool = tmp_path / "spool"
    spool.mkdir()
    assert feed.names_taken(lines, spool) == []
    (spool / "2026-12-01_MB-02.jsonl").write_text("")
    assert feed.names_taken(lines, spool) == [spool / "2026-12-01_MB-02.jsonl"]
