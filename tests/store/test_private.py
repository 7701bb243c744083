"""Private by default: the audit database and its .wal are created readable by their owner
only, whatever the umask (a stricter one stays), another local user cannot read them, and
`doctor` fails a database others can read, saying the chmod."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.store import db, runs

READ_AS_NOBODY = """
import os, sys
os.setgroups([]); os.setgid({gid}); os.setuid({uid})
try:
    open(sys.argv[1], 'rb').read(16)
except PermissionError:
    sys.exit(13)
sys.exit(0)
"""


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder any local user may enter (as /var/lib/bacc-audit is): only the files'
    own modes keep them out."""
    folder = Path(tempfile.mkdtemp(prefix="bacc-private-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_the_database_and_its_wal_are_created_0600_under_a_loose_umask(
    shared_folder: Path,
) -> None:
    old = os.umask(0o022)
    try:
        con = db.connect(shared_folder / "a.duckdb")
        with runs.recorded(con, "ingest", {}):
            pass
        wal = shared_folder / "a.duckdb.wal"
        assert mode(shared_folder / "a.duckdb") == 0o600
        if wal.exists():
            assert mode(wal) == 0o600
        con.close()
        assert os.umask(0o022) & 0o077 == 0o077  # the process keeps the stricter umask
    finally:
        os.umask(old)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_another_user_cannot_read_the_database(shared_folder: Path) -> None:
    path = shared_folder / "a.duckdb"
    nobody = pwd.getpwnam("nobody")
    code = READ_AS_NOBODY.format(uid=nobody.pw_uid, gid=nobody.pw_gid)

    def read_as_nobody(p: Path) -> int:
        return subprocess.run([sys.executable, "-c", code, str(p)]).returncode

    con = db.connect(path)
    try:
        with runs.recorded(con, "ingest", {}):  # a write not yet checkpointed: in the .wal
            pass
        wal = shared_folder / "a.duckdb.wal"
        assert wal.exists()
        assert read_as_nobody(wal) == 13  # what a copy of a running `watch`'s .wal gave away
    finally:
        con.close()
    assert read_as_nobody(path) == 13  # refused
    path.chmod(0o644)  # as bacc-audit used to leave it: the same test reads it
    assert read_as_nobody(path) == 0


def test_doctor_fails_a_database_others_can_read_and_says_the_chmod(
    shared_folder: Path, bacc_audit: Any
) -> None:
    path = shared_folder / "a.duckdb"
    con = db.connect(path)
    with runs.recorded(con, "ingest", {}):
        pass
    con.close()
    path.chmod(0o644)
    r = bacc_audit("doctor", "--db", path)
    assert r.code == 2, r
    assert (f"FAIL {path}: readable by other users (mode 0644); it holds every finding and "
            "acknowledgement") in r.out
    assert f"chmod 600 {path}" in r.out
    path.chmod(0o600)
    r = bacc_audit("doctor", "--db", path)
    assert f"ok   {path}: private to its owner (mode 0600)" in r.out
    assert "ok   ledger verified: every record as sealed" in r.out
