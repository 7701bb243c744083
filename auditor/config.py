"""The property's configuration: time zone, gaming day, shifts, approved procedures, house
options. Every command works without one; a config only changes the defaults.

Looked up as `--config PATH`, else `BACC_AUDIT_CONFIG`, else `./bacc-audit.toml` when it
exists. The documented example is `docs/property.example.toml`.
"""

from __future__ import annotations

import datetime as dt
import difflib
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from auditor.errors import UserError

CONFIG_ENV = "BACC_AUDIT_CONFIG"
DEFAULT_NAME = "bacc-audit.toml"


@dataclass(frozen=True)
class Shift:
    name: str
    start: dt.time  # local
    end: dt.time  # local; an end at or before the start runs past midnight


@dataclass(frozen=True)
class SigningConfig:
    """The `[signing]` section: the key every filed PDF is signed with (auditor/report/
    signing.py, docs/signing.md). The password is never in the config, which is read by every
    command and often kept in version control: it comes from a file only the job's user can
    read, or from an environment variable the service manager sets."""

    pkcs12: Path  # a PKCS#12 (.p12, .pfx) file holding the key and its certificate
    password_file: Path | None = None
    password_env: str | None = None
    # Certificates (PEM or DER) a signature must chain to for `verify --against` to call it
    # trusted; None: checked against the certificate the PDF carries only.
    trust_root: Path | None = None


DEFAULT_SHIFTS = (
    Shift("day", dt.time(6), dt.time(14)),
    Shift("swing", dt.time(14), dt.time(22)),
    Shift("grave", dt.time(22), dt.time(6)),
)


@dataclass(frozen=True)
class PropertyConfig:
    name: str = "Property"
    # None: take the offset the logs carry (see `zone`).
    time_zone: str | None = None
    gaming_day_start: dt.time = dt.time(6)
    shifts: tuple[Shift, ...] = DEFAULT_SHIFTS
    # Approved procedure per pit (the baseline the audit checks tables against).
    pit_procedures: dict[str, int] = field(default_factory=dict)
    # Rule-pack house options chosen by the property: "pack-id:dotted.key" -> value.
    house_options: dict[str, Any] = field(default_factory=dict)
    # Where `bacc-audit nightly` files the shift PDFs; None: its --archive or the default.
    archive: Path | None = None
    # The live board's [board] table as written (auditor.board.settings checks it).
    board: dict[str, Any] = field(default_factory=dict)
    # The [signing] section; None: PDFs are filed unsigned, and their covers say so.
    signing: SigningConfig | None = None
    source: str = "defaults (no config file)"

    def zone_for(self, con: Any) -> dt.tzinfo:
        """The zone to show times in: configured, else the offset most of the logs carry."""
        if self.time_zone:
            return ZoneInfo(self.time_zone)
        return self.zone(log_offset(con))

    def zone_known(self, con: Any) -> dt.tzinfo | None:
        """zone_for, or None while it is not known yet: no zone configured and no log in the
        database (zone_for would say UTC for now). What caches the zone waits for this."""
        if self.time_zone:
            return ZoneInfo(self.time_zone)
        offset = log_offset(con)
        return None if offset is None else self.zone(offset)

    def zone(self, log_offset_minutes: int | None = None) -> dt.tzinfo:
        """The property's zone; without one configured, the fixed offset the logs use."""
        if self.time_zone:
            return ZoneInfo(self.time_zone)
        return dt.timezone(dt.timedelta(minutes=log_offset_minutes or 0))

    def shift(self, name: str) -> Shift:
        for s in self.shifts:
            if s.name == name:
                return s
        names = ", ".join(s.name for s in self.shifts)
        raise UserError(f"no shift named {name!r} (this property's shifts: {names})")

    def gaming_day_window(self, day: dt.date, zone: dt.tzinfo) -> tuple[dt.datetime, dt.datetime]:
        """[start, end) in UTC of the gaming day that starts on `day` (local)."""
        start = dt.datetime.combine(day, self.gaming_day_start, zone)
        end = dt.datetime.combine(day + dt.timedelta(days=1), self.gaming_day_start, zone)
        return start.astimezone(dt.UTC), end.astimezone(dt.UTC)

    def shift_window(
        self, day: dt.date, name: str, zone: dt.tzinfo
    ) -> tuple[dt.datetime, dt.datetime]:
        """[start, end) in UTC of a shift of the gaming day `day`.

        A shift that starts before the gaming day's start time (grave from 22:00 belongs to
        the day that started at 06:00; a 02:00-10:00 shift to the next calendar date) is
        placed inside the gaming day.
        """
        s = self.shift(name)
        start_date = day if s.start >= self.gaming_day_start else day + dt.timedelta(days=1)
        start = dt.datetime.combine(start_date, s.start, zone)
        end_date = start_date if s.end > s.start else start_date + dt.timedelta(days=1)
        end = dt.datetime.combine(end_date, s.end, zone)
        return start.astimezone(dt.UTC), end.astimezone(dt.UTC)


