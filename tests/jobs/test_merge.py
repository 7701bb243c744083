"""The backfill's merge (auditor/jobs/merge.py) with a log that lies (issue 28): a partition's
round replay leaves a round's late events out of it (`round_exclusions`); merged, the table
passes on the merged database leave them out too, as one machine does."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers.lies import CONF, card_after_round_end, deliver, plain_sample, read, standing, write

from auditor.audit.run import audit
from auditor.ingest.run import ingest
from auditor.jobs.merge import merge_partition
from auditor.store import db, runs

DRAW_ROUND = ("MB-01", "MB-01-1128-01", 72)  # draw.banker_missed
pytestmark = pytest.mark.slow  # MB-01's night ingested and audited three times


def test_a_partitions_late_card_stays_out_of_the_merged_shoe(tmp_path):
    """A Banker card for round 72 logged 58 minutes after its round ended: the partition
    replays the round without it; the merged database's shoe checks count the shoe without it
    (no shoe.composition), and the findings are one machine's."""
    night = plain_sample(tmp_path / "logs")
    events = read(night["MB-01"])
    card_after_round_end(events, DRAW_ROUND[1], DRAW_ROUND[2], minutes=58)
    files = [write(night["MB-01"], events)]
    one, _ = deliver(tmp_path / "one.duckdb", files)

    part = db.connect(tmp_path / "part.duckdb")
    ingest(part, files, runs.start(part, "ingest", {}))
    audit(part, runs.start(part, "audit", {}), CONF, tables=False)
    assert part.execute("SELECT table_id, shoe, round, why FROM round_exclusions").fetchall() == [
        (*DRAW_ROUND, "after_end")]
    part.close()

    con = db.connect(tmp_path / "merged.duckdb")
    run = runs.start(con, "backfill", {})
    assert merge_partition(con, tmp_path / "part.duckdb", run, Counter())
    assert con.execute("SELECT table_id, shoe, round, why FROM round_exclusions").fetchall() == [
        (*DRAW_ROUND, "after_end")]
    audit(con, runs.start(con, "audit", {}), CONF)
    assert standing(con, "shoe.composition", "draw.banker_missed", "log.after_round_end") == [
        ("draw.banker_missed", "critical", *DRAW_ROUND),
        ("log.after_round_end", "major", *DRAW_ROUND)]
    assert standing(con) == standing(one)
