"""The owner's side of one writer, many readers (docs/database.md): the process that opens the
audit database for writing serves it to the other local processes of its user, over a Unix
socket beside the file.

`serve` starts a thread that accepts readers, one thread and one DuckDB cursor per reader (a
cursor is a connection of its own, so readers run beside the owner's work and MVCC keeps them
apart); `OwnedConnection` is the owner's connection, which stops serving and removes the
socket before it closes. The reader's side is store/shared.py; what travels, store/wire.py.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import logging
import os
import re
import secrets
import select
import selectors
import socket
import stat
import sys
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import duckdb
import pyarrow as pa

from auditor import __version__
from auditor.store import wire

log = logging.getLogger(__name__)

SOCKET_SUFFIX = ".sock"
# AF_UNIX paths: 108 bytes on Linux with the final NUL, 104 on the BSDs and macOS.
SOCKET_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
CONFLICT_RETRIES = 5  # 50 ms, then doubling: about 1.5 s in all
# With every place taken, a session idle this long gives its place to a reader at the door.
EVICT_IDLE_SECONDS = 1.0
# Refusals said at once (a thread each, reading the greeting first); past that, a refused
# connection is closed without a word.
REFUSALS_AT_ONCE = 8


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



def command_name() -> str:
    """This process as a person would name it: `bacc-audit watch`, `bacc-audit nightly`."""
    argv = sys.argv or [""]
    name = Path(argv[0]).name if argv[0] not in ("", "-c", "-m") else "python"
    words = [name, *(a for a in argv[1:2] if re.fullmatch(r"[a-z][a-z-]*", a))]
    return " ".join(words)[:80]



_SHARES: dict[str, _Share] = {}  # resolved database path -> the share this process runs
# Reentrant: a connection dropped without close() is released by its finalizer, which the
# garbage collector may run in a thread that already holds one of these.
_SHARES_LOCK = threading.RLock()
_ARROW_LOCK = threading.Lock()
# Words of the statements the owner looks at before it runs a reader's query (_special).
_SPECIAL_WORDS = re.compile(
    r"\b(begin|start|commit|end|rollback|abort|set|reset|pragma)\b", re.IGNORECASE
)


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
        self.refusing = threading.BoundedSemaphore(REFUSALS_AT_ONCE)
        self.thread = threading.Thread(
            target=self._accept_loop, name=f"bacc-audit serves {real.name}", daemon=True
        )
        try:
            row = self.factory.execute("SELECT coalesce(max(id), 0) + 1 FROM runs").fetchall()
            self.first_run: int | None = int(row[0][0])
        except duckdb.Error:
            self.first_run = None
        self.info = wire.OwnerInfo(
            self.pid, command_name(), dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "",
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
        record = {"protocol": wire.PROTOCOL, "db": str(self.real), **vars(self.info)}
        self.owner_bytes = (json.dumps(record, indent=1) + "\n").encode()
        target = wire.owner_file(self.real)
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
            uid = wire.peer_uid(client)
            if uid is not None and uid != os.getuid():
                refusal = {"type": "Refused", "message": f"uid {uid} is not this owner's"}
            elif len(self.sessions) >= wire.MAX_SESSIONS and not self._make_room():
                refusal = {"type": "Full", "message": f"{wire.MAX_SESSIONS} readers already"}
            elif not self.stopping:
                session = _Session(self, client)
                self.sessions.add(session)
                session.thread.start()
                return
        if refusal is None or not self.refusing.acquire(blocking=False):
            client.close()  # closing; or refusals enough under way (a flood): no sentence
            return
        threading.Thread(target=self._refuse, args=(client, refusal), daemon=True).start()

    def _make_room(self) -> bool:
        """With every place taken, end the session idle longest, if it has been idle
        EVICT_IDLE_SECONDS (greeted or not): 64 readers that connect and wait must not keep
        every other command out. False when all are at work."""
        now = time.monotonic()
        idle = [s for s in self.sessions if not s.busy and s.ended is None
                and now - s.idle_since >= EVICT_IDLE_SECONDS]
        if not idle:
            return False
        oldest = min(idle, key=lambda s: s.idle_since)
        self.sessions.discard(oldest)
        oldest.make_room()
        return True

    def _refuse(self, client: socket.socket, refusal: dict[str, str]) -> None:
        """Say no, after reading the greeting: a socket closed with unread data resets the
        connection, and the reader would get no sentence, only "nobody answered"."""
        try:
            client.settimeout(1.0)
            wire.recv(client, limit=wire.REQUEST_BYTES, within=1.0)
            wire.send(client, {"ok": False, **refusal, "owner": vars(self.info)})
        except (OSError, ConnectionError, ValueError):
            pass
        finally:
            client.close()
            self.refusing.release()

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
        target = wire.owner_file(self.real)
        with contextlib.suppress(OSError):
            if self.owner_bytes and target.read_bytes() == self.owner_bytes:
                os.unlink(target)


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
    m = wire.SETTING.match(text)
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
        self.idle_since = time.monotonic()  # when its last answer went (or it connected)
        self.ended: str | None = None  # why the owner ends the session, told to the reader
        self.tries = 1  # how often the last failed statement was tried
        self.thread = threading.Thread(target=self._run, name="bacc-audit reader", daemon=True)

    def abort(self) -> None:
        cur = self.cur
        if cur is not None and self.busy:
            with contextlib.suppress(duckdb.Error):
                cur.interrupt()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def make_room(self) -> None:
        """End this idle session for a reader waiting at the door: its next request is
        answered with why (the read side is shut, so the session's wait ends at once)."""
        self.ended = (f"it was idle while {wire.MAX_SESSIONS} other commands were served and "
                      "another one waited")
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RD)

    def _run(self) -> None:
        try:
            self.sock.settimeout(wire.HELLO_SECONDS)
            if not self._greet():
                return
            while True:
                if not select.select([self.sock], [], [], wire.IDLE_SECONDS)[0]:
                    idle = wire.IDLE_SECONDS
                    self.ended = "it sent nothing for " + (
                        f"{idle / 60:g} minutes" if idle >= 60 else f"{idle:g} s")
                    return
                self.sock.settimeout(wire.MESSAGE_SECONDS)
                header, payload = wire.recv(
                    self.sock, limit=wire.REQUEST_BYTES, within=wire.MESSAGE_SECONDS
                )
                self.busy = True
                try:
                    reply, table = self._handle(header, payload)
                except Exception as e:  # the reader's error, told to the reader
                    reply, table = wire.error_header(e) | {"tries": self.tries}, None
                    self.tries = 1
                    self._after_error()
                finally:
                    self.busy = False
                # A reader that does not read its answer is let go after IDLE_SECONDS.
                self.sock.settimeout(wire.IDLE_SECONDS)
                wire.send(self.sock, reply, None if table is None else wire.arrow_bytes(table))
                self.idle_since = time.monotonic()
        except (OSError, ConnectionError, ValueError, duckdb.Error):
            pass  # the reader went away, sent what is no request, or the owner is closing
        except Exception:  # never a traceback on the owner's terminal for a reader's trouble
            log.debug("a reader's session ended on an error", exc_info=True)
        finally:
            self._end()

    def _end(self) -> None:
        if self.ended is not None:  # tell the reader why, on its next request
            with contextlib.suppress(OSError, ValueError):
                self.sock.settimeout(1.0)
                wire.send(self.sock, {"ok": False, "type": "Ended", "message": self.ended,
                                      "owner": vars(self.share.info)})
        if self.cur is not None:
            with contextlib.suppress(duckdb.Error):
                self.cur.close()  # rolls back whatever the reader left open
        self.sock.close()
        self.share.forget(self)

    def _greet(self) -> bool:
        hello, _ = wire.recv(self.sock, limit=wire.REQUEST_BYTES, within=wire.HELLO_SECONDS)
        refusal = None
        if hello.get("protocol") != wire.PROTOCOL:
            refusal = {"type": "Protocol", "message": f"protocol {wire.PROTOCOL} spoken here"}
        elif hello.get("db") != str(self.share.real):
            refusal = {"type": "Elsewhere", "message": f"this serves {self.share.real}"}
        if refusal:
            wire.send(self.sock, {"ok": False, **refusal, "owner": vars(self.share.info)})
            return False
        self.read_only = bool(hello.get("read_only", True))
        self.cur = self.share.new_cursor()
        # SESSION: a plain SET of some settings would change them for the owner too
        self.cur.execute("SET SESSION TimeZone = 'UTC'")
        # HUGEINT, JSON, UUID... travel as themselves, not as DECIMAL and VARCHAR
        self.cur.execute("SET SESSION arrow_lossless_conversion = true")
        # The owner runs with preserve_insertion_order = false (db.connect), under which an
        # executed query's Arrow result comes back in parallel pieces out of ORDER BY's
        # order (2 threads, 3,000 rows: a third of the time); this reader's session keeps it.
        self.cur.execute("SET SESSION preserve_insertion_order = true")
        if self.read_only:
            self.cur.execute("BEGIN TRANSACTION READ ONLY")
        wire.send(self.sock, {"ok": True, "owner": vars(self.share.info)})
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
        params = wire.unpack(header.get("params"))
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
                if once or not wire.is_conflict(e) or attempt == CONFLICT_RETRIES:
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
        self.first_run = share.first_run

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
    real = wire.real_path(path)
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


def first_served_run(con: object) -> int | None:
    """The first run id recorded since this process began to own and serve the database of
    `con` (its own runs and those of the commands it serves are from there on); None for a
    connection that is no owner's."""
    return getattr(con, "first_run", None) if isinstance(con, OwnedConnection) else None


@atexit.register
def _stop_all() -> None:
    """At exit, stop serving: the socket and owner file do not outlive the process (a killed
    process leaves them; the next owner replaces them, a reader finds nobody answering)."""
    for share in list(_SHARES.values()):
        share.stop()
