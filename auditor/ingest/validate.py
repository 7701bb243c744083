"""Bulk validation of log lines against event log v1, as one DuckDB SELECT.

Each line is parsed once (`json_transform` to raw JSON texts per field) and its keys listed
(`json_keys`, so a key given twice is refused), then checked with SQL predicates. The SELECT
yields, per line, either a reason (the first rule it breaks, in words a user can act on) or
the typed values for the events table. Checking a few million lines a second this way is
what lets ingest keep pace with DuckDB's own loader.

DuckDB's cost to parse and bind the statement grows with its text, and it is paid again
each time a chunk is staged (a file or block of one bad line included): so the statement
is written for the event types the chunk holds (`present_types`), a failing field's message
once however many types check that field, and an id message's repeated parts bound once.
"""

from __future__ import annotations

import duckdb

from auditor.rules.cards import CARD_PATTERN_SQL
from auditor.store.events import (
    AMOUNT,
    ANNOUNCE_FIELDS,
    ANY_EVENT,
    BOOL,
    CARD,
    CARDS,
    ENUMS,
    EVENT_TYPES,
    FIELDS,
    ID,
    ID_CHARS,
    ID_CHARS_TEXT,
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
    fields_of,
    types_with,
)
from auditor.store.sql import is_stream_sql, quote, stream_key_sql
from auditor.store.stamps import FIRST_INSTANT, LAST_INSTANT

ID_RE = f'"[{ID_CHARS}]{{1,{ID_MAX}}}"'
NAME_RE = f"[{ID_CHARS}]{{1,{NAME_MAX}}}"  # the decoded text of a name
# RFC 3339 date-time with its ranges (second 60 is a leap second); the calendar (30 February)
# is left to DuckDB's cast.
_DATE = r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
_TIME = r"([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?"
TS_RE = f'"{_DATE}[Tt ]{_TIME}([Zz]|[+-]([01]\\d|2[0-3]):[0-5]\\d)"'
TS_NAIVE_RE = r'"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?"'
# The shape alone, ranges unchecked: for telling "month 13" from "not a time at all".
TS_SHAPE_RE = r'"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})"'
CARD_RE = '"' + CARD_PATTERN_SQL.strip("^$") + '"'
# An amount as written: a JSON number's text is read from the line itself (the JSON parser
# goes through a double, which would turn 1.0000000000000001 into 1.0), a string's from
# inside its quotes. DECIMAL(18,2) holds 16 whole digits.
AMOUNT_RE = r"\d{1,16}(\.\d{1,2})?"
AMOUNT_EXP_RE = r"\d+(\.\d+)?[eE][+-]?\d{1,3}"


def raw(name: str) -> str:
    """The field's raw JSON text, NULL when absent or JSON null (json_transform maps both to
    NULL)."""
    return f"r_{name}"


def written(name: str) -> str:
    """An amount field's text as the line wrote it (see AMOUNT_RE)."""
    return f"w_{name}"


def _written_sql(name: str) -> str:
    """A number's text is looked up in the line; the first `"amount": <number>` there is the
    event's own only if it has the same value as the parsed field (a nested object or an
    escaped key can hold the first match), else the parsed field's text stands."""
    r = raw(name)
    found = f"""regexp_extract(line, '"{name}"\\s*:\\s*(-?[0-9][0-9.eE+-]*)', 1)"""
    same = f"TRY_CAST({found} AS DOUBLE) = TRY_CAST({r} AS DOUBLE)"
    return (
        f"CASE WHEN left({r}, 1) = '\"' THEN {_unquote(r)} "
        f"WHEN {r} IS NOT NULL THEN (CASE WHEN {same} THEN {found} ELSE {r} END) "
        f"END AS {written(name)}"
    )


def _unquote(r: str) -> str:
    return f"substr({r}, 2, length({r}) - 2)"


def _shown(r: str) -> str:
    """The offending value as a message shows it (shortened)."""
    return f"CASE WHEN length({r}) > 40 THEN left({r}, 37) || '...' ELSE {r} END"


def _enum_values(event_type: str, name: str) -> tuple[str, ...] | None:
    return ENUMS.get((event_type, name)) or ENUMS.get(("*", name))


