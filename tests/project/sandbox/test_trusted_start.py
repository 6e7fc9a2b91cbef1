"""The trusted side never imports a student's file: a class folder full of modules named after every
top-level module the trusted side imports, graded from inside that folder (``cd class && grader batch .``).

Each planted module writes a marker file when imported. Under the namespace sandbox a student module
cannot reach the test's folder, so any marker means trusted code imported it.

Every name sits at the top of the class folder, where ``python -m grader`` finds it first on ``sys.path``
and so would any subprocess started there. A few are plain single-file submissions, graded as any
student's file; the rest are links there (Python imports through a link; discovery never opens one, so
each is an intake-error card, not a grading); and every name is also a plain file of an ``all-names-N/``
folder submission (at most ``PER_FOLDER`` a folder, under intake's cap), so the trusted side's intake
meets every name while a batch grades a handful of submissions, not one per name (~170).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from math import ceil
from pathlib import Path

import pytest

from grader import procs

pytestmark = pytest.mark.cost(29)  # seconds on 2 cores: started early (tests/project/conftest.py)

TRUSTED_IMPORTS = (
    "grader.cli.main",
    "grader.grade",
    "grader.batch.engine",
    "grader.batch.slot",
    "grader.exports.outputs",
    "grader.exports.report",
    "grader.scoring.runner",
    "grader.sandbox.remote",
    "jsonschema",
    "rich",
    "jinja2",
    "torch",
    "pytest",
)
GRADED_SINGLE = (
    "grader",
    "json",
    "torch",
)  # planted at the top as plain files: single-file submissions, graded
PER_FOLDER = (
    100  # names in one folder submission (intake takes at most MAX_FILES = 200 modules from one)
)


def _shadowable_modules() -> list[str]:
    """Top-level modules the trusted side has loaded that a same-named file could shadow (not built-in/frozen)."""
    code = (
        f"import importlib, sys\nfor m in {TRUSTED_IMPORTS!r}: importlib.import_module(m)\n"
        "print(' '.join(sorted({m.split('.')[0] for m in list(sys.modules)})))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        **procs.popen_kwargs(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    names = []
    for name in done.stdout.split():
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if name.isidentifier() and spec is not None and spec.origin not in ("built-in", "frozen"):
            names.append(name)
    return names


@pytest.fixture(scope="module")
def class_folder(tmp_path_factory) -> tuple[Path, Path, list[str]]:
    base = tmp_path_factory.mktemp("shadow")
    folder, marks = base / "class", base / "marks"
    folder.mkdir()
    marks.mkdir(mode=0o700)
    names = _shadowable_modules()
    for start in range(0, len(names), PER_FOLDER):
        student = (
            folder / f"all-names-{start // PER_FOLDER}"
        )  # not an identifier: never importable itself
        student.mkdir()
        for name in names[start : start + PER_FOLDER]:
            (student / f"{name}.py").write_text(_planted(marks, name))
            top = folder / f"{name}.py"
            if name in GRADED_SINGLE:
                top.write_text(_planted(marks, name))
            else:
                top.symlink_to(Path(student.name) / f"{name}.py")
    return folder, marks, names


def _planted(marks: Path, name: str) -> str:
    return f"open({str(marks / name)!r}, 'w').write('imported by ' + __name__)\n"


def _by_student(out: Path) -> dict[str, dict]:
    cards = [json.loads(p.read_text()) for p in (out / "scorecards").glob("*.json")]
    return {c["submission"]["student"]: c for c in cards}


def test_the_trusted_side_imports_many_shadowable_modules(class_folder):
    _, _, names = class_folder
    assert len(names) > 100 and {
        "json",
        "torch",
        "jsonschema",
        "rich",
        "grader",
        "pytest",
        "subprocess",
    } <= set(names)


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["grader", "python -m grader"])
def test_batch_from_inside_the_class_folder_imports_no_student_file(class_folder, entry, tmp_path):
    """Plain ``python -m grader`` in a folder holding ``grader.py`` runs that file before any of our code
    (Python's own ``-m`` lookup): the README says to use ``grader`` or ``python -I -m grader``. Every
    other planted module is still never imported, since ``grader.__main__`` drops the folder first."""
    folder, marks, names = class_folder
    out = tmp_path / "out"
    head = {
        "grader": [str(Path(sys.executable).parent / "grader")],
        "python -m grader": [sys.executable, "-m", "grader"],
    }[entry]
    if entry == "python -m grader":
        (folder / "grader.py").unlink(missing_ok=True)
        names = [n for n in names if n != "grader"]
    done = subprocess.run(
        [
            *head,
            "batch",
            ".",
            "--out",
            str(out),
            "--exercise",
            "softmax",
            "-j",
            "2",
            "--quiet",
            "--per-test-time-limit",
            "8",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert sorted(p.name for p in marks.iterdir()) == [], done.stderr[-3000:]
    cards = _by_student(out)
    folders = [f"all-names-{i}" for i in range(ceil(len(class_folder[2]) / PER_FOLDER))]
    assert sorted(cards) == sorted([*names, *folders]), done.stderr[-3000:]
    graded = [*folders, *(n for n in names if n in GRADED_SINGLE)]
    assert all(cards[s]["status"] == "graded" and cards[s]["score"] == 0 for s in graded), (
        done.stderr[-3000:]
    )
    links = [cards[n] for n in names if n not in GRADED_SINGLE]
    assert all(
        c["status"] == "error"
        and c["error"]["kind"] == "intake"
        and "link" in c["error"]["message"]
        for c in links
    ), done.stderr[-3000:]


def test_grade_from_inside_the_class_folder_imports_no_student_file(class_folder, tmp_path):
    folder, marks, _ = class_folder
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-m",
            "grader",
            "grade",
            str(ROOT / "solutions"),
            "--out",
            str(tmp_path / "card.json"),
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert sorted(p.name for p in marks.iterdir()) == [], done.stderr[-3000:]
    card = json.loads((tmp_path / "card.json").read_text())
    assert card["score"] == card["max_score"] == 100


ROOT = Path(__file__).resolve().parents[3]
