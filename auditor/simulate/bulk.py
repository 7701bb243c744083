"""A vectorised generator of event logs at volume: a whole gaming day of NJ mini-baccarat.

`auditor.simulate.planted` builds every round in Python (a few thousand rounds a second), which is
the reference for shapes and rules but far too slow for the 10-million-round scale benchmark.
This module writes the same event shapes (same types, key order, value types, timestamp
format) from numpy arrays:

- every table draws its randomness from its own numpy Generators, keyed by (seed, table), so
  the bytes do not depend on how tables are batched;
- all the shoes of a batch are dealt in lockstep, one numpy step per round of a shoe, by the
  pack's draw tables (the same tuples `auditor.rules.draw` reads; auditor.simulate.bulk_deal);
- each round is a fixed row of event slots (table_open ... table_close), the settlement
  slots put in the procedure's order by a permutation, compressed by a validity mask into
  the table's event stream, so no sort is needed;
- a line is the concatenation of six pieces taken from one dictionary of byte strings (the
  timestamp to the second; milliseconds, offset and type; table; seq; what the round's
  events share: shoe, round, dealer, origin; the event's own fields), joined a few thousand
  lines at a time with `bytes.join` (about half of the time goes there).

Each pit changes procedure at half time on written notices 45 minutes ahead, as the
reference night does. Only a subset of deviation kinds is planted: those that show as
exactly one finding of their own code and can be decided from the round's cards alone
(`BULK_KINDS`); settlement kinds use the reference's fixed wagers, which make them visible.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from itertools import combinations
from pathlib import Path

import numpy as np

from auditor.rules.cards import RANKS, SUITS
from auditor.simulate.bulk_deal import (
    BANKER,
    BULK_KINDS,
    DECKS,
    MAX_ROUNDS_PER_SHOE,
    PLAYER,
    SHOE_CARDS,
    TIE,
    Deal,
    K,
)
from auditor.simulate.generator import STAKES
from auditor.simulate.kinds import BANKING_KINDS
from auditor.simulate.output import SimulationResult, prepare_out_dir, write_ground_truth

BULK_CODES = {k: BANKING_KINDS[k] for k in BULK_KINDS}

BULK_DATE = dt.date(2026, 12, 1)  # the gaming day simulated unless one is given
BULK_OPENS = dt.time(6, 0)  # the default config's gaming day starts at 06:00
UTC_OFFSET = dt.timedelta(hours=-5)
MAX_HOURS = 24.0
PIT_SIZE = 4
SEATS = 7
LAST_ROUND_MARGIN_MS = 120_000  # the last round starts this long before the day ends
CHANGE_MIN_HOURS = 2.0  # shorter days have no procedure change
NOTICE_LEAD_MS = 45 * 60 * 1000  # written notices this long before the change (30 required)
MS = 1000
JOIN_LINES = 2048  # lines joined and written at a time

CARD_NAMES = [r + s for r in RANKS for s in SUITS]  # id = rank index * 4 + suit index
BETS = ("banker", "player", "tie")
STAKE_VALUES = np.array(STAKES, np.int64)

# Event types; the index is the type code the arrays carry.
TYPES = (
    "table_open", "shoe_start", "burn", "round_start", "wager", "no_more_bets", "card",
    "announce", "collect", "pay", "push", "vig", "round_end", "cut_card", "shoe_end",
    "table_close", "procedure_change",
)
TY = {t: i for i, t in enumerate(TYPES)}

# Semantic slots of a round's row: where each possible event of the round sits before the
# settlement block is put in its procedure's order.
S_OPEN, S_CHANGE, S_SHOE_START, S_BURN, S_ROUND_START = 0, 1, 2, 3, 4
S_WAGER = 5  # seats 1-7: 5..11
S_NMB = 12
S_CARD = 13  # cards in shoe order: 13..18
S_RESULT, S_TIE = 19, 20
S_SETTLE = 21  # seat i (0-based): 21 + 4i + (collect, pay, push, vig)
COLLECT, PAY, PUSH, VIG = 0, 1, 2, 3
S_ROUND_END, S_CUT, S_SHOE_END, S_CLOSE = 49, 50, 51, 52
NSLOTS = 53
# The events written whole after their seq (a few per shoe), and their column in _Batch.special.
SPECIAL_SLOTS = (S_OPEN, S_CHANGE, S_SHOE_START, S_BURN, S_CUT, S_SHOE_END, S_CLOSE)
SPECIAL_COL = np.full(NSLOTS, -1, np.int64)
SPECIAL_COL[list(SPECIAL_SLOTS)] = np.arange(len(SPECIAL_SLOTS))

SLOT_TYPE = np.array(
    [TY["table_open"], TY["procedure_change"], TY["shoe_start"], TY["burn"],
     TY["round_start"]]
    + [TY["wager"]] * SEATS
    + [TY["no_more_bets"]]
    + [TY["card"]] * 6
    + [TY["announce"], TY["announce"]]
    + [TY[t] for _ in range(SEATS) for t in ("collect", "pay", "push", "vig")]
    + [TY["round_end"], TY["cut_card"], TY["shoe_end"], TY["table_close"]],
    np.int64,
)
# Seconds the reference's clock moves before each event of a round, in ms.
SETTLE_DELTA = {COLLECT: 1500, PAY: 2000, PUSH: 1000, VIG: 1500}
SLOT_DELTA = np.zeros(NSLOTS, np.int64)
SLOT_DELTA[S_NMB], SLOT_DELTA[S_CARD:S_CARD + 6] = 2000, 1200
SLOT_DELTA[S_RESULT], SLOT_DELTA[S_TIE], SLOT_DELTA[S_ROUND_END] = 2000, 500, 3000
for _seat in range(SEATS):
    for _how, _ms in SETTLE_DELTA.items():
        SLOT_DELTA[S_SETTLE + 4 * _seat + _how] = _ms


def _settle_order(procedure: int, collect_after_pay: bool) -> list[int]:
    """Semantic settlement slots in the order the reference writes them: losers collected
    (highest seat first), winners paid and vigorish taken by the procedure (7.10(b)1-4),
    pushes last; with `collect_after_pay` the collections come after the winners."""
    desc = range(SEATS - 1, -1, -1)
    collects = [S_SETTLE + 4 * s + COLLECT for s in desc]
    pays = [S_SETTLE + 4 * s + PAY for s in desc]
    vigs = [S_SETTLE + 4 * s + VIG for s in desc]
    if procedure == 1:
        block = pays + vigs
    elif procedure == 2:
        block = vigs + pays
    else:
        first, then = (PAY, VIG) if procedure == 3 else (VIG, PAY)
        block = [S_SETTLE + 4 * s + h for s in desc for h in (first, then)]
    pushes = [S_SETTLE + 4 * s + PUSH for s in desc]
    return (block + collects if collect_after_pay else collects + block) + pushes


# Row order of a round for each (procedure - 1) * 2 + collect_after_pay.
ORDERS = np.array(
    [
        list(range(S_SETTLE)) + _settle_order(p, cap) + [S_ROUND_END, S_CUT, S_SHOE_END, S_CLOSE]
        for p in (1, 2, 3, 4)
        for cap in (False, True)
    ],
    np.int16,  # small types: these (rounds x slots) arrays are the bulk of the work
)

# Seat subsets by size, for drawing "n distinct seats out of 7" from one integer.
_SUBSETS = np.zeros((SEATS + 1, 35, SEATS), bool)
_NSUBSETS = np.zeros(SEATS + 1, np.int64)
for _n in range(1, SEATS + 1):
    for _j, _c in enumerate(combinations(range(SEATS), _n)):
        _SUBSETS[_n, _j, list(_c)] = True
    _NSUBSETS[_n] = _j + 1


def _objects(items: list[bytes]) -> np.ndarray:
    """A 1-d object array of byte strings (np.array would make a fixed-width one)."""
    out = np.empty(len(items), object)
    out[:] = items
    return out


def _cents(c: int) -> str:
    """An amount in cents as the reference writes it: whole amounts as JSON numbers,
    others as "2.50"-style strings."""
    return str(c // 100) if c % 100 == 0 else f'"{c // 100}.{c % 100:02d}"'


class _Pieces:
    """The static part of the dictionary of byte strings every line is joined from."""

    def __init__(self, start: dt.datetime, seconds: int, max_number: int) -> None:
        parts: list[bytes] = [b""]
        self.empty = 0
        self.num = len(parts)
        parts += [str(i).encode() for i in range(max_number + 1)]
        self.sec = len(parts)
        base = start.replace(tzinfo=None)
        # Each second of the day: an hour's prefix (the date changes at midnight) and
        # "MM:SS", concatenated element-wise.
        hours = _objects([
            b'{"v":1,"ts":"' + (base + dt.timedelta(hours=h)).isoformat()[:14].encode()
            for h in range(seconds // 3600 + 1)
        ])
        mmss = _objects([f"{m:02d}:{s:02d}".encode() for m in range(60) for s in range(60)])
        sec = np.arange(seconds + 1)
        parts += (hours[sec // 3600] + mmss[sec % 3600]).tolist()
        off = start.isoformat()[-6:]  # the local offset, -05:00
        self.mstype = len(parts)
        parts += [
            f'.{ms:03d}{off}","type":"{t}","table":"'.encode() for t in TYPES for ms in range(MS)
        ]
        self.close = len(parts)
        parts.append(b"}\n")
        self.tie = len(parts)
        parts.append(b',"kind":"tie_hand"}\n')
        self.card = len(parts)
        parts += [
            f',"to":"{to}","card":"{c}"}}\n'.encode() for to in ("player", "banker")
            for c in CARD_NAMES
        ]
        self.result = len(parts)
        parts += [
            f',"kind":"result","player":{p},"banker":{b},"winner":"{w}"}}\n'.encode()
            for p in range(10) for b in range(10) for w in BETS
        ]
        # Wager, collect, pay and push: seat, bet, amount (whole amounts only here).
        amounts = sorted({int(x) for s in STAKES for x in (s, 8 * s, s - 10)})
        self.amount_index = np.full(max(amounts) + 1, -1, np.int64)
        self.amount_index[amounts] = np.arange(len(amounts))
        self.n_amounts = len(amounts)
        self.sba = len(parts)
        parts += [
            f',"seat":{s},"bet":"{b}","amount":{a}}}\n'.encode()
            for s in range(1, SEATS + 1) for b in BETS for a in amounts
        ]
        # Vigorish: seat, amount in cents (5% of a stake, or 1.00 short), mode.
        vigs = sorted({c for s in STAKES for c in (s * 5, s * 5 - 100)})
        self.vig_index = np.full(max(vigs) + 1, -1, np.int64)
        self.vig_index[vigs] = np.arange(len(vigs))
        self.n_vigs = len(vigs)
        self.vig = len(parts)
        parts += [
            f',"seat":{s},"amount":{_cents(c)},"mode":"{m}"}}\n'.encode()
            for s in range(1, SEATS + 1) for c in vigs for m in ("collect", "mark")
        ]
        self.array = _objects(parts)


class _Table:
    """One table's random draws, from Generators keyed by (seed, table) only."""

    def __init__(self, seed: int, index: int, n_shoes: int, max_rounds: int,
                 deviations: bool) -> None:
        cards_rng = np.random.default_rng([seed, index, 1])
        self.dealers = [f"D{d}" for d in cards_rng.integers(1000, 10000, 4)]
        base = np.broadcast_to(np.tile(np.arange(52, dtype=np.int16), DECKS),
                               (n_shoes, SHOE_CARDS))
        self.cards = cards_rng.permuted(base, axis=1)
        self.cut_from_end = cards_rng.integers(14, 17, n_shoes)
        self.burn_gap = cards_rng.integers(20, 41, n_shoes) * MS
        self.brk = cards_rng.integers(120, 301, n_shoes) * MS
        # Drawn last from this Generator, so skipping them changes nothing else.
        shape = (n_shoes, MAX_ROUNDS_PER_SHOE)
        self.dev_u = cards_rng.random(shape) if deviations else np.ones(shape)
        round_rng = np.random.default_rng([seed, index, 2])
        # One 64-bit draw per round and one per seat, cut into 16-bit fields (_Batch.rows).
        self.raw = round_rng.bit_generator.random_raw(max_rounds * 8).reshape(max_rounds, 8)