def log_offset(con: Any) -> int | None:
    """The UTC offset in minutes that most of the logs' times carry; None before any log."""
    rows = con.execute(
        "SELECT ts_offset_min FROM events GROUP BY ALL ORDER BY count(*) DESC LIMIT 1"
    ).fetchall()
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


def _time(value: Any, where: str, path: Path) -> dt.time:
    try:
        return dt.time.fromisoformat(str(value))
    except ValueError:
        raise UserError(
            f"{path}: {where} must be a local time like \"06:00\", not {value!r}"
        ) from None


# The keys a property config may hold (docs/property.example.toml): anything else is a typo
# that would otherwise be ignored in silence (`timezone`, `[[shift]]`).
TOP_KEYS = ("property", "shifts", "procedures", "house_options", "board", "signing")
PROPERTY_KEYS = ("name", "time_zone", "gaming_day_start", "archive")
SHIFT_KEYS = ("name", "start", "end")
SIGNING_KEYS = ("pkcs12", "password_file", "password_env", "trust_root")


def _check_keys(keys: Any, known: tuple[str, ...], where: str, path: Path) -> None:
    for key in keys:
        if key not in known:
            near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise UserError(
                f"{path}: unknown key {where}{key!r}{hint} (known here: {', '.join(known)})"
            )


