"""assignments.json against its schema and against the suites it names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader import errors, schema
from grader.check import local as check
from grader.cli.main import main
from grader.course import manifest
from grader.scoring.runner import run_suites
from tests.project.support.common import ROOT, course_copy


@pytest.fixture(params=[a.id for a in manifest.load_all()])
def assignment(request: pytest.FixtureRequest) -> manifest.Assignment:
    """Here every assignment of the manifest is checked, not only the default one."""
    return manifest.load(assignment=request.param)


def test_the_default_is_attention_basics_and_a_manifest_without_it_defaults_to_its_first(tmp_path):
    assert manifest.load().id == manifest.DEFAULT_ASSIGNMENT
    document = json.loads((ROOT / "assignments.json").read_text())
    document["assignments"] = [
        a for a in document["assignments"] if a["id"] != manifest.DEFAULT_ASSIGNMENT
    ]
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


@pytest.mark.parametrize("kind", sorted(schema.SCHEMAS))
def test_every_packaged_schema_is_a_valid_draft_2020_12_schema(kind):
    """Checked here, once, instead of on every command's first validation (0.07 s of a grade)."""
    js = schema._jsonschema()
    document = schema.load_schema(kind)
    js.Draft202012Validator.check_schema(document)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    with pytest.raises(js.exceptions.SchemaError):  # the check bites: a broken schema is refused
        js.Draft202012Validator.check_schema({**document, "type": "objekt"})


def test_a_manifest_text_is_validated_once_and_an_invalid_one_every_time(tmp_path, monkeypatch):
    calls: list[str] = []
    validate = schema.validate
    monkeypatch.setattr(
        schema,
        "validate",
        lambda kind, doc, **kw: (calls.append(kind), validate(kind, doc, **kw))[1],
    )
    document = json.loads((ROOT / "assignments.json").read_text())
    path = tmp_path / "assignments.json"

    def write(title: object) -> None:
        first = {**document["assignments"][0], "title": title}
        path.write_text(
            json.dumps({**document, "assignments": [first, *document["assignments"][1:]]})
        )

    write(str(tmp_path))  # a text this process has not seen
    for _ in range(3):
        assert manifest.load_all(path)
    assert calls == ["assignments"]
    write(7)  # edited: checked again, and refused each time
    for _ in range(2):
        with pytest.raises(manifest.ManifestError, match="title"):
            manifest.load_all(path)
    assert calls == ["assignments"] * 3


def test_unused_format_libraries_are_hidden_only_while_jsonschema_is_imported():
    """Their checkers are left out (40 ms of the import); "date-time", which our schemas use, is still checked,
    and the libraries stay importable for other code in the process."""
    code = (
        "import importlib.util, sys\n"
        "from grader import schema\n"
        "js = schema._jsonschema()\n"
        "checkers = js.Draft202012Validator.FORMAT_CHECKER.checkers\n"
        "print('date-time' in checkers, 'duration' in checkers, 'hostname' in checkers)\n"
        "check = js.Draft202012Validator.FORMAT_CHECKER.conforms\n"
        "print(check('2026-11-28T20:00:00+00:00', 'date-time'), check('yesterday', 'date-time'))\n"
        "print(all(sys.modules.get(n, 0) is not None for n in schema.UNUSED_FORMAT_LIBRARIES))\n"
        "found = [n for n in schema.UNUSED_FORMAT_LIBRARIES if importlib.util.find_spec(n)]\n"
        "print([importlib.import_module(n).__name__ for n in found] == found)\n"
    )
    assert _fresh_python(code) == ["True False False", "True False", "True", "True"]


def test_with_another_thread_running_nothing_is_hidden():
    """Another thread's first import of one of them must never fail: then jsonschema pays the 40 ms."""
    code = (
        "import importlib.util, threading\n"
        "stop = threading.Event(); threading.Thread(target=stop.wait).start()\n"
        "from grader import schema\n"
        "checkers = schema._jsonschema().Draft202012Validator.FORMAT_CHECKER.checkers\n"
        "print(('duration' in checkers) == bool(importlib.util.find_spec('isoduration')))\n"
        "stop.set()\n"
    )
    assert _fresh_python(code) == ["True"]


