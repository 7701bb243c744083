"""`make demo-live`: the two-terminal recipe of docs/live.md in one: `bacc-audit watch` with its
board on a free port of this machine, and `bacc-audit simulate --live` feeding it a night, so
the live audit can be shown without tables. Prints the board's URL; Ctrl-C stops both.

Everything goes under out/demo-live/ (emptied first): the spool, the database, the night's
logs and ground truth, and the archive the watch files the shift PDFs into (--file-reports).
SPEED (default 60: an hour of play a minute), TABLES, HOURS and DEVIATION_RATE in the
environment change the night.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent / "bacc-audit"
OUT = ROOT / "out" / "demo-live"
CONFIG = ROOT / "sample_logs" / "property.toml"
STOP_WAIT = 60.0  # seconds a process gets to stop cleanly after its SIGINT


def free_port() -> int:
    """A port nobody listens on now (the kernel's pick); the watch binds it a moment later."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def started(args: list[str]) -> subprocess.Popen[bytes]:
    """A child in its own session: the terminal's Ctrl-C reaches this script alone, which
    gives each child one SIGINT (a second one would cut its clean stop short)."""
    return subprocess.Popen([str(BIN), *args], cwd=ROOT, start_new_session=True)


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    deadline = time.monotonic() + STOP_WAIT
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def interrupt(*_: object) -> None:
    """SIGTERM (a `kill`, a CI runner) stops the demo as Ctrl-C does."""
    raise KeyboardInterrupt


def main() -> int:
    env = os.environ
    shutil.rmtree(OUT, ignore_errors=True)
    spool = OUT / "spool"
    spool.mkdir(parents=True)
    port = free_port()
    watch = started(["watch", "--spool", str(spool), "--db", str(OUT / "demo.duckdb"),
                     "--config", str(CONFIG), "--web", f"127.0.0.1:{port}",
                     "--file-reports", "--archive", str(OUT / "archive")])
    procs = [watch]
    signal.signal(signal.SIGTERM, interrupt)
    try:
        while True:  # the board is up once its port answers
            if watch.poll() is not None:
                print(f"demo-live: watch stopped (exit {watch.returncode})", file=sys.stderr)
                return watch.returncode or 1
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        print(f"\n  the board: http://127.0.0.1:{port}/  (Ctrl-C stops the demo)\n", flush=True)
        feed = started([
            "simulate", "--live", str(spool), "--out", str(OUT / "night"),
            "--tables", env.get("TABLES", "4"), "--hours", env.get("HOURS", "9"),
            "--deviation-rate", env.get("DEVIATION_RATE", "0.02"),
            "--speed", env.get("SPEED", "60"),
        ])
        procs.insert(0, feed)
        if feed.wait() != 0:
            print(f"demo-live: simulate stopped (exit {feed.returncode})", file=sys.stderr)
            return feed.returncode
        print(f"\n  the night is fed; the board stays at http://127.0.0.1:{port}/ "
              "(Ctrl-C stops it)\n", flush=True)
        watch.wait()
        return watch.returncode
    except KeyboardInterrupt:
        stop(procs)
        return 130
    finally:
        stop(procs)


if __name__ == "__main__":
    sys.exit(main())
