"""Ingest (auditor.ingest.run) through the library: what loads, what is quarantined and why, the
manifest, the log findings, idempotency, altered files, seq gaps, transactions, chunking.

Messages are asserted exactly, as a user reads them (`FileResult.problems`, `.message`, the
quarantine reason, the finding's message/source/expected/observed).
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from helpers.db import AuditDb, open_audit, set_chunk_bytes
from helpers.events import contract_lines, event, line, utc
from helpers.growing import malformed_fingerprint

import auditor.ingest.log_findings as log_findings_mod
import auditor.ingest.reader as reader_mod
from auditor.errors import UserError
from auditor.ingest.paths import discover
from auditor.ingest.result import FileResult

L = contract_lines()
T_BAD = "2026-11-28T22:00:07-05:00"  # between contract lines 2 (22:00:05) and 3 (22:00:09)
MALFORMED_RULE = "Event log v1"
GAP_RULE = "Event log v1: seq increases by 1 per event in a stream"


def without(e: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in e.items() if k not in keys}


def bad_wager(**fields: Any) -> dict[str, Any]:
    changed: dict[str, Any] = {"seq": 99, "ts": T_BAD} | fields
    return event("wager", **changed)


def bad_card(**fields: Any) -> dict[str, Any]:
    changed: dict[str, Any] = {"seq": 99, "ts": T_BAD} | fields
    return event("card", **changed)


def amount_written(written: str, **fields: Any) -> str:
    """A bad_wager line whose amount is `written` exactly as given (a JSON number's text)."""
    text = line(bad_wager(amount=0, **fields))
    assert text.count('"amount":0') == 1, text
    return text.replace('"amount":0', f'"amount":{written}')


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------------------------
# The contract's example round
# --------------------------------------------------------------------------------------------


def test_contract_example_loads_15_typed_events(audit: AuditDb) -> None:
    path = audit.write("example.jsonl", L)
    r = audit.ingest_file(path)

    assert (r.status, r.lines, r.events, r.quarantined, r.duplicates) == ("ingested", 15, 15, 0, 0)
    assert r.problems == []
    assert r.per_stream == {"table:MB-07": 15}
    assert r.message == f"{path}: 15 events, 0 quarantined"
    assert r.sha256 == sha256(path) and r.size == path.stat().st_size

    ev = audit.events()
    assert [e["seq"] for e in ev] == list(range(1, 16))
    assert [e["line_no"] for e in ev] == list(range(1, 16))
    assert {e["stream"] for e in ev} == {"table:MB-07"}
    assert {e["table_id"] for e in ev} == {"MB-07"}
    assert [e["raw"] for e in ev] == L  # the original line, byte for byte
    assert [e["type"] for e in ev] == [json.loads(x)["type"] for x in L]
    assert {e["ts_offset_min"] for e in ev} == {-300}
    by_seq = {e["seq"]: e for e in ev}

    # Times are stored in UTC: 22:00:00-05:00 is 03:00:00Z the next day.
    assert by_seq[1]["ts"] == utc(2026, 11, 29, 3, 0, 0)
    assert by_seq[1]["ts"].utcoffset().total_seconds() == 0
    assert by_seq[15]["ts"] == utc(2026, 11, 29, 3, 1, 2)

    opened = by_seq[1]
    assert (opened["pit"], opened["game"], opened["jurisdiction"], opened["variant"]) == (
        "P3",
        "mini_baccarat",
        "NJ",
        "standard",
    )
    assert (opened["procedure"], opened["seats"], opened["side_bets"]) == (1, 7, ["tie"])
    assert (by_seq[2]["shoe"], by_seq[2]["decks"], by_seq[2]["shuffle"], by_seq[2]["batch"]) == (
        "MB-07-0001",
        8,
        "manual",
        "red",
    )
    assert by_seq[3]["cards"] == ["3h", "Kc", "8s", "2d"]

    wager = by_seq[5]
    assert wager["type"] == "wager"
    assert (wager["shoe"], wager["round"], wager["seat"], wager["bet"]) == (
        "MB-07-0001",
        1,
        3,
        "banker",
    )
    assert wager["amount"] == Decimal("100.00")
    assert isinstance(wager["amount"], Decimal)
    assert str(wager["amount"]) == "100.00"
    assert wager["ts"] == utc(2026, 11, 29, 3, 0, 31)

    assert [(by_seq[s]["to_hand"], by_seq[s]["card"]) for s in range(7, 12)] == [
        ("player", "4d"),
        ("banker", "Qs"),
        ("player", "Th"),
        ("banker", "7c"),
        ("player", "2h"),
    ]
    announce = by_seq[12]
    assert (announce["kind"], announce["player_count"], announce["banker_count"]) == (
        "result",
        6,
        7,
    )
    assert announce["winner"] == "banker"
    assert (by_seq[13]["bet"], by_seq[13]["amount"]) == ("banker", Decimal("100.00"))
    assert (by_seq[14]["amount"], by_seq[14]["mode"]) == (Decimal("5.00"), "collect")
    # Fields a type does not carry stay NULL.
    assert wager["card"] is None and wager["mode"] is None and by_seq[7]["amount"] is None

    [src] = audit.sources()
    assert src["path"] == str(path.resolve())
    assert src["sha256"] == sha256(path)
    assert (src["size"], src["lines"], src["events"], src["quarantined"], src["duplicates"]) == (
        path.stat().st_size,
        15,
        15,
        0,
        0,
    )
    assert (src["first_ts"], src["last_ts"]) == (
        utc(2026, 11, 29, 3, 0, 0),
        utc(2026, 11, 29, 3, 1, 2),
    )
    assert (src["status"], src["run_id"], src["note"]) == ("ingested", audit.run_id, "")
    assert {e["source_id"] for e in ev} == {src["id"]}
    assert audit.quarantine() == []
    assert audit.findings() == []


# One file holding every accepted variation, loaded once for the tests that follow. Each group
# has its own table, so (table, seq) names a line.
CARDS = [("10S", "Ts"), ("ts", "Ts"), ("Ts", "Ts"), ("qh", "Qh"), ("AD", "Ad"), ("10c", "Tc")]
AMOUNTS = [
    ("100", Decimal("100.00")),
    ('"125.50"', Decimal("125.50")),
    ('"125.5"', Decimal("125.50")),
    ('"125"', Decimal("125.00")),
    ("0.07", Decimal("0.07")),
    ("1.15", Decimal("1.15")),
    ("0", Decimal("0.00")),
    ("2.5", Decimal("2.50")),
    ('"9999999999999999.99"', Decimal("9999999999999999.99")),
    ("9999999999999.99", Decimal("9999999999999.99")),
    # A JSON number is read as written, not through a double: 16 whole digits and 2 decimals
    # are exact (a double would give 10000000000000000.00 and 1234567890123456.50).
    ("9999999999999999.99", Decimal("9999999999999999.99")),
    ("1234567890123456.47", Decimal("1234567890123456.47")),
    ("100.0", Decimal("100.00")),
]
TIMES = [
    ("2026-11-29T03:00:00Z", utc(2026, 11, 29, 3, 0, 0), 0),
    ("2026-11-29t03:00:00z", utc(2026, 11, 29, 3, 0, 0), 0),
    ("2026-11-28 22:14:03-05:00", utc(2026, 11, 29, 3, 14, 3), -300),
    ("2026-11-28T22:14:03.120-05:00", utc(2026, 11, 29, 3, 14, 3, 120000), -300),
    ("2026-11-29T08:30:00+05:30", utc(2026, 11, 29, 3, 0, 0), 330),
    ("2026-11-29T03:00:00-00:00", utc(2026, 11, 29, 3, 0, 0), 0),
    ("2026-11-29T16:00:00+13:00", utc(2026, 11, 29, 3, 0, 0), 780),
    ("2026-11-29T03:00:00+23:59", utc(2026, 11, 28, 3, 1, 0), 1439),
    # A leap second is stored as the instant after 23:59:59 (DuckDB knows no second 60).
    ("2016-12-31T23:59:60Z", utc(2017, 1, 1, 0, 0, 0), 0),
    ("2016-12-31T18:59:60.250-05:00", utc(2017, 1, 1, 0, 0, 0, 250000), -300),
]


def _typed_lines() -> list[str]:
    out = [line(event("card", seq=i, table="T-CARD", card=w)) for i, (w, _) in enumerate(CARDS)]
    out.append(line(event("burn", seq=10, table="T-CARD", cards=["10h", "kC", "as", "9D"])))
    out.append(
        line(event("face_up_in_shoe", seq=11, table="T-CARD", card="10d", burned=["jH", "10S"]))
    )
    for i, (written, _) in enumerate(AMOUNTS):
        text = line(event("wager", seq=i, table="T-AMT", amount=0))
        out.append(text.replace('"amount":0', f'"amount":{written}'))
    out += [line(event("wager", seq=i, table="T-TS", ts=t)) for i, (t, _, _) in enumerate(TIMES)]
    out.append(line(event("round_start", seq=1, table="T-DLR", dealer="E10422")))
    out.append(line(event("round_start", seq=2, table="T-DLR", dealer=10422)))
    out.append(line(event("procedure_notice", seq=1)))
    return out


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AuditDb, FileResult]]:
    audit = open_audit(tmp_path_factory.mktemp("typed"))
    path = audit.write("typed.jsonl", _typed_lines())
    result = audit.ingest_file(path)
    yield audit, result
    audit.con.close()


