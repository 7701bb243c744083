"""What a careless user or a hostile one types, for the fuzz tests of the commands and of the
board (tests/cli/test_fuzz_commands.py, tests/board/test_fuzz_routes.py at a small size,
bench/odd_input.py at a large one): odd dates, numbers, ids, names and paths, each command's
options and the kind of value each takes, and how an outcome is judged.

A command may answer 0, 1 or 2, with a sentence for 2; never 3 (internal error), a
traceback, or no answer within HANG_SECONDS. A board route may answer anything but 500:
a refusal is a page of the board, or JSON under /api/.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

HANG_SECONDS = 60  # a command that has not answered by then is counted as hung


def examples(small: int) -> int:
    """How many draws a fuzz test makes: `small` in the suite; bench/odd_input.py sets
    BACC_FUZZ_EXAMPLES to run the same tests at a large size."""
    return int(os.environ.get("BACC_FUZZ_EXAMPLES", small))


def tally(record: dict[str, Any]) -> None:
    """One outcome, appended as a JSON line to the file BACC_FUZZ_TALLY names (the bench
    counts them); nothing when it is unset, as in the suite."""
    where = os.environ.get("BACC_FUZZ_TALLY")
    if where:
        with open(where, "a") as fh:
            fh.write(json.dumps(record) + "\n")


def wide(text: str) -> str:
    """`text` in fullwidth forms (U+FF10 on): letters and digits that are not ASCII."""
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalnum() else c for c in text)


ODD_DATES = [
    "9999-12-31", "0001-01-01", "1899-12-31", "1900-01-01", "9998-12-31", "2026-02-30",
    "2026-13-01", "2026-11-28", "2026-11-29", "20261128", "2026-W48-6", "²", wide("2026-11-28"),
    "2026-11-28T06:00", "-2026-11-28", "+2026-11-28", " 2026-11-28 ", "", " ", "0000-00-00",
    "2026-11-28\x00", "2026-11-28\n", "9" * 40, "2026-11-28..2026-11-27", "1970-01-01",
]
ODD_SHIFT_NAMES = ["grave", "day", "swing", "GRAVE", "", "nope", "grave/extra", "²", "\x00"]
ODD_NUMBERS = [
    "0", "-1", "1", "2", "16", "17", "²", "1e309", "-1e309", "nan", "inf", "-inf", "0x10",
    "1_000", "99999999999999999999", "-99999999999999999999", "1.5", "", " ", "١٢",
    "9" * 5000, "0.0001", "1e-320",
]
ODD_IDS = [
    "F000000000000", "F6ff51cc008a", "F6ff51cc008a33", "6ff51cc008a3", "f6FF51CC008A3", "F",
    "", " ", "list", "²", "F" + "0" * 5000, "draw.banker_missed|MB-01|x", "|", "||||", "\x00",
    "'; DROP TABLE findings; --", "%00", "../../etc/passwd", wide("F000000000000"),
]
ODD_NAMES = [
    "MB-01", "mb-01", "P1", "p1", "P9", "", " ", "*", "%", "_", "'", '"', "\\", "\x00",
    "MB-01\n", "²", "a" * 3000, "../x", "MB-01' OR '1'='1", wide("MB-01"), "🂡",
]
ODD_CODES = [
    "draw.banker_missed", "draw.*", "*", "**", "draw.banker_miss", "DRAW.BANKER_MISSED",
    "log.%", "log._", "", "\x00", "²", "a" * 3000, "vig.wrong_amount,draw.*",
]
ODD_TEXT = ["", " ", "x", "²", "\x00", "a\nb", "a" * 5000, "🂡", "<script>alert(1)</script>"]
SEVERITIES = ["critical", "major", "minor", "info", "CRITICAL", "", "x", "²", "major,minor"]


def odd_paths(base: Path) -> dict[str, Path]:
    """Paths of every kind a user may give, made under `base`: a folder, an empty one, a
    file that is no database, a named pipe, a socket, a link to nothing, a link loop, a
    device, a place the system refuses, a missing folder, a name with a newline, a name
    too long, a read-only file."""
    base.mkdir(parents=True, exist_ok=True)
    made: dict[str, Path] = {}
    folder = base / "a folder"
    folder.mkdir(exist_ok=True)
    made["folder"] = folder
    made["text file"] = base / "notes.txt"
    made["text file"].write_text("not a database\n")
    made["fifo"] = base / "pipe.jsonl"
    if not made["fifo"].exists():
        os.mkfifo(made["fifo"])
    made["dangling link"] = base / "gone.jsonl"
    if not made["dangling link"].is_symlink():
        made["dangling link"].symlink_to(base / "nowhere")
    made["link loop"] = base / "loop.duckdb"
    if not made["link loop"].is_symlink():
        made["link loop"].symlink_to(made["link loop"])
    made["missing"] = base / "no such folder" / "x.duckdb"
    made["newline"] = base / "two\nlines.pdf"
    made["too long"] = base / ("n" * 300 + ".pdf")
    made["dev null"] = Path("/dev/null")
    made["dev full"] = Path("/dev/full")
    made["proc"] = Path("/proc/x.pdf")
    made["root"] = Path("/")
    made["dot"] = Path(".")
    made["empty"] = Path("")
    return made


# -- each command's options, and the kind of value each takes ------------------------------

Kind = str  # date, shift, range, number, float, id, name, code, severity, text, path, ...


@dataclass(frozen=True)
class Option:
    flag: str  # "--date", or "" for a positional argument
    kind: Kind
    choices: tuple[str, ...] = ()  # for an enum


def _opts(*pairs: tuple[str, Kind] | Option) -> tuple[Option, ...]:
    return tuple(p if isinstance(p, Option) else Option(*p) for p in pairs)


FORMATS = Option("--format", "enum", ("jsonl", "csv", "table", "pdf", "html", "x", ""))
COMMANDS: dict[str, tuple[Option, ...]] = {
    "ingest": _opts(("", "log path"), ("--db", "db path"), ("--json", "flag")),
    "audit": _opts(("--db", "db path"), ("--config", "config path"), ("--rerun", "range"),
                   ("--fail-on", "severity"), ("--json", "flag")),
    "findings": _opts(("--db", "db path"), FORMATS, ("--table", "name"), ("--pit", "name"),
                      ("--code", "code"), ("--severity", "severity"), ("--date", "date"),
                      ("--shift", "shift"), ("--config", "config path")),
    "dealers": _opts(("--db", "db path"), FORMATS, ("--date", "date"), ("--shift", "shift"),
                     ("--from", "date"), ("--to", "date"), ("--config", "config path")),
    "codes": _opts(("", "code"), ("--json", "flag"), ("--markdown", "flag")),
    "report": _opts(("--shift", "shift"), ("--date", "date"), ("--pit", "name"),
                    ("--table", "name"), ("--out", "out path"),
                    Option("--format", "enum", ("pdf", "html", "x")), ("--db", "db path"),
                    ("--config", "config path")),
    "doctor": _opts(("--db", "db path"), ("--config", "config path"), ("--spool", "path"),
                    ("--archive", "path")),
    "odds": _opts(("--decks", "number"), ("--variant", "name"), ("--jurisdiction", "name"),
                  ("--game", "name"), ("--json", "flag")),
    "nightly": _opts(("--spool", "path"), ("--date", "date"), ("--archive", "path"),
                     ("--fail-on", "fail on"), ("--file-ingested", "enum-ingested"),
                     ("--json", "flag"), ("--db", "new db path"), ("--config", "config path")),
    "runs": _opts(("--db", "db path"), ("--limit", "number"), ("--command", "name"),
                  Option("--status", "enum", ("running", "done", "failed", "interrupted",
                                              "x")), ("--json", "flag")),
    "ack": _opts(("", "id"), ("--by", "text"), ("--disposition", "text"), ("--note", "text"),
                 ("--list", "flag"), ("--json", "flag"), ("--db", "db path")),
    "simulate": _opts(("--out", "out folder"), ("--tables", "small number"),
                      ("--hours", "float"), ("--seed", "number"),
                      ("--deviation-rate", "float"), ("--games", "name"), ("--bulk", "flag"),
                      ("--date", "date"), ("--replace", "flag")),
    "backfill": _opts(("", "log path"), ("--engine", "name"), ("--workers", "number"),
                      ("--work-dir", "path"), ("--partition-mb", "number"),
                      ("--fail-on", "severity"), ("--json", "flag"), ("--db", "new db path"),
                      ("--config", "config path")),
    "verify": _opts(("--db", "db path"), ("--against", "path"), ("--trust-root", "path"),
                    ("--fast", "flag"), ("--config", "config path"), ("--json", "flag")),
    "close-day": _opts(("", "date"), ("--db", "db path"), ("--config", "config path"),
                       ("--json", "flag")),
    "signoff": _opts(("", "path"), ("--by", "text"), ("--title", "text"), ("--note", "text"),
                     ("--db", "db path"), ("--json", "flag")),
    "notice list": _opts(("--db", "db path"), ("--config", "config path"), ("--json", "flag")),
    "notice withdraw": _opts(("", "number"), ("--by", "text"), ("--reason", "text"),
                             ("--db", "db path")),
}
# `watch` runs until stopped: tests/cli/test_fuzz_commands.py gives it its own test.
# `notice add`'s times are another issue's (28); its other options are fuzzed here.
COMMANDS["notice add"] = _opts(
    ("--pit", "name"), ("--procedure", "number"), ("--effective", "date"),
    Option("--recipient", "enum", ("division", "surveillance", "x")), ("--given-at", "date"),
    ("--by", "text"), ("--tables", "name"), ("--not-written", "flag"), ("--note", "text"),
    ("--late", "flag"), ("--db", "db path"), ("--config", "config path"), ("--json", "flag"),
)


@dataclass
class Places:
    """What the paths of a fuzz run may be: the odd ones, and the good ones."""

    odd: dict[str, Path]
    db: Path  # the sample night's audit database (a copy the run may change)
    config: Path
    logs: list[Path]  # log files a command may ingest
    spool: Path  # a folder holding a log
    scratch: Path  # where outputs and new databases go


def values(kind: Kind, places: Places) -> st.SearchStrategy[str]:
    """The values a fuzz run gives an option of `kind`: odd ones, and good ones (so that a
    command gets far enough to meet the odd one in another option)."""
    odd = [str(p) for p in places.odd.values()]
    text = st.text(max_size=24)
    pick: dict[Kind, st.SearchStrategy[str]] = {
        "date": st.one_of(st.sampled_from(ODD_DATES),
                          st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)).map(str), text),
        "shift": st.one_of(
            st.builds(lambda d, n: f"{d}/{n}", st.sampled_from(ODD_DATES),
                      st.sampled_from(ODD_SHIFT_NAMES)),
            st.sampled_from(["2026-11-28/grave", "9999-12-31/grave", "0001-01-01/day"]), text),
        "range": st.one_of(st.builds(lambda a, b: f"{a}..{b}", st.sampled_from(ODD_DATES),
                                     st.sampled_from(ODD_DATES)),
                           st.sampled_from(ODD_DATES), text),
        "number": st.one_of(st.sampled_from(ODD_NUMBERS), st.integers().map(str), text),
        "small number": st.one_of(st.sampled_from(["0", "-1", "²", "nan", "1e9", "", "2",
                                                   "1", "99999999999999999999"]),
                                  st.integers(-3, 3).map(str)),
        "float": st.one_of(st.sampled_from(ODD_NUMBERS[:-2]),
                           st.floats(allow_nan=True, allow_infinity=True).map(repr), text),
        "id": st.one_of(st.sampled_from(ODD_IDS), text),
        "name": st.one_of(st.sampled_from(ODD_NAMES), text),
        "code": st.one_of(st.sampled_from(ODD_CODES), text),
        "severity": st.one_of(st.sampled_from(SEVERITIES), text),
        "fail on": st.one_of(st.sampled_from(
            [*SEVERITIES, "major:unacknowledged", "major:", ":unacknowledged", "x:y"]), text),
        "enum-ingested": st.sampled_from(["keep", "move", "link", "copy", "", "²"]),
        "text": st.one_of(st.sampled_from(ODD_TEXT), text),
        "path": st.sampled_from([*odd, str(places.spool), str(places.scratch)]),
        "db path": st.sampled_from([*odd, str(places.db)]),
        "new db path": st.sampled_from([*odd, str(places.scratch / "new.duckdb")]),
        "config path": st.sampled_from([*odd, str(places.config)]),
        "out path": st.sampled_from([*odd, str(places.scratch / "r.html"),
                                     str(places.scratch)]),
        "out folder": st.sampled_from([*odd, str(places.scratch / "sim")]),
        "log path": st.sampled_from([*odd, *map(str, places.logs), str(places.spool)]),
    }
    return pick[kind]


@st.composite
def arguments(draw: st.DrawFn, command: str, places: Places) -> list[str]:
    """`command`'s words and a draw of its options: each given or not, each value of its
    kind; a flag given or not."""
    args = command.split()
    for opt in COMMANDS[command]:
        if not draw(st.booleans()):
            continue
        if opt.kind == "flag":
            args.append(opt.flag)
            continue
        if opt.kind == "enum":
            value = draw(st.sampled_from(opt.choices))
        else:
            value = draw(values(opt.kind, places))
        if opt.flag == "--hours":  # a good value simulates that many hours: keep it short
            value = draw(st.sampled_from(["0.05", "0", "-1", "nan", "inf", "14", "²", "1e9"]))
        args += [opt.flag, value] if opt.flag else [value]
    if command.startswith("notice") and not args[2:]:
        args.append("--help")
    return args


# -- judging an outcome -------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    code: int | None  # None: no answer within HANG_SECONDS
    out: str
    err: str
    seconds: float

    @property
    def verdict(self) -> str:
        """"ok", or what is wrong: "exit 3", "traceback", "hang", "no sentence", "exit N"."""
        if self.code is None:
            return "hang"
        if "Traceback" in self.err or "Traceback" in self.out:
            return "traceback"
        if self.code == 3 or "internal error" in self.err:
            return "exit 3"
        if self.code not in (0, 1, 2):
            return f"exit {self.code}"
        if self.code == 2 and not _sentence(self.err + self.out):
            return "no sentence"
        return "ok"


def _sentence(text: str) -> bool:
    """An error said in words: `error: ...`, click's usage box, a JSON refusal or a JSON
    summary's errors or problems, nightly's problems, doctor's FAIL lines."""
    return any(w in text for w in ("error: ", "Error", '"error"', "problem: ", "FAIL ")) or (
        re.search(r'"(errors|problems|message)": \[?\s*"', text) is not None)


