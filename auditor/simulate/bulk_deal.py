"""The bulk generator's deal: all the shoes of a batch of tables dealt in lockstep, one numpy
step per round of a shoe, by the NJ mini-baccarat pack's draw tables, with the round
deviations (BULK_KINDS) chosen among those each round's cards let show cleanly.
"""

from __future__ import annotations

import numpy as np

from auditor.rules.cards import RANKS, SUITS
from auditor.rules.pack import load_pack

# Kinds planted here, in a fixed order (their index is what the arrays carry).
BULK_KINDS = (
    "banker_missed",
    "player_extra",
    "player_missed",
    "banker_extra",
    "pay_short",
    "vig_missing",
    "vig_short",
    "collect_after_pay",
    "wrong_winner",
    "tie_missing",
)
K = {k: i for i, k in enumerate(BULK_KINDS)}

DECKS = 8
SHOE_CARDS = 52 * DECKS
MAX_ROUNDS_PER_SHOE = 110  # 4 cards a round at least: (416 - 2 - 14) / 4 + 1 < 110

VALUES = np.array([min(i + 1, 10) % 10 for i in range(len(RANKS)) for _ in SUITS], np.int8)
BANKER, PLAYER, TIE = 0, 1, 2


def draw_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The NJ mini-baccarat pack's third-card tables as arrays (the replay's own tuples)."""
    draw = load_pack("NJ", "mini_baccarat").draw
    return (np.array(draw.natural, bool), np.array(draw.player, bool),
            np.array(draw.banker, bool))


def outcome(p2: np.ndarray, b2: np.ndarray, v: np.ndarray, pd: np.ndarray, bd: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Final counts and winner of rounds whose hands drew as `pd` / `bd` (the Player's third
    card is the fifth out of the shoe, the Banker's the next one)."""
    pc = (p2 + np.where(pd, v[:, 4], 0)) % 10
    bc = (b2 + np.where(bd, np.where(pd, v[:, 5], v[:, 4]), 0)) % 10
    return pc, bc, np.where(pc > bc, PLAYER, np.where(bc > pc, BANKER, TIE))


class Deal:
    """All shoes of a batch dealt in lockstep; per (shoe, round) arrays."""

    def __init__(self, cards: np.ndarray, cut_from_end: np.ndarray, dev_u: np.ndarray,
                 rate: float) -> None:
        natural, player_t, banker_t = draw_tables()
        n_shoes = cards.shape[0]
        shape = (n_shoes, MAX_ROUNDS_PER_SHOE)
        values = np.zeros((n_shoes, SHOE_CARDS + 8), np.int8)
        values[:, :SHOE_CARDS] = VALUES[cards]
        exposed = values[:, 0].astype(np.int64)
        self.burn_n = 1 + np.where(exposed == 0, 10, exposed)
        cut_at = SHOE_CARDS - cut_from_end
        pos = self.burn_n.copy()
        self.first_card = np.zeros(shape, np.int16)
        self.n_cards = np.zeros(shape, np.int8)
        self.p_drew = np.zeros(shape, bool)
        self.p_count = np.zeros(shape, np.int8)
        self.b_count = np.zeros(shape, np.int8)
        self.winner = np.zeros(shape, np.int8)
        self.kind = np.full(shape, -1, np.int8)
        self.pos_after = np.zeros(shape, np.int16)
        self.rounds = np.zeros(n_shoes, np.int64)
        self.cut_round = np.full(n_shoes, -1, np.int64)
        active = np.ones(n_shoes, bool)
        rows = np.arange(n_shoes)[:, None]
        six = np.arange(6)
        for r in range(MAX_ROUNDS_PER_SHOE):
            active &= pos + 6 <= SHOE_CARDS
            if not active.any():
                break
            v = values[rows, pos[:, None] + six].astype(np.int64)
            p2, b2 = (v[:, 0] + v[:, 2]) % 10, (v[:, 1] + v[:, 3]) % 10
            nat = natural[p2] | natural[b2]
            pd = ~nat & player_t[p2]
            bd = ~nat & banker_t[b2 * 11 + np.where(pd, v[:, 4], 10)]
            pc, bc, win = outcome(p2, b2, v, pd, bd)
            kind = np.full(n_shoes, -1, np.int64)
            c = np.nonzero(active & (dev_u[:, r] < rate))[0]
            if len(c):  # the rounds drawn for a deviation: a kind their cards show cleanly
                kind[c] = choose_kind(dev_u[c, r] / rate, nat[c], pd[c], bd[c], b2[c],
                                       bc[c], win[c], banker_t)
                # A planted draw error: the hand's decision is reversed and the Banker's
                # follows the table from the new Player's hand, as the reference deals it.
                k = kind[c]
                pd2 = pd[c] ^ ((k == K["player_extra"]) | (k == K["player_missed"]))
                bd2 = (~nat[c] & banker_t[b2[c] * 11 + np.where(pd2, v[c, 4], 10)]) ^ (
                    (k == K["banker_missed"]) | (k == K["banker_extra"]))
                pd[c], bd[c] = pd2, bd2
                pc[c], bc[c], win[c] = outcome(p2[c], b2[c], v[c], pd2, bd2)
            used = 4 + pd + bd
            self.first_card[:, r] = pos
            self.n_cards[:, r] = used
            self.p_drew[:, r] = pd
            self.p_count[:, r], self.b_count[:, r], self.winner[:, r] = pc, bc, win
            self.kind[:, r] = kind
            was_cut = self.cut_round >= 0
            pos = np.where(active, pos + used, pos)
            self.pos_after[:, r] = pos
            self.rounds += active
            newly = active & ~was_cut & (pos >= cut_at)
            self.cut_round[newly] = r
            active &= ~was_cut  # the round after the cutting card's is the shoe's last
        self.cards = cards


def choose_kind(share: np.ndarray, nat: np.ndarray, pd: np.ndarray, bd: np.ndarray,
                 b2: np.ndarray, bc: np.ndarray, win: np.ndarray, banker_t: np.ndarray
                 ) -> np.ndarray:
    """Per round, the kind at `share` (in [0, 1)) of the kinds its clean deal lets show as
    exactly their own finding (`qualifies` in auditor.simulate.deal); -1 when none does."""
    dragon = bd & (bc == 7) & (win == BANKER)
    q = np.zeros((len(share), len(BULK_KINDS)), bool)
    q[:, K["banker_missed"]] = ~nat & bd & ~pd
    q[:, K["player_extra"]] = ~nat & ~pd & (b2 == 7)
    q[:, K["player_missed"]] = ~nat & pd & (banker_t[b2 * 11 + 10] == bd)
    q[:, K["banker_extra"]] = ~nat & ~bd
    for k in ("pay_short", "collect_after_pay"):
        q[:, K[k]] = win == PLAYER
    for k in ("vig_missing", "vig_short", "wrong_winner"):
        q[:, K[k]] = (win == BANKER) & ~dragon
    q[:, K["tie_missing"]] = win == TIE
    n = q.sum(axis=1)
    j = np.floor(share * n).astype(np.int64)
    return np.where(n > 0, np.argmax(q.cumsum(axis=1) > j[:, None], axis=1), -1)
