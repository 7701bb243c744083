"""What several test modules build the same way, built once for the whole `pytest` run.

Under pytest-xdist every worker is its own process, and a module's tests may land on both
workers (`--dist worksteal`): a module fixture that ingests and audits a night is then paid
once per module per worker. `once` builds a folder once per run, whichever process asks
first, under a file lock the others wait on; each caller then copies what it needs
(`copy_of`), so no two tests or workers ever open the same database file.

The folder is keyed by everything that decides its contents (a night's parameters, the
config): a different key is a different build. It lives under the run's base temporary
folder (the one all workers of a run share), so a new `pytest` run builds afresh.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

DONE = ".built"  # in a folder whose build finished


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The folder shared by every process of this pytest run (the workers' base temporary
    folders are its children; a run without xdist uses its own)."""
    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = root / "shared-builds"
    path.mkdir(exist_ok=True)
    return path


def once(factory: pytest.TempPathFactory, key: str, build: Callable[[Path], object]) -> Path:
    """The folder `key`, made by `build(folder)` the first time any process of this run asks
    for it; later callers wait for that build and get the same folder. The build runs in the
    folder itself (paths it records stay true); a build that raises leaves the folder
    unfinished, so the next caller starts it again (and meets the same error)."""
    root = shared_root(factory)
    folder = root / key
    with (root / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / DONE).exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / DONE).touch()
    return folder


T = TypeVar("T")


def built_once(
    factory: pytest.TempPathFactory, key: str, make: Callable[[Path], T]
) -> tuple[Path, T]:
    """`once`'s folder, and `make(folder)`'s value computed with it (pickled there): for a
    build that leaves files (a database, a PDF) beside what it returns. Every process gets
    the same folder and an equal copy of the value."""
    folder = once(
        factory, key, lambda d: (d / "value.pickle").write_bytes(pickle.dumps(make(d)))
    )
    value: T = pickle.loads((folder / "value.pickle").read_bytes())
    return folder, value


def value_once(factory: pytest.TempPathFactory, key: str, make: Callable[[Path], T]) -> T:
    """`make(folder)`'s value, computed once for the whole run as `once` builds a folder
    (pickled there): every process gets an equal copy of it."""
    return built_once(factory, key, make)[1]


def copy_of(src: Path, dst: Path) -> Path:
    """A private copy of a built file (a database each test or module may write to), with
    its mode (the product makes its databases 0600)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    shutil.copymode(src, dst)
    return dst
