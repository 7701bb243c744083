"""Build small event logs (event log v1) for the table, pit and shoe tests, write them as JSONL
and run them through the real path: `Log` writes the events, `TablePassDb` ingests them into a
fresh audit database and runs the table pass.

Times are given as local "HH:MM[:SS]" on the night of 28 November 2026 (UTC-05:00); hours
before noon are the next morning, as on a casino floor.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb

from auditor.audit.table_pass import table_findings
from auditor.config import PropertyConfig
from auditor.ingest.run import ingest
from auditor.store import runs

from .db import new_database

TZ = dt.timezone(dt.timedelta(hours=-5))
NIGHT = dt.date(2026, 11, 28)
RANKS = "A23456789TJQK"
SUITS = "cdhs"
DECK = [r + s for s in SUITS for r in RANKS]


def at(hhmm: str) -> dt.datetime:
    """Local time on the night: "23:10", "02:40:30" (before noon: the next morning)."""
    parts = [int(p) for p in hhmm.split(":")]
    h, m, s = [*parts, 0, 0][:3]
    day = NIGHT + dt.timedelta(days=1 if h < 12 else 0)
    return dt.datetime(day.year, day.month, day.day, h, m, s, tzinfo=TZ)


def ts(when: str | dt.datetime) -> str:
    t = at(when) if isinstance(when, str) else when
    return t.isoformat()


class Log:
    """Events per stream (table or pit), each stream numbered from seq 1."""

    def __init__(self) -> None:
        self.streams: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.clock: dict[str, dt.datetime] = {}

    def emit(self, stream: str, when: str | dt.datetime, type_: str, **fields: Any) -> dict:
        events = self.streams[stream]
        key = {"pit": stream[4:]} if stream.startswith("pit:") else {"table": stream[6:]}
        event = {"v": 1, "ts": ts(when), "type": type_, **key, "seq": len(events) + 1}
        event.update({k: v for k, v in fields.items() if v is not None})
        events.append(event)
        self.clock[stream] = at(when) if isinstance(when, str) else when
        return event

    # --- table events ---
    def open(self, table: str, pit: str, when: str, *, game: str = "mini_baccarat",
             jurisdiction: str = "NJ", variant: str = "standard", procedure: int | None = 1,
             seats: int = 7, side_bets: Sequence[str] = ()) -> dict:
        return self.emit(f"table:{table}", when, "table_open", pit=pit, game=game,
                         jurisdiction=jurisdiction, variant=variant, procedure=procedure,
                         seats=seats, side_bets=list(side_bets))

    def change(self, table: str, when: str, procedure: int) -> dict:
        return self.emit(f"table:{table}", when, "procedure_change", procedure=procedure)

    def close(self, table: str, when: str) -> dict:
        return self.emit(f"table:{table}", when, "table_close")

    def notice(self, pit: str, when: str, procedure: int, effective: str,
               recipients: Iterable[str] = ("division", "surveillance"), *,
               written: bool = True, tables: Sequence[str] | None = None) -> None:
        for r in recipients:
            self.emit(f"pit:{pit}", when, "procedure_notice", procedure=procedure,
                      effective=ts(effective), recipient=r, written=written,
                      tables=None if tables is None else list(tables))

    # --- shoes ---
    def shoe_start(self, table: str, when: str, shoe: str, *, decks: int = 8,
                   shuffle: str = "manual", batch: str = "red") -> dict:
        return self.emit(f"table:{table}", when, "shoe_start", shoe=shoe, decks=decks,
                         shuffle=shuffle, batch=batch)

    def burn(self, table: str, shoe: str, cards: Sequence[str]) -> dict:
        return self.emit(f"table:{table}", self._next(table), "burn", shoe=shoe,
                         cards=list(cards))

    def face_up(self, table: str, shoe: str, card: str, burned: Sequence[str]) -> dict:
        return self.emit(f"table:{table}", self._next(table), "face_up_in_shoe", shoe=shoe,
                         card=card, burned=list(burned))

    def cut_card(self, table: str, shoe: str, rnd: int) -> dict:
        return self.emit(f"table:{table}", self._next(table), "cut_card", shoe=shoe, round=rnd)

    def shoe_end(self, table: str, shoe: str, remaining: int | None = None) -> dict:
        return self.emit(f"table:{table}", self._next(table), "shoe_end", shoe=shoe,
                         remaining=remaining)

    def _next(self, table: str, seconds: int = 1) -> dt.datetime:
        return self.clock[f"table:{table}"] + dt.timedelta(seconds=seconds)

    # --- rounds ---
    def round(self, table: str, shoe: str, rnd: int, cards: Sequence[tuple[str, str]],
              moves: Sequence[tuple[str, int]] = (), *, void: bool = False,
              when: str | None = None,
              after_cards: Sequence[tuple[str, dict[str, Any]]] = ()) -> None:
        """A round: `cards` as (to, card) in shoe order, then `moves` as ("pay" | "vig", seat)
        in order (wagers are Banker wagers of 100 at every paid seat; pays 100, vig 5)."""
        stream = f"table:{table}"
        t = at(when) if when else self._next(table, 20)

        def nxt() -> dt.datetime:
            nonlocal t
            t += dt.timedelta(seconds=1)
            return t

        self.emit(stream, t, "round_start", shoe=shoe, round=rnd)
        for seat in sorted({s for _, s in moves}):
            self.emit(stream, nxt(), "wager", shoe=shoe, round=rnd, seat=seat, bet="banker",
                      amount=100)
        self.emit(stream, nxt(), "no_more_bets", shoe=shoe, round=rnd)
        for to, card in cards:
            self.emit(stream, nxt(), "card", shoe=shoe, round=rnd, to=to, card=card)
        for type_, fields in after_cards:
            self.emit(stream, nxt(), type_, shoe=shoe, round=rnd, **fields)
        if void:
            self.emit(stream, nxt(), "void", shoe=shoe, round=rnd, reason="insufficient_cards")
        for kind, seat in moves:
            if kind == "pay":
                self.emit(stream, nxt(), "pay", shoe=shoe, round=rnd, seat=seat, bet="banker",
                          amount=100)
            else:
                self.emit(stream, nxt(), "vig", shoe=shoe, round=rnd, seat=seat, amount=5,
                          mode="collect")
        self.emit(stream, nxt(), "round_end", shoe=shoe, round=rnd)

    # --- files ---
    def lines(self, streams: Iterable[str] | None = None) -> list[str]:
        chosen = sorted(self.streams) if streams is None else list(streams)
        return [json.dumps(e, separators=(",", ":")) for s in chosen for e in self.streams[s]]

    def write(self, path: Path, streams: Iterable[str] | None = None) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(self.lines(streams)) + "\n")
        return path


def deal_rounds(deck: Sequence[str], start: int, n: int) -> list[list[tuple[str, str]]]:
    """`n` four-card rounds (Player, Banker, Player, Banker) from deck[start:]."""
    hands = ("player", "banker", "player", "banker")
    return [
        [(hands[j], deck[start + 4 * i + j]) for j in range(4)] for i in range(n)
    ]


class TablePassDb:
    """A fresh audit database: ingest logs, run the table pass, read the findings."""

    def __init__(self, tmp_path: Path, config: PropertyConfig | None = None) -> None:
        self.dir = tmp_path
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.con: duckdb.DuckDBPyConnection = new_database(tmp_path / "audit.duckdb")
        self.config = config or PropertyConfig()
        self.files = 0

    def ingest(self, log: Log, streams: Iterable[str] | None = None) -> None:
        self.files += 1
        path = log.write(self.dir / "logs" / f"log{self.files}.jsonl", streams)
        result = ingest(self.con, [path], runs.start(self.con, "ingest", {}))
        bad = [p for f in result.files for p in f.problems]
        assert not bad, bad

    def run(self, **kw: Any) -> dict:
        return table_findings(self.con, runs.start(self.con, "audit", {}), self.config, **kw)

    def findings(self, code_prefix: str = "") -> list[dict[str, Any]]:
        cur = self.con.execute(
            "SELECT * FROM current_findings WHERE code LIKE ? ORDER BY ts, table_id, code",
            [code_prefix + "%"],
        )
        names = [d[0] for d in cur.description]
        out = []
        for row in cur.fetchall():
            r = dict(zip(names, row, strict=True))
            for k in ("expected", "observed", "evidence"):
                r[k] = json.loads(r[k]) if r[k] is not None else None
            out.append(r)
        return out

    def codes(self, code_prefix: str = "") -> list[tuple[str, str | None]]:
        return [(f["code"], f["table_id"]) for f in self.findings(code_prefix)]
