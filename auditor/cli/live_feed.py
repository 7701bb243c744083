"""`bacc-audit simulate --live SPOOL --speed N`: a simulated night written into a spool line by
line, at its logged times divided by N, as the table systems write (auditor.simulate.feed), so
that `watch` and its board can be tried and shown without tables (docs/live.md)."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from auditor.cli import console
from auditor.errors import EXIT_INTERRUPTED, UserError
from auditor.simulate.feed import Feed, names_taken, night_schedule
from auditor.simulate.output import SimulationResult
from auditor.words import count

DEFAULT_SPEED = 60.0  # an hour of play a minute


def check_live(live: Path | None, speed: float | None, out_dir: Path | None) -> float:
    """The speed to feed at, once `--live`, `--speed` and `--out` agree; a sentence (exit 2)
    when they do not. Checked before anything is simulated."""
    if live is None:
        if speed is not None:
            raise UserError(f"--speed {speed:g}: only with --live SPOOL (the pace a night is "
                            "fed into a spool at)")
        return DEFAULT_SPEED
    speed = DEFAULT_SPEED if speed is None else speed
    if not (math.isfinite(speed) and speed > 0):
        raise UserError(f"--speed {speed:g}: a positive number of times faster than the "
                        "logged times (60: an hour of play a minute)")
    if live.exists() and not live.is_dir():
        raise UserError(f"--live {live}: not a folder; name the spool folder `bacc-audit "
                        "watch --spool` follows (made when missing)")
    if out_dir is not None and _same(out_dir, live):
        raise UserError(f"--live {live}: the same folder as --out; the spool gets the night "
                        "line by line, so give each its own folder")
    return speed


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):
        return False


def feed_live(result: SimulationResult, spool: Path, speed: float) -> None:
    """Write the simulated night into `spool` at `speed`; Ctrl-C stops it between two writes
    (exit 130), the lines written so far left whole in their files."""
    lines = night_schedule(result.files, result.later, speed)
    taken = names_taken(lines, spool)
    if taken:
        raise UserError(f"{taken[0]}: already in the spool; a night fed again would be "
                        "appended to its file, which watch reports as a log altered: feed "
                        "into a new or emptied spool")
    try:
        spool.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"--live {spool}: cannot make the spool folder ({e.strerror})") from None
    files = len({line.name for line in lines})
    took = lines[-1].at if lines else 0.0
    console.err.print(
        f"simulate: feeding {count(files, 'file')} ({count(len(lines), 'line')}) into {spool} "
        f"at {speed:g} times the logged pace: about {_duration(took)}; Ctrl-C stops"
    )
    feed = Feed(lines, spool)
    try:
        feed.run()
    except KeyboardInterrupt:
        console.err.print(f"simulate: stopped after {feed.lines_written:,} of "
                          f"{len(lines):,} lines; the files in {spool} end on whole lines")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except OSError as e:
        where = e.filename or spool
        raise UserError(f"{where}: cannot write the spool there ({e.strerror})") from None
    console.out.print(f"fed {count(len(lines), 'line')} into {spool}")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.1f} hours"
