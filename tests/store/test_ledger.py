"""The ledger's sealing (auditor/store/ledger.py): what a run seals and when, that a leaf's
bytes and a piece's digests can be re-derived from the rows as docs/ledger.md says, that a run
killed before its seal is sealed by the next, that two seals at once both land, and that a
database from before the ledger is taken in as its genesis."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from helpers.db import AuditDb
from helpers.shared import copy_of, once

from auditor import config, merkle
from auditor.audit import run as audit_run
from auditor.jobs import verify as verifying
from auditor.store import acks, db, ledger, ledger_rows, runs

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_logs"


def canonical(row: dict[str, object]) -> bytes:
    """docs/ledger.md's canonical bytes, written in Python: JSON with no spaces, UTF-8 as is,
    the control characters as \\u00XX in capitals."""
    text = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
    return re.sub(r"\\u00([0-9a-f]{2})", lambda m: "\\u00" + m.group(1).upper(), text).encode()


def utc(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.fixture
def night(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[duckdb.DuckDBPyConnection]:
    """The sample night ingested under a recorded run (its start, rows and end sealed),
    built once a run: this test's private copy, open."""
    built = once(tmp_path_factory, "ledger-night", _ingested)
    con = db.connect(copy_of(built / "a.duckdb", tmp_path / "a.duckdb"))
    yield con
    con.close()


def _ingested(folder: Path) -> None:
    con = db.connect(folder / "a.duckdb")
    try:
        with runs.recorded(con, "ingest", {}) as run:
            AuditDb(folder, con, run.id).ingest(SAMPLE)
    finally:
        con.close()


@pytest.mark.slow
def test_a_run_seals_its_start_its_rows_and_its_end_in_that_order(
    night: duckdb.DuckDBPyConnection,
) -> None:
    kinds = night.execute("SELECT kind, record_run FROM ledger ORDER BY idx").fetchall()
    assert kinds[0] == ("run.start", 1) and kinds[-1] == ("run.end", 1)
    assert {k for k, _ in kinds} == {"run.start", "derived", "source", "source_file", "piece",
                                      "finding", "run.end"}
    # the first seal of a database says it took in no earlier run's bookkeeping (derived.py)
    assert night.execute("SELECT run_id, tab, rows FROM run_derived").fetchall() == [
        (1, "(runs before)", 0)]
    heads = ledger.heads(night)
    assert [h.size for h in heads] == [2, len(kinds)]
    hashes = [bytes.fromhex(h) for (h,) in night.execute(
        "SELECT leaf_hash FROM ledger ORDER BY idx").fetchall()]
    assert heads[-1].root == merkle.root(hashes).hex()
    assert verifying.verify(night).ok


