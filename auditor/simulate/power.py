"""What the night's patterns (the dealer, the counting seat, the shoe orders, the shoe lies)
showed, judged the way the audit judges them, so that the ground truth promises only what the
audit can find at the night's size; each pattern asked for that was not planted, or was
planted below what the audit's test detects, is a `not_planted` line saying why.

A `not_planted` line has no `code` (a reader counting findings by code cannot take it for
one): `{"not_planted": CODE, "kind": KIND, "option": "--flag", "table": ..., "reason": ...}`.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from auditor.audit.dealers import ROUND_SCOPES
from auditor.config import PropertyConfig
from auditor.replay import integrity
from auditor.replay.dealers import TAIL, DealerCount, p_chart
from auditor.replay.sidebets import MIN_ROUNDS, MIN_SIDE_WAGERS, Observation, seat_test
from auditor.rules.codes import REGISTRY
from auditor.simulate.deal import value
from auditor.simulate.kinds import DEALER_KINDS, KIND_CODES, SIDE_BET_KINDS

# The option that asks for each pattern, named in what is said of it.
OPTIONS = {
    "error_prone_dealer": "--error-prone-dealer",
    "counting_seat": "--counting-seat",
    "shoe_twice": "--shoe-twice",
    "weak_shuffle": "--unshuffled",
    "pack_run": "--unshuffled",
    "phantom_shoe": "--phantom-shoe",
    "earlier_shoe": "--shoe-reopened",
    "notice_missing": "--unnotified-change",
}


def not_planted(kind: str, reason: str, table: str | None = None) -> dict:
    """The ground truth's line for a pattern asked for and not planted (or not detectable)."""
    return {"not_planted": KIND_CODES[kind], "kind": kind, "option": OPTIONS[kind],
            "table": table, "reason": reason}


def said(line: dict) -> str:
    """A not_planted line as the sentence printed on stderr."""
    return f"not planted: {line['option']} ({line['not_planted']}): {line['reason']}"


@dataclass(frozen=True)
class Dealt:
    """A round as the audit's dealer chart counts it: when it started, who dealt it."""

    ts: dt.datetime
    dealer: str
    table: str
    shoe: str
    round: int


def shift_counts(night_date: dt.date, zone: dt.tzinfo, dealt: Sequence[Dealt],
                 truth: Sequence[dict]) -> dict[str, list[DealerCount]]:
    """Per shift of the default shifts (the ones the planted pattern is placed in) and dealer:
    rounds dealt, and error rounds (rounds with a finding of the scopes the audit's chart
    counts, ROUND_SCOPES), as auditor.audit.dealers.count_rounds counts them."""
    config = PropertyConfig()
    windows = [(f"{day:%Y-%m-%d}/{s.name}", *config.shift_window(day, s.name, zone))
               for day in (night_date + dt.timedelta(days=k) for k in (-1, 0, 1))
               for s in config.shifts]
    bad = {(d["table"], d["shoe"], d["round"]) for d in truth
           if d.get("round") is not None and REGISTRY[d["code"]].scope in ROUND_SCOPES}
    tally: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for r in dealt:
        label = next(w[0] for w in windows if w[1] <= r.ts < w[2])
        n = tally[(label, r.dealer)]
        n[0] += 1
        n[1] += (r.table, r.shoe, r.round) in bad
    out: dict[str, list[DealerCount]] = defaultdict(list)
    for (label, dealer), (rounds, errors) in sorted(tally.items()):
        out[label].append(DealerCount(label, dealer, rounds, errors))
    return out


def dealer_line(dealer: str, shift: str, counts: dict[str, list[DealerCount]]) -> dict:
    """The error-prone dealer's ground truth: dealer.error_rate if the shift's p-chart flags
    them (auditor.replay.dealers, DealerRate.flagged, the audit's own decision), else a
    not_planted line with their numbers against the test's."""
    chart = {r.count.dealer: r for r in p_chart(counts[shift])} if counts.get(shift) else {}
    r = chart.get(dealer)
    if r is not None and r.flagged:
        return {"code": DEALER_KINDS["error_prone_dealer"], "table": None, "shoe": None,
                "round": None, "kind": "error_prone_dealer", "dealer": dealer, "shift": shift}
    if r is None:
        reason = f"dealer {dealer} dealt no round in shift {shift}"
    elif r.expected == 0:
        reason = (f"no round of shift {shift} has a deviation (--deviation-rate 0?): ten "
                  "times none is none; give a --deviation-rate")
    else:
        c = r.count
        reason = (f"dealer {dealer}: {c.error_rounds} of {c.rounds} rounds with a deviation "
                  f"in shift {shift} (the shift's rate {r.expected:.1%}, upper limit "
                  f"{r.upper:.1%}, binomial tail {r.tail:.2g} against {TAIL}): below what "
                  "the audit's p-chart detects at this size; more hours or a higher "
                  "--deviation-rate")
    return not_planted("error_prone_dealer", reason)


