"""The simulated night's layout: its tables (games in turn, NJ banking tables in pits of four
with one procedure each, chemin de fer and NZ tables in pits of their own), its hours and its
procedure changes with their written notices, some planted badly notified at a rate.
"""

from __future__ import annotations

import datetime as dt
import random

from auditor.simulate.generator import Night, NoticeChange, TableSpec

GAMES = ("mini_baccarat", "punto_banco", "chemin_de_fer", "nz")
DEFAULT_GAMES = ("mini_baccarat", "punto_banco", "chemin_de_fer")
SIM_DATE = dt.date(2026, 12, 1)  # the gaming day simulated unless one is given
SIM_OPENS = "22:00"
MAX_HOURS = 13  # the night runs 22:00 to at most 11:00 the next morning
PIT_SIZE = 4  # banking tables per pit (one procedure per pit)


def mini_specs(name: str, pit: str, procedure: int, k: int) -> TableSpec:
    """The k-th mini-baccarat layout, in turn: the sample night's four NJ layouts."""
    nj = dict(game="mini_baccarat", jurisdiction="NJ", seats=7, procedure=procedure)
    layouts = (
        dict(variant="standard", side_bets=("tie",)),
        dict(variant="no_vig_dragon7", side_bets=("tie", "dragon7", "panda8")),
        dict(variant="standard", side_bets=("tie", "total_cards_4", "total_cards_5",
                                             "total_cards_6")),
        dict(variant="standard", side_bets=("tie",), decks=6, shuffle="automated",
             batches=("red", "blue")),
    )
    return TableSpec(name, pit, **nj, **layouts[k % len(layouts)])  # type: ignore[arg-type]


def simulated_night(
    tables: int,
    hours: float,
    seed: int | str,
    games: tuple[str, ...],
    rate: float = 0.0,
    day: dt.date = SIM_DATE,
) -> Night:
    """The tables (games in turn, NJ banking tables PIT_SIZE to a pit with one procedure,
    chemin de fer and NZ tables in pits of their own) and one procedure change per NJ pit at
    half time, with written notices 45 minutes before (on time).

    With `rate`, each NJ pit's change is, with probability `rate`, notified to the Division
    only (notice_missing) or 20 minutes ahead (notice_late); and, independently with
    probability `rate`, one table of a pit of two or more changes alone a quarter into the
    night, duly notified (lone_change: the pit is inconsistent until the others follow).
    The tables open at SIM_OPENS on `day` (local, UTC-05:00)."""
    if tables < 1:
        raise ValueError("tables must be at least 1")
    if not 0 < hours <= MAX_HOURS:
        raise ValueError(f"hours must be more than 0 and at most {MAX_HOURS}")
    unknown = [g for g in games if g not in GAMES]
    if unknown or not games:
        raise ValueError(f"unknown games {unknown}; choose among {', '.join(GAMES)}")
    rng = random.Random(f"{seed}:night")
    h0, m0 = map(int, SIM_OPENS.split(":"))
    close_min = h0 * 60 + m0 + round(hours * 60)
    closes = f"{close_min // 60 % 24:02d}:{close_min % 60:02d}"
    half = h0 * 60 + m0 + round(hours * 30)
    effective = f"{half // 60 % 24:02d}:{half % 60:02d}"
    prefix = {"mini_baccarat": "MB", "punto_banco": "PB", "chemin_de_fer": "CF", "nz": "NZ"}
    count: dict[str, int] = {}
    pits: dict[str, list[str]] = {}  # pit -> tables
    pit_procedure: dict[str, int] = {}
    specs: list[TableSpec] = []

    def pit_for(group: str) -> str:
        open_pits = [p for p in pits if p.startswith(group) and len(pits[p]) < PIT_SIZE]
        if open_pits:
            return open_pits[0]
        name = f"{group}{sum(p.startswith(group) for p in pits) + 1}"
        pits[name] = []
        return name

    for i in range(tables):
        game = games[i % len(games)]
        n = count[game] = count.get(game, 0) + 1
        name = f"{prefix[game]}-{n:02d}"
        if game in ("mini_baccarat", "punto_banco"):
            pit = pit_for("P")
            procedure = pit_procedure.setdefault(pit, rng.randint(1, 4))
            if game == "mini_baccarat":
                spec = mini_specs(name, pit, procedure, n - 1)
            else:
                spec = TableSpec(name, pit, "punto_banco", "NJ", "standard", 12, procedure,
                                 ("tie",), seconds_per_round=(55, 90))
        elif game == "chemin_de_fer":
            pit = pit_for("C")
            spec = TableSpec(name, pit, "chemin_de_fer", "NJ", "standard", 9, None, (), decks=6,
                             seconds_per_round=(70, 110))
        else:
            pit = pit_for("Z")
            spec = TableSpec(name, pit, "mini_baccarat", "NZ", "standard", 7, None, ("tie",))
        spec.opens, spec.closes = SIM_OPENS, closes
        pits[pit].append(name)
        specs.append(spec)
    changes = [
        NoticeChange(pit, tuple(pits[pit]), rng.choice([p for p in (1, 2, 3, 4) if p != proc]),
                     effective, 45)
        for pit, proc in pit_procedure.items()
    ]
    dev = random.Random(f"{seed}:night:deviations")
    quarter = h0 * 60 + m0 + round(hours * 15)
    lone: list[NoticeChange] = []  # first: their notices come first in the pit's stream
    for c in changes:
        if dev.random() < rate:
            c.kind = dev.choice(("notice_missing", "notice_late"))
            if c.kind == "notice_missing":
                c.recipients = ("division",)
            else:
                c.lead_minutes = 20
        # The lone table must differ from the others for longer than the 3-minute changeover.
        if dev.random() < rate and len(c.tables) > 1 and half - quarter >= 10:
            lone.append(NoticeChange(
                c.pit, (dev.choice(c.tables),), c.procedure,
                f"{quarter // 60 % 24:02d}:{quarter % 60:02d}", 45, kind="lone_change",
            ))
    return Night(day, dt.timedelta(hours=-5), specs, [], lone + changes)


def unnotify(night: Night, taken: NoticeChange | None = None) -> NoticeChange | None:
    """--unnotified-change: the first NJ pit's half-time change (not `taken`, the change the
    logs' lies are built on) made with no written notice to anyone, so that each table making
    it is procedure.notice_missing until a notice is entered by hand (docs/live.md). In place;
    None when the night has no such change."""
    change = next((c for c in night.changes if c.kind != "lone_change" and c is not taken),
                  None)
    if change is not None:
        change.kind, change.recipients = "notice_missing", ()
    return change


def carry_procedures(night: Night, opening: dict[str, int]) -> None:
    """A later day of a history: each NJ pit's tables open under the procedure in force when
    the day before ended (`opening`, by table; a pit takes its first table's), and its half-time
    change goes to another; opened under another, with no notice, it would be an unnotified
    change between the days. In place; pits and tables the day before did not have keep
    their own."""
    by_pit: dict[str, int] = {}
    for spec in night.tables:
        if spec.procedure is not None and spec.table in opening:
            by_pit.setdefault(spec.pit, opening[spec.table])
    for spec in night.tables:
        if spec.procedure is not None and spec.pit in by_pit:
            spec.procedure = by_pit[spec.pit]
    for c in night.changes:
        if c.pit in by_pit and c.procedure == by_pit[c.pit]:
            c.procedure = by_pit[c.pit] % 4 + 1
