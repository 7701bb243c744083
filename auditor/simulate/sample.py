"""The sample night of sample_logs/ kept as code, so `make sample` rewrites the same bytes and a
README listing every deviation an audit of those files must find."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from auditor.simulate.generator import Deviation, Night, NoticeChange, TableSpec, write_night


def sample_night() -> Night:
    """The sample property's night of 28 November 2026 (US Eastern, UTC-05:00)."""
    nj_mini: dict[str, Any] = dict(game="mini_baccarat", jurisdiction="NJ", seats=7)
    tables = [
        TableSpec("MB-01", "P1", variant="standard", procedure=1, **nj_mini),
        TableSpec(
            "MB-02", "P1", variant="standard", procedure=1, side_bets=("tie",), gzip=True, **nj_mini
        ),
        TableSpec(
            "PB-01",
            "P1",
            "punto_banco",
            "NJ",
            "standard",
            12,
            1,
            ("tie",),
            seconds_per_round=(55, 90),
            gzip=True,
        ),
        TableSpec(
            "MB-03",
            "P2",
            variant="no_vig_dragon7",
            procedure=3,
            side_bets=("tie", "dragon7", "panda8"),
            gzip=True,
            **nj_mini,
        ),
        TableSpec(
            "MB-04",
            "P2",
            variant="standard",
            procedure=3,
            side_bets=("tie", "total_cards_4", "total_cards_5", "total_cards_6"),
            opens="20:00",
            closes="02:00",
            gzip=True,
            **nj_mini,
        ),
        TableSpec(
            "MB-05",
            "P2",
            variant="standard",
            procedure=3,
            side_bets=("tie",),
            decks=6,
            shuffle="automated",
            batches=("red", "blue"),
            gzip=True,
            **nj_mini,
        ),
        TableSpec(
            "CF-01",
            "P3",
            "chemin_de_fer",
            "NJ",
            "standard",
            9,
            None,
            (),
            decks=6,
            opens="23:00",
            closes="04:00",
            seconds_per_round=(70, 110),
        ),
        TableSpec(
            "NZ-01",
            "P3",
            "mini_baccarat",
            "NZ",
            "standard",
            7,
            None,
            ("tie",),
            opens="22:30",
            closes="05:30",
            gzip=True,
        ),
    ]
    deviations = [
        Deviation(
            "MB-01",
            "banker_missed",
            "23:10",
            "draw.banker_missed",
            "Banker should have drawn a third card and stood; the round was announced "
            "and settled from the cards dealt.",
        ),
        Deviation(
            "PB-01",
            "player_extra",
            "00:20",
            "draw.player_extra",
            "Player with 6 or 7 was given a third card (Banker had 7 and stood).",
        ),
        Deviation(
            "MB-02",
            "tie_missing",
            "22:40",
            "announce.tie_missing",
            'Tie round with no "Tie Hand" announcement.',
        ),
        Deviation(
            "MB-03",
            "dragon_missing",
            "22:00",
            "announce.dragon7_missing",
            'Dragon 7 at the no-vigorish table and no "dragon 7" announcement.',
        ),
        Deviation(
            "MB-01",
            "vig_short",
            "01:30",
            "vig.wrong_amount",
            "Vigorish of 4.00 taken on a winning 100 Banker wager (5.00 due).",
        ),
        Deviation(
            "MB-03",
            "vig_not_allowed",
            "03:10",
            "vig.not_allowed",
            "Vigorish of 5.00 taken on a Banker win at the no-vigorish table.",
        ),
        Deviation(
            "PB-01",
            "wrong_winner",
            "02:40",
            "result.misannounced",
            "Banker won but the result was announced as a Player win "
            "(wagers were settled correctly).",
        ),
        Deviation(
            "MB-04",
            "pay_short",
            "21:15",
            "settle.wrong_amount",
            "A winning 100 Player wager was paid 90.",
        ),
        Deviation(
            "MB-05",
            "collect_after_pay",
            "23:45",
            "order.collect_after_pay",
            "The losing Banker wager was collected after the winners were paid.",
        ),
        Deviation(
            "MB-04",
            "procedure_order",
            "00:30",
            "order.procedure_mismatch",
            "Procedure 3 in force; the dealer paid both Banker winners, then took both "
            "vigorish (procedure 1's order).",
        ),
        Deviation(
            "MB-04",
            "total_cards_missing",
            "01:05",
            "announce.total_cards_missing",
            "Total card wagers offered and the number of cards not announced.",
        ),
        Deviation(
            "CF-01",
            "partial_order",
            "23:20",
            "chemin.priority",
            "Partial wagers against the bank accepted out of counterclockwise order: the "
            "wager of the second participant counterclockwise from the Banker's right was "
            "taken before the first's (13:69F-4.7(d)).",
        ),
        Deviation(
            "CF-01",
            "over_bank",
            "23:50",
            "chemin.over_bank",
            "Two partial wagers together 200 more than the bank (13:69F-4.7(a)).",
        ),
        Deviation(
            "CF-01",
            "late_wager",
            "00:30",
            "chemin.late_wager",
            'A partial wager accepted after "No more bets" (13:69F-4.7(e)).',
        ),
        Deviation(
            "CF-01",
            "option_not_allowed",
            "01:10",
            "chemin.option",
            'The Dominant Player, who had to draw, declared "stay" and stood.',
        ),
        Deviation(
            "CF-01",
            "commission_short",
            "01:50",
            "chemin.commission",
            "Commission of 4% taken on the Banker's winnings (5% due).",
        ),
        Deviation(
            "CF-01",
            "suivi_not_entitled",
            "02:40",
            "chemin.priority",
            "A banco suivi accepted from a participant who had not equalled and lost the "
            "Banker's preceding wager (13:69F-4.7(b)).",
        ),
        Deviation(
            "NZ-01",
            "push_collected",
            "03:30",
            "settle.wrong_outcome",
            "On a tie the Banker wager was collected instead of returned.",
        ),
    ]
    changes = [
        NoticeChange("P1", ("MB-01", "MB-02", "PB-01"), 2, "02:00", 45),
        NoticeChange("P2", ("MB-03", "MB-04", "MB-05"), 4, "03:00", 20),
    ]
    return Night(
        dt.date(2026, 11, 28),
        dt.timedelta(hours=-5),
        tables,
        deviations,
        changes,
        truncated_line="MB-02",
        seq_jump=("NZ-01", 3),
    )


