"""Shoe checks per (table, shoe): decks (N.J.A.C. 13:69F-7.1(a),(d)), batch alternation with an
automated shuffler (7.1(d)5), composition, the burn at the start of the shoe (house option) and
after a card found face up (13:69F-4.12(j)), the cutting card and the end of the shoe (house
options), and the rounds the rules make void (4.12(j),(k)). Logs that stop (a shoe with no
shoe_end) are `auditor.replay.log_ends`.

The checks are pure functions of a `Shoe` (its shoe-level events, its rounds' spans and the
rules that apply); `auditor.audit.load.load_shoes` builds those from the audit database, and
`card_excess`'s rows come from one SQL aggregate there, so per-card counting never loops in
Python. A shoe's rounds are columns (`Rounds`): a day holds millions of rounds and the checks
read them as sums and searches; only the few a finding can cite (`cited_rounds`) carry their
time and source.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from auditor.finding import Finding, fingerprint
from auditor.replay.hands import Hands, deal_error, required_draws
from auditor.replay.text import iso
from auditor.rules.cards import parse_card, rank_value
from auditor.rules.pack import DrawTables, RulePack

CARDS_PER_DECK = 52


# --- values -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShoeRules:
    """What the table's rule pack (with the property's house options) says about shoes."""

    pack: str
    min_decks: int
    shuffler_min_decks: int | None
    alternate_batches: bool
    burn: Mapping[str, Any] | None
    cut_from_end: tuple[int, int] | None
    end_of_shoe: str | None
    draw: DrawTables
    deal_order: tuple[str, ...]
    # The pack's shoe.face_up_in_shoe: a card found face up is burned with its value in
    # cards, and the shoe's last round is then void (NJ 13:69F-4.12(j),(k)); absent: no rule.
    face_up_rule: bool = False

    @classmethod
    def of(cls, pack: RulePack, house_options: Mapping[str, Any] | None = None) -> ShoeRules:
        """`house_options`: the property's choices, "pack-id:dotted.key" -> value (config)."""
        chosen = house_options or {}

        def option(key: str) -> Any:
            return chosen.get(f"{pack.id}:{key}", pack.value(key))

        cut = option("shoe.cut_card_from_end")
        return cls(
            pack=pack.id,
            min_decks=pack.min_decks,
            shuffler_min_decks=pack.shuffler_min_decks,
            alternate_batches=bool(pack.value("shoe.automated_shuffler.alternate_batches", False)),
            burn=option("shoe.burn"),
            cut_from_end=None if cut is None else (int(min(cut)), int(max(cut))),
            end_of_shoe=option("shoe.end_of_shoe"),
            draw=pack.draw,
            deal_order=pack.deal_order,
            face_up_rule=bool(pack.value("shoe.face_up_in_shoe", False)),
        )


@dataclass(frozen=True)
class ShoeEvent:
    """A shoe_start, burn, face_up_in_shoe, cut_card or shoe_end event."""

    table: str
    shoe: str
    seq: int
    ts: dt.datetime
    type: str
    source: str
    decks: int | None = None
    shuffle: str | None = None
    batch: str | None = None
    cards: tuple[str, ...] = ()
    card: str | None = None
    burned: tuple[str, ...] = ()
    round: int | None = None
    remaining: int | None = None
    next_type: str | None = None  # the next table-level event at the table (after shoe_end)

    def as_json(self) -> dict[str, Any]:
        return {"table": self.table, "shoe": self.shoe, "seq": self.seq, "ts": iso(self.ts),
                "type": self.type, "source": self.source}


@dataclass(frozen=True)
class RoundSpan:
    """Where a round lies in its table's stream and how many cards it took from the shoe."""

    round: int
    first_seq: int
    last_seq: int
    ts: dt.datetime
    source: str
    cards: int
    void: bool
    label: str | None = None  # the shoe its events name, where that is another (Misfiled)


def _none() -> np.ndarray:
    return np.zeros(0, np.int64)


