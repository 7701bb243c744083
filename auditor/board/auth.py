"""Who may see the board and who made an acknowledgement: logins, sessions and CSRF tokens.

A board on a loopback address can go without a login (only this machine reaches it, and the
name typed into the form is what an acknowledgement records). Anywhere else, and behind a
reverse proxy (`require_login`), nothing but the login page, the static files and /healthz is
shown before a login: a user of the `[board]` config with a password, or a token. Browsers
keep a signed session cookie; other systems send `Authorization: Bearer TOKEN`.

Secrets are never configured in the clear: a password as a PBKDF2 hash, a token as its
SHA-256. The key that signs sessions and CSRF tokens is drawn when the board starts, so a
restart logs everyone out, and nothing on disk can forge a session.

Run `python -m auditor.board.auth password` to hash a password for the config, or
`python -m auditor.board.auth token` for a new token and the SHA-256 to configure.
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import hmac
import json
import secrets
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from auditor.board.settings import OFFICER, BoardSettings, Token, User, is_loopback
from auditor.errors import UserError

# OWASP's figure for PBKDF2-HMAC-SHA256 (2023): about a quarter of a second a login here.
PBKDF2_ITERATIONS = 600_000
SESSION_COOKIE = "bacc_board_session"
CSRF_COOKIE = "bacc_board_csrf"


def hash_password(password: str, iterations: int = PBKDF2_ITERATIONS) -> str:
    """The `password_hash` text for `[[board.users]]`: algorithm, iterations, salt, hash."""
    if not password:
        raise UserError("an empty password cannot be hashed")
    salt = secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return "$".join(
        ("pbkdf2_sha256", str(iterations), _b64(salt), _b64(digest))
    )


def verify_password(password: str, stored: str) -> bool:
    """True when `password` hashes to `stored` (compared in constant time)."""
    try:
        algo, iterations, salt, digest = stored.split("$")
        rounds = int(iterations)
        want = _unb64(digest)
        salt_bytes = _unb64(salt)
    except ValueError:
        return False
    if algo != "pbkdf2_sha256" or not 0 < rounds <= 10_000_000:
        return False
    got = hashlib.pbkdf2_hmac("sha256", password.encode(), salt_bytes, rounds)
    return hmac.compare_digest(got, want)


def token_sha256(token: str) -> str:
    """What `[[board.tokens]]` holds for `token`: its SHA-256 in hex. A token is random and
    long, so a plain hash suffices (no salt or stretching, unlike a chosen password)."""
    return hashlib.sha256(token.strip().encode()).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Identity:
    """Who is logged in: `name` is what their acknowledgements record, `role` what they may
    do (settings.ROLES), recorded beside it."""

    name: str
    via: str  # "password" or "token"
    role: str = OFFICER

    @property
    def officer(self) -> bool:
        return self.role == OFFICER


def _dummy_hash(like: str | None) -> str:
    """A hash no password matches, with the iterations of `like`: checked when the name is
    unknown, so a wrong name takes as long as a wrong password and the timing does not tell
    which names exist."""
    rounds = like.split("$")[1] if like and like.count("$") == 3 else str(PBKDF2_ITERATIONS)
    return f"pbkdf2_sha256${rounds}${_b64(bytes(16))}${_b64(bytes(32))}"


class Auth:
    """The board's access rule and its credentials.

    `required` says whether anything but the login page is shown without a login. Build it
    with `Auth.for_host` (from the config and the address listened on) or `Auth.local()`.
    """

    def __init__(
        self,
        *,
        required: bool,
        users: Sequence[User] = (),
        tokens: Sequence[Token] = (),
        session_hours: float = 12.0,
        secret: bytes | None = None,
    ) -> None:
        if required and not users and not tokens:
            raise UserError(
                "the board asks for a login here but the config names no one to log in: add "
                "[[board.users]] or [[board.tokens]] to the property config (docs/board.md)"
            )
        self.required = required
        self.users = {u.name: u for u in users}
        self.tokens = {t.sha256: t for t in tokens}
        self.session_seconds = int(session_hours * 3600)
        self._key = secret or secrets.token_bytes(32)

    @classmethod
    def local(cls) -> Auth:
        """No login: for a board that only this machine can reach."""
        return cls(required=False)

    @classmethod
    def for_host(cls, settings: BoardSettings, host: str | None = None) -> Auth:
        """The rule for a board listening on `host` (default: the config's `listen`): a login
        off loopback, and wherever `require_login` says so."""
        where = host if host is not None else settings.host
        return cls(
            required=settings.require_login or not is_loopback(where),
            users=settings.users,
            tokens=settings.tokens,
            session_hours=settings.session_hours,
        )

    # -- credentials ---------------------------------------------------------------------
    def check_password(self, name: str, password: str) -> Identity | None:
        user = self.users.get(name.strip())
        some = next(iter(self.users.values()), None)
        stored = user.password_hash if user else _dummy_hash(
            some.password_hash if some else None
        )
        ok = verify_password(password, stored)
        return Identity(user.name, "password", user.role) if user and ok else None

    def check_token(self, token: str) -> Identity | None:
        digest = token_sha256(token)
        for known, t in self.tokens.items():
            if hmac.compare_digest(known, digest):
                return Identity(t.name, "token", t.role)
        return None

    def still_allowed(self, who: Identity) -> bool:
        """A session outlives nothing: a user or token taken out of the config (and the board
        restarted with it) no longer gets in."""
        return self.current(who) is not None

    def current(self, who: Identity) -> Identity | None:
        """`who` as the config now has them (their role), or None when they are out of it."""
        if who.via == "password":
            user = self.users.get(who.name)
            return Identity(user.name, who.via, user.role) if user else None
        for t in self.tokens.values():
            if t.name == who.name:
                return Identity(t.name, who.via, t.role)
        return None

    # -- sessions ------------------------------------------------------------------------
    def _sign(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()

    def session_value(self, who: Identity, now: float | None = None) -> str:
        """The session cookie's value: who and until when, signed with the board's key."""
        expires = int((now or time.time()) + self.session_seconds)
        body = _b64(json.dumps([who.name, who.via, expires]).encode())
        return f"{body}.{self._sign('session|' + body)}"

    def session_identity(self, value: str | None, now: float | None = None) -> Identity | None:
        if not value or "." not in value:
            return None
        body, _, mac = value.rpartition(".")
        if not hmac.compare_digest(mac, self._sign("session|" + body)):
            return None
        try:
            name, via, expires = json.loads(_unb64(body))
        except (ValueError, TypeError):
            return None
        if not isinstance(expires, int) or expires < (now or time.time()):
            return None
        return self.current(Identity(str(name), str(via)))

    # -- CSRF ----------------------------------------------------------------------------
    def csrf_token(self, cookie: str) -> str:
        """The form field that goes with the CSRF cookie: a signature of it, so a page on
        another site can neither read nor make one (a cookie set from elsewhere has no
        matching field without the board's key)."""
        return self._sign("csrf|" + cookie)

    def csrf_ok(self, cookie: str | None, field: str | None) -> bool:
        if not cookie or not field:
            return False
        return hmac.compare_digest(self.csrf_token(cookie), field)


def new_csrf_cookie() -> str:
    return secrets.token_urlsafe(24)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m auditor.board.auth password` (prompts twice, prints the hash) or
    `... token` (prints a new token and the SHA-256 to put in the config)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["password"]:
        first = getpass.getpass("password: ")
        if first != getpass.getpass("again: "):
            print("the two passwords differ", file=sys.stderr)
            return 2
        print(f'password_hash = "{hash_password(first)}"')
        return 0
    if args == ["token"]:
        token = new_token()
        print(f"token (give it to the client, keep it secret): {token}")
        print(f'sha256 = "{token_sha256(token)}"')
        return 0
    print("usage: python -m auditor.board.auth password|token", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