def _field(x: np.ndarray, shift: int, modulo: int) -> np.ndarray:
    """A 16-bit field of raw draws reduced modulo `modulo` (bias below 0.02% for ours)."""
    return ((x >> np.uint64(shift)) & np.uint64(0xFFFF)).astype(np.int64) % modulo


def _pit_procedure(seed: int, pit: int) -> int:
    return int(np.random.default_rng([seed, pit, 3]).integers(1, 5))


def _new_procedure(seed: int, pit: int, old: int) -> int:
    return int(np.random.default_rng([seed, pit, 4]).choice([p for p in (1, 2, 3, 4)
                                                             if p != old]))


class _Batch:
    """Tables [first, first + count): dealt, timed, laid out as event rows and written."""

    def __init__(self, sim: _Sim, first: int, count: int) -> None:
        self.sim, self.first, self.count = sim, first, count
        ms_shoes, rmax = sim.max_shoes, sim.max_rounds
        tables = [_Table(sim.seed, first + i, ms_shoes, rmax, sim.rate > 0)
                  for i in range(count)]
        self.tables = tables
        deal = Deal(
            np.concatenate([t.cards for t in tables]),
            np.concatenate([t.cut_from_end for t in tables]),
            np.concatenate([t.dev_u for t in tables]),
            sim.rate,
        )
        self.deal = deal
        raw = np.stack([t.raw for t in tables])  # (T, rmax, 8)
        burn_gap = np.stack([t.burn_gap for t in tables])
        brk = np.stack([t.brk for t in tables])
        n = deal.rounds.reshape(count, ms_shoes)
        roff = np.cumsum(n, axis=1) - n
        gaps = (40 + _field(raw[:, :, 0], 0, 36)) * MS
        g_cum = np.zeros((count, rmax + 1), np.int64)
        np.cumsum(gaps, axis=1, out=g_cum[:, 1:])

        def at(i: np.ndarray) -> np.ndarray:
            """g_cum at each table's round indices i (any shape after the table axis)."""
            flat = np.minimum(i, rmax).reshape(count, -1)
            return np.take_along_axis(g_cum, flat, axis=1).reshape(i.shape)

        def gsum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            """Sum of the gaps of the table's rounds [a, b) (beyond rmax: none fit)."""
            return at(b) - at(np.broadcast_to(a, b.shape))

        duration = burn_gap + gsum(roff, roff + n) + 30 * MS + brk
        shoe_start = np.cumsum(duration, axis=1) - duration
        r_idx = np.arange(MAX_ROUNDS_PER_SHOE)
        g3 = roff[:, :, None] + r_idx  # the table's round index of each (shoe, round)
        t3 = (shoe_start + burn_gap)[:, :, None] + gsum(roff[:, :, None], g3 + 1)
        # Rounds are played while they start early enough; the rest of the dealt shoes (dealt
        # for the most rounds that could fit) is never used.
        valid = (r_idx < n[:, :, None]) & (t3 <= sim.last_start_ms)
        played = valid.sum(axis=2)
        self.played = played
        tt, ss, rr = np.nonzero(valid)
        self.tt, self.ss, self.rr = tt, ss, rr
        self.round_ms = t3[tt, ss, rr]
        self.g = g3[tt, ss, rr]
        self.shoe_start, self.burn_gap, self.brk = shoe_start, burn_gap, brk
        self.raw_round = raw[tt, self.g]

    def rows(self, lo: int, hi: int) -> tuple[np.ndarray, ...]:
        """One table's rounds (rows lo:hi) as rows of semantic slots: the order of the slots,
        valid, ms delta, tail piece; and each round's planted kind (-1: none)."""
        sim, deal, pc = self.sim, self.deal, self.sim.pieces
        tt, ss, rr = self.tt[lo:hi], self.ss[lo:hi], self.rr[lo:hi]
        shoe = tt * sim.max_shoes + ss
        R = hi - lo
        kind = deal.kind[shoe, rr].astype(np.int64)  # the deal keeps small types
        win = deal.winner[shoe, rr].astype(np.int64)
        raw = self.raw_round[lo:hi]
        n_w = 1 + _field(raw[:, 0], 16, 5)
        subset = _field(raw[:, 0], 32, 1 << 16) % _NSUBSETS[n_w]
        present = _SUBSETS[n_w, subset].copy()
        seat_raw = raw[:, 1:]
        bet_u = _field(seat_raw, 0, 100)
        bet = np.where(bet_u < 50, BANKER, np.where(bet_u < 92, PLAYER, TIE))
        stake = STAKE_VALUES[_field(seat_raw, 16, len(STAKES))]
        mark = _field(seat_raw, 32, 3) == 2
        jitter = 500 + _field(seat_raw, 48, 2501)
        # The reference's fixed wagers for settlement deviations: they make the deviation
        # observable (two Player winners and a loser; a Banker winner and a loser).
        for kinds, layout in (
            (("pay_short", "collect_after_pay"),
             {7: (PLAYER, 100), 4: (PLAYER, 50), 2: (BANKER, 100)}),
            (("vig_missing", "vig_short"), {5: (BANKER, 100), 3: (PLAYER, 50)}),
        ):
            f = (kind == K[kinds[0]]) | (kind == K[kinds[1]])
            present[f] = False
            for seat, (b, x) in layout.items():
                present[f, seat - 1], bet[f, seat - 1], stake[f, seat - 1] = True, b, x
        w = win[:, None]
        tie = w == TIE
        pays = present & ((tie & (bet == TIE)) | (~tie & (bet == w)))
        pushes = present & tie & (bet != TIE)
        collects = present & ~pays & ~pushes
        vigs = pays & (bet == BANKER) & (kind != K["vig_missing"])[:, None]
        # The standard variant's defaults: 1 to 1, Tie 8 to 1, vigorish 5% of the winnings.
        pay_amt = np.where(bet == TIE, 8 * stake, stake)
        pay_amt[:, 6] -= np.where(kind == K["pay_short"], 10, 0)
        vig_c = stake * 5
        vig_c[:, 4] -= np.where(kind == K["vig_short"], 100, 0)

        valid = np.zeros((R, NSLOTS), bool)
        tail = np.full((R, NSLOTS), pc.empty, np.int32)
        valid[0, S_OPEN] = valid[-1, S_CLOSE] = True  # the rows are one table's
        valid[:, S_SHOE_START] = valid[:, S_BURN] = rr == 0
        valid[:, [S_ROUND_START, S_NMB, S_RESULT, S_ROUND_END]] = True
        tail[:, [S_ROUND_START, S_NMB, S_ROUND_END]] = pc.close
        seats = np.arange(SEATS)
        valid[:, S_WAGER:S_WAGER + SEATS] = present
        sba = pc.sba + (seats * 3 + bet) * pc.n_amounts
        tail[:, S_WAGER:S_WAGER + SEATS] = sba + pc.amount_index[stake]
        n_cards = deal.n_cards[shoe, rr].astype(np.int64)
        k6 = np.arange(6)
        valid[:, S_CARD:S_CARD + 6] = k6 < n_cards[:, None]
        card_ids = deal.cards[shoe[:, None], np.minimum(deal.first_card[shoe, rr][:, None] + k6,
                                                        SHOE_CARDS - 1)]
        to = np.tile(np.array([0, 1, 0, 1, 0, 1]), (R, 1))
        to[:, 4] = np.where(deal.p_drew[shoe, rr], 0, 1)
        tail[:, S_CARD:S_CARD + 6] = pc.card + to * 52 + card_ids
        announced = np.where(kind == K["wrong_winner"], PLAYER, win)
        tail[:, S_RESULT] = pc.result + (
            (deal.p_count[shoe, rr].astype(np.int64) * 10 + deal.b_count[shoe, rr]) * 3
            + announced
        )
        valid[:, S_TIE] = (win == TIE) & (kind != K["tie_missing"])
        tail[:, S_TIE] = pc.tie
        settle = slice(S_SETTLE, S_SETTLE + 4 * SEATS)
        s_valid = valid[:, settle].reshape(R, SEATS, 4)  # views: [round, seat, how]
        s_tail = tail[:, settle].reshape(R, SEATS, 4)
        for how, mask, amount in ((COLLECT, collects, stake), (PAY, pays, pay_amt),
                                  (PUSH, pushes, stake)):
            s_valid[:, :, how] = mask
            s_tail[:, :, how] = sba + pc.amount_index[amount]
        s_valid[:, :, VIG] = vigs
        s_tail[:, :, VIG] = pc.vig + (seats * pc.n_vigs + pc.vig_index[vig_c]) * 2 + mark
        valid[:, S_CUT] = deal.cut_round[shoe] == rr
        valid[:, S_SHOE_END] = rr == self.played[tt, ss] - 1
        delta = np.empty((R, NSLOTS), np.int32)  # read only where valid
        delta[:] = SLOT_DELTA
        delta[:, S_WAGER:S_WAGER + SEATS] = jitter
        g = int(tt[0]) + self.first
        procedure = np.full(R, sim.procedures[g])
        if sim.change_ms is not None:  # the pit's change, from the first round at or after it
            after = self.round_ms[lo:hi] >= sim.change_ms
            procedure[after] = sim.new_procedures[g]
            valid[:, S_CHANGE] = after & ~np.r_[False, after[:-1]]
        order = ORDERS[(procedure - 1) * 2 + (kind == K["collect_after_pay"])]
        return order, valid, delta, tail, kind

    def write(self) -> tuple[list[Path], int, int, list[dict]]:
        """Write one file per table; (files, rounds, events, deviations).

        The deal and the times were computed for the whole batch; the lines are laid out a
        table at a time so the working arrays stay small (fresh memory is slow to touch)."""
        sim, pc = self.sim, self.sim.pieces
        tt, ss, rr = self.tt, self.ss, self.rr
        names = [sim.table_name(self.first + i) for i in range(self.count)]
        shoe_ids = [f"{t}-{sim.day:%m%d}-{s + 1:02d}" for t in names
                    for s in range(sim.max_shoes)]
        # Pieces of this batch: the tables; per round what its events share after the seq
        # (shoe, round, dealer, origin "tms" or "shoe"); the few table and shoe lines.
        extra = _objects([f'{t}","seq":'.encode() for t in names])
        shoe_part = _objects([f',"shoe":"{s}","round":'.encode() for s in shoe_ids])
        dealer_part = _objects([f',"dealer":"{d}","origin":"{o}"'.encode()
                                for t in self.tables for d in t.dealers for o in ("tms", "shoe")])
        head = shoe_part[tt * sim.max_shoes + ss] + pc.array[pc.num + 1 + rr]
        dealer = tt * 4 + (self.round_ms // 3_600_000) % 4
        round_parts = [extra, head + dealer_part[dealer * 2], head + dealer_part[dealer * 2 + 1]]
        self.round_piece = len(pc.array) + len(extra)
        new_table = tt[1:] != tt[:-1]
        first_row, last_row = np.ones(len(tt), bool), np.ones(len(tt), bool)
        first_row[1:], last_row[:-1] = new_table, new_table
        changes = np.zeros(len(tt), bool)
        if sim.change_ms is not None:
            after = self.round_ms >= sim.change_ms
            changes = after & (first_row | ~np.r_[False, after[:-1]])
        special_rows = (
            (S_OPEN, first_row),
            (S_CHANGE, changes),
            (S_SHOE_START, rr == 0),
            (S_BURN, rr == 0),
            (S_CUT, self.deal.cut_round[tt * sim.max_shoes + ss] == rr),
            (S_SHOE_END, rr == self.played[tt, ss] - 1),
            (S_CLOSE, last_row),
        )
        base = len(pc.array) + len(extra) + 2 * len(tt)
        lines: list[bytes] = []
        self.special = np.full((len(tt), len(SPECIAL_SLOTS)), -1, np.int64)
        for slot, mask in special_rows:
            rows = np.nonzero(mask)[0]
            self.special[rows, SPECIAL_COL[slot]] = base + len(lines) + np.arange(len(rows))
            lines += [line.encode() for line in self._special_lines(slot, rows, shoe_ids)]
        pieces = np.concatenate([pc.array, *round_parts, _objects(lines)])

        files: list[Path] = []
        events = 0
        bounds = np.searchsorted(tt, np.arange(self.count + 1))
        kinds = []
        for i, name in enumerate(names):
            path = sim.out / f"{sim.day:%Y-%m-%d}_{name}.jsonl"
            lo, hi = bounds[i], bounds[i + 1]
            with path.open("wb") as fh:
                if hi > lo:
                    idx, kind = self._table_pieces(lo, hi)
                    # Joined a few hundred KB at a time: memory the allocator reuses, where
                    # one buffer per table would be fresh pages to fault in every time.
                    for a in range(0, len(idx), JOIN_LINES):
                        fh.write(b"".join(pieces.take(idx[a:a + JOIN_LINES]).ravel().tolist()))
                    events += len(idx)
                    kinds.append(kind)
                else:  # no round fits in the hours: the table opens and closes
                    fh.write(self._empty_table(i, name))
                    events += 2
            files.append(path)
        kind = np.concatenate(kinds) if kinds else np.zeros(0, np.int64)
        deviations = [
            {"code": BULK_CODES[BULK_KINDS[kind[j]]], "table": names[tt[j]],
             "shoe": shoe_ids[tt[j] * sim.max_shoes + ss[j]], "round": int(rr[j]) + 1,
             "kind": BULK_KINDS[kind[j]]}
            for j in np.nonzero(kind >= 0)[0]
        ]
        return files, len(tt), events, deviations

    def _table_pieces(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """One table's lines as rows of six piece indices, and its rounds' kinds."""
        sim, pc = self.sim, self.sim.pieces
        order, valid, delta, tail, kind = self.rows(lo, hi)
        t = int(self.tt[lo])
        ss, round_ms = self.ss[lo:hi], self.round_ms[lo:hi]
        valid = np.take_along_axis(valid, order, axis=1)
        per_round = valid.sum(axis=1)
        ev_row = np.repeat(np.arange(hi - lo), per_round)
        slot = order.ravel()[valid.ravel()]
        cell = ev_row * NSLOTS + slot  # the event's cell in the semantic layout
        # Each event's time: its round's start plus the deltas of the round's events so far.
        elapsed = np.cumsum(delta.ravel()[cell])
        ends = np.cumsum(per_round)
        before = np.r_[0, elapsed[ends[:-1] - 1]]
        since_start = elapsed - before[ev_row]
        ev_type = SLOT_TYPE[slot]
        # A round starts on its pace but never before the round before is over (2 s after
        # its round_end), as the reference's: a stream's time never runs backwards.
        ended = np.nonzero(ev_type == TY["round_end"])[0]
        length = np.zeros(hi - lo, np.int64)
        length[ev_row[ended]] = since_start[ended]
        taken = np.r_[0, np.cumsum(length + 2 * MS)[:-1]]
        round_ms = taken + np.maximum.accumulate(round_ms - taken)
        round_end = round_ms + length
        ev_ts = round_ms[ev_row] + since_start
        # The table and shoe events: their own times (as the reference places them: the
        # cutting card after its round, the shoe's end on a whole second 30 s after its last
        # round's end, a change at its time or after the round before it) and their own line
        # after the seq.
        sp = np.nonzero(SPECIAL_COL[slot] >= 0)[0]
        sp_slot, sp_row = slot[sp], ev_row[sp]
        sp_shoe = ss[sp_row]
        shoe_start = self.shoe_start[t, sp_shoe]
        shoe_end = -(-round_end[sp_row] // MS) * MS + 30 * MS
        change = np.maximum(sim.change_ms or 0, np.r_[0, round_end][sp_row])
        ev_ts[sp] = np.select(
            [sp_slot == S_OPEN, sp_slot == S_SHOE_START, sp_slot == S_BURN, sp_slot == S_CUT,
             sp_slot == S_SHOE_END, sp_slot == S_CHANGE],
            [np.zeros_like(shoe_end), shoe_start, shoe_start + self.burn_gap[t, sp_shoe],
             round_end[sp_row], shoe_end, change],
            np.minimum(shoe_end + self.brk[t, sp_shoe], sim.end_ms - MS),  # table_close
        )
        idx = np.empty((len(slot), 6), np.int64)
        idx[:, 0] = pc.sec + ev_ts // MS
        idx[:, 1] = pc.mstype + ev_type * MS + ev_ts % MS
        idx[:, 2] = len(pc.array) + t
        idx[:, 3] = pc.num + 1 + np.arange(len(slot))
        idx[:, 4] = self.round_piece + (ev_type == TY["card"]) * len(self.tt) + lo + ev_row
        idx[:, 5] = tail.ravel()[cell]
        idx[sp, 4] = self.special[lo + sp_row, SPECIAL_COL[sp_slot]]
        idx[sp, 5] = pc.empty
        return idx, kind

    def _dealer(self, t: int, ms: int) -> str:
        return self.tables[t].dealers[(ms // 3_600_000) % 4]

    def _special_lines(self, slot: int, rows: np.ndarray, shoe_ids: list[str]) -> list[str]:
        """The rest after the seq of the table or shoe events `slot` of these round rows (a
        few per shoe), in Python over plain lists."""
        sim, deal = self.sim, self.deal
        t, s = self.tt[rows], self.ss[rows]
        k = t * sim.max_shoes + s
        ms = self.round_ms[rows]
        if slot in (S_SHOE_START, S_BURN):
            ms = self.shoe_start[t, s] + (self.burn_gap[t, s] if slot == S_BURN else 0)
        elif slot in (S_OPEN, S_CHANGE):
            ms = np.full(len(rows), 0 if slot == S_OPEN else sim.change_ms or 0)
        elif slot == S_CLOSE:
            ms = np.minimum(ms + 30 * MS + self.brk[t, s], sim.end_ms - MS)
        dealers = [self.tables[i].dealers[h] for i, h in
                   zip(t.tolist(), ((ms // 3_600_000) % 4).tolist(), strict=True)]
        shoes = [shoe_ids[i] for i in k.tolist()]
        if slot == S_OPEN:
            return [self._open_rest(i, d) for i, d in zip(t.tolist(), dealers, strict=True)]
        if slot == S_CHANGE:
            return [f',"procedure":{sim.new_procedures[self.first + i]},"dealer":"{d}",'
                    f'"origin":"pit"}}\n' for i, d in zip(t.tolist(), dealers, strict=True)]
        if slot == S_SHOE_START:
            return [f',"shoe":"{sh}","decks":{DECKS},"shuffle":"manual","batch":"red",'
                    f'"dealer":"{d}","origin":"shoe"}}\n'
                    for sh, d in zip(shoes, dealers, strict=True)]
        if slot == S_BURN:
            burns = [",".join(f'"{CARD_NAMES[c]}"' for c in cards[:n]) for cards, n in
                     zip(deal.cards[k, :11].tolist(), deal.burn_n[k].tolist(), strict=True)]
            return [f',"shoe":"{sh}","cards":[{b}],"dealer":"{d}","origin":"shoe"}}\n'
                    for sh, b, d in zip(shoes, burns, dealers, strict=True)]
        if slot == S_CUT:
            return [f',"shoe":"{sh}","round":{r + 1},"origin":"shoe"}}\n'
                    for sh, r in zip(shoes, self.rr[rows].tolist(), strict=True)]
        if slot == S_SHOE_END:
            remaining = (SHOE_CARDS - deal.pos_after[k, self.rr[rows]].astype(np.int64)).tolist()
            return [f',"shoe":"{sh}","remaining":{n},"origin":"shoe"}}\n'
                    for sh, n in zip(shoes, remaining, strict=True)]
        return [f',"dealer":"{d}","origin":"tms"}}\n' for d in dealers]  # table_close

    def _open_rest(self, t: int, dealer: str) -> str:
        g = self.first + t
        return (f',"pit":"P{g // PIT_SIZE + 1}","game":"mini_baccarat","jurisdiction":"NJ",'
                f'"variant":"standard","procedure":{self.sim.procedures[g]},"seats":{SEATS},'
                f'"side_bets":["tie"],"dealer":"{dealer}","origin":"tms"}}\n')

    def _empty_table(self, t: int, name: str) -> bytes:
        """table_open and table_close of a table that has no time for a round."""
        sim = self.sim
        close = max(0, sim.end_ms - MS)
        lines = []
        for seq, (ms, typ, rest) in enumerate(
            ((0, "table_open", self._open_rest(t, self._dealer(t, 0))),
             (close, "table_close", f',"dealer":"{self._dealer(t, close)}","origin":"tms"}}\n')),
            start=1,
        ):
            lines.append(
                f'{{"v":1,"ts":"{sim.local(ms)}","type":"{typ}","table":"{name}",'
                f'"seq":{seq}{rest}'
            )
        return "".join(lines).encode()


class _Sim:
    """The run's constants: sizes, bounds, the static pieces and the pits' procedures."""

    def __init__(
        self, out: Path, tables: int, hours: float, seed: int, rate: float, day: dt.date
    ) -> None:
        self.out, self.tables, self.seed, self.rate, self.day = out, tables, seed, rate, day
        self.start = dt.datetime.combine(day, BULK_OPENS, dt.timezone(UTC_OFFSET))
        self.end_ms = round(hours * 3600 * MS)
        self.last_start_ms = self.end_ms - LAST_ROUND_MARGIN_MS
        # A round starts at least 40 s after the one before, so no more than this many fit.
        self.max_rounds = max(self.last_start_ms, 0) // (40 * MS) + 2
        # A shoe lasts at least 66 rounds of 40 s (6 cards each, cut 16 from the end).
        self.max_shoes = max(1, self.end_ms // ((66 * 40 + 170) * MS) + 2)
        self.width = max(4, len(str(tables)))
        self.procedures = [_pit_procedure(seed, g // PIT_SIZE) for g in range(tables)]
        # Every pit changes procedure at half time, on written notices given 45 minutes
        # before (on time), as the reference night does; not in a day too short for it.
        self.change_ms: int | None = None
        self.new_procedures = self.procedures
        if hours >= CHANGE_MIN_HOURS:
            self.change_ms = round(hours * 30) * 60 * MS
            new = [_new_procedure(seed, pit, self.procedures[pit * PIT_SIZE])
                   for pit in range((tables + PIT_SIZE - 1) // PIT_SIZE)]
            self.new_procedures = [new[g // PIT_SIZE] for g in range(tables)]
        # seq numbers: at most 26 events a round and the 6 table and shoe events.
        self.pieces = _Pieces(self.start, self.end_ms // MS + 1, self.max_rounds * 32 + 2)

    def table_name(self, g: int) -> str:
        return f"MB-{g + 1:0{self.width}d}"

    def notices(self) -> list[str]:
        """The pits' written notices of the change, to the Division and to surveillance."""
        if self.change_ms is None:
            return []
        effective = (self.start + dt.timedelta(milliseconds=self.change_ms)).isoformat()
        given = self.local(self.change_ms - NOTICE_LEAD_MS)
        lines = []
        for first in range(0, self.tables, PIT_SIZE):
            pit = f"P{first // PIT_SIZE + 1}"
            tables = [self.table_name(g) for g in range(first, min(first + PIT_SIZE,
                                                                  self.tables))]
            for seq, recipient in enumerate(("division", "surveillance"), start=1):
                lines.append(json.dumps(
                    {"v": 1, "ts": given, "type": "procedure_notice", "pit": pit, "seq": seq,
                     "procedure": self.new_procedures[first], "effective": effective,
                     "recipient": recipient, "written": True, "tables": tables,
                     "origin": "pit"},
                    separators=(",", ":"),
                ))
        return lines

    def local(self, ms: int) -> str:
        return (self.start + dt.timedelta(milliseconds=ms)).isoformat(timespec="milliseconds")


def simulate_bulk(
    out_dir: Path | str,
    tables: int,
    hours: float,
    seed: int = 1,
    deviation_rate: float = 0.0,
    batch_tables: int = 200,
    *,
    day: dt.date = BULK_DATE,
    replace: bool = False,
) -> SimulationResult:
    """Write one event log per NJ mini-baccarat table (`<date>_<table>.jsonl`, tables
    MB-0001..., four to a pit, one procedure per pit), open `hours` hours from 06:00 on
    `day` (at most 24: one gaming day), the pits' notices of their procedure change at
    half time (from 2 hours on) and `ground_truth.ndjson`. Each round carries a
    deviation with probability `deviation_rate`, of a kind among BULK_KINDS its cards let
    show cleanly. The same arguments write the same bytes, whatever `batch_tables` (which
    only bounds memory: peak RSS about 350 MB with 200 tables of 24 hours).

    `out_dir` must be new or empty (`prepare_out_dir`; `replace` clears a previous
    simulation's files first)."""
    if tables < 1:
        raise ValueError("tables must be at least 1")
    if not 0 < hours <= MAX_HOURS:
        raise ValueError(f"hours must be more than 0 and at most {MAX_HOURS:g}")
    if not 0 <= deviation_rate <= 1:
        raise ValueError("deviation_rate must be between 0 and 1")
    started = time.perf_counter()
    out = Path(out_dir)
    prepare_out_dir(out, replace)
    out.mkdir(parents=True, exist_ok=True)
    sim = _Sim(out, tables, hours, seed, deviation_rate, day)
    files: list[Path] = []
    rounds = events = 0
    deviations: list[dict] = []
    for first in range(0, tables, batch_tables):
        batch = _Batch(sim, first, min(batch_tables, tables - first))
        f, r, e, d = batch.write()
        files += f
        rounds += r
        events += e
        deviations += d
    notices = sim.notices()
    if notices:
        path = out / f"{day:%Y-%m-%d}_pit-notices.jsonl"
        path.write_text("".join(line + "\n" for line in notices))
        files.append(path)
        events += len(notices)
    return SimulationResult(files, write_ground_truth(out, deviations), tables, rounds, events,
                            deviations, time.perf_counter() - started)

