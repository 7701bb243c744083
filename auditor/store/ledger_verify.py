"""What `bacc-audit verify` checks inside the database (docs/ledger.md): every leaf against
the record it covers, every record against its leaf, every head against the leaves, and the
event and quarantine rows of every log file against its sealed pieces.

Each check returns `Problem`s, ordered so that the first is the first record that differs;
auditor/jobs/verify.py runs them (the whole ledger, or the fast check from the last verified
head) and adds the events' columns read again from their lines (ingest/reparse.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

import duckdb

from auditor import merkle
from auditor.store import (
    derived,
    ledger,
    ledger_rows,
    set_logs,
    shoe_index,
    stream_sources,
)
from auditor.store.db import has_table
from auditor.store.sql import quote

SHOWN = 50  # problems of one kind read back in detail; the rest are counted


@dataclass(frozen=True)
class Problem:
    """One thing that does not hold: a record `changed` since its seal, `missing` (its leaf
    stands, the row is gone), `inserted` (a row no run of the product sealed), or the
    ledger's own tables (`ledger`) or a filed report (`report`) that disagree."""

    what: str
    table: str
    key: str
    detail: str
    leaf: int | None = None

    def sentence(self) -> str:
        where = f"{self.table} {self.key}" if self.key else self.table
        leaf = f" (leaf {self.leaf})" if self.leaf is not None else ""
        return f"{self.what}: {where}{leaf}: {self.detail}"

    def order(self) -> tuple[int, int, str, str]:
        return (0 if self.leaf is not None else 1, self.leaf or 0, self.table, self.key)


@dataclass
class Found:
    problems: list[Problem] = field(default_factory=list)
    more: int = 0  # problems counted but not read back
    pending: dict[int, int] = field(default_factory=dict)  # run -> its rows not yet sealed
    leaves: int = 0  # leaves compared with their records

    def add(self, other: Found) -> None:
        self.problems += other.problems
        self.more += other.more
        for run, n in other.pending.items():
            self.pending[run] = self.pending.get(run, 0) + n
        self.leaves += other.leaves


def _diff(sealed: str, now: str) -> str:
    """Which fields of a record's canonical bytes changed, as a sentence."""
    try:
        a, b = json.loads(sealed), json.loads(now)
    except ValueError:
        return "its bytes differ from those sealed"
    changed = [k for k in a if a.get(k) != b.get(k)] + [k for k in b if k not in a]
    if not changed:
        return "its bytes differ from those sealed"
    parts = [f"{k} was {_short(a.get(k))}, now {_short(b.get(k))}" for k in changed[:4]]
    more = f" (and {len(changed) - 4} more fields)" if len(changed) > 4 else ""
    return "; ".join(parts) + more


def _short(v: object) -> str:
    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _status(con: duckdb.DuckDBPyConnection) -> dict[int, str]:
    """Per run that has a sealed start: 'ended' when its end is sealed too, else 'open'."""
    out: dict[int, str] = {}
    for kind, run in con.execute(
        "SELECT kind, record_run FROM ledger WHERE kind IN ('run.start', 'run.end')"
    ).fetchall():
        if kind == "run.end" or run not in out:
            out[int(run)] = "ended" if kind == "run.end" else "open"
    return out


def check_records(
    con: duckdb.DuckDBPyConnection, kinds: Iterable[ledger.Covered] = ledger.COVERED
) -> Found:
    """Every leaf of `kinds` against its record and every record against its leaf. The
    pieces' digests must be in the temp table `piece_digests` (`piece_scope`)."""
    types = ledger.column_types(con)
    runs = _status(con)
    found = Found()
    for c in kinds:
        if c.table not in types:
            continue
        rows = con.execute(
            f"""
            WITH r AS ({ledger.records_sql(c, types[c.table])}),
            l AS (SELECT idx, record_key, data, leaf_hash FROM ledger WHERE kind = ?),
            j AS (
              SELECT coalesce(r.record_key, l.record_key) AS record_key, l.idx, r.record_run,
                     r.data AS now, l.data AS sealed,
                     l.idx IS NOT NULL AND sha256(unhex('00') || encode(l.data)) <> l.leaf_hash
                       AS bad_hash,
                     count(r.record_key) OVER (PARTITION BY r.record_key) AS copies
              FROM r FULL OUTER JOIN l ON r.record_key = l.record_key
            )
            SELECT record_key, idx, record_run, now, sealed, bad_hash, copies,
                   count(*) OVER () AS n
            FROM j WHERE now IS DISTINCT FROM sealed OR bad_hash OR copies > 1
            ORDER BY idx NULLS LAST, record_key LIMIT {SHOWN}
            """,
            [c.kind],
        ).fetchall()
        found.leaves += con.execute(
            "SELECT count(*) FROM ledger WHERE kind = ?", [c.kind]
        ).fetchall()[0][0]
        if rows:
            found.more += int(rows[0][7]) - len(rows)
        for key, idx, run, now, sealed, bad_hash, copies, _ in rows:
            noun = c.noun
            if bad_hash:
                found.problems.append(Problem(
                    "ledger", "ledger", str(idx),
                    f"the leaf of {c.table} {key} is not the hash of the bytes kept beside it "
                    "(the ledger itself was edited)", idx))
            elif copies and copies > 1:
                found.problems.append(Problem(
                    "inserted", c.table, key,
                    f"{copies} rows carry this key; one {noun} was sealed", idx))
            elif idx is None:
                state = runs.get(int(run)) if run is not None else None
                if state == "open":
                    found.pending[int(run)] = found.pending.get(int(run), 0) + 1
                    continue
                who = "no run" if run is None else f"run {run}"
                why = ("which ended before it was written" if state == "ended"
                       else "which is not on the record")
                found.problems.append(Problem(
                    "inserted", c.table, key,
                    f"this {noun} has no leaf: written by {who}, {why}; no run of the "
                    "product sealed it"))
            elif now is None:
                found.problems.append(Problem(
                    "missing", c.table, key, f"the {noun} sealed here is gone", idx))
            else:
                found.problems.append(Problem("changed", c.table, key, _diff(sealed, now), idx))
    return found


