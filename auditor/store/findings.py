"""Writing findings to the audit database, append-only and without duplicates.

A finding's fingerprint names the deviation itself (code + where it is), so recording the
same deviation again adds nothing, and a finding that no longer holds is withdrawn by a new
row rather than deleted.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

import duckdb
import pyarrow as pa

from auditor.finding import Finding
from auditor.rules.codes import REGISTRY
from auditor.store.db import single
from auditor.store.filters import Filter
from auditor.store.sql import quote
from auditor.store.stamps import UnreadableStamp

FINDING_COLUMNS = (
    "fingerprint",
    "code",
    "table_id",
    "pit",
    "shoe",
    "round",
    "seq",
    "ts",
    "message",
    "expected",
    "observed",
    "source",
    "evidence",
)


# What a finding may bring beyond FINDING_COLUMNS: a lesser severity, its pack's provision and
# its dealer. Kept apart so the SQL writers of log findings (ingest), which know none of
# these, need not name them.
_EXTRA = ("severity", "rule", "dealer")


def _registry_values(codes: Iterable[str]) -> str:
    """The registry's severity and rule of `codes` (all registered) as a VALUES list: only
    those a statement meets, since DuckDB parses every literal of it each time."""
    rows = ", ".join(
        "(" + ", ".join(map(quote, (c.code, c.severity, c.rule))) + ")"
        for c in (REGISTRY[code] for code in sorted(codes))
    )
    return f"(VALUES {rows}) AS registry(code, severity, rule)"


def _check_registered(pairs: Iterable[tuple[str, str | None]]) -> set[str]:
    """Every code (of (code, severity) pairs) registered and every severity given (not None)
    one its code allows, or AssertionError naming those that are not: a finding can never
    disagree with its code's documentation. Returns the codes."""
    pairs = set(pairs)
    unknown = sorted({code for code, _ in pairs if code not in REGISTRY})
    if unknown:
        raise AssertionError(f"findings with unregistered codes: {unknown}")
    wrong = sorted(
        (code, severity) for code, severity in pairs
        if severity is not None and severity not in REGISTRY[code].severities()
    )
    if wrong:
        raise AssertionError(f"findings with a severity their code does not allow: {wrong}")
    return {code for code, _ in pairs}


def standing_among(fingerprints_sql: str) -> str:
    """current_findings (the latest row of each fingerprint, if open) over the fingerprints
    `fingerprints_sql` gives, as a parenthesised SELECT: the view's window runs over every
    finding on file (~0.1-0.5 s a statement with a million), these over those at hand."""
    return (
        "(SELECT * EXCLUDE (rn) FROM (SELECT *, row_number() OVER (PARTITION BY fingerprint "
        f"ORDER BY id DESC) AS rn FROM findings WHERE fingerprint IN ({fingerprints_sql})) "
        "WHERE rn = 1 AND status = 'open')"
    )


def record(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    select_sql: str,
    staged: bool = False,
    *,
    codes: set[str] | None = None,
) -> int:
    """Append the findings `select_sql` yields (FINDING_COLUMNS, and `severity` and `rule` if
    `staged`, as `staged()` holds them) that are not already standing.

    Severity comes from the registry: a severity given with a finding (not NULL) must be one
    the registry allows that code (Code.severities), else AssertionError. The rule is the
    one given (the provision of the table's rule pack), else the registry's. `codes`: the
    codes of the findings, already checked by the caller (record_staged); else they are
    read and checked here. Returns the number of new findings.
    """
    if codes is None:
        severity = "severity" if staged else "NULL::VARCHAR"
        codes = _check_registered(
            con.execute(f"SELECT DISTINCT code, {severity} FROM ({select_sql})").fetchall()
        )
    if not codes:
        return 0
    cols = ", ".join((*FINDING_COLUMNS, *_EXTRA)) if staged else ", ".join(
        (*FINDING_COLUMNS, *(f"NULL::VARCHAR AS {c}" for c in _EXTRA))
    )
    # Asked of the fingerprints at hand only when they are staged (cheap to read twice).
    standing = "SELECT fingerprint FROM current_findings" if not staged else (
        f"SELECT fingerprint FROM {standing_among(f'SELECT fingerprint FROM ({select_sql})')}"
    )
    sql = f"""
    INSERT INTO findings (fingerprint, run_id, recorded_at, status, severity, rule,
                          code, table_id, pit, shoe, round, seq, ts, message,
                          expected, observed, source, evidence, dealer)
    SELECT n.fingerprint, {int(run_id)}, now(), 'open',
           coalesce(n.severity, registry.severity), coalesce(n.rule, registry.rule),
           n.code, n.table_id, n.pit, n.shoe, n.round, n.seq, n.ts, n.message,
           n.expected, n.observed, n.source, n.evidence, n.dealer
    FROM (SELECT DISTINCT ON (fingerprint) {cols} FROM ({select_sql})) n
    JOIN {_registry_values(codes)} USING (code)
    WHERE n.fingerprint NOT IN ({standing})
    ORDER BY n.ts, n.fingerprint
    """
    return single(con, sql)[0]


