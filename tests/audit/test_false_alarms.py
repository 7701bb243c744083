"""The new codes on clean simulated nights (issue 17): each within its stated false-alarm
rate. Clean means none of the patterns these codes look for is planted; the nights carry the
ordinary deviations of a night (rate 0.02) so that the dealers' chart has errors to chart
(tests/helpers/clean_nights.py).

- shoe.repeated_order: 0 (chance matches of 12 cards: 0.00033 a year at 100 tables);
- shoe.unshuffled: 0 (runs of 8: 0.00097 a year; the shuffle test: ~1e-9 a shoe);
- play.side_bet_counting: 0 expected (1e-5 per seat, shift and bet tested);
- dealer.error_rate: at most what its rate allows over the dealer-shifts charted (the
  binomial tail of 0.135% a dealer-shift, docs/dealers.md), at 99.9%;
- shoe.not_started, shoe.reopened (issue 28): 0 (a clean log names the shoe it deals from).
- the codes of logs that lie (issue 28: log.time_reversed, log.after_round_end,
  log.late_delivery, notice.backdated): 0, since a clean night's streams never run back in
  time and every round's events come before its end.

Size and power, honestly: the suite runs NIGHTS = 10 nights (80 shoes, so 3,160 pairs of
shoes searched; 119 dealer-shifts charted), to stay quick. A correct audit fails it with a
chance of about 0.06% (the dealer bound: at most 2 alarms where 0.16 are expected; the other
codes, at their stated rates, expect far less than one alarm here). It catches only a gross
fault, with 95% power: chance matches of shoes above 1 in 1,050 pairs, or dealer.error_rate
raised on more than 5.3% of dealer-shifts (39 times its stated rate). `make
bench-false-alarms` (bench/false_alarms.py) runs the same checks on 100 nights and prints the
figures: 800 shoes (319,600 pairs) and 1,199 dealer-shifts, which catch chance matches above
1 in 107,000 pairs and a dealer rate above 1.1% (8 times the stated one), for a size of 0.03%.
"""

from __future__ import annotations

import pytest
from helpers.clean_nights import Tally, clean_nights
from helpers.shared import value_once

from auditor.simulate.kinds import LIE_KINDS

pytestmark = [pytest.mark.slow, pytest.mark.stats]

NIGHTS = 10


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> Tally:
    """Audited once a run, even when this module's tests run on two workers."""
    return value_once(tmp_path_factory, f"clean-nights-{NIGHTS}",
                      lambda base: clean_nights(base, NIGHTS))


def test_no_shoe_repeats_or_unshuffled_shoe_on_clean_nights(nights: Tally) -> None:
    assert nights.shoes > 7 * NIGHTS  # the shoes searched: every one against every other
    assert nights.found["shoe.repeated_order"] == 0
    assert nights.found["shoe.unshuffled"] == 0


def test_no_counting_seat_on_clean_nights(nights: Tally) -> None:
    assert nights.found["play.side_bet_counting"] == 0


def test_dealer_alarms_within_their_rate(nights: Tally) -> None:
    assert nights.dealer_shifts > 5 * NIGHTS
    assert nights.found["dealer.error_rate"] <= nights.dealer_alarms_allowed
    # the nights did carry errors to chart
    assert nights.errors > NIGHTS // 2


def test_no_shoe_named_out_of_its_stream_on_clean_nights(nights: Tally) -> None:
    assert nights.shoes > 7 * NIGHTS
    assert nights.found["shoe.not_started"] == 0
    assert nights.found["shoe.reopened"] == 0


def test_no_lie_codes_on_clean_nights(nights: Tally) -> None:
    codes = sorted(set(LIE_KINDS.values()))
    assert {c: nights.found[c] for c in codes} == dict.fromkeys(codes, 0)
