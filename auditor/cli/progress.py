"""Progress of long commands (ingest, audit, report): a bar on a terminal, plain lines
elsewhere (audit, report).

The library functions take a `progress(step, done, total)` callback and print nothing; this
is the one place that decides how it looks. Both go to stderr, so stdout (paths, JSON) stays
what scripts parse.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from auditor.ingest.paths import escape_path

if TYPE_CHECKING:  # the audit's modules load when a command needs them, not at startup
    from auditor.audit.run import Progress as ProgressFn

EVERY_PERCENT = 10
EVERY_SECONDS = 30.0
QUIET_SECONDS = 30.0  # work done sooner says nothing: the log is for what takes long


class PlainLines:
    """For cron and logs, where a bar would be a screenful of control codes: once the work has
    taken 30 s, a line every 10% and at least every 30 s, and one at the end. Work done
    sooner prints nothing, so a quick report's log (and its stderr) stays as it was."""

    def __init__(
        self, console: Console, what: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.console, self.what, self.clock = console, what, clock
        self.start = self.last_time = clock()
        self.last_percent: int | None = None

    def __call__(self, step: str, done: int, total: int) -> None:
        percent = 100 * done // total if total else 100
        now = self.clock()
        if now - self.start < QUIET_SECONDS:
            return
        due = (
            self.last_percent is None
            or percent >= self.last_percent + EVERY_PERCENT
            or (percent == 100 and self.last_percent < 100)
            or now - self.last_time >= EVERY_SECONDS
        )
        if not due:
            return
        self.last_percent, self.last_time = percent, now
        self.console.print(f"{self.what}: {percent}% {step} ({now - self.start:.0f} s)")


@contextmanager
def progress_for(console: Console, what: str, bar: bool) -> Iterator[ProgressFn]:
    """A callback for `what`'s library function: a transient bar when `bar` (a terminal),
    plain lines otherwise."""
    if not bar:
        yield PlainLines(console, what)
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as shown:
        task = shown.add_task(what, total=None)

        def update(step: str, done: int, total: int) -> None:
            shown.update(task, description=f"{what}: {step}", completed=done, total=total)

        yield update


@contextmanager
def bytes_read(
    console: Console, total: int, bar: bool
) -> Iterator[Callable[[Path, int], None] | None]:
    """For ingest: a transient bar of the bytes read of `total`, named by the file being
    read, when `bar` (a terminal); else no callback (ingest says nothing as it goes)."""
    if not bar:
        yield None
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as shown:
        task = shown.add_task("ingest", total=total)
        done: dict[Path, int] = {}

        def update(path: Path, read: int) -> None:
            done[path] = read
            shown.update(task, completed=sum(done.values()), description=escape_path(path.name))

        yield update
