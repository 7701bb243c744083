"""Procedure notices entered by hand: written notices to the Division or surveillance that the
table systems never logged (a letter, an e-mail), so the notice checks can count them.

Append-only like everything else in the audit database: a notice entered by mistake is not
edited away; enter the right one and say why in `note`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable

import duckdb
from sqlalchemy import BigInteger, Column, DateTime, Sequence, Text
from sqlmodel import Field, SQLModel, select

from auditor.errors import UserError
from auditor.store.db import ensure_schema, session

RECIPIENTS = ("division", "surveillance")
_ID = re.compile(r"^[A-Za-z0-9._-]{1,32}$")

notice_id_seq = Sequence("notice_id_seq")


def _tz_column(nullable: bool = False) -> Column:
    return Column(DateTime(timezone=True), nullable=nullable)


class Notice(SQLModel, table=True):
    """One notice that `procedure` takes effect at `effective` in `pit` (or at `tables` only),
    given to `recipient` at `given_at`, and who entered it when."""

    __tablename__ = "notices"
    id: int | None = Field(
        default=None,
        sa_column=Column(
            BigInteger, notice_id_seq, server_default=notice_id_seq.next_value(),
            primary_key=True,
        ),
    )
    pit: str
    # Comma list of table ids; empty or NULL: the whole pit.
    tables: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    procedure: int
    effective: dt.datetime = Field(sa_column=_tz_column())
    recipient: str  # 'division' | 'surveillance'
    written: bool = True
    given_at: dt.datetime = Field(sa_column=_tz_column())
    entered_by: str
    entered_at: dt.datetime = Field(sa_column=_tz_column())
    note: str = Field(default="", sa_column=Column(Text))

    @property
    def table_list(self) -> list[str] | None:
        if not self.tables:
            return None
        return [t for t in self.tables.split(",") if t]


def ensure_table(con: duckdb.DuckDBPyConnection) -> None:
    """Create `notices` in a database opened before this module was imported (`ensure_schema`
    creates every registered sqlmodel table; a no-op when it exists)."""
    if not _has_table(con):
        ensure_schema(con)


def _has_table(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'notices'"
    ).fetchall()
    return bool(rows[0][0])


def _aware(name: str, value: dt.datetime) -> dt.datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise UserError(f"{name} must carry a time zone or offset, not {value.isoformat()}")
    return value.astimezone(dt.UTC)


def _tables_text(tables: Iterable[str] | str | None) -> str | None:
    if tables is None:
        return None
    items = tables.split(",") if isinstance(tables, str) else list(tables)
    names = [t.strip() for t in items if t.strip()]
    for t in names:
        if not _ID.match(t):
            raise UserError(f"table id {t!r} is not 1-32 of letters, digits, '.', '_' or '-'")
    return ",".join(dict.fromkeys(names)) or None


def add_notice(
    con: duckdb.DuckDBPyConnection,
    *,
    pit: str,
    procedure: int,
    effective: dt.datetime,
    recipient: str,
    given_at: dt.datetime,
    entered_by: str,
    tables: Iterable[str] | str | None = None,
    written: bool = True,
    note: str = "",
    entered_at: dt.datetime | None = None,
) -> Notice:
    """Record one notice; every problem is a UserError sentence. Returns the stored row."""
    if not _ID.match(pit):
        raise UserError(f"pit id {pit!r} is not 1-32 of letters, digits, '.', '_' or '-'")
    if procedure not in (1, 2, 3, 4):
        raise UserError(f"procedure must be 1, 2, 3 or 4, not {procedure!r}")
    if recipient not in RECIPIENTS:
        raise UserError(f"recipient must be division or surveillance, not {recipient!r}")
    if not entered_by.strip():
        raise UserError("say who enters the notice (--by NAME)")
    now = _aware("entered at", entered_at or dt.datetime.now(dt.UTC))
    given = _aware("given at", given_at)
    if given > now + dt.timedelta(minutes=1):
        raise UserError(
            f"the notice is said to be given at {given.isoformat()}, after now "
            f"({now.isoformat()}); enter a notice once it has been given"
        )
    ensure_table(con)
    row = Notice(
        pit=pit,
        tables=_tables_text(tables),
        procedure=procedure,
        effective=_aware("effective", effective),
        recipient=recipient,
        written=written,
        given_at=given,
        entered_by=entered_by.strip(),
        entered_at=now,
        note=note,
    )
    with session(con) as s:
        s.add(row)
        s.commit()
        s.refresh(row)
        s.expunge(row)
    return row


def list_notices(con: duckdb.DuckDBPyConnection) -> list[Notice]:
    """Every notice entered by hand, oldest entry first ([] when none was ever entered)."""
    if not _has_table(con):
        return []
    with session(con) as s:
        rows = list(s.exec(select(Notice).order_by(Notice.id)))  # type: ignore[arg-type]
        for r in rows:
            s.expunge(r)
    return rows


def as_dict(n: Notice) -> dict:
    """A notice as JSON-ready values (times in UTC, RFC 3339)."""
    return {
        "id": n.id,
        "pit": n.pit,
        "tables": n.table_list,
        "procedure": n.procedure,
        "effective": n.effective.astimezone(dt.UTC).isoformat(),
        "recipient": n.recipient,
        "written": n.written,
        "given_at": n.given_at.astimezone(dt.UTC).isoformat(),
        "entered_by": n.entered_by,
        "entered_at": n.entered_at.astimezone(dt.UTC).isoformat(),
        "note": n.note,
    }
