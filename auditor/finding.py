"""The one finding type, and the one way its fingerprint is made.

Every check, round, table, pit or shoe level, returns `Finding` values; the audit database's
writer (`auditor.store.findings.write`) takes them as they are. It lives in the base stage
because the pure checks (replay/) and the store both need it and neither may import the other.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any


def fingerprint(code: str, *where: object) -> str:
    """A finding's identity: its code and the events it rests on, joined by '|' (None as
    "None"), so the same deviation found again is the same finding and a finding whose events
    change is another. Stored fingerprints are never rewritten, so this spelling is fixed."""
    return "|".join([code, *(str(w) for w in where)])


@dataclass(frozen=True)
class Finding:
    """One deviation, as findings format v1 carries it.

    `expected` and `observed` are JSON values (money as strings like "100.00"); `seq` and
    `source` point at the event where the deviation shows, None when there is no such event.
    A round check (check_round, the chemin de fer replay) knows only those and leaves the
    rest empty: the audit run, which knows the round, fills in the table, pit, shoe, round,
    time, evidence and fingerprint (`in_round`). Table, pit and shoe checks fill in all.
    `evidence` always has what a report needs to show the deviation: for a table check
    `tables` and `events` (table, seq, ts, type, source), and where they matter `notices` and
    `interval`; for a round check the seqs of the round's first and last events.
    """

    code: str
    seq: int | None
    message: str
    expected: Any
    observed: Any
    source: str | None
    fingerprint: str = ""
    table: str | None = None
    pit: str | None = None
    shoe: str | None = None
    round: int | None = None
    ts: dt.datetime | None = None
    evidence: dict[str, Any] | None = None
    # None: the registry's severity for the code. Another only where the registry names it
    # (Code.lesser), e.g. chemin.option when the cards follow the cell all the same.
    severity: str | None = None
    # The provision, from the rule pack of the finding's table (RulePack.cite); None: the
    # registry's text (the log codes, or a table no rule pack could be loaded for).
    rule: str | None = None
    # The dealer of the round or shoe the finding concerns (findings v1.1), from the round's
    # round_start, else its shoe's shoe_start; None for a table, pit or log finding. Not
    # part of the fingerprint: stored fingerprints never change.
    dealer: str | None = None
