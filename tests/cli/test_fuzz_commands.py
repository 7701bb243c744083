"""Every command's options over odd dates, numbers, ids, names and paths (issue 31), at a
small size (bench/odd_input.py runs the same at a large one): each run answers 0, 1 or 2,
with a sentence for 2; never exit 3, a traceback, or no answer within HANG_SECONDS.

Hypothesis draws, for each command, which options are given and a value of each option's
kind (tests/helpers/fuzz.py): odd ones, and good ones, so that a command gets far enough to
meet the odd value in another option. `watch`, which runs until stopped, has its own test.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.cli import Run
from helpers.fuzz import COMMANDS, Places, arguments, examples, odd_paths, run_bounded, tally
from helpers.sample import CONFIG, MB01, SAMPLE, built
from hypothesis import HealthCheck, given, settings

pytestmark = pytest.mark.slow

EXAMPLES = examples(12)  # a few seconds a command; bench/odd_input.py runs hundreds
BIN = Path(sys.executable).parent / "bacc-audit"


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built(tmp_path_factory, tmp_path_factory.mktemp("fuzz") / "night.duckdb",
                 with_mb01=False)


@pytest.fixture
def places(night: Path, tmp_path: Path) -> Places:
    db_copy = tmp_path / "night.duckdb"
    shutil.copy(night, db_copy)
    spool = tmp_path / "spool"
    spool.mkdir()
    shutil.copy(MB01, spool / MB01.name)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return Places(odd_paths(tmp_path / "odd"), db_copy, CONFIG,
                  [spool / MB01.name, SAMPLE / "2026-11-28_pit-notices.jsonl"], spool, scratch)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_command_fails_on_odd_input(
    command: str, places: Places, bacc_audit: Callable[..., Run]
) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(args=arguments(command, places))
    def check(args: list[str]) -> None:
        outcome = run_bounded(bacc_audit, args)
        tally({"command": command, "verdict": outcome.verdict, "code": outcome.code,
               "seconds": round(outcome.seconds, 3)})
        assert outcome.verdict == "ok", (args, outcome)

    check()


@pytest.mark.parametrize("args,code,words", [
    (["--poll", "nan"], 2, "--poll nan: seconds from 0.01 to 60"),
    (["--poll", "-1"], 2, "--poll -1.0: seconds from 0.01 to 60"),
    (["--poll", "0"], 2, "--poll 0.0: seconds from 0.01 to 60"),
    (["--poll", "inf"], 2, "--poll inf: seconds from 0.01 to 60"),
    (["--poll", "²"], 2, "Invalid value for '--poll'"),
    (["--web", "²"], 2, "--web takes HOST:PORT"),
    (["--web", "127.0.0.1:99999"], 2, "--web takes HOST:PORT"),
    (["--web", "8.8.8.8:8080"], 2, "the config names no one to log in"),
    (["--poll", "0.5"], 0, ""),  # runs until stopped, then exits 0
])
def test_watch_on_odd_options_stops_or_refuses(
    args: list[str], code: int, words: str, tmp_path: Path
) -> None:
    """`watch` on an empty spool: odd options refused at once with a sentence; good ones
    run until SIGTERM (a --poll of nan or 0 was a loop that never rested)."""
    spool = tmp_path / "spool"
    spool.mkdir()
    proc = subprocess.Popen([BIN, "watch", "--spool", spool, "--db", tmp_path / "w.duckdb",
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said = ""
    if code == 0:  # running: polled a few times after it said so, then stopped
        assert proc.stderr is not None
        while "following" not in said and proc.poll() is None:
            said += proc.stderr.readline()
        time.sleep(1.5)
        assert proc.poll() is None, said
        proc.send_signal(signal.SIGTERM)
    else:
        try:
            proc.wait(timeout=8)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise AssertionError("an odd option was not refused") from None
    t0 = time.monotonic()
    _, rest = proc.communicate(timeout=60)
    err = said + rest
    assert time.monotonic() - t0 < 60
    assert proc.returncode == code, err
    assert "Traceback" not in err and words in err, err


def test_every_command_is_fuzzed() -> None:
    """A new command joins COMMANDS (tests/helpers/fuzz.py) or says here why not."""
    from auditor.cli.app import app

    names = {c.name or "" for c in app.registered_commands}
    groups = {g.name or "" for g in app.registered_groups}
    fuzzed = {c.split()[0] for c in COMMANDS} | {"watch"}  # watch: its own test above
    assert names | groups <= fuzzed, sorted((names | groups) - fuzzed)
