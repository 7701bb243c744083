"""The JSON Schema for one line of event log v1 (auditor/ingest/schema/event-log-v1.schema.json).

Checks it against the contract: the contract's own example, one good event of every type, the
variations the contract allows, and lines it forbids, each rejected for the field at fault (the
examples are in tests/helpers/events.py, shared with the ingest tests).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.events import (
    ACCEPTED,
    CONTRACT_EXAMPLE,
    REJECTED,
    SCHEMA,
    VALID_EVENTS,
    VALIDATOR,
    docs_example_lines,
)
from jsonschema import Draft202012Validator


def rejected_fields(event: Any) -> set[str]:
    """The top-level fields the schema's errors point at (a missing one counts as named)."""
    fields: set[str] = set()
    for error in VALIDATOR.iter_errors(event):
        if error.validator == "required":
            fields.update(f for f in error.validator_value if f not in error.instance)
        elif error.absolute_path:
            fields.add(str(error.absolute_path[0]))
        else:
            fields.add("<line>")
    return fields


def test_schema_is_valid_draft_2020_12() -> None:
    Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize(
    "line", CONTRACT_EXAMPLE.splitlines(), ids=lambda line: json.loads(line)["type"]
)
def test_contract_example_line_validates(line: str) -> None:
    assert rejected_fields(json.loads(line)) == set()


def test_every_event_type_of_the_schema_has_a_valid_example() -> None:
    assert set(VALID_EVENTS) == set(SCHEMA["properties"]["type"]["enum"])


@pytest.mark.parametrize("event", VALID_EVENTS.values(), ids=VALID_EVENTS.keys())
def test_valid_event_of_each_type_validates(event: dict[str, Any]) -> None:
    assert rejected_fields(event) == set()


@pytest.mark.parametrize("event", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_allowed_variation_validates(event: dict[str, Any]) -> None:
    assert rejected_fields(event) == set()


@pytest.mark.parametrize(("event", "field"), REJECTED.values(), ids=REJECTED.keys())
def test_bad_line_is_rejected_for_the_field_at_fault(event: dict[str, Any], field: str) -> None:
    assert rejected_fields(event) == {field}


@pytest.mark.parametrize("not_an_object", [[], "wager", 1, None])
def test_line_that_is_not_an_object_is_rejected(not_an_object: Any) -> None:
    assert not VALIDATOR.is_valid(not_an_object)


def test_docs_show_an_example_of_every_event_type() -> None:
    shown = {json.loads(line)["type"] for line in docs_example_lines()}
    assert shown == set(SCHEMA["properties"]["type"]["enum"])


@pytest.mark.parametrize("line", docs_example_lines(), ids=lambda line: json.loads(line)["type"])
def test_docs_example_line_validates(line: str) -> None:
    assert rejected_fields(json.loads(line)) == set()
