"""Another process holding something open (a database, a lock) while a test runs a command
against it: the lock errors and busy messages are only real with a real second process."""

from __future__ import annotations

import select
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def holder(script: str, *args: str | Path) -> Iterator[int]:
    """A second process running `script` until the block ends; it prints one line when it
    holds what it was asked to hold. Yields its pid."""
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        started, _, _ = select.select([child.stdout], [], [], 60)
        ready = child.stdout.readline() if started else ""
        if ready.strip() != "ready":
            child.kill()
            _, err = child.communicate(timeout=10)
            pytest.fail(f"the holding process did not start: {err}")
        yield child.pid
    finally:
        child.kill()
        child.wait(timeout=10)
        for stream in (child.stdout, child.stderr):
            if stream:
                stream.close()
