"""What the owner of the audit database and its readers say to each other (store/serving.py,
store/shared.py, docs/database.md): where the owner is (`<db>.owner`), and the messages.

A message is a 4-byte length and a JSON header, then, when the header says so, that many bytes
of an Arrow IPC stream (a result's rows). Query parameters travel as JSON, tagged where JSON
cannot say them (`pack`); errors as their class name and message (`error_header`, `raised`).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import socket
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

PROTOCOL = 1
OWNER_SUFFIX = ".owner"  # <db>.owner: who serves the database and where its socket is
HELLO_SECONDS = 5.0  # a socket that does not answer the greeting by then serves nobody
MAX_SESSIONS = 64
# What the owner takes from a reader, whoever it is (docs/database.md, "Limits"): a request
# is a header only (SQL and its parameters, never a payload), of at most REQUEST_BYTES, and
# once its first byte is in the rest comes within MESSAGE_SECONDS; a session that sends
# nothing for IDLE_SECONDS is ended. What arrives is held as it arrives, never what a length
# announces: a header announcing 400 MB is refused before a byte of it is read.
REQUEST_BYTES = 4 << 20
MESSAGE_SECONDS = 30.0
IDLE_SECONDS = 600.0
_LENGTH = struct.Struct("!I")
_MAX_HEADER = 1 << 28  # a header this long is not one of ours (the owner's answers)
_PIECE = 1 << 20
# A setting, which the owner runs at SESSION scope and the reader repeats locally.
SETTING = re.compile(r"\s*(SET|RESET)\s+(\w+)", re.IGNORECASE)


# --- what travels: headers, parameters, results ---------------------------------------------


def send(sock: socket.socket, header: dict[str, Any], payload: pa.Buffer | None = None) -> None:
    if payload is not None:
        header = header | {"payload": payload.size}
    data = json.dumps(header, separators=(",", ":")).encode()
    sock.sendall(_LENGTH.pack(len(data)) + data)
    if payload is not None:
        sock.sendall(memoryview(payload))


def _recv_exact(
    sock: socket.socket, n: int, deadline: float | None = None, trusted: bool = True
) -> bytearray:
    """`n` bytes; by `deadline` (time.monotonic) when given, else as the socket's own
    timeout allows. From a side not `trusted` they are held as they arrive, so a length
    announced and never sent takes no memory; from the owner (an answer of many rows) they
    are read into one buffer of the size announced."""
    buf = bytearray(n) if trusted else bytearray()
    view = memoryview(buf) if trusted else None
    got = 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("a message did not arrive whole in time")
            sock.settimeout(left)
        if view is not None:
            k = sock.recv_into(view[got:], min(n - got, _PIECE))
        else:
            piece = sock.recv(min(n - got, _PIECE))
            buf += piece
            k = len(piece)
        if k == 0:
            raise ConnectionError("the other side closed the connection")
        got += k
    return buf


def recv(
    sock: socket.socket, *, limit: int | None = None, within: float | None = None,
) -> tuple[dict[str, Any], bytearray | None]:
    """One message. `limit`: the most bytes it may hold, header and payload (a reader's
    request to the owner: REQUEST_BYTES, and no payload); `within`: seconds for the rest of
    the message once its length is in. The wait for the length is the socket's timeout."""
    (n,) = _LENGTH.unpack(_recv_exact(sock, _LENGTH.size))
    most = _MAX_HEADER if limit is None else min(limit, _MAX_HEADER)
    if n > most:
        raise ConnectionError(f"a message header of {n} bytes (at most {most} taken)")
    deadline = None if within is None else time.monotonic() + within
    trusted = limit is None
    header = json.loads(_recv_exact(sock, n, deadline, trusted))
    if not isinstance(header, dict):
        raise ConnectionError("a message header that is not an object")
    size = header.get("payload")
    if size is None:
        return header, None
    if not isinstance(size, int) or size < 0 or (limit is not None and n + size > limit):
        raise ConnectionError(f"a payload of {size!r} bytes")
    return header, _recv_exact(sock, size, deadline, trusted)


