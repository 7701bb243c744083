"""Where the commands write: the shared consoles (stdout for what scripts parse, stderr for
people), a wide one for tables, and what to do when stdout's reader goes away.

Commands name the consoles as `console.out` and `console.err`, looked up when they print, so a
test can put plain ones in their place.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

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


def records(
    rows: list[dict[str, Any]], as_json: bool, line: Callable[[dict[str, Any]], str], noun: str
) -> None:
    """A list of records entered by people (acknowledgements, sign-offs) on stdout: JSON, or
    `line` of each and how many there are."""
    if as_json:
        out.print_json(json.dumps(rows))
        return
    for row in rows:
        out.print(line(row))
    out.print(count(len(rows), noun))


def entered(row: Mapping[str, Any]) -> tuple[str, str]:
    """When a record was entered (UTC, to the second) and its note in brackets ("" when it
    has none), as a listed record's line shows them."""
    note = f" ({row['note']})" if row["note"] else ""
    return f"{row['recorded_at'][:19].replace('T', ' ')} UTC", note


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
