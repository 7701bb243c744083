"""The audit database: one DuckDB file holding events, quarantine, findings and the records.

Everything in it is evidence, so tables are append-only: a changed status is a new row.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import duckdb
from duckdb_engine import ConnectionWrapper
from sqlalchemy import Sequence
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool
from sqlmodel import Session, SQLModel, create_engine, select

from auditor.errors import DatabaseBusy, UserError, private_files
from auditor.store import (
    ledger,
    limits,
    records,  # noqa: F401  (registers the sqlmodel tables)
    serving,
    shared,
)
from auditor.store.closed_days import DDL as CLOSED_DAYS_DDL
from auditor.store.events import FIELDS
from auditor.store.sql import is_stream_sql, quote, stream_name_sql

DEFAULT_DB = "bacc-audit.duckdb"
SCHEMA_VERSION = 1


def default_db_path() -> Path:
    return Path(os.environ.get("BACC_AUDIT_DB") or DEFAULT_DB)


def _field_columns() -> str:
    return ",\n  ".join(f"{f.column} {f.sql_type}" for f in FIELDS.values())


# Ingest writes every line of a file here first and moves the rejected ones to quarantine
# before the file's transaction commits, so `rejected` is NULL in every committed row and the
# other columns that the format requires are never NULL there. Loading once, straight into
# this table, is what keeps ingest near DuckDB's own load speed.
EVENTS_DDL = f"""
CREATE TABLE IF NOT EXISTS events (
  source_id BIGINT NOT NULL,
  line_no BIGINT NOT NULL,
  stream VARCHAR,
  seq BIGINT,
  ts TIMESTAMPTZ,
  ts_offset_min SMALLINT,
  type VARCHAR,
  {_field_columns()},
  raw VARCHAR NOT NULL,
  rejected VARCHAR
)"""

# One row per (file, stream) that file loaded, with its seq range: ingest checks a new file
# against the few earlier files that share its streams instead of scanning every event, which
# keeps the cost of a file flat as the database grows to hundreds of millions of events.
STREAM_SOURCES_DDL = """
CREATE TABLE IF NOT EXISTS stream_sources (
  stream VARCHAR NOT NULL,
  source_id BIGINT NOT NULL,
  min_seq BIGINT NOT NULL,
  max_seq BIGINT NOT NULL,
  events BIGINT NOT NULL
)"""

# One row per piece of a log file ingested (issue 14): table systems append to their files all
# night, so a file may be ingested in pieces, under more than one name. A whole file is one
# piece. Each row says which bytes (`start_byte` to `end_byte`, from the file's start) and
# which lines it loaded, and the SHA-256 of the file's first `end_byte` bytes, so an auditor
# can check every piece against the file, and a file offered again is known to be the same
# one, grown, by that hash alone. `waiting_bytes`: a last line without its newline, left for a
# later piece. `device` and `inode` (NULL before they were kept) tell a file truncated in
# place from a new file under the same name. A gzip file is one piece of its stored bytes.
SOURCE_EXTENTS_DDL = """
CREATE TABLE IF NOT EXISTS source_extents (
  source_id BIGINT NOT NULL,
  file_id BIGINT NOT NULL,
  path VARCHAR NOT NULL,
  start_byte BIGINT NOT NULL,
  end_byte BIGINT NOT NULL,
  first_line BIGINT NOT NULL,
  last_line BIGINT NOT NULL,
  prefix_sha256 VARCHAR NOT NULL,
  events BIGINT NOT NULL,
  quarantined BIGINT NOT NULL,
  duplicates BIGINT NOT NULL,
  waiting_bytes BIGINT NOT NULL,
  device BIGINT,
  inode BIGINT,
  run_id BIGINT NOT NULL,
  ingested_at TIMESTAMPTZ NOT NULL
)"""
# One row per log file known by its content, whatever its names: `id` is the source id of
# its first piece (source_extents.file_id), `head_sha256` the SHA-256 of its first line (see
# auditor/ingest/growing.py; NULL for gzip files and for files ingested before pieces were
# recorded, which are found by their path), `path` the name it was first read under.
SOURCE_FILES_DDL = """
CREATE TABLE IF NOT EXISTS source_files (
  id BIGINT NOT NULL,
  head_sha256 VARCHAR,
  path VARCHAR NOT NULL,
  run_id BIGINT NOT NULL,
  recorded_at TIMESTAMPTZ NOT NULL
)"""
DDL = [
    EVENTS_DDL,
    # `raw` is the line as text; a line that is not UTF-8 shows its bad bytes there as
    # U+FFFD, and `raw_bytes` keeps the bytes it had (NULL: `raw` in UTF-8 is the line).
    """
    CREATE TABLE IF NOT EXISTS quarantine (
      source_id BIGINT NOT NULL,
      line_no BIGINT NOT NULL,
      reason VARCHAR NOT NULL,
      raw VARCHAR NOT NULL,
      raw_bytes BLOB
    )""",
    # A database from before `raw_bytes`: its rows stay as they were (NULL there).
    "ALTER TABLE quarantine ADD COLUMN IF NOT EXISTS raw_bytes BLOB",
    "CREATE SEQUENCE IF NOT EXISTS finding_id_seq",
    """
    CREATE TABLE IF NOT EXISTS findings (
      id BIGINT NOT NULL DEFAULT nextval('finding_id_seq'),
      fingerprint VARCHAR NOT NULL,
      run_id BIGINT NOT NULL,
      recorded_at TIMESTAMPTZ NOT NULL,
      status VARCHAR NOT NULL,
      code VARCHAR NOT NULL,
      severity VARCHAR NOT NULL,
      table_id VARCHAR,
      pit VARCHAR,
      shoe VARCHAR,
      round BIGINT,
      seq BIGINT,
      ts TIMESTAMPTZ,
      rule VARCHAR NOT NULL,
      message VARCHAR NOT NULL,
      expected JSON,
      observed JSON,
      source VARCHAR,
      evidence JSON,
      dealer VARCHAR
    )""",
    # A database from before findings named their dealer (findings v1.1): its rows stay NULL.
    "ALTER TABLE findings ADD COLUMN IF NOT EXISTS dealer VARCHAR",
    # The standing state of each finding: its latest row, unless that row withdrew it.
    """
    CREATE OR REPLACE VIEW current_findings AS
    SELECT * EXCLUDE (rn) FROM (
      SELECT *, row_number() OVER (PARTITION BY fingerprint ORDER BY id DESC) AS rn
      FROM findings
    ) WHERE rn = 1 AND status = 'open'
    """,
    # One row per round replayed: what the replay saw (events, last seq) and found. A round
    # whose events changed since is replayed again.
    """
    CREATE TABLE IF NOT EXISTS round_audits (
      table_id VARCHAR NOT NULL,
      shoe VARCHAR NOT NULL,
      round BIGINT NOT NULL,
      events BIGINT NOT NULL,
      last_seq BIGINT NOT NULL,
      findings BIGINT NOT NULL,
      run_id BIGINT NOT NULL,
      audited_at TIMESTAMPTZ NOT NULL
    )""",
    # --- logs that lie (issue 28); derived, like round_audits ---
    # Each check of a stream's times (auditor/audit/streams.py): its events and highest seq
    # then, and how many of its events were stamped back. A stream whose counts moved since
    # is checked again.
    """
    CREATE TABLE IF NOT EXISTS stream_checks (
      stream VARCHAR NOT NULL,
      events BIGINT NOT NULL,
      max_seq BIGINT NOT NULL,
      reversed BIGINT NOT NULL,
      run_id BIGINT NOT NULL,
      checked_at TIMESTAMPTZ NOT NULL
    )""",
    # The events whose ordered time (the stream's order wins over a stamp that contradicts
    # it) differs from their `ts`, as of their stream's last check: a clean stream has none.
    """
    CREATE TABLE IF NOT EXISTS ordered_times (
      stream VARCHAR NOT NULL,
      seq BIGINT NOT NULL,
      ts TIMESTAMPTZ NOT NULL
    )""",
    # Round events left out of their round as it stood (auditor/audit/rounds.py): `why`
    # 'after_end' (after its round_end or its table's close) or 'late_delivery' (delivered
    # after the round was judged). The shoe checks leave them out too.
    """
    CREATE TABLE IF NOT EXISTS round_exclusions (
      table_id VARCHAR NOT NULL,
      shoe VARCHAR NOT NULL,
      round BIGINT NOT NULL,
      seq BIGINT NOT NULL,
      why VARCHAR NOT NULL
    )""",
    # Every set of round_exclusions (a round's) and of ordered_times (a stream's) as it was
    # set, append-only and sealed a run at a time (store/set_logs.py): seq -1 says a set is
    # empty, seq -2 that the table was taken in as found.
    """
    CREATE TABLE IF NOT EXISTS round_exclusion_log (
      table_id VARCHAR NOT NULL,
      shoe VARCHAR NOT NULL,
      round BIGINT NOT NULL,
      seq BIGINT NOT NULL,
      why VARCHAR NOT NULL,
      run_id BIGINT NOT NULL,
      set_at TIMESTAMPTZ NOT NULL
    )""",
    """
    CREATE TABLE IF NOT EXISTS ordered_time_log (
      stream VARCHAR NOT NULL,
      seq BIGINT NOT NULL,
      ts TIMESTAMPTZ NOT NULL,
      run_id BIGINT NOT NULL,
      set_at TIMESTAMPTZ NOT NULL
    )""",
    # When each procedure change was first judged against its notices (the table pass): a
    # notice delivered after that does not count for it (notice.backdated).
    """
    CREATE TABLE IF NOT EXISTS change_audits (
      table_id VARCHAR NOT NULL,
      seq BIGINT NOT NULL,
      run_id BIGINT NOT NULL,
      audited_at TIMESTAMPTZ NOT NULL
    )""",
    # The shoe-integrity index (auditor/audit/integrity.py, docs/shoe-integrity.md): each
    # shoe's dealt cards in order (codes 0..51) and the round of each, the k-grams of every
    # `step`-th position. Derived, like round_audits: a shoe that gets more cards is indexed
    # again.
    """
    CREATE TABLE IF NOT EXISTS shoe_orders (
      shoe_no BIGINT NOT NULL,
      table_id VARCHAR NOT NULL,
      shoe VARCHAR NOT NULL,
      first_ts TIMESTAMPTZ,
      decks BIGINT,
      shuffle VARCHAR,
      batch VARCHAR,
      codes UTINYINT[] NOT NULL,
      rounds BIGINT[] NOT NULL
    )""",
    """
    CREATE TABLE IF NOT EXISTS shoe_grams (
      gram BIGINT NOT NULL,
      shoe_no BIGINT NOT NULL,
      pos INTEGER NOT NULL
    )""",
    # What the pass did, append-only and sealed a run at a time (store/shoe_index.py): the
    # lines read, the shoes to index (`watch` leaves a shoe still being dealt for later), and
    # each shoe indexed with its index rows' digests.
    """
    CREATE TABLE IF NOT EXISTS shoe_index_marks (
      source_id BIGINT NOT NULL,
      last_line BIGINT NOT NULL,
      run_id BIGINT NOT NULL,
      marked_at TIMESTAMPTZ NOT NULL
    )""",
    """
    CREATE TABLE IF NOT EXISTS shoe_index_queue (
      table_id VARCHAR NOT NULL,
      shoe VARCHAR NOT NULL,
      run_id BIGINT NOT NULL,
      queued_at TIMESTAMPTZ NOT NULL
    )""",
    """
    CREATE TABLE IF NOT EXISTS shoe_index_done (
      table_id VARCHAR NOT NULL,
      shoe VARCHAR NOT NULL,
      shoe_no BIGINT NOT NULL,
      cards BIGINT NOT NULL,
      grams BIGINT NOT NULL,
      order_sha256 VARCHAR,
      grams_sha256 VARCHAR,
      run_id BIGINT NOT NULL,
      done_at TIMESTAMPTZ NOT NULL
    )""",
    """
    CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)
    """,
    STREAM_SOURCES_DDL,
    SOURCE_EXTENTS_DDL,
    SOURCE_FILES_DDL,
    # Per source, what all its pieces loaded. A follower (auditor/ingest/follow.py) loads many
    # pieces under one `sources` row, whose counts, size and sha256 are those of its first
    # piece (records are never rewritten); this view gives the whole: the file's SHA-256 up
    # to the last piece's end, and the counts summed.
    """
    CREATE OR REPLACE VIEW source_totals AS
    SELECT source_id, count(*) AS pieces, min(start_byte) AS start_byte,
           max(end_byte) AS end_byte, min(first_line) AS first_line,
           max(last_line) AS last_line, arg_max(prefix_sha256, end_byte) AS sha256,
           sum(events) AS events, sum(quarantined) AS quarantined,
           sum(duplicates) AS duplicates
    FROM source_extents GROUP BY source_id
    """,
    # Every version of a report the nightly job filed, never rewritten: its file and SHA-256,
    # the SHA-256 of its HTML (what a new render is compared with), and the findings it
    # showed (fingerprint, code, table, acknowledged), which the next version's first page
    # compares against.
    """
    CREATE TABLE IF NOT EXISTS report_versions (
      slug VARCHAR NOT NULL,
      version BIGINT NOT NULL,
      path VARCHAR NOT NULL,
      sha256 VARCHAR NOT NULL,
      html_sha256 VARCHAR NOT NULL,
      findings JSON NOT NULL,
      run_id BIGINT,
      filed_at TIMESTAMPTZ NOT NULL
    )""",
    # The gaming days closed, on which the ends of table logs are judged (closed_days.py).
    CLOSED_DAYS_DDL,
    *ledger.DDL,
]

_LOCK_PID = re.compile(r"PID (\d+)")
# DuckDB 2 names the holder ("Conflicting lock is held in PROGRAM (PID N)") and, when the
# holder only reads, adds that this one could still open the database read-only.
_LOCK_HELD = "conflicting lock is held"
_HOLDER_READS = "able to open this database in read-only mode"


def busy_message(
    path: Path, duckdb_text: str, read_only: bool, holder: str | None = None
) -> str:
    """The sentence for a lock DuckDB refused: what the holder has the database open for,
    as far as DuckDB's error tells, never a guess. A reader blocks a writer too, so "is
    writing" would send the operator after the wrong process.

    Readers share the lock, so a refused read means the holder writes; a refused write is
    from a reader only when DuckDB says so. `holder` names the process when it is an owner
    that said who it is (`bacc-audit watch (PID 7)`, see shared.holder).
    """
    text = duckdb_text.lower()
    m = _LOCK_PID.search(duckdb_text)
    who = holder or (f"another process (PID {m.group(1)})" if m else "another process")
    if _HOLDER_READS in text:
        how = " for reading, and nothing can write to it until that process closes it"
    elif read_only or _LOCK_HELD in text:
        how = " for writing"
    else:
        how = ""
    if holder and WATCH.search(holder):
        return f"{path}: database busy: {who} has it open{how}; {BESIDE_WATCH}"
    return f"{path}: database busy: {who} has it open{how}; try again when it has finished"


# `watch` never finishes: "try again when it has finished" would wait forever.
WATCH = re.compile(r"\bwatch \(PID \d+\)$")
BESIDE_WATCH = (
    "watch runs until it is stopped, and ingests and audits what arrives in its spool "
    "itself: put logs into its spool rather than ingesting them, and have it file the "
    "shift PDFs (`watch --file-reports`) or make one with `bacc-audit report` (served by "
    "watch); or stop watch (SIGTERM), run this, and start it again, which goes on where it "
    "stopped (docs/live.md)"
)


# Every DuckDB database file carries this at byte 8 (after the header's checksum).
DUCKDB_MAGIC = b"DUCK"
_MAGIC_AT = 8


def check_database_file(path: Path) -> None:
    """Refuse a path that is an existing file but not a DuckDB database, before DuckDB sees
    it: given a log file, DuckDB reads it as data into a database in memory, and every
    command then "works" and saves nothing."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return  # a new path (or a link to one): the database is created there
    except OSError as e:  # a name too long, a link loop, a file where a folder should be
        raise UserError(f"{path}: cannot read the audit database ({e.strerror})") from None
    if stat.S_ISDIR(mode):
        raise UserError(f"{path}: is a folder, not an audit database; name a file with --db")
    if not stat.S_ISREG(mode):  # a pipe would hold the open until someone writes to it
        raise UserError(
            f"{path}: not a file (a named pipe, a socket or a device), so not an audit "
            "database; give --db (or BACC_AUDIT_DB) the audit database file"
        )
    try:
        with path.open("rb") as fh:
            head = fh.read(_MAGIC_AT + len(DUCKDB_MAGIC))
    except FileNotFoundError:
        return  # a new path: the database is created there
    except OSError as e:
        raise UserError(f"{path}: cannot read the audit database ({e.strerror})") from None
    if head[_MAGIC_AT:] != DUCKDB_MAGIC:
        what = "an empty file" if not head else "not a DuckDB database"
        raise UserError(
            f"{path}: {what}, so not an audit database; give --db (or BACC_AUDIT_DB) the "
            "audit database file, or a path where none exists yet to create one"
        )