def _fresh_python(code: str) -> list[str]:
    """The lines ``code`` prints in a fresh interpreter (one that has not imported jsonschema)."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return done.stdout.splitlines()


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
    assert isinstance(
        caught.value, errors.UsageError
    )  # the caller's mistake: one line and exit 2, no traceback


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
        assert r.exercise == file_exercise, (
            f"{r.id}: marked exercise {r.exercise!r}, file is {file_exercise!r}"
        )
        assert r.max_points > 0 or r.cuda, f"{r.id}: no points marker"
        if not r.cuda:
            per_file[r.exercise] = per_file.get(r.exercise, 0.0) + r.max_points
    for ex in assignment.exercises:
        assert per_file.get(ex.id) == pytest.approx(ex.points), (
            f"{suite}/{ex.id}: tests sum to {per_file.get(ex.id)}"
        )


def test_exercise_names_exist_in_the_solutions(assignment, monkeypatch):
    import importlib

    from grader.course import references

    references.solutions_package(assignment.root)  # a package of the checkout, not installed
    for ex in assignment.exercises:
        module = importlib.import_module(f"solutions.{ex.module}")
        missing = [n for n in ex.names if not hasattr(module, n)]
        assert not missing, f"solutions/{ex.module}.py lacks {missing}"


# -- every path the manifest names, checked when a command loads it (issue 28.8) ----------------------------------
def _misspell(course: Path, field: str, wrong: str) -> int:
    """Point softmax's ``field`` at ``wrong`` in the course copy's manifest; the line it is on."""
    path = course / "assignments.json"
    document = json.loads(path.read_text())
    document["assignments"][0]["exercises"][0][field] = wrong
    path.write_text(json.dumps(document, indent=2))
    return next(
        n
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if f'"{field}": "{wrong}"' in line
    )


def test_a_misspelled_hidden_suite_is_a_usage_error_naming_its_line(tmp_path, capsys):
    """On 4ad1d57 this was exit 3 after the canary had graded for 13 s: "this machine cannot grade"."""
    course = course_copy(tmp_path / "course")
    line = _misspell(course, "hidden_tests", "tests/hidden/test_sofmax.py")
    path = course / "assignments.json"
    for command in (
        ["grade", str(course / "solutions"), "--out", str(tmp_path / "card.json")],
        ["batch", str(course / "solutions"), "--out", str(tmp_path / "out")],
    ):
        assert main([*command, "--manifest", str(path)]) == errors.ExitCode.USAGE
        err = capsys.readouterr().err
        assert (
            f"{path}:{line}: hidden_tests of exercise 'softmax': 'tests/hidden/test_sofmax.py' is not a file"
            in err
        )
        assert "did you mean test_softmax.py?" in err and "cannot grade" not in err, err
    assert not (tmp_path / "card.json").exists() and not (tmp_path / "out" / "scorecards").exists()


def test_every_wrong_path_is_named_at_once_and_none_may_lead_out_of_the_course(tmp_path):
    course = course_copy(tmp_path / "course")
    _misspell(course, "public_tests", "tests/public/test_softmaxx.py")
    (course / "solutions" / "masks.py").unlink()
    outside = tmp_path / "test_elsewhere.py"
    outside.write_text("def test_x():\n    pass\n")
    (course / "tests/hidden/test_masks.py").unlink()
    (course / "tests/hidden/test_masks.py").symlink_to(
        outside
    )  # the schema's pattern holds; the file is elsewhere
    spec = manifest.load(course / "assignments.json")
    with pytest.raises(manifest.ManifestError) as raised:
        manifest.check_paths(spec, ("public", "hidden"))
    text = str(raised.value)
    assert text.startswith("3 path(s) of assignment 'attention-basics' are wrong"), text
    assert (
        "public_tests of exercise 'softmax': 'tests/public/test_softmaxx.py' is not a file" in text
    )
    assert (
        "hidden_tests of exercise 'masks': 'tests/hidden/test_masks.py' is outside the manifest's folder"
        in text
    )
    assert "module of exercise 'masks': 'solutions/masks.py' is not a file" in text
    assert (
        manifest.check_paths(spec, ()) is spec
    )  # a student repository has no hidden suites: nothing asked, none checked
    with pytest.raises(
        check.CheckError, match="public_tests of exercise 'softmax'"
    ):  # grader check: exit 2 too
        check.load(manifest_path=course / "assignments.json")
