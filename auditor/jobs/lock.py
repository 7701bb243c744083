"""The nightly lock: one nightly run at a time on a database, through a lock file beside it held
with flock(2), which the kernel releases when the process dies however it dies; and who holds
it (for messages and `bacc-audit runs`)."""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from auditor.errors import EXIT_LOCKED, UserError, private_files


class NightlyLocked(UserError):
    """Another nightly run holds the lock: not an error in the data, so its own exit code,
    which a timer or cron wrapper can treat as "already running"."""

    exit_code = EXIT_LOCKED


def lock_path(db_path: Path) -> Path:
    """`<db>.lock`, beside the database file it guards, symlinks followed: every name of the
    same database (a symlinked file or folder) must take the same lock, or two runs through
    two names would run at once."""
    try:
        real = db_path.resolve()
    except (OSError, RuntimeError) as e:  # a symlink loop: RuntimeError before Python 3.13
        raise UserError(f"{db_path}: cannot follow the path to the database ({e})") from None
    return real.with_name(real.name + ".lock")


@dataclass(frozen=True)
class LockInfo:
    """Who holds the nightly lock, as it wrote into the lock file (for messages and `runs`)."""

    pid: int | None
    run_id: int | None
    since: str | None

    def describe(self) -> str:
        who = f"process {self.pid}" if self.pid else "another process"
        run = f"nightly run {self.run_id}" if self.run_id else "a nightly run"
        when = f", since {self.since}" if self.since else ""
        return f"{run} ({who}{when})"


def _read_info(fd: int) -> LockInfo:
    try:
        data = json.loads(os.pread(fd, 4096, 0).split(b"\n")[0] or b"{}")
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    return LockInfo(data.get("pid"), data.get("run_id"), data.get("since"))


class NightlyLock:
    """The held lock; `note_run` records the run id in the file, so `bacc-audit runs` can tell
    the live run from ones killed earlier."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.since = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        self._write(None)

    def _write(self, run_id: int | None) -> None:
        data = json.dumps({"pid": os.getpid(), "run_id": run_id, "since": self.since}).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data + b"\n", 0)

    def note_run(self, run_id: int) -> None:
        self._write(run_id)


@contextlib.contextmanager
def nightly_lock(db_path: Path) -> Iterator[NightlyLock]:
    """Hold `<db>.lock` for the block, or raise NightlyLocked at once (never wait: a second
    run started by a timer while the first is still going should step aside, not queue).

    The file is never deleted: removing a flock'd file lets a third process lock a new file
    of the same name while the second still holds the old one.
    """
    path = lock_path(db_path)
    try:
        private_files()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        raise UserError(f"{path}: cannot create the nightly lock file ({e.strerror})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_info(fd)
            raise NightlyLocked(
                f"{db_path}: another nightly run holds the lock: {holder.describe()}; "
                f"this run did nothing (lock file {path})"
            ) from None
        yield NightlyLock(path, fd)
    finally:
        os.close(fd)  # releases the lock


def lock_holder(db_path: Path) -> LockInfo | None:
    """Who holds the nightly lock of `db_path` now, or None when nobody does."""
    path = lock_path(db_path)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_info(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