# Findings as Arrow columns on their way in: expected, observed and evidence as JSON text.
_NOT_TEXT = {"round": pa.int64(), "seq": pa.int64(), "ts": pa.timestamp("us", tz="UTC")}
SCHEMA = pa.schema([(c, _NOT_TEXT.get(c, pa.string())) for c in (*FINDING_COLUMNS, *_EXTRA)])


def _json(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)


def arrow(found: Sequence[Finding]) -> pa.Table:
    """Findings as a table of FINDING_COLUMNS; each must have its fingerprint and time."""
    missing = [f.code for f in found if not f.fingerprint or f.ts is None]
    if missing:
        raise AssertionError(f"findings without a fingerprint or a time: {missing[:3]}")
    return pa.table(
        {
            "fingerprint": [f.fingerprint for f in found],
            "code": [f.code for f in found],
            "table_id": [f.table for f in found],
            "pit": [f.pit for f in found],
            "shoe": [f.shoe for f in found],
            "round": [f.round for f in found],
            "seq": [f.seq for f in found],
            "ts": [f.ts.astimezone(dt.UTC) for f in found if f.ts is not None],
            "message": [f.message for f in found],
            "expected": [_json(f.expected) for f in found],
            "observed": [_json(f.observed) for f in found],
            "source": [f.source for f in found],
            "evidence": [_json(f.evidence) for f in found],
            "severity": [f.severity for f in found],
            "rule": [f.rule for f in found],
            "dealer": [f.dealer for f in found],
        },
        schema=SCHEMA,
    )


def staged(con: duckdb.DuckDBPyConnection, name: str, found: Sequence[Finding]) -> str:
    """Temp table `name` holding `found` as the store keeps them (JSON columns typed JSON),
    for record(..., staged=True) and for the withdrawals that compare against it.
    Returns its name."""
    con.register("_findings_arrow", arrow(found))
    try:
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {name} AS "
            "SELECT fingerprint, code, table_id, pit, shoe, round, seq, ts, message, "
            "CAST(expected AS JSON) AS expected, CAST(observed AS JSON) AS observed, source, "
            "CAST(evidence AS JSON) AS evidence, severity, rule, dealer FROM _findings_arrow"
        )
    finally:
        con.unregister("_findings_arrow")
    return name


def record_staged(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    name: str | None,
    found: Sequence[Finding],
) -> int:
    """`found` staged as temp table `name` (kept: withdrawals compare against it) and
    appended as record() does. Returns the number of new findings; none found, no insert.
    `name` None: no table is kept, and a few findings (a watch poll's) are judged in Python
    (`_record_few`).

    A pass's findings, found in Python, are checked in Python: in a small audit (a test's,
    a watch poll's) each query costs milliseconds, whatever the rows."""
    codes = _check_registered((f.code, f.severity) for f in found)
    if name is None and len(found) <= FEW:
        return _record_few(con, run_id, found)
    name = name or "found_findings"
    staged(con, name, found)
    if not found:
        return 0
    return record(con, run_id, f"SELECT * FROM {name}", staged=True, codes=codes)


# Findings recorded at once without a staged table: a watch poll's handful.
FEW = 64
_STANDING_SQL = f"SELECT fingerprint FROM {standing_among('SELECT unnest(?::VARCHAR[])')}"


def _record_few(con: duckdb.DuckDBPyConnection, run_id: int, found: Sequence[Finding]) -> int:
    """`record` of staged findings, worked out in Python: one fingerprint once (the first),
    those standing left out (asked of their own rows), the registry's severity and rule where
    a finding gives none, in the order of their time and fingerprint. Then one plain INSERT:
    a poll that finds a deviation paid ~4 ms for the statement `record` plans, and ~2 ms
    more for the table it stages."""
    if not found:
        return 0
    first: dict[str, Finding] = {}
    for f in found:
        first.setdefault(f.fingerprint, f)
    standing = {r[0] for r in con.execute(_STANDING_SQL, [list(first)]).fetchall()}
    new = sorted((f for fp, f in first.items() if fp not in standing),
                 key=lambda f: (f.ts.astimezone(dt.UTC) if f.ts else f.ts, f.fingerprint))
    if not new:
        return 0
    rows = arrow(new)
    codes = [REGISTRY[f.code] for f in new]
    rows = rows.set_column(rows.schema.get_field_index("severity"), "severity", pa.array(
        [c.severity if f.severity is None else f.severity
         for f, c in zip(new, codes, strict=True)], pa.string()))
    rows = rows.set_column(rows.schema.get_field_index("rule"), "rule", pa.array(
        [c.rule if f.rule is None else f.rule for f, c in zip(new, codes, strict=True)],
        pa.string()))
    con.register("_few_findings", rows)
    try:
        con.execute(
            f"""
            INSERT INTO findings (fingerprint, run_id, recorded_at, status, severity, rule,
                                  code, table_id, pit, shoe, round, seq, ts, message,
                                  expected, observed, source, evidence, dealer)
            SELECT fingerprint, {int(run_id)}, now(), 'open', severity, rule, code, table_id,
                   pit, shoe, round, seq, ts, message, CAST(expected AS JSON),
                   CAST(observed AS JSON), source, CAST(evidence AS JSON), dealer
            FROM _few_findings
            """
        )
    finally:
        con.unregister("_few_findings")
    return len(new)


