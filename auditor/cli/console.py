"""Where the commands write: the shared consoles (stdout for what scripts parse, stderr for
people), a wide one for tables, and what to do when stdout's reader goes away.

Commands name the consoles as `console.out` and `console.err`, looked up when they print, so a
test can put plain ones in their place.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Mapping

from rich.console import Console

from auditor.words import count

# markup=False: paths and reasons are printed as they are ("logs[old]/a.jsonl").
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
out = Console(highlight=False, soft_wrap=True, markup=False)


def wide(width: int) -> Console:
    """A console for a table at least `width` columns wide: a terminal narrower than the
    table would fold every row."""
    return Console(highlight=False, markup=False, width=max(out.width, width))


def error(message: object) -> None:
    """An error as one line on stderr: `error: ...`."""
    err.print(f"error: {message}")


def not_audited(skipped: Mapping[str, int]) -> None:
    """The rounds an audit left out, by why, on stderr (`audit`, `backfill`)."""
    for why, n in sorted(skipped.items()):
        err.print(f"not audited: {count(n, 'round')}: {why}")


def closed_pipe(e: BaseException) -> bool:
    """Whether an exit came from stdout's reader going away (`findings | head -1`).

    Typer and rich both turn a BrokenPipeError into a silent exit 1, the code for "findings
    found"; the reader stopping early is its choice, not a finding, so the CLI exits 0.
    """
    cause = e.__context__
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno == errno.EPIPE:
            return True
        cause = cause.__context__
    return False


def quiet_stdout() -> None:
    """Point stdout at /dev/null: the reader has gone, and Python's final flush would otherwise
    print "Exception ignored ... BrokenPipeError" and exit 120."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