def _table(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise UserError(
            f"{path}: [{key}] must be a table of keys (a [{key}] header with key = value "
            f"lines), not {type(value).__name__} {value!r}"
        )
    return value


def _signing(data: dict[str, Any], path: Path) -> SigningConfig | None:
    """The [signing] section, its shape checked; whether the key opens is checked when a PDF
    is signed and by `doctor`, so that a command that signs nothing never needs the key."""
    if "signing" not in data:
        return None
    raw = _table(data, "signing", path)
    if "password" in raw:
        raise UserError(
            f"{path}: [signing] must not hold the password itself; put it in a file only the "
            "job's user can read (password_file) or in an environment variable (password_env)"
        )
    _check_keys(raw, SIGNING_KEYS, "in [signing]: ", path)

    def file(key: str) -> Path | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise UserError(f"{path}: signing.{key} must be a file path, not {value!r}")
        return path.parent / Path(value).expanduser()  # relative: to the config's folder

    pkcs12 = file("pkcs12")
    if pkcs12 is None:
        raise UserError(
            f"{path}: [signing] needs pkcs12, the PKCS#12 file (.p12 or .pfx) holding the "
            "signing key and its certificate"
        )
    env = raw.get("password_env")
    if env is not None and (not isinstance(env, str) or not env.strip() or "=" in env):
        raise UserError(
            f"{path}: signing.password_env must name an environment variable, not {env!r}"
        )
    password_file = file("password_file")
    if (password_file is None) == (env is None):
        raise UserError(
            f"{path}: [signing] needs exactly one of password_file (a file holding the "
            "PKCS#12 password) and password_env (the environment variable holding it)"
        )
    return SigningConfig(pkcs12, password_file, env, file("trust_root"))


def _shifts(raw: Any, path: Path) -> tuple[Shift, ...]:
    """The [[shifts]] array of tables; `[shifts]` (one table) is the usual slip."""
    if not isinstance(raw, list) or not all(isinstance(s, dict) for s in raw):
        raise UserError(
            f"{path}: shifts must be an array of tables: write each shift under its own "
            "[[shifts]] header (two brackets), with name, start and end"
        )
    shifts = []
    for i, s in enumerate(raw):
        _check_keys(s, SHIFT_KEYS, f"in shifts[{i}]: ", path)
        shifts.append(
            Shift(
                str(s.get("name") or f"shift{i + 1}"),
                _time(s.get("start"), f"shifts[{i}].start", path),
                _time(s.get("end"), f"shifts[{i}].end", path),
            )
        )
    if not shifts:
        raise UserError(f"{path}: [[shifts]] lists no shift")
    _check_overlaps(shifts, path)
    _check_coverage(shifts, path)
    return tuple(shifts)


def _minutes(s: Shift) -> list[tuple[int, int]]:
    """A shift as [start, end) minutes of the day; one past midnight is two pieces."""
    a, b = s.start.hour * 60 + s.start.minute, s.end.hour * 60 + s.end.minute
    return [(a, b)] if b > a else [(a, 24 * 60), (0, b)]


def _check_overlaps(shifts: list[Shift], path: Path) -> None:
    """Two shifts that share time would put a round in two reports (and two sign-offs)."""
    seen: set[str] = set()
    for s in shifts:
        if s.name in seen:
            raise UserError(f"{path}: two shifts are named {s.name!r}; give each its own name")
        seen.add(s.name)
    for i, s in enumerate(shifts):
        for t in shifts[i + 1 :]:
            if any(a < d and c < b for a, b in _minutes(s) for c, d in _minutes(t)):
                raise UserError(
                    f"{path}: shifts {s.name!r} ({s.start:%H:%M}-{s.end:%H:%M}) and {t.name!r} "
                    f"({t.start:%H:%M}-{t.end:%H:%M}) overlap; a time belongs to one shift"
                )


def _check_coverage(shifts: list[Shift], path: Path) -> None:
    """A time in no shift would put its rounds in no shift report and no nightly filing,
    while the day report and the night's summary still count them (issue 30)."""
    covered = sorted(piece for s in shifts for piece in _minutes(s))
    gaps, reached = [], 0
    for a, b in covered:
        if a > reached:
            gaps.append((reached, a))
        reached = max(reached, b)
    if reached < 24 * 60:
        gaps.append((reached, 24 * 60))
    if gaps:
        hours = ", ".join(f"{a // 60:02d}:{a % 60:02d}-{b // 60 % 24:02d}:{b % 60:02d}"
                          for a, b in gaps)
        raise UserError(
            f"{path}: the shifts leave {hours} uncovered; every time of the gaming day must "
            "belong to a shift, or its rounds are in no shift report"
        )


def load(path: Path | str | None = None) -> PropertyConfig:
    """Load and check the property config; no file at all means the defaults."""
    if path is None:
        env = os.environ.get(CONFIG_ENV)
        path = Path(env) if env else Path(DEFAULT_NAME)
        if not env and not path.exists():
            return PropertyConfig()
    path = Path(path)
    try:
        if path.exists() and not path.is_dir() and not path.is_file():
            raise UserError(f"{path}: not a file (a named pipe, a socket or a device); "
                            "--config takes the config file")
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no such config file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a folder; --config takes the config file") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read the config ({e.strerror})") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file, so not a config") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: not valid TOML ({e})") from None
    _check_keys(data, TOP_KEYS, "", path)
    prop = _table(data, "property", path)
    _check_keys(prop, PROPERTY_KEYS, "in [property]: ", path)
    tz = prop.get("time_zone")
    if tz is not None:
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            raise UserError(
                f"{path}: property.time_zone {tz!r} is not a time zone name "
                "(use one like \"America/New_York\")"
            ) from None
    shifts = _shifts(data["shifts"], path) if "shifts" in data else DEFAULT_SHIFTS
    pits = {}
    for pit, proc in _table(data, "procedures", path).items():
        if isinstance(proc, bool) or proc not in (1, 2, 3, 4):
            raise UserError(f"{path}: procedures.{pit} must be 1, 2, 3 or 4, not {proc!r}")
        pits[str(pit)] = int(proc)
    archive = prop.get("archive")
    if archive is not None and (not isinstance(archive, str) or not archive.strip()):
        raise UserError(f"{path}: property.archive must be a folder path, not {archive!r}")
    return PropertyConfig(
        name=str(prop.get("name", "Property")),
        time_zone=tz,
        gaming_day_start=_time(prop.get("gaming_day_start", "06:00"), "gaming_day_start", path),
        shifts=shifts,
        pit_procedures=pits,
        house_options=dict(_table(data, "house_options", path)),
        # A relative archive is read from the config file's folder, as a person reading the
        # file would expect, not from wherever the job happens to start.
        archive=None if archive is None else path.parent / Path(archive).expanduser(),
        board=dict(_table(data, "board", path)),
        signing=_signing(data, path),
        source=str(path),
    )


