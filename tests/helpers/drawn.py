"""Lines drawn by hypothesis for the ingest property tests (ingest/test_ingest_property.py, and
ingest/test_fast.py, which holds the fast path to the per-line path on them): valid event
lines from the schema tests' examples, random text, random bytes, random JSON values that
are not events, valid events with one field replaced by a random JSON value, blank lines.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from auditor.store.events import FIELDS, INT

from .events import VALID_EVENTS, event, line

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


# Kept small for `make test` (each example is a fresh database or two and an ingest, ~0.3 s);
# BACC_AUDIT_PROPERTY_EXAMPLES=500 for a deeper run.
ingest_settings = settings(
    max_examples=int(os.environ.get("BACC_AUDIT_PROPERTY_EXAMPLES", "15")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
