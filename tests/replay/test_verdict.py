"""The fast verdict (auditor.replay.verdict over auditor.audit.facts) held to its contract
against the reference, check_round: a round the verdict calls clean gets no finding from
check_round, and every round it does not call clean is judged by check_round (the audit gives
it to no one else), so the audit's findings are the reference's, field for field.

The rounds are the sample night, and a simulated night with every deviation the simulator
can plant plus random mutations of the event lines (cards dropped, added, moved or changed,
amounts changed, settlements dropped, doubled or retyped, pays and vigorish swapped,
announcements dropped or wrong, voids and irregularities), judged once with the shipped rule
packs and once with packs whose house options differ from what the simulator dealt by. The
hand-written rounds of tests/replay/test_round.py and tests/replay/test_hostile_rounds.py go through
the verdict too (tests/helpers/verdict.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import random
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any

import duckdb
import pytest

from auditor.audit import facts
from auditor.audit.event_rows import event_at
from auditor.audit.rounds import ROUND_TYPES
from auditor.audit.run import (
    Known,
    audit,
    clean_rounds,
    round_events_sql,
    select_rounds,
)
from auditor.config import PropertyConfig
from auditor.ingest.run import ingest
from auditor.replay import verdict
from auditor.replay.model import TableContext
from auditor.replay.round import check_round
from auditor.rules.pack import (
    BankerException,
    PackCache,
    RulePack,
    RulePackError,
    load_pack,
)
from auditor.simulate.generator import Deviation, Night, NoticeChange, TableNight, TableSpec
from auditor.store import db, runs
from auditor.store.events import ROUND_EVENTS

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"
RoundKey = tuple[str, str, int]
Packs = Mapping[tuple[str, str], RulePack]


# --- the reference, run the way auditor/audit/run.py runs it ---------------------------------


@dataclasses.dataclass
class Reference:
    findings: dict[str, dict[str, Any]]  # fingerprint -> finding
    rounds: dict[RoundKey, int]  # replayed round -> findings
    skipped: dict[RoundKey, str]  # round -> why the reference does not replay it


@functools.cache
def _load_pack(jurisdiction: str, game: str) -> RulePack:
    return load_pack(jurisdiction, game)


def _context(head: dict[str, Any], packs: Packs) -> TableContext | str:
    """audit._context, with the packs given instead of loaded from rules/."""
    game, jurisdiction, variant = head["game"], head["jurisdiction"], head["variant"]
    if game is None:
        return "no table_open event before the round"
    if game == "chemin_de_fer":
        return "chemin de fer"
    try:
        pack = packs.get((jurisdiction, game)) or _load_pack(jurisdiction, game)
    except (RulePackError, FileNotFoundError, KeyError) as e:
        return f"no usable rule pack ({e})"
    if variant not in pack.variants:
        return f"variant {variant!r} not in rule pack"
    return TableContext(
        head["table_id"],
        head["pit"],
        game,
        jurisdiction,
        variant,
        head["procedure"],
        head["seats"],
        tuple(head["side_bets"] or ()),
        pack,
    )


def reference(con: duckdb.DuckDBPyConnection, packs: Packs | None = None) -> Reference:
    """check_round over every round of `todo`, findings keyed and shaped as audit.py
    stores them (fingerprint `{code}|{table}|{shoe}|{round}|{seq}|{k}`)."""
    out = Reference({}, {}, {})
    cols = (
        con.sql(round_events_sql("todo"))
        .to_arrow_table()
        .to_pydict()
    )
    n = len(cols["seq"])
    start = 0
    while start < n:
        key = (cols["table_id"][start], cols["shoe"][start], cols["round"][start])
        end = start
        while end < n and (cols["table_id"][end], cols["shoe"][end], cols["round"][end]) == key:
            end += 1
        head = {c: cols[c][start] for c in cols}
        events = [event_at(cols, i) for i in range(start, end)]
        start = end
        ctx = _context(head, packs or {})
        if isinstance(ctx, str):
            out.skipped[key] = ctx
            continue
        found = check_round(ctx, events)
        out.rounds[key] = len(found)
        seen: Counter[tuple[str, int | None]] = Counter()
        for f in found:
            k = seen[(f.code, f.seq)]
            seen[(f.code, f.seq)] += 1
            ev = next((e for e in events if e.seq == f.seq), events[0])
            fp = f"{f.code}|{key[0]}|{key[1]}|{key[2]}|{f.seq}|{k}"
            out.findings[fp] = {
                "code": f.code,
                "table_id": key[0],
                "pit": ctx.pit,
                "shoe": key[1],
                "round": key[2],
                "seq": f.seq,
                "ts": ev.ts,
                "message": f.message,
                "expected": json.loads(json.dumps(f.expected, default=str)),
                "observed": json.loads(json.dumps(f.observed, default=str)),
                "source": f.source or ev.source,
                "evidence": {"round_events": [events[0].seq, events[-1].seq]},
            }
    return out


@dataclasses.dataclass
class Judgement:
    clean: set[RoundKey]  # the rounds the verdict called clean
    ref: Reference

    @property
    def flagged(self) -> set[RoundKey]:
        return set(self.ref.rounds) - self.clean

    @property
    def codes(self) -> Counter[str]:
        return Counter(f["code"] for f in self.ref.findings.values())


def judge(con: duckdb.DuckDBPyConnection, packs: Packs | None = None) -> Judgement:
    """The verdict over `todo`, and the reference over the same rounds; asserts the contract:
    no round called clean has a finding, and no round the reference skips is called clean."""
    clean_rounds(con, Known(packs=PackCache(packs)))
    clean = {
        (t, s, r)
        for t, s, r in con.execute("SELECT table_id, shoe, round FROM todo_clean").fetchall()
    }
    ref = reference(con, packs)
    wrong = sorted(k for k in clean if ref.rounds.get(k))
    assert not wrong, f"called clean, but check_round finds something: {wrong[:10]}"
    assert clean <= set(ref.rounds), sorted(clean - set(ref.rounds))[:10]
    return Judgement(clean, ref)


# --- databases ---------------------------------------------------------------------------


def _audit_db(path: Path, logs: list[Path]) -> duckdb.DuckDBPyConnection:
    con = db.connect(path)
    run = runs.start(con, "test", {})
    ingest(con, logs, run)
    select_rounds(con, PropertyConfig(), None)
    return con


@pytest.fixture(scope="module")
def sample_con(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    con = _audit_db(tmp_path_factory.mktemp("sample") / "audit.duckdb", [SAMPLE])
    yield con
    con.close()


@pytest.fixture(scope="module")
def faulty_con(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    work = tmp_path_factory.mktemp("faulty")
    log = work / "faulty-night.jsonl"
    log.write_text("\n".join(faulty_night(seed=20261129)) + "\n")
    con = _audit_db(work / "audit.duckdb", [log])
    yield con
    con.close()


# --- the sample night --------------------------------------------------------------------


@pytest.mark.slow
def test_the_sample_night_is_clean_but_for_its_planted_rounds(sample_con) -> None:
    j = judge(sample_con)
    planted = {k for k, n in j.ref.rounds.items() if n}
    assert len(j.ref.findings) == 12  # the planted round deviations (sample_logs/README.md)
    assert j.flagged == planted and len(planted) == 12
    assert len(j.clean) == 3023
    assert set(j.ref.skipped.values()) == {"chemin de fer"}  # 188 rounds, their own replay
    assert len(j.ref.skipped) == 188


# --- a faulty night ----------------------------------------------------------------------

DEVIATION_KINDS = (
    "banker_missed",
    "player_extra",
    "tie_missing",
    "dragon_missing",
    "vig_short",
    "vig_not_allowed",
    "wrong_winner",
    "pay_short",
    "collect_after_pay",
    "procedure_order",
    "total_cards_missing",
    "push_collected",
)
TOTAL = ("tie", "total_cards_4", "total_cards_5", "total_cards_6")
SIDES = ("tie", "dragon7", "panda8")


def _table(
    table: str, pit: str, game: str, jurisdiction: str, variant: str, seats: int,
    procedure: int | None, side_bets: tuple[str, ...],
) -> TableSpec:
    return TableSpec(table, pit, game, jurisdiction, variant, seats, procedure, side_bets,
                     opens="22:00", closes="02:00")


NIGHT_TABLES = [
    _table("A1", "PA", "mini_baccarat", "NJ", "standard", 7, 1, ("tie",)),
    _table("A2", "PA", "mini_baccarat", "NJ", "standard", 7, 2, TOTAL),
    _table("A3", "PA", "mini_baccarat", "NJ", "standard", 7, 3, SIDES),
    _table("A4", "PA", "mini_baccarat", "NJ", "standard", 9, 4, ("tie",)),
    _table("B1", "PB", "mini_baccarat", "NJ", "no_vig_dragon7", 7, 1, SIDES),
    _table("B2", "PB", "mini_baccarat", "NJ", "no_vig_dragon7", 7, 3, TOTAL),
    _table("B3", "PB", "mini_baccarat", "NJ", "super6", 7, 2, ("tie", "panda8")),
    _table("C1", "PC", "punto_banco", "NJ", "standard", 12, 4, ("tie",)),
    _table("C4", "PC", "punto_banco", "NJ", "standard", 12, 3, ("tie", "dragon7", "panda8")),
    _table("C2", "PC", "mini_baccarat", "NZ", "standard", 7, None, ("tie",)),
    _table("C3", "PC", "mini_baccarat", "NZ", "standard", 7, None, ("tie", "dragon7")),
    _table("D1", "PD", "chemin_de_fer", "NJ", "standard", 9, None, ()),
    _table("D2", "PD", "mini_baccarat", "NJ", "standard", 7, 1, ("tie",)),  # variant renamed
]


def _plantable(kind: str, spec: TableSpec) -> bool:
    vig = spec.variant == "standard"
    return {
        "vig_short": vig,
        "vig_not_allowed": not vig,
        "dragon_missing": spec.variant == "no_vig_dragon7",
        "total_cards_missing": "total_cards_5" in spec.side_bets,
    }.get(kind, True) and spec.game != "chemin_de_fer"


def faulty_night(seed: int) -> list[str]:
    """Every table's log lines: the simulator's night with every deviation it plants (three of
    each kind a table allows), then random mutations of about 40% of the rounds."""
    deviations = [
        Deviation(spec.table, kind, at, "", "")
        for spec in NIGHT_TABLES
        for kind in DEVIATION_KINDS
        if _plantable(kind, spec)
        for at in ("22:05", "23:05", "00:05")
    ]
    changes = [
        NoticeChange("PA", ("A1", "A2"), 3, "23:30", 45),
        NoticeChange("PB", ("B1",), 4, "00:15", 10),
    ]
    night = Night(dt.date(2026, 11, 28), dt.timedelta(hours=-5), NIGHT_TABLES, deviations, changes)
    rng = random.Random(seed)
    lines: list[str] = []
    for i, spec in enumerate(NIGHT_TABLES):
        events = [json.loads(x) for x in TableNight(night, spec, random.Random(seed + i)).run()]
        if spec.table == "D2":
            events[0]["variant"] = "mystery"
        events = list(_mutated(events, rng, SPECIALS.get(spec.table, {})))
        for seq, e in enumerate(events, start=1):
            e["seq"] = seq
            lines.append(json.dumps(e, separators=(",", ":")))
    return lines


def _mutated(
    events: list[dict[str, Any]], rng: random.Random, specials: dict[int, Mutation]
) -> Iterator[dict[str, Any]]:
    """The table's events with ~40% of its rounds mutated once or twice, and the rounds
    numbered in `specials` (counted from 0) given that mutation instead."""
    i = n = 0
    while i < len(events):
        if events[i]["type"] != "round_start":
            yield events[i]
            i += 1
            continue
        j = i
        while events[j]["type"] != "round_end":
            j += 1
        rnd = events[i : j + 1]
        n += 1
        if n - 1 in specials:
            rnd = specials[n - 1](rnd, rng)
        elif rng.random() < 0.4:
            for _ in range(rng.choice((1, 1, 2))):
                rnd = rng.choice(MUTATIONS)(rnd, rng)
        yield from rnd
        i = j + 1


Mutation = Callable[[list[dict[str, Any]], random.Random], list[dict[str, Any]]]
MONEY = ("wager", "collect", "pay", "push", "vig")
SETTLE = ("collect", "pay", "push")


def _new(rnd: list[dict[str, Any]], type_: str, **fields: Any) -> dict[str, Any]:
    base = {k: rnd[0][k] for k in ("v", "ts", "table", "shoe", "round")}
    return {**base, "type": type_, "seq": 0, **fields}


def _where(rnd: list[dict[str, Any]], *types: str) -> list[int]:
    return [i for i, e in enumerate(rnd) if e["type"] in types]


def _money(x: Decimal) -> int | str:
    return int(x) if x == x.to_integral_value() else str(x.quantize(Decimal("0.01")))


def _card(rng: random.Random) -> str:
    return rng.choice("A23456789TJQK") + rng.choice("cdhs")


def _insert(rnd: list[dict[str, Any]], rng: random.Random, e: dict[str, Any]) -> list[dict]:
    at = rng.randrange(1, len(rnd))
    return [*rnd[:at], e, *rnd[at:]]


def _pick(
    types: tuple[str, ...], fn: Callable[[list[dict], int, random.Random], list[dict]]
) -> Mutation:
    def mutation(rnd: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
        idx = _where(rnd, *types)
        return fn([dict(e) for e in rnd], rng.choice(idx), rng) if idx else rnd

    return mutation


def _drop(rnd: list[dict], i: int, rng: random.Random) -> list[dict]:
    return rnd[:i] + rnd[i + 1 :]


def _duplicate(rnd: list[dict], i: int, rng: random.Random) -> list[dict]:
    return [*rnd[: i + 1], dict(rnd[i]), *rnd[i + 1 :]]


def _swap_with_same(rnd: list[dict], i: int, rng: random.Random) -> list[dict]:
    same = [j for j, e in enumerate(rnd) if e["type"] in MONEY[1:] and j != i]
    if rnd[i]["type"] == "card":
        same = [j for j, e in enumerate(rnd) if e["type"] == "card" and j != i]
    if same:
        j = rng.choice(same)
        rnd[i], rnd[j] = rnd[j], rnd[i]
    return rnd


def _flip_hand(rnd: list[dict], i: int, rng: random.Random) -> list[dict]:
    rnd[i]["to"] = "banker" if rnd[i]["to"] == "player" else "player"
    return rnd


def _change_card(rnd: list[dict], i: int, rng: random.Random) -> list[dict]:
    rnd[i]["card"] = _card(rng)
    return rnd


def _change_amount(rnd: list[dict], i: int, rng: random.Random) -> list[dict]:
    old = Decimal(str(rnd[i]["amount"]))
    delta = Decimal(rng.choice(("0.01", "0.5", "1", "5", "10", "25", "-1", "-5", "-0.01")))
    new = old * 2 if rng.random() < 0.2 else max(Decimal(0), old + delta)
    rnd[i]["amount"] = _money(new)
    return rnd


def _retype(rnd: list[dict], i: int, rng: random.Random) -> list[dict]:
    rnd[i]["type"] = rng.choice([t for t in SETTLE if t != rnd[i]["type"]])
    return rnd


def _vig_mode(rnd: list[dict], i: int, rng: random.Random) -> list[dict]:
    rnd[i]["mode"] = "mark" if rnd[i]["mode"] == "collect" else "collect"
    return rnd


def _to_end(rnd: list[dict], i: int, rng: random.Random) -> list[dict]:
    return [*rnd[:i], *rnd[i + 1 : -1], rnd[i], rnd[-1]]


def _wrong_result(rnd: list[dict], i: int, rng: random.Random) -> list[dict]:
    e = rnd[i]
    if e["kind"] == "result":
        field = rng.choice(("player", "banker", "winner"))
        e[field] = (
            rng.choice(("player", "banker", "tie"))
            if field == "winner"
            else (e[field] + rng.randint(1, 9)) % 10
        )
    elif e["kind"] == "total_cards":
        e["count"] = e["count"] + rng.choice((-1, 1))
    return rnd


def _rename_bet(rnd: list[dict], i: int, rng: random.Random) -> list[dict]:
    seat, bet = rnd[i]["seat"], rnd[i]["bet"]
    for e in rnd:
        if e["type"] in ("wager", *SETTLE) and e.get("seat") == seat and e.get("bet") == bet:
            e["bet"] = "lucky6"
    return rnd


def _drop_settlements_of(rnd: list[dict], i: int, rng: random.Random) -> list[dict]:
    seat, bet = rnd[i]["seat"], rnd[i]["bet"]
    return [e for e in rnd if not (e["type"] in SETTLE and e["seat"] == seat and e["bet"] == bet)]


def _shuffle_moves(rnd: list[dict], rng: random.Random) -> list[dict]:
    idx = _where(rnd, "collect", "pay", "vig", "push")
    moved = [rnd[i] for i in idx]
    rng.shuffle(moved)
    out = list(rnd)
    for i, e in zip(idx, moved, strict=True):
        out[i] = e
    return out


def _split(apart: bool) -> Mutation:
    """A pay split in two halves (same total), both together or the second moved to the end:
    a seat's payment taken in two steps, often over more than ten seqs of pays and vigorish."""

    def split(rnd: list[dict], i: int, rng: random.Random) -> list[dict]:
        amount = Decimal(str(rnd[i]["amount"]))
        half = (amount / 2).quantize(Decimal("0.01"))
        first = dict(rnd[i], amount=_money(half))
        second = dict(rnd[i], amount=_money(amount - half))
        if apart:
            return [*rnd[:i], first, *rnd[i + 1 : -1], second, rnd[-1]]
        return [*rnd[:i], first, second, *rnd[i + 1 :]]

    return _pick(("pay",), split)


