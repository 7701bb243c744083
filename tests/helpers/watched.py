"""A watched database against a batch one (tests/jobs/test_watch.py, tests/cli/test_live_feed.py):
the batch `ingest` + `audit` of the same files, and the standing findings of each as they read,
whatever run or folder recorded them."""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable
from pathlib import Path

import duckdb

from auditor import config
from auditor.audit.run import AuditResult, audit
from auditor.ingest.run import ingest
from auditor.jobs.watch import Watch, WatchOptions
from auditor.simulate.feed import Line
from auditor.store import db, runs


def batch(files: list[Path], path: Path, conf: config.PropertyConfig,
          later: list[Path] | None = None,
          audits: list[AuditResult] | None = None) -> duckdb.DuckDBPyConnection:
    """`ingest` + `audit` of the files; then of the `later` ones (a lying night's, delivered
    after the night's audit), if any. Each audit's result is appended to `audits`."""
    con = db.connect(path)
    if later:  # under the names the spool gives them (tests/jobs/test_watch.py)
        folder = path.parent / f"{path.stem}-later"
        folder.mkdir(exist_ok=True)
        copies = []
        for f in later:
            copies.append(folder / f.name.removesuffix(".later"))
            copies[-1].write_bytes(f.read_bytes())
        later = copies
    for delivery in (files, later or []):
        if delivery:
            ingest(con, delivery, runs.start(con, "ingest", {}))
            result = audit(con, runs.start(con, "audit", {}), conf)
            if audits is not None:
                audits.append(result)
    return con


def findings_of(con: duckdb.DuckDBPyConnection) -> dict[str, tuple]:
    """Standing findings by fingerprint: what they say, not when or by which run."""
    return {
        fp: (code, severity, rule, table, shoe, rnd, seq, message, json.loads(expected),
             json.loads(observed), json.loads(evidence))
        for fp, code, severity, rule, table, shoe, rnd, seq, message, expected, observed, evidence
        in con.execute(
            "SELECT fingerprint, code, severity, rule, table_id, shoe, round, seq, message, "
            "expected, observed, evidence FROM current_findings"
        ).fetchall()
    }


def sources_free(found: dict[str, tuple]) -> dict[str, tuple]:
    """The same, with file paths cut to their names (the spool is another folder) and
    without the ids each database gives its sources."""
    def cut(v):
        if isinstance(v, str) and "/" in v:
            return v.rsplit("/", 1)[-1]
        if isinstance(v, dict):  # a source's id is the database's own numbering
            return {k: cut(x) for k, x in v.items() if k != "source_id"}
        if isinstance(v, list):
            return [cut(x) for x in v]
        return v
    # log.altered names its file in its fingerprint.
    return {re.sub(r"\|/[^|]*/([^/|]*)", r"|\1", fp): tuple(cut(x) for x in row)
            for fp, row in found.items()}


def pauses_cut(lines: list[Line], most: float) -> list[Line]:
    """The same lines in the same order, each pause between two longer than `most` seconds
    cut to `most`: a simulated night whose table opens again the next morning (7-8 hours of
    log time, 11-13 s at the every-code test's speed) is not waited through, while the
    lines on either side keep their pace. The watch's findings do not depend on the pace
    (a loaded machine cuts the night into polls in other places), only its polls do."""
    out: list[Line] = []
    cut, last = 0.0, lines[0].at if lines else 0.0
    for line in lines:
        cut += max(0.0, line.at - last - most)
        last = line.at
        out.append(Line(line.at - cut, line.name, line.data, line.round_end))
    return out


def watched_in_parts(
    con: duckdb.DuckDBPyConnection, spool: Path, lines: list[Line], later: list[Path],
    parts: int, again_at: int, after_step: Callable[[Watch, int], object] | None = None,
) -> Watch:
    """A night's `lines` written into `spool` in `parts` parts, a poll of a `watch` after
    each (started again before part `again_at`: rounds begun before it end after it), then
    its `later` files, drained and swept. `after_step(watch, part)` runs after each poll."""
    def watch() -> Watch:
        return Watch(con, spool, config.PropertyConfig(), runs.start(con, "watch", {}),
                     WatchOptions(rescan=0))

    w = watch()
    cuts = [len(lines) * i // parts for i in range(parts + 1)]
    for i, (lo, hi) in enumerate(itertools.pairwise(cuts)):
        for x in lines[lo:hi]:
            with (spool / x.name).open("ab") as fh:
                fh.write(x.data)
        if i == again_at:
            w = watch()
        w.step()
        if after_step is not None:
            after_step(w, i)
    for f in later:
        (spool / f.name.removesuffix(".later")).write_bytes(f.read_bytes())
    done = threading.Event()
    done.set()  # drains the spool, then sweeps
    w.run(done)
    return w
