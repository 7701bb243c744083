"""`bacc-audit verify` against each tampering of issue 29, as an insider with write access to
the database file would do it: a finding deleted, two findings downgraded, an event edited in
place (then `audit --rerun`), a forged finding inserted, and the whole database rewritten
from the same logs after its reports were filed. Each is named (table, id, what changed) with
exit 1; the filed PDF catches the rewrite; `nightly` over a failing ledger files a report
that says so on its cover, in red, and its run says it.

One simulated night (planted deviations, every kind the tamperings need) is filed once by
`nightly`; each test tampers with a copy.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.keys import make_key, signing_config
from helpers.pdfs import pdf_text

from auditor import config, ledger_check
from auditor.jobs import nightly
from auditor.report import signing
from auditor.simulate.layout import SIM_DATE
from auditor.simulate.planted import simulate

pytestmark = pytest.mark.slow  # a simulated night filed by nightly, PDFs and all

DAY = SIM_DATE.isoformat()


@dataclass
class Filed:
    spool: Path
    db: Path
    archive: Path

    def copy(self, to: Path) -> Filed:
        """The database and archive copied (a tampering must not reach the other tests)."""
        to.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.db, to / "audit.duckdb")
        shutil.copytree(self.archive, to / "archive")
        return Filed(self.spool, to / "audit.duckdb", to / "archive")

    def sql(self, statement: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        con = duckdb.connect(str(self.db))
        try:
            con.execute("SET TimeZone = 'UTC'")
            return con.execute(statement, params or []).fetchall()
        finally:
            con.close()

    def pdfs(self) -> list[Path]:
        return sorted(p for p in self.archive.rglob("*.pdf"))


def file_night(base: Path, spool: Path) -> Filed:
    base.mkdir(parents=True)
    db_path, archive = base / "audit.duckdb", base / "archive"
    # `now` past the gaming day: the nightly closes it (store/closed_days.py) whatever the clock.
    nightly.run_nightly(db_path, spool, config.load(None), day=SIM_DATE, archive=archive,
                        now=dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC))
    return Filed(spool, db_path, archive)


@pytest.fixture(scope="module")
def filed(tmp_path_factory: pytest.TempPathFactory) -> Filed:
    base = tmp_path_factory.mktemp("ledger")
    spool = base / "spool"
    simulate(spool, 4, 3, seed=1, deviation_rate=0.08)
    (spool / "ground_truth.ndjson").unlink()
    return file_night(base / "first", spool)


def first_line(out: str) -> str:
    return out.splitlines()[0]


def test_an_untouched_night_verifies_and_its_reports_hold(
    filed: Filed, tmp_path: Path, bacc_audit: Any
) -> None:
    f = filed.copy(tmp_path / "x")
    r = bacc_audit("verify", "--db", f.db, "--against", f.archive)
    assert r.code == 0, r
    assert first_line(r.out).startswith("ledger verified: every record as sealed (whole ledger")
    pdfs = f.pdfs()
    assert len(pdfs) >= 1
    for pdf in pdfs:
        assert f"{pdf}: holds: its " in r.out
        assert f"{pdf}: carries no digital signature" in r.out  # said, not failed: no key
    # the checks are on the record (nightly's before filing: fast from the first leaf, none
    # being on record), and the next fast check starts from the last
    assert f.sql("SELECT c.mode, r.command FROM ledger_checks c JOIN runs r ON r.id = c.run_id "
                 "ORDER BY c.id") == [("fast", "nightly"), ("full", "verify")]


def test_a_deleted_finding_is_named_missing(filed: Filed, tmp_path: Path, bacc_audit: Any) -> None:
    f = filed.copy(tmp_path / "x")
    gone = f.sql("SELECT id FROM findings WHERE code = 'settle.unsettled' ORDER BY id")
    assert len(gone) >= 2
    f.sql("DELETE FROM findings WHERE code = 'settle.unsettled'")
    r = bacc_audit("verify", "--db", f.db)
    assert r.code == 1, r
    assert re.match(
        rf"ledger FAILED: missing: findings {gone[0][0]} \(leaf \d+\): the finding sealed here "
        "is gone$", first_line(r.out)), r.out
    for (fid,) in gone[1:]:
        assert f"missing: findings {fid} (leaf " in r.out


def test_two_downgraded_findings_are_named_with_the_fields_changed(
    filed: Filed, tmp_path: Path, bacc_audit: Any
) -> None:
    f = filed.copy(tmp_path / "x")
    two = f.sql("SELECT id, severity FROM current_findings WHERE code = 'result.misannounced' "
                "ORDER BY id LIMIT 2")
    assert len(two) == 2
    f.sql("UPDATE findings SET severity = 'info', message = 'ok' WHERE id IN (?, ?)",
          [two[0][0], two[1][0]])
    r = bacc_audit("verify", "--db", f.db)
    assert r.code == 1, r
    line = first_line(r.out)
    assert line.startswith(f"ledger FAILED: changed: findings {two[0][0]} (leaf "), line
    assert f'severity was "{two[0][1]}", now "info"' in line and 'now "ok"' in line
    assert f"changed: findings {two[1][0]} (leaf " in r.out
    # audit --rerun keeps the downgraded rows as they are: still named
    assert bacc_audit("audit", "--db", f.db, "--rerun", DAY).code in (0, 1)
    again = bacc_audit("verify", "--db", f.db)
    assert again.code == 1 and f"changed: findings {two[0][0]} (leaf " in again.out


def test_an_event_edited_in_place_then_rerun_is_named_by_its_line_and_column(
    filed: Filed, tmp_path: Path, bacc_audit: Any
) -> None:
    f = filed.copy(tmp_path / "x")
    [(fid, table, seq, expected)] = f.sql(
        "SELECT id, table_id, seq, CAST(expected AS VARCHAR) FROM current_findings "
        "WHERE code = 'result.misannounced' ORDER BY id LIMIT 1")
    right = json.loads(expected)["winner"]
    [(source, line)] = f.sql(
        "SELECT source_id, line_no FROM events WHERE stream = ? AND seq = ?",
        [f"table:{table}", seq])
    f.sql("UPDATE events SET winner = ? WHERE source_id = ? AND line_no = ?",
          [right, source, line])
    assert bacc_audit("audit", "--db", f.db, "--rerun", DAY).code in (0, 1)
    # the rerun withdrew the finding: the edit worked on the audit ...
    [(status,)] = f.sql("SELECT status FROM findings WHERE fingerprint = (SELECT fingerprint "
                        "FROM findings WHERE id = ?) ORDER BY id DESC LIMIT 1", [fid])
    assert status == "withdrawn"
    # ... and not on the ledger: the fast check (nightly's, from the head nightly verified)
    # reads the lines of the round whose finding was withdrawn, the whole check every line
    named = (f"changed: events source {source} line {line}: its column winner holds "
             f"'{right}', its line says ")
    for how in (["--fast"], []):
        r = bacc_audit("verify", "--db", f.db, *how)
        assert r.code == 1, r
        assert named in r.out, r.out


def test_every_line_read_again_in_stretches_finds_what_one_read_finds(
    filed: Filed, tmp_path: Path, monkeypatch: Any
) -> None:
    """The whole check reads the events again a stretch of sources at a time (a 10M-round
    day's one join spilled past the disk): the same events named, the same count."""
    from auditor.ingest import reparse

    f = filed.copy(tmp_path / "x")
    edited = f.sql(  # each source's 3rd card line not a Kh: made one in its column
        "SELECT source_id, line_no FROM (SELECT source_id, line_no, card, row_number() OVER "
        "(PARTITION BY source_id ORDER BY line_no) AS k FROM events WHERE type = 'card') "
        "WHERE k = 3 AND card <> 'Kh' ORDER BY ALL")
    assert len(edited) >= 3
    for source, line in edited:
        f.sql("UPDATE events SET card = 'Kh' WHERE source_id = ? AND line_no = ?",
              [source, line])
    con = duckdb.connect(str(f.db))
    try:
        at_once = reparse.differing(con, limit=2)
        monkeypatch.setattr(reparse, "CHUNK_EVENTS", 40)  # a source at a time
        stretched = reparse.differing(con, limit=2)
        every, total = reparse.differing(con, limit=1000)
    finally:
        con.close()
    assert [(s, ln, c) for s, ln, c, _, _ in every] == [(s, ln, "card") for s, ln in edited]
    assert total == len(edited) and {e[3] for e in every} == {"Kh"}
    assert stretched == at_once == (every[:2], len(edited))


def test_a_forged_finding_is_named_inserted(filed: Filed, tmp_path: Path, bacc_audit: Any) -> None:
    f = filed.copy(tmp_path / "x")
    [(top,)] = f.sql("SELECT max(id) FROM findings")
    f.sql("INSERT INTO findings SELECT * REPLACE (? AS id, fingerprint || '|forged' AS "
          "fingerprint, 'clean' AS message) FROM findings ORDER BY id LIMIT 1", [top + 1])
    r = bacc_audit("verify", "--db", f.db)
    assert r.code == 1, r
    assert re.match(rf"ledger FAILED: inserted: findings {top + 1}: this finding has no leaf: "
                    r"written by run \d+, which ended before it was written",
                    first_line(r.out)), r.out


def test_a_database_rewritten_from_the_same_logs_is_caught_by_the_filed_report(
    filed: Filed, tmp_path: Path, bacc_audit: Any
) -> None:
    first = filed.copy(tmp_path / "first")
    again = file_night(tmp_path / "again", filed.spool)  # the same logs, a new database
    alone = bacc_audit("verify", "--db", again.db)
    assert alone.code == 0, alone  # consistent with itself: only a head from outside shows it
    pdf = first.pdfs()[0]
    r = bacc_audit("verify", "--db", again.db, "--against", pdf)
    assert r.code == 1, r
    assert f"{pdf}: FAILED: report: {pdf.name}: the first " in r.out
    assert "do not give the root the report prints" in r.out


def test_the_report_alone_checks_against_the_head_it_prints(filed: Filed) -> None:
    pdf = filed.pdfs()[0]
    done = subprocess.run([sys.executable, "-m", "auditor.ledger_check", str(pdf)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done
    report = ledger_check.read_report(pdf)
    assert report.cover == (report.head["size"], report.head["root"])
    sealed = [r for r in report.findings if r["ledger"]]
    assert sealed and len(sealed) == len(report.findings)
    assert f"OK: {len(sealed)} findings are leaves of the ledger head it prints" in done.stdout
    # a finding shown otherwise than sealed, or a proof off by a bit: refused
    shown = report.findings[0]
    report.findings[0] = {**shown, "severity": "info"}
    assert "the report shows severity other than its sealed leaf" in \
        ledger_check.check_report(report).problems[0]
    proof = list(shown["ledger"]["proof"])
    proof[0] = ("0" if proof[0][0] != "0" else "1") + proof[0][1:]
    report.findings[0] = {**shown, "ledger": {**shown["ledger"], "proof": proof}}
    assert "do not give the root printed" in ledger_check.check_report(report).problems[0]


def test_nightly_over_a_failing_ledger_files_a_report_that_says_so_in_red(
    filed: Filed, tmp_path: Path, bacc_audit: Any
) -> None:
    f = filed.copy(tmp_path / "x")
    f.sql("UPDATE findings SET severity = 'info', message = 'ok' WHERE id = (SELECT min(id) "
          "FROM current_findings WHERE code = 'result.misannounced')")
    before = set(f.pdfs())
    r = bacc_audit("nightly", "--spool", f.spool, "--date", DAY, "--archive", f.archive,
                   "--db", f.db, "--json")
    assert r.code == 2, r  # a problem of the night: the alert
    s = json.loads(r.out)
    assert s["ledger"].startswith("ledger FAILED: changed: findings ")
    assert any(p.startswith("the audit database failed verification (changed: findings ")
               for p in s["problems"])
    new = sorted(set(f.pdfs()) - before)
    assert new, "the reports that said the database held are filed again as new versions"
    for pdf in new:
        cover = pdf_text(pdf, pages=1)
        assert "The audit database failed verification." in cover
        assert "Ledger check FAILED: changed: findings " in cover
    html = tmp_path / "day.html"
    assert bacc_audit("report", "--date", DAY, "--db", f.db, "--out", html).code == 0
    text = html.read_text()
    assert '<div class="ledger-failed">' in text
    assert ".ledger-failed { border: 2pt solid #c00000; color: #c00000;" in text


def test_a_sign_off_edited_or_deleted_is_named(
    filed: Filed, tmp_path: Path, bacc_audit: Any
) -> None:
    f = filed.copy(tmp_path / "x")
    pdf = f.pdfs()[0]
    r = bacc_audit("signoff", pdf, "--by", "Dana Reyes", "--title", "Compliance Officer",
                   "--db", f.db)
    assert r.code == 0, r
    [(sid, signer)] = f.sql("SELECT id, signer FROM signoffs")
    assert signer == "Dana Reyes"
    assert bacc_audit("verify", "--db", f.db).code == 0  # sealed by the signoff's own run
    [(key,)] = f.sql("SELECT record_key FROM ledger WHERE kind = 'signoff'")
    assert key == str(sid)
    f.sql("UPDATE signoffs SET signer = 'Someone Else' WHERE id = ?", [sid])
    r = bacc_audit("verify", "--db", f.db)
    assert r.code == 1, r
    assert re.match(rf"ledger FAILED: changed: signoffs {sid} \(leaf \d+\): .*signer was "
                    r'"Dana Reyes", now "Someone Else"', first_line(r.out)), r.out
    f.sql("DELETE FROM signoffs WHERE id = ?", [sid])
    r = bacc_audit("verify", "--db", f.db)
    assert r.code == 1, r
    assert re.match(rf"ledger FAILED: missing: signoffs {sid} \(leaf \d+\): the sign-off "
                    "sealed here is gone$", first_line(r.out)), r.out


def test_a_signed_report_whose_signature_fails_is_named_by_verify_against(
    filed: Filed, tmp_path: Path, bacc_audit: Any
) -> None:
    f = filed.copy(tmp_path / "x")
    key = make_key(tmp_path / "key")
    conf = signing_config(tmp_path / "bacc-audit.toml", key)  # its trust root: the test's CA
    pdf = f.pdfs()[0]
    signing_conf = config.load(conf).signing
    assert signing_conf is not None
    pdf.write_bytes(signing.sign(pdf.read_bytes(), signing.load_key(signing_conf)))
    r = bacc_audit("verify", "--db", f.db, "--against", pdf, "--config", conf)
    assert r.code == 0, r
    assert f"{pdf}: signature of {key.subject} holds, trusted through {key.ca_pem}" in r.out
    # a certificate of another CA given as the trust root: not trusted
    other = make_key(tmp_path / "other", ca_cn="Another CA")
    r = bacc_audit("verify", "--db", f.db, "--against", pdf, "--trust-root", other.ca_pem)
    assert r.code == 1, r
    assert (f"{pdf}: FAILED: report: {pdf.name} signature: signature 'bacc-audit': its "
            f"certificate ({key.subject}) does not chain to the trust root") in r.out
    # one byte of the signed report changed (inside an embedded font, so the cover and the
    # attachments still read): the findings and the head still hold, the signature does not
    data = bytearray(pdf.read_bytes())
    font = re.search(rb"/Length1 \d+", data)
    assert font is not None
    data[data.index(b"stream", font.end()) + 200] ^= 0x01
    pdf.write_bytes(bytes(data))
    r = bacc_audit("verify", "--db", f.db, "--against", pdf, "--config", conf, "--json")
    assert r.code == 1, r
    [report] = json.loads(r.out)["reports"]
    assert report["problems"] == [
        f"report: {pdf.name} signature: signature 'bacc-audit': the bytes it signed were "
        "changed after signing (their digest no longer matches)"
    ]
    assert report["signature"]["signed"] and not report["signature"]["ok"]


def test_a_second_nightly_of_the_same_logs_files_nothing_though_the_ledger_grew(
    filed: Filed, tmp_path: Path, bacc_audit: Any
) -> None:
    f = filed.copy(tmp_path / "x")
    before = {p: p.read_bytes() for p in f.pdfs()}
    [(size_before,)] = f.sql("SELECT count(*) FROM ledger")
    r = bacc_audit("nightly", "--spool", f.spool, "--date", DAY, "--archive", f.archive,
                   "--db", f.db, "--json")
    assert r.code in (0, 1), r
    s = json.loads(r.out)
    assert s["ledger"].startswith("ledger verified: every record as sealed"), s["ledger"]
    filed_now = {x["shift"]: x["status"] for x in s["reports"]}
    assert set(filed_now.values()) <= {"unchanged", "skipped"} and "unchanged" in \
        filed_now.values(), filed_now
    assert {p: p.read_bytes() for p in f.pdfs()} == before  # no new version, none rewritten
    # the second run sealed its own leaves (its start, checks, end): the latest head moved,
    # the head each report prints did not
    [(size_after,)] = f.sql("SELECT count(*) FROM ledger")
    assert size_after > size_before
    for pdf in before:
        assert ledger_check.read_report(pdf).head["size"] <= size_before


def test_a_closed_gaming_day_deleted_is_named(
    filed: Filed, tmp_path: Path, bacc_audit: Any
) -> None:
    """The closing of a gaming day decides whether log.table_unclosed is judged for it
    (issue 28): it is sealed like any record, and a deleted one is named."""
    f = filed.copy(tmp_path / "x")
    [(day, how, run_id)] = f.sql("SELECT gaming_day::VARCHAR, how, run_id FROM closed_days")
    assert how == "nightly"
    [(key,)] = f.sql("SELECT record_key FROM ledger WHERE kind = 'closed_day'")
    assert key == f"{day} nightly (run {run_id})"
    f.sql("DELETE FROM closed_days")
    r = bacc_audit("verify", "--db", f.db)
    assert r.code == 1, r
    assert re.match(rf"ledger FAILED: missing: closed_days {re.escape(key)} \(leaf \d+\): the "
                    "closed gaming day sealed here is gone$", first_line(r.out)), r.out


def _round_audit_runs(f: Filed) -> tuple[int, int]:
    """The nightly run that judged the rounds, and how many it judged."""
    [(run, n)] = f.sql("SELECT run_id, count(*) FROM round_audits GROUP BY run_id")
    [(digested,)] = f.sql(
        "SELECT rows FROM run_derived WHERE run_id = ? AND tab = 'round_audits'", [run])
    assert digested == n > 100
    return run, n


def test_a_round_audit_forged_is_named_and_the_next_audit_refuses_to_trust_it(
    filed: Filed, tmp_path: Path, bacc_audit: Any
) -> None:
    """A round_audits row says a round was judged: forged, it would make every later audit
    skip that round. Each run's rows are digested when it ends (store/derived.py)."""
    f = filed.copy(tmp_path / "x")
    run, n = _round_audit_runs(f)
    f.sql("INSERT INTO round_audits SELECT table_id, shoe, round + 1000, events, last_seq, 0, "
          "run_id, audited_at FROM round_audits ORDER BY ALL LIMIT 1")
    r = bacc_audit("verify", "--db", f.db)
    assert r.code == 1, r
    assert re.match(rf"ledger FAILED: inserted: round_audits rows of run {run} \(leaf \d+\): "
                    rf"{n + 1:,} rows stand, the ledger sealed a digest of {n:,}$",
                    first_line(r.out)), r.out
    a = bacc_audit("audit", "--db", f.db)
    assert a.code == 2, a
    assert (f"round_audits: {n + 1:,} rows stand under run {run}, for which the ledger sealed "
            f"a digest of {n:,}: the audit's record of what it did was changed outside the "
            "product") in a.err, a.err
    # under a run that has not begun: named as no run's
    g = filed.copy(tmp_path / "y")
    [(top,)] = g.sql("SELECT max(id) FROM runs")
    g.sql("INSERT INTO round_audits SELECT table_id, shoe, round + 1000, events, last_seq, 0, "
          "?, audited_at FROM round_audits ORDER BY ALL LIMIT 1", [top + 5])
    r = bacc_audit("verify", "--db", g.db)
    assert r.code == 1 and (f"inserted: round_audits rows of run {top + 5}: 1 row stands under "
                            f"run {top + 5}, which is not on the record: no run of the product "
                            "wrote them") in r.out, r.out


def test_a_round_audit_edited_or_deleted_is_named(
    filed: Filed, tmp_path: Path, bacc_audit: Any
) -> None:
    f = filed.copy(tmp_path / "x")
    run, n = _round_audit_runs(f)
    # the same number of rows, one pointing at another round: only the digest shows it
    f.sql("UPDATE round_audits SET round = round + 1 WHERE rowid = (SELECT min(rowid) FROM "
          "round_audits)")
    r = bacc_audit("verify", "--db", f.db)
    assert r.code == 1, r
    assert re.match(rf"ledger FAILED: changed: round_audits rows of run {run} \(leaf \d+\): "
                    rf"its {n:,} rows are not what the ledger sealed \(a row edited\)$",
                    first_line(r.out)), r.out
    g = filed.copy(tmp_path / "y")
    g.sql("DELETE FROM change_audits")
    r = bacc_audit("verify", "--db", g.db)
    assert r.code == 1 and re.search(r"missing: change_audits rows of run \d+ \(leaf \d+\): 0 "
                                     r"rows stand, the ledger sealed a digest of \d+", r.out), r.out


def _shoe_index_runs(f: Filed) -> tuple[str, str, int, int]:
    """(table, shoe, run, shoe_no) of the first shoe the integrity pass indexed."""
    [(table, shoe, run, no)] = f.sql(
        "SELECT table_id, shoe, run_id, shoe_no FROM shoe_index_done WHERE shoe_no > 0 "
        "ORDER BY table_id, shoe LIMIT 1")
    return table, shoe, run, no


def test_a_shoes_k_grams_deleted_are_named_and_the_next_audit_refuses_the_index(
    filed: Filed, tmp_path: Path, bacc_audit: Any
) -> None:
    """A shoe's k-grams deleted from the shoe-integrity index would let a later shoe dealt in
    its order go unfound: the audit counts the index before it searches it and stops, and
    `verify` (the fast check too) names the shoe."""
    f = filed.copy(tmp_path / "x")
    table, shoe, run, no = _shoe_index_runs(f)
    [(n,)] = f.sql("SELECT count(*) FROM shoe_grams WHERE shoe_no = ?", [no])
    [(total,)] = f.sql("SELECT count(*) FROM shoe_grams")
    f.sql("DELETE FROM shoe_grams WHERE shoe_no = ?", [no])
    a = bacc_audit("audit", "--db", f.db)
    assert a.code == 2, a
    [(shoes,)] = f.sql("SELECT count(*) FROM shoe_orders")
    assert (f"the shoe-integrity index holds {shoes:,} shoes and {total - n:,} k-grams, the "
            f"integrity pass wrote {shoes:,} and {total:,}: the index was changed outside the "
            "product") in a.err, a.err
    for how in ((), ("--fast",)):
        r = bacc_audit("verify", "--db", f.db, *how)
        assert r.code == 1, r
        assert (f"missing: shoe_grams: {total - n:,} k-grams stand in the shoe-integrity "
                f"index, the integrity pass wrote {total:,}") in r.out, r.out
    r = bacc_audit("verify", "--db", f.db)
    assert (f"changed: shoe_grams table {table} shoe {shoe}: its k-grams (0 stand, {n} "
            f"written): the integrity pass of run {run} wrote them otherwise") in r.out, r.out


def test_a_shoes_order_edited_or_a_mark_moved_is_named(
    filed: Filed, tmp_path: Path, bacc_audit: Any
) -> None:
    """As many rows as before, one of them edited: only the digests show it, so the whole
    check names it (the order against the pass's `done` row, the marks against their run's
    seal)."""
    f = filed.copy(tmp_path / "x")
    table, shoe, run, _ = _shoe_index_runs(f)
    f.sql("UPDATE shoe_orders SET codes = list_reverse(codes) WHERE table_id = ? AND shoe = ?",
          [table, shoe])
    r = bacc_audit("verify", "--db", f.db)
    assert r.code == 1, r
    assert (f"changed: shoe_orders table {table} shoe {shoe}: its order: the integrity pass "
            f"of run {run} wrote it otherwise") in r.out, r.out
    g = filed.copy(tmp_path / "y")
    [(marked_by,)] = g.sql("SELECT min(run_id) FROM shoe_index_marks")
    g.sql("UPDATE shoe_index_marks SET last_line = last_line + 1000")
    r = bacc_audit("verify", "--db", g.db)
    assert r.code == 1 and re.search(
        rf"changed: shoe_index_marks rows of run {marked_by} \(leaf \d+\): its \d+ rows? (are|is) "
        r"not what the ledger sealed", r.out), r.out


def test_ingests_stream_summary_changed_is_named_and_a_row_deleted_stops_the_audit(
    filed: Filed, tmp_path: Path, bacc_audit: Any
) -> None:
    """`stream_sources` tells every pass which files hold a stream's events: a row deleted
    would judge the stream's rounds without that file's events. The audit and a batch
    ingest sum it against the sealed pieces and stop; `verify`, the fast check too, groups
    the events again and names the row. So it names a seq range moved, and a row moved to
    another stream, which keep every source's sum (the audit is not stopped by those)."""
    f = filed.copy(tmp_path / "x")
    [(stream, source, lo, hi, n)] = f.sql(
        "SELECT * FROM stream_sources ORDER BY source_id, stream LIMIT 1")
    f.sql("DELETE FROM stream_sources WHERE stream = ? AND source_id = ?", [stream, source])
    [(total,)] = f.sql("SELECT sum(events) FROM source_extents WHERE source_id = ?", [source])
    a = bacc_audit("audit", "--db", f.db)
    assert a.code == 2, a
    assert (f"stream_sources: the streams of source {source} sum {total - n:,} events, its "
            f"pieces loaded {total:,}: ingest's summary of where each stream's events are was "
            "changed outside the product") in a.err, a.err
    # Nor does ingest judge new lines' seq gaps and resends through it: nothing loads.
    [(events,)] = f.sql("SELECT count(*) FROM events")
    i = bacc_audit("ingest", str(f.spool), "--db", f.db)
    assert i.code == 2 and f"the streams of source {source} sum" in i.err, i
    assert f.sql("SELECT count(*) FROM events") == [(events,)]
    for how in ((), ("--fast",)):
        r = bacc_audit("verify", "--db", f.db, *how)
        assert r.code == 1, r
        assert (f"missing: stream_sources stream {stream} source {source}: the source has "
                f"{n:,} events on this stream (seq {lo}-{hi}) and no row says so") in r.out, r.out
    g = filed.copy(tmp_path / "y")
    g.sql("UPDATE stream_sources SET max_seq = max_seq + 5 WHERE stream = ? AND source_id = ?",
          [stream, source])
    for how in ((), ("--fast",)):
        r = bacc_audit("verify", "--db", g.db, *how)
        assert r.code == 1, r
        assert (f"changed: stream_sources stream {stream} source {source}: says {n:,} events, "
                f"seq {lo}-{hi + 5}; the source has {n:,}, seq {lo}-{hi}") in r.out, r.out
    g.sql("UPDATE stream_sources SET max_seq = max_seq - 5 WHERE stream = ? AND source_id = ?",
          [stream, source])
    assert bacc_audit("verify", "--db", g.db).code == 0
    g.sql("UPDATE stream_sources SET stream = 'table:ZZ-99' WHERE stream = ? AND source_id = ?",
          [stream, source])
    assert bacc_audit("audit", "--db", g.db).code in (0, 1)  # every source's sum holds
    r = bacc_audit("verify", "--db", g.db, "--fast")
    assert r.code == 1, r
    assert (f"inserted: stream_sources stream table:ZZ-99 source {source}: says {n:,} events "
            f"(seq {lo}-{hi}); the source has none on this stream") in r.out, r.out
    assert f"missing: stream_sources stream {stream} source {source}: " in r.out, r.out