def require_database(path: Path) -> None:
    """A command that reads what ingest loaded (`findings`, `report`, `audit`, `ack`) is
    refused where there is no database yet, rather than making an empty one and saying "0
    rounds audited": the --db (or the folder) is likely not the one meant."""
    if not os.path.lexists(path):
        raise UserError(
            f"{path}: no audit database here yet; run `bacc-audit ingest` first "
            "(or name another with --db / BACC_AUDIT_DB)"
        )


def interrupted(e: BaseException) -> bool:
    """Ctrl-C: a KeyboardInterrupt, or the RuntimeError DuckDB raises for a query that
    SIGINT stopped (it catches the signal itself while a query runs)."""
    if isinstance(e, KeyboardInterrupt | duckdb.InterruptException):
        return True
    return type(e) is RuntimeError and str(e) == "Query interrupted"


def _chain(e: BaseException) -> Iterator[BaseException]:
    """The error and those it was raised from or during: a query that failed inside a
    transaction is often followed by DuckDB's "transaction is aborted" from the cleanup."""
    seen: set[int] = set()
    at: BaseException | None = e
    while at is not None and id(at) not in seen:
        seen.add(id(at))
        yield at
        at = at.__cause__ or at.__context__


def out_of_memory(e: BaseException) -> UserError | None:
    """The sentence for DuckDB's "Out of Memory Error": the work did not fit within the
    memory DuckDB may use (BACC_AUDIT_MEMORY_LIMIT, else its default of 80% of the
    machine's). The setup, not a bug in the data: exit 2 with the limit named, never an
    internal error with the cleanup's "transaction is aborted" in front."""
    for at in _chain(e):
        if isinstance(at, duckdb.OutOfMemoryException):
            said = str(at).splitlines()[0].removeprefix("Out of Memory Error: ").rstrip(".")
            limit = os.environ.get("BACC_AUDIT_MEMORY_LIMIT")
            setting = (f"BACC_AUDIT_MEMORY_LIMIT={limit}" if limit
                       else "DuckDB's default memory limit (BACC_AUDIT_MEMORY_LIMIT not set)")
            return UserError(
                f"the database ran out of memory ({said}) under {setting}; the step that "
                "failed was rolled back: raise the limit, or run on a machine with more "
                "memory, and run the command again")
    return None