def test_a_leaf_is_the_records_canonical_bytes_as_the_docs_derive_them(
    night: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    a = acks.acknowledge(night, night.execute("SELECT fingerprint FROM findings LIMIT 1")
                         .fetchall()[0][0], by="J. \"Q\" Rivera\x07", disposition="video\nok")[0]
    [(data, leaf)] = night.execute(
        "SELECT data, leaf_hash FROM ledger WHERE kind = 'acknowledgement'").fetchall()
    expected = canonical({
        "kind": "acknowledgement", "table": "acknowledgements", "id": a.id,
        "fingerprint": a.fingerprint, "reviewer": "J. \"Q\" Rivera\x07",
        "disposition": "video\nok", "note": "", "recorded_at": utc(a.recorded_at),
        "run_id": a.run_id})
    assert data.encode() == expected and "\\u0007" in data
    assert leaf == hashlib.sha256(b"\x00" + expected).hexdigest()


def test_a_pieces_digests_are_re_derived_from_its_rows_as_the_docs_say(
    night: duckdb.DuckDBPyConnection,
) -> None:
    for data, in night.execute("SELECT data FROM ledger WHERE kind = 'piece'").fetchall():
        piece = json.loads(data)
        where = (f"source_id = {piece['source_id']} AND line_no BETWEEN "
                 f"{piece['first_line']} AND {piece['last_line']} ORDER BY line_no")
        rows = night.execute(f"SELECT line_no, raw FROM events WHERE {where}").fetchall()
        lines = np.array([r[0] for r in rows], dtype=">i8").tobytes()
        raws = [r[1].encode() for r in rows]
        lengths = np.array([len(r) for r in raws], dtype=">i4").tobytes()
        parts = [hashlib.sha256(lines).digest(), hashlib.sha256(lengths).digest(),
                 hashlib.sha256(b"".join(raws)).digest()]
        assert piece["events_stored"] == len(rows) == piece["events"]
        assert piece["events_sha256"] == hashlib.sha256(b"".join(parts)).hexdigest()
        q = night.execute(
            f"SELECT line_no, reason, raw, raw_bytes FROM quarantine WHERE {where}").fetchall()
        assert piece["quarantine_stored"] == len(q) == piece["quarantined"]
        cols = [hashlib.sha256(np.array([r[0] for r in q], dtype=">i8").tobytes()).digest()]
        for i in (1, 2, 3):
            vals = [None if r[i] is None else (r[i] if isinstance(r[i], bytes)
                                               else r[i].encode()) for r in q]
            cols.append(hashlib.sha256(np.array(
                [-1 if v is None else len(v) for v in vals], dtype=">i4").tobytes()).digest())
            cols.append(hashlib.sha256(b"".join(v for v in vals if v)).digest())
        assert piece["quarantine_sha256"] == hashlib.sha256(b"".join(cols)).hexdigest()
    assert night.execute("SELECT count(*) FROM quarantine").fetchall()[0][0] == 1


@pytest.mark.slow
def test_a_seals_digests_are_those_read_back_from_every_row_however_they_were_read(
    night: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seal put its few pieces' digests in its SQL and did not look in `quarantine` for
    pieces ingest counted none in; read back from every row, in one batch or streamed a
    few rows at a time, hashed where read or on threads, each piece's digests are still
    the ones sealed."""
    sealed = {}
    for (data,) in night.execute("SELECT data FROM ledger WHERE kind = 'piece'").fetchall():
        piece = json.loads(data)
        sealed[(piece["source_id"], piece["start_byte"], piece["end_byte"])] = tuple(
            piece[f] for f in ledger_rows.DIGEST_FIELDS)
    assert len(sealed) <= ledger.INLINE_PIECES  # the sample's pieces went inline
    found = ledger_rows.pieces(night, "true")
    assert sorted(p.quarantined for p in found)[-1] == 1  # one piece has its quarantined line
    for batch, threads_from in ((ledger_rows.BATCH_ROWS, ledger_rows.PARALLEL_ROWS),
                                (ledger_rows.BATCH_ROWS, 0), (7, 0)):
        monkeypatch.setattr(ledger_rows, "BATCH_ROWS", batch)
        monkeypatch.setattr(ledger_rows, "PARALLEL_ROWS", threads_from)
        again = ledger_rows.digests(night, found).to_pylist()
        assert {(r["source_id"], r["start_byte"], r["end_byte"]):
                tuple(r[f] for f in ledger_rows.DIGEST_FIELDS) for r in again} == sealed


def test_a_run_killed_before_its_seal_is_sealed_by_the_next_run(tmp_path: Path) -> None:
    con = db.connect(tmp_path / "a.duckdb")
    try:
        with runs.recorded(con, "audit", {}):
            pass
        # a run that started on the record, wrote, and died (kill -9) before its seal
        dead = runs.start(con, "ingest", {})
        ledger.seal(con, dead)
        AuditDb(tmp_path, con, dead).ingest(SAMPLE / "2026-11-28_CF-01.jsonl")
        v = verifying.verify(con)
        assert v.ok and v.pending == {dead: 3}  # its source, file and piece: not yet sealed
    finally:
        con.close()
    con = db.connect(tmp_path / "a.duckdb")
    try:
        with runs.recorded(con, "audit", {}) as run:
            pass
        notes = [h.note for h in ledger.heads(con)]
        assert f"run {dead} ended without its seal" in notes
        sealer = {r for (r,) in con.execute(
            "SELECT DISTINCT sealed_by FROM ledger WHERE record_run = ? AND kind <> 'run.start'",
            [dead]).fetchall()}
        assert sealer == {run.id}
        assert verifying.verify(con).ok and verifying.verify(con).pending == {}
    finally:
        con.close()


def test_two_seals_at_once_both_land_one_after_the_other(tmp_path: Path) -> None:
    con = db.connect(tmp_path / "a.duckdb")
    try:
        ids = [runs.start(con, "ack", {}) for _ in range(2)]
        cursors = [con.cursor() for _ in ids]
        errors: list[BaseException] = []

        def seal(c: duckdb.DuckDBPyConnection, rid: int) -> None:
            try:
                for _ in range(5):
                    ledger.seal(c, rid)
                    c.execute("UPDATE runs SET finished_at = now() WHERE id = ? AND "
                              "finished_at IS NULL", [rid])
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=seal, args=(c, r)) for c, r in zip(cursors, ids,
                                                                               strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        idx = [i for (i,) in con.execute("SELECT idx FROM ledger ORDER BY idx").fetchall()]
        assert idx == list(range(len(idx)))
        assert verifying.verify(con).ok
    finally:
        con.close()


def test_a_database_from_before_the_ledger_is_taken_in_as_its_genesis(tmp_path: Path) -> None:
    con = db.connect(tmp_path / "a.duckdb")
    try:
        run = runs.start(con, "ingest", {})
        AuditDb(tmp_path, con, run).ingest(SAMPLE / "2026-11-28_MB-01.jsonl")
        runs.finish(con, run, "done", 0, {})
        for t in ("ledger", "ledger_heads", "ledger_nodes"):
            con.execute(f"DELETE FROM {t}")
        with runs.recorded(con, "audit", {}):
            pass
        first = ledger.heads(con)[0]
        assert first.note == "genesis: the records written before the ledger"
        assert verifying.verify(con).ok
    finally:
        con.close()


def test_the_bookkeeping_of_a_database_from_before_its_digests_is_taken_in_once(
    tmp_path: Path,
) -> None:
    """A database audited by a bacc-audit from before `run_derived` (store/derived.py): the
    first seal digests every ended run's round_audits as found, and says so; a row forged
    under one of those runs after that is named, not taken in by the next seal."""
    con = db.connect(tmp_path / "a.duckdb")
    try:
        with runs.recorded(con, "ingest", {}) as run:
            AuditDb(tmp_path, con, run.id).ingest(SAMPLE / "2026-11-28_MB-01.jsonl")
        audit = runs.start(con, "audit", {})
        audit_run.audit(con, audit, config.PropertyConfig())
        runs.finish(con, audit, "done", 1, {})
        [(judged,)] = con.execute("SELECT count(*) FROM round_audits").fetchall()
        assert judged == 477
        # as an earlier version left it: no digest, its ledger sealed without them
        for t in ("ledger", "ledger_heads", "ledger_nodes", "run_derived"):
            con.execute(f"DELETE FROM {t}")
        with runs.recorded(con, "verify", {}) as later:
            pass
        assert con.execute("SELECT run_id, tab, rows, recorded_by FROM run_derived "
                           "ORDER BY run_id, tab").fetchall() == [
            (audit, "change_audits", 1, later.id), (audit, "ordered_time_log", 2, later.id),
            (audit, "round_audits", 477, later.id),
            (audit, "round_exclusion_log", 1, later.id),
            (audit, "shoe_index_done", 6, later.id), (audit, "shoe_index_marks", 1, later.id),
            (audit, "shoe_index_queue", 6, later.id), (audit, "stream_checks", 1, later.id),
            (later.id, "(runs before)", 2, later.id)]
        assert verifying.verify(con).ok
        con.execute("INSERT INTO round_audits SELECT * REPLACE (round + 500 AS round) "
                    "FROM round_audits LIMIT 1")
        with runs.recorded(con, "verify", {}):
            pass
        v = verifying.verify(con)
        assert [p.sentence() for p in v.problems] == [
            f"inserted: round_audits rows of run {audit} (leaf {v.problems[0].leaf}): 478 rows "
            "stand, the ledger sealed a digest of 477"]
    finally:
        con.close()


def test_a_polls_seal_never_seals_again_a_record_stamped_after_a_clock_set_back(
    tmp_path: Path,
) -> None:
    """A poll's seal looks for its records' leaves only among those of the last
    SEALED_LOOKBACK (the whole ledger cost more each seal as the night went on); a record
    stamped after a seal that already sealed it (the clock set back) is found all the same."""
    con = db.connect(tmp_path / "a.duckdb")
    try:
        run = runs.start(con, "watch", {})
        ledger.seal(con, run)

        def finding(n: int) -> None:
            con.execute(
                "INSERT INTO findings (fingerprint, run_id, recorded_at, status, severity, "
                "rule, code, message) VALUES (?, ?, now(), 'open', 'minor', 'r', 'log.malformed', "
                "'m')", [f"f{n}", run])

        head = ledger.latest_head(con)
        assert head is not None
        finding(1)
        first = ledger.seal(con, run, since=head.sealed_at).head
        assert first is not None
        finding(2)
        second = ledger.seal(con, run, since=first.sealed_at).head
        assert second is not None and second.sealed_at > first.sealed_at
        # the first finding's stamp as a clock set back ten minutes before its write would
        # have it: after the second seal, while its leaf is of the first
        later = second.sealed_at + dt.timedelta(minutes=10)
        con.execute("UPDATE findings SET recorded_at = ? WHERE fingerprint = 'f1'", [later])
        assert ledger.seal(con, run, since=second.sealed_at).head is None
        assert con.execute("SELECT count(*) FROM ledger WHERE kind = 'finding'").fetchall() == [
            (2,)]
    finally:
        con.close()


def test_rows_digested_where_they_lie_give_the_digests_of_rows_in_line_order() -> None:
    """The fast check digests a piece's rows in runs of the scan (ledger_rows._add_runs),
    without reordering them: rows of two pieces interleaved in blocks, across the scan's
    chunks, one of another source's piece outside the batch, and a line stored twice, give
    what the rows put in line order give (and what the copying path gives)."""
    rows = [(1, 3, "c"), (1, 4, "d"), (2, 1, "x"), (2, 2, None), (1, 1, "a"), (1, 2, "bb"),
            (3, 1, "outside"), (2, 3, "z"), (1, 5, "e"), (1, 5, "e again")]
    table = pa.Table.from_batches([  # as the scan gives them: source, line, then the digest's
        pa.record_batch([pa.array([r[i] for r in part], t) for i, t in
                         ((0, pa.int64()), (1, pa.int64()), (1, pa.int64()), (2, pa.string()))],
                        names=["source_id", "_line", "line_no", "raw"])
        for part in (rows[:3], rows[3:6], rows[6:])])
    pieces = [ledger_rows.Piece(1, 0, 50, 1, 5, 6), ledger_rows.Piece(2, 0, 30, 1, 3, 3)]
    starts = np.array([(p.source_id << 32) + p.first_line for p in pieces], dtype=np.int64)
    ends = np.array([(p.source_id << 32) + p.last_line for p in pieces], dtype=np.int64)
    order = np.arange(2, dtype=np.int64)

    def fresh() -> list:
        return [ledger_rows._Digest(2, (False, True)) for _ in pieces]

    by_runs = fresh()
    assert ledger_rows._add_runs(by_runs, table, starts, ends, order)
    expected = []
    for sid in (1, 2):  # stable: the two line-5 rows of source 1 in the order stored
        mine = sorted((r for r in rows if r[0] == sid), key=lambda r: r[1])
        expected.append(ledger_rows.batches_digest([pa.record_batch(
            [pa.array([r[1] for r in mine], pa.int64()), pa.array([r[2] for r in mine])],
            names=["line_no", "raw"])], (False, True)))
    assert [(d.rows, d.hexdigest()) for d in by_runs] == expected
    assert [n for n, _ in expected] == [6, 3]
    rb = pa.record_batch([table.column(j).combine_chunks() for j in range(4)],
                         names=table.column_names)
    copied = fresh()
    rb, which, lines = ledger_rows._placed(rb, starts, ends, order)
    at = np.lexsort((lines, which))
    ledger_rows._add(copied, rb.take(pa.array(at)), which[at])
    assert [(d.rows, d.hexdigest()) for d in copied] == expected
