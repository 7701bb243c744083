"""Recording findings that are already standing, withdrawn, or new (store/findings.py).

A finding is standing when the latest row of its fingerprint is open (`current_findings`).
Staged findings (a poll's, a pass's) are held against the rows of their own fingerprints
only, not the view's window over every finding; both ways must answer alike."""

from __future__ import annotations

import datetime as dt
import json
import random
from dataclasses import replace

import duckdb
import pytest

from auditor.finding import Finding
from auditor.store import findings

WHEN = dt.datetime(2026, 12, 1, 23, 0, tzinfo=dt.UTC)


def _found(*keys: int) -> list[Finding]:
    return [
        Finding(code="draw.player_missed", message=f"round {k}", table="MB-01", shoe="S1",
                round=k, seq=10 * k, ts=WHEN, fingerprint=f"fp-{k}", expected={"draw": True},
                observed={"draw": False}, source=f"mb01.jsonl:{k}")
        for k in keys
    ]


def _rows(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    return con.execute("SELECT fingerprint, status FROM findings ORDER BY id").fetchall()


def _standing(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute(
        "SELECT fingerprint FROM current_findings ORDER BY fingerprint").fetchall()]


def test_a_standing_finding_is_not_recorded_twice_and_a_withdrawn_one_opens_again(
    con: duckdb.DuckDBPyConnection, run_id: int
) -> None:
    assert findings.record_staged(con, run_id, "found", _found(1, 2)) == 2
    assert findings.record_staged(con, run_id, "found", _found(1, 2, 3)) == 1
    assert _standing(con) == ["fp-1", "fp-2", "fp-3"]
    assert findings.withdraw(con, run_id, "fingerprint = 'fp-2'") == 1
    assert _standing(con) == ["fp-1", "fp-3"]
    # fp-2's latest row is withdrawn: found again, it opens again; fp-1 and fp-3 stand
    assert findings.record_staged(con, run_id, "found", _found(1, 2, 3)) == 1
    assert _rows(con) == [("fp-1", "open"), ("fp-2", "open"), ("fp-3", "open"),
                          ("fp-2", "withdrawn"), ("fp-2", "open")]
    assert _standing(con) == ["fp-1", "fp-2", "fp-3"]
    # the same findings given as SQL (not staged) are judged by the view: nothing new
    con.execute("CREATE TEMP TABLE again AS SELECT * EXCLUDE (severity, rule) FROM found")
    assert findings.record(con, run_id, "SELECT * FROM again") == 0
    assert len(_rows(con)) == 5


def _varied() -> list[Finding]:
    """Findings as a replay gives them: a lesser severity, a pack's provision, a dealer, the
    same fingerprint twice, times out of order and in another zone, evidence as JSON."""
    east = dt.timezone(dt.timedelta(hours=-5))
    out = _found(1, 2, 3, 4)
    out[1] = replace(out[1], code="chemin.option", severity="minor",
                     rule="N.J.A.C. 13:69F-7.10(c)")
    out[0] = replace(out[0], dealer="D5036")
    out[3] = replace(out[3], evidence={"cards": ["Ts", "9h"], "amount": "105.00"},
                     ts=dt.datetime(2026, 12, 1, 17, 30, tzinfo=east))  # 22:30 UTC: first
    return [*out, *_found(1)]


def test_a_polls_few_findings_are_written_as_the_statement_writes_them(
    run_id: int, con: duckdb.DuckDBPyConnection
) -> None:
    """The same findings recorded with a staged table (`record`'s statement) and without
    (`_record_few`, a poll's), one of them standing already: the same rows, in the same
    order."""
    cols = ("fingerprint, run_id, status, severity, rule, code, table_id, pit, shoe, round, "
            "seq, ts, message, expected, observed, source, evidence, dealer")
    got = []
    for name in ("staged_findings", None):
        con.execute("DELETE FROM findings")
        findings.record_staged(con, run_id, "first", _found(3))
        assert findings.record_staged(con, run_id, name, _varied()) == 3
        got.append(con.execute(f"SELECT {cols} FROM findings ORDER BY id").fetchall())
    assert got[0] == got[1]
    rows = [dict(zip(cols.split(", "), r, strict=True)) for r in got[1]]
    assert [r["fingerprint"] for r in rows] == ["fp-3", "fp-4", "fp-1", "fp-2"]
    assert (rows[3]["severity"], rows[3]["rule"]) == ("minor", "N.J.A.C. 13:69F-7.10(c)")
    assert (rows[2]["severity"], rows[2]["dealer"]) == ("critical", "D5036")
    assert rows[1]["ts"] == dt.datetime(2026, 12, 1, 22, 30, tzinfo=dt.UTC)
    assert json.loads(rows[1]["evidence"]) == {"amount": "105.00", "cards": ["Ts", "9h"]}


def _starts(lengths: list[int]) -> list[int]:
    out, at = [], 0
    for n in lengths:
        out.append(at)
        at += n
    return out


# The withdrawal as it read before: every finding's standing row, from the view.
_BY_THE_VIEW = """
INSERT INTO findings (fingerprint, run_id, recorded_at, status, severity, rule, code, table_id,
                      pit, shoe, round, seq, ts, message, expected, observed, source, evidence,
                      dealer)
SELECT fingerprint, {run}, now(), 'withdrawn', severity, rule, code, table_id, pit, shoe, round,
       seq, ts, message, expected, observed, source, {evidence}, dealer
FROM current_findings {joined} WHERE {where}
"""
_WHERES = [
    ("code IN ('draw.player_missed', 'chemin.option')", "", None),
    ("code = 'draw.player_missed' AND fingerprint NOT IN (SELECT fingerprint FROM kept)", "",
     None),
    ("table_id = 'MB-02' OR round > 5", "", None),
    ("EXISTS (SELECT 1 FROM kept k WHERE k.fingerprint = current_findings.fingerprint)", "",
     None),
    ("code <> 'chemin.option'", "JOIN picked p USING (table_id, round)",
     ("withdrawn_because", "p.why::JSON")),
]


@pytest.mark.parametrize("seed", range(6))
def test_a_withdrawal_reads_the_standing_rows_the_view_gives(
    con: duckdb.DuckDBPyConnection, run_id: int, seed: int
) -> None:
    """Random histories (a fingerprint opened, withdrawn, opened again...), interleaved:
    each withdrawal writes the rows the view-wide statement wrote, no more, no fewer."""
    rnd = random.Random(seed)
    histories = []
    for k in range(60):
        code = rnd.choice(["draw.player_missed", "chemin.option", "log.seq_gap"])
        statuses = ["open" if i % 2 == 0 else "withdrawn" for i in range(rnd.randint(1, 4))]
        histories.append((f"{code}|fp-{k}", code, f"MB-0{rnd.randint(1, 4)}",
                          rnd.randint(1, 9), statuses))
    rows = [(fp, code, table, rnd_round, status)
            for fp, code, table, rnd_round, statuses in histories for status in statuses]
    # the histories interleaved, each in its own order
    pending = [list(range(i, i + len(h[4]))) for i, h in zip(
        _starts([len(h[4]) for h in histories]), histories, strict=True)]
    interleaved = []
    while any(pending):
        queue = rnd.choice([q for q in pending if q])
        interleaved.append(rows[queue.pop(0)])
    for fp, code, table, round_, status in interleaved:
        con.execute(
            "INSERT INTO findings (fingerprint, run_id, recorded_at, status, severity, rule, "
            "code, table_id, pit, shoe, round, seq, ts, message, expected, observed, source, "
            "evidence) VALUES (?, ?, now(), ?, 'major', 'r', ?, ?, 'P1', 'S1', ?, ?, ?, 'm', "
            "'{}', '{}', 'f:1', '{\"k\": 1}')",
            [fp, run_id, status, code, table, round_, round_ * 10, WHEN])
    con.execute("CREATE TEMP TABLE kept AS SELECT fingerprint FROM findings "
                "USING SAMPLE 40 PERCENT (bernoulli, 7)")
    con.execute("CREATE TEMP TABLE picked AS SELECT * FROM (VALUES ('MB-01', 3, '\"a\"'), "
                "('MB-02', 5, '\"b\"'), ('MB-04', 9, '\"c\"')) t(table_id, round, why)")
    cols = ("fingerprint, status, severity, code, table_id, round, seq, CAST(evidence AS "
            "VARCHAR)")
    for where, joined, because in _WHERES:
        got = []
        for way in ("now", "view"):
            con.execute("BEGIN TRANSACTION")
            [(top,)] = con.execute("SELECT max(id) FROM findings").fetchall()
            if way == "now":
                findings.withdraw(con, run_id, where, joined=joined, because=because)
            else:
                evidence = "evidence" if because is None else (
                    f"json_merge_patch(coalesce(evidence, '{{}}'::JSON), "
                    f"json_object('{because[0]}', {because[1]}))")
                con.execute(_BY_THE_VIEW.format(run=run_id, evidence=evidence, joined=joined,
                                                where=where))
            got.append(sorted(con.execute(
                f"SELECT {cols} FROM findings WHERE id > ?", [top]).fetchall()))
            con.execute("ROLLBACK")
        assert got[0] == got[1], where
        assert got[0] or "EXISTS" in where, where  # each draw withdraws something