def _in_list(values: tuple[str, ...], quoted: bool = True) -> str:
    return ", ".join(quote(f'"{v}"' if quoted else v) for v in values)


def field_check(f: FieldSpec) -> tuple[str, str]:
    """(condition that the present value is valid, message SQL when it is not)."""
    r = raw(f.name)
    name = quote(f.name)
    shown = _shown(r)
    if f.kind == INT:
        high = f.high if f.high is not None else 10**15
        cond = (
            rf"regexp_full_match({r}, '\d{{1,15}}') AND "
            f"TRY_CAST({r} AS BIGINT) BETWEEN {f.low} AND {high}"
        )
        return cond, f"{name} || ' must be a whole number from {f.low} to {high}, not ' || {shown}"
    if f.kind == STR:
        cond = f"left({r}, 1) = '\"' AND length({r}) > 2"
        return cond, f"{name} || ' must be a non-empty string, not ' || {shown}"
    if f.kind == LABEL:
        number = rf"regexp_full_match({r}, '\d{{1,{NAME_MAX}}}')"
        cond = f"{number} OR ({_name_ok(r)})"
        return cond, _id_message(f, "a name or a whole number", number)
    if f.kind == NAME:
        return _name_ok(r), _id_message(f, "a string")
    if f.kind == ID:
        cond = f"regexp_full_match({r}, {quote(ID_RE)})"
        return cond, _id_message(f, "a string")
    if f.kind == CARD:
        cond = f"regexp_full_match({r}, {quote(CARD_RE)})"
        return cond, (
            f"{name} || ' ' || {shown} || ' is not a card "
            "(rank A 2-9 T J Q K or 10, then suit c d h s)'"
        )
    if f.kind == CARDS:
        cond = (
            f"left({r}, 1) = '[' AND coalesce(list_bool_and(list_transform("
            f"try(json_transform({r}, '[\"JSON\"]')), "
            f"lambda x: coalesce(regexp_full_match(x, {quote(CARD_RE)}), false))), true)"
        )
        return cond, f'{name} || \' must be a list of cards like ["3h","Kc"], not \' || {shown}'
    if f.kind in (STRS, IDS):
        elem = ID_RE if f.kind == IDS else r'"([^"\\]|\\.)+"'
        cond = (
            f"left({r}, 1) = '[' AND coalesce(list_bool_and(list_transform("
            f"try(json_transform({r}, '[\"JSON\"]')), "
            f"lambda x: coalesce(regexp_full_match(x, {quote(elem)}), false))), true)"
        )
        if f.kind == IDS:  # a list of tables must name at least one
            cond += f" AND {r} <> '[]'"
        return cond, f"{name} || ' must be a list of names, not ' || {shown}"
    if f.kind == AMOUNT:
        a = written(f.name)
        # Shown as written: a string with its quotes, a number as its text in the line.
        d = f"(CASE WHEN left({r}, 1) = '\"' THEN {r} ELSE {a} END)"
        # 1.0E7 (as Java writes ten million) is fine when it is exact to the cent.
        exact = f"TRY_CAST({a} AS DECIMAL(38,20))"
        cond = (
            f"regexp_full_match({a}, {quote(AMOUNT_RE)}) OR "
            f"(left({r}, 1) <> '\"' AND regexp_full_match({a}, {quote(AMOUNT_EXP_RE)}) "
            f"AND {exact} < 1e16 "
            f"AND {exact} = TRY_CAST({exact} AS DECIMAL(18,2)))"
        )
        msg = (
            f"CASE WHEN {a} IS NULL THEN {name} || ' ' || {shown} || ' is not a decimal amount' "
            f"WHEN starts_with({a}, '-') THEN {name} || ' ' || {d} || ' is negative' "
            f"WHEN left({r}, 1) <> '\"' AND regexp_full_match({a}, {quote(AMOUNT_EXP_RE)}) THEN "
            f"{name} || ' ' || {d} || ' is not a whole number of cents' "
            rf"WHEN regexp_full_match({a}, '\d+\.\d{{3,}}') THEN {name} || ' ' || {d} || "
            "' has more than 2 decimal places' "
            rf"WHEN regexp_full_match({a}, '\d{{17,}}(\.\d+)?') THEN {name} || ' ' || {d} || "
            "' is too large (at most 16 whole digits)' "
            f"ELSE {name} || ' ' || {d} || ' is not a decimal amount' END"
        )
        return cond, msg
    if f.kind == TS:
        cond = f"regexp_full_match({r}, {quote(TS_RE)}) AND {_ts_value(r)} IS NOT NULL"
        return cond, _ts_message(name, r)
    if f.kind == BOOL:
        return f"{r} IN ('true', 'false')", f"{name} || ' must be true or false, not ' || {shown}"
    raise AssertionError(f"unknown field kind {f.kind}")


