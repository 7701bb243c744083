"""Side-bet counting (docs/side-bets.md): the running and true count of a shoe before each
round, and the test of whether a seat's Dragon 7 or Panda 8 wagers follow it.

Pure: the audit (auditor/audit/sidebets.py) reads the cards out of each shoe and each seat's
wagers; the counts are published data (auditor/rules/counts.py). What a player can see is
counted: the exposed first card of the burn, every card dealt, and a card found face up in
the shoe; the cards burned unseen count only as cards gone from the shoe.

The test, for one table, seat, side bet and shift: over every round in which the seat placed
any wager, the Spearman rank correlation (ties averaged) of the true count before the round
with the seat's wager on the side bet (0 when none); z = rho * sqrt(n - 1). Under the null of
wagers that ignore the count, every order of the seat's wagers is equally likely, and z has
mean 0 and variance 1 exactly; its tail is taken as normal. Flagged when n >= MIN_ROUNDS, the
seat made at least MIN_SIDE_WAGERS wagers on the bet, and z >= Z_THRESHOLD, the one-sided
normal point of FALSE_ALARM per seat, shift and bet.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from statistics import NormalDist

from auditor.finding import Finding, fingerprint
from auditor.rules.counts import SideBetCount

CODE = "play.side_bet_counting"
CARDS_PER_DECK = 52
FALSE_ALARM = 1e-5  # one-sided, per seat, shift and side bet tested
Z_THRESHOLD = NormalDist().inv_cdf(1 - FALSE_ALARM)  # 4.265
MIN_ROUNDS = 30  # rounds the seat played in the shift
MIN_SIDE_WAGERS = 5  # of them with a wager on the side bet
BET_NAMES = {"dragon7": "Dragon 7", "panda8": "Panda 8"}


# --- the count ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """The cards that came out of a shoe from one round's round_start to the next event of
    the kind (`round` None: before the first round, i.e. the burn): those a player sees, in
    order, and how many more were burned unseen."""

    round: int | None
    seen: tuple[str, ...] = ()
    unseen: int = 0


@dataclass(frozen=True)
class RoundCount:
    """The count of a shoe just before a round: the running count of the cards seen, the
    cards out of the shoe (seen or not), and the true count."""

    round: int
    running: int
    cards_out: int
    true: float


def true_count(running: int, cards_left: int) -> float:
    """Running count / decks left in the shoe (cards left / 52; at least one card)."""
    return running * CARDS_PER_DECK / max(cards_left, 1)


def shoe_counts(
    count: SideBetCount, decks: int, segments: Iterable[Segment]
) -> list[RoundCount]:
    """The count before each round of one shoe of `decks` decks, from its segments in the
    order they came out (the burn's first). A round named twice keeps its first."""
    total = decks * CARDS_PER_DECK
    running = out = 0
    counts: list[RoundCount] = []
    done: set[int] = set()
    tags: dict[str, int] = {}  # by the card's text: a shoe holds few spellings of many cards
    for seg in segments:
        if seg.round is not None and seg.round not in done:
            done.add(seg.round)
            counts.append(RoundCount(seg.round, running, out, true_count(running, total - out)))
        for c in seg.seen:
            tag = tags.get(c)
            if tag is None:
                tag = tags[c] = count.tag(c)
            running += tag
        out += len(seg.seen) + seg.unseen
    return counts


# --- the test -------------------------------------------------------------------------------


def average_ranks(values: Sequence[float] | Sequence[Decimal]) -> list[float]:
    """Ranks 1..n, ties given the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[Decimal]) -> float | None:
    """Spearman's rho with ties averaged (Pearson's correlation of the average ranks); None
    when either side is constant."""
    if len(x) != len(y):
        raise ValueError("x and y differ in length")
    if len(x) < 2:
        return None
    rx, ry = average_ranks(x), average_ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


@dataclass(frozen=True)
class Observation:
    """One round the seat played: where, its time, the true count before it, and the seat's
    wager on the side bet (0 when none)."""

    shoe: str
    round: int
    ts: dt.datetime | None
    true: float
    amount: Decimal


@dataclass(frozen=True)
class SeatSeries:
    """A seat's rounds at one table over one shift, for one side bet, in the order played."""

    table: str
    pit: str | None
    seat: int
    bet: str
    shift: str
    rounds: tuple[Observation, ...]


@dataclass(frozen=True)
class SeatTest:
    rounds: int
    side_wagers: int
    rho: float | None
    z: float | None
    flagged: bool


def seat_test(
    rounds: Sequence[Observation],
    *,
    threshold: float = Z_THRESHOLD,
    min_rounds: int = MIN_ROUNDS,
    min_side_wagers: int = MIN_SIDE_WAGERS,
) -> SeatTest:
    """The test of docs/side-bets.md over one seat's rounds."""
    n = len(rounds)
    side = sum(1 for o in rounds if o.amount > 0)
    rho = spearman([o.true for o in rounds], [o.amount for o in rounds])
    z = None if rho is None else rho * math.sqrt(n - 1)
    flagged = (n >= min_rounds and side >= min_side_wagers and z is not None
               and z >= threshold)
    return SeatTest(n, side, rho, z, flagged)


def counting_findings(
    series: Iterable[SeatSeries],
    counts: Mapping[str, SideBetCount],
    *,
    threshold: float = Z_THRESHOLD,
) -> tuple[list[Finding], int]:
    """play.side_bet_counting for every series whose test is flagged, and the number of
    series tested (those with the minimum rounds and side wagers). Fingerprint
    code|table|seat|bet|shift."""
    found, tested = [], 0
    for s in series:
        t = seat_test(s.rounds, threshold=threshold)
        if t.rounds >= MIN_ROUNDS and t.side_wagers >= MIN_SIDE_WAGERS:
            tested += 1
        if not t.flagged or t.rho is None or t.z is None:
            continue
        count = counts[s.bet]
        name = BET_NAMES.get(s.bet, s.bet)
        wagered = sum((o.amount for o in s.rounds), Decimal(0))
        evidence = {
            "table": s.table,
            "seat": s.seat,
            "bet": s.bet,
            "shift": s.shift,
            "count": count.evidence(),
            "rounds": t.rounds,
            "side_wagers": t.side_wagers,
            "wagered": str(wagered),
            "rho": round(t.rho, 4),
            "z": round(t.z, 2),
            "threshold": round(threshold, 3),
            "false_alarm_rate": FALSE_ALARM,
            "series": [[o.shoe, o.round, round(o.true, 2), str(o.amount) if o.amount else "0"]
                       for o in s.rounds],
        }
        first = next((o.ts for o in s.rounds if o.ts is not None), None)
        found.append(Finding(
            CODE,
            None,
            f"Seat {s.seat} at {s.table} in shift {s.shift}: its {name} wagers follow the "
            f"{count.name}: {t.side_wagers} {name} wagers in the {t.rounds} rounds it played, "
            f"rank correlation of wager with true count {t.rho:.2f} (z = {t.z:.1f}, flagged "
            f"from {threshold:.2f})",
            {"z_below": round(threshold, 3)},
            {"rounds": t.rounds, "side_wagers": t.side_wagers, "rho": round(t.rho, 4),
             "z": round(t.z, 2)},
            None,
            fingerprint=fingerprint(CODE, s.table, s.seat, s.bet, s.shift),
            table=s.table,
            pit=s.pit,
            ts=first,
            evidence=evidence,
        ))
    return found, tested
