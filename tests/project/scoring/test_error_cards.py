"""Scorecard schema 3 ties ``error`` to ``status`` (grader/schemas/scorecard.schema.json, grader.schema).

Every reader of an error card (the summary's flags, the exports, canary, check, the cluster's tallies) takes its
``error`` object; under schema 2 a card with ``status: error`` and ``error: null`` validated, and the summary then
failed on it. Writers emit version 3; a reader still reads version 2 under the same rule; 1 is too old, 4 too new.
"""

from __future__ import annotations

import copy
import json

import pytest

from grader import schema
from grader.cardtypes import Scorecard, error_of
from grader.scoring import scorecard


def _card() -> Scorecard:
    card = scorecard.new(
        assignment="attention-basics",
        max_score=6,
        path="alice",
        student="alice",
        isolation=scorecard.inprocess_isolation(),
        seed=1,
    )
    return scorecard.finished(card, seconds=0.5)


def _errored() -> Scorecard:
    return scorecard.with_error(_card(), "intake", "alice.zip: not a valid zip archive")


def test_writers_emit_the_current_version_and_both_kinds_of_card_validate(tmp_path):
    graded, errored = _card(), _errored()
    assert graded["schema_version"] == errored["schema_version"] == schema.SCHEMAS["scorecard"] == 3
    scorecard.write(errored, tmp_path / "e.json")
    back = json.loads((tmp_path / "e.json").read_text())
    schema.validate("scorecard", back)
    assert error_of(back) == {"kind": "intake", "message": "alice.zip: not a valid zip archive"}
    assert json.loads(scorecard.dumps(graded))["error"] is None


@pytest.mark.parametrize("version", [3, 2])
def test_an_error_card_without_its_error_is_refused_in_every_readable_version(version):
    card = {**_errored(), "error": None, "schema_version": version}
    with pytest.raises(schema.SchemaError) as refused:
        schema.validate("scorecard", card)
    said = str(refused.value)
    assert not isinstance(refused.value, schema.SchemaVersionError)
    assert (
        "at error: None is not of type 'object'" in said and "status error names its error" in said
    )
    card.pop("error")  # absent: the schema requires the key as before
    with pytest.raises(schema.SchemaError, match="'error' is a required property"):
        schema.validate("scorecard", card)


def test_a_graded_card_with_an_error_and_a_malformed_error_are_refused():
    graded = {**_card(), "error": {"kind": "grader", "message": "x"}}
    with pytest.raises(
        schema.SchemaError, match=r"at error: .* is not of type 'null' \(a card with status graded"
    ):
        schema.validate("scorecard", graded)
    for error in ({"kind": "grader"}, {"kind": "oops", "message": "x"}, "boom", []):
        with pytest.raises(schema.SchemaError, match="at error"):
            schema.validate("scorecard", {**_errored(), "error": error})


def test_a_version_2_card_is_still_read_and_never_written(tmp_path):
    old = {**copy.deepcopy(_errored()), "schema_version": 2}
    schema.validate("scorecard", old)  # what grader 2 wrote: every error card named its error
    assert old["schema_version"] == 2  # read as it is, not rewritten
    with pytest.raises(schema.SchemaVersionError, match="schema_version 2 is not 3: it is too old"):
        scorecard.write(old, tmp_path / "old.json")  # type: ignore[arg-type]
    assert not (tmp_path / "old.json").exists()


@pytest.mark.parametrize(
    ("version", "said"),
    [
        (1, "schema_version 1 is not 2 or 3: it is too old: regenerate it with this grader"),
        (4, "schema_version 4 is not 2 or 3: it is too new: upgrade the grader"),
        (True, "schema_version True is not 2 or 3: it is too old"),
        ("3", "schema_version '3' is not 2 or 3: it has no usable schema_version"),
        (None, "schema_version None is not 2 or 3: it has no usable schema_version"),
    ],
)
def test_other_versions_say_too_old_or_too_new(version, said):
    with pytest.raises(schema.SchemaVersionError, match="^scorecard " + said.replace("(", r"\(")):
        schema.validate("scorecard", {**_card(), "schema_version": version})


def test_an_unvalidated_error_card_without_its_error_raises_a_type_error():
    """error_of's guard stays for a card that never met the schema (one built in memory)."""
    with pytest.raises(TypeError, match="status error names no error"):
        error_of({**_errored(), "error": None})