def _typed_row(typed: tuple[AuditDb, FileResult], stream: str, seq: int) -> dict[str, Any]:
    [row] = typed[0].events("stream = ? AND seq = ?", stream, seq)
    return row


def test_every_accepted_variation_loads(typed: tuple[AuditDb, FileResult]) -> None:
    _, r = typed
    n = len(_typed_lines())
    assert (r.lines, r.events, r.quarantined, r.problems) == (n, n, 0, [])
    assert r.per_stream == {
        "pit:P3": 1,
        "table:T-AMT": len(AMOUNTS),
        "table:T-CARD": len(CARDS) + 2,
        "table:T-DLR": 2,
        "table:T-TS": len(TIMES),
    }


@pytest.mark.parametrize(("i", "written", "stored"), [(i, *c) for i, c in enumerate(CARDS)])
def test_cards_are_normalised(
    typed: tuple[AuditDb, FileResult], i: int, written: str, stored: str
) -> None:
    row = _typed_row(typed, "table:T-CARD", i)
    assert json.loads(row["raw"])["card"] == written
    assert row["card"] == stored


def test_card_lists_are_normalised(typed: tuple[AuditDb, FileResult]) -> None:
    assert _typed_row(typed, "table:T-CARD", 10)["cards"] == ["Th", "Kc", "As", "9d"]
    face_up = _typed_row(typed, "table:T-CARD", 11)
    assert (face_up["card"], face_up["burned"]) == ("Td", ["Jh", "Ts"])


@pytest.mark.parametrize(("i", "written", "stored"), [(i, *a) for i, a in enumerate(AMOUNTS)])
def test_amounts_are_exact_decimals(
    typed: tuple[AuditDb, FileResult], i: int, written: str, stored: Decimal
) -> None:
    row = _typed_row(typed, "table:T-AMT", i)
    assert f'"amount":{written}' in row["raw"]
    assert isinstance(row["amount"], Decimal)
    assert row["amount"] == stored and str(row["amount"]) == str(stored)


@pytest.mark.parametrize(("i", "ts", "utc_ts", "offset"), [(i, *t) for i, t in enumerate(TIMES)])
def test_times_are_stored_in_utc_with_their_offset(
    typed: tuple[AuditDb, FileResult], i: int, ts: str, utc_ts: Any, offset: int
) -> None:
    row = _typed_row(typed, "table:T-TS", i)
    assert json.loads(row["raw"])["ts"] == ts
    assert (row["ts"], row["ts_offset_min"]) == (utc_ts, offset)
    assert row["ts"].utcoffset().total_seconds() == 0


def test_dealer_may_be_a_string_or_an_integer_and_is_kept_as_text(
    typed: tuple[AuditDb, FileResult],
) -> None:
    assert _typed_row(typed, "table:T-DLR", 1)["dealer"] == "E10422"
    assert _typed_row(typed, "table:T-DLR", 2)["dealer"] == "10422"


def test_pit_events_are_their_own_stream(typed: tuple[AuditDb, FileResult]) -> None:
    notice = _typed_row(typed, "pit:P3", 1)
    assert (notice["type"], notice["pit"], notice["table_id"]) == ("procedure_notice", "P3", None)
    assert notice["effective"] == utc(2026, 11, 29, 3, 0, 0)
    assert (notice["recipient"], notice["written"], notice["procedure"]) == ("division", True, 2)


# --------------------------------------------------------------------------------------------
# Bad lines: quarantine, exact reason, the rest of the file still loads
# --------------------------------------------------------------------------------------------

# (line as written: str, bytes or event dict; the reason exactly as users read it)
BAD_LINES: dict[str, tuple[Any, str]] = {
    "not_json": ('{"v":1,"ts":"2026-11-28T22:00:07-05:00","type":', "not valid JSON"),
    "json_array": ("[1,2,3]", "not a JSON object"),
    "json_string": ('"wager"', "not a JSON object"),
    "json_null": ("null", "not a JSON object"),
    "naive_ts": (
        bad_wager(ts="2026-11-28T22:00:00"),
        'ts "2026-11-28T22:00:00" has no UTC offset (write Z or +hh:mm)',
    ),
    "ts_month_13": (
        bad_wager(ts="2026-13-28T22:00:00Z"),
        'ts "2026-13-28T22:00:00Z" is not a real date and time',
    ),
    "ts_hour_24": (
        bad_wager(ts="2026-11-28T24:00:00Z"),
        'ts "2026-11-28T24:00:00Z" is not a real date and time',
    ),
    "ts_offset_99_99": (
        bad_wager(ts="2026-11-28T22:00:00+99:99"),
        'ts "2026-11-28T22:00:00+99:99" is not a real date and time',
    ),
    "ts_epoch_number": (bad_wager(ts=1795921200), "ts 1795921200 is not an RFC 3339 time"),
    # Real RFC 3339 times, but in the years 10000 and 0 in UTC: every check after ingest
    # read such a stamp into a Python datetime and failed (`audit` ended in an internal error).
    "ts_past_year_9999_in_utc": (
        bad_wager(ts="9999-12-31T23:59:59.000-05:00"),
        'ts "9999-12-31T23:59:59.000-05:00" falls outside the years 1 to 9999 in UTC (no clock '
        "of a table system reads it)",
    ),
    "ts_before_year_1_in_utc": (
        bad_wager(ts="0001-01-01T00:00:00+05:00"),
        'ts "0001-01-01T00:00:00+05:00" falls outside the years 1 to 9999 in UTC (no clock of '
        "a table system reads it)",
    ),
    "negative_amount": (bad_wager(amount=-5), "amount -5 is negative"),
    "negative_amount_string": (bad_wager(amount="-5"), 'amount "-5" is negative'),
    "amount_3_decimals_string": (
        bad_wager(amount="12.345"),
        'amount "12.345" has more than 2 decimal places',
    ),
    "amount_3_decimals_number": (
        bad_wager(amount=12.345),
        "amount 12.345 has more than 2 decimal places",
    ),
    "amount_float_artifact": (
        bad_wager(amount=0.1 + 0.2),
        "amount 0.30000000000000004 has more than 2 decimal places",
    ),
    "amount_past_a_double": (
        amount_written("1.0000000000000001"),
        "amount 1.0000000000000001 has more than 2 decimal places",
    ),
    "amount_too_large_number": (
        bad_wager(amount=10**16),
        "amount 10000000000000000 is too large (at most 16 whole digits)",
    ),
    "amount_too_large_string": (
        bad_wager(amount="12345678901234567.5"),
        'amount "12345678901234567.5" is too large (at most 16 whole digits)',
    ),
    "amount_exponent_string": (bad_wager(amount="1e2"), 'amount "1e2" is not a decimal amount'),
    "unknown_type": (bad_wager(type="shuffle_start"), 'unknown event type "shuffle_start"'),
    "card_1x": (
        bad_card(card="1x"),
        'card "1x" is not a card (rank A 2-9 T J Q K or 10, then suit c d h s)',
    ),
    "missing_amount": (without(bad_wager(), "amount"), 'wager event has no "amount"'),
    "missing_table": (without(bad_card(), "table"), 'card event has no "table"'),
    "missing_seq": (without(bad_wager(), "seq"), 'missing field "seq"'),
    "missing_ts": (without(bad_wager(), "ts"), 'missing field "ts"'),
    "v_2": (bad_wager(v=2), "format version v=2 is not supported (this reader knows v1)"),
    "seq_negative": (bad_wager(seq=-1), "seq must be a whole number, not -1"),
    "seat_0": (bad_wager(seat=0), "seat must be a whole number from 1 to 1000000000000000, not 0"),
    "table_id_with_space": (
        bad_wager(table="MB 07"),
        'table has U+0020 at character 3, after "MB": an id is 1-32 characters of A-Z a-z '
        "0-9 . _ -, with no space, invisible or non-ASCII character",
    ),
    "enum_value": (bad_card(to="dealer"), 'to must be one of player, banker, not "dealer"'),
    "not_utf8_bad_continuation": (
        b'{"v":1,"note":"\xc3\x28 and \xff\xfe"}',
        "not valid UTF-8 text",
    ),
    "not_utf8_good_event_bad_tail": (line(bad_wager()).encode() + b"\xe9", "not valid UTF-8 text"),
    "bom_in_the_middle": (b"\xef\xbb\xbf" + line(bad_wager()).encode(), "not valid JSON"),
    "not_utf8": (
        line(bad_wager()).encode()[:-1] + b',"note":"caf\xe9 \xff"}',
        "not valid UTF-8 text",
    ),
}


