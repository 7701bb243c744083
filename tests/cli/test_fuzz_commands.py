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


@pytest.mark.parametrize("args,words", [
    (["--poll", "nan"], "--poll nan: seconds from 0.01 to 60"),
    (["--poll", "-1"], "--poll -1.0: seconds from 0.01 to 60"),
    (["--poll", "0"], "--poll 0.0: seconds from 0.01 to 60"),
    (["--poll", "inf"], "--poll inf: seconds from 0.01 to 60"),
    (["--poll", "²"], "Invalid value for '--poll'"),
    (["--web", "²"], "--web takes HOST:PORT"),
    (["--web", "127.0.0.1:99999"], "--web takes HOST:PORT"),
    (["--web", "8.8.8.8:8080"], "the config names no one to log in"),
])
def test_watch_refuses_odd_options_at_once(
    args: list[str], words: str, tmp_path: Path, bacc_audit: Callable[..., Run]
) -> None:
    """`watch` on an empty spool: an odd option is refused before the watch starts, with a
    sentence (a --poll of nan or 0 was a loop that never rested). In this process (a
    process each cost a second of CPU), under an alarm in case a refusal is missed and the
    watch runs."""
    spool = tmp_path / "spool"
    spool.mkdir()

    def missed(signum: int, frame: object) -> None:
        raise AssertionError(f"{args}: not refused within 8 s")

    before = signal.signal(signal.SIGALRM, missed)
    signal.alarm(8)
    try:
        r = bacc_audit("watch", "--spool", spool, "--db", tmp_path / "w.duckdb", *args)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    assert r.code == 2, r
    assert "Traceback" not in r.err and words in r.err, r


def test_watch_on_a_good_poll_runs_until_stopped(tmp_path: Path) -> None:
    """A good --poll runs, resting between polls, until SIGTERM, then exits 0."""
    spool = tmp_path / "spool"
    spool.mkdir()
    proc = subprocess.Popen([BIN, "watch", "--spool", spool, "--db", tmp_path / "w.duckdb",
                             "--poll", "0.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stderr is not None
    said = ""
    while "following" not in said and proc.poll() is None:
        said += proc.stderr.readline()
    time.sleep(1.5)  # polled a few times after it said so
    assert proc.poll() is None, said
    proc.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    _, rest = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 60
    assert proc.returncode == 0, said + rest
    assert "Traceback" not in said + rest


def test_every_command_is_fuzzed() -> None:
    """A new command joins COMMANDS (tests/helpers/fuzz.py) or says here why not."""
    from auditor.cli.app import app

    names = {c.name or "" for c in app.registered_commands}
    groups = {g.name or "" for g in app.registered_groups}
    fuzzed = {c.split()[0] for c in COMMANDS} | {"watch"}  # watch: its own test above
    assert names | groups <= fuzzed, sorted((names | groups) - fuzzed)
