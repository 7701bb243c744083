"""The vocabulary of event log v1: which event types exist and which fields each one carries.

Ingest validates lines against this table in bulk SQL, the events table's columns come from
it, and the docs describe it; keeping it in one place keeps the three in step.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

FORMAT_VERSION = 1

# Field kinds. Each names a check ingest applies to the field's raw JSON text.
INT = "int"  # non-negative JSON integer
STR = "str"  # non-empty JSON string
ID = "id"  # table or pit id: 1-32 of the id alphabet
NAME = "name"  # a shoe or batch: a JSON string of 1-64 of the id alphabet
CARD = "card"
CARDS = "cards"  # JSON array of cards
AMOUNT = "amount"  # non-negative decimal, at most 2 places, number or string
TS = "ts"  # RFC 3339 with offset
BOOL = "bool"
STRS = "strs"  # JSON array of strings
IDS = "ids"  # JSON array of ids
LABEL = "label"  # a name or a whole number, kept as text (employee ids come both ways)

# The characters of every id the checks group by (tables, pits, shoes, batches, dealers): no
# space, no invisible or non-ASCII character, so that two ids that look alike are alike.
ID_CHARS = "A-Za-z0-9._-"
ID_CHARS_TEXT = "A-Z a-z 0-9 . _ -"
ID_MAX = 32  # table and pit ids
NAME_MAX = 64  # shoe, batch and dealer ids


@dataclass(frozen=True)
class FieldSpec:
    """One field of the format and the events-table column it lands in."""

    name: str
    kind: str
    column: str
    sql_type: str
    # For enumerations: the allowed values. Per event type, see EVENT_ENUMS.
    values: tuple[str, ...] = ()
    # For integers: inclusive bounds.
    low: int = 0
    high: int | None = None


def _f(name: str, kind: str, column: str | None = None, **kw: object) -> FieldSpec:
    sql_type = {
        INT: "BIGINT",
        STR: "VARCHAR",
        ID: "VARCHAR",
        NAME: "VARCHAR",
        CARD: "VARCHAR",
        CARDS: "VARCHAR[]",
        AMOUNT: "DECIMAL(18,2)",
        TS: "TIMESTAMPTZ",
        BOOL: "BOOLEAN",
        STRS: "VARCHAR[]",
        IDS: "VARCHAR[]",
        LABEL: "VARCHAR",
    }[kind]
    return FieldSpec(name, kind, column or name, sql_type, **kw)  # type: ignore[arg-type]


# Every field the format names, besides the envelope's v/ts/type/seq which ingest handles itself.
FIELDS: dict[str, FieldSpec] = {
    f.name: f
    for f in [
        _f("table", ID, "table_id"),
        _f("pit", ID),
        _f("shoe", NAME),
        _f("round", INT, "round", low=1),
        _f("dealer", LABEL),
        _f("origin", STR),
        _f("game", STR),
        _f("jurisdiction", STR),
        _f("variant", STR),
        _f("procedure", INT, low=1, high=4),
        _f("seats", INT, low=1),
        _f("side_bets", STRS),
        _f("decks", INT, low=1),
        _f("shuffle", STR),
        _f("batch", NAME),
        _f("cards", CARDS),
        _f("card", CARD),
        _f("burned", CARDS),
        _f("remaining", INT),
        _f("effective", TS),
        _f("recipient", STR),
        _f("written", BOOL),
        _f("tables", IDS),
        _f("seat", INT, low=1),
        _f("bet", STR),
        _f("amount", AMOUNT),
        _f("to", STR, "to_hand"),
        _f("kind", STR),
        _f("player", INT, "player_count", high=9),
        _f("banker", INT, "banker_count", high=9),
        _f("winner", STR),
        _f("count", INT),
        _f("mode", STR),
        _f("reason", STR, "void_reason"),
        _f("disposition", STR),
        _f("hand", STR),
        _f("choice", STR),
        _f("from_seat", INT, low=1),
        _f("to_seat", INT, low=1),
    ]
}

TABLE_EVENTS = (
    "table_open",
    "procedure_change",
    "table_close",
    "shoe_start",
    "burn",
    "face_up_in_shoe",
    "cut_card",
    "shoe_end",
)
PIT_EVENTS = ("procedure_notice",)
ROUND_EVENTS = (
    "round_start",
    "wager",
    "no_more_bets",
    "card",
    "announce",
    "collect",
    "pay",
    "push",
    "vig",
    "void",
    "irregularity",
    "round_end",
    "bank",
    "banco",
    "option",
    "commission",
    "bank_pass",
)

# Required fields per type (beyond the envelope; round events also need shoe and round,
# table and round events need table). Optional fields are any other field in FIELDS.
REQUIRED: dict[str, tuple[str, ...]] = {
    "table_open": ("pit", "game", "jurisdiction", "variant", "seats", "side_bets"),
    "procedure_change": ("procedure",),
    "table_close": (),
    "shoe_start": ("shoe", "decks", "shuffle", "batch"),
    "burn": ("shoe", "cards"),
    "face_up_in_shoe": ("shoe", "card", "burned"),
    "cut_card": ("shoe", "round"),
    "shoe_end": ("shoe",),
    "procedure_notice": ("pit", "procedure", "effective", "recipient", "written"),
    "round_start": (),
    "wager": ("seat", "bet", "amount"),
    "no_more_bets": (),
    "card": ("to", "card"),
    "announce": ("kind",),
    "collect": ("seat", "bet", "amount"),
    "pay": ("seat", "bet", "amount"),
    "push": ("seat", "bet", "amount"),
    "vig": ("seat", "amount", "mode"),
    "void": ("reason",),
    "irregularity": ("kind", "disposition"),
    "round_end": (),
    "bank": ("seat", "amount"),
    "banco": ("seat", "kind", "amount"),
    "option": ("hand", "choice"),
    "commission": ("seat", "amount"),
    "bank_pass": ("from_seat", "to_seat"),
}
for _t in ROUND_EVENTS:
    REQUIRED[_t] = ("shoe", "round", *REQUIRED[_t])

EVENT_TYPES: tuple[str, ...] = TABLE_EVENTS + PIT_EVENTS + ROUND_EVENTS

# Fields a type may carry besides its required ones. `procedure` is optional on table_open
# because games without payout procedures (chemin de fer, NZ) leave it out.
OPTIONAL: dict[str, tuple[str, ...]] = {
    "table_open": ("procedure",),
    "shoe_end": ("remaining",),
    "procedure_notice": ("tables",),
    "announce": ("player", "banker", "winner", "count"),
    "irregularity": ("card",),
}
ANY_EVENT = ("pit", "dealer", "origin")


@functools.cache
def fields_of(event_type: str) -> frozenset[str]:
    """The fields a type defines; any other field on it is an unknown extra, kept as is."""
    own = set(REQUIRED[event_type]) | set(OPTIONAL.get(event_type, ())) | set(ANY_EVENT)
    if event_type not in PIT_EVENTS:
        own.add("table")
    return frozenset(own)


@functools.cache
def types_with(name: str) -> tuple[str, ...]:
    return tuple(t for t in EVENT_TYPES if name in fields_of(t))


# Enumerated string fields, per (type, field); '*' applies to every type carrying the field.
ENUMS: dict[tuple[str, str], tuple[str, ...]] = {
    ("*", "game"): ("mini_baccarat", "punto_banco", "chemin_de_fer"),
    ("*", "shuffle"): ("manual", "automated"),
    ("*", "recipient"): ("division", "surveillance"),
    ("*", "to"): ("player", "banker"),
    ("*", "winner"): ("player", "banker", "tie"),
    ("*", "mode"): ("collect", "mark"),
    ("*", "hand"): ("player", "banker"),
    ("*", "choice"): ("card", "stay"),
    ("announce", "kind"): ("result", "tie_hand", "dragon_7", "panda_8", "total_cards"),
    ("banco", "kind"): ("suivi", "seul", "partial"),
}

# An announcement must say what it announced.
ANNOUNCE_FIELDS = {"result": ("player", "banker", "winner"), "total_cards": ("count",)}


def stream_of(event_type: str) -> str:
    """Pit events are sequenced per pit, every other event per table."""
    return "pit" if event_type in PIT_EVENTS else "table"
