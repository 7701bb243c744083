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
from sqlmodel import Field, SQLModel

from auditor.config import shown_time
from auditor.errors import UserError
from auditor.store.db import add_row, all_rows, ensure_schema, has_table

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
    run_id: int | None = None  # NULL: entered before notices named their run

    @property
    def table_list(self) -> list[str] | None:
        if not self.tables:
            return None
        return [t for t in self.tables.split(",") if t]


notice_withdrawal_id_seq = Sequence("notice_withdrawal_id_seq")


class NoticeWithdrawal(SQLModel, table=True):
    """A notice entered by hand, taken back: by whom, why and when. The notice row stays (the
    database is append-only); the audit no longer counts it and the listing shows both."""

    __tablename__ = "notice_withdrawals"
    id: int | None = Field(
        default=None,
        sa_column=Column(
            BigInteger, notice_withdrawal_id_seq,
            server_default=notice_withdrawal_id_seq.next_value(), primary_key=True,
        ),
    )
    notice_id: int
    withdrawn_by: str
    reason: str = Field(sa_column=Column(Text))
    withdrawn_at: dt.datetime = Field(sa_column=_tz_column())
    run_id: int | None = None  # NULL: withdrawn before withdrawals named their run


def ensure_table(con: duckdb.DuckDBPyConnection) -> None:
    """Create `notices` and `notice_withdrawals` in a database opened before this module was
    imported (`ensure_schema` creates every registered sqlmodel table missing)."""
    if not (has_table(con, "notices") and has_table(con, "notice_withdrawals")):
        ensure_schema(con)


def _aware(name: str, value: dt.datetime) -> dt.datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise UserError(f"{name} must carry a time zone or offset, not {shown_time(value)}")
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
    known_pits: Iterable[str] | None = None,
    known_tables: Iterable[str] | None = None,
    late: bool = False,
    run_id: int | None = None,
) -> Notice:
    """Record one notice; every problem is a UserError sentence. Returns the stored row.

    `known_pits` and `known_tables` (from the logs and the config), when given, refuse a
    notice for a pit or table nobody has heard of: a typo would otherwise count for nothing
    or, worse, for the wrong pit. A notice given after the time it announces is refused
    unless `late`: entered on purpose, it is then judged late like any other."""
    if not _ID.match(pit):
        raise UserError(f"pit id {pit!r} is not 1-32 of letters, digits, '.', '_' or '-'")
    if known_pits is not None and pit not in set(known_pits):
        raise UserError(
            f"pit {pit!r} is in neither the logs nor the property config; check the pit id "
            "(bacc-audit notice add refuses notices for unknown pits)"
        )
    named = _tables_text(tables)
    if known_tables is not None and named:
        unknown = sorted(set(named.split(",")) - set(known_tables))
        if unknown:
            raise UserError(
                f"table {unknown[0]!r} is not in the logs; check the table ids given with "
                "--tables"
            )
    if procedure not in (1, 2, 3, 4):
        raise UserError(f"procedure must be 1, 2, 3 or 4, not {procedure!r}")
    if recipient not in RECIPIENTS:
        raise UserError(f"recipient must be division or surveillance, not {recipient!r}")
    if not entered_by.strip():
        raise UserError("say who enters the notice (--by NAME)")
    now = _aware("entered at", entered_at or dt.datetime.now(dt.UTC))
    given = _aware("given at", given_at)
    # Said in the zone the times were given in, as typed (not UTC).
    here = given_at.tzinfo
    if given > now + dt.timedelta(minutes=1):
        raise UserError(
            f"the notice is said to be given at {shown_time(given_at)}, after now "
            f"({shown_time(now.astimezone(here).replace(microsecond=0))}); enter a notice "
            "once it has been given"
        )
    if given > _aware("effective", effective) and not late:
        raise UserError(
            f"the notice is said to be given at {shown_time(given_at)}, after the time it "
            f"announces ({shown_time(effective.astimezone(here))}): such a notice is late "
            "whatever it says; enter it with --late to record it as given late"
        )
    ensure_table(con)
    row = Notice(
        pit=pit,
        tables=named,
        procedure=procedure,
        effective=_aware("effective", effective),
        recipient=recipient,
        written=written,
        given_at=given,
        entered_by=entered_by.strip(),
        entered_at=now,
        note=note,
        run_id=run_id,
    )
    return add_row(con, row)


def list_notices(con: duckdb.DuckDBPyConnection, withdrawn: bool = True) -> list[Notice]:
    """Every notice entered by hand, oldest entry first ([] when none was ever entered);
    without the withdrawn ones if `withdrawn` is false (what the audit counts)."""
    if not has_table(con, "notices"):
        return []
    rows = all_rows(con, Notice)
    if not withdrawn:
        gone = withdrawals(con)
        rows = [r for r in rows if r.id not in gone]
    return rows


def withdrawals(con: duckdb.DuckDBPyConnection) -> dict[int, NoticeWithdrawal]:
    """The withdrawal of each notice withdrawn, by notice id."""
    if not has_table(con, "notice_withdrawals"):
        return {}
    return {r.notice_id: r for r in all_rows(con, NoticeWithdrawal)}


def withdraw_notice(
    con: duckdb.DuckDBPyConnection,
    notice_id: int,
    *,
    by: str,
    reason: str,
    at: dt.datetime | None = None,
    run_id: int | None = None,
) -> NoticeWithdrawal:
    """Take back a notice entered by hand (append-only: a row saying who, why and when)."""
    if not by.strip():
        raise UserError("say who withdraws the notice (--by NAME)")
    if not reason.strip():
        raise UserError("say why the notice is withdrawn (--reason TEXT)")
    if notice_id not in {n.id for n in list_notices(con)}:
        raise UserError(f"there is no notice {notice_id} (bacc-audit notice list shows them)")
    if notice_id in withdrawals(con):
        raise UserError(f"notice {notice_id} is already withdrawn")
    ensure_table(con)
    row = NoticeWithdrawal(
        notice_id=notice_id,
        withdrawn_by=by.strip(),
        reason=reason.strip(),
        withdrawn_at=_aware("withdrawn at", at or dt.datetime.now(dt.UTC)),
        run_id=run_id,
    )
    return add_row(con, row)


def as_dict(n: Notice, withdrawal: NoticeWithdrawal | None = None) -> dict:
    """A notice as JSON-ready values (times in UTC, RFC 3339), with its withdrawal if any."""
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
        "withdrawn": None if withdrawal is None else {
            "by": withdrawal.withdrawn_by,
            "reason": withdrawal.reason,
            "at": withdrawal.withdrawn_at.astimezone(dt.UTC).isoformat(),
        },
    }
