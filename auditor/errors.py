"""Errors a user can act on, each with the exit code the CLI returns for it."""

from __future__ import annotations

# Exit codes, documented in README.md and `bacc-audit --help`.
EXIT_OK = 0
EXIT_FINDINGS = 1  # findings at or above the --fail-on threshold
EXIT_INPUT = 2  # usage, input or configuration error
EXIT_INTERNAL = 3  # a bug or an unexpected failure
EXIT_BUSY = 4  # another process has the database open (a writer, or a reader when we write)
EXIT_LOCKED = 5  # another nightly run holds its lock; nothing was done


class UserError(Exception):
    """A problem with the user's input or setup: shown as one sentence, never as a traceback."""

    exit_code = EXIT_INPUT


class DatabaseBusy(UserError):
    """DuckDB lets one process write or many read: not an error in the data, so its own exit
    code, which a wrapper can treat as "try again later"."""

    exit_code = EXIT_BUSY
