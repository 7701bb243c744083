"""Logs that lie (issue 28), planted when asked (`simulate(lying=True)`): a dealer or a
forger with write access to the logs tries to hide a deviation by editing them. Each lie goes
in the ground truth twice: the finding that names it, and the deviation it tried to hide,
which must still stand at its own severity (`severity` and `hidden_by` on that line).

- late_settle: a round short of vigorish (vig.wrong_amount); a file delivered with the night
  goes on with the table's stream after its close with the missing vigorish
  (log.after_round_end).
- late_card: a round whose Banker missed a draw (draw.banker_missed); a Banker card for it
  is logged about 58 minutes after it ended (log.after_round_end).
- late_delivery: the same deviation; the table's file leaves a seq free in the round (after
  its last card) and a file delivered after the night was audited brings, at that seq, a
  Banker card (log.late_delivery; the log.seq_gap of the night is withdrawn once filled).
- change_postdated: a change notified late (procedure.notice_late); its procedure_change
  line alone is stamped 15 minutes later, its seq left in place (log.time_reversed).
- notices_backdated: the same change's pit; a file delivered after the night was audited
  goes on with the pit's stream with its notices again, stamped 50 minutes before the change
  (notice.backdated for each, log.time_reversed for the pit's stream).
- stamped_ahead: a file delivered after the night was audited goes on with a table's stream:
  a table_close stamped a century ahead, a forger's way to show the logs past the gaming
  day's end and have rounds judged before they end (log.future_stamp; it hides nothing the
  batch audit judges).

The files delivered after the night's audit are the result's `later` ones, written as
`*.jsonl.later` so that `bacc-audit ingest FOLDER` leaves them out: ingest the folder, audit,
then ingest each `later` file by name and audit again; the ground truth is what the second
audit must stand on.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from auditor.rules.codes import REGISTRY
from auditor.simulate.generator import Deviation, Night, NoticeChange, TableSpec
from auditor.simulate.kinds import BANKING_KINDS, LIE_KINDS

# The lies planted at tables, in turn over the night's NJ banking tables (a table with
# vigorish for late_settle), and at the pit of change_postdated's change.
TABLE_LIES = ("late_settle", "late_card", "late_delivery", "change_postdated",
              "stamped_ahead")
PIT_LIES = ("notices_backdated",)
# The deviation each table lie hides (planted at the table's first round that shows it).
HIDES = {"late_settle": "vig_short", "late_card": "banker_missed",
         "late_delivery": "banker_missed"}
LATE_CARD = "5c"  # the card a forger adds: any card; it is not the round's, nor the shoe's
LATE_CARD_MINUTES = 58
POSTDATE = dt.timedelta(minutes=15)
BACKDATE_LEAD = dt.timedelta(minutes=50)
AHEAD = dt.timedelta(days=36_525)  # stamped_ahead: a century, past any day the night is read on
LATER_SUFFIX = ".later"  # not a suffix `ingest FOLDER` takes


def _dump(e: dict) -> str:
    return json.dumps(e, separators=(",", ":"))


@dataclass
class TableLies:
    """The lies planted at one table: the deviations they hide (given to the table's
    player to plant), the ground truth they add, and the files they make."""

    table: str
    kinds: tuple[str, ...]
    hidden: dict[str, Deviation] = field(default_factory=dict)  # lie -> deviation it hides
    truth: list[dict] = field(default_factory=list)
    with_night: list[tuple[str, list[str]]] = field(default_factory=list)  # (name, lines)
    later: list[tuple[str, list[str]]] = field(default_factory=list)

    def deviations(self, opens: str) -> list[Deviation]:
        """The deviations to plant first at the table, one per lie that hides one."""
        for kind in self.kinds:
            if kind in HIDES:
                code = BANKING_KINDS[HIDES[kind]]
                self.hidden[kind] = Deviation(self.table, HIDES[kind], opens, code,
                                              f"hidden by {kind}")
        return list(self.hidden.values())

    def _where(self, kind: str) -> tuple[str, int] | None:
        d = self.hidden.get(kind)
        if d is None or not d.planted:
            return None
        _, _, shoe, _, rnd = d.planted.split(" ")
        return shoe, int(rnd)

    def _line(self, kind: str, shoe: str | None = None, rnd: int | None = None,
              code: str | None = None, table: str | None = "") -> None:
        self.truth.append({"code": code or LIE_KINDS[kind],
                           "table": self.table if table == "" else table,
                           "shoe": shoe, "round": rnd, "kind": kind})

    def in_stream(self, lines: list[str]) -> list[str]:
        """The edits within the table's own file (before any other log-level deviation is
        drawn for it, which numbers the lines as they are then)."""
        events = [json.loads(x) for x in lines]
        for kind in self.kinds:
            if kind == "late_card" and (at := self._where(kind)):
                self._late_card(events, *at)
                self._line(kind, *at)
            elif kind == "late_delivery" and (at := self._where(kind)):
                if self._free_seq(events, *at):
                    self._line(kind, *at)
            elif kind == "change_postdated":
                changes = [e for e in events if e["type"] == "procedure_change"]
                if changes:
                    changes[-1]["ts"] = _stamp(_when(changes[-1]) + POSTDATE)
                    self._line(kind)
        return [_dump(e) for e in events]

    def after_night(self, lines: list[str], date: dt.date) -> None:
        """late_settle: the vigorish short in the hidden round, logged after the table's
        last event, in a file of its own delivered with the night; then stamped_ahead."""
        self._late_settle(lines, date)
        if "stamped_ahead" in self.kinds:
            self._stamped_ahead(lines, date)

    def _stamped_ahead(self, lines: list[str], date: dt.date) -> None:
        """A table_close after the table's last event (after late_settle's vigorish, if there
        is one), stamped AHEAD later, in a file delivered after the night. A close: what it
        closes (the night again, or a cut night's morning opening) the log already shows
        ending there, so the stamp is the lie's only finding."""
        events = [json.loads(x) for x in lines]
        last = max(events, key=lambda e: e["seq"])
        forged = {"v": 1, "ts": _stamp(_when(last) + AHEAD), "type": "table_close",
                  "table": self.table,
                  "seq": last["seq"] + 1 + sum(len(x) for _, x in self.with_night),
                  "origin": last.get("origin", "tms")}
        if "dealer" in last:
            forged["dealer"] = last["dealer"]
        self.later.append((f"{date:%Y-%m-%d}_{self.table}.ahead.jsonl{LATER_SUFFIX}",
                           [_dump(forged)]))
        self._line("stamped_ahead")

    def _late_settle(self, lines: list[str], date: dt.date) -> None:
        at = self._where("late_settle")
        if at is None:
            return
        events = [json.loads(x) for x in lines]
        shoe, rnd = at
        vig = next(e for e in events if e["type"] == "vig" and e.get("shoe") == shoe
                   and e.get("round") == rnd)
        last = max(events, key=lambda e: e["seq"])
        late = {"v": 1, "ts": _stamp(_when(last) + dt.timedelta(minutes=20)), "type": "vig",
                "table": self.table, "seq": last["seq"] + 1, "shoe": shoe, "round": rnd,
                "seat": vig["seat"], "amount": "1.00", "mode": "collect", "origin": "tms"}
        self.with_night.append((f"{date:%Y-%m-%d}_{self.table}.late.jsonl", [_dump(late)]))
        self._line("late_settle", shoe, rnd)

    def _late_card(self, events: list[dict], shoe: str, rnd: int) -> None:
        end = next(i for i, e in enumerate(events) if e["type"] == "round_end"
                   and e.get("shoe") == shoe and e.get("round") == rnd)
        due = _when(events[end]) + dt.timedelta(minutes=LATE_CARD_MINUTES)
        at = next((i for i, e in enumerate(events) if i > end and e["type"] == "round_start"
                   and _when(e) >= due), len(events) - 1)
        t = _when(events[at - 1]) + (_when(events[at]) - _when(events[at - 1])) / 2
        card = {"v": 1, "ts": _stamp(t), "type": "card", "table": self.table, "seq": 0,
                "shoe": shoe, "round": rnd, "to": "banker", "card": LATE_CARD,
                "origin": "shoe"}
        _insert(events, at, card)

    def _free_seq(self, events: list[dict], shoe: str, rnd: int) -> bool:
        """Leave the seq after the round's last card free, and deliver a Banker card at it
        later."""
        cards = [i for i, e in enumerate(events) if e["type"] == "card"
                 and e.get("shoe") == shoe and e.get("round") == rnd]
        if not cards:
            return False
        last = events[cards[-1]]
        forged = {"v": 1, "ts": _stamp(_when(last) + dt.timedelta(seconds=0.6)),
                  "type": "card", "table": self.table, "seq": last["seq"] + 1, "shoe": shoe,
                  "round": rnd, "to": "banker", "card": LATE_CARD, "origin": "shoe"}
        for e in events[cards[-1] + 1:]:
            e["seq"] += 1
        day = _when(events[0]).date()
        self.later.append((f"{day:%Y-%m-%d}_{self.table}.late.jsonl{LATER_SUFFIX}",
                           [_dump(forged)]))
        return True


def _write(path: Path, lines: Sequence[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _when(e: dict) -> dt.datetime:
    return dt.datetime.fromisoformat(e["ts"])


def _stamp(t: dt.datetime) -> str:
    return t.isoformat(timespec="milliseconds")


def _insert(events: list[dict], at: int, new: dict) -> None:
    new["seq"] = events[at]["seq"]
    for e in events[at:]:
        e["seq"] += 1
    events.insert(at, new)


@dataclass
class Plan:
    """Where the night's lies go: per table, and the pit change they concern."""

    tables: dict[str, TableLies] = field(default_factory=dict)
    change: NoticeChange | None = None  # notified late; postdated at one table, its pit's
    # notices back-dated in a later file
    pit_truth: list[dict] = field(default_factory=list)  # notices_backdated's lines

    def files(self, out: Path, night: Night, made: bool) -> tuple[list[Path], list[Path]]:
        """Write the lies' files into `out`: those delivered with the night, and those
        delivered after its audit (`made`: a table made the change whose notices are
        back-dated; else they are not written)."""
        now: list[Path] = []
        later: list[Path] = []
        for t in self.tables.values():
            for name, lines in t.with_night:
                now.append(_write(out / name, lines))
            for name, lines in t.later:
                later.append(_write(out / name, lines))
        if self.change is not None and made:
            name, lines = self.backdated(night)
            later.append(_write(out / name, lines))
        return now, sorted(later)

    def truth(self, deviations: list[dict]) -> list[dict]:
        """The lies' own lines, and `severity` / `hidden_by` on the lines of what they hide."""
        out = [d for t in self.tables.values() for d in t.truth]
        for t in self.tables.values():
            for kind, dev in t.hidden.items():
                if not dev.planted or not any(x["kind"] == kind for x in t.truth):
                    continue
                _, _, shoe, _, rnd = dev.planted.split(" ")
                _tag(deviations, dev.code, t.table, shoe, int(rnd), kind)
        postdated = next((t for t in self.tables.values() if "change_postdated" in t.kinds
                          and any(x["kind"] == "change_postdated" for x in t.truth)), None)
        if postdated is not None:
            _tag(deviations, "procedure.notice_late", postdated.table, None, None,
                 "change_postdated")
        if self.change is not None and self.pit_truth:
            for table in self.change.tables:
                _tag(deviations, "procedure.notice_late", table, None, None,
                     "notices_backdated")
        return out + self.pit_truth

    def backdated(self, night: Night) -> tuple[str, list[str]]:
        """notices_backdated: the later file continuing the change's pit stream (its
        notices again, stamped BACKDATE_LEAD before the change); its ground truth is kept
        for `truth`."""
        c = self.change
        assert c is not None
        tz = dt.timezone(night.utc_offset)
        h, m = map(int, c.effective.split(":"))
        day = night.date + dt.timedelta(days=1 if h < 12 else 0)
        eff = dt.datetime(day.year, day.month, day.day, h, m, tzinfo=tz)
        top = sum(len(x.recipients) for x in night.changes if x.pit == c.pit)
        lines = [_dump({"v": 1, "ts": _stamp(eff - BACKDATE_LEAD), "type": "procedure_notice",
                        "pit": c.pit, "seq": top + k + 1, "procedure": c.procedure,
                        "effective": eff.isoformat(), "recipient": who, "written": True,
                        "tables": list(c.tables), "origin": "pit"})
                 for k, who in enumerate(c.recipients)]
        truth = [{"code": "notice.backdated", "table": None, "shoe": None, "round": None,
                  "kind": "notices_backdated"} for _ in c.recipients]
        truth.append({"code": "log.time_reversed", "table": None, "shoe": None, "round": None,
                      "kind": "notices_backdated"})
        self.pit_truth = truth
        name = f"{night.date:%Y-%m-%d}_pit-{c.pit}.backdated.jsonl{LATER_SUFFIX}"
        return name, lines


def _tag(deviations: list[dict], code: str, table: str, shoe: str | None, rnd: int | None,
         kind: str) -> None:
    for d in deviations:
        if (d["code"], d["table"], d["shoe"], d["round"]) == (code, table, shoe, rnd):
            d["severity"] = REGISTRY[code].severity
            d.setdefault("hidden_by", kind)
            return


def plan(night: Night) -> Plan:
    """Choose where the lies go: the table lies over the NJ banking tables in turn (a table
    with vigorish first, for late_settle), change_postdated at a table that makes its pit's
    half-time change, which is made a late-notified one if it is not badly notified yet,
    stamped_ahead at a table without a lie if there is one."""
    banking = [s for s in night.tables if s.game in ("mini_baccarat", "punto_banco")
               and s.jurisdiction == "NJ"]
    out = Plan()
    if not banking:
        return out
    with_vig = [s for s in banking if s.variant == "standard"]
    order = with_vig[:1] + [s for s in banking if s not in with_vig[:1]]
    lone = {t for c in night.changes if c.kind == "lone_change" for t in c.tables}
    kinds: dict[str, list[str]] = {}
    for i, kind in enumerate(TABLE_LIES[:3]):
        kinds.setdefault(order[i % len(order)].table, []).append(kind)
    change = next((c for c in night.changes if c.kind != "lone_change"
                   and any(t not in lone for t in c.tables)), None)
    if change is not None:
        if not change.kind:
            change.kind, change.lead_minutes = "notice_late", 20
        table = _postdated_table(change, lone, kinds, night.tables)
        kinds.setdefault(table, []).append("change_postdated")
        out.change = change
    free = [s.table for s in order if s.table not in kinds]
    kinds.setdefault((free or [order[-1].table])[0], []).append("stamped_ahead")
    out.tables = {t: TableLies(t, tuple(k)) for t, k in kinds.items()}
    return out


def _postdated_table(change: NoticeChange, lone: set[str], kinds: dict[str, list[str]],
                     specs: Sequence[TableSpec]) -> str:
    """A table of the change that changes with the pit, one without a lie if there is one."""
    order = [s.table for s in specs if s.table in change.tables and s.table not in lone]
    free = [t for t in order if t not in kinds]
    return (free or order)[0]
