"""Writing logs as the table systems do: line by line, each when its event happens.

`bacc-audit watch` follows files that grow. To test it and to measure it, finished logs (the
sample night, a simulated night) are written again into a spool in the order and at the pace
of their events' times, `speed` times faster than real: every table's file grows at once, a
line at a time, the way a floor of tables writes through a night. A line can be written in
two pieces (`split`), as a writer that flushes mid-line would, so a reader sees half lines.

The times each round's `round_end` line was written are kept, so a benchmark can measure how
long a finding took to appear after the line that completed its round.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

RoundKey = tuple[str, str, int]


@dataclass(frozen=True)
class Line:
    at: float  # seconds after the first event, at the feed's speed
    name: str  # the file it is appended to, in the spool
    data: bytes  # with its newline
    round_end: RoundKey | None  # (table, shoe, round) when the line is a round_end


def _event_time(text: str) -> tuple[dt.datetime | None, dict | None]:
    try:
        event = json.loads(text)
        ts = dt.datetime.fromisoformat(event["ts"])
    except (ValueError, KeyError, TypeError):
        return None, None
    # A time without its offset (a line the audit refuses) goes with the line before it.
    return (ts if ts.tzinfo is not None else None), event


def schedule(files: Sequence[Path], speed: float, later: Sequence[Path] = ()) -> list[Line]:
    """Every line of `files` with the moment it is due, in time order (a file's own lines
    keep their order; a line whose time cannot be read goes with the line before it; lines
    before a file's first readable time are dropped). A `.gz` file is written out
    uncompressed, under its name without the suffix.

    `later` files are delivered after the night, whole, at the last line's moment: a file
    sent again (the simulator's `*.resent.jsonl`) carries old events' times, but comes after
    the file it resends."""
    if speed <= 0:
        raise ValueError("speed must be positive")
    rows: list[tuple[dt.datetime, int, int, Line]] = []
    late = set(later)
    for f, path in enumerate(p for p in files if p not in late):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as fh:
            data = fh.read()
        name = path.name.removesuffix(".gz")
        last: dt.datetime | None = None
        for i, raw in enumerate(data.splitlines(keepends=True)):
            ts, event = _event_time(raw.decode("utf-8", "replace"))
            # A file's lines keep their order: one stamped earlier than the line before it
            # is due with that line.
            ts = ts if last is None or (ts is not None and ts > last) else last
            if ts is None:
                continue  # nothing to place it by before the file's first good line
            last = ts
            key = None
            if event and event.get("type") == "round_end":
                key = (str(event.get("table")), str(event.get("shoe")), int(event.get("round", -1)))
            line = raw if raw.endswith(b"\n") else raw + b"\n"
            rows.append((ts.astimezone(dt.UTC), f, i, Line(0.0, name, line, key)))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    if not rows:
        return []
    start = rows[0][0]
    out = [
        Line((ts - start).total_seconds() / speed, line.name, line.data, line.round_end)
        for ts, _, _, line in rows
    ]
    end = out[-1].at
    for path in later:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as fh:
            data = fh.read()
        out += _whole(data, path.name.removesuffix(".gz"), end)
    return out


def _whole(data: bytes, name: str, at: float) -> list[Line]:
    """A file delivered at once: all its lines due at `at`."""
    return [Line(at, name, raw if raw.endswith(b"\n") else raw + b"\n", None)
            for raw in data.splitlines(keepends=True)]


# A lying night's *.jsonl.later files are delivered this many seconds (real time, whatever
# the speed) after its last line: after the watch's next sweep (auditor.jobs.watch sweeps at
# most every 10 s), so that the night is judged before they come, as the lies need.
LATE_DELIVERY = 15.0


def night_schedule(files: Sequence[Path], later: Sequence[Path], speed: float) -> list[Line]:
    """What `simulate --live` writes: a simulated night's `files` at `speed` (a file sent
    again, `*.resent.*`, after the night, whole), then its `later` files (`*.jsonl.later`,
    the lies delivered after the night's audit) LATE_DELIVERY seconds after, whole, under
    their `.jsonl` names so that a watched spool picks them up."""
    resent = [f for f in files if ".resent." in f.name]
    lines = schedule(files, speed, later=resent)
    end = (lines[-1].at if lines else 0.0) + LATE_DELIVERY
    for path in later:
        lines += _whole(path.read_bytes(), path.name.removesuffix(".later"), end)
    return lines


def names_taken(lines: Sequence[Line], spool: Path) -> list[Path]:
    """The files of `spool` that `lines` would be appended to: a spool fed twice would have
    the second night's lines appended to the first's files, which a watch reads as logs
    altered."""
    return sorted(p for name in {line.name for line in lines} if (p := spool / name).exists())


@dataclass
class Feed:
    """Writes a schedule into `spool` in real time (`run`), or in a thread (`start`, `join`).

    `written[key]` is the wall-clock time (time.time()) a round's round_end line was first
    complete in a file. With `split`, the last line of each write is written in two
    pieces `split` seconds apart, so a reader meets half lines.
    """

    lines: Sequence[Line]
    spool: Path
    split: float = 0.0
    written: dict[RoundKey, float] = field(default_factory=dict)
    lines_written: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def run(self, on_line: Callable[[Line], None] | None = None) -> None:
        self.spool.mkdir(parents=True, exist_ok=True)
        handles: dict[str, BinaryIO] = {}
        t0 = time.monotonic()
        try:
            i = 0
            while i < len(self.lines) and not self.stop.is_set():
                due = t0 + self.lines[i].at
                wait = due - time.monotonic()
                if wait > 0:
                    self.stop.wait(wait)
                    continue
                # Everything due by now, one write per line, flushed at once.
                batch = []
                now = time.monotonic()
                while i < len(self.lines) and t0 + self.lines[i].at <= now:
                    batch.append(self.lines[i])
                    i += 1
                rest: tuple[BinaryIO, bytes] | None = None
                for n, line in enumerate(batch):
                    fh = handles.get(line.name)
                    if fh is None:
                        fh = handles[line.name] = (self.spool / line.name).open("ab")
                    if self.split and n == len(batch) - 1:
                        half = len(line.data) // 2
                        fh.write(line.data[:half])
                        rest = (fh, line.data[half:])
                    else:
                        fh.write(line.data)
                for fh in handles.values():
                    fh.flush()
                if rest is not None:  # a reader may look now and find half a line
                    time.sleep(self.split)
                    rest[0].write(rest[1])
                    rest[0].flush()
                wall = time.time()
                self.lines_written += len(batch)  # written, whatever on_line does
                for line in batch:
                    if line.round_end is not None:  # a resent line is not the round's end
                        self.written.setdefault(line.round_end, wall)
                    if on_line:
                        on_line(line)
        finally:
            for fh in handles.values():
                fh.close()

    def start(self) -> Feed:
        self._thread = threading.Thread(target=self.run, name="feed", daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the feed to finish; True when it has."""
        assert self._thread is not None
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def done(self) -> bool:
        return self.lines_written == len(self.lines)
