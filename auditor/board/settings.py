"""The board's part of the property config: the `[board]` section (docs/board.md).

The board is configured where the rest of the property is, so one file says where it listens,
who may log in and how it sits behind the property's reverse proxy. `auditor/config.py` does
not know the section yet; until it carries it on `PropertyConfig` (as `board`, the raw
table), `load_settings` reads it from the config file itself. Unknown keys are refused with
the near one named, as config.py does: a `requre_login` ignored in silence would leave a
board open that its owner believes closed.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from auditor.config import PropertyConfig
from auditor.errors import UserError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
BOARD_KEYS = (
    "listen",
    "require_login",
    "root_path",
    "trusted_proxies",
    "session_hours",
    "users",
    "tokens",
)
USER_KEYS = ("name", "password_hash", "role")
TOKEN_KEYS = ("name", "sha256", "role")
# What a login may do: a viewer reads; an officer also acknowledges, enters and withdraws
# notices and signs reports off. A person is an officer unless said otherwise (boards
# configured before roles keep acknowledging); a token, another system's, only reads.
ROLES = ("viewer", "officer")
OFFICER = "officer"
VIEWER = "viewer"
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class User:
    """A person who may log in: the name every acknowledgement they make records."""

    name: str
    password_hash: str  # auth.hash_password's text: never the password itself
    role: str = OFFICER


@dataclass(frozen=True)
class Token:
    """A bearer token for other systems (or a person pasting it into the login form); only its
    SHA-256 is configured, so the config file does not hold a usable secret."""

    name: str
    sha256: str
    role: str = VIEWER


@dataclass(frozen=True)
class BoardSettings:
    """The `[board]` section, checked. Every key is optional."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    # Ask for a login on a loopback address too: needed behind a reverse proxy, whose
    # requests all come from 127.0.0.1 (off loopback a login is always asked).
    require_login: bool = False
    root_path: str = ""  # the path prefix the proxy serves the board under, e.g. "/board"
    # Whose X-Forwarded-For / -Proto are believed (uvicorn's forwarded_allow_ips).
    trusted_proxies: tuple[str, ...] = ("127.0.0.1", "::1")
    session_hours: float = 12.0
    users: tuple[User, ...] = ()
    tokens: tuple[Token, ...] = ()
    source: str = "defaults (no [board] section)"


def parse_listen(text: str, where: str = "listen") -> tuple[str, int]:
    """`HOST:PORT` (an IPv6 host in brackets: `[::1]:8080`) -> (host, port)."""
    host, sep, port = text.rpartition(":")
    host = host.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(
            f"{where} takes HOST:PORT, like 127.0.0.1:8080 (or [::1]:8080), not {text!r}"
        )
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Only this machine can reach a board listening here, so it may go without a login."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_keys(keys: Any, known: tuple[str, ...], where: str, source: str) -> None:
    for key in keys:
        if key not in known:
            near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise UserError(
                f"{source}: unknown key {where}{key!r}{hint} (known here: {', '.join(known)})"
            )


def _entries(raw: Any, key: str, known: tuple[str, ...], source: str) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        raise UserError(
            f"{source}: board.{key} must be an array of tables: write each under its own "
            f"[[board.{key}]] header with {' and '.join(known)}"
        )
    for i, entry in enumerate(raw):
        _check_keys(entry, known, f"in board.{key}[{i}]: ", source)
        for k in known:
            if k == "role" and k not in entry:
                continue  # the default of its kind
            if not isinstance(entry.get(k), str) or not entry[k].strip():
                raise UserError(f"{source}: board.{key}[{i}].{k} must be a non-empty string")
        role = entry.get("role")
        if role is not None and role not in ROLES:
            raise UserError(
                f"{source}: board.{key}[{i}].role must be viewer (reads) or officer (also "
                f"acknowledges, enters notices and signs off), not {role!r}"
            )
    return raw


def settings_from_table(board: Mapping[str, Any], source: str = "[board]") -> BoardSettings:
    """Check the raw `[board]` table (as tomllib gives it) and return the settings."""
    if not isinstance(board, Mapping):
        raise UserError(f"{source}: [board] must be a table of keys, not {board!r}")
    _check_keys(board, BOARD_KEYS, "in [board]: ", source)
    host, port = parse_listen(str(board.get("listen", f"{DEFAULT_HOST}:{DEFAULT_PORT}")),
                              f"{source}: board.listen")
    require = board.get("require_login", False)
    if not isinstance(require, bool):
        raise UserError(f"{source}: board.require_login must be true or false, not {require!r}")
    root = board.get("root_path", "")
    if not isinstance(root, str) or (root and (not root.startswith("/") or root.endswith("/"))):
        raise UserError(
            f"{source}: board.root_path must be a path like \"/board\" (a leading slash, none "
            f"at the end), not {root!r}"
        )
    proxies = board.get("trusted_proxies", ["127.0.0.1", "::1"])
    if not isinstance(proxies, list) or not all(isinstance(p, str) for p in proxies):
        raise UserError(f"{source}: board.trusted_proxies must be a list of addresses")
    for p in proxies:
        try:
            ipaddress.ip_network(p, strict=False)
        except ValueError:
            raise UserError(
                f"{source}: board.trusted_proxies: {p!r} is not an IP address or network"
            ) from None
    hours = board.get("session_hours", 12)
    if isinstance(hours, bool) or not isinstance(hours, int | float) or not 0 < hours <= 24 * 30:
        raise UserError(f"{source}: board.session_hours must be a number of hours up to 720")
    users = tuple(
        User(u["name"].strip(), u["password_hash"], u.get("role", OFFICER))
        for u in _entries(board.get("users", []), "users", USER_KEYS, source)
    )
    tokens = tuple(
        Token(t["name"].strip(), t["sha256"].lower(), t.get("role", VIEWER))
        for t in _entries(board.get("tokens", []), "tokens", TOKEN_KEYS, source)
    )
    for t in tokens:
        if not _SHA256_HEX.fullmatch(t.sha256):
            raise UserError(
                f"{source}: board.tokens {t.name!r}: sha256 must be 64 hex digits (the token's "
                "SHA-256, as `python -m auditor.board.auth token` prints it), never the token"
            )
    for u in users:
        if not u.password_hash.startswith("pbkdf2_sha256$"):
            raise UserError(
                f"{source}: board.users {u.name!r}: password_hash must be the text "
                "`python -m auditor.board.auth password` prints, never the password"
            )
    names = [u.name for u in users] + [t.name for t in tokens]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError(
            f"{source}: board users and tokens need distinct names (an acknowledgement records "
            f"the name): {', '.join(twice)}"
        )
    return BoardSettings(
        host=host,
        port=port,
        require_login=require,
        root_path=root,
        trusted_proxies=tuple(proxies),
        session_hours=float(hours),
        users=users,
        tokens=tokens,
        source=source,
    )


def load_settings(conf: PropertyConfig) -> BoardSettings:
    """The board settings of a loaded property config.

    Defaults when the config has no `[board]`.
    """
    return settings_from_table(conf.board, conf.source) if conf.board else BoardSettings()