@dataclass(frozen=True, eq=False)
class Rounds:
    """A shoe's rounds in seq order as columns (int64; `void` bool). `detail` holds the time
    and source of the rounds a finding can cite (`cited_rounds`), by position: reading them
    for every round of a day was most of the table pass's time."""

    round: np.ndarray = field(default_factory=_none)
    first_seq: np.ndarray = field(default_factory=_none)
    last_seq: np.ndarray = field(default_factory=_none)
    cards: np.ndarray = field(default_factory=_none)
    void: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    detail: dict[int, tuple[dt.datetime, str]] = field(default_factory=dict)
    # The shoe the events of a round name, by position, where it is not the shoe the round
    # is counted in (a round the stream shows was dealt from another shoe: Misfiled).
    labels: dict[int, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.round)

    def __getitem__(self, i: int) -> RoundSpan:
        """The round at position `i` (negative counts from the end) with its time and source;
        only a cited round has them."""
        i = range(len(self))[i]
        if i not in self.detail:
            raise LookupError(f"round at position {i} is not one cited_rounds names")
        ts, source = self.detail[i]
        return RoundSpan(int(self.round[i]), int(self.first_seq[i]), int(self.last_seq[i]), ts,
                         source, int(self.cards[i]), bool(self.void[i]), self.labels.get(i))

    def label(self, i: int, shoe: str) -> str:
        """The shoe the events of the round at position `i` name (`shoe`, unless misfiled)."""
        return self.labels.get(i, shoe)

    def find(self, rnd: int | None) -> int | None:
        """The position of the first round numbered `rnd`."""
        if rnd is None:
            return None
        at = np.flatnonzero(self.round == rnd)
        return int(at[0]) if at.size else None

    def dealt_before(self, seq: int) -> int:
        """Cards dealt in the rounds that ended before event `seq`."""
        return int(self.cards[self.last_seq < seq].sum())


@dataclass(frozen=True)
class Misfiled:
    """Events of a table's stream that name a shoe the table was not dealing from: a shoe no
    shoe_start began before them (`not_started`), or one the table had left for another shoe
    it started since (`reopened`). A round (`type` "round", its first and last seq) or one
    shoe event. They count in the shoe the table was dealing from (`counted_in`: its last
    shoe_start, not yet ended), or in their own shoe when it was dealing from none."""

    table: str
    label: str  # the shoe the events name
    kind: str  # "not_started" or "reopened"
    type: str  # "round", or the shoe event's type
    seq: int
    last_seq: int
    ts: dt.datetime
    source: str
    round: int | None
    cards: int  # cards out of the shoe: the round's, or a burn's
    counted_in: str  # the shoe they count in (the label itself: no shoe being dealt)
    current: str | None  # the shoe of the table's last shoe_start before them
    current_seq: int | None  # that shoe_start's seq
    current_ended: bool = False  # that shoe had ended before them

    def as_json(self) -> dict[str, Any]:
        out = {"table": self.table, "shoe": self.label, "seq": self.seq, "ts": iso(self.ts),
               "type": self.type, "source": self.source}
        if self.round is not None:
            out["round"] = self.round
        return out


@dataclass
class Shoe:
    """One shoe at one table: its events, its rounds and the rules in force for it."""

    table: str
    shoe: str
    pit: str | None = None
    jurisdiction: str | None = None
    session: int = 0  # which opening of the table (batches alternate within one)
    start: ShoeEvent | None = None
    burns: list[ShoeEvent] = field(default_factory=list)
    face_ups: list[ShoeEvent] = field(default_factory=list)
    cut: ShoeEvent | None = None
    end: ShoeEvent | None = None
    rounds: Rounds = field(default_factory=Rounds)
    rules: ShoeRules | None = None
    gap: bool = False  # the table's seq skips numbers within the shoe: counts are incomplete
    # Events counted in this shoe (or in none) that name another shoe: shoe_labels reports them.
    misfiled: list[Misfiled] = field(default_factory=list)

    @property
    def decks(self) -> int | None:
        return None if self.start is None else self.start.decks

    @property
    def size(self) -> int | None:
        """Cards in the shoe (for an automated shuffler, one batch)."""
        return None if self.decks is None else self.decks * CARDS_PER_DECK

    @property
    def anchor(self) -> ShoeEvent | None:
        return self.start or self.end or self.cut or (self.burns[0] if self.burns else None)

    def consumed_before(self, seq: int) -> int:
        """Cards out of the shoe (burned, found face up, dealt) before event `seq`."""
        n = sum(len(b.cards) for b in self.burns if b.seq < seq)
        n += sum(1 + len(f.burned) for f in self.face_ups if f.seq < seq)
        return n + self.rounds.dealt_before(seq)

    @property
    def consumed(self) -> int:
        return self.consumed_before(1 << 62)


# --- findings -----------------------------------------------------------------------------