def _as_text(bad: Any) -> str:
    """What the quarantine keeps of the line: its text, bad bytes replaced by U+FFFD."""
    if isinstance(bad, bytes):
        return bad.decode("utf-8", errors="replace")
    return line(bad)


def _good(i: int) -> str:
    """The good line before bad line i: seq i+1 of table MB-07, at 22:i:00-05:00."""
    return line(event("no_more_bets", seq=i + 1, ts=f"2026-11-28T22:{i:02d}:00-05:00"))


BAD_IDS = list(BAD_LINES)


def _bad_line_no(case: str) -> int:
    return 2 * BAD_IDS.index(case) + 2


@pytest.fixture(scope="module")
def bad_night(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[AuditDb, Path, FileResult]]:
    """One file: a good line, then one bad line of each case, alternating, and a last good
    line; so every bad line sits between good lines of the same file."""
    audit = open_audit(tmp_path_factory.mktemp("bad"))
    lines: list[Any] = []
    for i, (bad, _) in enumerate(BAD_LINES.values()):
        lines += [_good(i), bad if isinstance(bad, bytes) else line(bad)]
    lines.append(_good(len(BAD_LINES)))
    path = audit.write("night.jsonl", lines)
    result = audit.ingest_file(path)
    yield audit, path, result
    audit.con.close()


def test_bad_lines_are_all_reported_and_every_good_line_loads(
    bad_night: tuple[AuditDb, Path, FileResult],
) -> None:
    audit, path, r = bad_night
    n = len(BAD_LINES)
    assert r.status == "ingested"
    assert r.problems == [
        f"{path}:{_bad_line_no(c)}: {reason}" for c, (_, reason) in BAD_LINES.items()
    ]
    assert (r.lines, r.events, r.quarantined, r.duplicates) == (2 * n + 1, n + 1, n, 0)
    assert r.message == f"{path}: {n + 1} events, {n} quarantined"
    assert [(e["line_no"], e["raw"]) for e in audit.events()] == [
        (2 * i + 1, _good(i)) for i in range(n + 1)
    ]
    [src] = audit.sources()
    assert (src["lines"], src["events"], src["quarantined"]) == (2 * n + 1, n + 1, n)
    assert len(audit.findings("log.malformed")) == n
    assert audit.findings("log.seq_gap") == []  # the good lines' seq run 1, 2, 3, ...


@pytest.mark.parametrize(
    ("case", "bad", "reason"), [(c, *v) for c, v in BAD_LINES.items()], ids=BAD_IDS
)
def test_bad_line_is_quarantined_with_its_reason_and_found(
    bad_night: tuple[AuditDb, Path, FileResult], case: str, bad: Any, reason: str
) -> None:
    audit, path, r = bad_night
    n = _bad_line_no(case)
    raw = _as_text(bad)
    assert f"{path}:{n}: {reason}" in r.problems

    # The bad line is kept whole, with its file, line number and reason.
    [q] = [x for x in audit.quarantine() if x["line_no"] == n]
    # raw_bytes: the line's own bytes, kept only where its text could not hold them.
    own = bad if isinstance(bad, bytes) and raw.encode() != bad else None
    assert q == {
        "source_id": audit.sources()[0]["id"],
        "line_no": n,
        "reason": reason,
        "raw": raw,
        "raw_bytes": own,
    }
    assert audit.events("line_no = ?", n) == []

    # ... and is a log.malformed finding pointing at path:line.
    [f] = [x for x in audit.findings() if x["source"] == f"{path.resolve()}:{n}"]
    assert f["code"] == "log.malformed"
    assert (f["severity"], f["rule"], f["status"], f["run_id"]) == (
        "major",
        MALFORMED_RULE,
        "open",
        audit.run_id,
    )
    assert f["message"] == (
        f"Line {n} of night.jsonl could not be read: {reason}; it is kept in quarantine"
    )
    assert f["expected"] == "a line of event log v1"
    assert f["observed"] == {"reason": reason, "line": raw}
    assert f["evidence"] == {"line_no": n}
    assert f["fingerprint"] == malformed_fingerprint(path, n, raw)
    # Where the line still names them, the finding carries table and seq.
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        assert f["table_id"] == parsed.get("table")
        assert f["seq"] == (parsed["seq"] if isinstance(parsed.get("seq"), int) else None)
    else:
        assert (f["table_id"], f["seq"]) == (None, None)


LINE_TIME = utc(2026, 11, 29, 3, 0, 7)  # T_BAD, the bad line's own ts


@pytest.mark.parametrize(
    ("case", "own_time"),
    [
        ("negative_amount", True),
        ("card_1x", True),
        ("unknown_type", True),
        ("not_json", False),
        ("json_array", False),
        ("ts_month_13", False),
        ("missing_ts", False),
        ("ts_epoch_number", False),
        # A ts of the right shape but not a valid time is not the line's time either.
        ("naive_ts", False),
        ("ts_hour_24", False),
        ("ts_offset_99_99", False),
    ],
)
def test_malformed_finding_is_timed_by_the_line_or_the_good_line_before(
    bad_night: tuple[AuditDb, Path, FileResult], case: str, own_time: bool
) -> None:
    audit, path, _ = bad_night
    n = _bad_line_no(case)
    [f] = [x for x in audit.findings() if x["source"] == f"{path.resolve()}:{n}"]
    i = BAD_IDS.index(case)
    assert f["ts"] == (LINE_TIME if own_time else utc(2026, 11, 29, 3, i, 0))


# --------------------------------------------------------------------------------------------
# Line endings, blank lines, BOM, gzip
# --------------------------------------------------------------------------------------------


def test_crlf_line_endings_blank_lines_and_bom(audit: AuditDb) -> None:
    """CRLF ends load like LF (raw keeps no CR); blank lines are skipped but counted; a UTF-8
    BOM at the start is not part of line 1; the last line may lack its line end."""
    lines = [L[0], "", L[1], " ", "\t", "not json", *L[2:]]
    path = audit.write("w.jsonl", lines, newline=b"\r\n", final_newline=False, bom=True)
    r = audit.ingest_file(path)
    assert (r.lines, r.events, r.quarantined) == (19, 15, 1)
    assert r.problems == [f"{path}:6: not valid JSON"]
    ev = audit.events()
    assert [e["raw"] for e in ev] == L
    assert [e["line_no"] for e in ev] == [1, 3, *range(7, 20)]
    assert audit.quarantine()[0]["raw"] == "not json"
    # The manifest's hash and size are the file's, BOM and CRs included.
    [src] = audit.sources()
    assert (src["lines"], src["sha256"], src["size"]) == (19, sha256(path), path.stat().st_size)


