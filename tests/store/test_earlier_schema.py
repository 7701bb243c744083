"""A database written by an earlier version, opened only to read: one sentence saying how to
bring it up to date (a reader cannot add tables), and after one writing run it reads again.
Found opening the demo database of the morning after issue 28 added `ordered_times`."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.cli import Run

from auditor.store import db

SHIFT = "2026-11-28/grave"


@pytest.mark.slow
def test_a_database_from_before_a_table_is_refused_to_a_reader_and_mended_by_a_writer(
    sample_audited: tuple[Path, object], tmp_path: Path, bacc_audit: Callable[..., Run]
) -> None:
    path = tmp_path / "old.duckdb"
    shutil.copy(sample_audited[0], path)
    con = db.connect(path)
    con.execute("DROP TABLE ordered_times; DROP TABLE closed_days")  # as an earlier version left it
    con.close()
    out = tmp_path / "grave.html"
    r = bacc_audit("report", "--db", path, "--shift", SHIFT, "--out", out)
    assert r.code == 2, r
    assert r.err == (
        f"error: {path}: written by an earlier bacc-audit (it has no closed_days, ordered_times "
        f"table); run a command that writes to it once (bacc-audit audit --db {path}), which "
        "adds them, then read it again\n"
    )
    assert not out.exists()
    assert bacc_audit("audit", "--db", path).code in (0, 1)
    r = bacc_audit("report", "--db", path, "--shift", SHIFT, "--out", out)
    assert r.code == 0, r
    assert "draw.banker_missed" in out.read_text()


def test_a_database_brought_up_by_another_schema_gets_the_whole_pass_again(
    sample_audited: tuple[Path, object], tmp_path: Path
) -> None:
    """Opening skips the schema's statements only for a database this very schema brought up
    to date (its fingerprint in `meta`): one whose view an earlier version defined otherwise
    gets today's view, and today's fingerprint."""
    path = tmp_path / "old.duckdb"
    shutil.copy(sample_audited[0], path)
    con = db.connect(path)
    con.execute("CREATE OR REPLACE VIEW source_totals AS SELECT 1 AS earlier")
    con.execute("UPDATE meta SET value = 'an earlier schema' WHERE key = 'schema_fingerprint'")
    con.close()
    con = db.connect(path)
    try:
        columns = [d[0] for d in con.execute("SELECT * FROM source_totals").description]
        fingerprint = con.execute(
            "SELECT value FROM meta WHERE key = 'schema_fingerprint'").fetchone()
    finally:
        con.close()
    assert "earlier" not in columns and "events" in columns, columns
    assert fingerprint == (db.SCHEMA_FINGERPRINT,)


def test_a_view_edited_in_the_file_does_not_outlive_a_writers_open(
    sample_audited: tuple[Path, object], tmp_path: Path
) -> None:
    """The fingerprint spares an open the schema's statements, not its views: a
    current_findings edited to hide the critical findings (the fingerprint left as it was)
    is defined again by the next command that opens the database to write."""
    path = tmp_path / "forged.duckdb"
    shutil.copy(sample_audited[0], path)
    con = db.connect(path)
    count = "SELECT count(*) FROM current_findings WHERE severity = 'critical'"
    criticals = con.execute(count).fetchone()
    con.execute("CREATE OR REPLACE VIEW current_findings AS SELECT * FROM findings WHERE false")
    assert con.execute(count).fetchone() == (0,)
    con.close()
    con = db.connect(path)
    try:
        assert con.execute(count).fetchone() == criticals
        assert criticals is not None and criticals[0] > 0
    finally:
        con.close()


def test_a_record_table_lost_is_made_again_after_its_sequence_and_a_new_file_has_them_all(
    tmp_path: Path,
) -> None:
    """The small record tables (sqlmodel) are made without asking after their sequences
    only where none of theirs exists: a new file. A file that lost `acknowledgements` but
    kept `ack_id_seq` gets the table back with the sequence where it was (made again, it
    would start over, or fail as already there)."""
    path = tmp_path / "audit.duckdb"
    con = db.connect(path)
    try:
        tables = {r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"
        ).fetchall()}
        assert {"runs", "sources", "acknowledgements", "signoffs"} <= tables
        assert con.execute("SELECT nextval('ack_id_seq')").fetchone() == (1,)
        assert con.execute("SELECT nextval('ack_id_seq')").fetchone() == (2,)
        con.execute("DROP TABLE acknowledgements")
    finally:
        con.close()
    con = db.connect(path)
    try:
        assert con.execute("SELECT count(*) FROM acknowledgements").fetchone() == (0,)
        assert con.execute("SELECT nextval('ack_id_seq')").fetchone() == (3,)
    finally:
        con.close()
