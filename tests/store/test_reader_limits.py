"""The owner's socket under readers that misbehave (issue 31, docs/database.md "Limits"): a
header announcing 400 MB is refused before a byte of it is held; a message that stops
half-way, and a session that says nothing, are ended in time; 64 greeted readers that sit
idle do not keep every other command out.

The owner is this test process (db.connect read-write serves the database from a thread);
the hostile readers are raw sockets; the commands that must still be served run as
`bacc-audit` processes, or as RemoteConnections through shared.reach.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.sample import CONFIG, built

from auditor.store import db, serving, shared, wire

BIN = Path(sys.executable).parent / "bacc-audit"


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built(tmp_path_factory, tmp_path_factory.mktemp("limits") / "night.duckdb",
                 with_mb01=True)


@pytest.fixture
def owned(night: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of the night, owned (and served) by this process while the test runs."""
    path = tmp_path / "owned.duckdb"
    path.write_bytes(night.read_bytes())
    con = db.connect(path)
    try:
        yield path
    finally:
        con.close()


def socket_of(path: Path) -> str:
    info = wire.read_owner(path.resolve())
    assert info is not None
    return info.socket


def raw(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(socket_of(path))
    return s


def greeted(path: Path) -> socket.socket:
    """A reader that says hello as a real one does, then nothing."""
    s = raw(path)
    wire.send(s, {"op": "hello", "protocol": wire.PROTOCOL, "db": str(path.resolve()),
                  "read_only": True, "pid": 1})
    reply, _ = wire.recv(s)
    assert reply["ok"], reply
    return s


def closed_by_owner(s: socket.socket, within: float) -> bool:
    """Whether the owner closed the connection (EOF or reset) within `within` seconds."""
    s.settimeout(within)
    try:
        return s.recv(1 << 16) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def findings_through_the_owner(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BIN, "findings", "--db", path, "--config", CONFIG, "--format",
                           "jsonl"], capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_a_header_announcing_400_mb_is_refused_before_it_is_held(owned: Path) -> None:
    before = rss_mb()
    # Before the greeting, and after it: a length of 400 MB, then nothing.
    first = raw(owned)
    first.sendall(struct.pack("!I", 400_000_000))
    second = greeted(owned)
    second.sendall(struct.pack("!I", 400_000_000))
    assert closed_by_owner(first, 5) and closed_by_owner(second, 5)  # it waited, no timeout
    # A header that fits, announcing a 400 MB payload (a request carries none).
    third = greeted(owned)
    header = json.dumps({"op": "execute", "sql": "SELECT 1", "payload": 400_000_000}).encode()
    third.sendall(struct.pack("!I", len(header)) + header)
    assert closed_by_owner(third, 5)
    assert rss_mb() - before < 100, (before, rss_mb())  # it held 400 MB (219 -> 628 MB)
    r = findings_through_the_owner(owned)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 22, r.stderr


@pytest.mark.slow
def test_a_message_that_stops_half_way_and_a_silent_session_are_ended(
    owned: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wire, "MESSAGE_SECONDS", 0.5)
    monkeypatch.setattr(wire, "IDLE_SECONDS", 1.0)
    half = greeted(owned)
    half.sendall(struct.pack("!I", 1000) + b'{"op": "exec')  # and no more
    assert closed_by_owner(half, 5)
    # Connected and never greeted: let go after HELLO_SECONDS, as before.
    # A reader through the owner that then says nothing for IDLE_SECONDS: ended, and told.
    reader = shared.reach(owned, read_only=True)
    assert reader is not None
    assert reader.execute("SELECT count(*) FROM findings").fetchall() == [(22,)]
    time.sleep(1.6)
    with pytest.raises(shared.OwnerGone) as gone:
        reader.execute("SELECT count(*) FROM findings")
    assert str(gone.value) == (
        f"{owned}: database busy: {reader.owner.describe()}, which served it to this command, "
        "ended its session (it sent nothing for 1 s); try again")


@pytest.mark.slow
def test_64_idle_readers_do_not_keep_every_other_command_out(owned: Path) -> None:
    idle = [greeted(owned) for _ in range(wire.MAX_SESSIONS)]
    try:
        time.sleep(1.2)  # idle past EVICT_IDLE_SECONDS
        for _ in range(3):  # every other reader exited 4, for as long as they stayed
            r = findings_through_the_owner(owned)
            assert r.returncode == 0, r.stderr
            assert len(r.stdout.splitlines()) == 22
        # The readers whose places were given away are told so on their next request.
        told = served = 0
        for s in idle:
            with contextlib.suppress(OSError):  # an ended one is closed: its notice waits
                wire.send(s, {"op": "execute", "sql": "SELECT 1", "params": None})
            s.settimeout(5)
            try:
                header, _ = wire.recv(s)
            except (OSError, ConnectionError):
                continue
            if header.get("type") == "Ended":
                assert "idle while 64 other commands were served" in header["message"]
                told += 1
            else:
                assert header["ok"], header
                served += 1
        # The commands took the places of the idle longest (one or more each), then used the
        # places they freed; every other idle reader is still served.
        assert told >= 1 and told + served == wire.MAX_SESSIONS, (told, served)
    finally:
        for s in idle:
            s.close()


@pytest.mark.slow
def test_readers_at_work_keep_their_places(
    owned: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a session idle for EVICT_IDLE_SECONDS gives its place: while all 64 are at work,
    a newcomer hears that every place is taken (exit 4, "try again in a moment"); once they
    idle, it takes the place of the idle longest, and only that one. (Opening 64 sessions
    takes longer than a second on a busy machine: the idle time is lengthened meanwhile.)"""
    monkeypatch.setattr(serving, "EVICT_IDLE_SECONDS", 60.0)
    readers = [shared.reach(owned, read_only=True) for _ in range(wire.MAX_SESSIONS)]
    try:
        assert all(r is not None for r in readers)
        with pytest.raises(shared.OwnerRefused, match="is serving it to 64 other commands"):
            shared.reach(owned, read_only=True)
        monkeypatch.setattr(serving, "EVICT_IDLE_SECONDS", 0.5)
        time.sleep(0.7)
        newcomer = shared.reach(owned, read_only=True)
        assert newcomer is not None
        assert newcomer.execute("SELECT count(*) FROM findings").fetchall() == [(22,)]
        gone = []
        for i, reader in enumerate(readers):
            assert reader is not None
            try:
                assert reader.execute("SELECT count(*) FROM findings").fetchall() == [(22,)]
            except shared.OwnerGone as e:
                assert "idle while 64 other commands were served" in str(e)
                gone.append(i)
        assert gone == [0]  # the first, idle longest
        newcomer.close()
    finally:
        for reader in readers:
            if reader is not None:
                reader.close()