def arrow_bytes(table: pa.Table) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def arrow_table(data: bytearray) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def pack(value: Any) -> Any:
    """A query parameter as JSON: what JSON cannot say (times, decimals, bytes, dicts) is
    tagged, so the owner binds the same Python value the reader gave."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [pack(v) for v in value]
    if isinstance(value, dict):
        return {"$": "dict", "v": {str(k): pack(v) for k, v in value.items()}}
    if isinstance(value, dt.datetime):
        return {"$": "datetime", "v": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$": "date", "v": value.isoformat()}
    if isinstance(value, dt.time):
        return {"$": "time", "v": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"$": "timedelta", "v": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, Decimal):
        return {"$": "decimal", "v": str(value)}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$": "bytes", "v": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, uuid.UUID):
        return {"$": "uuid", "v": str(value)}
    item = getattr(value, "item", None)  # a numpy scalar
    if callable(item):
        return pack(item())
    raise duckdb.InvalidInputException(
        f"a query parameter of type {type(value).__name__} cannot be sent to the process "
        "that serves the database"
    )


_UNPACK: dict[str, Callable[[Any], Any]] = {
    "dict": lambda v: {k: unpack(x) for k, x in v.items()},
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "timedelta": lambda v: dt.timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
    "decimal": Decimal,
    "bytes": base64.b64decode,
    "uuid": uuid.UUID,
}


def unpack(value: Any) -> Any:
    if isinstance(value, list):
        return [unpack(v) for v in value]
    if isinstance(value, dict):
        return _UNPACK[value["$"]](value["v"])
    return value


# The exceptions a reader gets back as themselves; anything else becomes duckdb.Error.
_BUILTIN_ERRORS: dict[str, type[Exception]] = {
    e.__name__: e
    for e in (TypeError, ValueError, RuntimeError, NotImplementedError, KeyError, OverflowError)
}


def error_header(e: BaseException) -> dict[str, Any]:
    return {"ok": False, "type": type(e).__name__, "message": str(e), "conflict": is_conflict(e)}


def is_conflict(e: BaseException) -> bool:
    """DuckDB's write-write conflicts ("Conflict on update!", "Catalog write-write
    conflict ..."): another transaction changed the same rows and has not committed."""
    return isinstance(e, duckdb.TransactionException) and "conflict" in str(e).lower()


def raised(header: dict[str, Any]) -> Exception:
    """The error the owner reported, as the class it had: callers' `except duckdb.X` (and
    db.interrupted's RuntimeError) work as with a connection of their own."""
    name, message = str(header.get("type")), str(header.get("message"))
    cls = getattr(duckdb, name, None)
    if isinstance(cls, type) and issubclass(cls, duckdb.Error):
        return cls(message)
    if name in _BUILTIN_ERRORS:
        return _BUILTIN_ERRORS[name](message)
    return duckdb.Error(f"{name}: {message}")


def peer_uid(client: socket.socket) -> int | None:
    """The user of the process at the other end (Linux); None where the system cannot say,
    and the socket's 0600 mode is then the only gate."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    try:
        _, uid, _ = struct.unpack("3i", client.getsockopt(socket.SOL_SOCKET, opt, 12))
    except OSError:
        return None
    return int(uid)


# --- where the owner is ---------------------------------------------------------------------


def real_path(path: Path) -> Path | None:
    """The database file with symlinks followed: every name of one database reaches the same
    owner (as the nightly lock does). None for a path that cannot be followed."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop: RuntimeError before Python 3.13
        return None


def owner_file(real: Path) -> Path:
    return real.with_name(real.name + OWNER_SUFFIX)


@dataclass(frozen=True)
class OwnerInfo:
    """The owner as it describes itself (the owner file, and its greeting)."""

    pid: int
    command: str
    since: str
    socket: str
    version: str
    first_run: int | None = None  # runs with this id or above began while it owned the file

    def describe(self) -> str:
        return f"{self.command} (PID {self.pid})"


def read_owner(real: Path) -> OwnerInfo | None:
    """What `<db>.owner` says, or None when there is none (or it is not one of ours)."""
    try:
        data = json.loads(owner_file(real).read_text(encoding="utf-8"))
        if data.get("protocol") != PROTOCOL:
            return None
        return OwnerInfo(
            int(data["pid"]), str(data["command"]), str(data["since"]),
            str(data["socket"]), str(data.get("version", "")),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