SAMPLE_SEED = 20261128


def write_sample(out_dir: Path, seed: int = SAMPLE_SEED) -> list[Path]:
    """Write the sample night and its README (the list of planted deviations)."""
    night = sample_night()
    written, notes = write_night(night, out_dir, seed)
    missing = [d for d in night.deviations if not d.planted]
    if missing:
        raise RuntimeError(f"no qualifying round for {[(d.table, d.kind) for d in missing]}")
    (out_dir / "README.md").write_text(_sample_readme(night, written, notes))
    return sorted(written.values())


def _offset(delta: dt.timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _change_line(night: Night, c: NoticeChange) -> str:
    """One procedure change, and which of its tables were still open to change."""
    specs = {s.table: s for s in night.tables}
    eff = _local(night, c.effective)
    changing = [t for t in c.tables if _local(night, specs[t].closes) > eff]
    text = (
        f"- Pit {c.pit} ({', '.join(c.tables)}): procedure {c.procedure} from {c.effective}, "
        f"written notices to {' and '.join(c.recipients)} {c.lead_minutes} minutes before"
    )
    if c.lead_minutes >= 30:
        return text + " (on time: no finding)"
    closed = sorted(set(c.tables) - set(changing))
    note = f" ({', '.join(closed)} had closed and did not change)" if closed else ""
    return text + f" → `procedure.notice_late` at {' and '.join(changing)}{note}"


def _local(night: Night, hhmm: str) -> dt.datetime:
    """hh:mm of the night as a local time (before noon: the next morning)."""
    h, m = map(int, hhmm.split(":"))
    day = night.date + dt.timedelta(days=1 if h < 12 else 0)
    return dt.datetime(day.year, day.month, day.day, h, m, tzinfo=dt.timezone(night.utc_offset))


def _sample_readme(night: Night, written: dict[str, Path], notes: list[str]) -> str:
    rows = "\n".join(
        f"| {s.table} | {s.pit} | {s.game} | {s.jurisdiction} | {s.variant} | "
        f"{s.procedure or '-'} | {s.decks}{' x2 batches' if s.shuffle == 'automated' else ''} |"
        f" {', '.join(s.side_bets) or '-'} | {s.opens}-{s.closes} | `{written[s.table].name}` |"
        for s in night.tables
    )
    devs = "\n".join(f"| `{d.code}` | {d.planted} | {d.note} |" for d in night.deviations)
    changes = "\n".join(_change_line(night, c) for c in night.changes)
    return f"""# Sample logs: the night of {night.date:%d %B %Y}

Generated by `make sample` (`python -m auditor.simulate.sample sample_logs`, seed {SAMPLE_SEED});
do not edit by hand, regenerate. Times are local (UTC{_offset(night.utc_offset)}). Every shoe
is really shuffled, every round is dealt by the rule pack's third-card tables and settled by
its payouts, except the deviations planted below. An audit of these files must find
exactly these deviations and nothing else.

## Tables

| table | pit | game | rules | variant | procedure | decks | side wagers | hours | file |
|---|---|---|---|---|---|---|---|---|---|
{rows}

Pit notices (`procedure_notice`) are in `{written["pits"].name}`.

## Planted deviations in rounds

| code | where | what happened |
|---|---|---|
{devs}

## Planted deviations in the logs

{chr(10).join("- " + n for n in notes)}

## Procedure changes

{changes}
"""


if __name__ == "__main__":
    import sys

    for p in write_sample(Path(sys.argv[1] if len(sys.argv) > 1 else "sample_logs")):
        print(p)
