"""The property config a run audited under, on its record, so that a changed config never
withdraws or changes standing findings in silence (issue 30).

Each run that audits (`audit`, `nightly`, `watch`, `backfill`) records in its args the parts
of the config the findings depend on (`config_settings`) and their SHA-256 (`config_hash`).
Before auditing, a command compares the config it was given with the latest such record:
when they differ and findings stand, it refuses unless the run is an explicit rerun with its
reason (`bacc-audit audit --rerun all --reason TEXT`), which records the reason in its args;
every finding it withdraws or opens carries its run id, so each change points to that reason.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import duckdb

from auditor.config import PropertyConfig
from auditor.errors import UserError

# What of the config a finding depends on, with how a sentence names it. The rest (the
# property's name, the archive, the board, the signing key) changes no finding.
AUDITED = {
    "time_zone": "the time zone",
    "gaming_day_start": "the gaming day's start",
    "shifts": "the shifts",
    "pit_procedures": "the pits' approved procedures",
    "house_options": "the rule packs' house options",
}
# The commands that audit under a config and record it.
AUDITING = ("audit", "nightly", "watch", "backfill")


def settings(conf: PropertyConfig) -> dict[str, Any]:
    """The config's parts that findings depend on, as JSON values."""
    return {
        "time_zone": conf.time_zone,
        "gaming_day_start": f"{conf.gaming_day_start:%H:%M}",
        "shifts": [[s.name, f"{s.start:%H:%M}", f"{s.end:%H:%M}"] for s in conf.shifts],
        "pit_procedures": dict(sorted(conf.pit_procedures.items())),
        "house_options": {k: conf.house_options[k] for k in sorted(conf.house_options)},
    }


def config_hash(values: dict[str, Any]) -> str:
    return hashlib.sha256(
        json.dumps(values, sort_keys=True, default=str, separators=(",", ":")).encode()
    ).hexdigest()


def run_args(conf: PropertyConfig, reason: str | None = None) -> dict[str, Any]:
    """What an auditing run adds to its args: the config's audited settings and hash, and
    the reason of a rerun under a changed config."""
    values = settings(conf)
    out: dict[str, Any] = {"config_settings": values, "config_hash": config_hash(values)}
    if reason is not None:
        out["reason"] = reason
    return out


def last_recorded(con: duckdb.DuckDBPyConnection) -> tuple[int, dict[str, Any]] | None:
    """The latest run that audited with its config on record, and those settings: one that
    finished, or any that recorded a finding (a refused run, which audited nothing, is not)."""
    rows = con.execute(
        "SELECT id, args FROM runs r WHERE command IN ({}) "
        "AND json_extract_string(args, '$.config_hash') IS NOT NULL "
        "AND (status = 'done' OR EXISTS (SELECT 1 FROM findings f WHERE f.run_id = r.id)) "
        "ORDER BY id DESC LIMIT 1".format(", ".join(f"'{c}'" for c in AUDITING))
    ).fetchall()
    if not rows:
        return None
    return int(rows[0][0]), json.loads(rows[0][1])["config_settings"]


def differences(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What changed, in words: the settings that differ, the house options by key."""
    out = []
    for key, words in AUDITED.items():
        old, new = before.get(key), now.get(key)
        if old == new:
            continue
        if key == "house_options" and isinstance(old, dict) and isinstance(new, dict):
            keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
            words = f"{words} ({', '.join(keys)})"
        elif key == "shifts":
            words = (f"{words} ({_shifts(old)} then, {_shifts(new)} now)")
        elif key == "pit_procedures" and isinstance(old, dict) and isinstance(new, dict):
            pits = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
            words = f"{words} ({', '.join(pits)})"
        else:
            words = f"{words} ({old or 'none'} then, {new or 'none'} now)"
        out.append(words)
    return out


def _shifts(value: Any) -> str:
    return ", ".join(f"{n} {a}-{b}" for n, a, b in value or [])


def check_unchanged(
    con: duckdb.DuckDBPyConnection, conf: PropertyConfig, command: str,
    rerun_reason: str | None = None,
) -> None:
    """Refuse (UserError, exit 2) to audit under a config that differs from the one the
    standing findings were made under, unless this is a rerun with its reason on record."""
    if rerun_reason:
        return
    last = last_recorded(con)
    if last is None:
        return
    run_id, before = last
    changed = differences(before, settings(conf))
    if not changed:
        return
    standing = int(con.execute("SELECT count(*) FROM current_findings").fetchall()[0][0])
    if not standing:
        return
    raise UserError(
        f"{command}: the property config ({conf.source}) is not the one the {standing:,} "
        f"standing findings stand under (run {run_id} audited under that one): "
        f"{'; '.join(changed)}; auditing under it could "
        "withdraw or change them unrecorded, so rerun under it with the reason on record: "
        'bacc-audit audit --rerun all --reason "..."'
    )