def setup_error(e: BaseException) -> UserError | None:
    """A full disk or memory under DuckDB as the sentence to say (out_of_space,
    out_of_memory), or None."""
    return out_of_space(e) or out_of_memory(e)


def out_of_space(e: BaseException) -> UserError | None:
    """The sentence for DuckDB's "No space left on device": the database, its WAL, or the
    temporary files a large check or audit spills beside it (DB.tmp) filled the disk. The
    machine's setup, not a bug: exit 2 with the file named, like any output that cannot be
    written, instead of an internal error."""
    full = next((at for at in _chain(e)
                 if isinstance(at, duckdb.Error) and "No space left on device" in str(at)), None)
    if full is None:
        return None
    named = re.search(r'"([^"]+)"', str(full))
    where = named[1] if named else "the audit database's folder"
    return UserError(
        f"{where}: no space left on the device; free space there (a large check or audit "
        "spills temporary files beside the database, in DB.tmp) and run the command again"
    )


# Every table the schema creates (a database that lacks one is from an earlier version).
SCHEMA_TABLES = frozenset(
    name for stmt in DDL for name in re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", stmt)
)


def connect(
    path: Path | str, read_only: bool = False, *, small_writes: bool = False
) -> duckdb.DuckDBPyConnection:
    """Open the database; a lock held by another process becomes a DatabaseBusy sentence,
    unless that process serves the database (docs/database.md).

    Opened read-write, this process owns the database while the connection is open and
    serves it to the other processes of its user (store/serving.py); close the connection to
    stop. A process that meets the lock of such an owner gets the database through it
    instead (a RemoteConnection) when it only reads (`read_only`), or when it writes only
    small records beside the owner's work (`small_writes`: an acknowledgement, a notice; a
    run's own row). Ingest, audit and nightly, which write in bulk, still get "database
    busy": one writer at a time.
    """
    path = Path(path)
    if read_only:
        require_database(path)
    check_database_file(path)
    private_files()  # the database, its .wal and .tmp spills: 0600 (DuckDB creates them)
    for attempt in (1, 2):
        try:
            con = duckdb.connect(str(path), read_only=read_only)
            break
        except duckdb.IOException as e:
            text = str(e)
            if "lock" not in text.lower():
                raise UserError(f"{path}: cannot open the audit database: {text}") from None
            served = read_only or small_writes
            if served:
                remote = shared.reach(path, read_only)
                if remote is not None:
                    return cast(duckdb.DuckDBPyConnection, remote)
            if attempt == 2 or not served or not shared.owner_recorded(path):
                raise DatabaseBusy(
                    busy_message(path, text, read_only, shared.holder(path, text))
                ) from None
            # An owner file, but nobody answered: the owner may have closed the database
            # between our try and its socket. Once more, then "busy".
            time.sleep(0.1)
        except duckdb.Error as e:
            raise UserError(f"{path}: not a readable audit database ({e})") from None
    con.execute("SET TimeZone = 'UTC'")
    limits.apply(con)
    # Every query that needs an order says ORDER BY; without this promise DuckDB cannot
    # insert in parallel, and ingest is about a quarter slower.
    con.execute("SET preserve_insertion_order = false")
    if read_only:
        _check_schema(con, path)
        return con
    ensure_schema(con)
    return serving.serve(con, path)


