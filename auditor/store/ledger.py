"""The ledger: every record the product writes as evidence, as a leaf of one RFC 9162 Merkle
tree (auditor/merkle.py) whose heads are published outside the database (docs/ledger.md).

`COVERED` is the one registry of what is sealed: a new evidence table is one entry there.
A leaf's bytes are the record's canonical JSON, made by DuckDB's `json_object` from the
columns the entry names (`canonical_sql`); a piece of a log file (a `source_extents` row)
also carries digests of its event and quarantine rows (store/ledger_rows.py), so an edited
or deleted event is caught without a leaf per event.

A seal (`seal`) appends the leaves of one run's records not yet sealed, and one head: the
size and root of the tree after them. Runs seal their own rows (store/runs.recorded, and
`watch` after each poll); a row of another run found without a leaf is written outside the
product (store/ledger_verify.py says so), except the rows of a run that died before its seal,
which the next run that owns the database seals on its behalf (`seal_start`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from auditor import merkle
from auditor.errors import UserError
from auditor.store import derived, ledger_rows
from auditor.store.sql import quote


@dataclass(frozen=True)
class Covered:
    """One kind of record the ledger covers.

    `key` (SQL, text) names the record in messages and in the ledger; `order` (SQL) orders
    a seal's leaves of this kind; `columns` are the fields of its canonical bytes, in order
    (listed here, never read from the table: a column added later must not change the bytes
    of rows sealed before); `run` (SQL) is the run that wrote the record; `ready` (SQL) says
    when the record is complete enough to seal (a run's end); `since` names a column that
    the writing transaction always sets to now(), which lets `watch` seal each poll without
    looking at the whole night's rows (None: never trusted for that).
    """

    kind: str
    table: str
    columns: tuple[str, ...]
    key: str = "CAST(id AS VARCHAR)"
    order: str = "id"
    run: str = "run_id"
    ready: str = "true"
    since: str | None = None
    what: str = ""  # how messages name one record ("finding"); else the kind

    @property
    def noun(self) -> str:
        return self.what or self.kind


PIECE = "piece"
EXTENT_COLUMNS = (
    "source_id", "file_id", "path", "start_byte", "end_byte", "first_line", "last_line",
    "prefix_sha256", "events", "quarantined", "duplicates", "waiting_bytes", "device", "inode",
    "run_id", "ingested_at",
)
FINDING_COLUMNS = (
    "id", "fingerprint", "run_id", "recorded_at", "status", "code", "severity", "table_id",
    "pit", "shoe", "round", "seq", "ts", "rule", "message", "expected", "observed", "source",
    "evidence", "dealer",
)

# The one registry. Leaves of one seal go in this order, so a run's end comes last.
# Another evidence table is one more entry before "run.end", as sign-offs and closed days are.
COVERED: tuple[Covered, ...] = (
    Covered("run.start", "runs", ("id", "command", "args", "tool_version", "started_at"),
            run="id", what="run (its start)"),
    Covered("source", "sources", ("id", "path", "sha256", "size", "lines", "events",
                                  "quarantined", "duplicates", "first_ts", "last_ts",
                                  "ingested_at", "run_id", "status", "note"),
            since="ingested_at", what="source file offered"),
    Covered("source_file", "source_files", ("id", "head_sha256", "path", "run_id",
                                            "recorded_at"),
            since="recorded_at", what="log file"),
    Covered(PIECE, "source_extents", EXTENT_COLUMNS,
            key="source_id || ':' || start_byte || '-' || end_byte",
            order="source_id, start_byte, end_byte", since="ingested_at",
            what="piece of a log file (its events and quarantined lines)"),
    Covered("finding", "findings", FINDING_COLUMNS, since="recorded_at"),
    Covered("acknowledgement", "acknowledgements", ("id", "fingerprint", "reviewer",
                                                    "disposition", "note", "recorded_at",
                                                    "run_id")),
    Covered("notice", "notices", ("id", "pit", "tables", "procedure", "effective", "recipient",
                                  "written", "given_at", "entered_by", "entered_at", "note",
                                  "run_id")),
    Covered("notice_withdrawal", "notice_withdrawals", ("id", "notice_id", "withdrawn_by",
                                                        "reason", "withdrawn_at", "run_id"),
            what="notice withdrawal"),
    Covered("report_version", "report_versions", ("slug", "version", "path", "sha256",
                                                  "html_sha256", "findings", "run_id",
                                                  "filed_at"),
            key="slug || '/v' || version || ' ' || path", order="slug, version, path",
            since="filed_at", what="report version"),
    # Written by `signoff`'s own run (served by `watch` when it holds the database), sealed
    # at that run's end; no `since`: recorded_at is the time given, not the transaction's.
    Covered("signoff", "signoffs", ("id", "slug", "version", "sha256", "path", "signer",
                                    "title", "note", "recorded_at", "run_id"),
            what="sign-off"),
    # The gaming days closed (store/closed_days.py): log.table_unclosed rests on them. No
    # id: a day is closed once, its first row counts; no `since` (`at` may be given).
    Covered("closed_day", "closed_days", ("gaming_day", "closed_at", "run_id", "how"),
            key="CAST(gaming_day AS VARCHAR) || ' ' || how || ' (run ' || run_id || ')'",
            order="gaming_day, closed_at, run_id, how", what="closed gaming day"),
    Covered("ledger_check", "ledger_checks", ("id", "size", "root", "peaks", "mode",
                                              "checked_at", "run_id"),
            since="checked_at", what="verification of the ledger"),
    # The audit's bookkeeping of a run, digested when it ends (store/derived.py); sealed
    # by the run that digested it (the run itself, or the run that sealed it dead).
    Covered("derived", derived.TABLE, ("run_id", "tab", "rows", "sha256", "recorded_by",
                                       "recorded_at"),
            key=derived.KEY_SQL, order="run_id, tab", run="recorded_by",
            what="digest of a run's derived rows"),
    Covered("run.end", "runs", ("id", "finished_at", "status", "exit_code", "summary"),
            run="id", ready="finished_at IS NOT NULL", what="run (its end)"),
)
KINDS = {c.kind: c for c in COVERED}

# Perfect subtrees of at least 2**CACHE_LEVEL leaves are kept (ledger_nodes): an inclusion
# proof then hashes at most 2**CACHE_LEVEL leaves and the cached nodes above them.
CACHE_LEVEL = 8

DDL = [
    """
    CREATE TABLE IF NOT EXISTS ledger (
      idx BIGINT PRIMARY KEY,
      kind VARCHAR NOT NULL,
      record_table VARCHAR NOT NULL,
      record_key VARCHAR NOT NULL,
      record_run BIGINT,
      leaf_hash VARCHAR NOT NULL,
      data VARCHAR NOT NULL,
      sealed_by BIGINT NOT NULL,
      sealed_at TIMESTAMPTZ NOT NULL
    )""",
    """
    CREATE TABLE IF NOT EXISTS ledger_heads (
      size BIGINT PRIMARY KEY,
      root VARCHAR NOT NULL,
      peaks VARCHAR NOT NULL,
      run_id BIGINT NOT NULL,
      sealed_at TIMESTAMPTZ NOT NULL,
      note VARCHAR NOT NULL
    )""",
    """
    CREATE TABLE IF NOT EXISTS ledger_nodes (
      level INTEGER NOT NULL,
      idx BIGINT NOT NULL,
      hash VARCHAR NOT NULL,
      PRIMARY KEY (level, idx)
    )""",
    "CREATE SEQUENCE IF NOT EXISTS ledger_check_id_seq",
    # A verification that found every record as sealed: the fast check (`verify_fast`)
    # re-reads the events of the pieces after `size` only.
    """
    CREATE TABLE IF NOT EXISTS ledger_checks (
      id BIGINT NOT NULL DEFAULT nextval('ledger_check_id_seq'),
      size BIGINT NOT NULL,
      root VARCHAR NOT NULL,
      peaks VARCHAR NOT NULL,
      mode VARCHAR NOT NULL,
      checked_at TIMESTAMPTZ NOT NULL,
      run_id BIGINT NOT NULL
    )""",
    ledger_rows.STAGED_DDL,
    derived.DDL,
]


# --- canonical bytes ------------------------------------------------------------------------


def column_types(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, str]]:
    """The type of every column of the covered tables, by table (a table missing from an
    older database is absent), and of the events digests ingest kept for the seal."""
    tables = ", ".join(quote(t) for t in {c.table for c in COVERED} | {ledger_rows.STAGED})
    out: dict[str, dict[str, str]] = {}
    for table, column, typ in con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        f"WHERE table_name IN ({tables}) AND database_name = current_database()"
    ).fetchall():
        out.setdefault(table, {})[column] = typ
    return out


def value_sql(column: str, typ: str) -> str:
    """A column as its canonical JSON value: times as UTC text to the microsecond, JSON and
    decimals as the text stored, the rest as DuckDB's json_object writes them."""
    c = f'"{column}"'
    if typ.startswith("TIMESTAMP"):
        return f"strftime(timezone('UTC', {c}), '%Y-%m-%dT%H:%M:%S.%fZ')"
    if typ == "JSON" or typ.startswith("DECIMAL"):
        return f"CAST({c} AS VARCHAR)"
    if typ == "BLOB":
        return f"hex({c})"
    return c


def canonical_sql(c: Covered, types: dict[str, str], extra: Sequence[str] = ()) -> str:
    """The SQL of a record's canonical bytes: {"kind": ..., "table": ..., its columns in the
    entry's order, then `extra` (a piece's digests)}. A column the table lacks (a database
    from before it) is null."""
    parts = [quote("kind"), quote(c.kind), quote("table"), quote(c.table)]
    for col in c.columns:
        parts += [quote(col), value_sql(col, types[col]) if col in types else "NULL"]
    for col in extra:
        parts += [quote(col), f'"{col}"']
    return f"json_object({', '.join(parts)})"


def records_sql(
    c: Covered, types: dict[str, str], where: str = "true", digests: str = "piece_digests"
) -> str:
    """rn (the order of a seal), key, run, data of the table's records that are `ready`
    and match `where`; a piece's digests come from `digests`: the temp table
    `piece_digests` (ledger_rows.fill_digests), or SQL giving them (`digests_sql`)."""
    if c.kind == PIECE:
        data = canonical_sql(c, types, ledger_rows.DIGEST_FIELDS)
        source = f"{c.table} JOIN {digests} USING (source_id, start_byte, end_byte)"
    else:
        data, source = canonical_sql(c, types), c.table
    return (
        f"SELECT row_number() OVER (ORDER BY {c.order}) AS rn, {c.key} AS record_key, "
        f"{c.run} AS record_run, {data} AS data FROM {source} WHERE ({c.ready}) AND ({where})"
    )


# --- heads ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Head:
    size: int
    root: str  # hex
    peaks: str  # JSON: [[level, hex], ...]
    run_id: int
    sealed_at: dt.datetime
    note: str = ""

    def frontier(self) -> merkle.Frontier:
        return merkle.Frontier.load(self.size, json.loads(self.peaks))

    def as_dict(self) -> dict[str, Any]:
        return {"size": self.size, "root": self.root, "run": self.run_id,
                "sealed_at": self.sealed_at.astimezone(dt.UTC).isoformat()}


def has_ledger(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the database has the ledger's tables (one opened read-only from before them
    has not)."""
    return bool(con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'ledger_heads' "
        "AND database_name = current_database()"
    ).fetchall()[0][0])


_HEAD_COLUMNS = "size, root, peaks, run_id, sealed_at, note"


def heads(con: duckdb.DuckDBPyConnection) -> list[Head]:
    if not has_ledger(con):
        return []
    return [Head(*r) for r in con.execute(
        f"SELECT {_HEAD_COLUMNS} FROM ledger_heads ORDER BY size"
    ).fetchall()]


def latest_head(con: duckdb.DuckDBPyConnection) -> Head | None:
    if not has_ledger(con):
        return None
    rows = con.execute(
        f"SELECT {_HEAD_COLUMNS} FROM ledger_heads ORDER BY size DESC LIMIT 1"
    ).fetchall()
    return Head(*rows[0]) if rows else None


def _count_and_head(con: duckdb.DuckDBPyConnection) -> tuple[int, Head | None]:
    """The leaves the ledger holds and its latest head, in one statement."""
    rows = con.execute(
        f"SELECT (SELECT count(*) FROM ledger), {_HEAD_COLUMNS} FROM (SELECT 1) "
        "LEFT JOIN (SELECT * FROM ledger_heads ORDER BY size DESC LIMIT 1) ON true"
    ).fetchall()
    counted, *head = rows[0]
    return int(counted), (Head(*head) if head[0] is not None else None)


def head_covering(con: duckdb.DuckDBPyConnection, index: int) -> Head | None:
    """The first head whose tree holds leaf `index`."""
    rows = con.execute(
        f"SELECT {_HEAD_COLUMNS} FROM ledger_heads WHERE size > ? ORDER BY size LIMIT 1",
        [index],
    ).fetchall()
    return Head(*rows[0]) if rows else None


# --- sealing --------------------------------------------------------------------------------

INLINE_PIECES = 64  # a seal's pieces up to this many: their digests go in its SQL
# A poll's seal (`since` given) looks for the leaves of its records among those sealed at
# most this long before `since`, not in the whole ledger: a record stamped at or after
# `since` was committed before any seal that saw it began, so its leaf is no older than
# its stamp, unless the clock was set back in between; the hour is that margin. Without
# a bound the look cost 27 ms at 50,000 leaves, 69 ms at 2 million (a night's end at 500
# tables): docs/benchmarks.md, session 58.
SEALED_LOOKBACK = dt.timedelta(hours=1)
SEAL_TRIES = 8  # a seal that meets another's commit starts again: about 2.5 s in all


def sealed_lately(records: str, since: dt.datetime) -> str:
    """SQL: whether the record in relation `records` (kind, record_key, record_run) has a
    leaf sealed at most SEALED_LOOKBACK before `since`. A poll's seal asks it once for the
    records of every kind (bench/seal_look.py times it)."""
    return (
        f"EXISTS (SELECT 1 FROM ledger l WHERE l.kind = {records}.kind "
        f"AND l.record_key = {records}.record_key "
        f"AND l.record_run IS NOT DISTINCT FROM {records}.record_run "
        f"AND l.sealed_at >= {quote((since - SEALED_LOOKBACK).isoformat())}::TIMESTAMPTZ)"
    )


@dataclass
class Sealed:
    """What one seal appended: leaves [first, head.size), none when nothing was waiting."""

    first: int
    head: Head | None


def seal(
    con: duckdb.DuckDBPyConnection,
    run_id: int | None,
    *,
    sealer: int | None = None,
    since: dt.datetime | None = None,
    note: str = "",
    types: dict[str, dict[str, str]] | None = None,
    starting: bool = False,
) -> Sealed:
    """Seal the records of run `run_id` that have no leaf (all records, whatever their run,
    when None: the genesis of a database from before the ledger), as leaves appended by run
    `sealer` (the same run unless it seals a dead run's rows), and the head after them.

    `since`: only rows of kinds with a `since` column at or after it are looked for, and
    no rows of the other kinds (watch's seal after a poll, which wrote only those); the seal
    at the end of the run looks at every kind and row. `types`: `column_types(con)`, for a
    caller that seals often. `starting`: the seal of the run's start (derived.at_seal).
    """
    sealer = run_id if sealer is None else sealer
    assert sealer is not None
    for attempt in range(SEAL_TRIES):
        con.execute("BEGIN TRANSACTION")
        try:
            done = _seal_once(con, run_id, sealer, since, note, types, starting)
            con.execute("COMMIT")
            return done
        except (duckdb.TransactionException, duckdb.ConstraintException):
            # another seal committed first (the same leaf index): start again after it
            _rollback(con)
            if attempt == SEAL_TRIES - 1:
                raise
            time.sleep(0.02 * 2**attempt)
        except BaseException:
            _rollback(con)
            raise
    raise AssertionError("unreachable")


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    with contextlib.suppress(duckdb.Error):
        con.execute("ROLLBACK")


def _seal_once(
    con: duckdb.DuckDBPyConnection,
    run_id: int | None,
    sealer: int,
    since: dt.datetime | None,
    note: str,
    types: dict[str, dict[str, str]] | None,
    starting: bool = False,
) -> Sealed:
    # One statement for the head and the count, one INSERT for every kind's leaves: a
    # seal's fixed cost is its statements (a `watch` seals every second), not its rows.
    counted, last = _count_and_head(con)
    frontier = last.frontier() if last else merkle.Frontier()
    start = frontier.size
    if since is None and counted != start:  # (a poll's seal leaves this to the run's last)
        raise LedgerBroken(
            f"the ledger holds {counted} leaves but its latest head says {start}; "
            "run `bacc-audit verify`"
        )
    types = types or column_types(con)
    if since is None and derived.TABLE in types:  # not a poll's seal: bookkeeping first
        derived.at_seal(con, run_id, sealer, starting)
    selects = []
    for rank, c in enumerate(COVERED):
        if c.table not in types or (since is not None and c.since is None):
            continue
        where = "true" if run_id is None else f"{c.run} = {int(run_id)}"
        if since is not None:
            where += f" AND {c.since} >= {quote(since.isoformat())}::TIMESTAMPTZ"
        # A poll's seal looks for leaves once, for every kind together (`guard` below): each
        # kind's own look read the last hour's leaves again, whether it had rows or not.
        unsealed = where if since is not None else (
            f"{where} AND NOT EXISTS (SELECT 1 FROM ledger l WHERE l.kind = {quote(c.kind)} "
            f"AND l.record_key = {c.key}"
            + ("" if run_id is None else f" AND l.record_run = {int(run_id)}")
            + ")"
        )
        digests = "piece_digests"
        if c.kind == PIECE:
            pieces = ledger_rows.pieces(con, unsealed, staged=ledger_rows.STAGED in types)
            if not pieces:
                continue
            table = ledger_rows.digests(con, pieces, counted=True)
            if len(pieces) <= INLINE_PIECES:  # a poll's few: no temp table to make
                digests = ledger_rows.digests_sql(table)
            else:
                ledger_rows.fill_digests(con, table)
            unsealed = "true"  # the pieces digested are exactly those
        records = records_sql(c, types[c.table], unsealed, digests)
        selects.append(
            f"SELECT {rank} AS k, rn, {quote(c.kind)} AS kind, {quote(c.table)} AS tab, "
            f"record_key, record_run, data FROM ({records})"
        )
    guard = "" if since is None else f"WHERE NOT {sealed_lately('u', since)}"
    made = con.execute(
        f"""
        INSERT INTO ledger
        SELECT {start} + row_number() OVER (ORDER BY k, rn) - 1, kind, tab, record_key,
               record_run, sha256(unhex('00') || encode(data)), data, {int(sealer)}, now()
        FROM ({" UNION ALL ".join(selects)}) u {guard}
        RETURNING idx, leaf_hash
        """
    ).fetchall() if selects else []
    size = start + len(made)
    if size == start:
        return Sealed(start, None)
    hashes = [bytes.fromhex(h) for _, h in sorted(made)]
    frontier.keep_level = CACHE_LEVEL
    frontier.extend(hashes)
    if frontier.made:
        ledger_rows.fill_table(con, "new_nodes", pa.table({
            "level": pa.array([m[0] for m in frontier.made], pa.int64()),
            "idx": pa.array([m[1] for m in frontier.made], pa.int64()),
            "hash": [m[2].hex() for m in frontier.made],
        }))
        con.execute("INSERT INTO ledger_nodes SELECT level, idx, hash FROM new_nodes")
        con.execute("DROP TABLE new_nodes")
    root = frontier.root().hex()
    peaks = json.dumps(frontier.dump(), separators=(",", ":"))
    row = con.execute(
        "INSERT INTO ledger_heads VALUES (?, ?, ?, ?, now(), ?) RETURNING sealed_at",
        [frontier.size, root, peaks, sealer, note],
    ).fetchall()
    return Sealed(start, Head(frontier.size, root, peaks, sealer, row[0][0], note))


class LedgerBroken(UserError):
    """The ledger's own tables contradict each other: nothing can be sealed on them until
    someone has looked (`bacc-audit verify` names what differs)."""


# --- the run lifecycle ----------------------------------------------------------------------


def dead_runs(con: duckdb.DuckDBPyConnection, run_id: int, live: Iterable[int]) -> list[int]:
    """Runs before `run_id` that began on the record (a sealed start) but never sealed their
    end, and whose process is not `live`: killed (kill -9, power loss), or failed between
    their end and their seal. Their rows are sealed by the next run that owns the database,
    as they were found."""
    alive = set(live)
    return [
        int(r[0]) for r in con.execute(
            "SELECT s.record_run FROM ledger s WHERE s.kind = 'run.start' AND s.record_run < ? "
            "AND NOT EXISTS (SELECT 1 FROM ledger e WHERE e.kind = 'run.end' "
            "AND e.record_run = s.record_run) ORDER BY s.record_run",
            [run_id],
        ).fetchall()
        if int(r[0]) not in alive
    ]


def seal_start(
    con: duckdb.DuckDBPyConnection, run_id: int, live: Iterable[int] | None
) -> None:
    """At a run's start: the records of a database from before the ledger (its genesis),
    then the rows of dead runs (unless `live` is None: a command served by another process,
    which leaves that to the owner), then this run's start."""
    if latest_head(con) is None:
        before = con.execute("SELECT count(*) FROM runs WHERE id <> ?", [run_id]).fetchall()
        note = "genesis: the records written before the ledger" if before[0][0] else ""
        seal(con, None, sealer=run_id, note=note)
        return  # this run's start is among them
    if live is not None:
        for dead in dead_runs(con, run_id, live):
            seal(con, dead, sealer=run_id, note=f"run {dead} ended without its seal")
    seal(con, run_id, starting=True)


def leaf_index(con: duckdb.DuckDBPyConnection, kind: str, keys: Sequence[str]) -> dict[str, int]:
    """The leaf of each record of `kind` named by key (records without one are absent)."""
    if not keys or not has_ledger(con):
        return {}
    found: dict[str, int] = {}
    for i in range(0, len(keys), 1000):
        chunk = list(keys[i:i + 1000])
        marks = ", ".join("?" * len(chunk))
        for key, idx in con.execute(
            f"SELECT record_key, idx FROM ledger WHERE kind = ? AND record_key IN ({marks})",
            [kind, *chunk],
        ).fetchall():
            found[key] = int(idx)
    return found


# --- proofs ---------------------------------------------------------------------------------


class Subtrees:
    """Roots of ranges of leaves, from the kept inner nodes (ledger_nodes) where a range is
    one of them, else from the leaf hashes, read a block of 2**CACHE_LEVEL at a time: what
    `merkle.inclusion_proof` asks for, a few hundred hashes a proof however big the tree."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.blocks: dict[int, list[bytes]] = {}
        self.nodes: dict[tuple[int, int], bytes] = {}

    def _block(self, b: int) -> list[bytes]:
        if b not in self.blocks:
            size = 1 << CACHE_LEVEL
            self.blocks[b] = [bytes.fromhex(h) for (h,) in self.con.execute(
                "SELECT leaf_hash FROM ledger WHERE idx >= ? AND idx < ? ORDER BY idx",
                [b * size, (b + 1) * size],
            ).fetchall()]
        return self.blocks[b]

    def _leaves(self, start: int, end: int) -> list[bytes]:
        size = 1 << CACHE_LEVEL
        out: list[bytes] = []
        for b in range(start // size, (end - 1) // size + 1):
            block = self._block(b)
            lo = max(start - b * size, 0)
            hi = min(end - b * size, size)
            out += block[lo:hi]
        return out

    def _perfect(self, start: int, level: int) -> bytes:
        key = (level, start >> level)
        if key not in self.nodes:
            found = None
            if level >= CACHE_LEVEL:
                rows = self.con.execute(
                    "SELECT hash FROM ledger_nodes WHERE level = ? AND idx = ?", list(key)
                ).fetchall()
                found = bytes.fromhex(rows[0][0]) if rows else None
            if found is None:
                if level <= CACHE_LEVEL:
                    found = merkle.root(self._leaves(start, start + (1 << level)))
                else:
                    half = 1 << (level - 1)
                    found = merkle.node_hash(self._perfect(start, level - 1),
                                             self._perfect(start + half, level - 1))
            self.nodes[key] = found
        return self.nodes[key]

    def __call__(self, start: int, end: int) -> bytes:
        n = end - start
        if n & (n - 1) == 0:
            return self._perfect(start, n.bit_length() - 1)
        k = merkle.split(n)
        return merkle.node_hash(self._perfect(start, k.bit_length() - 1), self(start + k, end))


def proofs(
    con: duckdb.DuckDBPyConnection, size: int, indexes: Iterable[int]
) -> dict[int, list[str]]:
    """The inclusion proof (hex, leaf side first) of each leaf in the tree of `size`."""
    subtree = Subtrees(con)
    return {
        i: [h.hex() for h in merkle.inclusion_proof(i, size, subtree)]
        for i in sorted(set(indexes))
    }


def leaf_data(con: duckdb.DuckDBPyConnection, indexes: Iterable[int]) -> dict[int, str]:
    """The canonical bytes (as text) of each leaf."""
    wanted = sorted(set(indexes))
    out: dict[int, str] = {}
    for i in range(0, len(wanted), 1000):
        chunk = wanted[i:i + 1000]
        marks = ", ".join("?" * len(chunk))
        out.update({int(k): d for k, d in con.execute(
            f"SELECT idx, data FROM ledger WHERE idx IN ({marks})", chunk).fetchall()})
    return out