def _name_ok(r: str) -> str:
    """A JSON string whose text (escapes decoded) is 1-64 of the id alphabet."""
    return (f"left({r}, 1) = '\"' AND "
            f"coalesce(regexp_full_match({_json_string(r)}, {quote(NAME_RE)}), false)")


def _id_message(f: FieldSpec, form: str, allowed: str = "false") -> str:
    """Why an id is refused, naming the first character outside the alphabet as U+XXXX and
    where it is: an invisible or look-alike character must be visible in the message.
    `allowed`: SQL true where the value is good in another form (a dealer's number)."""
    r, name = raw(f.name), quote(f.name)
    most = ID_MAX if f.kind == ID else NAME_MAX
    rule = f"1-{most} characters of {ID_CHARS_TEXT}"
    # The decoded text, its first bad character and where it is are each written once.
    text, bad, at = "t", "b", "instr(t, b)"
    message = (
        f"CASE WHEN {text} IS NULL AND NOT {allowed} THEN {name} || "
        f"{quote(f' must be {form} of {rule}, not ')} || {_shown(r)} "
        f"WHEN {text} = '' THEN {name} || {quote(f' is empty: an id is {rule}')} "
        f"WHEN {bad} <> '' THEN {name} || ' has ' || printf('U+%04X', unicode({bad})) || "
        f"' at character ' || {at} || CASE WHEN {at} > 1 THEN ', after ' || "
        f"{_shown(f'to_json(left({text}, {at} - 1))::VARCHAR')} ELSE '' END || "
        f"{quote(f': an id is {rule}, with no space, invisible or non-ASCII character')} "
        f"WHEN length({text}) > {most} THEN {name} || ' is ' || length({text}) || "
        f"{quote(f' characters long: an id is {rule}')} "
        f"ELSE {name} || {quote(f' must be {rule}, written without escapes, not ')} || "
        f"{_shown(r)} END"
    )
    decoded = f"CASE WHEN left({r}, 1) = '\"' THEN {_json_string(r)} END"
    first_bad = f"regexp_extract(t, {quote(f'[^{ID_CHARS}]')})"
    return _let(decoded, "t", _let(first_bad, "b", message))


def _let(value: str, name: str, body: str) -> str:
    """`body` with `name` bound to `value`: an expression used many times in a message is
    then written (and bound by DuckDB) once."""
    return f"list_transform([{value}], lambda {name}: {body})[1]"


def _ts_message(name: str, r: str) -> str:
    shown = _shown(r)
    return (
        f"CASE WHEN regexp_full_match({r}, {quote(TS_NAIVE_RE)}) THEN {name} || ' ' || {shown} || "
        "' has no UTC offset (write Z or +hh:mm)' "
        f"WHEN regexp_full_match({r}, {quote(TS_RE)}) AND {ts_cast(_unquote(r))} IS NOT NULL "
        f"THEN {name} || ' ' || {shown} || "
        "' falls outside the years 1 to 9999 in UTC (no clock of a table system reads it)' "
        f"WHEN regexp_full_match({r}, {quote(TS_SHAPE_RE)}) THEN {name} || ' ' || {shown} || "
        "' is not a real date and time' "
        f"ELSE {name} || ' ' || {shown} || ' is not an RFC 3339 time' END"
    )


