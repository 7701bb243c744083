"""One writer, many readers: the process that opens the audit database for writing serves it
to the other local processes of its user, over a Unix socket beside the file.

DuckDB lets one process open a database file read-write, and then no other process can open
it at all, not even to read. So whoever opens the database read-write through `db.connect`
(the *owner*) also listens on a socket, and `db.connect` in another process that meets the
lock reaches the database through the owner instead: a `RemoteConnection`, which answers like
the DuckDB connection the commands use. docs/database.md describes the model; this module is
its mechanics:

- the owner's side: `serve` starts a thread that accepts readers, one thread and one DuckDB
  cursor per reader (a cursor is a connection of its own, so readers run beside the owner's
  work and MVCC keeps them apart); `OwnedConnection` is the owner's connection, which stops
  serving and removes the socket before it closes;
- the reader's side: `reach` and `RemoteConnection`;
- between them, messages: a 4-byte length and a JSON header, then, when the header says so,
  that many bytes of an Arrow IPC stream (a result's rows). A result is loaded into a small
  in-memory DuckDB on the reader's side and read from there, so fetchall, fetchone,
  description, fetchnumpy, df, to_arrow_table are DuckDB's own, with DuckDB's own types.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import logging
import os
import re
import secrets
import selectors
import socket
import stat
import struct
import sys
import tempfile
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import duckdb
import pyarrow as pa

from auditor import __version__
from auditor.errors import DatabaseBusy

log = logging.getLogger(__name__)

PROTOCOL = 1
OWNER_SUFFIX = ".owner"  # <db>.owner: who serves the database and where its socket is
SOCKET_SUFFIX = ".sock"
# AF_UNIX paths: 108 bytes on Linux with the final NUL, 104 on the BSDs and macOS.
SOCKET_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
HELLO_SECONDS = 5.0  # a socket that does not answer the greeting by then serves nobody
CONFLICT_RETRIES = 5  # 50 ms, then doubling: about 1.5 s in all
MAX_SESSIONS = 64
_LENGTH = struct.Struct("!I")
_MAX_HEADER = 1 << 28  # a header this long is not one of ours


# --- what travels: headers, parameters, results ---------------------------------------------


def _send(sock: socket.socket, header: dict[str, Any], payload: pa.Buffer | None = None) -> None:
    if payload is not None:
        header = header | {"payload": payload.size}
    data = json.dumps(header, separators=(",", ":")).encode()
    sock.sendall(_LENGTH.pack(len(data)) + data)
    if payload is not None:
        sock.sendall(memoryview(payload))


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], min(n - got, 1 << 20))
        if k == 0:
            raise ConnectionError("the other side closed the connection")
        got += k
    return buf


def _recv(sock: socket.socket) -> tuple[dict[str, Any], bytearray | None]:
    (n,) = _LENGTH.unpack(_recv_exact(sock, _LENGTH.size))
    if n > _MAX_HEADER:
        raise ConnectionError(f"a message header of {n} bytes")
    header = json.loads(_recv_exact(sock, n))
    if not isinstance(header, dict):
        raise ConnectionError("a message header that is not an object")
    size = header.get("payload")
    return header, _recv_exact(sock, size) if isinstance(size, int) else None


def _arrow_bytes(table: pa.Table) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _arrow_table(data: bytearray) -> pa.Table:
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


def _error_header(e: BaseException) -> dict[str, Any]:
    return {"ok": False, "type": type(e).__name__, "message": str(e), "conflict": _conflict(e)}


def _conflict(e: BaseException) -> bool:
    """DuckDB's write-write conflicts ("Conflict on update!", "Catalog write-write
    conflict ..."): another transaction changed the same rows and has not committed."""
    return isinstance(e, duckdb.TransactionException) and "conflict" in str(e).lower()


def _raised(header: dict[str, Any]) -> Exception:
    """The error the owner reported, as the class it had: callers' `except duckdb.X` (and
    db.interrupted's RuntimeError) work as with a connection of their own."""
    name, message = str(header.get("type")), str(header.get("message"))
    cls = getattr(duckdb, name, None)
    if isinstance(cls, type) and issubclass(cls, duckdb.Error):
        return cls(message)
    if name in _BUILTIN_ERRORS:
        return _BUILTIN_ERRORS[name](message)
    return duckdb.Error(f"{name}: {message}")


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