def _check_schema(con: duckdb.DuckDBPyConnection, path: Path | str) -> None:
    """A database written by an earlier version, opened to read, lacks the tables added
    since (a reader cannot add them): one sentence saying how to bring it up to date, not an
    internal error in the middle of a report."""
    have = _tables(con)
    if "events" not in have:
        return  # not an audit database yet: the command says so in its own words
    missing = sorted(SCHEMA_TABLES - have)
    if missing:
        con.close()
        raise UserError(
            f"{path}: written by an earlier bacc-audit (it has no {', '.join(missing[:3])}"
            f"{' …' if len(missing) > 3 else ''} table); run a command that writes to it once "
            f"(bacc-audit audit --db {path}), which adds them, then read it again"
        )


def served_runs(con: duckdb.DuckDBPyConnection) -> set[int]:
    """Runs recorded 'running' whose process is alive because it is the owner serving
    `con`, or a command it serves (empty for a connection of this process's own): `runs`
    shows those as running, not as interrupted."""
    return shared.served_runs(con)


# DuckDB's catalogue functions filtered to the database itself cost ~1 ms; unfiltered, they
# also list the system and temp catalogues: ~6 ms every time a command opens the database.
_THIS_DATABASE = "database_name = current_database()"


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {
        r[0]
        for r in con.execute(
            f"SELECT table_name FROM duckdb_tables() WHERE {_THIS_DATABASE}"
        ).fetchall()
    }