def field_value(f: FieldSpec) -> str:
    """SQL giving the typed value; only trusted where the line passed every check."""
    r = raw(f.name)
    if f.kind == INT:
        return f"TRY_CAST({r} AS BIGINT)"
    if f.kind == STR:
        return _json_string(r)
    if f.kind == LABEL:
        return f"CASE WHEN left({r}, 1) = '\"' THEN {_json_string(r)} ELSE {r} END"
    if f.kind == ID:
        return _unquote(r)
    if f.kind == NAME:
        return _json_string(r)
    if f.kind == CARD:
        return card_norm(_unquote(r))
    if f.kind == CARDS:
        cards = f"try(json_transform({r}, '[\"VARCHAR\"]'))"
        return f"list_transform({cards}, lambda x: {card_norm('x')})"
    if f.kind in (STRS, IDS):
        return f"try(json_transform({r}, '[\"VARCHAR\"]'))"
    if f.kind == AMOUNT:
        return f"TRY_CAST({written(f.name)} AS DECIMAL(18,2))"
    if f.kind == TS:
        return _ts_value(r)
    if f.kind == BOOL:
        return f"({r} = 'true')"
    raise AssertionError(f"unknown field kind {f.kind}")


def _json_string(r: str) -> str:
    """A JSON string's text: strip the quotes, and parse only when it holds an escape."""
    return (
        f"CASE WHEN contains({r}, '\\') THEN json_extract_string({r}, '$') "
        f"ELSE {_unquote(r)} END"
    )


# A stamp outside the instants a Python datetime holds (store/stamps.py; 9999-12-31 at -05:00
# is in the year 10000 in UTC) is no table system's clock reading, and every check after
# ingest that reads it would fail on it: the line goes to quarantine, kept.
def _ts_value(r: str) -> str:
    """The time of an RFC 3339 field (quoted) inside the years 1 to 9999 in UTC; NULL when it
    is not a time or is outside them."""
    return _let(ts_cast(_unquote(r)), "v",
                f"CASE WHEN v BETWEEN {FIRST_INSTANT} AND {LAST_INSTANT} THEN v END")


def ts_cast(s: str) -> str:
    """An RFC 3339 text (unquoted) as TIMESTAMPTZ. RFC 3339 allows t and z in lower case;
    DuckDB's cast wants them upper, and knows no leap second (23:59:60 is taken as the
    instant after 23:59:59)."""
    s = f"upper({s})"
    leap = f"substr({s}, 18, 2) = '60'"
    fixed = f"CASE WHEN {leap} THEN left({s}, 17) || '59' || substr({s}, 20) ELSE {s} END"
    return (
        f"(TRY_CAST({fixed} AS TIMESTAMPTZ) + "
        f"CASE WHEN {leap} THEN INTERVAL 1 SECOND ELSE INTERVAL 0 SECOND END)"
    )


def ts_offset(s: str) -> str:
    """The UTC offset an RFC 3339 text (unquoted) was written with, in minutes."""
    return (
        f"CASE WHEN upper(right({s}, 1)) = 'Z' THEN 0 "
        f"ELSE (CASE WHEN substr({s}, -6, 1) = '-' THEN -1 ELSE 1 END) "
        f"* (TRY_CAST(substr({s}, -5, 2) AS INTEGER) * 60 "
        f"+ TRY_CAST(substr({s}, -2, 2) AS INTEGER)) END"
    )


def card_norm(s: str) -> str:
    """`10S`, `ts`, `Ts` -> `Ts`."""
    return (
        f"(CASE WHEN length({s}) = 3 THEN 'T' ELSE upper(left({s}, 1)) END || lower(right({s}, 1)))"
    )


