"""Simulated history: several gaming days in one folder, or one more day after a previous
simulation's, each table's and pit's seq going on from where the day before left it, as a real
table system numbers one stream across days. Without it every day starts its streams at seq 1
again, and ingest refuses the second day's files as the first's altered (log.altered).

A day is played as `simulate` plays a night, numbered from 1, then moved on by each stream's
last seq so far: the day's own seq arithmetic (a skipped seq, a line resent, a card delivered
later at a seq left free) stays as it was, only shifted.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import re
import time
from dataclasses import replace as replace_settings
from pathlib import Path

from auditor.simulate.output import SimulationResult, prepare_out_dir, write_ground_truth
from auditor.simulate.planted import NightSettings, check_settings, play_night

_STREAM = re.compile(r'"(table|pit)":"([^"\\]+)"')
_SEQ = re.compile(r'"seq":(\d+)')
# A simulated day's files, by the gaming day that names them (DATE_TABLE.jsonl, and the pits',
# resent and later files of that day).
_DAY_FILE = re.compile(r"^(\d{4}-\d{2}-\d{2})_.+\.jsonl(\.gz|\.later)?$")


def _stream(line: str) -> str | None:
    """The stream a line's seq belongs to: its pit for a written notice, else its table."""
    found: dict[str, str] = {m.group(1): m.group(2) for m in _STREAM.finditer(line)}
    if '"type":"procedure_notice"' in line and "pit" in found:
        return "pit:" + found["pit"]
    return "table:" + found["table"] if "table" in found else None