def piece_scope(con: duckdb.DuckDBPyConnection, from_leaf: int) -> int:
    """Fill `piece_digests`: the digests read again from the rows for every piece sealed at
    or after leaf `from_leaf` and every piece not sealed; those sealed before as kept in
    their leaves (the fast check trusts them, the full one passes 0). Returns the number of
    pieces whose rows were read."""
    again = ledger_rows.pieces(
        con,
        "NOT EXISTS (SELECT 1 FROM ledger l WHERE l.kind = 'piece' AND l.idx < "
        f"{int(from_leaf)} AND l.record_key = source_id || ':' || start_byte || '-' || "
        "end_byte)",
    )
    table = ledger_rows.digests(con, again)
    ledger_rows.fill_digests(con, table)
    fields = ", ".join(
        f"json_extract{'_string' if f.endswith('sha256') else ''}(data, '$.{f}')"
        + ("" if f.endswith("sha256") else "::BIGINT") for f in ledger_rows.DIGEST_FIELDS
    )
    con.execute(
        "INSERT INTO piece_digests SELECT CAST(json_extract(data, '$.source_id') AS BIGINT), "
        "CAST(json_extract(data, '$.start_byte') AS BIGINT), "
        f"CAST(json_extract(data, '$.end_byte') AS BIGINT), {fields} "
        f"FROM ledger WHERE kind = 'piece' AND idx < {int(from_leaf)}"
    )
    return len(again)


def check_rows(con: duckdb.DuckDBPyConnection) -> Found:
    """The event and quarantine rows of each source against its pieces: as many as the
    pieces loaded (a row added or removed anywhere shows here, cheaply), each event with no
    rejection (ingest moves those to quarantine), and no row outside every piece."""
    found = Found()
    for table, counted, what in (("events", "events", "event"),
                                 ("quarantine", "quarantined", "quarantined line")):
        rows = con.execute(
            f"""
            WITH t AS (SELECT source_id, count(*) AS n FROM {table} GROUP BY source_id),
            p AS (SELECT source_id, sum({counted}) AS n FROM source_extents GROUP BY source_id)
            SELECT coalesce(t.source_id, p.source_id), coalesce(t.n, 0), coalesce(p.n, 0)
            FROM t FULL OUTER JOIN p USING (source_id)
            WHERE coalesce(t.n, 0) <> coalesce(p.n, 0) ORDER BY 1 LIMIT {SHOWN}
            """
        ).fetchall()
        for source, now, loaded in rows:
            what_ = "inserted" if now > loaded else "missing"
            found.problems.append(Problem(
                what_, table, f"source {source}",
                f"{now:,} {what}s stand, the pieces of this source loaded {loaded:,}"))
    bad = con.execute(
        "SELECT source_id, line_no, rejected FROM events WHERE rejected IS NOT NULL "
        "ORDER BY 1, 2 LIMIT 1"
    ).fetchall()
    for source, line, why in bad:
        found.problems.append(Problem(
            "changed", "events", f"source {source} line {line}",
            f"an event row says it was rejected ({why!r}); ingest keeps no such row"))
    return found