def _extra_cards(n: int) -> Mutation:
    def mutation(rnd: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
        hand = rng.choice(("player", "banker"))
        last = max(_where(rnd, "card"), default=1)
        extra = [_new(rnd, "card", to=hand, card=_card(rng)) for _ in range(n)]
        return [*rnd[: last + 1], *extra, *rnd[last + 1 :]]

    return mutation


MUTATIONS: list[Mutation] = [
    _pick(("card",), _drop),
    _extra_cards(1),
    _extra_cards(2),  # often a fourth card in one hand: routed to the reference
    lambda rnd, rng: _insert(
        rnd, rng, _new(rnd, "card", to=rng.choice(("player", "banker")), card=_card(rng))
    ),
    _pick(("card",), _flip_hand),
    _pick(("card",), _change_card),
    _pick(("card",), _swap_with_same),
    lambda rnd, rng: [e for e in rnd if e["type"] != "card"],
    _pick(MONEY, _change_amount),
    _pick(MONEY[1:], _swap_with_same),
    _pick(SETTLE, _drop),
    _pick(SETTLE, _duplicate),
    _pick(SETTLE, _retype),
    _pick(("wager",), _duplicate),
    _pick(("wager",), _drop),
    _pick(("wager",), _rename_bet),
    _pick(("wager",), _drop_settlements_of),
    _pick(("collect",), _to_end),
    _pick(("vig",), _drop),
    _pick(("vig",), _vig_mode),
    _pick(("vig",), _to_end),
    _pick(("pay",), _to_end),
    _split(apart=False),
    _split(apart=True),
    _shuffle_moves,
    lambda rnd, rng: _insert(
        rnd,
        rng,
        _new(
            rnd,
            rng.choice(SETTLE),
            seat=rng.randint(1, 9),
            bet=rng.choice(("player", "banker", "tie", "dragon7", "total_cards_5", "lucky6")),
            amount=rng.choice((5, 25, "12.50", 100)),
        ),
    ),
    lambda rnd, rng: _insert(
        rnd,
        rng,
        _new(
            rnd,
            "vig",
            seat=rng.randint(1, 9),
            amount=rng.choice((0, 5, "2.50")),
            mode=rng.choice(("collect", "mark")),
        ),
    ),
    _pick(("announce",), _drop),
    _pick(("announce",), _wrong_result),
    _pick(("announce",), _duplicate),
    lambda rnd, rng: _insert(rnd, rng, _new(rnd, "announce", kind="tie_hand")),
    lambda rnd, rng: _insert(
        rnd, rng, _new(rnd, "announce", kind="total_cards", count=rng.randint(3, 7))
    ),
    lambda rnd, rng: _insert(
        rnd, rng, _new(rnd, "announce", kind=rng.choice(("dragon_7", "panda_8")))
    ),
    lambda rnd, rng: _insert(
        rnd,
        rng,
        _new(
            rnd,
            "announce",
            kind="result",
            player=rng.randint(0, 9),
            banker=rng.randint(0, 9),
            winner=rng.choice(("player", "banker", "tie")),
        ),
    ),
    lambda rnd, rng: rnd[:-1],  # no round_end
    lambda rnd, rng: _insert(rnd, rng, _new(rnd, "void", reason="card found face up")),
    lambda rnd, rng: _insert(
        rnd,
        rng,
        _new(rnd, "irregularity", kind="player_extra_card", disposition="banker_third_card"),
    ),
]


@pytest.fixture(scope="module")
def faulty(faulty_con) -> Judgement:
    return judge(faulty_con)


def _many_events(rnd: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """300 more events: beyond what the verdict's packed counts hold."""
    return [rnd[0], *(_new(rnd, "no_more_bets") for _ in range(300)), *rnd[1:]]


def _round_number(number: int) -> Mutation:
    def renumber(rnd: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
        return [dict(e, round=number) for e in rnd]

    return renumber


def _seat(seat: int) -> Mutation:
    """A paid (else any) seat's wagers, settlements and vigorish moved to seat `seat`."""

    def move(rnd: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
        seats = [e["seat"] for e in rnd if e["type"] == "pay"] or [
            e["seat"] for e in rnd if e["type"] == "wager"
        ]
        if not seats:
            return rnd
        old = seats[0]
        return [dict(e, seat=seat) if e.get("seat") == old else e for e in rnd]

    return move


# Rounds beyond the verdict's encodings (packed counts, round numbers, seat codes): it must
# flag them, and check_round judge them.
SPECIALS: dict[str, dict[int, Mutation]] = {
    "A1": {3: _many_events},
    "A2": {5: _round_number(16_777_217)},
    "A3": {7: _seat(40), 9: _seat(2**20 + 1), 11: _seat(31)},
    "A4": {4: _seat(2**40)},
}


@pytest.mark.slow
def test_the_faulty_night_is_big_and_varied(faulty_con, faulty: Judgement) -> None:
    j = faulty
    assert len(j.ref.rounds) > 2500 and len(j.clean) > 1500
    assert len(j.ref.findings) > 500
    expected_codes = {
        "deal.order",
        "draw.player_missed",
        "draw.player_extra",
        "draw.banker_missed",
        "draw.banker_extra",
        "result.misannounced",
        "announce.tie_missing",
        "announce.dragon7_missing",
        "announce.total_cards_missing",
        "announce.total_cards_wrong",
        "settle.wrong_outcome",
        "settle.wrong_amount",
        "settle.unsettled",
        "vig.missing",
        "vig.wrong_amount",
        "vig.not_allowed",
        "order.collect_after_pay",
        "order.procedure_mismatch",
    }
    assert expected_codes <= set(j.codes), expected_codes - set(j.codes)
    # Several findings of one code at one event (k > 0) occur.
    assert any(not fp.endswith("|0") for fp in j.ref.findings)
    # The facts pack at most ten seqs of pays and vigorish; longer runs are flagged, and the
    # procedure findings among them come from check_round.
    mismatched = {
        (f["table_id"], f["shoe"], f["round"])
        for f in j.ref.findings.values()
        if f["code"] == "order.procedure_mismatch"
    }
    spans = faulty_con.execute(
        "SELECT table_id, shoe, round, max(seq) - min(seq) FROM events "
        "WHERE type IN ('pay', 'vig') GROUP BY ALL"
    ).fetchall()
    assert any((t, sh, r) in mismatched and span >= 10 for t, sh, r, span in spans)
    # Rounds flagged with nothing to find: those beyond the encodings and the void or
    # irregular ones (their own rules), a small part of the night.
    quiet = {k for k in j.flagged if not j.ref.rounds[k]}
    odd = {
        (t, sh, r)
        for t, sh, r in faulty_con.execute(
            "SELECT DISTINCT table_id, shoe, round FROM events "
            "WHERE type IN ('void', 'irregularity')"
        ).fetchall()
    }
    assert len(odd & quiet) >= 5
    assert len(quiet - odd) < 0.02 * len(j.ref.rounds), len(quiet - odd)
    whys = set(j.ref.skipped.values())
    assert all(why.startswith(("chemin de fer", "variant")) for why in whys), whys


@pytest.mark.slow
def test_rounds_beyond_the_encodings_are_flagged(faulty_con, faulty: Judgement) -> None:
    """300 events in a round, a round numbered past 2**24, seats 31, 40, 2**20 + 1 and 2**40
    (SPECIALS): none is called clean, whatever check_round makes of it."""
    specials = set(
        faulty_con.execute(
            f"""
            SELECT table_id, shoe, round FROM events
            WHERE type IN ({ROUND_TYPES}) AND shoe IS NOT NULL GROUP BY ALL
            HAVING count(*) > 256 OR round > 16777216
                OR bool_or(seat IN (31, 40, 1048577, 1099511627776))
            """
        ).fetchall()
    )
    assert len(specials) == 6
    assert specials <= set(faulty.ref.rounds)
    assert not specials & faulty.clean


@pytest.mark.slow
def test_the_audit_writes_exactly_the_reference_findings(tmp_path: Path) -> None:
    """The whole audit (verdict, then check_round for the rest) on the faulty night stores the
    reference's findings field for field, and counts every round once."""
    log = tmp_path / "faulty-night.jsonl"
    log.write_text("\n".join(faulty_night(seed=20261129)) + "\n")
    con = _audit_db(tmp_path / "audit.duckdb", [log])
    try:
        ref = reference(con)
        result = audit(con, runs.start(con, "audit", {}), PropertyConfig(), tables=False)
        chemin = sum(1 for why in ref.skipped.values() if why == "chemin de fer")
        assert result.rounds == len(ref.rounds) + chemin
        stored = {
            row[0]: row[1:]
            for row in con.execute(
                "SELECT fingerprint, code, table_id, pit, shoe, round, seq, ts, message, "
                "CAST(expected AS VARCHAR), CAST(observed AS VARCHAR), source, "
                "CAST(evidence AS VARCHAR) FROM findings WHERE code NOT LIKE 'log.%' "
                "AND table_id <> 'D1'"  # chemin de fer: its own replay
            ).fetchall()
        }
        assert set(stored) == set(ref.findings)
        for fp, f in ref.findings.items():
            code, table, pit, shoe, rnd, seq, ts, message, exp, obs, source, ev = stored[fp]
            assert (code, table, pit, shoe, rnd, seq, ts, message, source) == (
                f["code"], f["table_id"], f["pit"], f["shoe"], f["round"], f["seq"], f["ts"],
                f["message"], f["source"],
            ), fp
            assert (json.loads(exp), json.loads(obs), json.loads(ev)) == (
                f["expected"], f["observed"], f["evidence"],
            ), fp
        audited = dict(
            ((t, s, r), n)
            for t, s, r, n in con.execute(
                "SELECT table_id, shoe, round, findings FROM round_audits"
            ).fetchall()
        )
        assert {k: audited[k] for k in ref.rounds} == ref.rounds
    finally:
        con.close()


def _house_options(pack: RulePack) -> RulePack:
    """The pack with other house options than the simulator dealt by: 4.5% vigorish rounded
    up (NJ) or down (NZ), tie 9 to 1, no push on a tie, a second super 6 exception, and (for
    punto banco) a deal order of Player, Player, Banker, Banker, which the SQL path leaves to
    the reference."""
    variants = {}
    for name, v in pack.variants.items():
        changes: dict[str, Any] = {
            "payouts": MappingProxyType(
                {**v.payouts, "tie": dataclasses.replace(v.payouts["tie"], value=Fraction(9))}
            )
        }
        if v.vig_rate is not None:
            changes["vig_rate"] = dataclasses.replace(v.vig_rate, value=Decimal("0.045"))
        if v.vig_rounding is not None:
            mode = "down_to_cent" if pack.jurisdiction == "NZ" else "up_to_cent"
            changes["vig_rounding"] = dataclasses.replace(v.vig_rounding, value=mode)
        if name == "super6":
            first = v.banker_exceptions[0]
            changes["banker_exceptions"] = (
                *v.banker_exceptions,
                BankerException("natural_9", 9, 2, Fraction(19, 20), first.cited),
            )
        variants[name] = dataclasses.replace(v, **changes)
    push = pack.entries["settlement.push_on_tie"]
    entries = {**pack.entries, push.key: dataclasses.replace(push, value=False)}
    deal = ("player", "player", "banker", "banker") if pack.game == "punto_banco" else None
    return dataclasses.replace(
        pack,
        variants=MappingProxyType(variants),
        entries=MappingProxyType(entries),
        deal_order=deal or pack.deal_order,
    )


@pytest.mark.slow
def test_the_verdict_follows_the_house_options_of_the_pack(faulty_con) -> None:
    packs = {
        (j, g): _house_options(load_pack(j, g))
        for j, g in (("NJ", "mini_baccarat"), ("NJ", "punto_banco"), ("NZ", "mini_baccarat"))
    }
    j = judge(faulty_con, packs)
    assert j.codes["vig.wrong_amount"] > 100 and j.codes["settle.wrong_outcome"] > 20
    assert j.codes["settle.wrong_amount"] > 20
    assert len(j.clean) > 500
    # Another first deal is not encoded: every punto banco round goes to check_round.
    punto = {k for k in j.ref.rounds if k[0] in ("C1", "C4")}
    assert len(punto) > 100 and not punto & j.clean


@pytest.mark.slow
def test_a_few_rounds_among_many_are_judged_alone(faulty_con) -> None:
    """An audit of the newest rounds only: the facts read the seq ranges of the rounds'
    shoes, in which other rounds' events lie too; those must not count."""
    cur = faulty_con.cursor()  # its own temp tables
    cur.execute("SET TimeZone = 'UTC'")
    select_rounds(cur, PropertyConfig(), None)
    cur.execute("DELETE FROM todo WHERE hash(table_id, shoe, round) % 7 <> 0")
    j = judge(cur)
    assert 200 < len(j.clean) < 700 and len(j.ref.findings) > 50
    cur.close()


def test_event_types_the_verdict_does_not_count_send_the_round_to_check_round() -> None:
    """The types come from the vocabulary: every round event type is either counted by the
    facts or sends its round to check_round, so a type added later is never skipped."""
    assert set(verdict.UNDERSTOOD) <= set(ROUND_EVENTS)
    assert set(facts.OTHER_TYPES) == set(ROUND_EVENTS) - set(verdict.UNDERSTOOD)
    assert {"void", "irregularity", "bank", "banco", "commission"} <= set(facts.OTHER_TYPES)


def test_outcome_tables_are_shared_by_pack_object_and_outcome_key() -> None:
    """shared_outcome_tables works a pack's tables out once a process: the same tables for
    the same pack object and outcome key, worked out again for another pack object (a pack
    read afresh after an edit is one) or another variant."""
    pack = load_pack("NJ", "mini_baccarat")

    def ctx(p: RulePack, variant: str = "standard", procedure: int | None = 1) -> TableContext:
        return TableContext("MB-01", "P1", "mini_baccarat", "NJ", variant, procedure, 7,
                            ("dragon7",), p)

    first = verdict.shared_outcome_tables(ctx(pack))
    assert first == verdict.outcome_tables(ctx(pack))
    assert verdict.shared_outcome_tables(ctx(pack, procedure=3)) is first  # not in the key
    edited = dataclasses.replace(
        pack, announcements=MappingProxyType({k: v for k, v in pack.announcements.items()
                                              if k != "tie_hand"}))
    again = verdict.shared_outcome_tables(ctx(edited))
    assert again is not first and again == verdict.outcome_tables(ctx(edited))
    assert again != first  # a tie no longer announced
    other = next(v for v in pack.variants if v != "standard")
    assert verdict.shared_outcome_tables(ctx(pack, other)) == verdict.outcome_tables(
        ctx(pack, other))