def _read(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()


def _write(path: Path, text: str) -> None:
    if path.suffix != ".gz":
        path.write_text(text)
        return
    # mtime=0 keeps the bytes (and the hash) the same run after run, as the generator does.
    with path.open("wb") as fh, gzip.GzipFile(filename="", fileobj=fh, mode="wb", mtime=0) as gz:
        gz.write(text.encode())


def seq_tops(files: list[Path]) -> dict[str, int]:
    """The last seq of each stream ("table:MB-01", "pit:P1") in these logs, gzip ones too:
    where a later day's streams go on from."""
    tops: dict[str, int] = {}
    for f in files:
        for line in _read(f).splitlines():
            s = _stream(line)
            m = _SEQ.search(line)
            if s and m:
                tops[s] = max(tops.get(s, 0), int(m.group(1)))
    return tops


def continue_streams(files: list[Path], tops: dict[str, int]) -> None:
    """Renumber the seq of every line of `files` (a day's logs, each stream from 1) so that
    each stream goes on from `tops` (stream -> last seq so far), in place; then update `tops`
    with the day's last seqs."""
    here: dict[str, int] = {}
    for f in files:
        out = []
        for line in _read(f).splitlines(keepends=True):
            s = _stream(line)
            m = _SEQ.search(line)
            if s and m:
                seq = int(m.group(1)) + tops.get(s, 0)
                line = line[: m.start(1)] + str(seq) + line[m.end(1):]
                here[s] = max(here.get(s, 0), seq)
            out.append(line)
        _write(f, "".join(out))
    for s, top in here.items():
        tops[s] = max(tops.get(s, 0), top)


def last_procedures(files: list[Path]) -> dict[str, int]:
    """The procedure in force at each table at the end of these logs (a day's): the last
    table_open or procedure_change that declares one, by seq."""
    last: dict[str, tuple[int, int]] = {}
    for f in files:
        for line in _read(f).splitlines():
            if '"procedure":' not in line or not (
                '"type":"table_open"' in line or '"type":"procedure_change"' in line
            ):
                continue
            e = json.loads(line)
            if isinstance(e.get("procedure"), int) and e["seq"] >= last.get(e["table"], (0, 0))[0]:
                last[e["table"]] = (e["seq"], e["procedure"])
    return {table: procedure for table, (_, procedure) in last.items()}


def left_open(files: list[Path]) -> set[str]:
    """The tables whose stream in these logs (a day's) ends with a table_open: a night cut
    whose file goes on with the table's next opening (planted night_cut). The next day of the
    history goes on from that opening instead of opening the table again, which would leave
    the morning's opening unclosed: a log.table_unclosed nobody planted."""
    last: dict[str, tuple[int, bool]] = {}
    for f in files:
        for line in _read(f).splitlines():
            s, m = _stream(line), _SEQ.search(line)
            if s and m and s.startswith("table:") and int(m.group(1)) >= last.get(s, (0, 0))[0]:
                last[s] = (int(m.group(1)), '"type":"table_open"' in line)
    return {s.removeprefix("table:") for s, (_, opening) in last.items() if opening}


def _drop_opening(files: list[Path], day: dt.date, table: str) -> None:
    """Remove the table_open that starts `table`'s own file of `day` (its day numbered from
    1), and number the rest of its stream one lower, in every file of the day."""
    own = next((f for f in files if f.name.split(".")[0] == f"{day:%Y-%m-%d}_{table}"
                and ".resent." not in f.name), None)
    lines = _read(own).splitlines(keepends=True) if own else []
    if own is None or not lines or '"type":"table_open"' not in lines[0]:
        return
    _write(own, "".join(lines[1:]))
    continue_streams(files, {f"table:{table}": -1})


def day_files(folder: Path) -> dict[dt.date, list[Path]]:
    """A simulation folder's logs by the gaming day that names them (not in subfolders)."""
    days: dict[dt.date, list[Path]] = {}
    for p in sorted(folder.iterdir()) if folder.is_dir() else []:
        m = _DAY_FILE.match(p.name)
        if m and p.is_file():
            days.setdefault(dt.date.fromisoformat(m.group(1)), []).append(p)
    return days


def previous_days(folder: Path) -> tuple[dt.date, dict[str, int]]:
    """What a simulation continuing `folder` goes on from: its last gaming day, and the last
    seq of each stream over all its logs. ValueError, saying why, when `folder` holds no
    simulated logs."""
    if not folder.is_dir():
        raise ValueError(f"--continue {folder}: no such folder; give the --out of a previous "
                         "bacc-audit simulate")
    days = day_files(folder)
    if not days:
        raise ValueError(f"--continue {folder}: no simulated logs there (files named "
                         "DATE_TABLE.jsonl); give the --out of a previous bacc-audit simulate")
    return max(days), seq_tops([p for files in days.values() for p in files])


def simulate_days(
    out: Path,
    settings: NightSettings,
    days: int = 1,
    replace: bool = False,
    continuing: bool = False,
) -> SimulationResult:
    """`days` consecutive gaming days into `out`, from `settings.day` on, each as `simulate`
    plays a night, each table's and pit's seq going on across the days; the ground truth of
    every day in one ground_truth.ndjson. The first day is the bytes `simulate` writes for it;
    each later day draws its cards and deviations from the seed and its date (the same
    dealers at each table).

    `continuing`: `out` holds a previous simulation (see `previous_days`); the days go on
    after its last one (`settings.day` is ignored), its streams' seqs continue, and the new
    days' ground truth is added to the folder's."""
    if days < 1:
        raise ValueError("--days must be at least 1")
    check_settings(settings)
    started = time.perf_counter()
    tops: dict[str, int] = {}
    procedures: dict[str, int] = {}  # table -> the procedure in force as its last day ended
    still_open: set[str] = set()  # tables whose last day ended with their next opening
    first = settings.day
    truth: list[dict] = []
    if continuing:
        last, tops = previous_days(out)
        procedures = last_procedures(day_files(out)[last])
        still_open = left_open(day_files(out)[last])
        first = last + dt.timedelta(days=1)
        truth_file = out / "ground_truth.ndjson"
        if truth_file.is_file():
            truth = [json.loads(line) for line in truth_file.read_text().splitlines() if line]
    else:
        prepare_out_dir(out, replace)
    total: SimulationResult | None = None
    for k in range(days):
        day = first + dt.timedelta(days=k)
        # A fresh history's first day is simulate's night of that date, byte for byte.
        salt = "" if k == 0 and not continuing else day.isoformat()
        taken = set(day_files(out).get(day, []))
        if taken:  # never over a day already there: its files would read as altered
            raise ValueError(f"{out}: the logs of {day} are there already ({min(taken).name})")
        opening = tuple(sorted(procedures.items()))
        played = play_night(out, replace_settings(settings, day=day, salt=salt, opening=opening))
        procedures.update(last_procedures(played.files))
        for table in sorted(still_open):  # open since its morning opening: not opened again
            _drop_opening(played.files + played.later, day, table)
        still_open = left_open(played.files)
        if tops:
            continue_streams(played.files + played.later, tops)
        else:  # the history's first day: its streams start at 1, as they are
            tops = seq_tops(played.files + played.later)
        truth += played.deviations + played.not_planted
        if total is None:
            total = played
            total.deviations = list(played.deviations)
            total.not_planted = list(played.not_planted)
        else:
            total.not_planted += played.not_planted
            total.files += played.files
            total.later += played.later
            total.rounds += played.rounds
            total.events += played.events
            total.deviations += played.deviations
    assert total is not None
    total.ground_truth = write_ground_truth(out, truth)
    total.seconds = time.perf_counter() - started
    return total
