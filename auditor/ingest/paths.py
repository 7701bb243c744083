"""Finding log files and naming them: which files a path gives, and a file name as one line of
text for messages and the `sources` manifest (and back)."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from auditor.errors import UserError

SUFFIXES = (".jsonl", ".jsonl.gz")
# Folders a walk for logs reads at most: a spool or a night's logs hold a few (a folder a
# day is 27 years in 10,000); `ingest /` would otherwise read the whole machine (issue 31).
MAX_FOLDERS = 10_000

_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNESCAPES = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPE_RE = re.compile(r"\\(?:([\\nrt])|x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8}))")


def escape_path(path: Path | str) -> str:
    """A path as messages show it and the `sources` manifest records it: one line of UTF-8.

    A POSIX file name is bytes. Bytes that are not UTF-8 (Python keeps them as the surrogates
    U+DC80-U+DCFF) become `\\xNN`, control and other unprintable characters `\\n`, `\\r`,
    `\\t`, `\\xNN` (below U+0080) or `\\uNNNN`, and a backslash `\\\\`; so every problem stays
    one line, the database can store the name, and `unescape_path` gives the exact name back.
    """
    text = str(path)
    if text.isprintable() and "\\" not in text:
        return text
    out = []
    for ch in text:
        o = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif o < 0x80:
            out.append(f"\\x{o:02x}")
        elif 0xDC80 <= o <= 0xDCFF:  # an undecodable byte of the name
            out.append(f"\\x{o - 0xDC00:02x}")
        elif o <= 0xFFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    return "".join(out)


def unescape_path(text: str) -> Path:
    """The path `escape_path` showed as `text` (`os.fsencode` of it gives the name's bytes)."""

    def one(m: re.Match[str]) -> str:
        short, byte, u4, u8 = m.groups()
        if short:
            return _UNESCAPES[short]
        if byte:
            n = int(byte, 16)
            return chr(n if n < 0x80 else 0xDC00 + n)
        return chr(int(u4 or u8, 16))

    return Path(_ESCAPE_RE.sub(one, text))


_C0 = re.compile("[\x00-\x1f]")


def one_line(text: str) -> str:
    """A reason as one line. The reasons quote values as JSON, which escapes these already;
    this is the backstop (C0 controls only: they are what break lines and drive terminals)."""
    return _C0.sub(lambda m: _ESCAPES.get(m[0]) or f"\\x{ord(m[0]):02x}", text)


def discover(paths: Sequence[Path | str]) -> tuple[list[Path], list[str]]:
    """Expand directories (recursively, links to folders followed once) to their log files.

    Returns the files and one sentence per path that gave none, so the good paths still
    load: a missing path, a folder with no log, and every entry named like a log that is no
    file to read (a link to nothing, a link loop, a named pipe, a socket, a device) or a
    folder that cannot be listed. Nothing named like a log is passed over in silence.
    """
    found: list[Path] = []
    errors: list[str] = []
    for p in map(Path, paths):
        try:
            folder = p.is_dir()
        except OSError:  # a name too long for the system: not_a_log says so
            folder = False
        if folder:
            logs, problems = logs_in(p)
            errors += problems
            if logs:
                found.extend(logs)
            elif not problems:
                errors.append(
                    f"{escape_path(p)}: nothing to ingest (no .jsonl or .jsonl.gz files in it)"
                )
            continue
        problem = not_a_log(p)
        if problem:
            errors.append(problem)
        else:
            found.append(p)
    return _once(found), errors


def logs_in(
    top: Path, folders: dict[str, tuple[int, int, int]] | None = None
) -> tuple[list[Path], list[str]]:
    """The log files under `top` and a sentence for each entry named like one that is no
    file, and for each folder that cannot be listed or that a link leads back into. Past
    MAX_FOLDERS folders the walk stops with a UserError (exit 2): nothing is loaded from a
    folder read in part. `folders`, if given, gets each folder walked with its device, inode
    and mtime (ns): `watch` walks again only once one of them changes (`folders_changed`)."""
    logs: list[Path] = []
    errors: list[str] = []
    seen: set[tuple[int, int]] = set()

    def unlisted(e: OSError) -> None:
        errors.append(f"{escape_path(e.filename or top)}: cannot list the folder "
                      f"({e.strerror}); the logs in it are not read")

    for walked, (folder, subfolders, names) in enumerate(
        os.walk(top, onerror=unlisted, followlinks=True)
    ):
        if walked >= MAX_FOLDERS:
            raise UserError(
                f"{escape_path(top)}: more than {MAX_FOLDERS:,} folders under it, not read; "
                "name the folder (or the files) that hold the logs"
            )
        try:
            st = os.stat(folder)
        except OSError as e:  # listed, then removed or renamed before it was read
            unlisted(e)
            subfolders.clear()
            continue
        seen.add((st.st_dev, st.st_ino))
        if folders is not None:
            folders[folder] = (st.st_dev, st.st_ino, st.st_mtime_ns)
        for name in list(subfolders):
            sub = Path(folder, name)
            try:
                sst = sub.stat()
            except OSError:
                continue  # os.walk's listing of it says why
            if (sst.st_dev, sst.st_ino) in seen:
                subfolders.remove(name)
                errors.append(f"{escape_path(sub)}: a link back to a folder already read; "
                              "not read twice")
        for name in sorted(names):
            if not name.endswith(SUFFIXES):
                continue
            path = Path(folder, name)
            problem = not_a_log(path)
            if problem:
                errors.append(problem)
            else:
                logs.append(path)
    return _once(sorted(logs)), errors


def folders_changed(folders: dict[str, tuple[int, int, int]], settled_ns: int) -> bool:
    """Whether a folder `logs_in` walked is gone, another, or changed (a name added, removed
    or renamed in it) since, or was changed less than a second before `settled_ns` (the
    time of that walk): a name added in the same tick of the clock as the walk leaves the
    mtime as it was."""
    for folder, was in folders.items():
        try:
            st = os.stat(folder)
        except OSError:
            return True
        if (st.st_dev, st.st_ino, st.st_mtime_ns) != was or st.st_mtime_ns > settled_ns - 10**9:
            return True
    return not folders


def _once(files: list[Path]) -> list[Path]:
    """Each file once, under the first name it was found by (links lead to one file)."""
    unique: dict[Path, Path] = {}
    for f in files:
        unique.setdefault(f.resolve(), f)
    return list(unique.values())


def not_a_log(path: Path) -> str | None:
    """Why `path` is no log file to read (one sentence), or None for a regular file."""
    shown = escape_path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            return (f"{shown}: a symbolic link to {escape_path(os.readlink(path))}, which does "
                    "not exist; nothing to ingest")
        return f"{shown}: no such file or directory"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return f"{shown}: a loop of symbolic links; nothing to ingest"
        return f"{shown}: cannot read ({e.strerror})"
    kind = _kind(st.st_mode)
    if kind is None:
        return None
    if stat.S_ISFIFO(st.st_mode):
        return (f"{shown}: {kind}, not a log file: ingest reads a log twice, to hash it and to "
                "load it; write what comes through the pipe to a file, and ingest that")
    return f"{shown}: {kind}, not a log file; nothing to ingest"


def _kind(mode: int) -> str | None:
    """What a file that is not a regular one is, in words (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def open_log(path: Path) -> BinaryIO:
    """`path` opened for reading, once it is shown to be a regular file: a name that became
    a named pipe after it was listed would block the read forever (nobody writes to it), so
    it is opened without blocking and refused (an OSError, as any unreadable file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        kind = _kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise OSError(errno.EINVAL, f"{kind}, not a log file", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
