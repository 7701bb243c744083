"""The notices page (`/notices`): the pit's notices beside the procedure changes they announce,
as the shift report pairs them; a notice entered and withdrawn from the board with the checks
and sentences of `bacc-audit notice add`/`withdraw`; and, under `watch`, the notice_missing it
answers withdrawn at the next sweep as after `notice add`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from helpers.desk import ORIGIN, csrf, desk_client, words
from helpers.sample import LOCAL, plain
from helpers.tablelog import Log
from starlette.testclient import TestClient

from auditor import config
from auditor.board.app import create_app
from auditor.ingest.run import ingest
from auditor.jobs.watch import Watch, WatchOptions
from auditor.store import db, notices, runs


def test_the_sample_nights_changes_with_the_notices_that_count(night_copy: Path) -> None:
    with desk_client(night_copy) as c:
        page = c.get("/notices", params={"date": "2026-11-28"})
        assert page.status_code == 200
        text = words(page.text)
        # Pit P1's change to procedure 2, noticed 45 minutes ahead to both: no finding;
        # MB-03 and MB-05 went to procedure 4 noticed 20 minutes ahead: notice_late.
        assert ("MB-02 P1 2026-11-29 01:59:59 EST (seq 3710) 2 division 01:15 (45 min) "
                "surveillance 01:15 (45 min) none") in text
        assert ("MB-03 P2 2026-11-29 03:00:21 EST (seq 4944) 4 division 02:40 (20 min) "
                "surveillance 02:40 (20 min) procedure.notice_late") in text
        assert ("Fe7902d7e5935 procedure.notice_late standing MB-03 2026-11-29 03:00:21 EST"
                ) in text
        assert ("P2 MB-03, MB-04, MB-05 4 2026-11-29 03:00:00 EST surveillance yes "
                "2026-11-29 02:40:00 EST") in text
        assert "No notice was entered by hand." in text
        bad = c.get("/notices", params={"date": "2026-13-01"})
        assert bad.status_code == 400


NY_CONFIG = '[property]\nname = "Test"\ntime_zone = "America/New_York"\n'


@pytest.fixture
def changed(tmp_path: Path) -> Iterator[tuple[duckdb.DuckDBPyConnection, config.PropertyConfig]]:
    """MB-01 (pit P1) goes from procedure 1 to 2 at 02:00 with no notice in the logs: one
    procedure.notice_missing, audited by a watch over the database."""
    log = Log()
    log.open("MB-01", "P1", "22:00", procedure=1)
    log.change("MB-01", "02:00", 2)
    log.close("MB-01", "04:00")
    path = log.write(tmp_path / "logs" / "night.jsonl")
    (tmp_path / "property.toml").write_text(NY_CONFIG)
    conf = config.load(tmp_path / "property.toml")
    con = db.connect(tmp_path / "audit.duckdb")
    ingest(con, [path], runs.start(con, "ingest", {}))
    try:
        yield con, conf
    finally:
        con.close()


def _codes(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [c for (c,) in con.execute(
        "SELECT code FROM current_findings WHERE code LIKE 'procedure.notice%'").fetchall()]


@pytest.mark.slow
def test_a_notice_entered_on_the_board_withdraws_notice_missing_at_the_next_sweep(
    changed: tuple[duckdb.DuckDBPyConnection, config.PropertyConfig], tmp_path: Path
) -> None:
    con, conf = changed
    spool = tmp_path / "spool"
    spool.mkdir()
    watch = Watch(con, spool, conf, runs.start(con, "watch", {}),
                  WatchOptions(rescan=0, sweep_every=0, sweep_share=1.0))
    watch.step()  # the first sweep audits what is there
    assert _codes(con) == ["procedure.notice_missing"]
    app = create_app(con.cursor, property_config=conf)
    with TestClient(app, base_url=LOCAL, follow_redirects=False) as c:
        page = c.get("/notices")
        assert "procedure.notice_missing" in page.text and "standing" in plain(page.text)
        token = csrf(c, "/notices")
        form = {"csrf": token, "by": "J. Rivera", "pit": "P1", "procedure": "2",
                "effective": "2026-11-29 02:00", "given_at": "2026-11-29 01:15",
                "recipient": ["division", "surveillance"], "note": "letter in the binder"}
        # A pit nobody heard of: the sentence of `notice add`, nothing stored.
        wrong = c.post("/notices", headers=ORIGIN, data={**form, "pit": "P9"})
        assert wrong.status_code == 400
        assert ("pit 'P9' is in neither the logs nor the property config; check the pit id "
                "(bacc-audit notice add refuses notices for unknown pits)") in plain(wrong.text)
        ok = c.post("/notices", headers=ORIGIN, data=form)
        assert ok.status_code == 200, plain(ok.text)
        text = plain(ok.text)
        assert ("notice 1: pit P1 (the whole pit), procedure 2 from 2026-11-29 02:00:00, "
                "written notice to division given 2026-11-29 01:15:00; entered by J. Rivera"
                ) in text
        assert "notice 2: pit P1" in text and "notice to surveillance" in text
        # The watch's next step sees the notices and sweeps: the finding is withdrawn.
        watch.step()
        assert _codes(con) == []
        after = words(c.get("/notices").text)
        assert "procedure.notice_missing withdrawn MB-01 2026-11-29 02:00:00 EST" in after
        # Withdrawn again from the board: the finding comes back at the next sweep.
        token = csrf(c, "/notices")
        gone = c.post("/notices/1/withdraw", headers=ORIGIN,
                      data={"csrf": token, "by": "J. Rivera", "reason": "entered in error"})
        assert gone.status_code == 200
        assert "notice 1 withdrawn by J. Rivera at " in plain(gone.text)
        assert "entered in error; the next audit no longer counts it" in plain(gone.text)
        again = c.post("/notices/1/withdraw", headers=ORIGIN,
                       data={"csrf": token, "by": "J. Rivera", "reason": "twice"})
        assert again.status_code == 400 and "notice 1 is already withdrawn" in again.text
        watch.step()
        assert _codes(con) == ["procedure.notice_missing"]
    stored = notices.list_notices(con)
    assert [(n.recipient, n.entered_by, n.note) for n in stored] == [
        ("division", "J. Rivera", "letter in the binder"),
        ("surveillance", "J. Rivera", "letter in the binder")]
    assert stored[0].given_at == dt.datetime(2026, 11, 29, 6, 15, tzinfo=dt.UTC)
    added = con.execute("SELECT args FROM runs WHERE command = 'notice add' "
                        "AND status = 'done'").fetchall()
    assert len(added) == 1 and '"role": "officer"' in added[0][0]


def test_an_ambiguous_local_time_is_refused_with_the_sentence_of_notice_add(
    night_copy: Path,
) -> None:
    with desk_client(night_copy) as c:
        token = csrf(c, "/notices")
        r = c.post("/notices", headers=ORIGIN, data={
            "csrf": token, "by": "J. Smith", "pit": "P1", "procedure": "2",
            "effective": "2026-11-01 02:06", "given_at": "2026-11-01 01:40",
            "recipient": ["division"]})
        assert r.status_code == 400
        assert ("--given-at 2026-11-01 01:40 happens twice in America/New_York (the clocks go "
                "back that night): write 2026-11-01 01:40-04:00 (EDT) or 2026-11-01 "
                "01:40-05:00 (EST)") in plain(r.text)
        skipped = c.post("/notices", headers=ORIGIN, data={
            "csrf": token, "by": "J. Smith", "pit": "P1", "procedure": "2",
            "effective": "2026-03-08 02:30", "given_at": "2026-03-08 01:00",
            "recipient": ["division"]})
        assert skipped.status_code == 400 and "--effective 2026-03-08 02:30" in plain(skipped.text)
        assert c.post("/notices", headers=ORIGIN, data={"pit": "P1"}).status_code == 403
    con = duckdb.connect(str(night_copy), read_only=True)
    assert notices.list_notices(con) == []
    con.close()


def test_a_viewer_cannot_enter_or_withdraw_a_notice(night_copy: Path) -> None:
    with desk_client(night_copy, login="v.watcher") as c:
        page = c.get("/notices")
        assert page.status_code == 200 and "Enter notice" not in page.text
        token = csrf(c, "/notices")
        r = c.post("/notices", headers=ORIGIN, data={
            "csrf": token, "pit": "P1", "procedure": "2", "effective": "2026-11-29 02:00",
            "given_at": "2026-11-29 01:00", "recipient": ["division"]})
        assert r.status_code == 403
        assert c.post("/notices/1/withdraw", headers=ORIGIN,
                      data={"csrf": token, "reason": "x"}).status_code == 403
