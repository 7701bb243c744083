"""The one exit rule of the commands that load or judge logs (`ingest`, `audit`, `nightly`,
`backfill`, `watch`): a run's exit code from its input problems, its files and its findings;
and the sentence that says what became of the files.

Each command says what it counts; what it leaves out is its own choice, on the record here:

- `ingest` counts the paths that gave no file, its files and their quarantined lines;
- `audit` counts the findings it opened (`failing(..., standing=False)`);
- `backfill` counts its files and quarantined lines, and the findings of its run still
  standing; a path that gives no file is refused before it starts (UserError), never counted;
- `nightly` counts its own problems (paths that gave no file, unreadable or empty files,
  files it could not file, a gaming day without rounds) and the findings standing in the
  gaming day or opened by its run; a quarantined line or an altered file counts only through
  its `log.*` finding;
- `watch`, stopped cleanly, exits 0 whatever it found (the board and `findings` say that).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence

import duckdb

from auditor.errors import EXIT_FINDINGS, EXIT_INPUT, EXIT_OK, UserError
from auditor.rules.codes import at_least
from auditor.store.db import single
from auditor.words import count

# A file in one of these is an input problem (exit 2): its table system delivered nothing
# readable.
INPUT_STATUSES = ("unreadable", "empty")
# A file in one of these is a finding (exit 1): refused as altered, recorded as log.altered.
FINDING_STATUSES = ("refused_altered",)
# The files `ingest` and `backfill` say as errors on stderr, beside their counts.
ERROR_STATUSES = (*INPUT_STATUSES, *FINDING_STATUSES)


def exit_code(
    *,
    problems: int = 0,
    files: Iterable[str] = (),
    quarantined: int = 0,
    failing: int = 0,
) -> int:
    """2 for an input problem (`problems`, or a file whose status is in INPUT_STATUSES); 1
    for a quarantined line, a file refused as altered or a failing finding; else 0."""
    statuses = list(files)
    if problems or any(s in INPUT_STATUSES for s in statuses):
        return EXIT_INPUT
    if quarantined or failing or any(s in FINDING_STATUSES for s in statuses):
        return EXIT_FINDINGS
    return EXIT_OK


def failing(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    graver: Sequence[str],
    *,
    standing: bool = True,
    window: tuple[dt.datetime, dt.datetime] | None = None,
    unacknowledged: bool = False,
    windows: Sequence[tuple[dt.datetime, dt.datetime]] = (),
) -> int:
    """The findings at one of the `graver` severities (rules.codes.at_least) that fail run
    `run_id`: those it recorded that stand now, or with `standing` false every row it opened
    (one a later pass of the same run withdrew included); with `window`, also every finding
    standing in [start, end), whoever recorded it; with `unacknowledged`, only those nobody
    has acknowledged (`bacc-audit ack`, the board); `windows`: several such windows (the
    gaming days one nightly run reports)."""
    source = "current_findings" if standing else "findings"
    mine = "run_id = ?" if standing else "run_id = ? AND status = 'open'"
    params: list[object] = [run_id]
    for w in [*([window] if window is not None else []), *windows]:
        mine = f"({mine} OR (ts >= ? AND ts < ?))"
        params += list(w)
    if unacknowledged:
        mine += " AND fingerprint NOT IN (SELECT fingerprint FROM acknowledgements)"
    return int(single(
        con,
        f"SELECT count(*) FROM {source} WHERE {mine} "
        f"AND severity IN ({', '.join('?' for _ in graver)})",
        [*params, *graver],
    )[0])


# `--fail-on SEVERITY:unacknowledged` (nightly): acknowledged findings do not fail the run.
UNACKNOWLEDGED = ":unacknowledged"


def fail_rule(fail_on: str) -> tuple[tuple[str, ...], bool]:
    """A --fail-on value: the severities that fail a run (rules.codes.at_least), and whether
    only findings nobody has acknowledged count (`major:unacknowledged`)."""
    severity, sep, rest = fail_on.partition(":")
    if sep and sep + rest != UNACKNOWLEDGED:
        raise UserError(
            f"--fail-on {fail_on}: a severity, or a severity and {UNACKNOWLEDGED} (like "
            f"critical{UNACKNOWLEDGED}: findings someone acknowledged do not count)"
        )
    return at_least(severity), bool(sep)


def failing_on(
    con: duckdb.DuckDBPyConnection,
    run_id: int,
    fail_on: str,
    *,
    window: tuple[dt.datetime, dt.datetime] | None = None,
    windows: Sequence[tuple[dt.datetime, dt.datetime]] = (),
) -> int:
    """`failing` under a --fail-on value (`fail_rule`): nightly's rule."""
    graver, unacknowledged = fail_rule(fail_on)
    return failing(con, run_id, graver, window=window, unacknowledged=unacknowledged,
                   windows=windows)


def files_sentence(statuses: Counter[str], events: int, quarantined: int) -> str:
    """What became of the files (by status), the events loaded and the lines quarantined:
    the last line of `ingest` and `backfill`, and nightly's ingest line."""
    empty = f", {statuses['empty']} empty" if statuses["empty"] else ""
    return (
        f"{count(sum(statuses.values()), 'file')}: {statuses['ingested']} ingested, "
        f"{statuses['already_ingested']} already ingested, "
        f"{statuses['refused_altered']} refused, {statuses['unreadable']} unreadable{empty}; "
        f"{count(events, 'event')} loaded, {count(quarantined, 'line')} quarantined"
    )
