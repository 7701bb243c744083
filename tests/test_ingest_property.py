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
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.db import AuditDb, set_chunk_bytes
from helpers.events import VALID_EVENTS, encode_lines, event, line
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditor.store import db, runs
from auditor.store.events import FIELDS, INT

TYPES = sorted(VALID_EVENTS)
BLANK = " \t\r\n"
# Fields a mutation may replace: the envelope and every field the format defines.
MUTABLE = sorted({"v", "ts", "type", "seq", *FIELDS})

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
# Integer fields get any JSON value too (a string, boolean, list or object there once crashed
# the whole file), plus numbers around their limits: up to and past 15 digits.
int_field_values = (
    json_values
    | st.integers(-(10**15), 10**15)
    | st.integers(10**15, 10**20)
    | st.floats(-1e6, 1e6, allow_nan=False, width=32)
)


@dataclass
class Spec:
    kind: str  # valid, text, bytes, json, mutated, blank
    payload: Any = None


@st.composite
def mutated(draw: st.DrawFn) -> Spec:
    type_ = draw(st.sampled_from(TYPES))
    name = draw(st.sampled_from(MUTABLE))
    spec = FIELDS.get(name)
    values = int_field_values if spec is not None and spec.kind == INT else json_values
    return Spec("mutated", (type_, name, draw(values.filter(lambda v: v not in ("MB-07", "P3")))))


line_specs = st.one_of(
    st.sampled_from(TYPES).map(lambda t: Spec("valid", t)),
    st.sampled_from(TYPES).map(lambda t: Spec("valid", t)),
    st.text(st.characters(codec="utf-8", exclude_characters="\n"), max_size=30).map(
        lambda s: Spec("text", s)
    ),
    st.binary(max_size=30).filter(lambda b: b"\n" not in b).map(lambda b: Spec("bytes", b)),
    json_values.filter(lambda v: not (isinstance(v, dict) and "v" in v)).map(
        lambda v: Spec("json", v)
    ),
    mutated(),
    st.sampled_from(["", " ", "\t", "\r", " \t\r"]).map(lambda s: Spec("blank", s)),
)


def build(specs: list[Spec]) -> tuple[list[bytes], list[str]]:
    """The file's lines (bytes) and what each is: valid, garbage, maybe, blank."""
    lines: list[bytes] = []
    kinds: list[str] = []
    for i, spec in enumerate(specs):
        seq = i + 1  # unique in the file, so no valid line repeats another's seq
        if spec.kind == "valid":
            lines.append(line(event(spec.payload, seq=seq)).encode())
            kinds.append("valid")
        elif spec.kind == "mutated":
            type_, name, value = spec.payload
            # Its own table and pit, so whatever it becomes it shares no stream with the rest.
            e = event(type_, seq=seq, table=f"M{i}")
            if "pit" in e:
                e["pit"] = f"MP{i}"
            e[name] = value
            lines.append(line(e).encode())
            kinds.append("maybe")
        elif spec.kind == "json":
            lines.append(json.dumps(spec.payload, ensure_ascii=False).encode())
            kinds.append("garbage")
        elif spec.kind == "bytes":
            lines.append(spec.payload)
            kinds.append("garbage")
        else:  # text, blank
            lines.append(spec.payload.encode())
            kinds.append("garbage" if spec.kind == "text" else "blank")
    return lines, kinds


def text_of(raw: bytes, first: bool) -> str:
    """A line as ingest keeps it: BOM dropped at the start of the file, bad bytes replaced,
    trailing CR/LF removed."""
    if first and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    return raw.decode("utf-8", errors="replace").rstrip("\r\n")


@pytest.mark.slow
@settings(
    # Kept small for `make test` (each example is a fresh database and one ingest, ~0.3 s);
    # BACC_AUDIT_PROPERTY_EXAMPLES=500 for a deeper run.
    max_examples=int(os.environ.get("BACC_AUDIT_PROPERTY_EXAMPLES", "15")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
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