def _finding(
    code: str,
    shoe: Shoe,
    at: ShoeEvent | RoundSpan | None,
    key: str,
    message: str,
    expected: Any,
    observed: Any,
    events: Sequence[ShoeEvent | RoundSpan] = (),
    rnd: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Finding:
    """A shoe finding anchored at `at` (or the shoe's first event), fingerprint
    code|table|shoe|key."""
    anchor = at if at is not None else shoe.anchor
    assert anchor is not None
    evidence_events = [_event_json(shoe, e) for e in (events or [anchor])]
    return Finding(
        code=code,
        fingerprint=fingerprint(code, shoe.table, shoe.shoe, key),
        table=shoe.table,
        pit=shoe.pit,
        shoe=shoe.shoe,
        round=rnd if rnd is not None else (anchor.round if isinstance(anchor, RoundSpan)
                                           else None),
        seq=anchor.first_seq if isinstance(anchor, RoundSpan) else anchor.seq,
        ts=anchor.ts,
        message=message,
        expected=expected,
        observed=observed,
        source=anchor.source,
        evidence={"tables": [shoe.table], "pit": shoe.pit, "shoe": shoe.shoe,
                  "events": evidence_events, **(extra or {})},
    )


def _event_json(shoe: Shoe, e: ShoeEvent | RoundSpan) -> dict[str, Any]:
    if isinstance(e, ShoeEvent):
        return e.as_json()
    return {"table": shoe.table, "shoe": e.label or shoe.shoe, "seq": e.first_seq,
            "ts": iso(e.ts), "type": "round", "round": e.round, "source": e.source}


# --- decks and batches --------------------------------------------------------------------


def required_decks(shuffle: str | None, rules: ShoeRules) -> tuple[int, int]:
    """(decks the shoe must hold, decks in all) for a shoe dealt this way: with an automated
    shuffler two equal batches are in play, the shoe holding one (7.1(d)2); without one, the
    shoe holds them all (7.1(a))."""
    if shuffle == "automated" and rules.shuffler_min_decks is not None:
        per_batch = -(-rules.shuffler_min_decks // 2)
        return per_batch, rules.shuffler_min_decks
    return rules.min_decks, rules.min_decks


def deck_findings(shoe: Shoe) -> list[Finding]:
    """shoe.too_few_decks: fewer decks than 7.1(a) (or 7.1(d) with an automated shuffler)."""
    start, rules = shoe.start, shoe.rules
    if start is None or rules is None or start.decks is None:
        return []
    per_shoe, total = required_decks(start.shuffle, rules)
    if start.decks >= per_shoe:
        return []
    if start.shuffle == "automated" and rules.shuffler_min_decks is not None:
        text = (f"{shoe.table} shoe {shoe.shoe} was dealt from an automated shuffler with "
                f"{start.decks} decks a batch, {2 * start.decks} in the two batches; at least "
                f"{total} are required ({per_shoe} a batch).")
        observed: dict[str, Any] = {"decks": start.decks, "batches": 2, "total": 2 * start.decks}
    else:
        text = (f"{shoe.table} shoe {shoe.shoe} held {start.decks} decks; at least "
                f"{total} are required.")
        observed = {"decks": start.decks, "shuffle": start.shuffle}
    return [_finding("shoe.too_few_decks", shoe, start, str(start.seq), text,
                     {"decks": per_shoe, "total": total, "rule_pack": rules.pack}, observed)]


def batch_findings(shoes: Sequence[Shoe]) -> list[Finding]:
    """shoe.batch_not_alternated over one table's shoes in seq order (7.1(d)4-5).

    Each batch is used for every other shoe: a shoe must not use the previous shoe's batch,
    and must use the batch of the shoe before that (a third batch breaks the alternation
    too). Only consecutive automated shoes within one opening of the table are compared:
    decks may be replaced between openings.
    """
    out = []
    auto = [s for s in shoes if s.start is not None and s.start.shuffle == "automated"
            and s.rules is not None and s.rules.alternate_batches]
    for i in range(1, len(auto)):
        prev, cur = auto[i - 1], auto[i]
        if prev.session != cur.session:
            continue
        before = auto[i - 2] if i >= 2 and auto[i - 2].session == cur.session else None
        assert prev.start is not None and cur.start is not None
        batch, last = cur.start.batch, prev.start.batch
        if batch == last:
            text = (f"{cur.table} shoe {cur.shoe} was dealt from batch {batch!r}, the batch of "
                    f"the previous shoe {prev.shoe}; the two batches alternate shoe by shoe.")
        elif before is not None and before.start is not None and batch != before.start.batch:
            text = (f"{cur.table} shoe {cur.shoe} was dealt from batch {batch!r}, neither "
                    f"{last!r} (previous shoe) nor {before.start.batch!r} (the shoe before): "
                    "each of the two batches is used for every other shoe.")
        else:
            continue
        history = [s for s in (before, prev, cur) if s is not None]
        out.append(_finding(
            "shoe.batch_not_alternated", cur, cur.start, str(cur.start.seq), text,
            {"batch": before.start.batch if before is not None and before.start is not None
             and before.start.batch != last else f"not {last}"},
            {"batches": [{"shoe": s.shoe, "batch": s.start.batch if s.start else None}
                         for s in history]},
            events=[s.start for s in history if s.start is not None],
        ))
    return out


# --- composition --------------------------------------------------------------------------


@dataclass(frozen=True)
class Excess:
    """A card (rank+suit) seen more often in a shoe than its decks hold."""

    card: str
    count: int
    seq: int  # where the one too many came out
    ts: dt.datetime
    source: str
    seqs: tuple[int, ...]


def composition_findings(
    shoe: Shoe, excess: Sequence[Excess], used: int
) -> list[Finding]:
    """shoe.composition: cards more often than the decks allow; and, for a finished shoe that
    says how many cards were left, cards missing or extra in all (dealt + burned + remaining
    against 52 x decks). The count in all is skipped when the table's seq skips numbers within
    the shoe (log.seq_gap already reports the missing events)."""
    out: list[Finding] = []
    decks, size = shoe.decks, shoe.size
    if decks is None or size is None:
        return out
    if excess:
        first = min(excess, key=lambda e: e.seq)
        names = ", ".join(f"{e.card} x{e.count}" for e in sorted(excess, key=lambda e: e.card))
        out.append(Finding(
            code="shoe.composition",
            fingerprint=fingerprint("shoe.composition", shoe.table, shoe.shoe, "excess",
                                    ",".join(f"{e.card}:{e.count}" for e in
                                             sorted(excess, key=lambda e: e.card))),
            table=shoe.table, pit=shoe.pit, shoe=shoe.shoe, round=None, seq=first.seq,
            ts=first.ts,
            message=(f"{shoe.table} shoe {shoe.shoe} ({decks} decks) gave {names}: more than "
                     f"the {decks} of each card its decks hold."),
            expected={"max_per_card": decks},
            observed={"cards": {e.card: e.count for e in excess},
                      "seqs": {e.card: list(e.seqs) for e in excess}},
            source=first.source,
            evidence={"tables": [shoe.table], "pit": shoe.pit, "shoe": shoe.shoe,
                      "events": [{"table": shoe.table, "shoe": shoe.shoe, "seq": e.seq,
                                  "ts": iso(e.ts), "type": "card", "card": e.card,
                                  "source": e.source} for e in excess],
                      "seqs": {e.card: list(e.seqs) for e in excess}},
        ))
    end = shoe.end
    if end is not None and end.remaining is not None and not shoe.gap:
        accounted = used + end.remaining
        if accounted != size:
            what = (f"{size - accounted} cards are missing" if accounted < size
                    else f"{accounted - size} cards more than it holds")
            out.append(_finding(
                "shoe.composition", shoe, end, f"total:{accounted}",
                f"{shoe.table} shoe {shoe.shoe} ({decks} decks, {size} cards): {used} cards "
                f"dealt or burned and {end.remaining} left at the end make {accounted}; "
                f"{what}.",
                {"cards": size},
                {"dealt_or_burned": used, "remaining": end.remaining, "total": accounted},
            ))
    return out


def card_excess(
    cards: Sequence[tuple[str, int, dt.datetime, str]], decks: int
) -> list[Excess]:
    """The reference for the SQL aggregate in load_composition: from (card, seq, ts, source)
    of every card out of a shoe, the cards seen more than `decks` times, each anchored at the
    occurrence that was one too many."""
    seen: dict[str, list[tuple[int, dt.datetime, str]]] = defaultdict(list)
    for card, seq, ts, source in sorted(cards, key=lambda c: c[1]):
        seen[str(parse_card(card))].append((seq, ts, source))
    return [
        Excess(card, len(at), at[decks][0], at[decks][1], at[decks][2],
               tuple(q for q, _, _ in at))
        for card, at in sorted(seen.items())
        if len(at) > decks
    ]


# --- burns --------------------------------------------------------------------------------


def start_burn_size(first: str, option: Mapping[str, Any]) -> int | None:
    """Cards the start-of-shoe burn takes under the house option, the exposed card included:
    `expose` cards, then as many as the first one's value, a 10-value card burning
    `ten_value_burns`. None for a burn option this engine does not know."""
    if option.get("burn") != "card_value":
        return None
    value = rank_value(parse_card(first).rank)
    return int(option.get("expose", 1)) + (value if value else int(option.get("ten_value_burns",
                                                                               10)))


def face_up_burn_size(card: str) -> int:
    """Cards burned with a card found face up in the shoe: "an additional number of cards ...
    equal to the value of the card" (4.12(j)); a 10, jack, queen or king has value 0 (7.1(b)),
    so nothing more (unlike 4.12(h)1, which lets the house pre-select 1 or 10)."""
    return rank_value(parse_card(card).rank)


def burn_findings(shoe: Shoe) -> list[Finding]:
    """shoe.burn: the start-of-shoe burn by the house option, and each face-up card's burn."""
    out = []
    rules = shoe.rules
    first_round = shoe.rounds[0] if shoe.rounds else None
    if rules is not None and rules.burn is not None:
        if not shoe.burns:
            # A shoe no shoe_start began has no start to burn at: shoe.not_started says so.
            if first_round is not None and shoe.start is not None:
                out.append(_finding(
                    "shoe.burn", shoe, first_round, "none",
                    f"{shoe.table} shoe {shoe.shoe}: no burn was recorded before dealing "
                    "began; the house burns cards at the start of every shoe.",
                    {"burn": dict(rules.burn)}, {"burn": None},
                ))
        else:
            burn = shoe.burns[0]
            want = start_burn_size(burn.cards[0], rules.burn) if burn.cards else None
            value = rank_value(parse_card(burn.cards[0]).rank) if burn.cards else None
            if burn.cards and want is not None and len(burn.cards) != want:
                ten = " (a 10-value card)" if value == 0 else ""
                out.append(_finding(
                    "shoe.burn", shoe, burn, str(burn.seq),
                    f"{shoe.table} shoe {shoe.shoe}: the exposed burn card {burn.cards[0]}"
                    f"{ten} calls for {want - 1} more cards ({want} in all); "
                    f"{len(burn.cards)} were burned.",
                    {"cards": want, "first": burn.cards[0], "option": dict(rules.burn)},
                    {"cards": len(burn.cards), "burned": list(burn.cards)},
                ))
            elif not burn.cards:
                out.append(_finding(
                    "shoe.burn", shoe, burn, str(burn.seq),
                    f"{shoe.table} shoe {shoe.shoe}: the burn event lists no card.",
                    {"option": dict(rules.burn)}, {"burned": []},
                ))
            if first_round is not None and burn.seq > first_round.first_seq:
                out.append(_finding(
                    "shoe.burn", shoe, burn, f"late:{burn.seq}",
                    f"{shoe.table} shoe {shoe.shoe}: the start-of-shoe burn came after round "
                    f"{first_round.round} had begun.",
                    {"burn_before_round": first_round.round},
                    {"burn_seq": burn.seq, "first_round_seq": first_round.first_seq},
                    events=[burn, first_round],
                ))
    if shoe.rules is not None and shoe.rules.face_up_rule:
        for f in shoe.face_ups:
            if f.card is None:
                continue
            want = face_up_burn_size(f.card)
            if len(f.burned) != want:
                out.append(_finding(
                    "shoe.burn", shoe, f, f"face_up:{f.seq}",
                    f"{shoe.table} shoe {shoe.shoe}: {f.card} was found face up in the shoe; "
                    f"it and {want} more card{'s' if want != 1 else ''} (its value) go to the "
                    f"discard rack, but {len(f.burned)} were burned with it.",
                    {"burned_with_it": want, "card": f.card},
                    {"burned_with_it": len(f.burned), "burned": list(f.burned)},
                ))
    return out


# --- cutting card and end of shoe ---------------------------------------------------------


def cut_card_findings(shoe: Shoe) -> list[Finding]:
    """shoe.cut_card: where the cutting card came out against the house option (14-16 cards
    from the end): the cards out of the shoe before and after its round must bracket one of
    the allowed positions. Also a shoe dealt past that point with no cutting card. Skipped
    when the log has a gap in the shoe (the counts would be wrong)."""
    rules, size = shoe.rules, shoe.size
    if rules is None or rules.cut_from_end is None or size is None or shoe.gap:
        return []
    lo, hi = rules.cut_from_end
    allowed = (size - hi, size - lo)  # cards in front of the cutting card
    cut = shoe.cut
    if cut is None:
        used = shoe.consumed
        if used > allowed[1]:
            return [_finding(
                "shoe.cut_card", shoe, shoe.end or shoe.anchor, "none",
                f"{shoe.table} shoe {shoe.shoe}: {used} of its {size} cards were dealt or "
                f"burned and no cutting card came out; the house places it {lo}-{hi} cards "
                "from the end.",
                {"cut_card_from_end": [lo, hi]}, {"cards_out": used, "cut_card": None},
            )]
        return []
    rnd = shoe.rounds.find(cut.round)
    if rnd is None:
        before = after = shoe.consumed_before(cut.seq)
    else:
        before = shoe.consumed_before(int(shoe.rounds.first_seq[rnd]))
        after = shoe.consumed_before(int(shoe.rounds.last_seq[rnd]) + 1)
    if after < allowed[0] or before > allowed[1]:
        left = (size - after, size - before)
        where = f"{left[0]}" if left[0] == left[1] else f"{left[0]}-{left[1]}"
        return [_finding(
            "shoe.cut_card", shoe, cut, str(cut.seq),
            f"{shoe.table} shoe {shoe.shoe}: the cutting card came out in round {cut.round} "
            f"with {where} cards left behind it; the house places it {lo}-{hi} cards from "
            "the end.",
            {"cut_card_from_end": [lo, hi]},
            {"cards_out_before_round": before, "cards_out_after_round": after,
             "cards_left": list(left)},
            rnd=cut.round,
        )]
    return []


_ROUNDS_AFTER_CUT = {"finish_round_then_one_more": 1, "finish_round": 0}


def _last_allowed(shoe: Shoe) -> int | None:
    """The last round the house option lets the shoe deal after its cutting card."""
    rules, cut = shoe.rules, shoe.cut
    if rules is None or cut is None or cut.round is None or rules.end_of_shoe is None:
        return None
    extra = _ROUNDS_AFTER_CUT.get(rules.end_of_shoe)
    return None if extra is None else cut.round + extra


def cited_rounds(shoe: Shoe) -> list[int]:
    """Positions of the rounds a finding on `shoe` can cite with their time and source: the
    first, the last, and the first dealt beyond the end of shoe (end_of_shoe_findings)."""
    n = len(shoe.rounds)
    if not n:
        return []
    out = {0, n - 1}
    last_allowed = _last_allowed(shoe)
    if last_allowed is not None:
        beyond = np.flatnonzero(shoe.rounds.round > last_allowed)
        if beyond.size:
            out.add(int(beyond[0]))
    return sorted(out)


def end_of_shoe_findings(shoe: Shoe) -> list[Finding]:
    """shoe.end_of_shoe: after the round the cutting card came out in, the house option says
    how many rounds follow (finish_round_then_one_more: one; finish_round: none). Rounds beyond
    are reported; so is a shoe ended without its one more round when the table went on to
    another shoe and enough cards were left for a round."""
    rules, cut, rounds = shoe.rules, shoe.cut, shoe.rounds
    last_allowed = _last_allowed(shoe)
    if last_allowed is None or rules is None or rules.end_of_shoe is None or cut is None \
            or cut.round is None:
        return []
    extra = last_allowed - cut.round
    after = np.flatnonzero(rounds.round > last_allowed)
    beyond = rounds.round[after].tolist()
    option = rules.end_of_shoe.replace("_", " ")
    if beyond:
        first = rounds[int(after[0])]
        return [_finding(
            "shoe.end_of_shoe", shoe, first, "beyond",
            f"{shoe.table} shoe {shoe.shoe}: the cutting card came out in round {cut.round}, "
            f"so round {last_allowed} was the last ({option}); "
            f"{len(beyond)} more round{'s were' if len(beyond) > 1 else ' was'} dealt "
            f"(rounds {beyond[0]}-{beyond[-1]}).",
            {"last_round": last_allowed, "option": rules.end_of_shoe},
            {"rounds_after": beyond},
            events=[cut, first],
        )]
    played = int(rounds.round.max()) if len(rounds) else 0
    size = shoe.size
    left = None if size is None or shoe.gap else size - shoe.consumed
    if (extra and played < last_allowed and shoe.end is not None
            and shoe.end.next_type == "shoe_start" and left is not None and left >= 6):
        return [_finding(
            "shoe.end_of_shoe", shoe, shoe.end, "short",
            f"{shoe.table} shoe {shoe.shoe}: the cutting card came out in round {cut.round} "
            f"and the shoe ended after round {played} with {left} cards left; the house plays "
            f"round {last_allowed} too ({option}).",
            {"last_round": last_allowed, "option": rules.end_of_shoe},
            {"last_round": played, "cards_left": left},
            events=[cut, shoe.end],
        )]
    return []


# --- rounds the rules make void -----------------------------------------------------------


def void_findings(
    shoe: Shoe, last_round_cards: Sequence[tuple[str, str]] | None
) -> list[Finding]:
    """shoe.void_required (packs with shoe.face_up_in_shoe, NJ): the last round of a shoe
    must be void when one of its cards is found face up in the shoe (4.12(j)), or when the
    shoe ran out of cards before the round could be completed (4.12(k)).
    `last_round_cards`: the (to, card) pairs of the shoe's last round, given when the shoe
    was dealt to its last card."""
    if shoe.rules is None or not shoe.rules.face_up_rule or not shoe.rounds:
        return []
    last = shoe.rounds[-1]
    if last.void:
        return []
    out = []
    during = [f for f in shoe.face_ups if last.first_seq <= f.seq <= last.last_seq]
    if during:
        out.append(_finding(
            "shoe.void_required", shoe, during[0], f"face_up:{last.round}",
            f"{shoe.table} shoe {shoe.shoe}: {during[0].card} was found face up in the shoe "
            f"during round {last.round}, the last round of the shoe, which was not declared "
            "void.",
            {"round": last.round, "void": True}, {"void": False, "face_up": during[0].card},
            events=[during[0], last], rnd=last.round,
        ))
    if last_round_cards is not None and shoe.rules is not None and shoe.size is not None \
            and not shoe.gap and shoe.consumed >= shoe.size:
        hands = Hands.deal(last_round_cards)
        short = deal_error(hands, shoe.rules.deal_order) is not None and len(hands.order) < 4
        if not short and len(hands.order) >= 4 and deal_error(hands, shoe.rules.deal_order) \
                is None:
            need = required_draws(shoe.rules.draw, hands)
            short = (need.player and len(hands.player) < 3) or (
                need.banker and len(hands.banker) < 3)
        if short:
            out.append(_finding(
                "shoe.void_required", shoe, last, f"exhausted:{last.round}",
                f"{shoe.table} shoe {shoe.shoe}: the shoe ran out of cards in round "
                f"{last.round} before the round could be completed, and the round was not "
                "declared void.",
                {"round": last.round, "void": True},
                {"void": False, "cards": [c for _, c in last_round_cards]},
                rnd=last.round,
            ))
    return out


def shoe_findings(
    shoes: Sequence[Shoe],
    excess: Mapping[tuple[str, str], Sequence[Excess]],
    used: Mapping[tuple[str, str], int],
    last_round_cards: Mapping[tuple[str, str], Sequence[tuple[str, str]]],
) -> list[Finding]:
    """Every shoe check over `shoes` (any tables, in seq order per table)."""
    out: list[Finding] = []
    by_table: dict[str, list[Shoe]] = defaultdict(list)
    for s in shoes:
        by_table[s.table].append(s)
        key = (s.table, s.shoe)
        out += deck_findings(s)
        out += composition_findings(s, excess.get(key, ()), used.get(key, 0))
        out += burn_findings(s)
        out += cut_card_findings(s)
        out += end_of_shoe_findings(s)
        out += void_findings(s, last_round_cards.get(key))
    for table in sorted(by_table):
        out += batch_findings(by_table[table])
    return out


def opening_seq(shoe: Shoe) -> int:
    """The shoe's first seq: its start, cut, first round or first burn, whichever is first."""
    seqs = [e.seq for e in (shoe.start, shoe.cut, shoe.end) if e is not None]
    seqs += shoe.rounds.first_seq[:1].tolist() + [b.seq for b in shoe.burns[:1]]
    return min(seqs, default=0)
