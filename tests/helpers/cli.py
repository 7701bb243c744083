"""Run `bacc-audit ARGS...` in-process, through `auditor.cli.app.main` as the console script
does (`console_script` only freezes the imports' objects first), so a UserError is its
sentence on stderr and its exit code.

`in_process` is what the `bacc_audit` fixture (conftest.py) returns: plain consoles, no
BACC_AUDIT_* variables of the caller's shell, and the test's folder as the working
directory. `run_cli` is the bare version the simulate tests use.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from rich.console import Console

ENVIRONMENT = ("BACC_AUDIT_DB", "BACC_AUDIT_CONFIG", "BACC_AUDIT_SPOOL", "BACC_AUDIT_ARCHIVE")


class Run(NamedTuple):
    code: int
    out: str
    err: str


def in_process(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], cwd: Path
) -> Callable[..., Run]:
    """A function that runs `bacc-audit ARGS...` and returns Run(exit code, stdout, stderr).

    The CLI's rich consoles decide on colour when the module is imported; plain ones (same
    settings, no colour) keep the output parseable however pytest is run. Whether markup is
    interpreted is taken from the CLI's own consoles, so the tests see what users see.
    """
    from auditor.cli import app as cli
    from auditor.cli import console

    for name, stderr in (("out", False), ("err", True)):
        real: Console = getattr(console, name)
        plain = Console(
            stderr=stderr,
            highlight=False,
            soft_wrap=True,
            color_system=None,
            markup=real._markup,  # rich keeps it private; the CLI sets markup=False
        )
        monkeypatch.setattr(console, name, plain)
    for var in ENVIRONMENT:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(cwd)  # no ./bacc-audit.toml or ./bacc-audit.duckdb of the checkout

    def run(*args: str | Path) -> Run:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["bacc-audit", *map(str, args)])
        code: Any = "no exit"
        try:
            cli.main()
        except SystemExit as e:
            code = e.code
        # ingest leaves its read-write connection to the garbage collector, and the
        # exception's traceback kept it alive; DuckDB refuses a read-only connection in
        # this process while a read-write one to the same file is open.
        gc.collect()
        captured = capsys.readouterr()
        assert code != "no exit", "bacc-audit returned without exiting"
        return Run(0 if code is None else int(code), captured.out, captured.err)

    return run


def run_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> Run:
    from auditor.cli import app as cli

    capsys.readouterr()
    monkeypatch.setattr("sys.argv", ["bacc-audit", *args])
    with pytest.raises(SystemExit) as e:
        cli.main()
    captured = capsys.readouterr()
    return Run(int(e.value.code or 0), captured.out, captured.err)