def check_derived(con: duckdb.DuckDBPyConnection, from_leaf: int = 0) -> Found:
    """The audit's bookkeeping (store/derived.py) against the digests sealed when each run
    ended: every run's rows counted again, and digested again where the digest was sealed
    at or after leaf `from_leaf` (the fast check; the whole check passes 0). Rows of a run
    whose end sealed no digest of that table are named inserted, unless the run is still
    open (its end digests them, as it seals its end)."""
    found = Found()
    types = ledger.column_types(con)
    if derived.TABLE not in types:
        return found
    runs = _status(con)
    for d in derived.DERIVED:
        if not has_table(con, d.table):
            continue
        rows = con.execute(
            f"""
            WITH now AS (SELECT run_id, count(*) AS n FROM {d.table} GROUP BY run_id),
            sealed AS (
              SELECT r.run_id, r.rows, r.sha256, l.idx FROM {derived.TABLE} r
              LEFT JOIN ledger l ON l.kind = 'derived' AND l.record_key = {derived.KEY_SQL}
              WHERE r.tab = ?
            )
            SELECT coalesce(n.run_id, s.run_id), coalesce(n.n, 0), s.rows, s.sha256, s.idx
            FROM now n FULL OUTER JOIN sealed s USING (run_id) ORDER BY 1
            """,
            [d.table],
        ).fetchall()
        for run, now, digested, sha, idx in rows:
            key = f"rows of run {run}"
            if digested is None:
                if runs.get(int(run)) == "open":  # its end digests them
                    continue
                who = ("which is not on the record" if int(run) not in runs
                       else "whose end sealed none")
                found.problems.append(Problem(
                    "inserted", d.table, key,
                    f"{now:,} {'row stands' if now == 1 else 'rows stand'} under run {run}, "
                    f"{who}: no run of the product wrote them"))
            elif now != digested:
                found.problems.append(Problem(
                    "inserted" if now > digested else "missing", d.table, key,
                    f"{now:,} rows stand, the ledger sealed a digest of {digested:,}",
                    idx))
            elif (idx is None or idx >= from_leaf) and derived.digest(con, d, run)[1] != sha:
                found.problems.append(Problem(
                    "changed", d.table, key,
                    f"its {now:,} {'row is' if now == 1 else 'rows are'} not what the "
                    "ledger sealed (a row edited)", idx))
    return found


def check_set_logs(con: duckdb.DuckDBPyConnection) -> Found:
    """The tables the audit rewrites a key at a time against the latest logged set of each
    key (store/set_logs.py; the log rows themselves are the derived rows check_derived holds
    to their seal)."""
    found = Found()
    for s in set_logs.LOGS:
        if not has_table(con, s.log):
            continue
        rows, total = set_logs.mismatches(con, s, SHOWN)
        for what, *row in rows:
            found.problems.append(Problem(
                str(what), s.table, set_logs.describe(s, tuple(row)),
                "not in the audit's log of what it wrote" if what == "inserted" else
                "in the audit's log of what it wrote, no longer in the table"))
        found.more += max(0, total - len(rows))
    return found


def check_shoe_index(con: duckdb.DuckDBPyConnection, from_leaf: int = 0) -> Found:
    """The shoe-integrity index against what the pass wrote (store/shoe_index.py): counted
    whole, and digested again for the shoes last indexed by a run whose `done` rows were
    sealed at or after leaf `from_leaf` (every shoe for the whole check, which passes 0).
    The `done` rows themselves are the derived rows check_derived holds to their seal."""
    found = Found()
    if not has_table(con, "shoe_index_done"):
        return found
    shoes, grams, in_shoes, in_grams = shoe_index.counts(con)
    for n, want, what in ((in_shoes, shoes, "shoes"), (in_grams, grams, "k-grams")):
        if n != want and con.execute("SELECT 1 FROM shoe_index_done LIMIT 1").fetchall():
            found.problems.append(Problem(
                "inserted" if n > want else "missing", "shoe_orders" if what == "shoes"
                else "shoe_grams", "",
                f"{n:,} {what} stand in the shoe-integrity index, the integrity pass wrote "
                f"{want:,}"))
    old = (
        f"SELECT r.run_id FROM {derived.TABLE} r JOIN ledger l ON l.kind = 'derived' "
        f"AND l.record_key = {derived.KEY_SQL} WHERE r.tab = 'shoe_index_done' "
        f"AND l.idx < {int(from_leaf)}"
    ) if from_leaf > 0 and has_table(con, derived.TABLE) else shoe_index.NO_RUNS
    rows, total = shoe_index.mismatches(con, old, SHOWN)
    for table, shoe, what, detail in rows:
        found.problems.append(Problem(
            what, "shoe_orders" if "order" in detail else "shoe_grams",
            f"table {table} shoe {shoe}" if table else "", detail))
    found.more += max(0, total - len(rows))
    return found