def _fits(path: Path) -> bool:
    # the socket is bound under a name 9 bytes longer, then renamed (see _bind)
    return len(os.fsencode(path)) + 9 <= SOCKET_PATH_MAX


def _runtime_dir() -> Path | None:
    """A folder only this user can enter, for a socket whose path beside the database would
    be too long for AF_UNIX: $XDG_RUNTIME_DIR/bacc-audit, else /tmp/bacc-audit-UID."""
    places = []
    if os.environ.get("XDG_RUNTIME_DIR"):
        places.append(Path(os.environ["XDG_RUNTIME_DIR"]) / "bacc-audit")
    places.append(Path(tempfile.gettempdir()) / f"bacc-audit-{os.getuid()}")
    for folder in places:
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
            st = os.lstat(folder)
        except OSError:
            continue
        # someone else's folder (made first in /tmp, or a symlink) would let them in
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077:
            return folder
    return None


def _socket_places(real: Path) -> Iterator[Path]:
    beside = real.with_name(real.name + SOCKET_SUFFIX)
    if _fits(beside):
        yield beside
    folder = _runtime_dir()
    if folder is not None:
        name = hashlib.sha256(os.fsencode(real)).hexdigest()[:32]
        if _fits(folder / f"{name}.sock"):
            yield folder / f"{name}.sock"


