"""The reader's side of one writer, many readers (docs/database.md): a process that meets
DuckDB's lock on the audit database reaches it through the process that owns it
(store/serving.py) instead: a `RemoteConnection`, which answers like the DuckDB connection
the commands use.

Each result comes back whole (an Arrow IPC stream, store/wire.py) and is loaded into a small
in-memory DuckDB here and read from there, so fetchall, fetchone, description, fetchnumpy,
df, to_arrow_table are DuckDB's own, with DuckDB's own types.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import weakref
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from auditor.errors import DatabaseBusy
from auditor.store import wire


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
        self, path: Path, sock: socket.socket, owner: wire.OwnerInfo, read_only: bool
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
            try:
                wire.send(sock, request)
            except OSError:  # gone; it may have said why first (an ended session)
                sock.settimeout(1.0)
            header, payload = wire.recv(sock)
        except (OSError, ConnectionError, ValueError):
            self.close()
            raise OwnerGone(
                f"{self.path}: database busy: {self.owner.describe()}, which served it to "
                "this command, closed it meanwhile; try again"
            ) from None
        if not header.get("ok"):
            if header.get("type") == "Ended":  # idle too long, or its place given away
                self.close()
                raise OwnerGone(
                    f"{self.path}: database busy: {self.owner.describe()}, which served it to "
                    f"this command, ended its session ({header.get('message')}); try again"
                )
            if header.get("conflict"):
                tries = int(header.get("tries", 1))
                how = f"tried {tries} times and not made" if tries > 1 else "not made"
                raise WriteConflict(
                    f"{self.path}: database busy: {self.owner.describe()} is writing the same "
                    f"rows; this change was {how}; try again in a moment"
                )
            raise wire.raised(header) from None
        return header, None if payload is None else wire.arrow_table(payload)

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
        params = None if parameters is None else wire.pack(parameters)
        header, table = self._call({"op": "execute", "sql": sql, "params": params})
        if isinstance(sql, str) and wire.SETTING.match(sql):
            # the same setting here (TimeZone: how a TIMESTAMPTZ becomes a datetime)
            with contextlib.suppress(duckdb.Error):
                self._local.execute(sql)
        self._take(header, table)
        return self

    def executemany(self, query: object, parameters: object = None) -> RemoteConnection:
        sql = getattr(query, "query", query)
        rows = [wire.pack(p) for p in (parameters or [])]  # type: ignore[attr-defined]
        header, table = self._call({"op": "executemany", "sql": sql, "params": rows})
        self._take(header, table)
        return self

    def sql(
        self, query: str, *, alias: str = "", params: object = None
    ) -> duckdb.DuckDBPyRelation | None:
        """A relation over the statement's rows, run now (DuckDB's is lazy: this one holds
        the rows of the moment it ran)."""
        packed = None if params is None else wire.pack(params)
        _, table = self._call({"op": "execute", "sql": query, "params": packed})
        if table is None:
            return None
        self._local.abort()  # an execute's result left unread: dropped, as DuckDB drops it
        self._has_result = False
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
    real = wire.real_path(path)
    if real is None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(wire.HELLO_SECONDS)
        sock.connect(str(where))
        uid = wire.peer_uid(sock)
        if uid is not None and uid != os.getuid():  # not ours: a planted owner file
            raise ConnectionRefusedError(f"{where} is served by uid {uid}")
        wire.send(sock, {"op": "hello", "protocol": wire.PROTOCOL, "db": str(real),
                     "read_only": read_only, "pid": os.getpid()})
        reply, _ = wire.recv(sock)
        sock.settimeout(None)
    except (OSError, ConnectionError, ValueError):
        sock.close()
        return None
    try:
        owner = wire.OwnerInfo(**reply["owner"])
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
                f"{wire.MAX_SESSIONS} other commands; try again in a moment"
            )
        return None  # another protocol, or another database: as if nobody answered
    return RemoteConnection(path, sock, owner, read_only)


def reach(path: Path, read_only: bool) -> RemoteConnection | None:
    """The database through its owner, for a process that met DuckDB's lock; None when no
    owner answers (an older bacc-audit writing, a reader holding it, a dead owner's files),
    and the caller says "database busy" as before."""
    real = wire.real_path(path)
    info = wire.read_owner(real) if real is not None else None
    if info is None:
        return None
    return _open_session(path, Path(info.socket), read_only)


def owner_recorded(path: Path) -> bool:
    """Whether an owner file stands beside the database (its owner may be gone)."""
    real = wire.real_path(path)
    return real is not None and wire.read_owner(real) is not None


def holder(path: Path, lock_text: str) -> str | None:
    """The owner that holds the lock DuckDB named ("bacc-audit watch (PID 7)"), for the busy
    sentence of a command that must write itself; None unless DuckDB's PID is the owner's."""
    real = wire.real_path(path)
    info = wire.read_owner(real) if real is not None else None
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
