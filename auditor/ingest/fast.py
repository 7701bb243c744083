"""The fast path of ingest: a block of lines read strictly typed, in compiled code.

pyarrow's JSON reader (C++, parallel) parses a block against the format's schema and refuses
what does not fit the declared type: a seq of `8.5`, `"6"` or `1e2`, a string where a number
belongs, a number where a list of cards belongs, a key given twice, bytes that are not JSON.
Where it succeeds, the remaining rules of event log v1 (enumerations, the card, id and time
patterns, the fields each type requires, bounds, amounts as written) are checked on the typed
columns, vectorised.

The fast path only ever *accepts*. A line it is not sure of goes to the per-line path
(`auditor.ingest.validate`), which judges it exactly as before: its reason, its quarantine
row, its finding. So the fast path may be stricter than the format (a JSON escape, a leap
second, an amount written `1.0E7` all take the per-line path) but never looser, and what it
accepts it types as the per-line path would (`tests/ingest/test_fast.py` holds them equal).
When the reader refuses a piece of the block, the piece is cut in eight and each part tried
again, so a bad line costs the per-line path only for the few lines around it (and when the
first two parts are refused whole, the rest of the piece is not tried: a form the reader
never takes, on every line, costs little more than the per-line path alone).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from auditor.ingest.validate import card_norm, ts_cast, ts_offset
from auditor.rules.cards import CARD_PATTERN_SQL
from auditor.store.events import (
    AMOUNT,
    ANNOUNCE_FIELDS,
    BOOL,
    CARD,
    CARDS,
    ENUMS,
    EVENT_TYPES,
    FIELDS,
    ID,
    ID_CHARS,
    ID_MAX,
    IDS,
    INT,
    LABEL,
    NAME,
    NAME_MAX,
    PIT_EVENTS,
    REQUIRED,
    STR,
    STRS,
    TS,
    FieldSpec,
    types_with,
)
from auditor.store.sql import quote, stream_key_sql

# Set False to send every line through the per-line path (the parity tests do).
ENABLED = True
# A piece the reader refuses is cut in this many parts; a part of at most LEAF_LINES lines
# that is still refused goes to the per-line path whole.
SPLIT = 8
LEAF_LINES = 16
# pyarrow's reader parses a block's chunks of this size on its own threads: 8 MB cut the
# ingest of bench/ingest.py's file by about 10% against one chunk a block, which kept the
# parse on one core while DuckDB waited for it (docs/benchmarks.md, session 61). Above
# reader.MAX_LINE_BYTES, so a line always fits in one chunk.
READ_BLOCK = 8 << 20
ROW_GROUP = 122_880  # DuckDB's

_ARROW = {
    INT: pa.int64(),
    STR: pa.string(),
    ID: pa.string(),
    NAME: pa.string(),
    LABEL: pa.string(),
    CARD: pa.string(),
    CARDS: pa.list_(pa.string()),
    STRS: pa.list_(pa.string()),
    IDS: pa.list_(pa.string()),
    AMOUNT: pa.decimal128(18, 2),
    TS: pa.string(),
    BOOL: pa.bool_(),
}
ENVELOPE = (("v", pa.int64()), ("ts", pa.string()), ("type", pa.string()), ("seq", pa.int64()))
SCHEMA = pa.schema([*ENVELOPE, *((f.name, _ARROW[f.kind]) for f in FIELDS.values())])
# Fields the format does not know are skipped by the reader, not typed: inferring their
# types recurses with their depth, and a line nested twenty thousand deep crashed it.
# `_keys_as_set` sends the lines that have such fields to the per-line path.
_PARSE = pj.ParseOptions(explicit_schema=SCHEMA, unexpected_field_behavior="ignore")

ID_PATTERN = f"^[{ID_CHARS}]{{1,{ID_MAX}}}$"
# A shoe, batch or dealer id; a dealer written as a number is left to the per-line path (the
# reader refuses a number in a string column).
NAME_PATTERN = f"^[{ID_CHARS}]{{1,{NAME_MAX}}}$"
# RFC 3339 as the per-line path takes it, less what is rare enough to leave to it: lower
# case t and z, and the leap second. The calendar is checked apart (`_times_ok`).
TS_PATTERN = (
    r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[T ]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?"
    r"(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$"
)
_EDGE_YEARS = r"^(000[01]|9999)-"
# An amount as the per-line path reads it without a second look: a plain number or a string
# of digits, at most 16 whole and 2 decimal places. Anything else (an exponent, `1.500`, a
# sign, spaces around the colon) takes the per-line path, which reads it as written. In a
# line without escapes `"amount":` is the key itself (a string holds no quote), unless an
# object the format does not know has one: such lines take the per-line path too.
AMOUNT_WRITTEN = r'"amount":(\d{1,16}(\.\d{1,2})?[,}\s]|"\d{1,16}(\.\d{1,2})?")'
# `-0` reads as 0, but the format's numbers are unsigned: a line with a whole number 0 is
# looked at for a minus after a colon.
MINUS = r":[ \t\r]*-"
INT_LIMIT = 10**15 - 1  # the per-line path takes at most 15 digits


@dataclass
class Split:
    """A block divided: `typed` holds the lines accepted here (one column per field of
    SCHEMA, then `line_no` and `raw`), `slow` the indices (into the block's lines) of the
    lines left to the per-line path. Blank lines are in neither: both paths skip them."""

    typed: pa.Table | None
    slow: np.ndarray


def split_block(
    block: bytes, ends: np.ndarray, first_line_no: int, refused: np.ndarray | None = None
) -> Split:
    """Read `block` (whole lines of UTF-8; `ends[i]` is the offset just past line i); the
    lines at indices `refused` go to the per-line path whatever they hold."""
    n = len(ends)
    starts = np.zeros(n, dtype=np.int64)
    starts[1:] = ends[:-1]
    objects = _objects(block, starts, ends)
    reader = _Reader(pa.py_buffer(block), starts, ends)
    reader.slow.append(np.flatnonzero(objects == _OTHER))
    # The reader is given runs of lines that start with `{` only: a line `null` at the start
    # of its input crashes it (pyarrow 26), and a blank line it would skip unseen.
    edges = np.flatnonzero(np.diff(np.concatenate(([0], objects == _OBJECT, [0])).astype(np.int8)))
    for lo, hi in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
        reader.read(lo, hi)
    tables, rows, slow = reader.tables, reader.rows, reader.slow
    if not tables:
        return Split(None, _cat(slow))
    typed = pa.concat_tables(tables)
    at = np.concatenate(rows)
    lines = _rows(_trimmed(block, ends), at)
    doubt = _escaped_lines(block, ends)
    if refused is not None and len(refused):
        doubt = np.concatenate((doubt, refused))
    ok = ~(_doubtful(typed, lines, block, ends, at) | np.isin(at, doubt))
    slow.append(at[~ok])
    if not ok.all():
        good = pa.array(np.flatnonzero(ok))
        typed, lines, at = typed.take(good), lines.take(good), at[np.flatnonzero(ok)]
    # One chunk a column again (READ_BLOCK's chunks copied together, ~0.5 s a 64 MB block):
    # left in the reader's chunks, they cut the batches DuckDB inserts short of its row
    # groups, and the 2M-event file's ingest took 21-23 s of CPU against 16-17 s.
    typed = typed.combine_chunks()
    typed = typed.append_column("line_no", pa.array(at + first_line_no))
    typed = aligned(typed.append_column("raw", lines))
    return Split(typed if typed.num_rows else None, np.sort(_cat(slow)))


def aligned(t: pa.Table) -> pa.Table:
    """`t` with every column chunked alike, in DuckDB's row groups (slices, no copy). DuckDB
    scans such a table much faster: the 2M-event file's typed rows insert in 1.9 s so, in
    2.9 s as the reader chunks them with `line_no` and `raw` in one piece."""
    return pa.Table.from_batches(t.to_batches(max_chunksize=ROW_GROUP), t.schema)


class _Reader:
    """pyarrow's reader over runs of a block's lines, cutting down what it refuses."""

    def __init__(self, buf: pa.Buffer, starts: np.ndarray, ends: np.ndarray) -> None:
        self.buf, self.starts, self.ends = buf, starts, ends
        self.tables: list[pa.Table] = []
        self.rows: list[np.ndarray] = []  # the line indices of each table's rows
        self.slow: list[np.ndarray] = []

    def read(self, lo: int, hi: int) -> bool:
        """Lines lo..hi, or as many of them as the reader takes; whether it took any."""
        try:
            begin = int(self.starts[lo])
            table = pj.read_json(
                pa.BufferReader(self.buf.slice(begin, int(self.ends[hi - 1]) - begin)),
                read_options=pj.ReadOptions(block_size=READ_BLOCK),
                parse_options=_PARSE,
            )
            if table.num_rows != hi - lo:  # two values on one line
                raise ValueError("lines and rows differ")
        except (pa.ArrowInvalid, ValueError):
            if hi - lo <= LEAF_LINES:
                self.slow.append(np.arange(lo, hi))
                return False
            step = -(-(hi - lo) // SPLIT)
            took = False
            for k, a in enumerate(range(lo, hi, step)):
                if k == 2 and not took:  # a form it never takes (a dealer written as a
                    self.slow.append(np.arange(a, hi))  # number on every line): stop
                    break
                took = self.read(a, min(a + step, hi)) or took
            return took
        self.tables.append(table)
        self.rows.append(np.arange(lo, hi))
        return True


def _trimmed(block: bytes, ends: np.ndarray) -> pa.Array:
    """Every line of the block without its line end, as the events table keeps it (`raw`):
    the block less its newlines, which is one fast copy, when there is no CR to trim too."""
    n = len(ends)
    if b"\r" not in block:
        newlines = np.arange(1, n + 1, dtype=np.int64)
        if n and block[-1:] != b"\n":
            newlines[-1] -= 1
        offsets = np.zeros(n + 1, dtype=np.int64)
        offsets[1:] = ends - newlines
        data = pa.py_buffer(block.replace(b"\n", b""))
        return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), data)
    offsets = np.zeros(n + 1, dtype=np.int64)
    offsets[1:] = ends
    every = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(block))
    return pc.utf8_rtrim(every, "\r\n")


def _keys_as_set(
    block: bytes, ends: np.ndarray, at: np.ndarray, fields_set: np.ndarray
) -> np.ndarray:
    """Per row (line `at[i]`): whether the line gives exactly the keys of the known fields it
    sets, `fields_set[i]` of them: no field the format does not know, none given twice, none
    set to null. In a line without escapes a string holds no quote, so its keys are its `":`
    (a key then a space then its colon is not counted, so a quote then a space is doubt).
    Counted over the whole block first, which is cheap; line by line only if that differs."""
    whole = np.frombuffer(block, dtype=np.uint8)
    ok = np.ones(len(at), dtype=bool)
    keys, spaced = 0, False
    for lo in range(0, len(whole), _WINDOW):  # small windows: no 64 MB temporaries
        key, gap = _key_ends(whole[lo : lo + _WINDOW + 1])
        keys += int(np.count_nonzero(key))
        spaced = spaced or bool(gap.any())
    if not spaced:
        outside = np.ones(len(ends), dtype=bool)
        outside[at] = False
        starts = np.concatenate(([0], ends[:-1]))
        elsewhere = sum(
            block.count(b'":', int(starts[i]), int(ends[i])) for i in np.flatnonzero(outside)
        )
        if keys - elsewhere == int(fields_set.sum()):
            return ok
    key, gap = _key_ends(whole)
    counts = np.bincount(np.searchsorted(ends, np.flatnonzero(key), side="right"),
                         minlength=len(ends))
    counts[np.searchsorted(ends, np.flatnonzero(gap), side="right")] = -1
    return counts[at] == fields_set


_WINDOW = 4 << 20


def _key_ends(window: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where a quote is followed by a colon (a key's end), and where by a space, tab or CR
    (or any control byte), which may be a key before a spaced colon."""
    quote, after = window[:-1] == ord('"'), window[1:]
    key = after == ord(":")
    np.logical_and(key, quote, out=key)
    gap = after <= ord(" ")
    np.logical_and(gap, quote, out=gap)
    return key, gap


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _rows(lines: pa.Array, at: np.ndarray) -> pa.Array:
    """`lines[at]` for sorted `at`; without a copy when `at` is a run of lines."""
    if len(at) and at[-1] - at[0] + 1 == len(at):
        return lines.slice(int(at[0]), len(at))
    return lines.take(pa.array(at))


_OBJECT, _BLANK, _OTHER = 0, 1, 2


def _objects(block: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per line: _OBJECT if it starts with `{`, _BLANK if it holds only spaces, tabs and line
    ends (both paths skip it), else _OTHER (the per-line path says what it is). The rare
    lines that do not start with `{` are looked at one by one."""
    kind = np.full(len(starts), _OBJECT, dtype=np.int8)
    whole = np.frombuffer(block, dtype=np.uint8)
    first = whole[np.minimum(starts, len(block) - 1)] if len(block) else whole[:0]
    for i in np.flatnonzero(first != ord("{")).tolist():
        kind[i] = _OTHER if block[starts[i] : ends[i]].strip(b" \t\r\n") else _BLANK
    return kind


def _np(mask: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A boolean result as numpy, null as False."""
    return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)


def _matches(values: pa.ChunkedArray | pa.Array, pattern: str) -> np.ndarray:
    return _np(pc.match_substring_regex(values, pattern))


def _escaped_lines(block: bytes, ends: np.ndarray) -> np.ndarray:
    """Indices of the lines holding a backslash: an escape (`"c\\u0061rd"` is not the type
    `card` to the per-line path, whose checks read the text as written). Found in the bytes,
    which is fast when there are none, as nearly always."""
    found: list[int] = []
    at = block.find(b"\\")
    while at >= 0:
        found.append(at)
        at = block.find(b"\\", at + 1)
    return np.searchsorted(ends, np.array(found, dtype=np.int64), side="right")


def _doubtful(
    t: pa.Table, lines: pa.Array, block: bytes, ends: np.ndarray, at: np.ndarray
) -> np.ndarray:
    """Rows (lines `at` of `block`) the fast path does not accept: a rule broken, or a form
    left to the per-line path. Errs on the side of doubt."""
    n = t.num_rows
    given = {name: _given(t.column(name)) for name in SCHEMA.names}
    fields_set = np.asarray(np.sum(list(given.values()), axis=0, dtype=np.int64))
    # A field the format does not know, or a key given twice or set to null: the per-line
    # path reads the keys itself.
    bad = ~_keys_as_set(block, ends, at, fields_set)
    coded = pc.dictionary_encode(t.column("type").combine_chunks())
    codes = np.asarray(pc.fill_null(coded.indices, -1).to_numpy(), dtype=np.int64)
    seen = {v: i for i, v in enumerate(coded.dictionary.to_pylist())}
    of_type = {name: codes == seen.get(name, -2) for name in EVENT_TYPES}
    known = np.zeros(n, dtype=bool)
    for m in of_type.values():
        known |= m
    bad |= ~known
    bad |= ~_np(pc.equal(t.column("v"), 1))
    seq = t.column("seq")
    bad |= ~_np(pc.and_(pc.greater_equal(seq, 0), pc.less_equal(seq, INT_LIMIT)))
    bad |= ~_times_ok(t.column("ts"))
    pit_event = np.zeros(n, dtype=bool)
    for name in PIT_EVENTS:
        pit_event |= of_type[name]
    bad |= ~pit_event & ~given["table"]
    for f in FIELDS.values():
        col = t.column(f.name)
        present = given[f.name]
        if not present.any():
            continue
        defined = np.zeros(n, dtype=bool)
        for name in types_with(f.name):
            defined |= of_type[name]
        # A field on a type that does not define it is an extra the per-line path keeps in
        # `raw` alone; rare, so left to it rather than nulled here.
        bad |= present & ~defined
        judged = present & ~bad
        if not judged.any():
            continue
        ok = _field_ok(f, col, lines, judged)
        for event_type, values in _enums(f.name).items():
            where = judged if event_type == "*" else judged & of_type[event_type]
            ok &= ~where | _np(pc.is_in(col, pa.array(values)))
        bad |= judged & ~ok
    for event_type, names in REQUIRED.items():
        for name in names:
            bad |= of_type[event_type] & ~given[name]
    zero = np.zeros(n, dtype=bool)
    for name in ("v", "seq", *(f.name for f in FIELDS.values() if f.kind == INT)):
        zero |= _np(pc.equal(t.column(name), 0))
    if zero.any():
        where = np.flatnonzero(zero & ~bad)
        bad[where] |= _matches(lines.take(pa.array(where)), MINUS)
    kind = t.column("kind")
    for value, names in ANNOUNCE_FIELDS.items():
        said = of_type["announce"] & _np(pc.equal(kind, value))
        for name in names:
            bad |= said & ~given[name]
    return bad


def _given(col: pa.ChunkedArray) -> np.ndarray:
    """Per row, whether the field is set (a poll's few rows set most fields on none)."""
    if col.null_count in (0, len(col)):
        return np.full(len(col), col.null_count == 0, dtype=bool)
    return _np(pc.is_valid(col))


def _enums(name: str) -> dict[str, tuple[str, ...]]:
    """The enumerations of a field: '*' for every type, else per type (the type's own list
    replaces the general one, as in the per-line path)."""
    out = {t: v for (t, n), v in ENUMS.items() if n == name}
    if "*" in out and len(out) > 1:
        raise AssertionError(f"{name}: both a general and a per-type enumeration")
    return out


def _field_ok(
    f: FieldSpec, col: pa.ChunkedArray, lines: pa.Array, judged: np.ndarray
) -> np.ndarray:
    """Whether each present value of `f` passes its kind's check (rows outside `judged` are
    not looked at and come out True)."""
    if f.kind == AMOUNT:  # read as written, in the line
        return _matches(lines, AMOUNT_WRITTEN) | ~judged
    if f.kind == INT:
        high = min(f.high if f.high is not None else INT_LIMIT, INT_LIMIT)
        good = _np(pc.and_(pc.greater_equal(col, f.low), pc.less_equal(col, high)))
    elif f.kind == STR:
        good = _np(pc.greater(pc.binary_length(col), 0))
    elif f.kind == ID:
        good = _matches(col, ID_PATTERN)
    elif f.kind in (NAME, LABEL):
        good = _matches(col, NAME_PATTERN)
    elif f.kind == CARD:
        good = _matches(col, CARD_PATTERN_SQL)
    elif f.kind in (CARDS, STRS, IDS):
        good = _lists_ok(f, col)
    elif f.kind == TS:
        good = _times_ok(col)
    elif f.kind == BOOL:
        good = np.ones(len(judged), dtype=bool)
    else:
        raise AssertionError(f"unknown field kind {f.kind}")
    return good | ~judged


def _lists_ok(f: FieldSpec, lists: pa.ChunkedArray) -> np.ndarray:
    """Every element a card (CARDS), an id (IDS, and at least one), a non-empty string."""
    lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
    values = pc.list_flatten(lists)
    parents = np.asarray(pc.list_parent_indices(lists).to_numpy(), dtype=np.int64)
    if f.kind == CARDS:
        elem = _matches(values, CARD_PATTERN_SQL)
    elif f.kind == IDS:
        elem = _matches(values, ID_PATTERN)
    else:
        elem = _np(pc.greater(pc.binary_length(values), 0))
    bad_parents = np.zeros(len(lists), dtype=bool)
    bad_parents[parents[~elem]] = True
    if f.kind == IDS:
        bad_parents |= np.asarray(pc.list_value_length(lists).to_numpy(zero_copy_only=False)) == 0
    return ~bad_parents


def _times_ok(ts: pa.ChunkedArray) -> np.ndarray:
    """RFC 3339 with an offset (TS_PATTERN), on a day the calendar has; the years 0, 1 and
    9999 are left to the per-line path, which knows which of their times fall outside the
    years 1 to 9999 in UTC (validate.FIRST_INSTANT)."""
    ok = _matches(ts, TS_PATTERN) & ~_matches(ts, _EDGE_YEARS)
    if ok.all():
        try:  # Arrow's own parse refuses 30 February; it is enough when all pass
            pc.cast(ts, pa.timestamp("us", tz="UTC"))
            return ok
        except pa.ArrowInvalid:
            pass
    where = np.flatnonzero(ok)
    if len(where) == 0:
        return ok
    sub = ts.take(pa.array(where))
    year = _int_slice(sub, 0, 4)
    month = _int_slice(sub, 5, 7)
    day = _int_slice(sub, 8, 10)
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    days = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[month] + (
        leap & (month == 2)
    )
    ok[where] = day <= days
    return ok


def _int_slice(values: pa.ChunkedArray, start: int, stop: int) -> np.ndarray:
    part = pc.utf8_slice_codeunits(values, start, stop)
    return np.asarray(pc.cast(part, pa.int32()).to_numpy(zero_copy_only=False), dtype=np.int64)


# A card as the per-line path writes it (`card_norm`): what the Arrow typing keeps as is.
_CARD_WRITTEN = r"^[2-9TJQKA][cdhs]$"
_PIT_TYPES = pa.array(PIT_EVENTS, pa.string())


def as_events(t: pa.Table, source_id: int | None) -> pa.Table | None:
    """The rows of a `Split.typed` chunk as `events` holds them (EVENT_COLUMNS, then
    `rejected`), typed in Arrow: what `typed_select` gives, without the SQL's 46 casts and
    expressions, which cost a poll of `watch` more than its few rows. None when a value is
    one only the SQL types as the per-line path does: a card not written as `Ts` (`10S`,
    `ts`), a time with more than six decimals of a second (Arrow refuses it, DuckDB cuts
    it). `source_id`: the rows' source, else their own `source_id` column."""
    n = t.num_rows
    try:
        ts = pc.cast(t.column("ts"), pa.timestamp("us", tz="UTC"))
    except pa.ArrowInvalid:
        return None
    cols: dict[str, pa.ChunkedArray | pa.Array] = {}
    cols["source_id"] = (
        t.column("source_id") if source_id is None
        else pa.array(np.full(n, int(source_id), dtype=np.int64)))
    cols["line_no"] = t.column("line_no")
    kind = t.column("type")
    cols["stream"] = pc.if_else(
        pc.is_in(kind, _PIT_TYPES),
        pc.binary_join_element_wise("pit:", t.column("pit"), ""),
        pc.binary_join_element_wise("table:", t.column("table"), ""))
    cols["seq"] = t.column("seq")
    cols["ts"] = ts
    cols["ts_offset_min"] = _offsets(t.column("ts"))
    cols["type"] = kind
    for f in FIELDS.values():
        c = t.column(f.name)
        if f.kind in (CARD, CARDS) and c.null_count < n:
            written = pc.list_flatten(c) if f.kind == CARDS else c
            if pc.all(pc.match_substring_regex(written, _CARD_WRITTEN)).as_py() is False:
                return None
        cols[f.column] = c
    cols["raw"] = t.column("raw")
    cols["rejected"] = pa.nulls(n, pa.string())
    return pa.table(cols)


def _offsets(ts: pa.ChunkedArray) -> pa.Array:
    """The UTC offset each time (TS_PATTERN: `Z` or `+hh:mm`) was written with, in minutes,
    as `ts_offset` gives it."""
    zulu = _np(pc.ends_with(ts, "Z"))
    tail = pc.if_else(pa.array(zulu), "+00:00", pc.utf8_slice_codeunits(ts, -6))
    hours = _int_slice(tail, 1, 3)
    minutes = _int_slice(tail, 4, 6)
    sign = np.where(_np(pc.starts_with(tail, "-")), -1, 1)
    out = np.where(zulu, 0, sign * (hours * 60 + minutes)).astype(np.int16)
    return pa.array(out, mask=~_np(pc.is_valid(ts)))


def typed_select(chunk: str, source_id_sql: str) -> str:
    """SELECT over a `Split.typed` chunk giving the events' rows, valued exactly as the
    per-line path values them (`validate.staging_select`)."""
    values = []
    for f in FIELDS.values():
        c = f'"{f.name}"'
        if f.kind == CARD:
            c = card_norm(c)
        elif f.kind == CARDS:
            c = f"list_transform({c}, lambda x: {card_norm('x')})"
        values.append(f"{c} AS {f.column}")
    pits = ", ".join(quote(t) for t in PIT_EVENTS)
    return f"""
SELECT {source_id_sql} AS source_id, line_no,
  CASE WHEN type IN ({pits}) THEN {stream_key_sql("pit", "pit")}
       ELSE {stream_key_sql("table", '"table"')} END AS stream,
  seq, {ts_cast("ts")} AS ts, {ts_offset("ts")} AS ts_offset_min, type,
  {", ".join(values)},
  raw, NULL::VARCHAR AS rejected
FROM {chunk}
"""
