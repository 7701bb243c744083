"""Finding log files and naming them: which files a path gives, and a file name as one line of
text for messages and the `sources` manifest (and back)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

SUFFIXES = (".jsonl", ".jsonl.gz")

_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNESCAPES = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPE_RE = re.compile(r"\\(?:([\\nrt])|x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8}))")


def escape_path(path: Path | str) -> str:
    """A path as messages show it and the `sources` manifest records it: one line of UTF-8.

    A POSIX file name is bytes. Bytes that are not UTF-8 (Python keeps them as the surrogates
    U+DC80-U+DCFF) become `\\xNN`, control and other unprintable characters `\\n`, `\\r`,
    `\\t`, `\\xNN` (below U+0080) or `\\uNNNN`, and a backslash `\\\\`; so every problem stays
    one line, the database can store the name, and `unescape_path` gives the exact name back.
    """
    text = str(path)
    if text.isprintable() and "\\" not in text:
        return text
    out = []
    for ch in text:
        o = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif o < 0x80:
            out.append(f"\\x{o:02x}")
        elif 0xDC80 <= o <= 0xDCFF:  # an undecodable byte of the name
            out.append(f"\\x{o - 0xDC00:02x}")
        elif o <= 0xFFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    return "".join(out)


def unescape_path(text: str) -> Path:
    """The path `escape_path` showed as `text` (`os.fsencode` of it gives the name's bytes)."""

    def one(m: re.Match[str]) -> str:
        short, byte, u4, u8 = m.groups()
        if short:
            return _UNESCAPES[short]
        if byte:
            n = int(byte, 16)
            return chr(n if n < 0x80 else 0xDC00 + n)
        return chr(int(u4 or u8, 16))

    return Path(_ESCAPE_RE.sub(one, text))


_C0 = re.compile("[\x00-\x1f]")


def one_line(text: str) -> str:
    """A reason as one line. The reasons quote values as JSON, which escapes these already;
    this is the backstop (C0 controls only: they are what break lines and drive terminals)."""
    return _C0.sub(lambda m: _ESCAPES.get(m[0]) or f"\\x{ord(m[0]):02x}", text)


def discover(paths: Sequence[Path | str]) -> tuple[list[Path], list[str]]:
    """Expand directories (recursively) to their log files.

    Returns the files and one sentence per path that gave none, so the good paths still load.
    """
    found: list[Path] = []
    errors: list[str] = []
    for p in map(Path, paths):
        if not p.exists():
            errors.append(f"{escape_path(p)}: no such file or directory")
        elif p.is_dir():
            logs = sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(SUFFIXES))
            if logs:
                found.extend(logs)
            else:
                errors.append(
                    f"{escape_path(p)}: nothing to ingest (no .jsonl or .jsonl.gz files in it)"
                )
        else:
            found.append(p)
    unique: dict[Path, Path] = {}
    for f in found:
        unique.setdefault(f.resolve(), f)
    return list(unique.values()), errors