def _reason_sql(types: tuple[str, ...]) -> str:
    """One CASE: the first rule the line breaks, or NULL. Only the checks of `types` are
    written: a line of another known type stops the statement (see `staging_select`)."""
    whens: list[str] = [
        "WHEN j IS NULL AND NOT json_valid(line) THEN 'not valid JSON'",
        "WHEN j IS NULL OR left(ltrim(line), 1) <> '{' THEN 'not a JSON object'",
        f"WHEN {_repeats_a_key()} THEN {_repeated_keys_message()}",
        "WHEN r_v IS NULL THEN 'missing field \"v\" (format version)'",
        "WHEN r_v NOT IN ('1', '1.0') THEN 'format version v=' || "
        + _shown("r_v")
        + " || ' is not supported (this reader knows v1)'",
        "WHEN r_type IS NULL THEN 'missing field \"type\"'",
        f"WHEN r_type NOT IN ({_in_list(EVENT_TYPES)}) THEN 'unknown event type ' || "
        + _shown("r_type"),
        "WHEN r_ts IS NULL THEN 'missing field \"ts\"'",
        f"WHEN NOT (regexp_full_match(r_ts, {quote(TS_RE)}) AND {_ts_value('r_ts')} IS NOT NULL) "
        "THEN " + _ts_message("'ts'", "r_ts"),
        "WHEN r_seq IS NULL THEN 'missing field \"seq\"'",
        r"WHEN NOT regexp_full_match(r_seq, '\d{1,15}') THEN 'seq must be a whole number, not ' || "
        + _shown("r_seq"),
        f"WHEN r_type NOT IN ({_in_list(PIT_EVENTS)}) AND r_table IS NULL THEN "
        "type || ' event has no \"table\"'",
    ]
    for name in (*ANY_EVENT, "table"):
        whens += _field_whens(None, FIELDS[name], types)
    # Reached only by a line of a known type (the WHENs above refuse any other).
    unstaged = f"error({quote(_UNSTAGED)} || type)"
    if types:
        per_type = " ".join(f"WHEN {quote(t)} THEN {_type_reason_sql(t)}" for t in types)
        whens.append(f"ELSE (CASE type {per_type} ELSE {unstaged} END)")
    else:
        whens.append(f"ELSE {unstaged}")
    return "CASE " + "\n  ".join(whens) + " END"


_KEYS = "json_keys(line)"
# Shown by name in a reason: more repeated keys than this are counted, not named.
_REPEATED_SHOWN = 3


def _repeats_a_key() -> str:
    """A key given twice at the top of the object. JSON leaves such a line's meaning open
    (DuckDB reads the first value, Python's json the last), so it is refused
    before any field is judged: whichever value a check read, another reader sees another.

    Listing the keys is cheap; telling them distinct costs a hash per key, so that is done
    only where the keys outnumber the fields the line sets (an extra field, a null or a
    repeat); a line of the format's fields alone, each set once, is the common case."""
    fields_set = " + ".join(
        f"({raw(n)} IS NOT NULL)::INTEGER" for n in ("v", "ts", "type", "seq", *FIELDS)
    )
    return (
        f"(CASE WHEN len({_KEYS}) = {fields_set} THEN false "
        f"ELSE len({_KEYS}) <> list_unique({_KEYS}) END)"
    )


def _repeated_keys_message() -> str:
    """`key "amount" is given twice`, one clause per repeated key in the order the line first
    gives them (JSON escapes decoded: "\\u0061mount" is "amount")."""
    k = _KEYS
    repeated = (
        f"list_filter({k}, lambda x, i: list_position({k}, x) = i "
        f"AND list_contains(list_slice({k}, i + 1, len({k})), x))"
    )
    times = f"len(list_filter({k}, lambda y: y = x))"
    clause = (
        f"'key ' || {_shown('to_json(x)::VARCHAR')} || ' is given ' || "
        f"CASE WHEN {times} = 2 THEN 'twice' ELSE {times} || ' times' END"
    )
    named = f"list_transform(list_slice({repeated}, 1, {_REPEATED_SHOWN}), lambda x: {clause})"
    more = f"len({repeated}) - {_REPEATED_SHOWN}"
    return (
        f"array_to_string({named}, '; ') || "
        f"CASE WHEN {more} = 1 THEN '; and 1 more key is given more than once' "
        f"WHEN {more} > 1 THEN '; and ' || {more} || ' more keys are given more than once' "
        "ELSE '' END"
    )


