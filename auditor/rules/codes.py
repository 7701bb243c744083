"""The registry of finding codes: the single source for `bacc-audit codes` and docs/codes.md.

A code, once published, keeps its meaning (findings format v1). Add codes; never repurpose one.
What an entry is, with the severities and scopes, is auditor.rules.code_entry (named here too,
where the rest of the code asks for them).
"""

from __future__ import annotations

from auditor.rules.code_entry import (
    ALL_GAMES,
    BACCARAT,
    CHEMIN_ONLY,
    SCOPES,
    SEVERITIES,
    Code,
    at_least,
    check_severity,
    severity_rank,
)

__all__ = ["ALL_GAMES", "BACCARAT", "CHEMIN_ONLY", "REGISTRY", "SCOPES", "SEVERITIES", "Code",
           "at_least", "check_severity", "get", "severity_rank"]


_CODES = [
    Code(
        "draw.player_missed",
        "critical",
        "round",
        "Third-card rule for the Player hand (the tableau of the table's rule pack)",
        "Player hand did not draw a third card it had to draw",
        "A missed draw changes the outcome of every wager on the round.",
        "Player 2+3 = 5, Banker 4+2 = 6; the Player hand stands.",
        "Player 2+3 = 5 draws a third card.",
    ),
    Code(
        "draw.player_extra",
        "critical",
        "round",
        "Third-card rule for the Player hand (the tableau of the table's rule pack)",
        "Player hand drew a third card it was not entitled to",
        "An extra card changes the outcome of every wager on the round.",
        "Player 3+4 = 7 receives a third card.",
        "Player 3+4 = 7 stands.",
    ),
    Code(
        "draw.banker_missed",
        "critical",
        "round",
        "Third-card rule for the Banker hand (the tableau of the table's rule pack)",
        "Banker hand did not draw a third card it had to draw",
        "A missed draw changes the outcome of every wager on the round.",
        "Player draws a 4; Banker with 5 stands.",
        "Player draws a 4; Banker with 5 draws.",
    ),
    Code(
        "draw.banker_extra",
        "critical",
        "round",
        "Third-card rule for the Banker hand (the tableau of the table's rule pack)",
        "Banker hand drew a third card it was not entitled to",
        "An extra card changes the outcome of every wager on the round.",
        "Player draws an 8; Banker with 3 draws.",
        "Player draws an 8; Banker with 3 stands.",
    ),
    Code(
        "deal.order",
        "critical",
        "round",
        "Order of the initial deal (deal.order of the rule pack)",
        "Cards dealt out of order, or a hand with more than three cards",
        "The order of the cards decides which hand gets which card; a wrong order can be "
        "used to steer a result.",
        "Cards out of the shoe: Player, Player, Banker, Banker.",
        "Cards out of the shoe: Player, Banker, Player, Banker.",
    ),
    Code(
        "result.misannounced",
        "major",
        "round",
        "Announcement of the point counts and the winner",
        "Announced point counts or winner differ from the cards",
        "Patrons and surveillance rely on the announcement; a wrong one leads to wrong "
        "settlements and disputes.",
        "Player 6, Banker 7 announced as a Player win.",
        "Player 6, Banker 7 announced as a Banker win.",
        needs=("announcements.result",),
    ),
    Code(
        "announce.tie_missing",
        "minor",
        "round",
        "Announcement of a tie hand",
        'Equal point counts and no "Tie Hand" announcement',
        "The regulation requires the words; their absence suggests the round was not "
        "completed as the rules require.",
        'Player 5, Banker 5; no "Tie Hand" announced.',
        'Player 5, Banker 5; "Tie Hand" announced.',
        games=BACCARAT,
        needs=("announcements.tie_hand",),
    ),
    Code(
        "announce.dragon7_missing",
        "minor",
        "round",
        "Announcement of a Dragon 7",
        'A dragon 7 hand with no "dragon 7" announcement',
        "In the no-vigorish variation a dragon 7 makes Banker wagers push; the announcement "
        "tells patrons why.",
        'Banker wins with three cards totalling 7; no "dragon 7" announced.',
        'Banker wins with three cards totalling 7; "dragon 7" announced.',
        games=BACCARAT,
        needs=("announcements.dragon_7",),
    ),
    Code(
        "announce.total_cards_missing",
        "minor",
        "round",
        "Announcement of the number of cards dealt",
        "Total card wagers offered and the number of cards not announced",
        "Total card wagers are settled on that number; patrons are entitled to hear it.",
        "Five cards dealt at a table offering total card wagers; no count announced.",
        'Five cards dealt; "five cards" announced.',
        games=BACCARAT,
        needs=("announcements.total_cards",),
    ),
    Code(
        "announce.total_cards_wrong",
        "major",
        "round",
        "Announcement of the number of cards dealt",
        "The announced number of cards differs from the cards dealt",
        "Total card wagers are settled on that number; a wrong announcement misleads patrons "
        "and surveillance and leads to disputes over those wagers.",
        'Five cards dealt; "four cards" announced.',
        'Five cards dealt; "five cards" announced.',
        games=BACCARAT,
        needs=("announcements.total_cards",),
    ),
    Code(
        "announce.panda8_missing",
        "minor",
        "round",
        "Announcement of a Panda 8",
        'A panda 8 hand with no "panda 8" announcement where the pack requires one',
        "Where the house announces panda 8 hands, patrons with panda 8 wagers rely on it; "
        "raised only for a pack that makes the announcement due.",
        'Player wins with three cards totalling 8; no "panda 8" announced.',
        'Player wins with three cards totalling 8; "panda 8" announced.',
        games=BACCARAT,
        needs=("announcements.panda_8",),
    ),
    Code(
        "settle.wrong_amount",
        "critical",
        "round",
        "Payout odds of the variant and side wagers in force",
        "A wager paid, collected or returned with the wrong amount",
        "Money moved wrongly between the house and a patron.",
        "A winning 100 Player wager paid 90.",
        "A winning 100 Player wager paid 100.",
    ),
    Code(
        "settle.wrong_outcome",
        "critical",
        "round",
        "Which wagers win, lose or push under the variant in force",
        "A wager settled the wrong way (loser paid, winner collected, push collected or paid)",
        "Money moved the wrong way between the house and a patron.",
        "Banker wins; the Player wager at seat 2 is paid.",
        "Banker wins; the Player wager at seat 2 is collected.",
    ),
    Code(
        "settle.unsettled",
        "major",
        "round",
        "Every wager collected, paid or returned",
        "A wager never settled before the round ended",
        "A wager left on the layout can be settled off the record or carried into the next round.",
        "A 50 Tie wager stays on the layout at round end.",
        "The 50 Tie wager is collected when Banker wins.",
    ),
    Code(
        "vig.wrong_amount",
        "major",
        "round",
        "Vigorish rate and rounding of the variant in force",
        "Vigorish collected or marked differs from what the variant requires",
        "Wrong commission moves money between the house and a patron.",
        "A winning 100 Banker wager; vigorish 4 collected.",
        "A winning 100 Banker wager; vigorish 5 collected.",
        games=BACCARAT,
    ),
    Code(
        "vig.missing",
        "major",
        "round",
        "Vigorish owed on winning Banker wagers under the variant in force",
        "Vigorish owed on a winning Banker wager neither collected nor marked",
        "Uncollected commission is lost revenue and can hide collusion.",
        "A winning 100 Banker wager paid; no vigorish recorded.",
        "A winning 100 Banker wager paid; vigorish 5 marked.",
        games=BACCARAT,
    ),
    Code(
        "vig.not_allowed",
        "major",
        "round",
        "No vigorish under a variant that charges none",
        "Vigorish collected or marked in a variant without vigorish",
        "Patrons in a no-vigorish game are overcharged.",
        "No-vig dragon 7 table; vigorish 5 collected on a Banker win.",
        "No-vig dragon 7 table; the Banker win is paid 1 to 1, no vigorish.",
        games=BACCARAT,
        needs=("procedures.no_vigorish_variants_pay_only",),
    ),
    Code(
        "order.collect_after_pay",
        "minor",
        "round",
        "Losing wagers collected before winning wagers are paid",
        "A losing wager collected after winning wagers started to be paid",
        "Collecting first keeps the layout auditable; paying first invites past-posting "
        "and mistaken payments.",
        "Seat 5 paid, then seat 2's losing wager collected.",
        "Seat 2's losing wager collected, then seat 5 paid.",
        games=BACCARAT,
        needs=("settlement.collect_losers_first",),
    ),
    Code(
        "order.procedure_mismatch",
        "minor",
        "round",
        "The payout and vigorish procedure in force",
        "Payments and vigorish not in the order of the procedure in force",
        "The order of payment is a declared procedure; deviations hide mistakes and "
        "weaken surveillance review.",
        "Procedure 1 in force; seat 3 paid and its vigorish taken before seat 6 paid.",
        "Procedure 1 in force; seats 6 then 3 paid, then vigorish from seats 6 then 3.",
        games=BACCARAT,
        needs=("procedures.available",),
    ),
    Code(
        "procedure.notice_missing",
        "major",
        "table",
        "Written notice before a change of procedure",
        "A procedure change took effect with no written notice to the Division and surveillance",
        "The regulator and surveillance must know which procedure to expect at each table.",
        "Table changes from procedure 1 to 3 with no notice.",
        "Written notices to the Division and surveillance 45 minutes before.",
        games=BACCARAT,
        needs=("procedures.notice_minutes",),
    ),
    Code(
        "procedure.notice_late",
        "major",
        "table",
        "Written notice before a change of procedure",
        "A procedure change took effect less than 30 minutes after its written notice",
        "Thirty minutes is the regulation's minimum lead time.",
        "Notice at 22:00, change effective 22:20.",
        "Notice at 22:00, change effective 22:30.",
        games=BACCARAT,
        needs=("procedures.notice_minutes",),
    ),
    Code(
        "procedure.pit_inconsistent",
        "major",
        "table",
        "One procedure for the tables of a pit",
        "Tables in one pit on different procedures at the same time",
        "One procedure per pit lets surveillance check every table against one standard.",
        "Pit P3: MB-07 on procedure 1, MB-08 on procedure 2.",
        "Pit P3: every table on procedure 1.",
        games=BACCARAT,
        needs=("procedures.same_in_pit",),
    ),
    Code(
        "procedure.undeclared_change",
        "major",
        "table",
        "Changes of procedure declared and noticed",
        "The observed order matches a procedure other than the one declared",
        "Dealers changed procedure without a declared change or notice.",
        "Procedure 1 declared; rounds 10-40 all paid seat by seat with vigorish after each.",
        "Procedure 3 declared with notice before those rounds.",
        games=BACCARAT,
        needs=("procedures.available",),
    ),
    Code(
        "shoe.too_few_decks",
        "critical",
        "shoe",
        "Number of decks in the shoe",
        "Fewer decks than the rules require",
        "The odds of the game and the house edge assume the regulated number of decks.",
        "A shoe of 4 decks.",
        "A shoe of 8 decks (or 2 batches of 6 with an automated shuffler).",
    ),
    Code(
        "shoe.composition",
        "critical",
        "shoe",
        "Composition of the decks in the shoe",
        "A card appears more often than the decks in the shoe allow",
        "Extra cards mean the shoe was tampered with or mixed with other decks.",
        "Nine queens of hearts in an 8-deck shoe.",
        "At most eight queens of hearts in an 8-deck shoe.",
    ),
    Code(
        "shoe.batch_not_alternated",
        "major",
        "shoe",
        "Alternating batches with an automated shuffler",
        "With an automated shuffler, one batch used for two consecutive shoes",
        "Alternating batches keeps the shuffled batch out of reach while the other is dealt.",
        "Red batch for shoe 4 and again for shoe 5.",
        "Red batch for shoe 4, blue for shoe 5.",
        needs=("shoe.automated_shuffler.alternate_batches",),
    ),
    Code(
        "shoe.burn",
        "minor",
        "shoe",
        "Burn at the start of a shoe and after a card found face up",
        "The burn did not burn the right number of cards",
        "A wrong burn changes the sequence of cards and can hide a card-counting or "
        "cheating scheme.",
        "First burn card a 7; 3 more cards burned.",
        "First burn card a 7; 7 more cards burned.",
        needs=("shoe.burn",),
    ),
    Code(
        "shoe.cut_card",
        "minor",
        "shoe",
        "Position of the cutting card",
        "The cutting card came out elsewhere than the house places it",
        "The cutting card decides how many cards are never dealt; a card placed deep or "
        "shallow changes what a counting player can learn and may hide a stacked shoe.",
        "8-deck shoe, house places the cutting card 14-16 cards from the end; it came out "
        "with 60 cards left.",
        "It came out in the round that left 15 cards behind it.",
        needs=("shoe.cut_card_from_end",),
    ),
    Code(
        "shoe.end_of_shoe",
        "minor",
        "shoe",
        "Rounds dealt after the cutting card comes out",
        "Rounds dealt after the cutting card other than the house option allows",
        "Dealing on past the cutting card reaches the cards the house meant to leave unplayed; "
        "stopping short breaks the table's declared procedure.",
        "Cutting card out in round 78 (finish the round, then one more); rounds 79 and 80 "
        "dealt.",
        "Cutting card out in round 78; round 79 dealt, then the shoe ends.",
        needs=("shoe.end_of_shoe",),
    ),
    Code(
        "shoe.void_required",
        "major",
        "shoe",
        "Rounds the rules make void (a card found face up in the shoe, a shoe run out)",
        "A round the rules make void was played as valid",
        "Wagers were settled on a round the regulation voids: a last hand with a card found "
        "face up in the shoe, or a hand the shoe had too few cards to complete.",
        "A card found face up during the last round of the shoe; the round settled.",
        "The round declared void and every wager returned.",
        needs=("shoe.face_up_in_shoe",),
    ),
    # Shoes as the log records them (issue 28): defined by the event log format, not a
    # jurisdiction, so they cite the format as the log codes do.
    Code(
        "shoe.not_started",
        "major",
        "shoe",
        "Event log v1, shoe events: a table deals from the shoe its last shoe_start began, "
        "until that shoe's shoe_end; every round names that shoe",
        "Rounds (or a shoe event) name a shoe that no shoe_start began at the table",
        "A shoe that was never started has no decks on record, so its rounds would escape "
        "the checks of the shoe they were dealt from: a round relabelled to an id that looks "
        "like the real shoe's takes its cards out of that shoe's composition and counts. The "
        "cards are counted in the shoe the table was dealing from all the same, so its "
        "composition finding stands; this finding names the lie.",
        "Round 6 logged in shoe MB-01-1128-0l while MB-01 was dealing from MB-01-1128-01 "
        "(shoe_start at seq 2); no shoe_start of MB-01-1128-0l.",
        "Round 6 logged in shoe MB-01-1128-01, the shoe the table started.",
        games=(),
    ),
    Code(
        "shoe.reopened",
        "major",
        "shoe",
        "Event log v1, shoe events: a shoe replaced by another shoe_start is not dealt from "
        "again without a new shoe_start",
        "A table goes back to an earlier shoe of its own without a new shoe_start",
        "Cards of a finished or replaced shoe do not come back to the table; rounds logged in "
        "it after another shoe began are either dealt from the shoe in play (and counted "
        "there) or the log is wrong, and either way the record of the shoes is not what "
        "happened.",
        "Rounds of shoe MB-01-1128-01, shoe_start of MB-01-1128-02, its rounds, then a round "
        "logged in MB-01-1128-01 again.",
        "Every round after the shoe_start of MB-01-1128-02 logged in MB-01-1128-02.",
        games=(),
    ),
    Code(
        "irregularity.disposition",
        "major",
        "round",
        "Dispositions of irregularities",
        "An irregularity resolved other than the rules allow",
        "How a card dealt in error is used decides the round; a disposition the rules do not "
        "allow for the situation can turn the result for or against the wagers on it.",
        "A third card dealt to the Player in error while the Banker with 6 must stand; it is "
        "made the Banker's third card.",
        "The card is kept as the first card of the next round.",
        games=BACCARAT,
        needs=("irregularities",),
    ),
    Code(
        "log.seq_gap",
        "major",
        "log",
        "Event log v1: seq increases by 1 per event in a stream",
        "A stream's seq skips numbers: events are missing",
        "Missing events make every check on the affected rounds incomplete.",
        "Table MB-07: seq 41 followed by seq 44.",
        "Table MB-07: seq 41, 42, 43, 44.",
        games=(),
    ),
    Code(
        "log.malformed",
        "major",
        "log",
        "Event log v1",
        "A line could not be read as a v1 event (kept in quarantine)",
        "The event is not audited until the line is corrected and ingested again.",
        '{"v":1,"type":"pay","amount":-5, ...}',
        '{"v":1,"type":"pay","amount":5, ...}',
        games=(),
    ),
    Code(
        "log.altered",
        "critical",
        "log",
        "Event log v1; the audit database is evidence",
        "A file already ingested was offered again with different content",
        "Logs are evidence; a changed log after ingest may be a tampering attempt.",
        "night.jsonl ingested at 06:00, offered again at 07:00 with a changed payout.",
        "night.jsonl offered again unchanged: nothing new is loaded.",
        games=(),
    ),
    Code(
        "log.table_unclosed",
        "major",
        "log",
        "Event log v1, table events: a table's opening is recorded from its table_open to its "
        "table_close",
        "A table opening with no table_close: the table's log stops, or the table opens again, "
        "without it",
        "Rounds that are not in the log are never audited, and a log cut at a round boundary "
        "shows no gap in seq. The end of a table's log is judged only once the gaming day of "
        "its last event is closed on record (nightly closes the day it reports, close-day by "
        "hand, watch once the logs reach the day's end plus its grace, audit once the "
        "database holds an event at or after the day's end), so a night still being "
        "delivered is not flagged, and the day's own report shows it; a later file that "
        "completes the table withdraws it.",
        "Table MB-03's log stops at 01:12 after round 31 of its fourth shoe; the other tables "
        "closed after 06:00.",
        "Its file goes on to the end of the shoe and the table_close at 06:04.",
        games=(),
    ),
    Code(
        "log.shoe_unfinished",
        "minor",
        "log",
        "Event log v1, table events: a shoe is recorded from its shoe_start to its shoe_end",
        "A shoe with no shoe_end although the table went on to another shoe, closed or opened "
        "again",
        "Without the shoe's end the cards left in it are not known, so the shoe's count in all "
        "and its last rounds cannot be checked, and the record of the night has a hole. A shoe "
        "in play where a table's log stops is named in that table's log.table_unclosed instead.",
        "Shoe MB-03-1128-02 ends after round 74 with no shoe_end; shoe_start of MB-03-1128-03 "
        "follows.",
        "shoe_end of MB-03-1128-02 with 15 cards remaining, then shoe_start of MB-03-1128-03.",
        games=(),
    ),
    # --- logs that lie (issue 28): a stream is read in its order -------------------------
    Code(
        "log.time_reversed",
        "major",
        "log",
        "Event log v1: within a stream, events are written in seq order as they happen, so "
        "time never runs backwards from one event to the next (beyond the clocks' tolerance "
        "of 2 seconds)",
        "Time runs backwards within a stream: an event is stamped earlier than one logged "
        "before it",
        "A stamp that contradicts the stream's order is a clock fault or an edit; either way the "
        "times the checks depend on (a notice's lead, the procedure in force, the shift a "
        "round belongs to) cannot be taken as written. The checks use the stream's order "
        "instead, and this finding shows both events.",
        "Table MB-07: seq 3120 (procedure_change) stamped 22:45:00, seq 3121 (round_start) "
        "22:30:49.",
        "seq 3120 stamped 22:30:20, before seq 3121 at 22:30:49.",
        games=(),
    ),
    Code(
        "log.after_round_end",
        "major",
        "log",
        "Event log v1, round events: a round is what its stream logged between its "
        "round_start and its round_end (at chemin de fer, with the bank's passing right after)",
        "Events of a round logged after its round_end, or after the table's table_close",
        "A round is judged as it stood at its round_end: a payment, a card or a vigorish "
        "logged after it cannot change what the round showed, or a missed draw or a short "
        "payment could be mended in the log after the fact. The late events are reported "
        "here, with how late they came, and the round keeps its findings.",
        "Round 12 ends at 23:04; a Banker card for round 12 is logged at 00:02, 90 events "
        "later.",
        "The Banker card is logged before round 12's round_end.",
        games=(),
    ),
    Code(
        "log.late_delivery",
        "major",
        "log",
        "Event log v1: a round's events are delivered by the time the round is judged after "
        "its round_end",
        "Events of a round already judged arrived in a later delivery",
        "A round judged after its round_end keeps its findings: events delivered afterwards "
        "(another file, or a later piece of a file, ingested after the judgement) could "
        "otherwise change a verdict already on record. They are reported here with the file "
        "that brought them and when the round was judged.",
        "Round 31 judged at 23:10 with a seq gap; at 02:00 a new file brings the missing "
        "seq, a Banker card.",
        "Every event of round 31 delivered before 23:10.",
        games=(),
    ),
    Code(
        "log.future_stamp",
        "major",
        "log",
        "Event log v1: an event is stamped when it happens, so no stamp is later than the "
        "delivery of its line to the auditor (beyond the clocks' tolerance of 5 minutes)",
        "Events stamped later than the time their lines were delivered",
        "No event is logged before it happens: a stamp ahead of its own delivery is an edit or "
        "a clock set wrong. Taken as written it would show the logs reaching past the end of a "
        "gaming day, closing the day early, so that rounds still being dealt at other tables "
        "were judged from part of their events. Such events close no day; they are reported "
        "here with the delivery that brought them.",
        "Table MB-02's table_close, read by the watch at 05:52, is stamped 2027-01-01 05:51.",
        "The table_close read at 05:52 is stamped 05:51:58.",
        games=(),
    ),
    Code(
        "notice.backdated",
        "major",
        "table",
        "Written notice before a change of procedure, logged before the change",
        "A notice of a procedure change logged or delivered after the change, stamped as "
        "given before it",
        "A notice counts only if it was on record before the change it announces: one that "
        "the pit's log shows after the change, or that reached the audit after the change was "
        "judged, is stamped earlier than it was written. It does not count, and the change "
        "keeps its notice finding.",
        "Change at 22:30 judged at 22:31 with a late notice; at 02:00 a file adds notices "
        "stamped 21:45.",
        "The notices, given at 21:45, are in the pit's log before the change.",
        games=BACCARAT,
        needs=("procedures.notice_minutes",),
    ),
    Code(
        "chemin.priority",
        "major",
        "chemin",
        "Order of priority of wagers against the bank",
        "Wagers against the Banker not accepted in the order of priority",
        "The regulation fixes who may bet against the bank first; favouritism breaks it.",
        "A partial wager accepted before an announced banco suivi.",
        "The banco suivi accepted first.",
        games=CHEMIN_ONLY,
    ),
    Code(
        "chemin.over_bank",
        "major",
        "chemin",
        "Wagers against the bank limited to the bank",
        "Wagers against the bank exceed the bank",
        "Participants may not wager more than the Banker has at stake.",
        "Bank 1000; wagers against it total 1200.",
        "Bank 1000; wagers against it total 1000.",
        games=CHEMIN_ONLY,
    ),
    Code(
        "chemin.late_wager",
        "major",
        "chemin",
        "No wager after \"No more bets\"",
        'A wager made, raised or withdrawn after "No more bets"',
        "Late wagers are past-posting.",
        'A partial wager of 200 after "No more bets".',
        'The partial wager of 200 before "No more bets".',
        games=CHEMIN_ONLY,
    ),
    Code(
        "chemin.option",
        "major",
        "chemin",
        "Drawing decisions only where the tableau gives an option",
        "A decision taken where the rules allow none",
        "Outside the option cells, drawing is mandatory: a decision declared there is either "
        "carried out against the rules or shows a table that treats the cell as a choice.",
        "Player with 3 declares stay.",
        "Player with 3 draws.",
        lesser=("minor", "the cards follow the mandatory cell all the same"),
        games=CHEMIN_ONLY,
    ),
    Code(
        "chemin.commission",
        "major",
        "chemin",
        "Commission on the Banker's winnings",
        "Commission on the Banker's winnings wrong",
        "Wrong commission moves money between the house and a participant.",
        "Banker wins 1000; commission 40 at a 5% table.",
        "Banker wins 1000; commission 50.",
        games=CHEMIN_ONLY,
    ),
    Code(
        "chemin.option_not_followed",
        "major",
        "chemin",
        "A declared option followed by the cards",
        "At an option cell, the cards do not follow the decision declared",
        "At an option cell the hand's holder chooses; a card dealt against a declared "
        '"stay" (or withheld after "card") takes the choice away from the participant and '
        "changes the result.",
        'Player with 5 declares "stay" and is given a third card.',
        'Player with 5 declares "stay" and stands.',
        games=CHEMIN_ONLY,
    ),
    Code(
        "chemin.bank_pass",
        "minor",
        "chemin",
        "Passing of the bank",
        "The bank changed hands other than the logged passes and the table's rules allow",
        "Who holds the bank decides who plays the Banker's hand and takes its winnings; a bank "
        "that changes hands with no recorded pass, or a losing Banker who keeps it where the "
        "house passes it, is worth a look at the video.",
        "Seat 3 lost the coup as Banker; the next coup is banked by seat 3 again, no bank_pass.",
        "Seat 3 lost; bank_pass from seat 3 to seat 4; seat 4 banks the next coup.",
        games=CHEMIN_ONLY,
    ),
    Code(
        "irregularity.chemin_disposition",
        "major",
        "chemin",
        "Dispositions of chemin de fer irregularities",
        "A chemin de fer irregularity resolved other than 13:69F-4.12 allows",
        "How a card dealt in error is used decides the coup; a disposition the regulation does "
        "not allow for the situation, or a 4.12(h) procedure other than the one the licensee "
        "pre-selected, can turn the result for or against the wagers on it.",
        "A card dealt face up to the Dominant Player after \"Stay\" while the Banker with 7 "
        "must stay; it is made the Banker's card.",
        "The card is burned by the pre-selected 4.12(h) procedure.",
        games=CHEMIN_ONLY,
    ),
    Code(
        "irregularity.unknown_kind",
        "info",
        "round",
        "Irregularity kinds the table's rule pack lists",
        "An irregularity of a kind the table's rule pack does not list",
        "The audit cannot judge a resolution it has no rule for, so someone should read the "
        "dealer's report and the video. At a mini-baccarat or punto banco table the round "
        "still gets every check on the cards as dealt, so the declaration cannot hide a wrong "
        "draw or payout; at a chemin de fer table the cards of the coup are not judged.",
        'An NJ mini-baccarat round logs irregularity kind "shoe_dropped", which the NJ pack '
        "does not list (the round is still checked on the cards as dealt).",
        'An NZ mini-baccarat round logs kind "player_extra_card", which the NZ pack lists '
        "(rule 12.2), and its disposition is judged.",
    ),
    Code(
        "dealer.error_rate",
        "minor",
        "dealer",
        "House control, no jurisdiction's provision: a dealer's proportion of rounds with a "
        "finding over a shift stays within the shift's p-chart upper control limit "
        "(p̄ + 3·√(p̄(1-p̄)/n), docs/dealers.md)",
        "A dealer's rate of rounds with findings over a shift is above the control limit",
        "Each slip is a finding of its round; a dealer whose rounds go wrong far more often "
        "than the rest of the shift's is a matter for training or supervision, and worth a "
        "look at the video of the rest of their rounds, which no single round shows.",
        "Shift 2026-12-01/grave: 1,200 rounds, 30 with a finding (2.5%); dealer D4821 dealt "
        "120 of them, 20 with a finding (16.7%), above the limit of 6.8% for 120 rounds.",
        "Dealer D4821: 3 of 120 rounds with a finding (2.5%), within the limit.",
        games=(),
    ),
    Code(
        "shoe.repeated_order",
        "critical",
        "shoe",
        "House control, no jurisdiction's provision in our sources: a shoe's order comes from "
        "its own shuffle, so no run of its dealt cards repeats an earlier shoe's longer than "
        "chance allows (docs/shoe-integrity.md states the length and its sum)",
        "A shoe repeats, card for card, a long run of an earlier shoe",
        "Chance does not repeat a run this long in a year of shoes: the cards were pre-arranged, "
        "or a shoe already dealt was put back in play without a shuffle. Whoever knows the "
        "first shoe knows the outcome of every round of the run.",
        "Shoe MB-03-1202-04 deals, from its 41st card, the 96 cards that shoe MB-07-1130-02 "
        "dealt from its 12th card, in the same order.",
        "No run of 12 cards or more of a shoe appears, in order, in any earlier shoe.",
        games=(),
    ),
    Code(
        "shoe.unshuffled",
        "major",
        "shoe",
        "House control, no jurisdiction's provision in our sources: cards are shuffled before "
        "they are dealt, so a shoe shows neither a new pack's order nor the previous shoe's "
        "order beyond what a shuffle leaves (docs/shoe-integrity.md states both tests)",
        "A shoe deals a run in a new pack's order, or keeps too much of the previous shoe's order",
        "An unshuffled run is a run anyone who knows a new pack's order can predict; a shoe "
        "that keeps the order of the previous one was shuffled too little, and a player who "
        "tracked the previous shoe can follow the cards.",
        "Cards 60 to 72 of the shoe are the ace to king of spades in order.",
        "No run of 8 or more cards in a new pack's order, and as many of the previous shoe's "
        "neighbouring pairs as a shuffle leaves by chance.",
        games=(),
    ),
    Code(
        "play.side_bet_counting",
        "info",
        "play",
        "Surveillance, no jurisdiction's provision: a seat's Dragon 7 or Panda 8 wagers "
        "that grow with the published count of the cards dealt (docs/side-bets.md)",
        "A seat's Dragon 7 or Panda 8 wager sizes follow the count of the shoe",
        "Dragon 7 and Panda 8 can be beaten by counting the cards dealt; a seat whose side "
        "wagers rise with the count is likely counting, which is legal in most places but "
        "turns the house edge of the wager against the house. Surveillance decides what to do.",
        "Seat 3 wagers on Dragon 7 in 41 of 380 rounds, 38 of them at a true count of 4 or "
        "more; the rank correlation of its wager with the count is 0.46 (z = 9.0).",
        "Seat 3's Dragon 7 wagers come at any count: rank correlation 0.02 (z = 0.4).",
        games=(),
    ),
]


REGISTRY: dict[str, Code] = {c.code: c for c in _CODES}


def get(code: str) -> Code:
    """The registry entry; a KeyError here is a bug (a finding with an unregistered code)."""
    return REGISTRY[code]
