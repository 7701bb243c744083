"""The chemin de fer rounds a replay looks back on (auditor.audit.run): per table, its rounds
in log order and the facts of those replayed or read back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa

from auditor.audit.chemin_order import CheminTails, ShoeKey, read_orders, walks_past_floor
from auditor.audit.event_rows import card_ok, changed_card, chemin_event
from auditor.audit.load import ORDERED_JOIN
from auditor.audit.rounds import CHEMIN, EVENT_SELECT, ROUND_TYPES
from auditor.replay.chemin import round_facts
from auditor.replay.chemin_model import History, RoundFacts
from auditor.replay.model import TableContext
from auditor.rules.pack import PackCache, RulePack, RulePackError

# Rounds already audited that a chemin de fer round may need to look back on (banco suivi
# skips stand offs): how many are read before each run of rounds to replay.
CHEMIN_LOOKBACK = 12
# Chemin de fer rounds' facts kept between calls (Known.chemin_facts): a night of 50 tables
# is about 30,000 rounds; past this many they are forgotten and read back as needed.
FACTS_KEPT = 100_000

RoundKey = tuple[str, str, int]


@dataclass
class CheminHistory:
    """Per chemin de fer table, its rounds in log order and the facts of those replayed or read
    so far, so each round gets the History it needs (the previous round, the last one that
    was not a stand off, the shoe's cutting card round).

    Loaded before the replay streams: the rounds of the tables with chemin de fer rounds to
    replay, and the facts of up to CHEMIN_LOOKBACK rounds audited before, read back from their
    events unless `facts` (Known.chemin_facts: an earlier call's, such as `watch`'s previous
    poll) holds them. A round whose predecessors are beyond those gets an unknown history,
    and what depends on it (banco suivi, the bank's holder) is not judged rather than
    guessed.
    """

    order: dict[str, list[RoundKey]] = field(default_factory=dict)
    index: dict[RoundKey, int] = field(default_factory=dict)
    facts: dict[RoundKey, RoundFacts] = field(default_factory=dict)
    cut_cards: dict[tuple[str, str], int] = field(default_factory=dict)

    @classmethod
    def load(
        cls,
        con: duckdb.DuckDBPyConnection,
        packs: PackCache,
        facts: dict[RoundKey, RoundFacts] | None = None,
        tails: CheminTails | None = None,
        chemin: set[RoundKey] | None = None,
    ) -> CheminHistory:
        """`tails`: the orders `watch` keeps (auditor.audit.chemin_order); else read.
        `chemin`: the chemin de fer rounds to replay, when the caller knows them (else those
        of temp table `todo`)."""
        if facts is not None and len(facts) > FACTS_KEPT:
            facts.clear()  # read back again as needed
        h = cls(facts=facts if facts is not None else {})
        todo = chemin if chemin is not None else {
            (t, s, r)
            for t, s, r in con.execute(
                "SELECT table_id, shoe, round FROM todo WHERE game = ?", [CHEMIN]
            ).fetchall()
        }
        if not todo:
            return h
        for k in todo:  # judged again: as the replay finds it, not as it was
            h.facts.pop(k, None)
        tables = sorted({t for t, _, _ in todo})
        from_floor: set[str] = set()  # tables placed from a floor on (`tails`)
        if tails is None:
            rounds, cuts = read_orders(con, tables)
            h._place({t: [k for k, _ in r] for t, r in rounds.items()}, cuts)
        else:
            orders, cuts, from_floor = tails.orders(con, tables, todo)
            h._place(orders, cuts)
        need = h._need(todo)
        if tails is not None and (
            past := walks_past_floor(h.order, h.facts, todo, need, from_floor)
        ):
            # a round may look back under what was kept: all of them, then
            h._place(*tails.read(con, sorted(past)))
            need = h._need(todo)
        if need:
            h._read_back(con, need, packs)
        return h

    def _place(self, orders: Mapping[str, list[RoundKey]], cuts: Mapping[ShoeKey, Any]) -> None:
        """Each table's rounds in log order (replacing what was placed of it)."""
        for t, keys in orders.items():
            for k in self.order.get(t, ()):
                self.index.pop(k, None)
            self.order[t] = keys
            self.index.update((k, i) for i, k in enumerate(keys))
        self.cut_cards.update(cuts)

    def _need(self, todo: set[RoundKey]) -> set[RoundKey]:
        """The rounds audited before whose facts the rounds to judge may need."""
        need: set[RoundKey] = set()
        for keys in self.order.values():
            for i, k in enumerate(keys):
                if k in todo:
                    need.update(b for b in keys[max(0, i - CHEMIN_LOOKBACK) : i]
                                if b not in todo and b not in self.facts)
        return need

    def _read_back(
        self, con: duckdb.DuckDBPyConnection, need: set[RoundKey], packs: PackCache
    ) -> None:
        """Facts of rounds audited before, from their events and their table's context."""
        keys = sorted(need)
        con.register(
            "chemin_lookback",
            pa.table(
                {
                    "table_id": [k[0] for k in keys],
                    "shoe": [k[1] for k in keys],
                    "round": pa.array([k[2] for k in keys], pa.int64()),
                }
            ),
        )
        try:
            cur = con.execute(
                f"""
                SELECT e.table_id, t.pit, t.game, t.jurisdiction, t.variant, t.seats,
                       {EVENT_SELECT}
                FROM chemin_lookback k
                JOIN events e ON e.table_id = k.table_id AND e.shoe = k.shoe
                     AND e.round = k.round AND e.type IN ({ROUND_TYPES})
                JOIN sources s ON s.id = e.source_id
                {ORDERED_JOIN}
                ASOF LEFT JOIN (SELECT table_id, seq, pit, game, jurisdiction, variant, seats
                                FROM events WHERE type = 'table_open') t
                     ON t.table_id = e.table_id AND e.seq > t.seq
                ANTI JOIN round_exclusions x ON x.table_id = e.table_id AND x.seq = e.seq
                ORDER BY e.table_id, e.seq
                """
            )
            names = [d[0] for d in cur.description]
            rows = cur.fetchall()
        finally:
            con.unregister("chemin_lookback")
        cols = {name: [row[i] for row in rows] for i, name in enumerate(names)}
        for i, card in enumerate(cols["card"]):
            if not card_ok(cols["type"][i], card):
                raise changed_card(cols["table_id"][i], cols["seq"][i], cols["source"][i], card)
        by_round: dict[RoundKey, list[int]] = {}
        for i in range(len(cols["seq"])):
            by_round.setdefault(
                (cols["table_id"][i], cols["shoe"][i], cols["round"][i]), []
            ).append(i)
        for k, idx in by_round.items():
            table, pit, game, jurisdiction, variant, seats = (
                cols[c][idx[0]]
                for c in ("table_id", "pit", "game", "jurisdiction", "variant", "seats")
            )
            pack = packs.lookup(jurisdiction, game) if game == CHEMIN else None
            if not isinstance(pack, RulePack):
                continue
            try:
                ctx = TableContext(
                    table, pit, game, jurisdiction, variant, None, seats or 1, (), pack
                )
                self.facts[k] = round_facts(ctx, [chemin_event(cols, i) for i in idx])
            except (RulePackError, FileNotFoundError, KeyError):
                continue

    def before(self, key: RoundKey) -> History:
        """The History of round `key`: walks back over the table's rounds in log order."""
        cut = self.cut_cards.get((key[0], key[1]))
        i = self.index.get(key)
        if i is None or i == 0:
            return History(cut_card_round=cut)
        keys = self.order[key[0]]
        previous = self.facts.get(keys[i - 1])
        counted = None
        for j in range(i - 1, -1, -1):
            facts = self.facts.get(keys[j])
            if facts is None:
                break
            if facts.counts_as_previous_wager:
                counted = facts
                break
        return History(previous, counted, cut)

    def record(self, key: RoundKey, facts: RoundFacts) -> None:
        self.facts[key] = facts

    def forget(self, key: RoundKey) -> None:
        """A round judged again without being replayed: its facts are read back if needed."""
        self.facts.pop(key, None)
