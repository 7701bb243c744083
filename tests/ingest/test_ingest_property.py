"""Property: whatever a file holds, ingest accounts for every line, exactly once.

Files mix valid event lines (from the schema tests' examples) with garbage: random text,
random bytes, random JSON values that are not events, and valid events with one field
replaced by a random JSON value, plus blank lines; plain or gzip, read whole or in blocks.
Ingest must not raise; every valid line is one event (its seq, its raw text); every other
non-blank line is either an event or in quarantine with a reason (garbage: always quarantine);
and events + quarantined + blank lines = the file's lines.
"""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

import pytest
from helpers.db import AuditDb, set_chunk_bytes
from helpers.drawn import BLANK, Spec, build, ingest_settings, line_specs
from helpers.events import encode_lines
from hypothesis import given
from hypothesis import strategies as st

from auditor.store import db, runs


def text_of(raw: bytes, first: bool) -> str:
    """A line as ingest keeps it: BOM dropped at the start of the file, bad bytes replaced,
    trailing CR/LF removed."""
    if first and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    return raw.decode("utf-8", errors="replace").rstrip("\r\n")


@pytest.mark.slow
@ingest_settings
@given(
    specs=st.lists(line_specs, min_size=1, max_size=10),
    gz=st.booleans(),
    crlf=st.booleans(),
    chunk=st.sampled_from([None, 700]),
)
def test_every_line_is_accounted_for_exactly_once(
    tmp_path_factory: pytest.TempPathFactory,
    specs: list[Spec],
    gz: bool,
    crlf: bool,
    chunk: int | None,
) -> None:
    raw_lines, kinds = build(specs)
    workdir = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    con = db.connect(":memory:")
    try:
        audit = AuditDb(workdir, con, runs.start(con, "property", {}))
        # A random line may itself end in CR; with CRLF ends the line is what precedes "\n".
        data = encode_lines(raw_lines, newline=b"\r\n" if crlf else b"\n")
        if gz:
            data = gzip.compress(data, mtime=0)
        path = audit.write_bytes("night.jsonl.gz" if gz else "night.jsonl", data)
        texts = [text_of(r + (b"\r" if crlf else b""), i == 0) for i, r in enumerate(raw_lines)]
        blank = [k == "blank" or not t.strip(BLANK) for k, t in zip(kinds, texts, strict=True)]

        with pytest.MonkeyPatch.context() as mp:
            if chunk:
                set_chunk_bytes(mp, chunk)
            r = audit.ingest_file(path)  # must not raise

        assert r.status == "ingested"
        assert r.lines == len(raw_lines)
        events = {e["line_no"]: e for e in audit.events()}
        quarantine = {q["line_no"]: q for q in audit.quarantine()}
        assert len(events) == len(audit.events())  # one event per line at most
        assert len(quarantine) == len(audit.quarantine())
        assert not set(events) & set(quarantine)

        for i, (kind, text, is_blank) in enumerate(zip(kinds, texts, blank, strict=True)):
            n = i + 1
            if is_blank:
                assert n not in events and n not in quarantine, (n, text)
            elif kind == "valid":
                assert n in events, (n, text, quarantine.get(n))
                assert (events[n]["seq"], events[n]["raw"]) == (n, text)
            elif kind == "garbage":
                assert n in quarantine, (n, text, events.get(n))
            else:  # a mutated event: either outcome, but exactly one
                assert (n in events) != (n in quarantine), (n, text)
            if n in quarantine:
                assert quarantine[n]["reason"], (n, text)
                assert quarantine[n]["raw"] == text

        assert len(events) + len(quarantine) + sum(blank) == len(raw_lines)
        assert (r.events, r.quarantined, r.duplicates) == (len(events), len(quarantine), 0)
        assert r.problems == [f"{path}:{n}: {quarantine[n]['reason']}" for n in sorted(quarantine)]
        malformed = audit.findings("log.malformed")
        assert sorted(f["source"] for f in malformed) == sorted(
            f"{path.resolve()}:{n}" for n in quarantine
        )
    finally:
        con.close()
