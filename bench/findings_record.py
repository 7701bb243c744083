"""What recording and withdrawing findings cost as the findings on file grow.

    python bench/findings_record.py [--on-file 1000000] [--found 3] [--repeat 9]

Makes a database holding `--on-file` findings (open, one row each), then records `--found`
new findings `--repeat` times the way a watch poll does (`findings.record_staged` with no
table kept) and, for comparison, with a staged table (`record`'s statement, as a batch pass
does), then times the withdrawal of one round's finding among them; prints the median
and the spread of each in ms. A cost that grows with the findings on file grows with every
night a database keeps. To measure another checkout, put it first on PYTHONPATH. Record
the figures with the machine and the command in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH: another checkout's code wins

from auditor.finding import Finding  # noqa: E402
from auditor.store import db, findings, runs  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--on-file", type=int, default=1_000_000)
    ap.add_argument("--found", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-findings-"))
    con = db.connect(work / "f.duckdb")
    con.execute(
        """
        INSERT INTO findings (fingerprint, run_id, recorded_at, status, code, severity, rule,
                              table_id, pit, shoe, round, seq, ts, message, expected, observed,
                              source, evidence)
        SELECT 'old-' || i, 1, now(), 'open', 'draw.player_missed', 'critical', 'r',
               'T' || (i % 500), 'P', 'S', i, i, now(), 'm', '{}', '{}', 's', '{}'
        FROM range(?) t(i)
        """,
        [args.on_file],
    )
    now = dt.datetime.now(dt.UTC)
    times: dict[str, list[float]] = {"a poll's way": [], "with a staged table": []}
    with runs.recorded(con, "audit", {}) as run:
        for rep in range(args.repeat):
            for way, name in (("a poll's way", None), ("with a staged table", "staged_found")):
                found = [
                    Finding(code="draw.player_missed", message="m", table="MB-01", shoe="S",
                            round=k, seq=k, ts=now, fingerprint=f"new-{way[0]}-{rep}-{k}",
                            expected={}, observed={}, source="f:1")
                    for k in range(args.found)
                ]
                if name is None and not hasattr(findings, "FEW"):
                    name = "round_findings"  # a checkout before a poll kept no table
                started = time.perf_counter()
                findings.record_staged(con, run.id, name, found)
                times[way].append(time.perf_counter() - started)
        # a round judged again: its finding withdrawn, among a million of its code
        times["a round's withdrawal"] = []
        for _ in range(args.repeat):
            con.execute("BEGIN TRANSACTION")
            started = time.perf_counter()
            findings.withdraw(con, run.id, "code = 'draw.player_missed' AND (table_id, shoe, "
                                           "round) IN (SELECT ('T7', 'S', 7))")
            times["a round's withdrawal"].append(time.perf_counter() - started)
            con.execute("ROLLBACK")
        run.done(0, {})
    con.close()
    print(f"machine: {platform.machine()}, Python {platform.python_version()}; "
          f"code: {findings.__file__}")
    print(f"command: python bench/findings_record.py --on-file {args.on_file} "
          f"--found {args.found} --repeat {args.repeat}")
    for way, ts in times.items():
        ms = sorted(t * 1e3 for t in ts)
        what = "to withdraw" if "withdrawal" in way else f"to record {args.found} findings"
        print(f"  {way}: median {statistics.median(ms):.1f} ms (best {ms[0]:.1f}, "
              f"worst {ms[-1]:.1f}) {what} beside {args.on_file:,}")


if __name__ == "__main__":
    main()
