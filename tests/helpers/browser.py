"""Debian's chromium driven by Playwright, as the board's browser tests use it
(tests/board/test_browser*.py): skipped where no chromium is on the PATH (Playwright's own
browser downloads are not used), and a page that records what went wrong on it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MARKS = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no chromium on PATH: `apt-get install chromium` (Debian), as .ci/run does",
    ),
]


def watched_page(pw: Any, **options: Any) -> tuple[Any, Any, list[str], list[str]]:
    """A headless chromium and a new page of it (`options`: Playwright's new_page options),
    with the page's script errors and failed requests (`problems`) and every URL it asked
    for (`asked`). Leaving a page with a stream aborts the stream: not a problem."""
    browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
    page = browser.new_page(**options)
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("requestfailed", lambda r: None if "/api/stream" in r.url
            else problems.append(f"failed: {r.url} ({r.failure})"))
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url))
    return browser, page, problems, asked


def screenshot_folder() -> Path | None:
    """BACC_SCREENSHOTS, the folder the browser tests save their screenshots in (none when
    unset); a relative one is read from the checkout's root, whatever folder a test is in."""
    folder = os.environ.get("BACC_SCREENSHOTS")
    if not folder:
        return None
    return Path(__file__).resolve().parents[2] / folder
