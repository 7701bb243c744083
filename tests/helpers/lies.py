"""Logs that lie (issue 28), made the way a dealer or a forger with write access to a table
system's log would make them: from the sample night (the simulator's output), one edit each.

The sample night's files are copied plain (not gzipped) into a folder, edited as lists of
events, and delivered to a fresh audit database one delivery at a time, each followed by an
audit, as files arrive at a property (`deliver`).
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb

from auditor import config
from auditor.audit.run import AuditResult, audit
from auditor.ingest.run import ingest
from auditor.store import db, runs

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_logs"
CONF = config.load(SAMPLE / "property.toml")
Event = dict[str, Any]


def plain_sample(folder: Path) -> dict[str, Path]:
    """The sample night's logs, plain, in `folder`: 'MB-01' -> its file, ..., 'pits'."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for src in sorted(SAMPLE.glob("2026-11-28_*.jsonl*")):
        data = gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes()
        dst = folder / src.name.removesuffix(".gz")
        dst.write_bytes(data)
        key = dst.name.removeprefix("2026-11-28_").removesuffix(".jsonl")
        out["pits" if key == "pit-notices" else key] = dst
    return out


def read(path: Path) -> list[Event]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write(path: Path, events: Sequence[Event]) -> Path:
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events))
    return path


def when(e: Event) -> dt.datetime:
    return dt.datetime.fromisoformat(e["ts"])


def stamp(t: dt.datetime) -> str:
    """As the simulator writes a time: local, with its offset, to the millisecond."""
    return t.astimezone(dt.timezone(dt.timedelta(hours=-5))).isoformat(timespec="milliseconds")


def find(events: Sequence[Event], **match: Any) -> int:
    """The index of the first event with every field of `match`."""
    return next(i for i, e in enumerate(events) if all(e.get(k) == v for k, v in match.items()))


def insert(events: list[Event], at: int, new: Event) -> None:
    """`new` goes in at index `at` of one stream's events, taking the seq there; the events
    after it are numbered on (the forger renumbers the rest of the file)."""
    new["seq"] = events[at]["seq"]
    for e in events[at:]:
        e["seq"] += 1
    events.insert(at, new)


def round_event(like: Event, type_: str, t: dt.datetime, **fields: Any) -> Event:
    """A round event of `like`'s table, shoe and round, stamped `t`."""
    return {"v": 1, "ts": stamp(t), "type": type_, "table": like["table"], "seq": 0,
            "shoe": like["shoe"], "round": like["round"], **fields}


def card_after_round_end(events: list[Event], shoe: str, rnd: int, minutes: int) -> Event:
    """A Banker 5c for round `rnd` of `shoe` put in `events` (one table's stream) just
    before the first round that starts `minutes` after that round's round_end: the card a
    dealer adds to mend a missed draw. Returns the card."""
    end = events[find(events, shoe=shoe, round=rnd, type="round_end")]
    later = when(end) + dt.timedelta(minutes=minutes)
    at = next(i for i, e in enumerate(events) if e["type"] == "round_start" and when(e) >= later)
    card = round_event(end, "card", when(events[at]) - dt.timedelta(seconds=1), to="banker",
                       card="5c")
    insert(events, at, card)
    return card


def deliver(path: Path, *deliveries: Sequence[Path],
            after: Callable[[duckdb.DuckDBPyConnection, int], None] | None = None,
            conf: config.PropertyConfig = CONF,
            ) -> tuple[duckdb.DuckDBPyConnection, list[AuditResult]]:
    """A fresh database at `path`; each delivery (a list of files) ingested, then audited
    (`after(con, i)` runs after the i-th audit). Returns the database and the audits."""
    con = db.connect(path)
    results = []
    for i, files in enumerate(deliveries):
        ingest(con, list(files), runs.start(con, "ingest", {}))
        results.append(audit(con, runs.start(con, "audit", {}), conf))
        if after is not None:
            after(con, i)
    return con, results


def standing(con: duckdb.DuckDBPyConnection, *codes: str) -> list[tuple]:
    """(code, severity, table, shoe, round) of the standing findings of `codes` (all if
    none), sorted."""
    where = "true" if not codes else "list_contains(?, code)"
    return sorted(con.execute(
        f"SELECT code, severity, table_id, shoe, round FROM current_findings WHERE {where}",
        [list(codes)] if codes else [],
    ).fetchall(), key=str)


def finding(con: duckdb.DuckDBPyConnection, code: str, **where: Any) -> dict[str, Any]:
    """The one standing finding of `code` (and `where`: column = value), as a dict with its
    JSON columns read."""
    cond = " AND ".join([f"{k} = ?" for k in where]) or "true"
    cur = con.execute(f"SELECT * FROM current_findings WHERE code = ? AND {cond}",
                      [code, *where.values()])
    names = [d[0] for d in cur.description]
    rows = cur.fetchall()
    assert len(rows) == 1, (code, where, rows)
    row = dict(zip(names, rows[0], strict=True))
    for k in ("expected", "observed", "evidence"):
        row[k] = json.loads(row[k]) if row[k] is not None else None
    return row
