"""Login guessing slowed down, per client and per name (docs/board.md, "Logins").

Each failed login counts against the address it came from and against the name it tried
(any name: one that exists is not told from one that does not). Past FREE_PER_CLIENT
failures from an address, or FREE_PER_NAME for a name from any address, the next attempt
must wait: 1 s, then twice as long after each further failure, at most MAX_WAIT. An attempt
made before then is answered 429 with Retry-After and checks nothing, so it costs no
password hash. A login that succeeds clears its address and its name. Counts older than
FORGET_AFTER are forgotten, and the tables are bounded (a flood from many addresses cannot
grow them without end).

A password check costs a quarter of a second of a core (PBKDF2, auth.py); at most
CHECKS_AT_ONCE run at once, in worker threads of their own, so a flood of guesses from
many addresses cannot take the threads the pages read the database with, and an attempt
that finds CHECKS_WAITING already waiting is answered 429 at once.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import anyio

FREE_PER_CLIENT = 5
FREE_PER_NAME = 10
FIRST_WAIT = 1.0
MAX_WAIT = 15 * 60.0
FORGET_AFTER = 60 * 60.0
MAX_ENTRIES = 10_000
CHECKS_AT_ONCE = 1
CHECKS_WAITING = 8


@dataclass
class _Count:
    failures: int = 0
    last: float = 0.0
    until: float = 0.0  # no attempt before this (time.monotonic)


@dataclass
class _Table:
    """Failures by key (an address, or a name), the oldest dropped past MAX_ENTRIES."""

    free: int
    entries: OrderedDict[str, _Count] = field(default_factory=OrderedDict)

    def wait(self, key: str, now: float) -> float:
        c = self.entries.get(key)
        if c is None:
            return 0.0
        if now - c.last > FORGET_AFTER:
            del self.entries[key]
            return 0.0
        return max(0.0, c.until - now)

    def fail(self, key: str, now: float) -> None:
        c = self.entries.pop(key, None) or _Count()
        if now - c.last > FORGET_AFTER:
            c = _Count()
        c.failures += 1
        c.last = now
        over = c.failures - self.free
        if over >= 0:
            c.until = now + min(MAX_WAIT, FIRST_WAIT * 2.0 ** over)
        self.entries[key] = c  # the most recent last
        while len(self.entries) > MAX_ENTRIES:
            self.entries.popitem(last=False)

    def clear(self, key: str) -> None:
        self.entries.pop(key, None)


@dataclass
class Refusal:
    """Why an attempt is not checked, and for how long (whole seconds, for Retry-After)."""

    seconds: int
    message: str


class Throttle:
    """The board's count of failed logins, by client address and by name. Used from the
    event loop only (no lock needed)."""

    def __init__(self) -> None:
        self.clients = _Table(FREE_PER_CLIENT)
        self.names = _Table(FREE_PER_NAME)
        self.checking = 0  # password checks running or waiting for their thread
        self.refused = 0  # attempts answered 429, since the board started
        self._limiter: anyio.CapacityLimiter | None = None

    def limiter(self) -> anyio.CapacityLimiter:
        """The worker threads password checks may use (CHECKS_AT_ONCE), apart from those
        the pages read with; made on the board's event loop, at its first login."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(CHECKS_AT_ONCE)
        return self._limiter

    @staticmethod
    def _name(name: str) -> str:
        return name.strip().casefold()[:200]

    def refusal(self, client: str, name: str) -> Refusal | None:
        """None when the attempt may be checked now; else why not."""
        now = time.monotonic()
        by_client = self.clients.wait(client, now)
        by_name = self.names.wait(self._name(name), now) if name.strip() else 0.0
        if by_client or by_name:
            self.refused += 1
            who = "from this address" if by_client >= by_name else "for this name"
            wait = math.ceil(max(by_client, by_name))
            return Refusal(wait, f"Too many failed logins {who}: try again in {_seconds(wait)}.")
        if self.checking >= CHECKS_AT_ONCE + CHECKS_WAITING:
            self.refused += 1
            return Refusal(2, "Too many logins at once: try again in a few seconds.")
        return None

    def failed(self, client: str, name: str) -> None:
        now = time.monotonic()
        self.clients.fail(client, now)
        if name.strip():
            self.names.fail(self._name(name), now)

    def succeeded(self, client: str, name: str) -> None:
        self.clients.clear(client)
        self.names.clear(self._name(name))


def _seconds(n: int) -> str:
    if n < 120:
        return f"{n} second{'s' if n != 1 else ''}"
    return f"{math.ceil(n / 60)} minutes"
