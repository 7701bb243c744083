"""A browser guessing at the board's login page (tests/board/test_logins.py,
bench/logins.py)."""

from __future__ import annotations

import re

import httpx2

from auditor.board.app import BoardServer

PASSWORD = "correct horse battery staple"
TOKEN = "tok-7d1f0c9e3b5a48d2a6e1c4f9b8d2e7a3"


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page[:300]
    return found.group(1)


class Guesser:
    """A browser at one client address: takes the login page's CSRF token, then posts."""

    def __init__(self, board: BoardServer, address: str) -> None:
        self.origin = board.url
        self.http = httpx2.Client(base_url=board.url, timeout=30,
                                  headers={"X-Forwarded-For": address})
        page = self.http.get("/login")
        self.csrf = csrf_of(page.text)

    def login(
        self, name: str = "j.rivera", password: str = "guess", token: str = ""
    ) -> httpx2.Response:
        return self.http.post("/login", data={"csrf": self.csrf, "name": name,
                                              "password": password, "token": token},
                              headers={"Origin": self.origin})

    def close(self) -> None:
        self.http.close()
