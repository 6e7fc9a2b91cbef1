"""assignments.json against its schema and against the suites it names."""

from __future__ import annotations

import json

import pytest

from grader import errors, manifest, schema
from grader.scoring.runner import run_suites
from tests.project.conftest import ROOT


@pytest.fixture(params=[a.id for a in manifest.load_all()])
def assignment(request: pytest.FixtureRequest) -> manifest.Assignment:
    """Here every assignment of the manifest is checked, not only the default one."""
    return manifest.load(assignment=request.param)


def test_the_default_is_attention_basics_and_a_manifest_without_it_defaults_to_its_first(tmp_path):
    assert manifest.load().id == manifest.DEFAULT_ASSIGNMENT
    document = json.loads((ROOT / "assignments.json").read_text())
    document["assignments"] = [a for a in document["assignments"] if a["id"] != manifest.DEFAULT_ASSIGNMENT]
    (tmp_path / "assignments.json").write_text(json.dumps(document))
    assert manifest.load(tmp_path / "assignments.json").id == document["assignments"][0]["id"]
    with pytest.raises(manifest.ManifestError, match=r"no assignment 'nope'.*known: "):
        manifest.load(assignment="nope")


def test_text_of_holds_one_assignment_and_loads_back(tmp_path):
    for spec in manifest.load_all():
        (tmp_path / "assignments.json").write_text(manifest.text_of(spec))
        again = manifest.load_all(tmp_path / "assignments.json")
        assert [a.id for a in again] == [spec.id] and again[0].exercises == spec.exercises


def test_manifest_matches_its_schema():
    schema.validate("assignments", json.loads((ROOT / "assignments.json").read_text()))


def test_a_wrong_schema_version_says_too_old_or_too_new():
    document = json.loads((ROOT / "assignments.json").read_text())
    with pytest.raises(schema.SchemaVersionError, match="too new"):
        schema.validate("assignments", {**document, "schema_version": 99})
    with pytest.raises(schema.SchemaVersionError, match="too old"):
        schema.validate("assignments", {**document, "schema_version": 0})


def test_a_manifest_error_names_the_offending_path(tmp_path):
    document = json.loads((ROOT / "assignments.json").read_text())
    document["assignments"][0]["exercises"][0]["points"] = "ten"
    bad = tmp_path / "assignments.json"
    bad.write_text(json.dumps(document))
    with pytest.raises(manifest.ManifestError, match="exercises/0/points") as caught:
        manifest.load(bad)
    assert isinstance(caught.value, errors.UsageError)  # the caller's mistake: one line and exit 2, no traceback


def test_total_is_100_and_modules_are_unique(assignment):
    assert assignment.max_points == 100
    assert len({e.module for e in assignment.exercises}) == len(assignment.exercises)
    for ex in assignment.exercises:
        assert (ROOT / "solutions" / f"{ex.module}.py").is_file(), ex.module
        assert (ROOT / "exercises" / f"{ex.module}.py").is_file(), ex.module


@pytest.mark.parametrize("suite", ["public", "hidden"])
def test_every_test_belongs_to_its_exercise_and_points_add_up(assignment, suite):
    results, _ = run_suites(assignment.suite_files(suite), extra_args=["--collect-only"])
    assert results, "no tests collected"
    per_file: dict[str, float] = {}
    for r in results:
        file_exercise = r.id.split("::")[0].rsplit("test_", 1)[1].removesuffix(".py")
        assert r.exercise == file_exercise, f"{r.id}: marked exercise {r.exercise!r}, file is {file_exercise!r}"
        assert r.max_points > 0 or r.cuda, f"{r.id}: no points marker"
        if not r.cuda:
            per_file[r.exercise] = per_file.get(r.exercise, 0.0) + r.max_points
    for ex in assignment.exercises:
        assert per_file.get(ex.id) == pytest.approx(ex.points), f"{suite}/{ex.id}: tests sum to {per_file.get(ex.id)}"


def test_exercise_names_exist_in_the_solutions(assignment, monkeypatch):
    import importlib

    monkeypatch.syspath_prepend(str(assignment.root))  # `solutions` is a package of the checkout, not installed
    for ex in assignment.exercises:
        module = importlib.import_module(f"solutions.{ex.module}")
        missing = [n for n in ex.names if not hasattr(module, n)]
        assert not missing, f"solutions/{ex.module}.py lacks {missing}"