class Hung(BaseException):
    """Raised in the main thread by the alarm: the command did not answer in time."""


@contextmanager
def alarm(seconds: int) -> Iterator[None]:
    """Interrupt the block (main thread only) after `seconds`."""

    def ring(signum: int, frame: Any) -> None:
        raise Hung

    before = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def run_bounded(run: Callable[..., Any], args: list[str], seconds: int = HANG_SECONDS) -> Outcome:
    """`run(*args)` (helpers.cli's in-process runner), judged; a hang is cut at `seconds`."""
    import time

    t0 = time.monotonic()
    try:
        with alarm(seconds):
            r = run(*args)
    except Hung:
        return Outcome(None, "", "", time.monotonic() - t0)
    return Outcome(r.code, r.out, r.err, time.monotonic() - t0)


# -- the board ---------------------------------------------------------------------------------

BOARD_PARAMS = ("severity", "code", "pit", "table", "date", "shift", "since", "limit",
                "withdrawn", "round", "shoe", "next", "acked")


def board_value(places_ok: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from([*ODD_DATES, *ODD_NUMBERS, *ODD_IDS, *ODD_NAMES, *ODD_CODES,
                         *SEVERITIES, *places_ok, "9999-12-31/grave", "2026-11-28/grave"]),
        st.text(max_size=40),
    )