def _field_whens(
    event_type: str | None, f: FieldSpec, types: tuple[str, ...] = EVENT_TYPES
) -> list[str]:
    """WHENs for one present field: its kind's check, then its enumeration if it has one.

    `event_type` None: the field is checked on every type of `types` that defines it.
    """
    has = _has(f.name, types) if event_type is None else f"{raw(f.name)} IS NOT NULL"
    cond, _ = field_check(f)
    whens = [f"WHEN {has} AND NOT ({cond}) THEN {quote(_MARK + f.name)}"]
    values = _enum_values(event_type or "*", f.name)
    if values:
        whens.append(
            f"WHEN {has} AND {raw(f.name)} NOT IN ({_in_list(values)}) THEN "
            f"{quote(f.name + ' must be one of ' + ', '.join(values))} || ', not ' || "
            f"{_shown(raw(f.name))}"
        )
    return whens


# A field whose check fails is named after this mark; its message (`field_check`) is then
# written once in the statement, however many of its types check the field.
_MARK = chr(1)


def _messages_sql(why: str, types: tuple[str, ...]) -> str:
    """The reason `why` with a mark replaced by the message of the field it names."""
    checked = set(ANY_EVENT) | {"table"}
    for t in types:
        checked |= fields_of(t)
    names = sorted(checked, key=list(FIELDS).index)
    cases = " ".join(
        f"WHEN {quote(_MARK + n)} THEN {field_check(FIELDS[n])[1]}" for n in names
    )
    return (
        f"CASE WHEN left({why}, 1) = {quote(_MARK)} THEN (CASE {why} {cases} END) "
        f"ELSE {why} END"
    )


def _type_reason_sql(event_type: str) -> str:
    """The checks of one type's own fields: only rows of that type pay for them."""
    whens = [
        f"WHEN {raw(name)} IS NULL THEN {quote(_no_field(event_type + ' event', name))}"
        for name in REQUIRED[event_type]
    ]
    own = sorted(fields_of(event_type) - set(ANY_EVENT) - {"table"}, key=list(FIELDS).index)
    for name in own:
        whens += _field_whens(event_type, FIELDS[name])
    if event_type == "announce":
        for kind, names in ANNOUNCE_FIELDS.items():
            for name in names:
                whens.append(
                    f"WHEN r_kind = {quote(chr(34) + kind + chr(34))} AND {raw(name)} IS NULL "
                    f"THEN {quote(_no_field(kind + ' announcement', name))}"
                )
    return f"(CASE {' '.join(whens)} END)" if whens else "NULL"


def _has(name: str, types: tuple[str, ...] = EVENT_TYPES) -> str:
    """The field is present on a type that defines it (elsewhere it is an unknown extra);
    of the types that define it, only those of `types` are named."""
    if len(types_with(name)) == len(EVENT_TYPES):
        return f"{raw(name)} IS NOT NULL"
    on = tuple(t for t in types_with(name) if t in types)
    if not on:
        return "false"
    return f"{raw(name)} IS NOT NULL AND type IN ({_in_list(on, quoted=False)})"


def _no_field(event_type: str, name: str) -> str:
    return f'{event_type} has no "{name}"'


def names_its_event_sql(stream: str = "stream", seq: str = "seq", raw_line: str = "raw") -> str:
    """Whether a rejected line still says which event it is: its stream id and seq are
    written as the format writes them (an id string, a whole number), so it can be held
    against an event of another file. A seq of 7.0 or a table of 12345 is not taken at its
    word: the cast that made `stream` and `seq` would read those as 7 and "234".

    For the few rejected rows only: it parses the line again."""
    value = (
        f"CAST(try(CASE WHEN {is_stream_sql('pit', stream)} THEN json_extract({raw_line}, '$.pit') "
        f"ELSE json_extract({raw_line}, '$.table') END) AS VARCHAR)"
    )
    written_seq = f"CAST(try(json_extract({raw_line}, '$.seq')) AS VARCHAR)"
    return (
        f"({stream} IS NOT NULL AND {seq} IS NOT NULL AND coalesce("
        rf"regexp_full_match({written_seq}, '\d{{1,15}}') "
        f"AND regexp_full_match({value}, {quote(ID_RE)}), false))"
    )


STRUCT_SPEC = "{" + ", ".join(f'"{n}": "JSON"' for n in ("v", "ts", "type", "seq", *FIELDS)) + "}"
_UNSTAGED = "a line's event type was not among the staged types: "


