"""The deviations a simulated night can plant, each with the finding code the audit must raise
for it (the ground truth's `code`), and which of them a table of a given layout can show.
"""

from __future__ import annotations

from auditor.replay.shoes import ShoeRules
from auditor.rules.pack import load_pack
from auditor.simulate.deal import panda8_due
from auditor.simulate.generator import TableSpec

# The deviation kinds the generator can plant, with the finding code the audit must raise.
BANKING_KINDS = {
    "banker_missed": "draw.banker_missed",
    "player_extra": "draw.player_extra",
    "player_missed": "draw.player_missed",
    "banker_extra": "draw.banker_extra",
    "deal_order": "deal.order",
    "wrong_winner": "result.misannounced",
    "tie_missing": "announce.tie_missing",
    "dragon_missing": "announce.dragon7_missing",
    "total_cards_missing": "announce.total_cards_missing",
    "total_cards_wrong": "announce.total_cards_wrong",
    "pay_short": "settle.wrong_amount",
    "push_collected": "settle.wrong_outcome",
    "unsettled": "settle.unsettled",
    "vig_short": "vig.wrong_amount",
    "vig_not_allowed": "vig.not_allowed",
    "vig_missing": "vig.missing",
    "collect_after_pay": "order.collect_after_pay",
    "procedure_order": "order.procedure_mismatch",
    "panda8_missing": "announce.panda8_missing",  # only where a (house) pack makes it due
    "irregular_disposition": "irregularity.disposition",  # NZ rule 12.2
}
CHEMIN_KINDS = {
    "partial_order": "chemin.priority",
    "over_bank": "chemin.over_bank",
    "late_wager": "chemin.late_wager",
    "option_not_allowed": "chemin.option",
    "commission_short": "chemin.commission",
    "suivi_not_entitled": "chemin.priority",
    "option_flipped": "chemin.option_not_followed",
    "bank_unlogged": "chemin.bank_pass",
    "unknown_irregularity": "irregularity.unknown_kind",
    "disposition_wrong_h": "irregularity.chemin_disposition",
}
# Shoe-level kinds: each one, independently, in a shoe with probability R.
SHOE_KINDS = {
    "few_decks": "shoe.too_few_decks",  # two decks fewer than the pack requires
    "extra_card": "shoe.composition",  # decks + 1 copies of one card early in the shoe
    "batch_repeated": "shoe.batch_not_alternated",  # the previous shoe's batch again
    "burn_wrong": "shoe.burn",  # one card short of, or one or two beyond, the burn
    "cut_misplaced": "shoe.cut_card",  # the cutting card 40-60 cards from the end
    "past_cut": "shoe.end_of_shoe",  # two rounds after the cutting card's instead of one
    "face_up_last": "shoe.void_required",  # a card face up in the last round, settled
}
# Table- and pit-level kinds: per NJ pit (the notices, one table changing alone) or per table
# (a run of rounds paid in another procedure's order), each with probability R.
PROCEDURE_KINDS = {
    "notice_missing": "procedure.notice_missing",  # the pit's change notified to one recipient
    "notice_late": "procedure.notice_late",  # its notices 20 minutes ahead
    "lone_change": "procedure.pit_inconsistent",  # one table changes a quarter in, notified
    "undeclared": "procedure.undeclared_change",  # three paying rounds in another order
}
# Log-level kinds: each one, independently, per table file with probability R.
LOG_KINDS = {
    "seq_skipped": "log.seq_gap",  # a seq number skipped before table_close
    "bad_line": "log.malformed",  # a round_start written first without its UTC offset
    "resent_changed": "log.altered",  # a second file resends events, one payout changed
    "night_cut": "log.table_unclosed",  # the night stops after its last round, unclosed
    "shoe_end_lost": "log.shoe_unfinished",  # a shoe_end never written, the next shoe follows
}
# Patterns planted only when asked (see auditor.simulate.planted): a dealer with many times
# the others' deviations during the grave shift; a seat whose Dragon 7 wagers follow the count.
DEALER_KINDS = {"error_prone_dealer": "dealer.error_rate"}
SIDE_BET_KINDS = {"counting_seat": "play.side_bet_counting"}
# Shoe orders, planted only when asked (`simulate(shoe_twice=True, unshuffled=True)`), each
# once a night at manual-shuffle banking tables (docs/shoe-integrity.md): a shoe dealt again,
# card for card, at another table; a shoe shuffled with two riffles only; the thirteen cards
# of one suit, ace to king, twenty cards into a shoe.
ORDER_KINDS = {
    "shoe_twice": "shoe.repeated_order",
    "weak_shuffle": "shoe.unshuffled",
    "pack_run": "shoe.unshuffled",
}
# Shoe lies (issue 28), planted only when asked (`simulate(phantom_shoe=True,
# shoe_reopened=True)`, auditor.simulate.shoe_lies): the round with a shoe's card too many
# logged under another shoe id, the shoe's remaining raised by its cards. The card too many
# stays an extra_card line of the ground truth.
SHOE_LIE_KINDS = {
    "phantom_shoe": "shoe.not_started",  # a shoe id one character off the real one
    "earlier_shoe": "shoe.reopened",  # the next round of the table's previous shoe
    "remaining_raised": "shoe.composition",  # the real shoe's count in all, off by the round
}
# Logs that lie (issue 28), planted only when asked (`simulate(lying=True)`,
# auditor.simulate.lies): each with the code that names the lie; the deviation it tried to
# hide stays in the ground truth at its own severity.
LIE_KINDS = {
    "late_settle": "log.after_round_end",  # a short vigorish made up after the table closed
    "late_card": "log.after_round_end",  # a missed Banker card logged 58 minutes later
    "late_delivery": "log.late_delivery",  # that card at a seq left free, delivered later
    "change_postdated": "log.time_reversed",  # a late-notified change stamped 15 min later
    "notices_backdated": "notice.backdated",  # its notices again, stamped 50 min ahead, later
    "stamped_ahead": "log.future_stamp",  # a table_close stamped a century ahead, later
}
KIND_CODES = (BANKING_KINDS | CHEMIN_KINDS | SHOE_KINDS | PROCEDURE_KINDS | LOG_KINDS
              | DEALER_KINDS | SIDE_BET_KINDS | ORDER_KINDS | SHOE_LIE_KINDS
              | LIE_KINDS)