# The gaming days a command accepts. Every window a command works out from a day (the day
# itself in any zone, the shift after it, the 30 days of history before it) must be a time
# Python and DuckDB can both hold; these bounds leave a wide margin on both sides, and no
# log of a real table falls outside them.
FIRST_DAY = dt.date(1900, 1, 1)
LAST_DAY = dt.date(9998, 12, 31)


def parse_shift(text: str) -> tuple[dt.date, str]:
    """`2026-11-28/grave` -> (date, name)."""
    day, sep, name = text.partition("/")
    try:
        d = dt.date.fromisoformat(day)
    except ValueError:
        d = None
    if not sep or not name.strip() or d is None:
        raise UserError(f"--shift takes GAMING-DAY/NAME, like 2026-11-28/grave, not {text!r}")
    return _in_range(d, text), name


def parse_date(text: str) -> dt.date:
    """A gaming day typed in (YYYY-MM-DD), within FIRST_DAY..LAST_DAY."""
    try:
        d = dt.date.fromisoformat(text.strip())
    except ValueError:
        raise UserError(f"a date must look like 2026-11-28, not {text!r}") from None
    return _in_range(d, text)


def _in_range(d: dt.date, text: str) -> dt.date:
    if not FIRST_DAY <= d <= LAST_DAY:
        raise UserError(
            f"{text!r} is out of range: a gaming day must be from {FIRST_DAY} to {LAST_DAY}"
        )
    return d


# --- local times typed by a person -----------------------------------------------------------


def shown_time(value: dt.datetime) -> str:
    """A time as a person typed or reads it, in the zone it carries: "2026-11-01 01:40 EST"
    (seconds when it has some); never UTC with microseconds."""
    text = value.strftime("%Y-%m-%d %H:%M:%S" if value.second else "%Y-%m-%d %H:%M")
    name = value.tzname()
    return f"{text} {name}" if name else text


def local_moment(value: dt.datetime, zone: dt.tzinfo, what: str) -> dt.datetime:
    """A local date and time without an offset, read in `zone`. Where the zone's clocks
    skip it (spring forward) or pass it twice (fall back) it is no one moment: refused with
    a sentence giving the moments it could mean, each with its offset, to write instead."""
    if value.tzinfo is not None:
        return value
    first, second = value.replace(tzinfo=zone, fold=0), value.replace(tzinfo=zone, fold=1)
    if first.utcoffset() == second.utcoffset():
        return first
    typed = value.strftime("%Y-%m-%d %H:%M:%S" if value.second else "%Y-%m-%d %H:%M")
    place = getattr(zone, "key", str(zone))
    real = first.astimezone(dt.UTC).astimezone(zone).replace(tzinfo=None) == value
    # Both readings, earlier first (a set would merge them: within one zone, aware times
    # compare by their wall time, fold aside).
    moments = sorted([first, second], key=lambda m: m.astimezone(dt.UTC))
    if real:
        readings = " or ".join(f"{_with_offset(m)} ({m.tzname()})" for m in moments)
        raise UserError(f"{what} {typed} happens twice in {place} (the clocks go back that "
                        f"night): write {readings}")
    # Both readings of a time the clocks skip, as the local times they are.
    readings = " or ".join(
        f"{_with_offset(x)} ({x.tzname()})"
        for x in (m.astimezone(dt.UTC).astimezone(zone) for m in moments)
    )
    raise UserError(f"{what} {typed} does not exist in {place} (the clocks go forward over "
                    f"it that night): write the moment meant with its offset, {readings}")


def _with_offset(moment: dt.datetime) -> str:
    """"2026-11-01 01:40-05:00": a local time as it is typed with its offset."""
    return moment.isoformat(sep=" ", timespec="seconds" if moment.second else "minutes")