def _bind(final: Path) -> socket.socket:
    """A listening socket at `final`, mode 0600 from the moment it has that name: bound under
    a temporary name, chmod-ed, then renamed over whatever was there. A socket already there
    is a dead owner's (this process holds the write lock, so no other owner lives): the
    rename replaces it. Anything else there is not ours to remove."""
    try:
        st = os.lstat(final)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise FileExistsError(f"{final} exists and is not a socket")
    temp = final.with_name(f"{final.name}.{secrets.token_hex(4)}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(temp))
        os.chmod(temp, 0o600)
        os.replace(temp, final)
        sock.listen(16)
    except BaseException:
        sock.close()
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return sock


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


def _command() -> str:
    """This process as a person would name it: `bacc-audit watch`, `bacc-audit nightly`."""
    argv = sys.argv or [""]
    name = Path(argv[0]).name if argv[0] not in ("", "-c", "-m") else "python"
    words = [name, *(a for a in argv[1:2] if re.fullmatch(r"[a-z][a-z-]*", a))]
    return " ".join(words)[:80]


# --- the owner's side -----------------------------------------------------------------------

_SHARES: dict[str, _Share] = {}  # resolved database path -> the share this process runs
# Reentrant: a connection dropped without close() is released by its finalizer, which the
# garbage collector may run in a thread that already holds one of these.
_SHARES_LOCK = threading.RLock()
_ARROW_LOCK = threading.Lock()
# Words of the statements the owner looks at before it runs a reader's query (_special).
_SPECIAL_WORDS = re.compile(
    r"\b(begin|start|commit|end|rollback|abort|set|reset|pragma)\b", re.IGNORECASE
)
_SETTING = re.compile(r"\s*(SET|RESET)\s+(\w+)", re.IGNORECASE)


class _Share:
    """Serving one database file from this process: the listening socket and its thread,
    the owner file, and the readers' sessions.

    Readers' cursors come from `factory`, a cursor of the owner's connection made when
    serving starts, so the serving threads never touch the connection the owner works on.
    """

    def __init__(self, real: Path, con: duckdb.DuckDBPyConnection) -> None:
        self.real = real
        self.cons = [con]
        self.factory = con.cursor()
        self.factory_of = con  # closing that connection closes the factory and its cursors
        self.pid = os.getpid()
        self.lock = threading.RLock()
        self.sessions: set[_Session] = set()
        self.stopping = False
        self.listener: socket.socket | None = None
        self.socket_path: Path | None = None
        self.socket_ino = 0
        self.owner_bytes = b""
        self.wake_r, self.wake_w = os.pipe()
        self.thread = threading.Thread(
            target=self._accept_loop, name=f"bacc-audit serves {real.name}", daemon=True
        )
        try:
            row = self.factory.execute("SELECT coalesce(max(id), 0) + 1 FROM runs").fetchall()
            self.first_run: int | None = int(row[0][0])
        except duckdb.Error:
            self.first_run = None
        self.info = OwnerInfo(
            self.pid, _command(), dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "",
            __version__, self.first_run,
        )

    def start(self) -> None:
        """Listen and say where; any OSError means this database is not served (its readers
        then meet "database busy", as before sharing existed), never a failed writer."""
        problems = []
        for place in _socket_places(self.real):
            try:
                self.listener = _bind(place)
            except OSError as e:
                problems.append(e)
                continue
            self.socket_path = place
            self.socket_ino = os.stat(place).st_ino
            break
        if self.listener is None or self.socket_path is None:
            raise problems[0] if problems else OSError("no place for the socket")
        self.info = dataclasses.replace(self.info, socket=str(self.socket_path))
        record = {"protocol": PROTOCOL, "db": str(self.real), **vars(self.info)}
        self.owner_bytes = (json.dumps(record, indent=1) + "\n").encode()
        target = owner_file(self.real)
        temp = target.with_name(f"{target.name}.{secrets.token_hex(4)}")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(self.owner_bytes)
            os.replace(temp, target)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            self._remove_files()
            raise
        self.thread.start()

    # -- accepting ------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        try:
            self._accept()
        except (OSError, ValueError) as e:  # the owner closed the socket under a late select
            log.debug("%s: serving ended: %s", self.real, e)

    def _accept(self) -> None:
        assert self.listener is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.listener, selectors.EVENT_READ)
            sel.register(self.wake_r, selectors.EVENT_READ)
            while not self.stopping:
                ready = {key.fileobj for key, _ in sel.select()}
                if self.wake_r in ready or self.stopping:
                    break
                try:
                    client, _ = self.listener.accept()
                except OSError:
                    continue
                self._admit(client)

    def _admit(self, client: socket.socket) -> None:
        with self.lock:
            refusal = None
            uid = _peer_uid(client)
            if uid is not None and uid != os.getuid():
                refusal = {"type": "Refused", "message": f"uid {uid} is not this owner's"}
            elif len(self.sessions) >= MAX_SESSIONS:
                refusal = {"type": "Full", "message": f"{MAX_SESSIONS} readers already"}
            elif not self.stopping:
                session = _Session(self, client)
                self.sessions.add(session)
                session.thread.start()
                return
        if refusal is None:  # closing
            client.close()
            return
        threading.Thread(target=self._refuse, args=(client, refusal), daemon=True).start()

    def _refuse(self, client: socket.socket, refusal: dict[str, str]) -> None:
        """Say no, after reading the greeting: a socket closed with unread data resets the
        connection, and the reader would get no sentence, only "nobody answered"."""
        try:
            client.settimeout(1.0)
            _recv(client)
            _send(client, {"ok": False, **refusal, "owner": vars(self.info)})
        except (OSError, ConnectionError, ValueError):
            pass
        finally:
            client.close()

    def new_cursor(self) -> duckdb.DuckDBPyConnection:
        with self.lock:
            if self.stopping:
                raise duckdb.ConnectionException("the owner is closing the database")
            return self.factory.cursor()

    def forget(self, session: _Session) -> None:
        with self.lock:
            self.sessions.discard(session)

    # -- ending ---------------------------------------------------------------------------
    def add(self, con: duckdb.DuckDBPyConnection) -> None:
        """Another read-write connection of this process to the same file (DuckDB shares
        one database between them): serving goes on until the last one closes."""
        with self.lock:
            self.cons.append(con)

    def release(self, con: duckdb.DuckDBPyConnection) -> None:
        """One owner connection closes (or was dropped). The last one stops serving; another
        one first moves the readers' cursor factory off it, since closing a connection
        closes every cursor made from it (readers of the moment are cut off)."""
        with _SHARES_LOCK:
            with self.lock:
                if con in self.cons:
                    self.cons.remove(con)
                remaining = list(self.cons)
            if not remaining:
                self.stop()
                if _SHARES.get(str(self.real)) is self:
                    del _SHARES[str(self.real)]
                return
            if con is not self.factory_of:
                return
            self._end_sessions()
            with self.lock:
                old, self.factory = self.factory, remaining[0].cursor()
                self.factory_of = remaining[0]
            with contextlib.suppress(duckdb.Error):
                old.close()

    def stop(self) -> None:
        """Stop serving: no new readers, the readers of the moment interrupted and cut off,
        the socket and the owner file removed (only if still ours)."""
        with self.lock:
            if self.stopping:
                return
            self.stopping = True
        with contextlib.suppress(OSError):
            os.write(self.wake_w, b"x")
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout=5)
        for fd in (self.wake_r, self.wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.listener is not None:
            self.listener.close()
        self._end_sessions()
        self._remove_files()
        with contextlib.suppress(duckdb.Error):
            self.factory.close()

    def _end_sessions(self) -> None:
        with self.lock:
            sessions = list(self.sessions)
        for s in sessions:
            s.abort()
        for s in sessions:
            if s.thread is not threading.current_thread():
                s.thread.join(timeout=5)

    def _remove_files(self) -> None:
        if os.getpid() != self.pid:  # a forked child: the files are its parent's
            return
        with contextlib.suppress(OSError):
            if self.socket_path and os.stat(self.socket_path).st_ino == self.socket_ino:
                os.unlink(self.socket_path)
        target = owner_file(self.real)
        with contextlib.suppress(OSError):
            if self.owner_bytes and target.read_bytes() == self.owner_bytes:
                os.unlink(target)


def _peer_uid(client: socket.socket) -> int | None:
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


def _special(cur: duckdb.DuckDBPyConnection, sql: str) -> tuple[str, str]:
    """What the owner must know of a reader's query before running it: ("TRANSACTION",
    sql) for BEGIN, COMMIT and the like (a reader's snapshot ignores them, a writer's
    transaction is tracked), ("SET", the statement at SESSION scope) for a setting, ("", sql)
    for the rest.

    A plain SET of some DuckDB settings (threads, memory_limit, arrow_...) is GLOBAL: from
    a reader it would change the owner's own work. So a reader's SET or RESET runs as SET
    SESSION (DuckDB refuses it for a setting that is global only), and SET GLOBAL is refused.
    These statements go alone, one per call, so that none hides in a script.
    """
    if not _SPECIAL_WORDS.search(sql):
        return "", sql
    try:
        statements = cur.extract_statements(sql)
    except duckdb.Error:
        return "", sql  # running it reports the mistake
    kinds = [s.type.name for s in statements]
    if not {"TRANSACTION", "SET"} & set(kinds):
        return "", sql
    if len(statements) > 1:
        raise duckdb.InvalidInputException(
            "through the process that serves the database, transaction statements and "
            "settings go alone, one per call"
        )
    text = statements[0].query.strip().rstrip(";")
    if kinds[0] == "TRANSACTION":
        return "TRANSACTION", text
    m = _SETTING.match(text)
    scope = m.group(2).upper() if m else ""
    if not m or scope == "GLOBAL":
        raise duckdb.InvalidInputException(
            "through the process that serves the database, settings are changed with "
            "SET SESSION (they would be its own too otherwise)"
        )
    if scope in ("SESSION", "LOCAL", "VARIABLE"):
        return "SET", text
    return "SET", f"{text[:m.start(2)]}SESSION {text[m.start(2):]}"


_SUCCESS = pa.table({"Success": pa.array([], pa.bool_())})  # what DuckDB gives for BEGIN


class _Session:
    """One reader: its socket, its thread, and its DuckDB cursor in the owner's database.

    A reader that only reads (read_only) sees one snapshot for its whole session: a read-only
    transaction, begun at once, so every query of a report sees the same moment however
    often the owner commits meanwhile; BEGIN, COMMIT and ROLLBACK from it change nothing.
    A reader that writes (an `ack`, a `notice add`) runs in autocommit as a connection of
    its own would, and a statement that meets a write-write conflict is tried again.
    """

    def __init__(self, share: _Share, sock: socket.socket) -> None:
        self.share = share
        self.sock = sock
        self.cur: duckdb.DuckDBPyConnection | None = None
        self.read_only = True
        self.in_transaction = False
        self.busy = False
        self.tries = 1  # how often the last failed statement was tried
        self.thread = threading.Thread(target=self._run, name="bacc-audit reader", daemon=True)

    def abort(self) -> None:
        cur = self.cur
        if cur is not None and self.busy:
            with contextlib.suppress(duckdb.Error):
                cur.interrupt()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def _run(self) -> None:
        try:
            self.sock.settimeout(HELLO_SECONDS)
            if not self._greet():
                return
            self.sock.settimeout(None)
            while True:
                header, payload = _recv(self.sock)
                self.busy = True
                try:
                    reply, table = self._handle(header, payload)
                except Exception as e:  # the reader's error, told to the reader
                    reply, table = _error_header(e) | {"tries": self.tries}, None
                    self.tries = 1
                    self._after_error()
                finally:
                    self.busy = False
                _send(self.sock, reply, None if table is None else _arrow_bytes(table))
        except (OSError, ConnectionError, ValueError, duckdb.Error):
            pass  # the reader went away, or the owner is closing
        except Exception:  # never a traceback on the owner's terminal for a reader's trouble
            log.debug("a reader's session ended on an error", exc_info=True)
        finally:
            if self.cur is not None:
                with contextlib.suppress(duckdb.Error):
                    self.cur.close()  # rolls back whatever the reader left open
            self.sock.close()
            self.share.forget(self)

    def _greet(self) -> bool:
        hello, _ = _recv(self.sock)
        refusal = None
        if hello.get("protocol") != PROTOCOL:
            refusal = {"type": "Protocol", "message": f"protocol {PROTOCOL} spoken here"}
        elif hello.get("db") != str(self.share.real):
            refusal = {"type": "Elsewhere", "message": f"this serves {self.share.real}"}
        if refusal:
            _send(self.sock, {"ok": False, **refusal, "owner": vars(self.share.info)})
            return False
        self.read_only = bool(hello.get("read_only", True))
        self.cur = self.share.new_cursor()
        # SESSION: a plain SET of some settings would change them for the owner too
        self.cur.execute("SET SESSION TimeZone = 'UTC'")
        # HUGEINT, JSON, UUID... travel as themselves, not as DECIMAL and VARCHAR
        self.cur.execute("SET SESSION arrow_lossless_conversion = true")
        if self.read_only:
            self.cur.execute("BEGIN TRANSACTION READ ONLY")
        _send(self.sock, {"ok": True, "owner": vars(self.share.info)})
        return True

    def _after_error(self) -> None:
        """A failed statement may leave the reader's snapshot aborted: begin a fresh one."""
        if self.read_only and self.cur is not None:
            with contextlib.suppress(duckdb.Error):
                self.cur.execute("ROLLBACK")
            with contextlib.suppress(duckdb.Error):
                self.cur.execute("BEGIN TRANSACTION READ ONLY")

    def _handle(
        self, header: dict[str, Any], payload: bytearray | None
    ) -> tuple[dict[str, Any], pa.Table | None]:
        cur = self.cur
        assert cur is not None
        op = header.get("op")
        if op in ("begin", "commit", "rollback"):
            if not self.read_only:
                getattr(cur, op)()
                self.in_transaction = op == "begin"
            return {"ok": True}, None
        if op not in ("execute", "executemany"):
            raise duckdb.InvalidInputException(f"unknown request {op!r}")
        sql = header["sql"]
        if not isinstance(sql, str):
            raise duckdb.InvalidInputException("a query must be text")
        params = unpack(header.get("params"))
        kind, sql = _special(cur, sql)
        if kind == "TRANSACTION" and self.read_only:
            return {"ok": True, "rowcount": -1}, _SUCCESS
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                if op == "executemany":
                    cur.executemany(sql, params or [])
                elif params is None:
                    cur.execute(sql)
                else:
                    cur.execute(sql, params)
                break
            except duckdb.TransactionException as e:
                # a retry is safe only for a statement that was its own transaction
                once = self.in_transaction or op == "executemany" or self.read_only
                if once or not _conflict(e) or attempt == CONFLICT_RETRIES:
                    self.tries = attempt + 1
                    raise
                time.sleep(0.05 * 2**attempt)
        if kind == "TRANSACTION":
            self.in_transaction = sql.split()[0].lower() in ("begin", "start")
        return {"ok": True, "rowcount": cur.rowcount}, self._result(cur)

    @staticmethod
    def _result(cur: duckdb.DuckDBPyConnection) -> pa.Table | None:
        if cur.description is None:
            return None
        # DuckDB warns that Arrow from a DB-API result is a copy: here it is the point.
        with _ARROW_LOCK, warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Arrow output on a DB-API result")
            return cur.to_arrow_table()


class OwnedConnection:
    """The owner's DuckDB connection, as `db.connect` returns it while it serves the
    database: every attribute is the DuckDB connection's own, except that closing it (or
    dropping it) first stops serving, so no reader's cursor outlives it and the socket and
    owner file go with it."""

    def __init__(self, con: duckdb.DuckDBPyConnection, share: _Share) -> None:
        self._con = con
        self._release = weakref.finalize(self, share.release, con)

    def __getattr__(self, name: str) -> Any:
        if name in ("_con", "_release"):  # not set yet (a half-made object)
            raise AttributeError(name)
        return getattr(self._con, name)

    def execute(self, *args: Any, **kwargs: Any) -> OwnedConnection:
        self._con.execute(*args, **kwargs)
        return self

    def executemany(self, *args: Any, **kwargs: Any) -> OwnedConnection:
        self._con.executemany(*args, **kwargs)
        return self

    def close(self) -> None:
        self._release()  # once: a second close only closes DuckDB's connection again
        self._con.close()

    def __enter__(self) -> OwnedConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(con: duckdb.DuckDBPyConnection, path: Path) -> duckdb.DuckDBPyConnection:
    """The owner's connection: `con` serving its database to other processes, or `con`
    itself where it cannot (no AF_UNIX, no place for the socket) — then this owner's readers
    meet "database busy", as before sharing existed."""
    real = real_path(path)
    if real is None or not hasattr(socket, "AF_UNIX") or str(path) == ":memory:":
        return con
    with _SHARES_LOCK:
        share = _SHARES.get(str(real))
        if share is not None and not share.stopping and share.pid == os.getpid():
            share.add(con)
        else:
            share = _Share(real, con)
            try:
                share.start()
            except OSError as e:
                log.debug("%s: not served to other processes: %s", path, e)
                share.stop()  # what start made: the pipe, a socket, the cursor factory
                return con
            _SHARES[str(real)] = share
    return cast(duckdb.DuckDBPyConnection, OwnedConnection(con, share))


@atexit.register
def _stop_all() -> None:
    """At exit, stop serving: the socket and owner file do not outlive the process (a killed
    process leaves them; the next owner replaces them, a reader finds nobody answering)."""
    for share in list(_SHARES.values()):
        share.stop()


# --- the reader's side ----------------------------------------------------------------------


class OwnerRefused(DatabaseBusy):
    """The owner answered but will not serve this process."""


class OwnerGone(DatabaseBusy, duckdb.ConnectionException):
    """The owner stopped serving in the middle of a command (it closed the database or
    died): a sentence and exit 4, "try again", and still a DuckDB connection error."""


class WriteConflict(DatabaseBusy, duckdb.TransactionException):
    """A reader's write kept meeting the owner's writes to the same rows."""


_RESULT = "__owner_result"


class RemoteConnection:
    """The database reached through the process that owns it: the part of DuckDB's
    connection the commands use, with DuckDB's own classes for results and errors.

    Each statement runs on the reader's own cursor in the owner's process; its rows come
    back whole (an Arrow IPC stream) and are read here from an in-memory DuckDB, so fetching
    behaves exactly like DuckDB. A reader opened read_only sees one snapshot for its life
    (see _Session); `cursor()` opens another session, with a snapshot of its own.
    """

    def __init__(
        self, path: Path, sock: socket.socket, owner: OwnerInfo, read_only: bool
    ) -> None:
        self.path = path
        self.owner = owner
        self.read_only = read_only
        self._sock: socket.socket | None = sock
        self._local = duckdb.connect()
        self._local.execute("SET TimeZone = 'UTC'")
        self._has_result = False
        self._rowcount = -1
        self._cursors: weakref.WeakSet[RemoteConnection] = weakref.WeakSet()

    # -- the conversation -----------------------------------------------------------------
    def _call(
        self, request: dict[str, Any]
    ) -> tuple[dict[str, Any], pa.Table | None]:
        sock = self._sock
        if sock is None:
            raise duckdb.ConnectionException("Connection Error: Connection already closed!")
        try:
            _send(sock, request)
            header, payload = _recv(sock)
        except (OSError, ConnectionError, ValueError):
            self.close()
            raise OwnerGone(
                f"{self.path}: database busy: {self.owner.describe()}, which served it to "
                "this command, closed it meanwhile; try again"
            ) from None
        if not header.get("ok"):
            if header.get("conflict"):
                tries = int(header.get("tries", 1))
                how = f"tried {tries} times and not made" if tries > 1 else "not made"
                raise WriteConflict(
                    f"{self.path}: database busy: {self.owner.describe()} is writing the same "
                    f"rows; this change was {how}; try again in a moment"
                )
            raise _raised(header) from None
        return header, None if payload is None else _arrow_table(payload)

    def _take(self, header: dict[str, Any], table: pa.Table | None) -> None:
        """Make `table` the pending result, read from the local DuckDB under its own
        column names (Arrow keeps duplicates; DuckDB would rename them)."""
        self._local.abort()  # a result left unread is dropped, as DuckDB's execute drops it
        self._rowcount = int(header.get("rowcount", -1))
        self._has_result = table is not None
        if table is None:
            return
        names = table.column_names
        self._local.register(_RESULT, table.rename_columns([f"c{i}" for i in range(len(names))]))
        columns = ", ".join(f'c{i} AS "{n.replace(chr(34), chr(34) * 2)}"'
                            for i, n in enumerate(names))
        self._local.execute(f"SELECT {columns} FROM {_RESULT}")

    def _result(self) -> duckdb.DuckDBPyConnection:
        if self._sock is None:
            raise duckdb.ConnectionException("Connection Error: Connection already closed!")
        if not self._has_result:
            raise duckdb.InvalidInputException("Invalid Input Error: No open result set")
        return self._local

    # -- statements -----------------------------------------------------------------------
    def execute(self, query: object, parameters: object = None) -> RemoteConnection:
        sql = getattr(query, "query", query)  # a duckdb Statement, or its text
        params = None if parameters is None else pack(parameters)
        header, table = self._call({"op": "execute", "sql": sql, "params": params})
        if isinstance(sql, str) and _SETTING.match(sql):
            # the same setting here (TimeZone: how a TIMESTAMPTZ becomes a datetime)
            with contextlib.suppress(duckdb.Error):
                self._local.execute(sql)
        self._take(header, table)
        return self

    def executemany(self, query: object, parameters: object = None) -> RemoteConnection:
        sql = getattr(query, "query", query)
        rows = [pack(p) for p in (parameters or [])]  # type: ignore[attr-defined]
        header, table = self._call({"op": "executemany", "sql": sql, "params": rows})
        self._take(header, table)
        return self

    def sql(
        self, query: str, *, alias: str = "", params: object = None
    ) -> duckdb.DuckDBPyRelation | None:
        """A relation over the statement's rows, run now (DuckDB's is lazy: this one holds
        the rows of the moment it ran)."""
        packed = None if params is None else pack(params)
        _, table = self._call({"op": "execute", "sql": query, "params": packed})
        if table is None:
            return None
        rel = self._local.from_arrow(table)
        return rel.set_alias(alias) if alias else rel

    query = sql

    def begin(self) -> RemoteConnection:
        self._call({"op": "begin"})
        return self

    def commit(self) -> RemoteConnection:
        self._call({"op": "commit"})
        return self

    def rollback(self) -> RemoteConnection:
        self._call({"op": "rollback"})
        return self

    def register(self, view_name: str, python_object: object) -> RemoteConnection:
        raise duckdb.NotImplementedException(
            "register: Python objects stay in the process that made them; a command that "
            "registers data must open the database itself"
        )

    def unregister(self, view_name: str) -> RemoteConnection:
        raise duckdb.NotImplementedException("unregister: see register")

    # -- results --------------------------------------------------------------------------
    @property
    def description(self) -> list[tuple[Any, ...]] | None:
        return self._local.description if self._has_result else None

    @property
    def rowcount(self) -> int:
        return self._rowcount

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._result().fetchall()

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._result().fetchone()

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        return self._result().fetchmany(size)

    def fetchnumpy(self) -> dict[str, Any]:
        return self._result().fetchnumpy()

    def fetchdf(self, *, date_as_object: bool = False) -> Any:
        return self._result().fetchdf(date_as_object=date_as_object)

    df = fetch_df = fetchdf

    def to_arrow_table(self, batch_size: int = 1_000_000) -> pa.Table:
        return self._result().to_arrow_table(batch_size)

    def to_arrow_reader(self, batch_size: int = 1_000_000) -> pa.RecordBatchReader:
        return self._result().to_arrow_reader(batch_size)

    # -- life -----------------------------------------------------------------------------
    def cursor(self) -> RemoteConnection:
        """Another session with the owner: a cursor of its own there, a snapshot of its own."""
        if self._sock is None:
            raise duckdb.ConnectionException("Connection Error: Connection already closed!")
        other = _open_session(self.path, Path(self.owner.socket), self.read_only)
        if other is None:
            raise OwnerGone(
                f"{self.path}: database busy: {self.owner.describe()}, which served it to "
                "this command, closed it meanwhile; try again"
            )
        self._cursors.add(other)
        return other

    def close(self) -> None:
        for c in list(self._cursors):
            c.close()
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()  # the owner ends the session and rolls back what is open
            self._local.close()

    def __enter__(self) -> RemoteConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _open_session(path: Path, where: Path, read_only: bool) -> RemoteConnection | None:
    """A session with the owner listening at `where`; None when nobody answers there as the
    owner of `path` (a stale socket of a killed owner: connection refused)."""
    real = real_path(path)
    if real is None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(HELLO_SECONDS)
        sock.connect(str(where))
        uid = _peer_uid(sock)
        if uid is not None and uid != os.getuid():  # not ours: a planted owner file
            raise ConnectionRefusedError(f"{where} is served by uid {uid}")
        _send(sock, {"op": "hello", "protocol": PROTOCOL, "db": str(real),
                     "read_only": read_only, "pid": os.getpid()})
        reply, _ = _recv(sock)
        sock.settimeout(None)
    except (OSError, ConnectionError, ValueError):
        sock.close()
        return None
    try:
        owner = OwnerInfo(**reply["owner"])
    except (KeyError, TypeError):
        sock.close()
        return None
    if not reply.get("ok"):
        sock.close()
        if reply.get("type") == "Refused":
            raise OwnerRefused(
                f"{path}: database busy: {owner.describe()} has it open for writing and "
                "serves it only to processes of its own user; run this command as that "
                "user, or try again when it has finished"
            )
        if reply.get("type") == "Full":
            raise OwnerRefused(
                f"{path}: database busy: {owner.describe()} is serving it to "
                f"{MAX_SESSIONS} other commands; try again in a moment"
            )
        return None  # another protocol, or another database: as if nobody answered
    return RemoteConnection(path, sock, owner, read_only)


def reach(path: Path, read_only: bool) -> RemoteConnection | None:
    """The database through its owner, for a process that met DuckDB's lock; None when no
    owner answers (an older bacc-audit writing, a reader holding it, a dead owner's files),
    and the caller says "database busy" as before."""
    real = real_path(path)
    info = read_owner(real) if real is not None else None
    if info is None:
        return None
    return _open_session(path, Path(info.socket), read_only)


def owner_recorded(path: Path) -> bool:
    """Whether an owner file stands beside the database (its owner may be gone)."""
    real = real_path(path)
    return real is not None and read_owner(real) is not None


def holder(path: Path, lock_text: str) -> str | None:
    """The owner that holds the lock DuckDB named ("bacc-audit watch (PID 7)"), for the busy
    sentence of a command that must write itself; None unless DuckDB's PID is the owner's."""
    real = real_path(path)
    info = read_owner(real) if real is not None else None
    m = re.search(r"PID (\d+)", lock_text)
    if info is None or m is None or int(m.group(1)) != info.pid:
        return None
    return info.describe()


def served_runs(con: object) -> set[int]:
    """The runs still recorded 'running' that began while the owner serving `con` held the
    database: its own, or those of commands it serves. They are alive (or were, a moment
    ago), unlike a 'running' run from before, whose process died. Empty for a connection of
    this process's own."""
    if not isinstance(con, RemoteConnection) or con.owner.first_run is None:
        return set()
    rows = con.execute(
        "SELECT id FROM runs WHERE status = 'running' AND id >= ?", [con.owner.first_run]
    ).fetchall()
    return {int(r[0]) for r in rows}
