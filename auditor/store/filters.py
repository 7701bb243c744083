"""The findings filter of `bacc-audit findings` and the live board: by code (`*` matches any
text), severity and graver, pit, table and time window; as SQL over the findings (`where`), for
one record in Python (`matches`), and refusing a filter that can match nothing (`validate`).
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import duckdb

from auditor import config as cfg
from auditor.config import PropertyConfig
from auditor.errors import UserError
from auditor.rules.codes import REGISTRY, SEVERITIES, at_least, check_severity
from auditor.store.db import single
from auditor.store.sql import is_stream_sql, stream_name_sql


def code_pattern(code: str) -> re.Pattern[str]:
    """A --code value as a regular expression: `*` is the only wildcard."""
    return re.compile(".*".join(re.escape(part) for part in code.split("*")))


def like(code: str) -> str:
    """A --code value as a LIKE pattern (ESCAPE '\\'): `_` and `%` in a code are themselves."""
    return code.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_").replace("*", "%")


def unmatched(codes: Iterable[str], known: Iterable[str]) -> str | None:
    """The first of `codes` that matches none of the `known` codes, or None."""
    names = list(known)
    for c in codes:
        pattern = code_pattern(c)
        if not any(pattern.fullmatch(k) for k in names):
            return c
    return None


def near(word: str, known: list[str]) -> str:
    """"; did you mean X?" for the closest of `known` (the same but for case first: `p1`
    for `P1`), or "" when none is close."""
    folded = {k.casefold(): k for k in known}
    if word.casefold() in folded:
        return f"; did you mean {folded[word.casefold()]}?"
    close = difflib.get_close_matches(word.casefold(), list(folded), n=1, cutoff=0.6)
    return f"; did you mean {folded[close[0]]}?" if close else ""


def window_of(
    conf: PropertyConfig, zone: dt.tzinfo, *, shift: str | None = None, date: str | None = None
) -> tuple[dt.datetime, dt.datetime] | None:
    """[start, end) in UTC of `shift` (GAMING-DAY/NAME), else of the gaming day `date`."""
    if shift:
        day, name = cfg.parse_shift(shift)
        return conf.shift_window(day, name, zone)
    if date:
        return conf.gaming_day_window(cfg.parse_date(date), zone)
    return None


@dataclass(frozen=True)
class Filter:
    """Which findings to show. Applied in SQL to what is read from the database (`where`)
    and in Python to a record already read (`matches`); the two agree (tests/board/test_board.py).
    """

    severity: str | None = None  # this severity and the graver ones
    codes: tuple[str, ...] = ()  # `*` matches any run of characters
    pit: str | None = None
    table: str | None = None
    window: tuple[dt.datetime, dt.datetime] | None = None  # [start, end) in UTC
    dealer: str | None = None  # the dealer at the table (findings v1.1), for the board

    @classmethod
    def from_query(
        cls, query: Mapping[str, Any], conf: PropertyConfig, zone: dt.tzinfo
    ) -> Filter:
        """The board's: from a query string (`severity`, `code` repeatable, `pit`, `table`,
        `date` or `shift`); a value that can match nothing is a UserError, as on the command
        line, but against the registry's codes alone."""
        getlist = getattr(query, "getlist", None)
        raw_codes = getlist("code") if getlist else query.get("code") or []
        codes = tuple(c.strip() for c in ([raw_codes] if isinstance(raw_codes, str) else raw_codes)
                      if c and c.strip())
        wrong = unmatched(codes, REGISTRY)
        if wrong is not None:
            raise UserError(f"code {wrong!r}: no such finding code (* matches any text)")
        severity = (query.get("severity") or "").strip() or None
        if severity:
            check_severity(severity, "severity")
        date, shift = query.get("date"), query.get("shift")
        if date and shift:
            raise UserError("give date or shift, not both")
        return cls(
            severity=severity,
            codes=codes,
            pit=(query.get("pit") or "").strip() or None,
            table=(query.get("table") or "").strip() or None,
            window=window_of(conf, zone, shift=shift, date=date),
            dealer=(query.get("dealer") or "").strip() or None,
        )

    def allowed(self) -> tuple[str, ...]:
        return at_least(self.severity, "severity") if self.severity else SEVERITIES

    def where(self) -> tuple[str, list[Any]]:
        """The SQL condition over a findings row (findings, current_findings) and its
        parameters."""
        where: list[str] = ["true"]
        params: list[Any] = []
        if self.window:
            where.append("ts >= ? AND ts < ?")
            params += list(self.window)
        if self.table:
            where.append("table_id = ?")
            params.append(self.table)
        if self.pit:
            where.append("pit = ?")
            params.append(self.pit)
        if self.dealer:
            where.append("dealer = ?")
            params.append(self.dealer)
        if self.codes:
            where.append("(" + " OR ".join("code LIKE ? ESCAPE '\\'" for _ in self.codes) + ")")
            params += [like(c) for c in self.codes]
        if self.severity:
            allowed = self.allowed()
            where.append(f"severity IN ({', '.join('?' for _ in allowed)})")
            params += list(allowed)
        return " AND ".join(where), params

    def matches(self, record: Mapping[str, Any], at: dt.datetime) -> bool:
        """Whether a findings-v1 record, dated `at` (UTC), passes."""
        if self.window and not self.window[0] <= at < self.window[1]:
            return False
        if self.table and record["table"] != self.table:
            return False
        if self.pit and record["pit"] != self.pit:
            return False
        if self.dealer and record.get("dealer") != self.dealer:
            return False
        if self.codes and not any(code_pattern(c).fullmatch(record["code"]) for c in self.codes):
            return False
        return not self.severity or record["severity"] in self.allowed()

    def query(self) -> list[tuple[str, str]]:
        """The filters as query parameters (dates as the window itself is not kept)."""
        out = [("code", c) for c in self.codes]
        out += [(k, v) for k, v in (("severity", self.severity), ("pit", self.pit),
                                   ("table", self.table), ("dealer", self.dealer)) if v]
        return out