def check_stream_sources(con: duckdb.DuckDBPyConnection) -> Found:
    """Ingest's per-stream summary against the events, every row of it, in the fast check
    too (store/stream_sources.py)."""
    found = Found()
    if not has_table(con, "stream_sources"):
        return found
    rows, total = stream_sources.mismatches(con, SHOWN)
    for what, stream, source, detail in rows:
        found.problems.append(Problem(what, "stream_sources", f"stream {stream} source {source}",
                                      detail))
    found.more += max(0, total - len(rows))
    return found


@dataclass
class Tree:
    """The heads recomputed from the leaves: the latest, and the problems."""

    size: int
    root: str
    peaks: str
    problems: list[Problem] = field(default_factory=list)


def check_tree(con: duckdb.DuckDBPyConnection, start: ledger.Head | None) -> Tree:
    """Every head from `start` on (from the first leaf when None) recomputed from the leaf
    hashes; with the cached inner nodes of the leaves read when from the first leaf."""
    problems: list[Problem] = []
    n, lo, hi = con.execute("SELECT count(*), min(idx), max(idx) FROM ledger").fetchall()[0]
    if n and (lo != 0 or hi != n - 1):
        problems.append(Problem(
            "ledger", "ledger", "",
            f"its leaves are not numbered 0 to {n - 1} (from {lo} to {hi}): leaves were "
            "removed or added by hand"))
    frontier = start.frontier() if start else merkle.Frontier()
    if start is None:
        frontier.keep_level = ledger.CACHE_LEVEL
    want = {
        int(s): (r, p) for s, r, p in con.execute(
            "SELECT size, root, peaks FROM ledger_heads WHERE size > ? ORDER BY size",
            [frontier.size],
        ).fetchall()
    }
    reader = con.sql(
        f"SELECT leaf_hash FROM ledger WHERE idx >= {frontier.size} ORDER BY idx"
    ).to_arrow_reader(500_000)
    for rb in reader:
        for h in rb.column(0).to_pylist():
            frontier.append(bytes.fromhex(h))
            got = want.get(frontier.size)
            if got is not None and got[0] != frontier.root().hex():
                problems.append(Problem(
                    "ledger", "ledger_heads", f"size {frontier.size}",
                    f"the head's root {got[0][:16]}... is not the root of its first "
                    f"{frontier.size} leaves ({frontier.root().hex()[:16]}...)",
                    frontier.size - 1))
    beyond = [s for s in want if s > frontier.size]
    if beyond:
        problems.append(Problem(
            "ledger", "ledger_heads", f"size {beyond[0]}",
            f"a head of {beyond[0]} leaves, but the ledger holds {frontier.size}"))
    if start is None:
        problems += _check_nodes(con, frontier.made)
    peaks = json.dumps(frontier.dump(), separators=(",", ":"))
    return Tree(frontier.size, frontier.root().hex(), peaks, problems)


def _check_nodes(
    con: duckdb.DuckDBPyConnection, made: list[tuple[int, int, bytes]]
) -> list[Problem]:
    kept = {(int(lv), int(i)): h for lv, i, h in con.execute(
        "SELECT level, idx, hash FROM ledger_nodes").fetchall()}
    wanted = {(lv, i): h.hex() for lv, i, h in made}
    for key in sorted(kept.keys() | wanted.keys()):
        if kept.get(key) != wanted.get(key):
            return [Problem(
                "ledger", "ledger_nodes", f"level {key[0]} index {key[1]}",
                "a kept inner node is not the hash of its leaves (inclusion proofs printed "
                "from it would be false)")]
    return []


def recorded_check(con: duckdb.DuckDBPyConnection) -> ledger.Head | None:
    """The last verification that found everything as sealed and is itself sealed (a check
    row written by hand is not trusted): the fast check starts from its head."""
    rows = con.execute(
        "SELECT c.size, c.root, c.peaks, c.run_id, c.checked_at FROM ledger_checks c "
        "JOIN ledger l ON l.kind = 'ledger_check' AND l.record_key = CAST(c.id AS VARCHAR) "
        "JOIN ledger_heads h ON h.size = c.size AND h.root = c.root "
        "ORDER BY c.size DESC LIMIT 1"
    ).fetchall()
    return ledger.Head(*rows[0]) if rows else None


def record_check(
    con: duckdb.DuckDBPyConnection, size: int, root: str, peaks: str, mode: str, run_id: int
) -> None:
    """A verification that found everything as sealed, up to the head of `size` leaves."""
    con.execute(
        "INSERT INTO ledger_checks (size, root, peaks, mode, checked_at, run_id) "
        "VALUES (?, ?, ?, ?, now(), ?)",
        [size, root, peaks, mode, run_id],
    )


def kinds_named(names: Iterable[str]) -> list[ledger.Covered]:
    return [ledger.KINDS[n] for n in names]


def quoted(names: Iterable[str]) -> str:
    return ", ".join(quote(n) for n in names)
