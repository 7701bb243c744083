"""A round's rows, as round_events_sql gives them, made into the replay's events: which
columns make an Event (and a chemin de fer round's CheminEvent), and the check that a card
read back is one ingest would have stored."""

from __future__ import annotations

from functools import lru_cache

from auditor.errors import UserError
from auditor.replay.chemin_model import CheminEvent
from auditor.replay.model import Event
from auditor.rules.cards import parse_card

# The columns of round_events_sql that make an Event, in the order of its fields, and those
# a chemin de fer round's CheminEvent adds after them; the columns of a round's head.
EVENT_COLUMNS = ("seq", "type", "ts", "source", "to_hand", "card", "seat", "bet", "amount",
                  "kind", "player_count", "banker_count", "winner", "count", "mode",
                  "void_reason", "disposition", "shoe", "round")
CHEMIN_COLUMNS = ("hand", "choice", "from_seat", "to_seat")
HEAD_COLUMNS = ("table_id", "shoe", "round", "n", "last_seq", "pit", "game", "jurisdiction",
                 "variant", "seats", "side_bets", "procedure")


def event_at(cols: dict[str, list], i: int) -> Event:
    """Row `i` of a batch's event columns as the replay's Event, as `_replay` makes it (the
    verdict's witness in tests/replay/test_verdict.py builds its rounds the same way). The
    amount column is DuckDB's DECIMAL, so its values are Decimals already."""
    return Event(*(cols[c][i] for c in EVENT_COLUMNS))


def chemin_event(cols: dict[str, list], i: int) -> CheminEvent:
    """Row `i` as a chemin de fer round's event, with the fields only those carry."""
    return CheminEvent(*(cols[c][i] for c in (*EVENT_COLUMNS, *CHEMIN_COLUMNS)))


def card_ok(type_: str, card: str | None) -> bool:
    """Whether an event's card is one ingest would have stored: a card, and one on every
    card event."""
    return type_ != "card" if card is None else _is_card(card)


@lru_cache(maxsize=256)
def _is_card(text: str) -> bool:
    try:
        parse_card(text)
    except ValueError:
        return False
    return True


def changed_card(table: str, seq: int, source: str, card: str | None) -> UserError:
    """Ingest stores only cards, and one on every card event: a card column that reads as
    none was changed since."""
    held = "a card event without its card" if card is None else f"the card {card!r}"
    return UserError(
        f"table {table} seq {seq} ({source}): the events table holds {held}, which "
        "ingest never stores, so the row was changed after ingest; run `bacc-audit verify` "
        "to compare it with its line")