def replace_pass(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    name: str,
    found: Sequence[Finding],
    codes: Sequence[str],
) -> tuple[int, int]:
    """What a whole-database pass found, in one transaction: the new findings recorded, the
    standing ones of its `codes` it no longer finds withdrawn (staged as temp table `name`).
    Returns (new, withdrawn)."""
    con.execute("BEGIN TRANSACTION")
    try:
        new = record_staged(con, run_id, name, found)
        owned = ", ".join(map(quote, codes))
        withdrawn = withdraw(
            con, run_id,
            f"code IN ({owned}) AND fingerprint NOT IN (SELECT fingerprint FROM {name})",
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return new, withdrawn


def withdraw(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    where_sql: str,
    *,
    joined: str = "",
    because: tuple[str, str] | None = None,
) -> int:
    """Withdraw the standing findings matching `where_sql` (over current_findings, joined
    with `joined`, e.g. "JOIN t USING (table_id, seq)"). `because` = (key, SQL JSON value)
    is added to each withdrawal's evidence: why it was withdrawn, on the record."""
    evidence = "evidence" if because is None else (
        f"json_merge_patch(coalesce(evidence, '{{}}'::JSON), "
        f"json_object('{because[0]}', {because[1]}))"
    )
    # Among the fingerprints with a row that matches at all (a standing row that matches
    # is one), in every sweep's passes and an ingest's seq gaps.
    matching = (
        f"SELECT current_findings.fingerprint FROM findings AS current_findings {joined} "
        f"WHERE {where_sql}"
    )
    return single(
        con,
        f"""
        INSERT INTO findings (fingerprint, run_id, recorded_at, status, severity, rule, code,
                              table_id, pit, shoe, round, seq, ts, message, expected,
                              observed, source, evidence, dealer)
        SELECT fingerprint, {int(run_id)}, now(), 'withdrawn', severity, rule, code,
               table_id, pit, shoe, round, seq, ts, message, expected, observed, source,
               {evidence}, dealer
        FROM {standing_among(matching)} AS current_findings {joined} WHERE {where_sql}
        """,
    )[0]


# A finding's short id: "F" and the first SHORT_ID_HEX hex digits of the SHA-256 of its
# fingerprint. Computed, never stored, so a database written before ids existed has them too,
# and the same deviation has the same id in every database. 12 digits (48 bits): among a
# million findings (a large property's year) the chance that any two share an id is about
# n²/2 / 16¹² = 0.18%, and `ack` refuses an id that names two (docs/findings-format.md).
SHORT_ID_HEX = 12
# The same id in DuckDB's SQL (its sha256 is lowercase hex of the UTF-8 text, like hashlib's),
# so `ack` finds a finding by id without hashing every fingerprint in Python.
SHORT_ID_SQL = f"('F' || left(sha256(fingerprint), {SHORT_ID_HEX}))"


def short_id(fingerprint: str) -> str:
    """The id a person can type (`F3a9c04e1a2b7`-like) for a finding whose fingerprint runs to
    80 characters: shown first in the table view, accepted by `bacc-audit ack`."""
    return "F" + hashlib.sha256(fingerprint.encode("utf-8")).hexdigest()[:SHORT_ID_HEX]


def shown_ts(ts: object, zone: dt.tzinfo, fingerprint: str) -> str:
    """A finding's time in `zone` as the findings format writes it."""
    if isinstance(ts, dt.datetime):
        try:
            return ts.astimezone(zone).isoformat(timespec="milliseconds")
        except (OverflowError, ValueError):
            pass  # past the year 9999 in this zone
    raise UnreadableStamp(
        f"finding {short_id(fingerprint)}: its time is stored as {ts}, which no clock can "
        "show: the row was changed after it was recorded, or written by an earlier "
        "bacc-audit; `bacc-audit verify` names what changed"
    )


STORED_FIELDS = (
    "code",
    "severity",
    "table",
    "pit",
    "shoe",
    "round",
    "seq",
    "ts",
    "rule",
    "message",
    "expected",
    "observed",
    "source",
    "fingerprint",
)
# findings-v1's fields and its extensions in their order: `id` is computed from `fingerprint`;
# `dealer` (v1.1) came last, so it is last.
EXPORT_FIELDS = (*STORED_FIELDS, "id", "dealer")


def has_dealer_column(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the findings table has its `dealer` column: a database opened read-only is not
    brought up to date (ensure_schema), and one written before v1.1 has none."""
    return bool(single(
        con,
        "SELECT count(*) FROM duckdb_columns() WHERE table_name = 'findings' "
        "AND column_name = 'dealer'",
    )[0])


def select(
    con: duckdb.DuckDBPyConnection,
    *,
    table: str | None = None,
    pit: str | None = None,
    codes: list[str] | None = None,
    min_severity: str | None = None,
    window: tuple[dt.datetime, dt.datetime] | None = None,
    zone: dt.tzinfo = dt.UTC,
    dealer: bool = True,
) -> list[dict]:
    """Standing findings as findings-format v1 records, oldest first, times shown in `zone`.

    Each record has the v1.1 field `dealer` (EXPORT_FIELDS: what the export, the report's
    attachments and the live board write; null where the database has no such column),
    unless `dealer` is false."""
    where, params = Filter(
        severity=min_severity, codes=tuple(codes or ()), pit=pit, table=table, window=window
    ).where()
    dealer_sql = "dealer" if dealer and has_dealer_column(con) else "NULL::VARCHAR"
    rows = con.execute(
        f"""
        SELECT code, severity, table_id, pit, shoe, round, seq, ts, rule, message,
               CAST(expected AS VARCHAR), CAST(observed AS VARCHAR), source, fingerprint,
               {dealer_sql}
        FROM current_findings WHERE {where}
        ORDER BY ts, table_id NULLS FIRST, seq NULLS FIRST, code, fingerprint
        """,
        params,
    ).fetchall()
    out = []
    for r in rows:
        rec = dict(zip(STORED_FIELDS, r[:-1], strict=True))
        rec["id"] = short_id(rec["fingerprint"])
        if dealer:
            rec["dealer"] = r[-1]
        rec["ts"] = shown_ts(rec["ts"], zone, rec["fingerprint"])
        for k in ("expected", "observed"):
            rec[k] = json.loads(rec[k]) if rec[k] is not None else None
        out.append(rec)
    return out


# OWASP's list: a cell starting with = + - @ is a formula to a spreadsheet, and some still
# read one after a leading tab or carriage return. A quote in front makes it text. A cell that
# starts with a quote already gets one more, so an importer undoes the rule exactly by
# dropping the first quote of any cell that starts with one.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "'")
JSON_FIELDS = ("expected", "observed")


def csv_cell(value: object) -> object:
    """A text cell a spreadsheet shows as text: a shoe id like `=HYPERLINK(...)` comes from
    the logs, and a CSV opened by a reviewer must not run it. Numbers pass unchanged: `-3` is
    a number to a spreadsheet, never a formula, and a quote would make it text."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_row(record: dict[str, Any]) -> dict[str, Any]:
    """One findings-format record as CSV cells: expected/observed as JSON texts, and every
    text cell through `csv_cell`."""
    row: dict[str, Any] = {}
    for k, v in record.items():
        if k in JSON_FIELDS:
            number = isinstance(v, int | float) and not isinstance(v, bool)
            row[k] = json.dumps(v) if number else csv_cell(json.dumps(v))
        else:
            row[k] = csv_cell(v)
    return row


def _field(cell: object) -> str:
    text = "" if cell is None else str(cell)
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_line(cells: Iterable[object]) -> str:
    """One CSV row of cells as `write_csv` writes them (formulas neutralised, RFC 4180
    quoting): for the other CSV exports (`bacc-audit dealers`), whose names come from logs."""
    return ",".join(_field(csv_cell(c)) for c in cells) + "\n"


def write_csv(out: TextIO, records: Iterable[dict[str, Any]]) -> None:
    """The findings as CSV with a header row: the one writer behind `bacc-audit findings
    --format csv` and the report's findings.csv, so both neutralise formulas alike.

    Written by hand rather than with the csv module: with "\n" line ends, Python 3.11's
    writer leaves a carriage return inside a cell unquoted, and a reader then ends the row
    there, so a shoe id `x\r=1+1` would start a row with a formula. Every cell holding a
    comma, a double quote, a carriage return or a line feed is quoted (RFC 4180).
    """
    out.write(",".join(EXPORT_FIELDS) + "\n")
    for r in records:
        row = csv_row(r)
        if row.keys() != set(EXPORT_FIELDS):  # a bug upstream: never drop or invent a field
            raise ValueError(f"not a findings-format record: {sorted(row)}")
        out.write(",".join(_field(row[k]) for k in EXPORT_FIELDS) + "\n")