def _fields_sql(chunk: str, source_id_sql: str) -> str:
    """The CTEs `parsed` and `fields` (each field's raw JSON text) and the start of `typed`
    (each line's event type as written, NULL unless a string)."""
    raws = ", ".join(
        f"CAST(j.{n} AS VARCHAR) AS {raw(n)}"
        for n in ("v", "ts", "type", "seq", *FIELDS)
    )
    return f"""
WITH parsed AS (
  SELECT {source_id_sql} AS source_id, line_no, rtrim(line, chr(13) || chr(10)) AS line,
         utf8_ok,
         try(json_transform(line, {quote(STRUCT_SPEC)})) AS j
  FROM {chunk}
  WHERE length(rtrim(line, ' ' || chr(9) || chr(13) || chr(10))) > 0
), fields AS (
  SELECT source_id, line_no, line, utf8_ok, j, {raws} FROM parsed
), typed AS (
  SELECT *, CASE WHEN left(r_type, 1) = '"' THEN substr(r_type, 2, length(r_type) - 2) END
            AS type"""


def _column_sql(f: FieldSpec, types: tuple[str, ...]) -> str:
    """A field's events column: its value where the line's type defines it, else NULL."""
    has = _has(f.name, types)
    if len(types_with(f.name)) == len(EVENT_TYPES):
        return field_value(f)
    if has == "false":
        return f"CAST(NULL AS {f.sql_type})"
    return f"CASE WHEN {has} THEN {field_value(f)} END"


# Past this many lines, reading a chunk's types costs more than the shorter statement saves
# (about 1 microsecond a line against about 0.2 s a statement, measured by bench/staging.py).
ALL_TYPES_LINES = 100_000


def present_types(
    con: duckdb.DuckDBPyConnection, chunk: str, lines: int = 0
) -> tuple[str, ...]:
    """The event types the lines of `chunk` (as `staging_select` takes it) are of, read as
    `staging_select` reads them: the types its statement must be written for. A chunk of
    more than ALL_TYPES_LINES `lines` is given every type, unread."""
    if lines > ALL_TYPES_LINES:
        return EVENT_TYPES
    found = {
        r[0]
        for r in con.execute(
            f"{_fields_sql(chunk, 'NULL')} FROM fields) SELECT DISTINCT type FROM typed"
        ).fetchall()
    }
    return tuple(t for t in EVENT_TYPES if t in found)


def staging_select(
    chunk: str, source_id_sql: str, types: tuple[str, ...] = EVENT_TYPES
) -> str:
    """SELECT over a chunk(line_no, line, utf8_ok[, source_id]) giving the events' rows;
    `source_id_sql` is a constant, or the chunk's column when it holds several files.

    Only the checks and columns of `types` are written (each type's own checks are most of
    the statement, and DuckDB's cost to bind it grows with its length): given the types
    present (`present_types`), the rows are those of the statement for every type. A line
    of a known type left out of `types` stops the statement with an error, never a row
    judged without its type's checks."""
    values = ",\n  ".join(f"{_column_sql(f, types)} AS {f.column}" for f in FIELDS.values())
    pit_types = _in_list(PIT_EVENTS, quoted=False)
    amounts = ", ".join(_written_sql(f.name) for f in FIELDS.values() if f.kind == AMOUNT)
    return f"""{_fields_sql(chunk, source_id_sql)},
         {amounts}
  FROM fields
), judged AS (
  SELECT *,
    CASE WHEN NOT utf8_ok THEN 'not valid UTF-8 text' ELSE {_reason_sql(types)} END AS why
  FROM typed
)
SELECT source_id, line_no, {_messages_sql("why", types)} AS rejected,
  CASE WHEN type IN ({pit_types}) THEN {stream_key_sql("pit", field_value(FIELDS["pit"]))}
       ELSE {stream_key_sql("table", field_value(FIELDS["table"]))} END AS stream,
  TRY_CAST(r_seq AS BIGINT) AS seq,
  CASE WHEN regexp_full_match(r_ts, {quote(TS_RE)}) THEN {_ts_value("r_ts")} END AS ts,
  {ts_offset(_unquote('r_ts'))} AS ts_offset_min,
  type,
  {values},
  line AS raw
FROM judged
"""
