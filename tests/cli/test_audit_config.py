"""A changed property config never withdraws findings in silence (issue 30): `audit`,
`nightly` and `watch` refuse to audit under a config that differs from the one the standing
findings were made under, naming what changed; `audit --rerun all --reason TEXT` reruns under
it, records the reason on its run, and every finding it withdraws or opens points to that
run."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import duckdb
import pytest

from auditor import config
from auditor.errors import EXIT_INPUT, UserError
from auditor.jobs import nightly, service
from auditor.simulate.planted import simulate

ZONE = '[property]\ntime_zone = "America/New_York"\n'
# The shifts an hour later: the counting seat's first hour falls in the swing shift.
LATER_SHIFTS = ZONE + "".join(
    f'[[shifts]]\nname = "{name}"\nstart = "{start}"\nend = "{end}"\n'
    for name, start, end in (("day", "07:00", "15:00"), ("swing", "15:00", "23:00"),
                             ("grave", "23:00", "07:00")))


@pytest.fixture
def night(tmp_path: Path, bacc_audit: Any) -> tuple[Path, Path]:
    """A night with a seat counting Dragon 7 from 22:00 to midnight, ingested and audited
    under the default shifts (play.side_bet_counting, shift 2026-12-01/grave)."""
    simulate(tmp_path / "logs", 2, 2, seed=4, games=("mini_baccarat",), counting_seat=True)
    (tmp_path / "a.toml").write_text(ZONE)
    (tmp_path / "b.toml").write_text(LATER_SHIFTS)
    dbp = tmp_path / "a.duckdb"
    assert bacc_audit("ingest", tmp_path / "logs", "--db", dbp).code == 0
    r = bacc_audit("audit", "--db", dbp, "--config", tmp_path / "a.toml")
    assert r.code == 0, r
    assert _rows(dbp, "SELECT code, run_id FROM current_findings") == [
        ("play.side_bet_counting", 2)]
    return dbp, tmp_path


def _rows(dbp: Path, sql: str, params: list | None = None) -> list[tuple]:
    con = duckdb.connect(str(dbp), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


@pytest.mark.slow  # a night simulated, ingested, audited, then refused: about 8 s
def test_a_changed_config_is_refused_naming_what_changed(night, bacc_audit):
    dbp, tmp = night
    before = _rows(dbp, "SELECT id, status FROM findings ORDER BY id")
    standing = len(_rows(dbp, "SELECT 1 FROM current_findings"))
    r = bacc_audit("audit", "--db", dbp, "--config", tmp / "b.toml")
    assert r.code == EXIT_INPUT
    assert r.err == (
        f"error: audit: the property config ({tmp / 'b.toml'}) is not the one the {standing} "
        "standing findings stand under (run 2 audited under that one): the shifts (day "
        "06:00-14:00, swing 14:00-22:00, grave 22:00-06:00 then, day 07:00-15:00, swing "
        "15:00-23:00, grave 23:00-07:00 now); "
        "auditing under it could withdraw or change them unrecorded, so rerun under it with "
        "the reason on record: "
        'bacc-audit audit --rerun all --reason "..."\n')
    assert _rows(dbp, "SELECT id, status FROM findings ORDER BY id") == before
    # A rerun of days without its reason is refused the same way; a reason alone too.
    r = bacc_audit("audit", "--db", dbp, "--config", tmp / "b.toml", "--rerun", "2026-12-01")
    assert r.code == EXIT_INPUT and "(run 2 audited under that one)" in r.err
    r = bacc_audit("audit", "--db", dbp, "--config", tmp / "b.toml", "--reason", "x")
    assert (r.code, r.err.split(":")[1].strip()) == (EXIT_INPUT, "--reason goes with --rerun")
    # The same config as before (another file, same settings) audits as ever.
    (tmp / "same.toml").write_text(ZONE)
    r = bacc_audit("audit", "--db", dbp, "--config", tmp / "same.toml")
    assert r.code == 0 and r.out.startswith("0 rounds audited: 0 new findings, 0 withdrawn")

    # nightly follows the same rule: refused, recorded failed with exit 2.
    with pytest.raises(UserError, match=r"^nightly: the property config .* is not the one"):
        nightly.run_nightly(dbp, tmp / "logs", config.load(tmp / "b.toml"),
                            archive=tmp / "archive")
    assert _rows(dbp, "SELECT command, status, exit_code FROM runs ORDER BY id DESC LIMIT 1") \
        == [("nightly", "failed", 2)]
    assert _rows(dbp, "SELECT id, status FROM findings ORDER BY id") == before

    # watch too, before it follows anything. In a thread: a watch that did not refuse would
    # stop on setting its signal handlers (the main thread's only), not hang the test.
    (tmp / "spool").mkdir()
    raised: list[BaseException] = []

    def watch() -> None:
        try:
            service.run_watch(dbp, tmp / "spool", config.load(tmp / "b.toml"), {},
                              say=lambda _: None)
        except BaseException as e:  # what it raised is the test's subject
            raised.append(e)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive() and len(raised) == 1
    assert isinstance(raised[0], UserError)
    assert str(raised[0]).startswith("watch: the property config")
    assert _rows(dbp, "SELECT command, status, exit_code FROM runs ORDER BY id DESC LIMIT 1") \
        == [("watch", "failed", 2)]
    assert _rows(dbp, "SELECT id, status FROM findings ORDER BY id") == before


@pytest.mark.slow  # the same night, then rerun under new shifts: about 8 s
def test_a_rerun_with_its_reason_is_on_record_and_its_changes_point_to_it(night, bacc_audit):
    dbp, tmp = night
    reason = "shifts an hour later from 2026-12-01, memo 14 (J. Rivera, Compliance)"
    r = bacc_audit("audit", "--db", dbp, "--config", tmp / "b.toml", "--rerun", "all",
                   "--reason", reason, "--json")
    assert r.code == 0, r
    (run_id, args), = _rows(dbp, "SELECT id, args FROM runs WHERE command = 'audit' "
                                 "ORDER BY id DESC LIMIT 1")
    args = json.loads(args)
    assert args["reason"] == reason and args["rerun"] == "all"
    assert args["config_settings"]["shifts"] == [
        ["day", "07:00", "15:00"], ["swing", "15:00", "23:00"], ["grave", "23:00", "07:00"]]
    # What the new shifts changed: the seat's hour from 22:00 is now the swing shift's,
    # a finding of this run; every row this run wrote (opened or withdrawn) names it.
    rows = _rows(dbp, "SELECT code, status, run_id, evidence FROM findings WHERE run_id > 2")
    assert rows and {rid for _, _, rid, _ in rows} == {run_id}
    assert [(c, st, json.loads(ev)["shift"]) for c, st, _, ev in rows] == [
        ("play.side_bet_counting", "open", "2026-12-01/swing")]
    # From now on the new config is the one the findings stand under; the old one is refused.
    r = bacc_audit("audit", "--db", dbp, "--config", tmp / "b.toml")
    assert r.code == 0, r
    r = bacc_audit("audit", "--db", dbp, "--config", tmp / "a.toml")
    assert r.code == EXIT_INPUT and f"(run {run_id + 1} audited under that one)" in r.err
