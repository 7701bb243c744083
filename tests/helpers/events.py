"""Events of event log v1 for the tests: the contract's example, one valid event of every type,
the variations the contract allows and the lines it forbids (each with the field at fault), the
JSON Schema they are checked against, and builders for valid events and JSONL lines.

tests/ingest/test_schema.py checks these examples against the schema; the ingest tests build their
lines from them, so the schema tests and the ingest tests share one notion of "valid".
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = ROOT / "auditor" / "ingest" / "schema" / "event-log-v1.schema.json"
DOCS_PATH = ROOT / "docs" / "event-log.md"

SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
VALIDATOR = Draft202012Validator(SCHEMA)

# The example of the contract (spec/event-log-v1.md), verbatim.
CONTRACT_EXAMPLE = """\
{"v":1,"ts":"2026-11-28T22:00:00-05:00","type":"table_open","table":"MB-07","pit":"P3","seq":1,"game":"mini_baccarat","jurisdiction":"NJ","variant":"standard","procedure":1,"seats":7,"side_bets":["tie"]}
{"v":1,"ts":"2026-11-28T22:00:05-05:00","type":"shoe_start","table":"MB-07","seq":2,"shoe":"MB-07-0001","decks":8,"shuffle":"manual","batch":"red"}
{"v":1,"ts":"2026-11-28T22:00:09-05:00","type":"burn","table":"MB-07","seq":3,"shoe":"MB-07-0001","cards":["3h","Kc","8s","2d"]}
{"v":1,"ts":"2026-11-28T22:00:20-05:00","type":"round_start","table":"MB-07","seq":4,"shoe":"MB-07-0001","round":1}
{"v":1,"ts":"2026-11-28T22:00:31-05:00","type":"wager","table":"MB-07","seq":5,"shoe":"MB-07-0001","round":1,"seat":3,"bet":"banker","amount":100}
{"v":1,"ts":"2026-11-28T22:00:40-05:00","type":"no_more_bets","table":"MB-07","seq":6,"shoe":"MB-07-0001","round":1}
{"v":1,"ts":"2026-11-28T22:00:42-05:00","type":"card","table":"MB-07","seq":7,"shoe":"MB-07-0001","round":1,"to":"player","card":"4d"}
{"v":1,"ts":"2026-11-28T22:00:43-05:00","type":"card","table":"MB-07","seq":8,"shoe":"MB-07-0001","round":1,"to":"banker","card":"Qs"}
{"v":1,"ts":"2026-11-28T22:00:44-05:00","type":"card","table":"MB-07","seq":9,"shoe":"MB-07-0001","round":1,"to":"player","card":"Th"}
{"v":1,"ts":"2026-11-28T22:00:45-05:00","type":"card","table":"MB-07","seq":10,"shoe":"MB-07-0001","round":1,"to":"banker","card":"7c"}
{"v":1,"ts":"2026-11-28T22:00:47-05:00","type":"card","table":"MB-07","seq":11,"shoe":"MB-07-0001","round":1,"to":"player","card":"2h"}
{"v":1,"ts":"2026-11-28T22:00:50-05:00","type":"announce","table":"MB-07","seq":12,"shoe":"MB-07-0001","round":1,"kind":"result","player":6,"banker":7,"winner":"banker"}
{"v":1,"ts":"2026-11-28T22:00:55-05:00","type":"pay","table":"MB-07","seq":13,"shoe":"MB-07-0001","round":1,"seat":3,"bet":"banker","amount":100}
{"v":1,"ts":"2026-11-28T22:00:58-05:00","type":"vig","table":"MB-07","seq":14,"shoe":"MB-07-0001","round":1,"seat":3,"amount":5,"mode":"collect"}
{"v":1,"ts":"2026-11-28T22:01:02-05:00","type":"round_end","table":"MB-07","seq":15,"shoe":"MB-07-0001","round":1}
"""


def table_event(type_: str, **fields: Any) -> dict[str, Any]:
    event = {"v": 1, "ts": "2026-11-28T22:00:00-05:00", "type": type_, "table": "MB-07", "seq": 2}
    return event | fields


def round_event(type_: str, **fields: Any) -> dict[str, Any]:
    return table_event(type_, shoe="MB-07-0001", round=1, **fields)


def pit_event(type_: str, **fields: Any) -> dict[str, Any]:
    event = {"v": 1, "ts": "2026-11-28T21:00:00-05:00", "type": type_, "pit": "P3", "seq": 1}
    return event | fields


def changed(event: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return event | fields


def without(event: dict[str, Any], field: str) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k != field}


TABLE_OPEN_NJ = table_event(
    "table_open",
    pit="P3",
    game="mini_baccarat",
    jurisdiction="NJ",
    variant="standard",
    procedure=1,
    seats=7,
    side_bets=["total_cards", "dragon7", "panda8"],
)
TABLE_OPEN_CHEMIN = table_event(
    "table_open",
    pit="P1",
    game="chemin_de_fer",
    jurisdiction="NJ",
    variant="standard",
    seats=9,
    side_bets=[],
)
PROCEDURE_NOTICE = pit_event(
    "procedure_notice",
    procedure=2,
    effective="2026-11-28T22:00:00-05:00",
    recipient="division",
    written=True,
)
WAGER = round_event("wager", seat=3, bet="banker", amount=100)
CARD = round_event("card", to="player", card="4d")
RESULT = round_event("announce", kind="result", player=6, banker=7, winner="banker")

# One good event of every type in the contract.
VALID_EVENTS: dict[str, dict[str, Any]] = {
    "table_open": TABLE_OPEN_NJ,
    "procedure_change": table_event("procedure_change", procedure=3),
    "table_close": table_event("table_close"),
    "shoe_start": table_event(
        "shoe_start", shoe="MB-07-0002", decks=6, shuffle="automated", batch="blue"
    ),
    "burn": table_event("burn", shoe="MB-07-0001", cards=["3h", "Kc", "8s", "2d"]),
    "face_up_in_shoe": table_event(
        "face_up_in_shoe", shoe="MB-07-0001", card="2c", burned=["9h", "Jd"]
    ),
    "cut_card": table_event("cut_card", shoe="MB-07-0001", round=61),
    "shoe_end": table_event("shoe_end", shoe="MB-07-0001", remaining=14),
    "procedure_notice": PROCEDURE_NOTICE,
    "round_start": round_event("round_start"),
    "wager": WAGER,
    "no_more_bets": round_event("no_more_bets"),
    "card": CARD,
    "announce": RESULT,
    "collect": round_event("collect", seat=5, bet="player", amount="25.00"),
    "pay": round_event("pay", seat=3, bet="banker", amount=100),
    "push": round_event("push", seat=4, bet="banker", amount=50),
    "vig": round_event("vig", seat=3, amount=5, mode="collect"),
    "void": round_event("void", reason="card found face up in the shoe"),
    "irregularity": round_event(
        "irregularity", kind="player_extra_card", card="5s", disposition="banker_third_card"
    ),
    "round_end": round_event("round_end"),
    "bank": round_event("bank", seat=4, amount=1000),
    "banco": round_event("banco", seat=6, kind="seul", amount=1000),
    "option": round_event("option", hand="player", choice="stay"),
    "commission": round_event("commission", seat=4, amount="50.00"),
    "bank_pass": round_event("bank_pass", from_seat=4, to_seat=5),
}

# Variations the contract allows, beyond the plain examples above.
ACCEPTED = {
    "seq_from_0": changed(WAGER, seq=0),
    "ts_utc_Z": changed(WAGER, ts="2026-11-29T03:00:00Z"),
    "ts_lowercase_t_and_z": changed(WAGER, ts="2026-11-29t03:00:00z"),
    "ts_space_separator": changed(WAGER, ts="2026-11-28 22:14:03-05:00"),
    "ts_fraction_of_second": changed(WAGER, ts="2026-11-28T22:14:03.120-05:00"),
    "ts_leap_second": changed(WAGER, ts="2016-12-31T23:59:60Z"),
    "card_ten_as_10": changed(CARD, card="10S"),
    "card_lowercase": changed(CARD, card="qh"),
    "card_uppercase_suit": changed(CARD, card="AD"),
    "amount_string_2_decimals": changed(WAGER, amount="125.50"),
    "amount_string_1_decimal": changed(WAGER, amount="125.5"),
    "amount_string_integer": changed(WAGER, amount="125"),
    "amount_number_2_decimals": changed(WAGER, amount=0.07),
    "amount_zero": changed(WAGER, amount=0),
    "side_bet_wager": changed(WAGER, bet="total_cards_5"),
    "unknown_extra_field": changed(WAGER, terminal="T-12", chips={"red": 4}),
    "dealer_and_origin": changed(WAGER, dealer="E10422", origin="tms"),
    "dealer_integer_id": changed(WAGER, dealer=10422),
    "pit_on_round_event": changed(WAGER, pit="P3"),
    "table_id_full_alphabet_32": changed(WAGER, table="Ab9._-" + "x" * 26),
    "shoe_id_full_alphabet_64": changed(WAGER, shoe="Ab9._-" + "x" * 58),
    "batch_id_with_dots": changed(VALID_EVENTS["shoe_start"], batch="batch.2-B_x"),
    "table_open_chemin_de_fer_without_procedure": TABLE_OPEN_CHEMIN,
    # The audit, not the format, reports an NJ table with no procedure in force.
    "table_open_nj_mini_baccarat_without_procedure": without(TABLE_OPEN_NJ, "procedure"),
    "table_open_nz_without_procedure": without(
        changed(TABLE_OPEN_NJ, jurisdiction="NZ", game="punto_banco"), "procedure"
    ),
    "table_open_other_variant": changed(TABLE_OPEN_NJ, variant="no_vig_dragon7"),
    "shoe_end_without_remaining": table_event("shoe_end", shoe="MB-07-0001"),
    "burn_empty_left_to_audit": table_event("burn", shoe="MB-07-0001", cards=[]),
    "procedure_notice_for_some_tables": changed(PROCEDURE_NOTICE, tables=["MB-07", "MB-08"]),
    "procedure_notice_to_surveillance": changed(PROCEDURE_NOTICE, recipient="surveillance"),
    "announce_tie_hand": round_event("announce", kind="tie_hand"),
    "announce_dragon_7": round_event("announce", kind="dragon_7"),
    "announce_panda_8": round_event("announce", kind="panda_8"),
    "announce_total_cards": round_event("announce", kind="total_cards", count=5),
    "vig_marked": round_event("vig", seat=3, amount="2.50", mode="mark"),
    "irregularity_without_card": without(VALID_EVENTS["irregularity"], "card"),
    "banco_suivi": round_event("banco", seat=5, kind="suivi", amount=500),
    "banco_partial": round_event("banco", seat=7, kind="partial", amount="120.50"),
    "option_banker_card": round_event("option", hand="banker", choice="card"),
}

# Lines the contract forbids, each with the one field the rejection must name.
REJECTED = {
    "naive_timestamp": (changed(WAGER, ts="2026-11-28T22:00:00"), "ts"),
    "timestamp_without_seconds": (changed(WAGER, ts="2026-11-28T22:00-05:00"), "ts"),
    "timestamp_date_only": (changed(WAGER, ts="2026-11-28"), "ts"),
    "timestamp_month_13": (changed(WAGER, ts="2026-13-28T22:00:00Z"), "ts"),
    "timestamp_as_epoch_number": (changed(WAGER, ts=1795921200), "ts"),
    "negative_amount": (changed(WAGER, amount=-5), "amount"),
    "negative_amount_string": (changed(WAGER, amount="-5"), "amount"),
    "amount_string_3_decimals": (changed(WAGER, amount="12.345"), "amount"),
    "amount_string_exponent": (changed(WAGER, amount="1e2"), "amount"),
    "amount_string_thousands_separator": (changed(WAGER, amount="1,000"), "amount"),
    "amount_string_non_ascii_digits": (changed(WAGER, amount="\u0661\u0662"), "amount"),
    "amount_boolean": (changed(WAGER, amount=True), "amount"),
    "unknown_type": (changed(WAGER, type="shuffle_start"), "type"),
    "card_1x": (changed(CARD, card="1x"), "card"),
    "card_unknown_suit": (changed(CARD, card="Ae"), "card"),
    "card_with_trailing_newline": (changed(CARD, card="Ts\n"), "card"),
    "burn_with_bad_card": (table_event("burn", shoe="MB-07-0001", cards=["3h", "11c"]), "cards"),
    "table_id_with_space": (changed(WAGER, table="MB 07"), "table"),
    "table_id_33_chars": (changed(WAGER, table="x" * 33), "table"),
    "table_id_empty": (changed(WAGER, table=""), "table"),
    "table_id_with_trailing_newline": (changed(WAGER, table="MB-07\n"), "table"),
    "pit_id_with_slash": (changed(TABLE_OPEN_NJ, pit="P3/east"), "pit"),
    # Ids the checks group by: no invisible or non-ASCII character makes two ids that look
    # alike different (issue 28's phantom shoe), nor a space.
    "shoe_id_with_zero_width_space": (changed(WAGER, shoe="MB-07-0001\u200b"), "shoe"),
    "shoe_id_with_cyrillic_o": (changed(WAGER, shoe="MB-07-\u041e001"), "shoe"),
    "shoe_id_65_chars": (changed(WAGER, shoe="x" * 65), "shoe"),
    "shoe_id_empty": (changed(WAGER, shoe=""), "shoe"),
    "shoe_id_as_number": (changed(WAGER, shoe=1), "shoe"),
    "dealer_id_with_space": (changed(WAGER, dealer="E 10422"), "dealer"),
    "dealer_id_with_non_breaking_space": (changed(WAGER, dealer="E\u00a010422"), "dealer"),
    "dealer_id_negative_number": (changed(WAGER, dealer=-5), "dealer"),
    "dealer_id_empty": (changed(WAGER, dealer=""), "dealer"),
    "batch_id_with_zero_width_joiner": (
        changed(VALID_EVENTS["shoe_start"], batch="red\u200d"), "batch"),
    "version_2": (changed(WAGER, v=2), "v"),
    "version_as_string": (changed(WAGER, v="1"), "v"),
    "seq_missing": (without(WAGER, "seq"), "seq"),
    "seq_negative": (changed(WAGER, seq=-1), "seq"),
    "seq_as_string": (changed(WAGER, seq="5"), "seq"),
    "round_event_without_shoe": (without(WAGER, "shoe"), "shoe"),
    "round_event_without_round": (without(CARD, "round"), "round"),
    "round_event_without_table": (without(CARD, "table"), "table"),
    "round_0": (changed(WAGER, round=0), "round"),
    "table_event_without_table": (without(VALID_EVENTS["shoe_start"], "table"), "table"),
    "table_open_without_pit": (without(TABLE_OPEN_NJ, "pit"), "pit"),
    "table_open_unknown_game": (changed(TABLE_OPEN_NJ, game="blackjack"), "game"),
    "table_open_without_side_bets": (without(TABLE_OPEN_NJ, "side_bets"), "side_bets"),
    "procedure_5": (table_event("procedure_change", procedure=5), "procedure"),
    "procedure_notice_without_pit": (without(PROCEDURE_NOTICE, "pit"), "pit"),
    "procedure_notice_naive_effective": (
        changed(PROCEDURE_NOTICE, effective="2026-11-28T22:00:00"),
        "effective",
    ),
    "procedure_notice_recipient_pit": (changed(PROCEDURE_NOTICE, recipient="pit"), "recipient"),
    "procedure_notice_written_yes": (changed(PROCEDURE_NOTICE, written="yes"), "written"),
    "procedure_notice_empty_tables": (changed(PROCEDURE_NOTICE, tables=[]), "tables"),
    "shuffle_auto": (changed(VALID_EVENTS["shoe_start"], shuffle="auto"), "shuffle"),
    "decks_0": (changed(VALID_EVENTS["shoe_start"], decks=0), "decks"),
    "card_to_dealer": (changed(CARD, to="dealer"), "to"),
    "seat_0": (changed(WAGER, seat=0), "seat"),
    "wager_without_amount": (without(WAGER, "amount"), "amount"),
    "announce_unknown_kind": (changed(RESULT, kind="natural"), "kind"),
    "announce_result_without_winner": (without(RESULT, "winner"), "winner"),
    "announce_result_winner_dealer": (changed(RESULT, winner="dealer"), "winner"),
    "announce_result_count_10": (changed(RESULT, player=10), "player"),
    "announce_total_cards_without_count": (round_event("announce", kind="total_cards"), "count"),
    "vig_mode_waive": (changed(VALID_EVENTS["vig"], mode="waive"), "mode"),
    "banco_kind_all": (changed(VALID_EVENTS["banco"], kind="all"), "kind"),
    "option_choice_draw": (changed(VALID_EVENTS["option"], choice="draw"), "choice"),
    "option_hand_dealer": (changed(VALID_EVENTS["option"], hand="dealer"), "hand"),
    "bank_pass_without_to_seat": (without(VALID_EVENTS["bank_pass"], "to_seat"), "to_seat"),
    "void_without_reason": (without(VALID_EVENTS["void"], "reason"), "reason"),
}


def docs_example_lines() -> list[str]:
    """Every line of the ```jsonl blocks of docs/event-log.md."""
    blocks = re.findall(r"^```jsonl\n(.*?)^```", DOCS_PATH.read_text(encoding="utf-8"), re.M | re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


# --- builders ------------------------------------------------------------------------------------

UTC = dt.UTC

Line = str | bytes | dict[str, Any]


def contract_lines() -> list[str]:
    """The 15 lines of the contract's example round (spec/event-log-v1.md), verbatim."""
    return CONTRACT_EXAMPLE.splitlines()


def event(type_: str, seq: int | None = None, **fields: Any) -> dict[str, Any]:
    """A valid event of `type_` (from VALID_EVENTS), with `seq` and fields changed."""
    e = copy.deepcopy(VALID_EVENTS[type_])
    if seq is not None:
        e["seq"] = seq
    e.update(fields)
    return e


def line(e: dict[str, Any] | str) -> str:
    """One JSONL line (compact, key order kept) for an event."""
    return e if isinstance(e, str) else json.dumps(e, separators=(",", ":"), ensure_ascii=False)


def encode_lines(
    lines: Iterable[Line], newline: bytes = b"\n", bom: bool = False, final_newline: bool = True
) -> bytes:
    parts = [
        x if isinstance(x, bytes) else line(x).encode("utf-8")
        for x in lines
    ]
    data = newline.join(parts) + (newline if final_newline and parts else b"")
    return (b"\xef\xbb\xbf" if bom else b"") + data


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0,
    microsecond: int = 0,
) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, second, microsecond, tzinfo=UTC)