def known_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The tables the database holds events or findings of, sorted."""
    streams = _streams(con)
    return sorted(
        r[0]
        for r in con.execute(
            f"SELECT {stream_name_sql('table', 'stream')} FROM {streams} "
            f"WHERE {is_stream_sql('table', 'stream')} "
            "UNION SELECT table_id FROM findings WHERE table_id IS NOT NULL"
        ).fetchall()
    )


def _streams(con: duckdb.DuckDBPyConnection) -> str:
    """Where the streams are listed: stream_sources, the small summary; a database from
    before it has only the events."""
    has_summary = single(
        con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'stream_sources'"
    )[0]
    return "stream_sources" if has_summary else "events"


def known_pits(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The pits the database holds: those a table_open or a pit's own stream names, and
    those of findings, sorted."""
    return sorted(
        r[0]
        for r in con.execute(
            "SELECT pit FROM events WHERE type = 'table_open' AND pit IS NOT NULL "
            f"UNION SELECT {stream_name_sql('pit', 'stream')} FROM {_streams(con)} "
            f"WHERE {is_stream_sql('pit', 'stream')} "
            "UNION SELECT pit FROM findings WHERE pit IS NOT NULL"
        ).fetchall()
    )


def _held(what: str, names: list[str]) -> str:
    """What the database holds, for the sentence that refuses a name it does not."""
    if not names:
        return f" (it holds no {what} yet)"
    if len(names) <= 12:
        return f" (it holds {', '.join(names)})"
    return f" (it holds {len(names):,} {what}s, {names[0]} to {names[-1]})"


def validate(
    con: duckdb.DuckDBPyConnection, codes: Iterable[str], table: str | None,
    pit: str | None = None,
) -> None:
    """The command line's: a filter that can match nothing is a typo, not a clean result:
    "0 findings" for `draw.banker_miss` would tell a compliance officer the night was clean.

    Codes are the registry's (and any an older version recorded); tables and pits, those the
    database holds events or findings for.
    """
    known = sorted(
        set(REGISTRY)
        | {r[0] for r in con.execute("SELECT DISTINCT code FROM findings").fetchall()}
    )
    wrong = unmatched(codes, known)
    if wrong is not None:
        raise UserError(
            f"--code {wrong}: no such finding code{near(wrong, known)} "
            "(bacc-audit codes lists them; * matches any text, as in log.*)"
        )
    if table is not None:
        tables = known_tables(con)
        if table not in tables:
            raise UserError(f"--table {table}: no such table in this database"
                            f"{near(table, tables)}{_held('table', tables)}")
    if pit is not None:
        pits = known_pits(con)
        if pit not in pits:
            raise UserError(
                f"--pit {pit}: no such pit in this database{near(pit, pits)}{_held('pit', pits)}"
            )
