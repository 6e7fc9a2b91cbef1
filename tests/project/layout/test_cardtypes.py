"""grader.cardtypes.py: the scorecard's types say exactly what the scorecard schema says, key for key
(required and optional), and the enums agree."""

from __future__ import annotations

from typing import get_args

import pytest

from grader import cardtypes
from grader.schema import load_schema

SCHEMA = load_schema("scorecard")
PARTS = [
    (cardtypes.Scorecard, SCHEMA),
    (cardtypes.ExerciseEntry, SCHEMA["$defs"]["exercise"]),
    (cardtypes.TestEntry, SCHEMA["$defs"]["test"]),
    (cardtypes.Submission, SCHEMA["properties"]["submission"]),
    (cardtypes.StudentOutput, SCHEMA["properties"]["student_output"]),
    (cardtypes.GraderInfo, SCHEMA["properties"]["grader"]),
    (cardtypes.ErrorInfo, SCHEMA["$defs"]["error"]),
]


@pytest.mark.parametrize(("typed", "part"), PARTS, ids=[t.__name__ for t, _ in PARTS])
def test_required_and_optional_keys_are_the_schemas(typed, part):
    assert set(typed.__required_keys__) == set(part["required"])
    assert set(typed.__required_keys__) | set(typed.__optional_keys__) == set(part["properties"])


def test_timings_name_every_key_the_schema_allows():
    part = SCHEMA["properties"]["timings"]
    assert (
        set(cardtypes.Timings.__optional_keys__) == set(part["properties"]) >= set(part["required"])
    )


def test_the_enums_agree():
    assert set(get_args(cardtypes.Outcome)) == set(
        SCHEMA["$defs"]["test"]["properties"]["outcome"]["enum"]
    )
    status = get_args(cardtypes.Scorecard.__annotations__["status"])
    assert set(status) == set(SCHEMA["properties"]["status"]["enum"])


def test_a_drifted_type_is_seen():
    """The check is not vacuous: a part with one key too many (or too few) differs from the schema."""
    part = SCHEMA["$defs"]["test"]
    assert set(cardtypes.TestEntry.__required_keys__) | {"surplus"} != set(part["properties"])
    assert set(cardtypes.ExerciseEntry.__required_keys__) != set(
        SCHEMA["$defs"]["test"]["required"]
    )
