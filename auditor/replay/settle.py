"""What each wager should have brought, and the vigorish each seat owes, by the rule pack.

Money is Decimal, rounded half up to the cent; odds are the pack's Fractions. A wager the
pack cannot settle (a side wager it does not define) has no expected settlement: the replay
then only checks that it was settled at all.
"""

from __future__ import annotations

from decimal import ROUND_DOWN, ROUND_HALF_UP, ROUND_UP, Decimal
from fractions import Fraction
from typing import NamedTuple

from auditor.replay.hands import BANKER, PLAYER, TIE, Outcome
from auditor.rules.pack import RulePack, Variant

ZERO = Decimal("0.00")
CENT = Decimal("0.01")
PAY, COLLECT, PUSH = "pay", "collect", "push"
# The rounding house options of a share of winnings, the vigorish or chemin de fer's
# commission (rules.pack.VIG_ROUNDING); amounts are never negative, so rounding toward zero
# is rounding down.
ROUNDING = {
    "exact_cents": ROUND_HALF_UP,
    "down_to_cent": ROUND_DOWN,
    "up_to_cent": ROUND_UP,
}


class Settlement(NamedTuple):
    """How a wager is settled ("pay", "collect" or "push") and the amount: the winnings for a
    pay, the stake for a collect or a push."""

    how: str
    amount: Decimal


def cents(x: Decimal) -> Decimal:
    return x.quantize(CENT, rounding=ROUND_HALF_UP)


def times(stake: Decimal, odds: Fraction) -> Decimal:
    """Winnings of `stake` at `odds`, half up to the cent (35 at 1:2 -> 17.50)."""
    return cents(Decimal(odds.numerator) * stake / Decimal(odds.denominator))


def side_bet_wins(bet: str, outcome: Outcome) -> bool:
    """Dragon 7: Banker wins with three cards totalling 7. Panda 8: Player wins with three
    cards totalling 8. Total cards N: exactly N cards were dealt."""
    if bet == "dragon7":
        return outcome.dragon7
    if bet == "panda8":
        return outcome.panda8
    if bet.startswith("total_cards_"):
        return bet.removeprefix("total_cards_") == str(outcome.total_cards)
    return False


def expected_settlement(
    bet: str, stake: Decimal, outcome: Outcome, variant: Variant, pack: RulePack
) -> Settlement | None:
    """The settlement of a `stake` on `bet` for this outcome, or None when the pack does not
    define the wager (for this variant)."""
    terms = settlement_terms(bet, outcome, variant, pack)
    if terms is None:
        return None
    how, odds = terms
    return Settlement(how, times(stake, odds) if how == PAY else stake)


def settlement_terms(
    bet: str, outcome: Outcome, variant: Variant, pack: RulePack
) -> tuple[str, Fraction] | None:
    """How a wager on `bet` is settled for this outcome, with the winnings per unit staked
    for a pay (0 otherwise); None when the pack does not define the wager. The fast verdict
    tabulates this over every outcome, so the payout rules are written once, here."""
    if bet in (PLAYER, BANKER):
        if outcome.winner == TIE:
            push = pack.value("settlement.push_on_tie", True)
            return (PUSH if push else COLLECT), Fraction(0)
        if outcome.winner != bet:
            return COLLECT, Fraction(0)
        if bet == BANKER:
            for exception in variant.banker_exceptions:
                if exception.applies(outcome.banker_count, outcome.banker_cards):
                    if exception.pays is None:
                        return PUSH, Fraction(0)
                    return PAY, exception.pays
        return PAY, variant.pays(bet)
    if bet == TIE:
        if outcome.winner == TIE:
            return PAY, variant.pays(TIE)
        return COLLECT, Fraction(0)
    side = pack.side_bets.get(bet)
    if side is None or (side.variants is not None and variant.name not in side.variants):
        return None
    if side_bet_wins(bet, outcome):
        return PAY, side.pays.value
    return COLLECT, Fraction(0)


def vigorish_owed(winnings: Decimal, variant: Variant) -> Decimal:
    """Rate x the winnings of a winning Banker wager, rounded by the variant's house option
    (default exact cents, half up); 0 in a variant without vigorish."""
    if not variant.vig_charged.value or variant.vig_rate is None:
        return Decimal(0).quantize(CENT)
    rounding = variant.vig_rounding.value if variant.vig_rounding else "exact_cents"
    return share(winnings, variant.vig_rate.value, rounding)


def share(winnings: Decimal, rate: Decimal, rounding: str) -> Decimal:
    """`rate` of `winnings` rounded to the cent by the house option `rounding` (ROUNDING): the
    house's share, vigorish in the banking games and commission at chemin de fer alike."""
    return (winnings * rate).quantize(CENT, rounding=ROUNDING[rounding])
