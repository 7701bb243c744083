"""Spool files into the evidence folder: once its ingest committed, a spool file is moved or
hard-linked into ARCHIVE/evidence/DAY/ (`nightly --file-ingested`), so the spool, which every
run reads and hashes whole, holds only what is new."""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb

from auditor.config import PropertyConfig
from auditor.errors import private_files
from auditor.ingest.reader import sha256_of
from auditor.ingest.result import FileResult
from auditor.store import db

Say = Callable[[str], None]  # a progress line for the journal (stderr)

# --file-ingested: what becomes of a spool file once its ingest committed.
FILE_INGESTED = ("keep", "move", "link")
# Only these leave the spool: a refused, unreadable or empty file stays for a person to see.
FILEABLE = ("ingested", "already_ingested")
EVIDENCE = "evidence"
UNDATED = "undated"  # the folder of a file with no event (every line quarantined)
_LOG_SUFFIXES = (".jsonl.gz", ".jsonl")


@dataclass
class Filed:
    """Where one spool file went: `action` is kept (still in the spool, as asked), moved,
    linked, duplicate (the evidence folder already held the same bytes: the spool copy was
    removed) or left (it stays in the spool; `note` says why)."""

    action: str
    now_at: Path
    note: str = ""
    problem: bool = False  # the setup refused the move: an input problem of the night


def evidence_dir(archive: Path, day: dt.date | None) -> Path:
    """ARCHIVE/evidence/DAY: the gaming day of the file's first event, beside the PDFs."""
    return archive / EVIDENCE / (f"{day:%Y-%m-%d}" if day else UNDATED)


def gaming_day_of(conf: PropertyConfig, zone: dt.tzinfo, ts: dt.datetime) -> dt.date:
    """The gaming day `ts` falls in (a night's 03:00 belongs to the day before)."""
    day = ts.astimezone(zone).date()
    while conf.gaming_day_window(day, zone)[0] > ts:
        day -= dt.timedelta(days=1)
    return day


def _candidates(name: str) -> Iterator[str]:
    """NAME, then NAME.2, NAME.3, ... before the log suffix (a.jsonl.gz, a.2.jsonl.gz)."""
    base, ext = name, ""
    for suffix in _LOG_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            base, ext = name[: -len(suffix)], suffix
            break
    yield name
    n = 2
    while True:
        yield f"{base}.{n}{ext}"
        n += 1


def file_ingested_to_evidence(
    con: duckdb.DuckDBPyConnection,
    files: list[FileResult],
    how: str,
    archive: Path,
    conf: PropertyConfig,
    zone: dt.tzinfo,
    say: Say,
) -> dict[Path, Filed]:
    """Move or hard-link each ingested (or already ingested) spool file into the evidence
    folder, so the spool, which every run reads and hashes whole, holds only what is new.

    Called after ingest returned, so every ingest it reports has committed. The `sources`
    manifest keeps the delivered path: a later file of that name with other content is still
    refused as altered (by its path, and by its streams' seqs), wherever this one went. An
    existing evidence file is never replaced: a name taken by other bytes gets a suffix, and
    the same bytes (by SHA-256) are not stored twice.
    """
    done: dict[Path, Filed] = {}
    for f in files:
        if how == "keep":
            done[f.path] = Filed("kept", f.path)
            continue
        if f.status not in FILEABLE:
            done[f.path] = Filed("kept", f.path, f"{f.status}: stays for a person to review")
            continue
        if f.waiting:  # still being written: its last line waits for its newline
            done[f.path] = Filed(
                "kept", f.path, f"its last line has no newline yet ({f.waiting} bytes): "
                "it stays until the file is complete",
            )
            continue
        row = db.one(
            con,
            "SELECT first_ts FROM sources WHERE sha256 = ? AND status = 'ingested' "
            "ORDER BY id LIMIT 1",
            [f.sha256],
        )
        day = gaming_day_of(conf, zone, row[0]) if row and row[0] else None
        try:
            filed = _file_one(f.path, f.sha256, evidence_dir(archive, day), how)
        except OSError as e:
            note = f"cannot {how} it into {evidence_dir(archive, day)} ({e.strerror or e})"
            filed = Filed("left", f.path, note, problem=True)
        if filed.action == "left":
            say(f"left {f.path} in the spool: {filed.note}")
        done[f.path] = filed
    return done


def _file_one(src: Path, sha: str, folder: Path, how: str) -> Filed:
    private_files()
    folder.mkdir(parents=True, exist_ok=True)
    for name in _candidates(src.name):
        dst = folder / name
        if dst.exists() or dst.is_symlink():
            if dst.is_file() and sha256_of(dst)[0] == sha:
                if sha256_of(src)[0] != sha:
                    return Filed("left", src, "its content changed after it was ingested")
                src.unlink()  # the evidence folder holds these bytes already
                return Filed("duplicate", dst, "the evidence folder already held this file")
            continue  # the name holds other bytes: never overwrite, take the next
        try:
            os.link(src, dst)  # fails if dst appeared meanwhile: never overwrites
        except FileExistsError:
            continue
        except OSError as e:
            if how == "link" or e.errno not in (errno.EXDEV, errno.EPERM):
                raise
            _copy_whole(src, dst)  # move across file systems, or a file another user owns
        if sha256_of(dst)[0] != sha:  # changed after its ingest: leave it to the next run
            dst.unlink()
            return Filed("left", src, "its content changed after it was ingested")
        src.unlink()
        with contextlib.suppress(OSError):  # a file another user owns keeps its mode
            os.chmod(dst, os.stat(dst).st_mode & 0o700)  # evidence: its owner's alone
        return Filed("linked" if how == "link" else "moved", dst)
    raise AssertionError("unreachable")  # _candidates never ends


def _copy_whole(src: Path, dst: Path) -> None:
    """Copy to `.NAME.partial` (swept like a render's), flush it to disk, then link it to its
    name, so a copy cut short never carries the final name and never replaces one."""
    tmp = dst.with_name(f".{dst.name}.partial")
    shutil.copyfile(src, tmp)
    try:
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
        os.link(tmp, dst)
    finally:
        tmp.unlink()
