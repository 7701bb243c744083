"""Several simulated nights as one property's logs: the simulator starts every stream at seq
1, so each night's seq numbers are moved on from where the nights before left each stream
(one table's stream across the days, as a real table system writes it)."""

from __future__ import annotations

import re
from pathlib import Path

_STREAM = re.compile(r'"(table|pit)":"([^"\\]+)"')
_SEQ = re.compile(r'"seq":(\d+)')


def _stream(line: str) -> str | None:
    found: dict[str, str] = {m.group(1): m.group(2) for m in _STREAM.finditer(line)}
    if '"type":"procedure_notice"' in line and "pit" in found:
        return "pit:" + found["pit"]
    return "table:" + found["table"] if "table" in found else None


def continue_streams(folder: Path, tops: dict[str, int]) -> None:
    """Renumber the seq of every *.jsonl in `folder` so that each stream goes on from
    `tops` (stream -> last seq so far), and update `tops`."""
    here: dict[str, int] = {}
    for f in sorted(folder.glob("*.jsonl")):
        out = []
        for line in f.read_text().splitlines(keepends=True):
            s = _stream(line)
            m = _SEQ.search(line)
            if s and m:
                seq = int(m.group(1)) + tops.get(s, 0)
                line = line[: m.start(1)] + str(seq) + line[m.end(1):]
                here[s] = max(here.get(s, 0), seq)
            out.append(line)
        f.write_text("".join(out))
    for s, top in here.items():
        tops[s] = max(tops.get(s, 0), top)


def seq_tops(files: list[Path]) -> dict[str, int]:
    """The last seq of each stream in these logs (gzip ones too): what a later night's
    `continue_streams` goes on from."""
    import gzip

    tops: dict[str, int] = {}
    for f in files:
        text = gzip.decompress(f.read_bytes()).decode() if f.suffix == ".gz" else f.read_text()
        for line in text.splitlines():
            s = _stream(line)
            m = _SEQ.search(line)
            if s and m:
                tops[s] = max(tops.get(s, 0), int(m.group(1)))
    return tops