def table_kinds(spec: TableSpec) -> tuple[str, ...]:
    """The deviation kinds the generator can plant at a table of this layout."""
    if spec.game == "chemin_de_fer":
        return tuple(CHEMIN_KINDS)
    pack = load_pack(spec.jurisdiction, spec.game)
    vig = bool(pack.variant(spec.variant).vigorish_rate)
    out = []
    for kind in BANKING_KINDS:
        if kind == "panda8_missing" and not panda8_due(pack, spec.variant):
            continue
        if kind == "irregular_disposition" and not pack.value("irregularities.player_extra_card"):
            continue
        if kind == "dragon_missing" and spec.variant != "no_vig_dragon7":
            continue
        if kind in ("total_cards_missing", "total_cards_wrong") and (
            "total_cards_5" not in spec.side_bets
        ):
            continue
        if kind in ("vig_short", "vig_missing", "procedure_order") and not vig:
            continue
        if kind == "vig_not_allowed" and vig:
            continue
        if kind == "procedure_order" and spec.procedure is None:
            continue
        out.append(kind)
    return tuple(out)


def shoe_kinds(spec: TableSpec) -> tuple[str, ...]:
    """The shoe-level kinds the generator can plant at a table of this layout."""
    rules = ShoeRules.of(load_pack(spec.jurisdiction, spec.game))
    out = ["few_decks", "extra_card"]
    if spec.shuffle == "automated" and rules.alternate_batches and len(spec.batches) > 1:
        out.append("batch_repeated")
    if rules.burn is not None and rules.burn.get("burn") == "card_value":
        out.append("burn_wrong")
    if rules.cut_from_end is not None:
        out.append("cut_misplaced")
    if rules.end_of_shoe == "finish_round_then_one_more":
        out.append("past_cut")
    if rules.face_up_rule and spec.game != "chemin_de_fer":
        out.append("face_up_last")
    return tuple(out)
