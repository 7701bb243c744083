"""The values a round replay works on: one event and the table it happened at (findings are
auditor.finding.Finding).

They are plain frozen values so the replay stays a pure function of them: the database-backed
audit builds them from rows, the tests from hand-written rounds, and both get the same answer.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from typing import Any

from auditor.rules.cards import parse_card
from auditor.rules.pack import RulePack, Variant

# Event fields copied as they are, and the ones normalised on the way in.
_PLAIN: tuple[str, ...] = (
    "to", "seat", "bet", "kind", "player", "banker", "winner", "count", "mode"
)
_PLAIN += ("reason", "disposition", "shoe", "round")


@dataclass(frozen=True, slots=True)
class Event:
    """One event of event log v1 as the replay needs it.

    `card` is normalised ('10S' -> 'Ts') and `amount` is a Decimal, so comparisons in the
    rules never depend on how the log happened to spell a value. `source` is "file:line".
    """

    seq: int
    type: str
    ts: dt.datetime
    source: str
    to: str | None = None
    card: str | None = None
    seat: int | None = None
    bet: str | None = None
    amount: Decimal | None = None
    kind: str | None = None
    player: int | None = None
    banker: int | None = None
    winner: str | None = None
    count: int | None = None
    mode: str | None = None
    reason: str | None = None
    disposition: str | None = None
    shoe: str | None = None
    round: int | None = None

    @classmethod
    def from_record(cls, record: Mapping[str, Any], source: str) -> Event:
        """An Event from one parsed v1 line (or a row with the same names).

        Raises ValueError on a card, amount or time the format does not allow; ingest has
        already quarantined such lines, so here it means the caller passed something else.
        """
        ts = record["ts"]
        if isinstance(ts, str):
            ts = dt.datetime.fromisoformat(ts)
        if ts.tzinfo is None:
            raise ValueError(f"event seq {record.get('seq')} has a time without an offset")
        fields: dict[str, Any] = {name: record.get(name) for name in _PLAIN}
        card = record.get("card")
        amount = record.get("amount")
        return cls(
            seq=int(record["seq"]),
            type=str(record["type"]),
            ts=ts,
            source=source,
            card=None if card is None else str(parse_card(card)),
            amount=None if amount is None else Decimal(str(amount)),
            **fields,
        )


def round_end(events: Sequence[Event]) -> Event | None:
    """A round's round_end event, where what is still missing at the end shows (else the
    round's last event; None for no events)."""
    for e in reversed(events):
        if e.type == "round_end":
            return e
    return events[-1] if events else None


@dataclass(frozen=True)
class TableContext:
    """What the replay needs to know about the table a round was played at.

    `procedure` is the payout procedure in force for this round (the table_open value or the
    last procedure_change before the round), None where the pack has no procedures (NZ).
    """

    table: str
    pit: str | None
    game: str
    jurisdiction: str
    variant: str
    procedure: int | None
    seats: int
    side_bets: tuple[str, ...]
    pack: RulePack

    @cached_property
    def rules(self) -> Variant:
        """The variant's payouts, vigorish and Banker-win exceptions from the pack."""
        return self.pack.variant(self.variant)

    @cached_property
    def total_card_wagers_offered(self) -> bool:
        return any(bet.startswith("total_cards") for bet in self.side_bets)
