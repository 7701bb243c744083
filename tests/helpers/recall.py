"""Simulated nights and their batch audit, made once a run for every test that asks.

tests/simulate/test_simulate.py's recall runs check a night's batch audit against its ground
truth; tests/jobs/test_watch.py's every-code test checks that a watch fed the same nights
finds what that batch audit finds. Each used to simulate, ingest and audit the same nights
itself (the busiest, 16 tables for 2.5 hours, ~13 s of CPU). `audited_night` does it once a
run (tests/helpers/shared.py): the night's files, read only, and its audit database, which a
test copies before it opens it (`database`).

The batch audit is `ingest` then `audit` under the default property config, then the
night's `later` files (a lying night's) ingested and audited again: what the ground truth
stands on (helpers/watched.batch). It runs under the shipped rule packs, or with `panda8`
under helpers.rules.panda8_rules (the packs under which every code can be planted).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from auditor import config
from auditor.audit.run import AuditResult
from auditor.rules.pack import RULES_ENV
from auditor.simulate.layout import DEFAULT_GAMES
from auditor.simulate.output import SimulationResult
from auditor.simulate.planted import simulate

from .rules import panda8_rules
from .shared import copy_of, value_once
from .watched import batch


@dataclass(frozen=True)
class AuditedNight:
    """A simulated night (its files under a folder shared by the run: read them, do not
    change them) and the result of its batch audit, whose database is `db`."""

    night: SimulationResult
    result: AuditResult  # the audit of the night's files (before any `later` files)
    db: Path

    def database(self, path: Path) -> Path:
        """A private copy of the batch audit's database, to open."""
        return copy_of(self.db, path)


def audited_night(factory: pytest.TempPathFactory, *, panda8: bool, seed: int, tables: int,
                  hours: float, rate: float = 0.0,
                  games: tuple[str, ...] = DEFAULT_GAMES, **patterns: Any) -> AuditedNight:
    """`simulate(seed, tables, hours, rate, games, **patterns)` (patterns: the simulator's
    flags, error_prone_dealer=True ...) and its batch audit, made the first time any test of
    the run asks for this night under these rules."""
    asked = "+".join(sorted(k for k, v in patterns.items() if v)) or "plain"
    key = (f"night-{'panda8' if panda8 else 'shipped'}-{seed}-{tables}-{hours}-{rate}-"
           f"{'+'.join(games)}-{asked}")

    def make(folder: Path) -> AuditedNight:
        with pytest.MonkeyPatch.context() as mp:
            mp.delenv(RULES_ENV, raising=False)  # the shipped packs, whatever the caller uses
            if panda8:
                panda8_rules(folder, mp)
            r = simulate(folder / "logs", tables, hours, seed=seed, deviation_rate=rate,
                         games=games, **patterns)
            path = folder / "batch.duckdb"
            audits: list[AuditResult] = []
            batch(list(r.files), path, config.PropertyConfig(), r.later, audits).close()
        return AuditedNight(r, audits[0], path)

    return value_once(factory, key, make)
