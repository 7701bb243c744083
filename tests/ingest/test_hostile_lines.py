"""A line cannot mean two things (issue 20, part 2).

- A key given twice at the top of a line is a bad line, named by its key, whichever value a
  reader would take.
- A resend at another path whose changed line is also malformed is an altered file, as it is
  when the changed line reads well; a bad line that does not say which event it is stays a
  bad line.
- A quarantined line that is not UTF-8 keeps its bytes beside its text, also in a database
  from before there was a place for them.

Each test feeds exactly its input and checks the other lines and files load, the reason and
finding are exact, and nothing is lost.
"""

from __future__ import annotations

import gzip
import hashlib
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from helpers.db import AuditDb, open_audit, set_chunk_bytes
from helpers.events import contract_lines, event, line

from auditor.store import db, runs

L = contract_lines()
WAGER_LINE = 5  # L[4]: table MB-07 seq 5, a wager of 100 at seat 3
CARD_LINE = 7  # L[6]: seq 7, the player's 4d
# The docs' recipe for a quarantined line's exact bytes (docs/event-log.md).
EXACT_BYTES = (
    "SELECT coalesce(q.raw_bytes, encode(q.raw)) FROM quarantine q "
    "JOIN sources s ON s.id = q.source_id WHERE s.path = ? AND q.line_no = ?"
)


def _twice(text: str, old: str, new: str) -> str:
    """`text` with `old` (which it holds once) followed by `new`: a key given again."""
    assert text.count(old) == 1, (old, text)
    return text.replace(old, old + "," + new)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _assert_quarantined_alone(
    audit: AuditDb, path: Path, n: int, bad: str, reason: str, problems: list[str]
) -> None:
    """Line n of `path` (of the 15 contract lines with line n replaced by `bad`) is in
    quarantine with `reason` and a log.malformed finding; the other 14 lines are events."""
    assert problems == [f"{path}:{n}: {reason}"]
    source = audit.scalar("SELECT id FROM sources WHERE path = ?", str(path.resolve()))
    assert audit.quarantine() == [
        {"source_id": source, "line_no": n, "reason": reason, "raw": bad, "raw_bytes": None}
    ]
    assert [e["line_no"] for e in audit.events()] == [i for i in range(1, 16) if i != n]
    [f] = audit.findings("log.malformed")
    assert f["source"] == f"{path.resolve()}:{n}"
    assert f["message"] == (
        f"Line {n} of {path.name} could not be read: {reason}; it is kept in quarantine"
    )
    assert f["observed"] == {"reason": reason, "line": bad}
    assert audit.findings("log.altered") == []


# --------------------------------------------------------------------------------------------
# A key given twice
# --------------------------------------------------------------------------------------------

# (line number replaced, the line with a key given twice, the key)
TWICE = {
    "amount": (WAGER_LINE, _twice(L[4], '"amount":100', '"amount":"-999.999"'), "amount"),
    "seat": (WAGER_LINE, _twice(L[4], '"seat":3', '"seat":9'), "seat"),
    "card": (CARD_LINE, _twice(L[6], '"card":"4d"', '"card":"Kd"'), "card"),
    "type": (CARD_LINE, _twice(L[6], '"type":"card"', '"type":"pay"'), "type"),
    "ts": (
        WAGER_LINE,
        _twice(L[4], '"ts":"2026-11-28T22:00:31-05:00"', '"ts":"2026-11-28T23:59:59Z"'),
        "ts",
    ),
    # The same value twice is no less a repeat: the rule is about the line, not the values.
    "seq_same_value": (WAGER_LINE, _twice(L[4], '"seq":5', '"seq":5'), "seq"),
}


