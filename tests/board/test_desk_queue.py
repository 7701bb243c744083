"""The work queue (`/`) and its bulk acknowledgement, and the roles of a board with logins
(docs/board.md "The work queue", "Roles"), over the sample night (22 findings: 4 critical,
13 major, 5 minor)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from helpers.desk import ORIGIN, cells, csrf, desk_client, run_args
from helpers.sample import plain

from auditor.board.settings import settings_from_table
from auditor.errors import UserError
from auditor.store import acks

CRITICAL = ["F6ff51cc008a3", "Fc95f8bf836d2", "Fa986f0e645fc", "Faf92f5c193c6"]


def _acks(path: Path) -> list[acks.Acknowledgement]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return acks.list_acks(con)
    finally:
        con.close()


def test_the_queue_is_what_needs_action_gravest_then_nearest_video(night_copy: Path) -> None:
    with desk_client(night_copy) as c:
        page = c.get("/")
        assert page.status_code == 200
        text = plain(page.text)
        assert "Not acknowledged: 4 critical 13 major 5 minor 0 info" in text
        ids = cells(page.text, "fid")
        severities = cells(page.text, "sev")
        assert len(ids) == 17 and severities == ["critical"] * 4 + ["major"] * 13
        assert ids[:4] == CRITICAL  # the critical ones, by their video deadline
        videos = cells(page.text, "video")
        assert videos[:4] == ["2026-12-05 21:18", "2026-12-05 23:11", "2026-12-06 03:02",
                              "2026-12-06 03:32"]
        assert videos[4:] == sorted(videos[4:])
        assert "Seat 7's 100.00 Player wager should have been paid 100.00 and was paid 90.00" \
            in text
        # Every severity on asking; a filter narrows it.
        everything = c.get("/?all=1")
        assert cells(everything.text, "sev").count("minor") == 5
        assert len(cells(everything.text, "fid")) == 22
        table = c.get("/", params={"table": "MB-01"})
        assert cells(table.text, "fid") == ["Fc95f8bf836d2", "Fc407b86fa0d7"]
        # The feed moved to /feed and lists every standing finding.
        assert c.get("/feed").status_code == 200


def test_bulk_acknowledgement_writes_one_record_and_run_per_finding(night_copy: Path) -> None:
    with desk_client(night_copy) as c:
        token = csrf(c, "/")
        r = c.post("/ack", headers=ORIGIN, data={
            "csrf": token, "finding": CRITICAL[:3], "name": "J. Rivera",
            "disposition": "video reviewed: dealer error", "note": "one cause: a new dealer",
            "back": "table=",
        })
        assert r.status_code == 303 and r.headers["location"].endswith("acked=3")
        after = c.get(r.headers["location"])
        assert "3 acknowledgements recorded." in plain(after.text)
        assert "Not acknowledged: 1 critical 13 major" in plain(after.text)
        assert cells(after.text, "fid")[0] == "Faf92f5c193c6"
    stored = _acks(night_copy)
    assert [acks.as_dict(a)["finding_id"] for a in stored] == CRITICAL[:3]
    assert {(a.reviewer, a.disposition, a.note) for a in stored} == {
        ("J. Rivera", "video reviewed: dealer error", "one cause: a new dealer")}
    assert len({a.id for a in stored}) == 3 and len({a.run_id for a in stored}) == 1
    [args] = run_args(night_copy, "ack")  # one run names them all
    assert (args["via"], args["role"], args["by"]) == ("board", "officer", "J. Rivera")
    assert [acks.as_dict(a)["fingerprint"] for a in stored] == args["fingerprints"]


def test_a_bulk_acknowledgement_refused_stores_nothing(night_copy: Path) -> None:
    with desk_client(night_copy) as c:
        token = csrf(c, "/")
        form = {"finding": CRITICAL[:2], "name": "J. Rivera", "disposition": "no action needed"}
        assert c.post("/ack", headers=ORIGIN, data=form).status_code == 403  # no token
        assert c.post("/ack", headers={"Origin": "http://evil.example"},
                      data={**form, "csrf": token}).status_code == 403
        unknown = c.post("/ack", headers=ORIGIN,
                         data={**form, "csrf": token, "finding": [CRITICAL[0], "F000000000000"]})
        assert unknown.status_code == 400 and "F000000000000" in plain(unknown.text)
        none = c.post("/ack", headers=ORIGIN, data={**form, "csrf": token, "finding": []})
        assert none.status_code == 400 and "Tick the findings to acknowledge." in none.text
        nothing = c.post("/ack", headers=ORIGIN,
                         data={**form, "csrf": token, "disposition": " "})
        assert nothing.status_code == 400 and "Say what was decided." in plain(nothing.text)
        # The ticks stay ticked, for the officer to try again.
        assert nothing.text.count("checked") == 2
    assert _acks(night_copy) == []


def test_a_viewer_reads_and_cannot_write_an_officer_can(night_copy: Path) -> None:
    fid = CRITICAL[0]
    with desk_client(night_copy, login="v.watcher") as c:
        page = c.get("/")
        assert page.status_code == 200 and "v.watcher (viewer)" in page.text
        assert 'name="finding"' not in page.text  # no tick boxes, no form
        token = csrf(c, f"/finding/{fid}")
        assert "an officer's login acknowledges" in c.get(f"/finding/{fid}").text
        data = {"csrf": token, "finding": [fid], "disposition": "no action needed"}
        refused = c.post("/ack", headers=ORIGIN, data=data)
        assert refused.status_code == 403 and "role viewer" in plain(refused.text)
        assert c.post(f"/finding/{fid}/ack", headers=ORIGIN, data=data).status_code == 403
    assert _acks(night_copy) == []
    with desk_client(night_copy, login="j.rivera") as c:
        token = csrf(c, "/")
        r = c.post("/ack", headers=ORIGIN, data={
            "csrf": token, "finding": [fid], "disposition": "no action needed"})
        assert r.status_code == 303
        token = csrf(c, f"/finding/{CRITICAL[1]}")
        r = c.post(f"/finding/{CRITICAL[1]}/ack", headers=ORIGIN,
                   data={"csrf": token, "disposition": "dealer retrained"})
        assert r.status_code == 303
    assert [(a.reviewer, a.disposition) for a in _acks(night_copy)] == [
        ("j.rivera", "no action needed"), ("j.rivera", "dealer retrained")]
    assert [(a["role"], a["login"]) for a in run_args(night_copy, "ack")] == [
        ("officer", "password"), ("officer", "password")]


def test_a_role_is_viewer_or_officer_and_a_token_reads_by_default() -> None:
    with pytest.raises(UserError, match=r"users\[0\]\.role must be viewer .* not 'admin'"):
        settings_from_table({"users": [{"name": "a", "password_hash": "pbkdf2_sha256$1$x$y",
                                        "role": "admin"}]}, "p.toml")
    s = settings_from_table({
        "users": [{"name": "a", "password_hash": "pbkdf2_sha256$1$x$y"}],
        "tokens": [{"name": "case", "sha256": "0" * 64}],
    }, "p.toml")
    assert (s.users[0].role, s.tokens[0].role) == ("officer", "viewer")
