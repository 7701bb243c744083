"""Time and peak memory to render a shift report with 10,000 findings.

    python bench/report.py [--findings 10000] [--sign]

Builds (under bench/out/) a database of the sample night, audits it, and adds copies of its
round findings spread over the grave shift until the shift holds the asked number (each copy
a distinct finding with its own fingerprint). Then renders the grave shift's PDF in a child
process and prints the seconds, pages and the child's peak RSS. Targets: < 20 s, < 1 GB.
With --sign it then signs that PDF PAdES-B-B with a throwaway key (tests/helpers/keys.py)
and checks the signature against its CA, and prints the time of each.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHIFT = "2026-11-28/grave"


def build(db_path: Path, n: int) -> None:
    from auditor import config
    from auditor.audit.run import audit
    from auditor.ingest.run import ingest
    from auditor.store import db, runs

    if db_path.exists():
        db_path.unlink()
    con = db.connect(db_path)
    ingest(con, [ROOT / "sample_logs"], runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), config.PropertyConfig())
    have = con.execute(
        "SELECT count(*) FROM findings WHERE ts >= TIMESTAMPTZ '2026-11-29 03:00:00+00' "
        "AND ts < TIMESTAMPTZ '2026-11-29 11:00:00+00'"
    ).fetchall()[0][0]
    # Copies of the round findings, moved across the shift (03:00-11:00 UTC).
    con.execute(
        f"""
        INSERT INTO findings (fingerprint, run_id, recorded_at, status, code, severity,
                              table_id, pit, shoe, round, seq, ts, rule, message, expected,
                              observed, source, evidence)
        SELECT f.fingerprint || '|copy' || i, f.run_id, f.recorded_at, f.status, f.code,
               f.severity, f.table_id, f.pit, f.shoe, f.round, f.seq,
               TIMESTAMPTZ '2026-11-29 03:00:00+00' + to_seconds(i * 2.8), f.rule,
               f.message, f.expected, f.observed, f.source, f.evidence
        FROM (SELECT * FROM findings WHERE round IS NOT NULL) f,
             range(0, {max(n - have, 0)} // 12 + 1) r(i)
        LIMIT {max(n - have, 0)}
        """
    )
    con.close()


def sign(pdf: Path) -> None:
    """Sign the rendered PDF as a filed one is signed, then check it as `verify` does."""
    import tempfile

    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.keys import make_key

    from auditor.config import SigningConfig
    from auditor.report import signing

    with tempfile.TemporaryDirectory() as tmp:
        made = make_key(Path(tmp))
        secret = Path(tmp) / "password"
        secret.write_text(made.password)
        key = signing.load_key(SigningConfig(made.p12, secret, None))
        data = pdf.read_bytes()
        t = time.perf_counter()
        signed = signing.sign(data, key, "Benchmark property")
        signed_in = time.perf_counter() - t
        t = time.perf_counter()
        status = signing.signature_status(signed, made.ca_pem)
        checked_in = time.perf_counter() - t
    assert status.ok, status.problem
    print(f"sign ({len(data) / 1e6:.1f} MB, PAdES-B-B, ECDSA P-256): {signed_in:.2f} s; "
          f"signature checked against its CA: {checked_in:.2f} s")


def render(db_path: Path, out: Path) -> None:
    from auditor import config
    from auditor.report.gather import gather, scope_for
    from auditor.report.render import write_report
    from auditor.store import db

    con = db.connect(db_path, read_only=True)
    conf = config.PropertyConfig(name="Benchmark property")
    scope = scope_for(conf, con, shift=SHIFT)
    t = time.perf_counter()
    context = gather(con, conf, scope)
    gathered = time.perf_counter() - t
    path = write_report(con, conf, scope, out)
    total = time.perf_counter() - t
    import pypdf

    pages = len(pypdf.PdfReader(path).pages)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"findings in shift: {len(context['findings']):,}")
    print(f"gather: {gathered:.2f} s; gather + render + write: {total:.2f} s (target < 20 s)")
    print(f"pages: {pages}; PDF {path.stat().st_size / 1e6:.1f} MB")
    print(f"peak RSS of the render process: {peak:,.0f} MB (target < 1 GB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--findings", type=int, default=10_000)
    ap.add_argument("--sign", action="store_true", help="Then sign the PDF and check it.")
    ap.add_argument("--render-only", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    out = ROOT / "bench" / "out"
    if args.render_only:
        render(args.render_only, out / "report-bench.pdf")
        return
    out.mkdir(parents=True, exist_ok=True)
    db_path = out / f"report-{args.findings}.duckdb"
    if not db_path.exists():
        t = time.perf_counter()
        build(db_path.with_suffix(".tmp"), args.findings)
        shutil.move(db_path.with_suffix(".tmp"), db_path)
        print(f"built {db_path.name} in {time.perf_counter() - t:.1f} s")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}")
    subprocess.run([sys.executable, __file__, "--render-only", str(db_path)], check=True)
    if args.sign:
        sign(out / "report-bench.pdf")


if __name__ == "__main__":
    main()