def has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the database has table `name`: one written by an older bacc-audit, or opened
    read-only (not brought up to date), may lack a table a reader asks for. DuckDB's own
    catalogue function, which costs about half of information_schema's view."""
    return bool(
        con.execute(
            f"SELECT count(*) FROM duckdb_tables() WHERE {_THIS_DATABASE} AND table_name = ?",
            [name],
        )
        .fetchall()[0][0]
    )


# The views, defined again at every read-write open (ensure_schema).
VIEW_DDL = [stmt for stmt in DDL if "CREATE OR REPLACE VIEW" in stmt]
# What ensure_schema last brought a database to: its DDL and the sqlmodel tables it made.
SCHEMA_FINGERPRINT = hashlib.sha256(
    "\n;\n".join([*DDL, *sorted(t.name for t in SQLModel.metadata.sorted_tables)]).encode()
).hexdigest()


def _schema_current(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether this database was brought up to date by this very schema and still has its
    tables: then ensure_schema only defines its views again (its ~30 statements cost about
    25 ms of CPU every time a command opened the database). A table dropped since is made
    again, as before, by the whole pass."""
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_fingerprint'").fetchone()
    except duckdb.CatalogException:
        return False
    wanted = SCHEMA_TABLES | {t.name for t in SQLModel.metadata.sorted_tables}
    return row is not None and row[0] == SCHEMA_FINGERPRINT and wanted <= _tables(con)


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    if _schema_current(con):
        # Views are defined again at every open, as before the fingerprint: a view edited in
        # the file (current_findings made to hide a code, say) does not outlive a writer.
        for stmt in VIEW_DDL:
            con.execute(stmt)
        return
    had = _tables(con)
    had_summary = "stream_sources" in had
    had_pieces = "source_extents" in had
    with transaction(con):  # one commit, not one per statement: half the CPU of a new file
        for stmt in DDL:
            con.execute(stmt)
        if not had_summary:  # a database from before the summary: derive it from the events
            con.execute(
                "INSERT INTO stream_sources SELECT stream, source_id, min(seq), max(seq), "
                "count(*) FROM events GROUP BY stream, source_id"
            )
    # The sqlmodel tables: only those missing (create_all asks ~0.01 s of CPU about each),
    # and without asking after sequences where none of theirs exists (a new file: 71-73 ->
    # 57-58 ms of CPU; the DDL's own sequences do not count).
    missing = [t for t in SQLModel.metadata.sorted_tables if t.name not in _tables(con)]
    if missing:
        theirs = [c.default.name for t in missing for c in t.columns
                  if isinstance(c.default, Sequence)]
        made = con.execute(
            f"SELECT count(*) FROM duckdb_sequences() WHERE {_THIS_DATABASE} "
            "AND sequence_name IN (SELECT unnest(?::VARCHAR[]))", [theirs]).fetchone() or (1,)
        SQLModel.metadata.create_all(_engine(con), tables=missing, checkfirst=bool(made[0]))
    present = _tables(con)
    for table in ("notices", "notice_withdrawals"):  # the run that entered it (the ledger)
        if table in present:
            con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS run_id BIGINT")
    if not had_pieces:
        # A database from before pieces: each file ingested was one piece, the whole of it.
        # Its head was not kept, so it is found again by its path.
        con.execute(
            "INSERT INTO source_files SELECT id, NULL, path, run_id, ingested_at FROM sources "
            "WHERE status = 'ingested'"
        )
        con.execute(
            "INSERT INTO source_extents SELECT id, id, path, 0, size, least(lines, 1), lines, "
            "sha256, events, quarantined, duplicates, 0, NULL, NULL, run_id, ingested_at "
            "FROM sources WHERE status = 'ingested'"
        )
    con.execute(
        "INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT DO NOTHING",
        [str(SCHEMA_VERSION)],
    )
    con.execute(
        "INSERT INTO meta VALUES ('schema_fingerprint', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [SCHEMA_FINGERPRINT],
    )


_engines = threading.local()  # a WeakKeyDictionary per thread: connection -> its engine


def _engine(con: duckdb.DuckDBPyConnection) -> Engine:
    """The SQLAlchemy engine over `con`, made once for each connection and thread.

    A new engine asks DuckDB about itself on its first use (schema, version, keywords):
    about 12 ms of CPU, which every small record paid when each session made its own. The
    engine holds only a weak proxy of `con`, so dropping the connection still closes it
    (serving.OwnedConnection stops serving then), and its cache entry goes with it; one per
    thread, because a pool's single connection is not for two threads' sessions at once.
    """
    engines = getattr(_engines, "by_connection", None)
    if engines is None:
        engines = _engines.by_connection = weakref.WeakKeyDictionary()
    engine = engines.get(con)
    if engine is None:
        proxy = weakref.proxy(con)
        engine = create_engine(
            "duckdb:///:memory:", creator=lambda: ConnectionWrapper(proxy), poolclass=StaticPool
        )
        engines[con] = engine
    return engine


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """One transaction around the block: committed when it ends, rolled back when anything
    (Ctrl-C included) leaves it, so a crash leaves nothing half written."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


@contextmanager
def session(con: duckdb.DuckDBPyConnection) -> Iterator[Session]:
    """A sqlmodel session over the same connection, for the small records."""
    with Session(_engine(con)) as s:
        yield s


Row = TypeVar("Row", bound=SQLModel)


def add_row(con: duckdb.DuckDBPyConnection, row: Row) -> Row:
    """Store one small record and return it as stored (its id filled in), detached from the
    session so it can be read after."""
    with session(con) as s:
        s.add(row)
        s.commit()
        s.refresh(row)
        s.expunge(row)
    return row


def all_rows(con: duckdb.DuckDBPyConnection, model: type[Row]) -> list[Row]:
    """Every record of a sqlmodel table in id order, detached from the session."""
    with session(con) as s:
        rows = list(s.exec(select(model).order_by(model.id)))  # type: ignore[attr-defined]
        for r in rows:
            s.expunge(r)
    return rows


def one(
    con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None
) -> tuple[Any, ...] | None:
    """The first row of a query, or None, reading the whole result so the connection is free
    again (DuckDB 2 refuses new work on a connection with an unread result)."""
    rows = con.execute(sql, params or []).fetchall()
    return rows[0] if rows else None


def single(
    con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None
) -> tuple[Any, ...]:
    """The row of a query that always yields one (an aggregate, `nextval`, `RETURNING`)."""
    row = one(con, sql, params)
    if row is None:
        raise RuntimeError(f"expected one row, got none: {sql.strip()[:200]}")
    return row


# The audit works a batch of tables at a time, about this many events a batch: a shoe never
# spans tables, so batches are independent, and memory stays flat however big the day.
BATCH_EVENTS = 4_000_000


def table_batches(
    con: duckdb.DuckDBPyConnection, batch_events: int | None = None
) -> list[tuple[str, str] | None]:
    """Ranges of table ids (first, last), in order, each holding about `batch_events`
    events; [None] (everything at once) when no table has events yet."""
    limit = batch_events or BATCH_EVENTS
    batches: list[tuple[str, str] | None] = []
    first: str | None = None
    last = ""
    size = 0
    for table_id, n in con.execute(
        f"SELECT {stream_name_sql('table', 'stream')} AS t, sum(events) FROM stream_sources "
        f"WHERE {is_stream_sql('table', 'stream')} GROUP BY t ORDER BY t"
    ).fetchall():
        if first is not None and size + n > limit:
            batches.append((first, last))
            first, size = None, 0
        first = table_id if first is None else first
        last = table_id
        size += n
    if first is not None:
        batches.append((first, last))
    return batches or [None]


# ingest/validate.py's name for sql.quote, until it imports sql.quote itself.
q = quote


def table_range_sql(tables_in: tuple[str, str] | None, column: str = "table_id") -> str:
    """A WHERE condition for one of `table_batches` (constants, so DuckDB skips the row
    groups of other tables)."""
    if tables_in is None:
        return "true"
    lo, hi = tables_in
    return f"{column} BETWEEN {quote(lo)} AND {quote(hi)}"