@pytest.mark.slow
def test_blank_lines_are_ignored_but_counted(audit: AuditDb) -> None:
    path = audit.write("b.jsonl", ["", L[0], "   ", "\t", L[1], "", "garbage", L[2], ""])
    r = audit.ingest_file(path)
    assert (r.lines, r.events, r.quarantined) == (9, 3, 1)
    assert r.problems == [f"{path}:7: not valid JSON"]
    assert [(e["line_no"], e["seq"]) for e in audit.events()] == [(2, 1), (5, 2), (8, 3)]
    assert [q["line_no"] for q in audit.quarantine()] == [7]
    [f] = audit.findings("log.malformed")
    assert f["source"] == f"{path.resolve()}:7"


def test_empty_file_loads_nothing_and_is_recorded_as_empty(audit: AuditDb) -> None:
    """An empty file is evidence that a table system delivered nothing: one manifest row with
    status `empty` per file (all empty files share one SHA-256, so a second empty file is
    not "already ingested" as the first), none more when the same file comes again."""
    path = audit.write_bytes("empty.jsonl", b"")
    r = audit.ingest_file(path)
    assert (r.status, r.lines, r.events, r.quarantined) == ("empty", 0, 0, 0)
    assert r.message == (
        f"{path}: empty file, no events to load (recorded in the manifest as empty); "
        "check that its table system delivered its log"
    )
    [src] = audit.sources()
    assert (src["status"], src["lines"], src["first_ts"], src["last_ts"]) == (
        "empty", 0, None, None
    )
    assert src["note"] == "the file holds no lines"
    again = audit.ingest_file(path)
    assert again.status == "empty"
    assert "(already recorded as empty on " in again.message
    other = audit.ingest_file(audit.write("other.jsonl.gz", [], gz=True))
    assert other.status == "empty"
    assert [(s["path"].rsplit("/", 1)[-1], s["status"]) for s in audit.sources()] == [
        ("empty.jsonl", "empty"),
        ("other.jsonl.gz", "empty"),
    ]
    # A file delivered empty and later with its content loads as any new file.
    audit.write("empty.jsonl", L)
    assert audit.ingest_file(path).status == "ingested"


def test_a_file_ingested_then_emptied_is_refused_as_altered(audit: AuditDb) -> None:
    path = audit.write("night.jsonl", L)
    assert audit.ingest_file(path).status == "ingested"
    path.write_bytes(b"")
    r = audit.ingest_file(path)
    assert r.status == "refused_altered"
    assert r.message.startswith(f"{path}: refused: it is now empty, and held content when")
    assert [f["code"] for f in audit.findings("log.altered")] == ["log.altered"]


@pytest.mark.slow
def test_gzip_loads_with_line_numbers_of_the_uncompressed_text(audit: AuditDb) -> None:
    path = audit.write("night.jsonl.gz", [L[0], "", "{", *L[1:]], gz=True, bom=True)
    r = audit.ingest_file(path)
    assert (r.status, r.lines, r.events, r.quarantined) == ("ingested", 17, 15, 1)
    assert r.problems == [f"{path}:3: not valid JSON"]
    assert [e["line_no"] for e in audit.events()] == [1, *range(4, 18)]
    assert audit.events()[0]["raw"] == L[0]  # the BOM inside the gzip is dropped too
    src = audit.sources()[0]
    assert (src["sha256"], src["size"]) == (sha256(path), path.stat().st_size)
    assert audit.quarantine()[0]["raw"] == "{"


def test_gzip_content_is_recognised_by_its_signature_not_its_name(audit: AuditDb) -> None:
    path = audit.write("actually-gzip.jsonl", L, gz=True)
    assert audit.ingest_file(path).events == 15


# --------------------------------------------------------------------------------------------
# Files that give nothing: discover's errors, unreadable files
# --------------------------------------------------------------------------------------------


def test_missing_path_is_an_error_and_the_other_files_still_load(audit: AuditDb) -> None:
    good = audit.write("good.jsonl", L)
    missing = audit.dir / "no-such.jsonl"
    assert discover([missing]) == ([], [f"{missing}: no such file or directory"])

    result = audit.ingest(missing, good)
    assert result.errors == [f"{missing}: no such file or directory"]
    assert [(f.path, f.status) for f in result.files] == [(good, "ingested")]
    assert result.events == 15


def test_directory_with_nothing_to_ingest_is_an_error(audit: AuditDb) -> None:
    empty = audit.dir / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a log")
    (empty / "night.json").write_text("{}")
    expected = f"{empty}: nothing to ingest (no .jsonl or .jsonl.gz files in it)"
    assert discover([empty]) == ([], [expected])
    result = audit.ingest(empty)
    assert (result.files, result.errors) == ([], [expected])
    assert audit.counts() == {"events": 0, "quarantine": 0, "sources": 0, "findings": 0}


def test_discover_expands_directories_recursively_and_deduplicates(audit: AuditDb) -> None:
    a = audit.write("d/b.jsonl", L[:1])
    b = audit.write("d/sub/a.jsonl.gz", L[1:2], gz=True)
    audit.write("d/sub/readme.txt", ["x"])
    other = audit.write("other.log", L[2:3])  # named explicitly: taken whatever its suffix
    files, errors = discover([audit.dir / "d", a, other, str(other)])
    assert errors == []
    assert files == [a, b, other]


def test_gz_that_is_not_gzip_is_unreadable_and_others_still_load(audit: AuditDb) -> None:
    bad = audit.write("night.jsonl.gz", L)  # plain text under a .gz name
    good = audit.write("good.jsonl", L[:2])
    message = f"{bad}: not a gzip file (it does not start with the gzip signature)"
    with pytest.raises(UserError) as exc:
        audit.ingest_file(bad)
    assert str(exc.value) == message

    result = audit.ingest(bad, good)
    assert [(f.path, f.status, f.message) for f in result.files] == [
        (bad, "unreadable", message),
        (good, "ingested", f"{good}: 2 events, 0 quarantined"),
    ]
    assert result.count("unreadable") == 1
    assert [s["path"] for s in audit.sources()] == [str(good.resolve())]
    assert audit.scalar("SELECT count(*) FROM events") == 2