def counting_line(table: str, seat: int, shift: str, series: Sequence[Observation]) -> dict:
    """The counting seat's ground truth: play.side_bet_counting if the audit's test of its
    rounds (auditor.replay.sidebets.seat_test) flags it, else not_planted with the numbers."""
    t = seat_test(series)
    if t.flagged:
        return {"code": SIDE_BET_KINDS["counting_seat"], "table": table, "shoe": None,
                "round": None, "kind": "counting_seat", "seat": seat, "bet": "dragon7",
                "shift": shift}
    z = "no correlation" if t.z is None else f"z = {t.z:.1f}"
    reason = (f"seat {seat} at {table} played {t.rounds} rounds with {t.side_wagers} Dragon 7 "
              f"wagers in shift {shift} ({z}; the test needs {MIN_ROUNDS} rounds, "
              f"{MIN_SIDE_WAGERS} side wagers and z from 4.27): below what the audit detects "
              "at this size; more hours")
    return not_planted("counting_seat", reason, table)


def counter_observation(
    shoe: str, rnd: int, ts: dt.datetime, true: float,
    wagers: Sequence[tuple[int, str, Decimal]], seat: int,
) -> Observation | None:
    """The counting seat's round as the audit's series holds it: the true count before it
    and its Dragon 7 stake (0 without one); None for a round it did not play."""
    mine = [w for w in wagers if w[0] == seat]
    if not mine:
        return None
    return Observation(shoe, rnd, ts, true,
                       sum((amt for _, bet, amt in mine if bet == "dragon7"), Decimal(0)))


def seen_codes(cards: Sequence[str], pos: int) -> list[int]:
    """A shoe's cards as the audit's shoe-order tests read them: those dealt, in order (the
    cards of the burn are not card events), up to `pos`."""
    burn = 1 + (value(cards[0]) or 10)  # the shoe's first card and as many as it shows
    return [integrity.card_code(c) for c in cards[burn:pos]]


def repeat_shown(earlier: Sequence[int], later: Sequence[int]) -> bool:
    """Whether the audit's shoe.repeated_order sees a shoe dealt in another's order: a run
    of integrity.MIN_REPEAT cards or more in common (here the common start of both)."""
    same = next((i for i, (a, b) in enumerate(zip(earlier, later, strict=False)) if a != b),
                min(len(earlier), len(later)))
    return same >= integrity.MIN_REPEAT


def kept_shown(previous: Sequence[int], current: Sequence[int], decks: int) -> bool:
    """Whether the audit's test of a shuffle (integrity.kept_pairs) flags the shoe."""
    return integrity.kept_pairs(previous, current, decks).flagged


def pack_run_shown(current: Sequence[int]) -> bool:
    """Whether the audit sees a run of a new pack's order (integrity.pack_runs)."""
    return bool(integrity.pack_runs(current))


# Why a pattern asked for found no place in the night (its layout has no table for it).
NO_PLACE = {
    "error_prone_dealer": "no mini-baccarat or punto banco table in the night",
    "counting_seat": "no table with Dragon 7 wagers (the second mini-baccarat table: "
                     "--games with mini_baccarat and --tables enough for two of them)",
    "shoe_twice": "no two manual-shuffle banking tables alike (same game, jurisdiction and "
                  "decks: two mini-baccarat or two punto banco tables, e.g. --tables 4 or more "
                  "with the default games)",
    "weak_shuffle": "no manual-shuffle banking table in the night",
    "pack_run": "no second manual-shuffle banking table in the night",
    "phantom_shoe": "no mini-baccarat or punto banco table in the night",
    "earlier_shoe": "no mini-baccarat or punto banco table in the night",
    "notice_missing": "no NJ mini-baccarat or punto banco pit changing procedure in the night "
                      "(with --lying, a second one: the first carries the lies' change)",
}
# Why a pattern placed did not show, when the night ended first.
NOT_SHOWN = {
    "shoe_twice": "its shoe {shoe} (or the shoe it repeats) did not deal enough cards to "
                  "show the order before the night ended; more hours",
    "weak_shuffle": "its shoe {shoe} (or the one before) did not deal enough cards to show "
                    "the shuffle before the night ended; more hours",
    "pack_run": "its shoe {shoe} did not deal as far as the run of spades before the night "
                "ended; more hours",
    "phantom_shoe": "the card too many of its shoe {shoe} did not come out before the night "
                    "ended, so there was nothing to hide; more hours",
    "earlier_shoe": "the card too many of its shoe {shoe} did not come out before the night "
                    "ended (or the night had no shoe {shoe}), so there was nothing to hide; "
                    "more hours",
}


def placement_gaps(asked: Sequence[str], placed: Sequence[tuple[str, str, int]],
                   shown: set[tuple[str, str]]) -> list[dict]:
    """not_planted lines for the shoe patterns asked for (`asked`, kinds): each with no place
    in the night, and each placed (table, kind, shoe number) whose ground truth line never
    came (`shown`: (table, kind) of the lines there are)."""
    out = []
    for kind in asked:
        mine = [(table, n) for table, k, n in placed if k == kind]
        if not mine:
            out.append(not_planted(kind, NO_PLACE[kind]))
        out += [not_planted(kind, f"{table}: " + NOT_SHOWN[kind].format(shoe=n), table)
                for table, n in mine if (table, kind) not in shown]
    return out
