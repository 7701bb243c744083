"""The findings filter (auditor.store.filters) that `bacc-audit findings` uses and the board is
to use: its SQL and its Python pick the same findings, `*` is the only wildcard, and a filter
that can match nothing is refused with the near one named."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pytest

from auditor import config
from auditor.errors import UserError
from auditor.finding import Finding
from auditor.store import filters, findings
from auditor.store.filters import Filter

CONFIG = Path(__file__).resolve().parents[2] / "sample_logs" / "property.toml"
START = dt.datetime(2026, 11, 29, 3, 0, tzinfo=dt.UTC)
# (code, table, pit, minutes after START)
PLANTED = [
    ("draw.player_missed", "MB-01", "P1", 0),
    ("settle.wrong_amount", "MB-02", "P1", 30),
    ("announce.tie_missing", "MB-01", "P1", 90),
    ("log.malformed", "MB-03", "P2", 200),
    ("procedure.notice_late", None, "P2", 400),
    ("announce.tie_missing", "CF-01", "P2", 600),
]


@pytest.fixture
def planted(con: duckdb.DuckDBPyConnection, run_id: int) -> list[dict]:
    found = [
        Finding(code, i, f"finding {i}", None, None, None, fingerprint=f"{code}|{i}",
                table=table, pit=pit, ts=START + dt.timedelta(minutes=minutes))
        for i, (code, table, pit, minutes) in enumerate(PLANTED)
    ]
    findings.staged(con, "planted", found)
    assert findings.record(con, run_id, "SELECT * FROM planted", staged=True) == len(found)
    return findings.select(con)


@pytest.mark.parametrize(
    "only",
    [
        Filter(),
        Filter(severity="major"),
        Filter(severity="critical", pit="P1"),
        Filter(codes=("announce.*", "log.*")),
        Filter(codes=("announce.tie_missing",), table="CF-01"),
        Filter(table="MB-01"),
        Filter(window=(START + dt.timedelta(minutes=30), START + dt.timedelta(minutes=400))),
        Filter(codes=("draw_player*",)),  # `_` is itself, not any character
    ],
)
def test_the_sql_and_the_python_pick_the_same_findings(
    con: duckdb.DuckDBPyConnection, planted: list[dict], only: Filter
) -> None:
    where, params = only.where()
    in_sql = sorted(
        r[0] for r in con.execute(
            f"SELECT fingerprint FROM current_findings WHERE {where}", params
        ).fetchall()
    )
    in_python = sorted(
        r["fingerprint"] for r in planted
        if only.matches(r, dt.datetime.fromisoformat(r["ts"]).astimezone(dt.UTC))
    )
    assert in_sql == in_python
    if only.codes != ("draw_player*",):
        assert in_sql, only


def test_only_the_star_is_a_wildcard() -> None:
    assert filters.like("a_b%c\\*") == "a\\_b\\%c\\\\%"
    assert filters.code_pattern("log.*").fullmatch("log.seq_gap")
    assert not filters.code_pattern("log.seq.gap").fullmatch("log.seq_gap")
    assert filters.unmatched(["log.*", "nothing.*"], ["log.seq_gap"]) == "nothing.*"
    assert filters.unmatched(["log.*"], ["log.seq_gap"]) is None


def test_the_command_line_refuses_a_code_or_table_that_matches_nothing(
    con: duckdb.DuckDBPyConnection, planted: list[dict]
) -> None:
    filters.validate(con, ["draw.*"], "MB-01")
    with pytest.raises(UserError) as e:
        filters.validate(con, ["draw.player_mised"], None)
    assert str(e.value).startswith(
        "--code draw.player_mised: no such finding code; did you mean draw.player_missed?"
    )
    with pytest.raises(UserError) as e:
        filters.validate(con, [], "MB-1")
    assert str(e.value) == (
        "--table MB-1: no such table in this database; did you mean MB-01? "
        "(it holds CF-01, MB-01, MB-02, MB-03)"
    )


def test_the_board_query_is_read_and_refused_as_before() -> None:
    conf = config.load(CONFIG)
    zone = dt.UTC
    got = Filter.from_query(
        {"code": ["log.*", " "], "severity": "minor", "pit": " P1 ", "shift": "2026-11-28/grave"},
        conf, zone,
    )
    assert got == Filter(severity="minor", codes=("log.*",), pit="P1",
                         window=conf.shift_window(dt.date(2026, 11, 28), "grave", zone))
    assert got.query() == [("code", "log.*"), ("severity", "minor"), ("pit", "P1")]
    for query, said in (
        ({"code": "draw.banker_miss"}, "code 'draw.banker_miss': no such finding code"),
        ({"severity": "grave"}, "severity must be one of critical, major, minor, info, "
                                "not 'grave'"),
        ({"date": "2026-11-28", "shift": "2026-11-28/grave"}, "give date or shift, not both"),
    ):
        with pytest.raises(UserError) as e:
            Filter.from_query(query, conf, zone)
        assert str(e.value).startswith(said), query
