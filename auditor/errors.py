"""Errors a user can act on, each with the exit code the CLI returns for it."""

from __future__ import annotations

import errno

# Exit codes, documented in README.md and `bacc-audit --help`.
EXIT_OK = 0
EXIT_FINDINGS = 1  # findings at or above the --fail-on threshold
EXIT_INPUT = 2  # usage, input or configuration error
EXIT_INTERNAL = 3  # a bug or an unexpected failure
EXIT_BUSY = 4  # another process has the database open (a writer, or a reader when we write)
EXIT_LOCKED = 5  # another nightly run holds its lock; nothing was done
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT): the shell's own convention, 128 + signal 2


class UserError(Exception):
    """A problem with the user's input or setup: shown as one sentence, never as a traceback."""

    exit_code = EXIT_INPUT


class DatabaseBusy(UserError):
    """DuckDB lets one process write or many read: not an error in the data, so its own exit
    code, which a wrapper can treat as "try again later"."""

    exit_code = EXIT_BUSY


# What the system says when an output cannot go where it was asked to: the setup's doing.
WRITE_ERRNOS = frozenset(
    {
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.ENOSPC,
        errno.EDQUOT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.ENOTEMPTY,
        errno.ENAMETOOLONG,
        errno.EEXIST,  # a file stands where a folder of the path should be
    }
)


def cannot_write(path: object, e: OSError, advice: str) -> UserError:
    """An output that cannot be written (read-only folder, no permission, disk full) is the
    setup's problem, not a bug: one sentence naming the path the system refused."""
    where = e.filename if e.filename else path
    return UserError(f"{where}: cannot write there ({e.strerror or e}); {advice}")


def private_files() -> None:
    """Files and folders this process creates from now on are its user's alone (0600,
    0700): the audit database, its .wal, the nightly's lock, the archive and the evidence
    hold findings and acknowledgements. A umask that is stricter already stays."""
    import os

    old = os.umask(0o077)
    os.umask(old | 0o077)
