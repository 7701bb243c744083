"""Issue 28, as a forger edits a simulated night: the round with a shoe's card too many
relabelled to a shoe id that looks like the real one, the real shoe's `remaining` raised by
that round's cards. Ingest and audit of the edited night still raise the critical
shoe.composition, plus shoe.not_started naming the lie; nothing is downgraded to shoe.burn.
The same edit with the table's previous shoe id: shoe.reopened. The issue's own edit (the id
with an invisible U+200B) is refused line by line by the id alphabet."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from auditor.audit.run import audit
from auditor.config import PropertyConfig
from auditor.ingest.run import ingest
from auditor.simulate.planted import simulate
from auditor.store import db, runs

# A night whose shoe MB-01-1201-02 holds a card too many (planted extra_card).
SEED, TABLES, HOURS, RATE = 6, 2, 1, 0.1
TABLE, SHOE = "MB-01", "MB-01-1201-02"

pytestmark = pytest.mark.slow  # each test simulates, ingests and audits a night twice


def _audited(files: list[Path], path: Path) -> duckdb.DuckDBPyConnection:
    con = db.connect(path)
    ingest(con, files, runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), PropertyConfig())
    return con


def _standing(con: duckdb.DuckDBPyConnection) -> dict[str, dict]:
    cur = con.execute("SELECT * FROM current_findings")
    names = [d[0] for d in cur.description]
    return {r[0]: dict(zip(names, r[1:], strict=True))
            for r in ((row[names.index("fingerprint")], *row) for row in cur.fetchall())}


def _night(tmp_path: Path) -> tuple[list[Path], duckdb.DuckDBPyConnection, dict]:
    r = simulate(tmp_path / "night", TABLES, HOURS, seed=SEED, deviation_rate=RATE,
                 games=("mini_baccarat",))
    assert {"code": "shoe.composition", "table": TABLE, "shoe": SHOE, "round": None,
            "kind": "extra_card"} in r.deviations
    con = _audited(list(r.files), tmp_path / "honest.duckdb")
    [excess] = [f for f in _standing(con).values() if f["code"] == "shoe.composition"
                and f["shoe"] == SHOE]
    return list(r.files), con, excess


def _relabel(files: list[Path], rnd: int, label: str) -> int:
    """The forger's edit of TABLE's file, in place: round `rnd` of SHOE logged in shoe
    `label` (its cutting card left alone), SHOE's remaining raised by the round's cards.
    Returns the cards moved."""
    [path] = [p for p in files if p.name.endswith(f"_{TABLE}.jsonl")]
    events = [json.loads(line) for line in path.read_text().splitlines()]
    moved = 0
    for e in events:
        if e.get("shoe") == SHOE and e.get("round") == rnd and e["type"] != "cut_card":
            e["shoe"] = label
            moved += e["type"] == "card"
    for e in events:
        if e["type"] == "shoe_end" and e["shoe"] == SHOE:
            e["remaining"] += moved
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events))
    return moved


def _excess_round(con: duckdb.DuckDBPyConnection, excess: dict) -> int:
    [(rnd,)] = con.execute(
        "SELECT round FROM events WHERE table_id = ? AND seq = ?", [TABLE, excess["seq"]]
    ).fetchall()
    return rnd


def test_a_round_relabelled_to_a_phantom_shoe_still_raises_the_composition(tmp_path):
    files, honest, excess = _night(tmp_path)
    assert excess["severity"] == "critical"
    # its evidence names the line of the card past the decks
    assert [excess["source"]] == [f"{p}:{n}" for p, n in honest.execute(
        "SELECT s.path, e.line_no FROM events e JOIN sources s ON s.id = e.source_id "
        "WHERE e.table_id = ? AND e.seq = ?", [TABLE, excess["seq"]]).fetchall()]
    rnd = _excess_round(honest, excess)
    before = _standing(honest)
    honest.close()
    phantom = SHOE[:-1] + "l"  # MB-01-1201-0l: one character off
    moved = _relabel(files, rnd, phantom)
    assert moved >= 4
    con = _audited(files, tmp_path / "lied.duckdb")
    after = _standing(con)
    # The composition finding stands, the very finding, at its severity.
    assert after[excess["fingerprint"]]["severity"] == "critical"
    # The new finding names the lie: the phantom shoe, the round, the shoe it counts in.
    [lie] = [f for f in after.values() if f["code"] == "shoe.not_started"]
    assert (lie["severity"], lie["table_id"], lie["shoe"], lie["round"]) == (
        "major", TABLE, phantom, rnd)
    observed = json.loads(lie["observed"])
    assert observed["counted_in"] == SHOE and observed["cards"] == moved
    assert f"{phantom} is not {SHOE}: character 13 is 'l' (U+006C)" in lie["message"]
    # The raised remaining is itself a composition finding of the real shoe.
    [total] = [f for f in after.values() if f["code"] == "shoe.composition"
               and f["shoe"] == SHOE and f["fingerprint"] != excess["fingerprint"]]
    assert f"{moved} cards more than it holds" in total["message"]
    # Nothing downgraded: no shoe.burn, and every other finding of the night as it was
    # (the relabelled round's own findings, if any, under its new shoe id).
    assert not any(f["code"] == "shoe.burn" for f in after.values())
    gone = {fp for fp in before if fp not in after and f"|{SHOE}|{rnd}|" not in fp}
    assert gone == set()
    new = {f["code"] for fp, f in after.items() if fp not in before}
    assert new <= {"shoe.not_started", "shoe.composition"} | {
        before[fp]["code"] for fp in before if f"|{SHOE}|{rnd}|" in fp}
    con.close()


def test_a_round_relabelled_to_the_tables_previous_shoe_is_a_return_to_it(tmp_path):
    files, honest, excess = _night(tmp_path)
    rnd = _excess_round(honest, excess)
    honest.close()
    previous = SHOE[:-1] + "1"  # MB-01-1201-01, which ended before SHOE began
    moved = _relabel(files, rnd, previous)
    con = _audited(files, tmp_path / "lied.duckdb")
    after = _standing(con)
    assert after[excess["fingerprint"]]["severity"] == "critical"
    [lie] = [f for f in after.values() if f["code"] == "shoe.reopened"]
    assert (lie["severity"], lie["shoe"], lie["round"]) == ("major", previous, rnd)
    assert json.loads(lie["observed"])["counted_in"] == SHOE
    assert f"went back to shoe {previous}" in lie["message"]
    assert json.loads(lie["observed"])["cards"] == moved
    # Placed in the shoe being dealt before lateness is judged: not late events of the
    # previous shoe's own round `rnd`, which keeps what it had.
    assert not any(f["code"] in ("shoe.burn", "shoe.not_started", "log.after_round_end")
                   for f in after.values())
    assert con.execute("SELECT count(*) FROM round_exclusions").fetchone() == (0,)
    con.close()


def test_the_issues_edit_with_an_invisible_character_is_refused_line_by_line(tmp_path):
    """The issue's forger: round 8 relabelled to SHOE followed by U+200B. Every relabelled
    line is quarantined as log.malformed whose message shows the character as U+200B, and the
    hole they leave in the table's stream is a log.seq_gap. The round is not replayed from
    quarantined lines, but the cards they show still count in the shoe the table was dealing
    (docs/event-log.md, "Quarantined card lines"): the critical shoe.composition of the real
    shoe stands, the very finding of the unedited night, its card too many cited at its
    quarantined line."""
    files, honest, excess = _night(tmp_path)
    rnd = _excess_round(honest, excess)
    honest.close()
    moved = _relabel(files, rnd, SHOE + "\u200b")
    con = _audited(files, tmp_path / "lied.duckdb")
    [(first, last, lines)] = con.execute(
        "SELECT min(line_no), max(line_no), count(*) FROM quarantine").fetchall()
    after = _standing(con)
    malformed = sorted((f["seq"], f["severity"], f["table_id"], f["round"])
                       for f in after.values() if f["code"] == "log.malformed")
    assert lines == len(malformed) == last - first + 1 > moved
    assert malformed == [(seq, "major", TABLE, rnd) for seq in range(first, last + 1)]
    assert all(
        f'shoe has U+200B at character 14, after "{SHOE}"' in f["message"]
        for f in after.values() if f["code"] == "log.malformed")
    [gap] = [f for f in after.values()  # the night may have a planted gap of its own
             if f["code"] == "log.seq_gap" and f["seq"] == last + 1]
    assert gap["table_id"] == TABLE
    assert f"seq {first - 1} is followed by seq {last + 1}; {lines} events are missing" in (
        gap["message"])
    # No event carries the look-alike id: nothing was counted in a phantom shoe.
    assert con.execute("SELECT count(*) FROM events WHERE shoe LIKE ?",
                       [SHOE + "_%"]).fetchone() == (0,)
    assert not any(f["code"] in ("shoe.burn", "shoe.not_started") for f in after.values())
    # The deviation the edit hid stands at its severity: the same finding, the same card too
    # many, now cited at the quarantined line that shows it.
    stood = after[excess["fingerprint"]]
    assert (stood["code"], stood["severity"], stood["table_id"], stood["shoe"]) == (
        "shoe.composition", "critical", TABLE, SHOE)
    assert json.loads(stood["observed"]) == json.loads(excess["observed"])
    assert stood["seq"] == excess["seq"] and first <= stood["seq"] <= last
    # Counted once: the shoe's only composition finding (its count in all is not judged
    # over the hole the quarantined lines leave).
    assert [f["code"] for f in after.values() if f["shoe"] == SHOE
            and f["code"] == "shoe.composition"] == ["shoe.composition"]
    con.close()
