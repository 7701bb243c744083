"""A login flood against the board, and what an officer's pages wait meanwhile (issue 31).

    python bench/logins.py [--threads 40] [--seconds 20]

Serves the sample night's board under uvicorn with logins required (a real PBKDF2 password
hash) behind a trusted proxy, so that each guessing thread comes from an address of its
own (X-Forwarded-For). `--threads` guessers post wrong passwords for `--seconds`; a logged-in
officer meanwhile reads /floor and /api/findings every 0.1 s. Prints the guesses answered by
status, the password checks made, and the officer's waits (median, 95th percentile, max)
against the target: under 2 s. tests/board/test_logins.py runs a small flood (12 threads,
6 s) with the same bound.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import httpx2  # noqa: E402
from helpers.logins import PASSWORD, TOKEN, Guesser, csrf_of  # noqa: E402
from helpers.sample import CONFIG, build  # noqa: E402

from auditor import config  # noqa: E402
from auditor.board.app import create_app, serve  # noqa: E402
from auditor.board.auth import Auth, hash_password, token_sha256  # noqa: E402
from auditor.board.settings import settings_from_table  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=40)
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.2f}, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        path = build(Path(tmp) / "board.duckdb", with_mb01=True)
        settings = settings_from_table({
            "listen": "127.0.0.1:8080",
            "require_login": True,
            "trusted_proxies": ["127.0.0.1"],
            "users": [{"name": "j.rivera", "password_hash": hash_password(PASSWORD)}],
            "tokens": [{"name": "case-system", "sha256": token_sha256(TOKEN)}],
        }, "bench.toml")
        app = create_app(path, property_config=config.load(CONFIG), settings=settings,
                         auth=Auth.for_host(settings, "127.0.0.1"))
        with serve(app, "127.0.0.1", 0) as board:
            return flood(board, args.threads, args.seconds)


def flood(board: object, threads: int, seconds: float) -> int:
    stop = threading.Event()
    statuses: Counter[int] = Counter()
    lock = threading.Lock()

    def guess(i: int) -> None:
        g = Guesser(board, f"10.9.{i // 250}.{i % 250 + 1}")  # type: ignore[arg-type]
        try:
            while not stop.is_set():
                r = g.login()
                with lock:
                    statuses[r.status_code] += 1
        finally:
            g.close()

    url = board.url  # type: ignore[attr-defined]
    officer = httpx2.Client(base_url=url, timeout=60, headers={"X-Forwarded-For": "10.1.1.1"})
    csrf = csrf_of(officer.get("/login").text)
    assert officer.post("/login", data={"csrf": csrf, "name": "j.rivera", "password": PASSWORD},
                        headers={"Origin": url}).status_code == 303
    quiet = _officer_waits(officer, 2.0)
    guessers = [threading.Thread(target=guess, args=(i,)) for i in range(threads)]
    started = time.monotonic()
    for t in guessers:
        t.start()
    try:
        waits = _officer_waits(officer, seconds)
    finally:
        stop.set()
        for t in guessers:
            t.join(60)
        officer.close()
    took = time.monotonic() - started
    print(f"{threads} guessing threads for {took:.1f} s: "
          + ", ".join(f"{n:,} answered {code}" for code, n in sorted(statuses.items())))
    for name, w in (("before the flood", quiet), ("during the flood", waits)):
        w = sorted(w)
        print(f"officer's /floor + /api/findings {name}: {len(w)} reads, median "
              f"{statistics.median(w) * 1000:.0f} ms, 95th percentile "
              f"{w[int(0.95 * (len(w) - 1))] * 1000:.0f} ms, max {w[-1] * 1000:.0f} ms")
    ok = max(waits) < 2.0
    print(f"target: every read under 2 s during the flood: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


def _officer_waits(officer: httpx2.Client, seconds: float) -> list[float]:
    waits: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        floor = officer.get("/floor")
        api = officer.get("/api/findings", headers={"Authorization": f"Bearer {TOKEN}"})
        waits.append(time.monotonic() - t0)
        assert floor.status_code == 200 and api.status_code == 200, (floor, api)
        time.sleep(0.1)
    return waits


if __name__ == "__main__":
    raise SystemExit(main())