@st.composite
def board_request(draw: st.DrawFn, ids: list[str]) -> tuple[str, str, list[tuple[str, str]],
                                                             dict[str, str]]:
    """A method, a path of the board (a route's, with odd segments, or none), query
    parameters and headers."""
    segment = draw(st.one_of(st.sampled_from([*ids, *ODD_IDS]), st.text(max_size=30)))
    path = draw(st.sampled_from([
        "/", "/feed", "/ack", "/floor", f"/finding/{segment}", f"/finding/{segment}/ack", "/round",
        "/login",
        "/logout", "/api/findings", "/api/stream", "/healthz", f"/static/{segment}",
        f"/{segment}", f"/api/{segment}", "/finding/", "//", "/floor/",
        "/notices", f"/notices/{segment}/withdraw", "/dealers", f"/dealers/{segment}",
        "/reports", f"/reports/{segment}/v1", f"/reports/{segment}/v{segment}/pdf",
    ]))
    method = draw(st.sampled_from(["GET", "GET", "GET", "POST", "HEAD", "PUT", "DELETE"]))
    params = draw(st.lists(st.tuples(st.sampled_from(BOARD_PARAMS), board_value(ids)),
                           max_size=5))
    headers: dict[str, str] = {}
    if draw(st.booleans()):
        headers["Last-Event-ID"] = draw(st.sampled_from([*ODD_NUMBERS, "1", "22", "23"]))
    return method, path, params, headers
