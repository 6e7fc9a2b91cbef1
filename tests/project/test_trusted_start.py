"""The trusted side never imports a student's file: a class folder full of modules named after every
top-level module the trusted side imports, graded from inside that folder (``cd class && grader batch .``).

Each planted module writes a marker file when imported. Under the namespace sandbox a student module
cannot reach the test's folder, so any marker means trusted code imported it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader import procs

TRUSTED_IMPORTS = ("grader.cli", "grader.grade", "grader.batch.engine", "grader.batch.slot", "grader.batch.outputs",
                   "grader.batch.report", "grader.scoring.runner", "grader.sandbox.remote", "jsonschema", "rich",
                   "jinja2", "torch", "pytest")


def _shadowable_modules() -> list[str]:
    """Top-level modules the trusted side has loaded that a same-named file could shadow (not built-in/frozen)."""
    code = (f"import importlib, sys\nfor m in {TRUSTED_IMPORTS!r}: importlib.import_module(m)\n"
            "print(' '.join(sorted({m.split('.')[0] for m in list(sys.modules)})))")
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120,
                          **procs.popen_kwargs())
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
    for name in names:
        (folder / f"{name}.py").write_text(f"open({str(marks / name)!r}, 'w').write('imported by ' + __name__)\n")
    return folder, marks, names


def test_the_trusted_side_imports_many_shadowable_modules(class_folder):
    _, _, names = class_folder
    assert len(names) > 100 and {"json", "torch", "jsonschema", "rich", "grader", "pytest", "subprocess"} <= set(names)


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["grader", "python -m grader"])
def test_batch_from_inside_the_class_folder_imports_no_student_file(class_folder, entry, tmp_path):
    """Plain ``python -m grader`` in a folder holding ``grader.py`` runs that file before any of our code
    (Python's own ``-m`` lookup): the README says to use ``grader`` or ``python -I -m grader``. Every
    other planted module is still never imported, since ``grader.__main__`` drops the folder first."""
    folder, marks, names = class_folder
    out = tmp_path / "out"
    head = {"grader": [str(Path(sys.executable).parent / "grader")],
            "python -m grader": [sys.executable, "-m", "grader"]}[entry]
    if entry == "python -m grader":
        (folder / "grader.py").unlink(missing_ok=True)
        names = [n for n in names if n != "grader"]
    done = subprocess.run([*head, "batch", ".", "--out", str(out), "--exercise", "softmax", "-j", "2", "--quiet"],
                          cwd=folder, capture_output=True, text=True, timeout=900)
    assert sorted(p.name for p in marks.iterdir()) == [], done.stderr[-3000:]
    cards = [json.loads(p.read_text()) for p in (out / "scorecards").glob("*.json")]
    assert len(cards) == len(names), done.stderr[-3000:]
    assert all(c["status"] == "graded" and c["score"] == 0 for c in cards)


def test_grade_from_inside_the_class_folder_imports_no_student_file(class_folder, tmp_path):
    folder, marks, _ = class_folder
    done = subprocess.run([sys.executable, "-I", "-m", "grader", "grade", str(ROOT / "solutions"), "--out",
                           str(tmp_path / "card.json")], cwd=folder, capture_output=True, text=True, timeout=300)
    assert sorted(p.name for p in marks.iterdir()) == [], done.stderr[-3000:]
    card = json.loads((tmp_path / "card.json").read_text())
    assert card["score"] == card["max_score"] == 100


ROOT = Path(__file__).resolve().parents[2]
