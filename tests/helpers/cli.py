"""Run `bacc-audit ARGS...` in-process, through `auditor.cli.app.main` as the console script
does (so a UserError is its sentence on stderr and its exit code), for the simulate tests."""

from __future__ import annotations

from typing import NamedTuple

import pytest


class Ran(NamedTuple):
    code: int
    out: str
    err: str


def run_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> Ran:
    from auditor.cli import app as cli

    capsys.readouterr()
    monkeypatch.setattr("sys.argv", ["bacc-audit", *args])
    with pytest.raises(SystemExit) as e:
        cli.main()
    captured = capsys.readouterr()
    return Ran(int(e.value.code or 0), captured.out, captured.err)