@pytest.mark.slow
@pytest.mark.parametrize("via", ["batch", "alone"])
@pytest.mark.parametrize("case", list(TWICE))
def test_a_key_given_twice_is_quarantined_naming_the_key(
    audit: AuditDb, case: str, via: str
) -> None:
    n, bad, key = TWICE[case]
    lines = [*L[: n - 1], bad, *L[n:]]
    path = audit.write("night.jsonl", lines)
    r = audit.ingest(path).files[0] if via == "batch" else audit.ingest_file(path)

    reason = f'key "{key}" is given twice'
    assert (r.status, r.lines, r.events, r.quarantined) == ("ingested", 15, 14, 1)
    _assert_quarantined_alone(audit, path, n, bad, reason, r.problems)
    # Neither reading of the line became an event: no wager of 50 or -999.999 at seat 3 or 9.
    assert audit.scalar("SELECT count(*) FROM events WHERE type = 'wager'") == (
        0 if n == WAGER_LINE else 1
    )


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        # Before every field check: the version, whichever of the two, is not looked at.
        (_twice(L[4], '"v":1', '"v":2'), 'key "v" is given twice'),
        # Keys as JSON reads them: \u0061mount is amount.
        (_twice(L[4], '"amount":100', '"\\u0061mount":7'), 'key "amount" is given twice'),
        (
            _twice(L[4], '"amount":100', '"amount":"1","amount":"2"'),
            'key "amount" is given 3 times',
        ),
        (
            _twice(_twice(L[4], '"seat":3', '"seat":4'), '"amount":100', '"amount":5'),
            'key "seat" is given twice; key "amount" is given twice',
        ),
        # An extra field is a key like any other.
        (L[4][:-1] + ',"note":"a","note":"b"}', 'key "note" is given twice'),
        (
            L[4][:-1] + ',"a":1,"b":1,"c":1,"d":1,"a":2,"b":2,"c":2,"d":2,"e":1,"e":2}',
            'key "a" is given twice; key "b" is given twice; key "c" is given twice; '
            "and 2 more keys are given more than once",
        ),
        (
            L[4][:-1] + ',"a":1,"b":1,"c":1,"d":1,"a":2,"b":2,"c":2,"d":2}',
            'key "a" is given twice; key "b" is given twice; key "c" is given twice; '
            "and 1 more key is given more than once",
        ),
    ],
    ids=["v", "escaped_key", "three_times", "two_keys", "extra_field", "five_keys", "four_keys"],
)
def test_the_reason_names_every_repeated_key(audit: AuditDb, bad: str, reason: str) -> None:
    path = audit.write("night.jsonl", [*L[:4], bad, *L[5:]])
    r = audit.ingest_file(path)
    assert (r.events, r.quarantined) == (14, 1)
    _assert_quarantined_alone(audit, path, WAGER_LINE, bad, reason, r.problems)


def test_keys_that_differ_or_repeat_only_inside_an_extra_field_still_load(
    audit: AuditDb,
) -> None:
    """Not repeats: a key inside an extra field's own object, a key in other case (an extra
    field), a null; the last two make the keys outnumber the fields set, the slower check."""
    lines = [
        *L[:4],
        L[4][:-1] + ',"note":{"a":1,"a":2}}',
        L[5][:-1] + ',"Seq":6,"dealer":null}',
        *L[6:],
    ]
    path = audit.write("night.jsonl", lines)
    r = audit.ingest_file(path)
    assert (r.events, r.quarantined, r.problems) == (15, 0, [])
    assert audit.quarantine() == []
    [wager] = audit.events("seq = 5")
    assert (wager["amount"], wager["raw"]) == (Decimal("100.00"), lines[4])
    [closed] = audit.events("seq = 6")
    assert closed["raw"] == lines[5]
    assert audit.findings() == []


# --------------------------------------------------------------------------------------------
# A resend at another path whose changed line is malformed
# --------------------------------------------------------------------------------------------