def test_truncated_gzip_is_unreadable_and_leaves_nothing_behind(
    audit: AuditDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read in small blocks, some lines were already loaded when the gzip error came; the
    file's transaction drops them."""
    set_chunk_bytes(monkeypatch, 700)
    whole = gzip.compress(("\n".join(L) + "\n").encode(), mtime=0)
    bad = audit.write_bytes("cut.jsonl.gz", whole[: len(whole) - 12])
    message = (
        f"{bad}: corrupt gzip data "
        "(Compressed file ended before the end-of-stream marker was reached)"
    )
    calls: list[int] = []
    with pytest.raises(UserError) as exc:
        audit.ingest_file(bad, progress=lambda p, n: calls.append(n))
    assert str(exc.value) == message
    assert calls, "no block was loaded before the error; the test would prove nothing"
    assert audit.counts() == {"events": 0, "quarantine": 0, "sources": 0, "findings": 0}

    [f] = audit.ingest(bad).files
    assert (f.status, f.message) == ("unreadable", message)
    assert audit.counts() == {"events": 0, "quarantine": 0, "sources": 0, "findings": 0}


def test_gzip_with_corrupt_data_is_unreadable(audit: AuditDb) -> None:
    whole = bytearray(gzip.compress(("\n".join(L) + "\n").encode(), mtime=0))
    whole[40:60] = b"\x00" * 20
    bad = audit.write_bytes("bad.jsonl.gz", bytes(whole))
    with pytest.raises(UserError) as exc:
        audit.ingest_file(bad)
    assert str(exc.value).startswith(f"{bad}: corrupt gzip data (")
    assert audit.counts()["events"] == 0


# --------------------------------------------------------------------------------------------
# Idempotency and duplicates
# --------------------------------------------------------------------------------------------

ALREADY = r"already ingested{where} on \d{{4}}-\d\d-\d\d \d\d:\d\d UTC; nothing new"


@pytest.mark.slow
def test_same_file_twice_adds_nothing_and_same_content_elsewhere_too(audit: AuditDb) -> None:
    # A bad line and a seq gap, so there are findings that must not repeat.
    path = audit.write("a.jsonl", [*L[:5], "bad", *L[7:]])
    first = audit.ingest_file(path)
    assert (first.events, first.quarantined) == (13, 1)
    before = audit.counts()
    assert before == {"events": 13, "quarantine": 1, "sources": 1, "findings": 2}

    again = audit.ingest_file(path)
    assert again.status == "already_ingested"
    assert (again.events, again.quarantined, again.duplicates, again.problems) == (0, 0, 0, [])
    assert again.sha256 == first.sha256
    assert re.fullmatch(re.escape(f"{path}: ") + ALREADY.format(where=""), again.message)
    assert audit.counts() == before

    result = audit.ingest(path)
    assert (result.count("already_ingested"), result.events, result.quarantined) == (1, 0, 0)
    assert audit.counts() == before

    copy = audit.write("copy/b.jsonl", [*L[:5], "bad", *L[7:]])
    r = audit.ingest_file(copy)
    assert r.status == "already_ingested"
    where = re.escape(f" as {path.resolve()}")
    assert re.fullmatch(re.escape(f"{copy}: ") + ALREADY.format(where=where), r.message)
    assert audit.counts() == before


def test_gzip_of_the_same_content_loads_nothing_new_and_counts_duplicates(audit: AuditDb) -> None:
    audit.ingest_file(audit.write("a.jsonl", L))
    gz = audit.write("a-again.jsonl.gz", L, gz=True)
    r = audit.ingest_file(gz)
    assert (r.status, r.lines, r.events, r.quarantined, r.duplicates) == ("ingested", 15, 0, 0, 15)
    assert r.message == f"{gz}: 0 events, 0 quarantined, 15 already ingested from another file"
    assert r.per_stream == {}
    assert audit.scalar("SELECT count(*) FROM events") == 15
    assert {e["source_id"] for e in audit.events()} == {audit.sources()[0]["id"]}
    assert [(s["status"], s["events"], s["duplicates"]) for s in audit.sources()] == [
        ("ingested", 15, 0),
        ("ingested", 0, 15),
    ]
    assert audit.findings() == []


def test_overlapping_files_load_only_the_new_events(audit: AuditDb) -> None:
    """Events already loaded from another file are skipped as duplicates, also when written
    with other JSON whitespace."""
    audit.ingest_file(audit.write("a.jsonl", L[:10]))
    spaced = [json.dumps(json.loads(x)) for x in L[7:10]]  # ", " and ": " separators
    r = audit.ingest_file(audit.write("b.jsonl", [*spaced, *L[10:]]))
    assert (r.status, r.events, r.duplicates) == ("ingested", 5, 3)
    assert r.message.endswith(": 5 events, 0 quarantined, 3 already ingested from another file")
    assert [e["seq"] for e in audit.rows("SELECT seq FROM events ORDER BY seq")] == list(
        range(1, 16)
    )
    assert audit.findings() == []


# --------------------------------------------------------------------------------------------
# Altered files
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_same_path_with_changed_content_is_refused(audit: AuditDb) -> None:
    path = audit.write("a.jsonl", L[:10])
    old_sha = audit.ingest_file(path).sha256

    # A line already ingested changes (and more is added): not a file that grew.
    extra = line(event("round_end", seq=11))
    audit.write("a.jsonl", [*L[:4], L[4].replace(":", ": ", 1), *L[5:10], extra, "not json"])
    new_sha = sha256(path)
    r = audit.ingest_file(path)

    reason = (
        f"its content changed since it was ingested (sha256 {old_sha[:12]}... then, "
        f"{new_sha[:12]}... now)"
    )
    assert r.status == "refused_altered"
    assert r.message == f"{path}: refused: {reason}"
    assert (r.sha256, r.events, r.quarantined) == (new_sha, 0, 0)
    # Nothing of it loads: not its new event, not its bad line.
    assert audit.scalar("SELECT count(*) FROM events") == 10
    assert audit.scalar("SELECT max(seq) FROM events") == 10
    assert audit.quarantine() == []
    assert audit.findings("log.malformed") == []

    refused = audit.sources()[-1]
    assert (refused["path"], refused["sha256"], refused["status"], refused["note"]) == (
        str(path.resolve()),
        new_sha,
        "refused_altered",
        reason,
    )
    assert (refused["events"], refused["lines"], refused["run_id"]) == (0, 0, audit.run_id)

    [f] = audit.findings("log.altered")
    assert (f["severity"], f["status"], f["source"]) == ("critical", "open", str(path.resolve()))
    assert f["message"] == f"{path.resolve()} was refused as altered: {reason}"
    assert f["expected"] == {"content": "identical to the file already ingested"}
    assert f["observed"] == {"sha256": new_sha, "reason": reason}
    assert f["evidence"] == {"source_id": refused["id"]}
    assert f["fingerprint"] == f"log.altered|{path.resolve()}|{new_sha}"

    # Offered again: refused again and recorded again, but one finding.
    assert audit.ingest_file(path).status == "refused_altered"
    assert [s["status"] for s in audit.sources()] == [
        "ingested",
        "refused_altered",
        "refused_altered",
    ]
    assert len(audit.findings("log.altered")) == 1

    # Put back as it was, it is simply already ingested.
    audit.write("a.jsonl", L[:10])
    assert audit.ingest_file(path).status == "already_ingested"


@pytest.mark.slow
def test_other_file_with_same_seq_and_different_content_is_refused(audit: AuditDb) -> None:
    a = audit.write("a.jsonl", L[:5])
    audit.ingest_file(a)
    altered = L[3].replace('"round":1', '"round":2')  # seq 4, changed
    also = L[4].replace('"seat":3', '"seat":4')  # seq 5, changed
    b = audit.write("b.jsonl", [*L[:3], "bad line", altered, also, *L[5:8]])
    c = audit.write("c.jsonl", [line(event("table_close", seq=1, table="MB-09"))])
    result = audit.ingest(b, c)
    r = result.files[0]

    reason = (
        f"line 5 (table MB-07 seq 4) differs from the event already ingested from "
        f"{a.resolve()}:4 (2 events differ)"
    )
    assert r.status == "refused_altered"
    assert r.message == f"{b}: refused: {reason}"
    assert result.count("refused_altered") == 1
    # Nothing of b loads (not seq 6-8, not its bad line); the file after it does.
    assert audit.scalar("SELECT count(*) FROM events WHERE stream = 'table:MB-07'") == 5
    assert audit.scalar("SELECT count(*) FROM events WHERE stream = 'table:MB-09'") == 1
    assert audit.quarantine() == []
    assert audit.findings("log.malformed") == []
    assert [(s["path"], s["status"], s["note"]) for s in audit.sources()] == [
        (str(a.resolve()), "ingested", ""),
        (str(b.resolve()), "refused_altered", reason),
        (str(c.resolve()), "ingested", ""),
    ]
    [f] = audit.findings("log.altered")
    assert f["source"] == str(b.resolve())
    assert f["message"] == f"{b.resolve()} was refused as altered: {reason}"
    assert f["observed"] == {"sha256": sha256(b), "reason": reason}


def test_one_differing_event_is_counted_in_the_singular(audit: AuditDb) -> None:
    a = audit.write("a.jsonl", L[:5])
    audit.ingest_file(a)
    b = audit.write("b.jsonl", [*L[:4], L[4].replace('"seat":3', '"seat":4')])  # seq 5
    r = audit.ingest_file(b)
    reason = (
        f"line 5 (table MB-07 seq 5) differs from the event already ingested from "
        f"{a.resolve()}:5 (1 event differs)"
    )
    assert (r.status, r.message) == ("refused_altered", f"{b}: refused: {reason}")
    [f] = audit.findings("log.altered")
    assert f["message"] == f"{b.resolve()} was refused as altered: {reason}"


def test_each_file_records_the_seq_range_of_each_stream_it_loaded(audit: AuditDb) -> None:
    """The summary ingest checks new files against; duplicates skipped are not in it."""
    a = audit.write("a.jsonl", L[:5])
    b = audit.write("b.jsonl", [*L[3:10], line(event("table_close", seq=1, table="MB-09"))])
    audit.ingest(a, b)
    ids = [s["id"] for s in audit.sources()]
    assert audit.rows(
        "SELECT stream, source_id, min_seq, max_seq, events FROM stream_sources "
        "ORDER BY source_id, stream"
    ) == [
        {"stream": "table:MB-07", "source_id": ids[0], "min_seq": 1, "max_seq": 5, "events": 5},
        {"stream": "table:MB-07", "source_id": ids[1], "min_seq": 6, "max_seq": 10, "events": 5},
        {"stream": "table:MB-09", "source_id": ids[1], "min_seq": 1, "max_seq": 1, "events": 1},
    ]


def test_a_database_from_before_the_summary_gets_it_from_its_events(tmp_path: Path) -> None:
    audit = open_audit(tmp_path)
    a = audit.write("a.jsonl", L[:5])
    audit.ingest_file(a)
    audit.con.execute("DROP TABLE stream_sources")
    audit.con.close()
    audit = open_audit_again(tmp_path, audit)
    assert audit.scalar("SELECT count(*) FROM stream_sources") == 1
    # So an altered resend is still caught.
    b = audit.write("b.jsonl", [*L[:4], L[4].replace('"seat":3', '"seat":4')])
    assert audit.ingest_file(b).status == "refused_altered"
    audit.con.close()


def open_audit_again(directory: Path, before: AuditDb) -> AuditDb:
    from auditor.store import db, runs

    con = db.connect(directory / "audit.duckdb")
    return AuditDb(before.dir, con, runs.start(con, "test", {"test": True}))


# --------------------------------------------------------------------------------------------
# Sequence gaps and repeats
# --------------------------------------------------------------------------------------------


def test_seq_gap_within_one_file(audit: AuditDb) -> None:
    other = [x.replace("MB-07", "MB-08") for x in L[:3]]  # a second table, no gap of its own
    notices = [event("procedure_notice", seq=1), event("procedure_notice", seq=4)]
    lines = [*L[:5], other[0], other[1], *L[7:], other[2], *map(line, notices)]
    path = audit.write("g.jsonl", lines)
    audit.ingest_file(path)
    where = str(path.resolve())
    table_gap, pit_gap = sorted(audit.findings("log.seq_gap"), key=lambda f: f["message"])[::-1]

    assert table_gap["message"] == "Table MB-07: seq 5 is followed by seq 8; 2 events are missing"
    assert table_gap["expected"] == {"seq": 6}
    assert table_gap["observed"] == {"seq": 8, "previous_seq": 5, "missing": 2}
    assert table_gap["source"] == f"{where}:8"  # seq 8 is line 8 of this file
    assert table_gap["evidence"] == {"previous": f"{where}:5"}
    assert (
        table_gap["table_id"],
        table_gap["pit"],
        table_gap["shoe"],
        table_gap["round"],
        table_gap["seq"],
    ) == ("MB-07", None, None, None, 8)
    assert table_gap["ts"] == utc(2026, 11, 29, 3, 0, 43)
    assert (table_gap["severity"], table_gap["rule"], table_gap["status"]) == (
        "major",
        GAP_RULE,
        "open",
    )
    assert table_gap["fingerprint"] == "log.seq_gap|table:MB-07|5|8"

    assert pit_gap["message"] == "Pit P3: seq 1 is followed by seq 4; 2 events are missing"
    assert (pit_gap["table_id"], pit_gap["pit"], pit_gap["seq"]) == (None, "P3", 4)
    assert pit_gap["source"] == f"{where}:{len(lines)}"
    assert pit_gap["fingerprint"] == "log.seq_gap|pit:P3|1|4"


def test_seq_gap_across_files_is_withdrawn_when_filled_not_deleted(audit: AuditDb) -> None:
    a = audit.write("a.jsonl", L[:5])
    b = audit.write("b.jsonl", L[7:])
    audit.ingest(a, b)
    [f] = audit.current_findings("log.seq_gap")
    assert f["message"] == "Table MB-07: seq 5 is followed by seq 8; 2 events are missing"
    assert f["source"] == f"{b.resolve()}:1"
    assert f["evidence"] == {"previous": f"{a.resolve()}:5"}

    # A third file supplies seq 6: the 5->8 gap is withdrawn, a 6->8 gap stands.
    c = audit.write("c.jsonl", [L[5]])
    audit.ingest_file(c)
    [f] = audit.current_findings("log.seq_gap")
    assert f["message"] == "Table MB-07: seq 6 is followed by seq 8; 1 event is missing"
    assert f["observed"] == {"seq": 8, "previous_seq": 6, "missing": 1}
    assert f["evidence"] == {"previous": f"{c.resolve()}:1"}

    # A fourth supplies seq 7: no gap stands, and every row is still in `findings`.
    assert audit.ingest_file(audit.write("d.jsonl", [L[6]])).events == 1
    assert audit.current_findings("log.seq_gap") == []
    rows = audit.findings("log.seq_gap")
    assert sorted((r["fingerprint"], r["status"]) for r in rows) == [
        ("log.seq_gap|table:MB-07|5|8", "open"),
        ("log.seq_gap|table:MB-07|5|8", "withdrawn"),
        ("log.seq_gap|table:MB-07|6|8", "open"),
        ("log.seq_gap|table:MB-07|6|8", "withdrawn"),
    ]
    withdrawn = [r for r in rows if r["status"] == "withdrawn"]
    opened = {r["fingerprint"]: r for r in rows if r["status"] == "open"}
    for w in withdrawn:
        assert w["message"] == opened[w["fingerprint"]]["message"]
        assert w["id"] > opened[w["fingerprint"]]["id"]
        assert w["run_id"] == audit.run_id


def test_repeated_seq_within_a_file_quarantines_the_later_line(audit: AuditDb) -> None:
    repeat = L[4].replace('"amount":100', '"amount":200')  # seq 5 again, other content
    broken = L[1].replace('"decks":8', '"decks":0')  # quarantined, so L[1] is no repeat
    notice = line(event("procedure_notice", seq=1))
    # The same seq in other streams is no repeat.
    others = [
        line(event("table_close", seq=1, table="MB-08")),
        line(event("procedure_notice", seq=1, pit="MB-07")),
    ]
    path = audit.write(
        "r.jsonl", [L[0], broken, *L[1:5], repeat, L[0], notice, notice, *L[5:], *others]
    )
    r = audit.ingest_file(path)
    assert r.problems == [
        f"{path}:2: decks must be a whole number from 1 to 1000000000000000, not 0",
        f"{path}:7: seq 5 repeats in table MB-07 (first at line 6)",
        f"{path}:8: seq 1 repeats in table MB-07 (first at line 1)",
        f"{path}:10: seq 1 repeats in pit P3 (first at line 9)",
    ]
    assert (r.events, r.quarantined) == (18, 4)
    assert r.per_stream == {"pit:MB-07": 1, "pit:P3": 1, "table:MB-07": 15, "table:MB-08": 1}
    [wager] = audit.events("seq = 5 AND stream = 'table:MB-07'")
    assert (wager["line_no"], wager["amount"]) == (6, Decimal("100.00"))
    assert [(q["line_no"], q["raw"]) for q in audit.quarantine()] == [
        (2, broken),
        (7, repeat),
        (8, L[0]),
        (10, notice),
    ]
    repeated = [f for f in audit.findings("log.malformed") if "repeats" in f["message"]]
    assert sorted((f["source"], f["seq"]) for f in repeated) == [
        (f"{path.resolve()}:10", 1),
        (f"{path.resolve()}:7", 5),
        (f"{path.resolve()}:8", 1),
    ]
    assert audit.findings("log.seq_gap") == []


# --------------------------------------------------------------------------------------------
# One transaction per file
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("step", ["record_malformed", "record_seq_gaps"])
def test_failure_mid_file_leaves_nothing_of_that_file(
    audit: AuditDb, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(log_findings_mod, step, boom)
    failing = audit.write("night.jsonl", [*L[:5], "not json", *L[8:]])
    with pytest.raises(RuntimeError, match="disk on fire"):
        audit.ingest_file(failing)
    assert audit.counts() == {"events": 0, "quarantine": 0, "sources": 0, "findings": 0}

    # The connection is usable afterwards, and the same file loads once the fault is gone.
    monkeypatch.undo()
    r = audit.ingest_file(failing)
    assert (r.status, r.events, r.quarantined) == ("ingested", 12, 1)
    assert audit.counts() == {"events": 12, "quarantine": 1, "sources": 1, "findings": 2}


def _fail_on_second_malformed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = log_findings_mod.record_malformed
    calls: list[str] = []

    def fail_on_second(*args: Any, **kwargs: Any) -> None:
        calls.append("x")
        if len(calls) == 2:
            raise RuntimeError("boom")
        real(*args, **kwargs)

    monkeypatch.setattr(log_findings_mod, "record_malformed", fail_on_second)


@pytest.mark.slow
def test_failure_in_one_file_keeps_the_files_before_it(
    audit: AuditDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = audit.write("a.jsonl", [*L[:3], "bad"])
    b = audit.write("b.jsonl", ["bad", *L[5:]])
    monkeypatch.setattr(reader_mod, "CHUNK_BYTES", 1)  # every small file a batch of its own
    _fail_on_second_malformed(monkeypatch)
    with pytest.raises(RuntimeError):
        audit.ingest(a, b)
    assert [s["path"] for s in audit.sources()] == [str(a.resolve())]
    assert audit.counts() == {"events": 3, "quarantine": 1, "sources": 1, "findings": 1}
    assert [q["line_no"] for q in audit.quarantine()] == [4]


@pytest.mark.slow
def test_small_files_load_in_one_batch_whole_or_not_at_all(
    audit: AuditDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = audit.write("a.jsonl", [*L[:3], "bad"])
    b = audit.write("b.jsonl", ["bad", *L[5:]])
    _fail_on_second_malformed(monkeypatch)
    with pytest.raises(RuntimeError):
        audit.ingest(a, b)
    assert audit.counts() == {"events": 0, "quarantine": 0, "sources": 0, "findings": 0}
    monkeypatch.undo()
    result = audit.ingest(a, b)
    assert [(f.path, f.events, f.quarantined) for f in result.files] == [(a, 3, 1), (b, 10, 1)]
    assert audit.counts() == {"events": 13, "quarantine": 2, "sources": 2, "findings": 3}
    assert sorted(f["code"] for f in audit.findings()) == [
        "log.malformed", "log.malformed", "log.seq_gap"  # b's first good seq is 6, a's last 3
    ]


# --------------------------------------------------------------------------------------------
# Unknown fields and fields of other types
# --------------------------------------------------------------------------------------------


def test_unknown_fields_and_fields_of_other_types(audit: AuditDb) -> None:
    extra = event("wager", seq=1, terminal="T-12", chips={"red": 4, "green": [1, 2]}, note=None)
    # Fields the format defines for other types: not checked, not stored, kept in raw.
    wager = event("wager", seq=2, mode="cash", card="1x", cards="none", effective="soon", kind=7)
    card = event("card", seq=3, amount=-5, seat=0, bet="", mode="whatever")
    # pit is defined for every event: checked and stored on a round event too.
    with_pit = event("wager", seq=4, pit="P3")
    bad_pit = event("wager", seq=5, pit="P 3")
    path = audit.write("x.jsonl", [extra, wager, card, with_pit, bad_pit])
    r = audit.ingest_file(path)
    assert r.problems == [
        f'{path}:5: pit has U+0020 at character 2, after "P": an id is 1-32 characters of '
        "A-Z a-z 0-9 . _ -, with no space, invisible or non-ASCII character"
    ]
    rows = {e["seq"]: e for e in audit.events()}
    assert [rows[s]["raw"] for s in (1, 2, 3, 4)] == [
        line(extra),
        line(wager),
        line(card),
        line(with_pit),
    ]
    assert json.loads(rows[1]["raw"])["chips"] == {"red": 4, "green": [1, 2]}

    w = rows[2]
    assert (w["mode"], w["card"], w["cards"], w["effective"], w["kind"]) == (None,) * 5
    assert w["amount"] == Decimal("100.00")
    c = rows[3]
    assert (c["amount"], c["seat"], c["bet"], c["mode"], c["card"]) == (
        None,
        None,
        None,
        None,
        "4d",
    )
    assert rows[4]["pit"] == "P3"


# --------------------------------------------------------------------------------------------
# Reading in chunks
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_lines_are_numbered_across_chunk_boundaries(
    audit: AuditDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_chunk_bytes(monkeypatch, 600)
    long_bad = '{"v":1,"ts":"2026-11-28T22:00:41-05:00","note":"' + "x" * 1300 + '"'  # > 2 blocks
    lines: list[str | bytes] = [*L[:6], long_bad, "", *L[6:10], b'{"v":1,"x":"\xff"}', *L[10:]]
    path = audit.write("chunks.jsonl", lines)
    calls: list[tuple[Path, int]] = []
    r = audit.ingest_file(path, progress=lambda p, n: calls.append((p, n)))

    # Chunking really happened (several blocks), and progress reached the end of the file.
    assert len(calls) >= 4
    reads = [n for _, n in calls]
    assert reads == sorted(reads) and reads[-1] == path.stat().st_size
    assert {p for p, _ in calls} == {path}

    assert (r.lines, r.events, r.quarantined) == (18, 15, 2)
    assert r.problems == [f"{path}:7: not valid JSON", f"{path}:13: not valid UTF-8 text"]
    ev = audit.events()
    assert [e["line_no"] for e in ev] == [1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 14, 15, 16, 17, 18]
    assert [e["raw"] for e in ev] == L
    q = audit.quarantine()
    assert [(x["line_no"], x["raw"]) for x in q] == [(7, long_bad), (13, '{"v":1,"x":"\ufffd"}')]
    assert sorted(f["source"] for f in audit.findings("log.malformed")) == [
        f"{path.resolve()}:13",
        f"{path.resolve()}:7",
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "chunk",
    [
        1,
        2,
        3,
        4,
        5,
        333,
    ],
)
def test_chunk_size_does_not_change_the_result(
    audit: AuditDb, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    set_chunk_bytes(monkeypatch, chunk)
    lines = [L[0], "", "nope", *L[1:4], "caf\u00e9 \u20ac"]
    path = audit.write("c.jsonl.gz", lines, gz=True, newline=b"\r\n", bom=True)
    r = audit.ingest_file(path)
    assert (r.lines, r.events, r.quarantined) == (7, 4, 2)
    assert r.problems == [f"{path}:3: not valid JSON", f"{path}:7: not valid JSON"]
    assert [e["raw"] for e in audit.events()] == L[:4]
    assert audit.quarantine()[1]["raw"] == "caf\u00e9 \u20ac"


def test_multibyte_characters_across_chunk_boundaries(
    audit: AuditDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_chunk_bytes(monkeypatch, 7)
    # `origin` is free text (ids are not: docs/event-log.md, "Ids").
    text = L[1].replace('"batch":"red"', '"batch":"red","origin":"rouge \u00e9\u20ac\U0001f0a1"')
    path = audit.write("u.jsonl", [L[0], text])
    r = audit.ingest_file(path)
    assert (r.events, r.problems) == (2, [])
    assert audit.events()[1]["origin"] == "rouge \u00e9\u20ac\U0001f0a1"


def test_chunk_bytes_constant_sets_the_block_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader_mod, "CHUNK_BYTES", 200)
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(L) + "\n")
    assert len(list(reader_mod.iter_blocks(path))) > 1


# --------------------------------------------------------------------------------------------
# Verdicts ingest once got wrong (fixed in 46f7265; kept so they stay fixed), and bugs still
# open (strict xfail: fix the code, then drop the marker)
# --------------------------------------------------------------------------------------------


def _file_of(audit: AuditDb, name: str, bad_lines: list[Any]) -> tuple[Path, list[int]]:
    """A file of good lines with the bad ones in between; returns it and their line numbers."""
    lines: list[Any] = []
    numbers = []
    for i, bad in enumerate(bad_lines):
        lines.append(_good(i))
        lines.append(bad if isinstance(bad, (str, bytes)) else line(bad))
        numbers.append(len(lines))
    lines.append(_good(len(bad_lines)))
    return audit.write(name, lines), numbers


# (the line, the integer field it gets wrong, that field's value as the line writes it)
INT_AS_OTHER_JSON: list[tuple[dict[str, Any], str]] = [
    (bad_wager(round="1"), "round"),
    (bad_wager(seat="3"), "seat"),
    (bad_wager(seat=True), "seat"),
    (bad_wager(seat=[3]), "seat"),
    (bad_wager(seat={"n": 3}), "seat"),
    (bad_wager(seat=10**20), "seat"),
    (event("shoe_start", seq=99, decks="8"), "decks"),
    (event("procedure_change", seq=99, procedure="2"), "procedure"),
    (event("announce", seq=99, player="6"), "player"),
    (event("shoe_end", seq=99, remaining="x"), "remaining"),
]


def test_integer_field_with_another_json_type_is_quarantined(audit: AuditDb) -> None:
    """A JSON string, boolean, list, object or 16+ digit number in an integer field is a bad
    line (it once crashed the whole file with a duckdb.ConversionException)."""
    path, numbers = _file_of(audit, "i.jsonl", [e for e, _ in INT_AS_OTHER_JSON])
    r = audit.ingest_file(path)
    assert [p.split(": ", 1)[0] for p in r.problems] == [f"{path}:{n}" for n in numbers]
    assert r.events == len(INT_AS_OTHER_JSON) + 1
    for problem, n, (e, field) in zip(r.problems, numbers, INT_AS_OTHER_JSON, strict=True):
        shown = json.dumps(e[field], separators=(",", ":"))
        assert re.fullmatch(
            re.escape(f"{path}:{n}: {field} must be a whole number from ")
            + r"\d+ to \d+, not "
            + re.escape(shown),
            problem,
        ), problem


_wrong_seqs = itertools.count(200)  # a seq of its own for each: none can repeat another


def _amount_text(written: str) -> str:
    return amount_written(written, seq=next(_wrong_seqs))


def _own_seq(e: dict[str, Any]) -> dict[str, Any]:
    return e | {"seq": next(_wrong_seqs)}


def _with_nested_amount(nested: Any) -> str:
    """A valid wager (amount 100) after an unknown field holding its own "amount"."""
    return line({"extra": nested} | _own_seq(bad_wager()))


def _amount_key_escaped() -> str:
    text = line(_own_seq(bad_wager()))
    return text.replace('"amount":', '"\\u0061mount":')


# (line, what ingest should do: its quarantine reason exactly, or "" for "loads"; the bug if
# it is still open)
VERDICTS: dict[str, tuple[Any, str, str | None]] = {
    # An exponent is fine in a number when it is exact to the cent (Java writes 1.0E7).
    "amount_exponent_exact_to_the_cent": (_amount_text("1.2345e2"), "", None),
    "amount_exponent_finer_than_a_cent": (
        _amount_text("1.23456e2"),
        "amount 1.23456e2 is not a whole number of cents",
        None,
    ),
    "amount_1.0000000000000001": (
        _amount_text("1.0000000000000001"),
        "amount 1.0000000000000001 has more than 2 decimal places",
        None,
    ),
    "amount_0.1000000000000000055511151231257827": (
        _amount_text("0.1000000000000000055511151231257827"),
        "amount 0.1000000000000000055511151231257827 has more than 2 decimal places",
        None,
    ),
    "amount_16_digits_2_decimals": (_amount_text("9999999999999999.99"), "", None),
    "burn_cards_with_null": (
        _own_seq(event("burn", cards=["3h", None])),
        'cards must be a list of cards like ["3h","Kc"], not ["3h",null]',
        None,
    ),
    "face_up_burned_null": (
        _own_seq(event("face_up_in_shoe", burned=[None])),
        'burned must be a list of cards like ["3h","Kc"], not [null]',
        None,
    ),
    "side_bets_with_null": (
        _own_seq(event("table_open", side_bets=[None])),
        "side_bets must be a list of names, not [null]",
        None,
    ),
    "tables_with_null": (
        _own_seq(event("procedure_notice", tables=[None])),
        "tables must be a list of names, not [null]",
        None,
    ),
    "ts_hour_24": (
        _own_seq(bad_wager(ts="2026-11-28T24:00:00Z")),
        'ts "2026-11-28T24:00:00Z" is not a real date and time',
        None,
    ),
    "ts_offset_99_99": (
        _own_seq(bad_wager(ts="2026-11-28T22:00:00+99:99")),
        'ts "2026-11-28T22:00:00+99:99" is not a real date and time',
        None,
    ),
    "ts_offset_24_00": (
        _own_seq(bad_wager(ts="2026-11-28T22:00:00+24:00")),
        'ts "2026-11-28T22:00:00+24:00" is not a real date and time',
        None,
    ),
    "effective_minute_60": (
        _own_seq(event("procedure_notice", effective="2026-11-28T22:60:00Z")),
        'effective "2026-11-28T22:60:00Z" is not a real date and time',
        None,
    ),
    "ts_leap_second": (_own_seq(event("wager", ts="2016-12-31T23:59:60Z")), "", None),
    # The number amount's text is the event's own, not a nested "amount" before it.
    "amount_after_a_nested_amount_7.123": (_with_nested_amount([{"amount": 7.123}]), "", None),
    "amount_key_written_with_an_escape": (_amount_key_escaped(), "", None),
}


@pytest.fixture(scope="module")
def verdicts(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[AuditDb, Path, dict[str, int]]]:
    """One file with every line of VERDICTS (none of them may crash the file)."""
    audit = open_audit(tmp_path_factory.mktemp("verdicts"))
    path, numbers = _file_of(audit, "verdicts.jsonl", [x for x, _, _ in VERDICTS.values()])
    assert audit.ingest_file(path).status == "ingested"
    yield audit, path, dict(zip(VERDICTS, numbers, strict=True))
    audit.con.close()


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(k, marks=pytest.mark.xfail(reason=bug, strict=True), id=k)
        if bug
        else pytest.param(k, id=k)
        for k, (_, _, bug) in VERDICTS.items()
    ],
)
def test_line_gets_the_right_verdict(
    verdicts: tuple[AuditDb, Path, dict[str, int]], case: str
) -> None:
    audit, _, numbers = verdicts
    n = numbers[case]
    _, expected, _ = VERDICTS[case]
    quarantined = [q["reason"] for q in audit.quarantine() if q["line_no"] == n]
    loaded = audit.events("line_no = ?", n)
    if not expected:  # it should load
        assert (quarantined, len(loaded)) == ([], 1)
    else:  # it should be quarantined, for exactly this reason
        assert loaded == [], "loaded, not quarantined"
        assert quarantined == [expected]


def test_amount_is_the_events_own_whatever_else_the_line_holds(audit: AuditDb) -> None:
    text = _with_nested_amount({"amount": 5})
    assert json.loads(text)["amount"] == 100
    r = audit.ingest_file(audit.write("n.jsonl", [text]))
    assert (r.events, r.problems) == (1, [])
    [e] = audit.events()
    assert e["amount"] == Decimal("100.00")
