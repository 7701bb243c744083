"""The small relational records of the audit database (runs, ingested sources, acknowledgements,
sign-offs), as sqlmodel classes.

Bulk data (events, quarantine, findings) is plain DuckDB DDL in `auditor.store.db`; these are the
rows a person reads one at a time, so an ORM is worth its convenience here.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import BigInteger, Column, DateTime, Sequence, Text
from sqlmodel import Field, SQLModel

run_id_seq = Sequence("run_id_seq")
source_id_seq = Sequence("source_id_seq")
ack_id_seq = Sequence("ack_id_seq")


def _tz_column(nullable: bool = False) -> Column:
    return Column(DateTime(timezone=True), nullable=nullable)


class Run(SQLModel, table=True):
    """One invocation of a writing command; every row written carries its run id."""

    __tablename__ = "runs"
    id: int | None = Field(
        default=None,
        sa_column=Column(
            BigInteger, run_id_seq, server_default=run_id_seq.next_value(), primary_key=True
        ),
    )
    command: str
    args: str = Field(default="", sa_column=Column(Text))
    tool_version: str
    started_at: dt.datetime = Field(sa_column=_tz_column())
    finished_at: dt.datetime | None = Field(default=None, sa_column=_tz_column(nullable=True))
    # 'running' until the command ends; a crash leaves it so, which `runs` shows.
    status: str = "running"
    exit_code: int | None = None
    summary: str = Field(default="", sa_column=Column(Text))


class Source(SQLModel, table=True):
    """One offer of a log file to ingest: the manifest that ties every event to its file's hash.

    Append-only: a refused file is a row too (status `refused_altered`), so the evidence of the
    attempt stays; so is an empty file (status `empty`): a table system delivered nothing.
    """

    __tablename__ = "sources"
    id: int | None = Field(
        default=None,
        sa_column=Column(
            BigInteger, source_id_seq, server_default=source_id_seq.next_value(), primary_key=True
        ),
    )
    path: str
    sha256: str
    size: int
    lines: int
    events: int
    quarantined: int
    duplicates: int
    first_ts: dt.datetime | None = Field(default=None, sa_column=_tz_column(nullable=True))
    last_ts: dt.datetime | None = Field(default=None, sa_column=_tz_column(nullable=True))
    ingested_at: dt.datetime = Field(sa_column=_tz_column())
    run_id: int
    status: str  # 'ingested' | 'refused_altered' | 'empty' (a file with no lines)
    note: str = Field(default="", sa_column=Column(Text))


class Acknowledgement(SQLModel, table=True):
    """A person's review of one finding: who looked at it, what they decided, and when.

    Append-only, like the findings it refers to: a changed decision is a new row, and the
    latest row per fingerprint is the standing one (`auditor.store.acks.latest_acks`), so the
    history of every review stays as evidence.
    """

    __tablename__ = "acknowledgements"
    id: int | None = Field(
        default=None,
        sa_column=Column(
            BigInteger, ack_id_seq, server_default=ack_id_seq.next_value(), primary_key=True
        ),
    )
    fingerprint: str = Field(sa_column=Column(Text, nullable=False))
    reviewer: str
    disposition: str = Field(sa_column=Column(Text, nullable=False))
    note: str = Field(default="", sa_column=Column(Text))
    recorded_at: dt.datetime = Field(sa_column=_tz_column())
    run_id: int


signoff_id_seq = Sequence("signoff_id_seq")


class Signoff(SQLModel, table=True):
    """A person's sign-off of one filed version of a report (`bacc-audit signoff`): who, with
    what title, when, and which file, by the SHA-256 of its bytes, so that the record names
    exactly the PDF that was read and signed, whichever copy of it is shown later.

    Append-only: a second sign-off of the same version (another officer, a countersignature)
    is another row; none is ever changed or withdrawn.
    """

    __tablename__ = "signoffs"
    id: int | None = Field(
        default=None,
        sa_column=Column(
            BigInteger, signoff_id_seq, server_default=signoff_id_seq.next_value(),
            primary_key=True,
        ),
    )
    slug: str  # the report, e.g. 2026-11-28_grave (report_versions.slug)
    version: int  # report_versions.version
    sha256: str = Field(sa_column=Column(Text, nullable=False))  # of the PDF signed off
    path: str = Field(sa_column=Column(Text, nullable=False))  # where it was filed
    signer: str
    title: str
    note: str = Field(default="", sa_column=Column(Text))
    recorded_at: dt.datetime = Field(sa_column=_tz_column())
    run_id: int