# (the changed copy of line 5, what its reason says)
CHANGED_AND_BAD = {
    "key_twice": (
        _twice(L[4], '"amount":100', '"amount":"-999.999"'),
        'key "amount" is given twice',
    ),
    "negative_amount": (
        L[4].replace('"amount":100', '"amount":"-999.999"'),
        "amount \"-999.999\" is negative",
    ),
    "no_utc_offset": (
        L[4].replace("22:00:31-05:00", "22:00:31"),
        'ts "2026-11-28T22:00:31" has no UTC offset (write Z or +hh:mm)',
    ),
    "unknown_type": (
        L[4].replace('"type":"wager"', '"type":"wagr"'),
        'unknown event type "wagr"',
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("via", ["batch", "alone"])
@pytest.mark.parametrize("case", list(CHANGED_AND_BAD))
def test_a_resend_whose_changed_line_is_malformed_is_refused_as_altered(
    audit: AuditDb, case: str, via: str
) -> None:
    a = audit.write("a.jsonl", L)
    audit.ingest_file(a)
    before = audit.counts()
    changed, why = CHANGED_AND_BAD[case]
    b = audit.write("resent/a.jsonl", [*L[:4], changed, *L[5:]])
    r = audit.ingest(b).files[0] if via == "batch" else audit.ingest_file(b)

    reason = (
        f"line 5 (table MB-07 seq 5, malformed: {why}) differs from the event already "
        f"ingested from {a.resolve()}:5 (1 event differs)"
    )
    assert (r.status, r.message) == ("refused_altered", f"{b}: refused: {reason}")
    assert (r.events, r.quarantined, r.duplicates) == (0, 0, 0)
    # Nothing of it loads or is quarantined; the refusal is recorded and found.
    assert audit.counts() == before | {"sources": 2, "findings": 1}
    assert audit.quarantine() == []
    assert audit.findings("log.malformed") == []
    refused = audit.sources()[1]
    assert (refused["path"], refused["status"], refused["note"], refused["sha256"]) == (
        str(b.resolve()),
        "refused_altered",
        reason,
        _sha(b),
    )
    [f] = audit.findings("log.altered")
    assert f["message"] == f"{b.resolve()} was refused as altered: {reason}"
    assert f["observed"] == {"sha256": _sha(b), "reason": reason}
    [wager] = audit.events("seq = 5")
    assert (wager["amount"], wager["raw"]) == (Decimal("100.00"), L[4])


@pytest.mark.slow
def test_a_resend_whose_changed_line_is_not_utf8_is_refused_as_altered(
    audit: AuditDb,
) -> None:
    a = audit.write("a.jsonl", L)
    audit.ingest_file(a)
    changed = L[4].encode().replace(b'"bet":"banker"', b'"bet":"bank\xe9r"')
    b = audit.write("b.jsonl", [*L[:4], changed, *L[5:]])
    r = audit.ingest_file(b)
    assert r.status == "refused_altered"
    assert r.message == (
        f"{b}: refused: line 5 (table MB-07 seq 5, malformed: not valid UTF-8 text) differs "
        f"from the event already ingested from {a.resolve()}:5 (1 event differs)"
    )
    assert audit.quarantine() == []
    assert len(audit.findings("log.altered")) == 1


@pytest.mark.slow
def test_a_file_of_the_same_batch_is_an_earlier_file_too(audit: AuditDb) -> None:
    """Both files in one ingest: the first loads, the second's malformed copy of an event
    the first loaded makes it altered (the batch goes file by file to judge it)."""
    a = audit.write("a.jsonl", L)
    changed, why = CHANGED_AND_BAD["key_twice"]
    b = audit.write("b.jsonl", [*L[:4], changed, *L[5:]])
    c = audit.write("c.jsonl", [line(event("table_close", seq=1, table="MB-09"))])
    result = audit.ingest(a, b, c)
    assert [(f.path, f.status) for f in result.files] == [
        (a, "ingested"),
        (b, "refused_altered"),
        (c, "ingested"),
    ]
    assert result.files[1].message == (
        f"{b}: refused: line 5 (table MB-07 seq 5, malformed: {why}) differs from the event "
        f"already ingested from {a.resolve()}:5 (1 event differs)"
    )
    assert audit.scalar("SELECT count(*) FROM events") == 16
    assert audit.quarantine() == []
    assert [f["source"] for f in audit.findings()] == [str(b.resolve())]


@pytest.mark.slow
@pytest.mark.parametrize("same_batch", [False, True], ids=["earlier_run", "same_batch"])
def test_only_the_bad_line_overlaps_the_earlier_file(audit: AuditDb, same_batch: bool) -> None:
    """The copy's good lines (seq 6-15) are all new; only its malformed seq 5 meets the
    ingested file (seq 1-5). Small files are checked in bulk for overlaps: the bad line
    must count there too, or the copy would load with its changed event quarantined."""
    a = audit.write("a.jsonl", L[:5])
    changed, why = CHANGED_AND_BAD["negative_amount"]
    b = audit.write("b.jsonl", [changed, *L[5:]])
    if same_batch:
        result = audit.ingest(a, b)
    else:
        audit.ingest(a)
        result = audit.ingest(b)
    r = result.files[-1]
    assert (r.path, r.status) == (b, "refused_altered")
    assert r.message == (
        f"{b}: refused: line 1 (table MB-07 seq 5, malformed: {why}) differs from the event "
        f"already ingested from {a.resolve()}:5 (1 event differs)"
    )
    assert audit.scalar("SELECT max(seq) FROM events") == 5
    assert audit.quarantine() == []
    assert [f["code"] for f in audit.findings()] == ["log.altered"]


# A malformed line that does not say which event it is: (line, its reason).
NAMELESS = {
    "not_json": (L[4][:40], "not valid JSON"),
    "seq_as_string": (L[4].replace('"seq":5', '"seq":"5"'), 'seq must be a whole number, not "5"'),
    "seq_written_5.0": (
        L[4].replace('"seq":5', '"seq":5.0'),
        "seq must be a whole number, not 5.0",
    ),
    "table_a_number": (
        L[4].replace('"table":"MB-07"', '"table":12345'),
        "table must be 1-32 of A-Z a-z 0-9 . _ -, not 12345",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(NAMELESS))
def test_a_resend_whose_bad_line_names_no_event_loads_as_before(
    audit: AuditDb, case: str
) -> None:
    """The line cannot be held against an event: the copy is duplicates and one bad line,
    as it was before bad lines were compared."""
    a = audit.write("a.jsonl", L)
    audit.ingest_file(a)
    bad, reason = NAMELESS[case]
    b = audit.write("b.jsonl", [*L[:4], bad, *L[5:]])
    r = audit.ingest_file(b)
    assert (r.status, r.events, r.quarantined, r.duplicates) == ("ingested", 0, 1, 14)
    assert r.problems == [f"{b}:5: {reason}"]
    assert [(q["line_no"], q["reason"], q["raw"]) for q in audit.quarantine()] == [
        (5, reason, bad)
    ]
    assert [f["code"] for f in audit.findings()] == ["log.malformed"]
    assert audit.scalar("SELECT count(*) FROM events") == 15


@pytest.mark.slow
def test_a_bad_line_with_a_new_seq_is_quarantined_and_the_copy_loads(audit: AuditDb) -> None:
    """Held against the events and matching none, a bad line is just a bad line."""
    audit.ingest_file(audit.write("a.jsonl", L[:10]))
    bad = L[10].replace('"card":"2h"', '"card":"1x"')  # seq 11: not ingested yet
    b = audit.write("b.jsonl", [*L[5:10], bad, *L[11:]])
    r = audit.ingest_file(b)
    assert (r.status, r.events, r.quarantined, r.duplicates) == ("ingested", 4, 1, 5)
    assert r.problems == [
        f'{b}:6: card "1x" is not a card (rank A 2-9 T J Q K or 10, then suit c d h s)'
    ]
    assert audit.findings("log.altered") == []


def test_a_repeated_seq_differing_from_the_ingested_event_is_altered(audit: AuditDb) -> None:
    """Within a copy, a second seq 5 with other content is held against the ingested seq 5
    too; an identical repeat is only a repeat."""
    a = audit.write("a.jsonl", L)
    audit.ingest_file(a)
    other = L[4].replace('"amount":100', '"amount":200')
    b = audit.write("b.jsonl", [*L[:5], other, *L[5:]])
    r = audit.ingest_file(b)
    assert r.status == "refused_altered"
    assert r.message == (
        f"{b}: refused: line 6 (table MB-07 seq 5, malformed: seq 5 repeats in table MB-07 "
        f"(first at line 5)) differs from the event already ingested from {a.resolve()}:5 "
        "(1 event differs)"
    )
    same = audit.write("c.jsonl", [*L[:5], L[4], *L[5:]])
    r = audit.ingest_file(same)
    assert (r.status, r.events, r.quarantined, r.duplicates) == ("ingested", 0, 1, 15)
    assert r.problems == [f"{same}:6: seq 5 repeats in table MB-07 (first at line 5)"]


# --------------------------------------------------------------------------------------------
# A quarantined line that is not UTF-8 keeps its bytes
# --------------------------------------------------------------------------------------------

NOT_UTF8 = {
    3: L[2].encode().replace(b'"8s"', b'"8\xff\xfe"'),  # bytes no UTF-8 text has
    6: L[5].encode()[:-1] + b',"note":"caf\xe9"}',  # Latin-1
    9: L[8].encode()[:-1] + b',"note":"\xe2\x82"}',  # a character cut short
}


def _not_utf8_night() -> list[str | bytes]:
    lines: list[str | bytes] = list(L)
    for n, data in NOT_UTF8.items():
        lines[n - 1] = data
    lines[11] = "not json"  # line 12: bad, but UTF-8
    return lines


@pytest.mark.slow
@pytest.mark.parametrize(
    ("via", "newline", "gz", "block"),
    [
        ("alone", b"\n", False, None),
        ("batch", b"\n", False, None),
        ("alone", b"\r\n", False, None),
        ("batch", b"\r\n", True, None),
        ("alone", b"\n", True, 300),
        ("batch", b"\n", False, 300),
    ],
    ids=["alone", "batch", "crlf", "crlf_gzip_batch", "gzip_small_blocks", "small_blocks"],
)
def test_a_line_that_is_not_utf8_keeps_its_bytes(
    audit: AuditDb,
    monkeypatch: pytest.MonkeyPatch,
    via: str,
    newline: bytes,
    gz: bool,
    block: int | None,
) -> None:
    if block:
        set_chunk_bytes(monkeypatch, block)
    path = audit.write("night.jsonl" + (".gz" if gz else ""), _not_utf8_night(), gz=gz,
                       newline=newline)
    r = audit.ingest(path).files[0] if via == "batch" else audit.ingest_file(path)

    assert (r.status, r.lines, r.events, r.quarantined) == ("ingested", 15, 11, 4)
    assert r.problems == [
        f"{path}:3: not valid UTF-8 text",
        f"{path}:6: not valid UTF-8 text",
        f"{path}:9: not valid UTF-8 text",
        f"{path}:12: not valid JSON",
    ]
    source = audit.sources()[0]["id"]
    assert audit.quarantine() == [
        *(
            {
                "source_id": source,
                "line_no": n,
                "reason": "not valid UTF-8 text",
                "raw": data.decode("utf-8", errors="replace"),
                "raw_bytes": data,
            }
            for n, data in NOT_UTF8.items()
        ),
        {
            "source_id": source,
            "line_no": 12,
            "reason": "not valid JSON",
            "raw": "not json",
            "raw_bytes": None,
        },
    ]
    assert "\ufffd" in audit.quarantine()[0]["raw"]
    # The docs' recipe gives each line's bytes back exactly, as the file has them.
    text = gzip.decompress(path.read_bytes()) if gz else path.read_bytes()
    in_file = text.split(newline)
    for n in (3, 6, 9, 12):
        exact = audit.scalar(EXACT_BYTES, str(path.resolve()), n)
        assert exact == in_file[n - 1]
    # Every other line loaded, and each bad line is a finding.
    assert [e["line_no"] for e in audit.events()] == [1, 2, 4, 5, 7, 8, 10, 11, 13, 14, 15]
    assert sorted(f["source"] for f in audit.findings("log.malformed")) == sorted(
        f"{path.resolve()}:{n}" for n in (3, 6, 9, 12)
    )


@pytest.mark.slow
def test_an_old_quarantine_table_gains_the_bytes_column_and_keeps_its_rows(
    tmp_path: Path,
) -> None:
    """A database from before raw_bytes: opened, its quarantine gets the column (NULL in the
    old rows, whose text stays as it was) and new lines that are not UTF-8 keep their bytes."""
    path = tmp_path / "audit.duckdb"
    old = duckdb.connect(str(path))
    old.execute(
        "CREATE TABLE quarantine (source_id BIGINT NOT NULL, line_no BIGINT NOT NULL, "
        "reason VARCHAR NOT NULL, raw VARCHAR NOT NULL)"
    )
    old.execute("INSERT INTO quarantine VALUES (900, 4, 'not valid UTF-8 text', 'caf\ufffd')")
    old.close()

    con = db.connect(path)
    audit = AuditDb(tmp_path, con, runs.start(con, "test", {"test": True}))
    assert audit.rows(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'quarantine' "
        "ORDER BY column_index"
    ) == [
        {"column_name": "source_id", "data_type": "BIGINT"},
        {"column_name": "line_no", "data_type": "BIGINT"},
        {"column_name": "reason", "data_type": "VARCHAR"},
        {"column_name": "raw", "data_type": "VARCHAR"},
        {"column_name": "raw_bytes", "data_type": "BLOB"},
    ]
    assert audit.quarantine() == [
        {
            "source_id": 900,
            "line_no": 4,
            "reason": "not valid UTF-8 text",
            "raw": "caf\ufffd",
            "raw_bytes": None,
        }
    ]
    bad = L[1].encode()[:-1] + b',"note":"caf\xe9"}'
    r = audit.ingest_file(audit.write("night.jsonl", [L[0], bad, *L[2:]]))
    assert (r.events, r.quarantined) == (14, 1)
    assert [(q["line_no"], q["raw_bytes"]) for q in audit.quarantine()] == [(2, bad), (4, None)]
    con.close()
    # Opened again, nothing changes.
    con = db.connect(path)
    assert con.execute("SELECT count(*), count(raw_bytes) FROM quarantine").fetchall() == [
        (2, 1)
    ]
    con.close()


def test_a_fresh_database_has_the_bytes_column(tmp_path: Path) -> None:
    audit = open_audit(tmp_path)
    assert audit.scalar(
        "SELECT data_type FROM duckdb_columns() WHERE table_name = 'quarantine' "
        "AND column_name = 'raw_bytes'"
    ) == "BLOB"
    audit.con.close()
