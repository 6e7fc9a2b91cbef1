"""The whole hostile corpus as one class, batch-graded end to end, from inside the class folder and
from the repository root: every attack earns nothing on what it attacks, every honest control keeps
full marks, and the gradebook, summary, report and exports are all produced.

Students: one per top-level attack (it replaces ``softmax.py`` in a correct submission), one per
integrity attack (it replaces the exercise its docstring names), one per hostile notebook (it
replaces ``softmax``), and honest controls (the reference solutions, twice, under odd ids).
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.sandbox import isolation
from tests.project.conftest import CORPUS, solutions_copy

pytestmark = pytest.mark.cost(57)  # seconds on 2 cores: started early (tests/project/conftest.py)

EXERCISES = ["softmax", "masks", "scaled_dot_product", "efficient_attention"]
CONTROLS = ("honest-one", "=HONEST+2")  # the second id would be a live formula if the gradebook did not escape it
ATTACKED = re.compile(r"Attack \((\w+)\)")


def _attacked(path: Path) -> str:
    found = ATTACKED.search(path.read_text("utf-8", "replace")[:400])
    return found.group(1) if found else "softmax"


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The class folder and, per student id, the exercise that student attacks ('' for controls)."""
    folder = tmp_path_factory.mktemp("hostile-class") / "class"
    attacked: dict[str, str] = {}
    attacks = [*sorted((CORPUS / "hostile").glob("*.py")), *sorted((CORPUS / "hostile" / "integrity").glob("*.py")),
               *sorted((CORPUS / "hostile" / "intake").glob("*.ipynb"))]
    for attack in attacks:
        student = f"{attack.parent.name}-{attack.stem}"
        module = _attacked(attack) if attack.suffix == ".py" else "softmax"
        sub = solutions_copy(folder / student)
        (sub / f"{module}.py").unlink()
        shutil.copy(attack, sub / f"{module}{attack.suffix}")
        attacked[student] = module
    for control in CONTROLS:
        solutions_copy(folder / control)
        attacked[control] = ""
    return folder, attacked


def _batch(cwd: Path, target: str, out: Path) -> subprocess.CompletedProcess[str]:
    cmd = [str(Path(sys.executable).parent / "grader"), "batch", target, "--out", str(out), "-j", "2", "--quiet",
           "--per-test-time-limit", "2", "--export", "gradescope", "--export", "csv",
           *(f"--exercise={e}" for e in EXERCISES)]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=1800)


def _check(out: Path, attacked: dict[str, str], done: subprocess.CompletedProcess[str]) -> None:
    cards = {p.stem: json.loads(p.read_text()) for p in (out / "scorecards").glob("*.json")}
    assert len(cards) == len(attacked), done.stderr[-3000:]
    by_student = {c["submission"].get("student", key): c for key, c in cards.items()}
    for student, module in attacked.items():
        card = by_student[student]
        assert card["isolation"]["backend"] == "namespace" and card["isolation"]["seccomp"] is True
        scores = {e["id"]: (e["score"], e["max_score"]) for e in card["exercises"]}
        if not module:
            assert card["score"] == card["max_score"] > 0, (student, scores)
            continue
        if card["status"] == "error":  # an intake error (a hostile notebook): nothing graded, nothing earned
            assert card["error"]["kind"] == "intake" and card["score"] == 0, (student, card["error"])
            continue
        assert scores[module][0] == 0, f"{student} earned {scores[module]} on {module}"
        assert scores["masks"][0] == scores["masks"][1] > 0, f"{student} cost the correct masks module points"
    for name in ("gradebook.csv", "summary.json", "report.html"):
        assert (out / name).stat().st_size > 0
    rows = list(csv.reader((out / "gradebook.csv").open(encoding="utf-8")))
    assert not any(cell[:1] in ("=", "+", "-", "@") for row in rows for cell in row)
    assert any((out / "exports" / "gradescope").iterdir()) and any((out / "exports" / "csv").iterdir())


needs_namespace = pytest.mark.skipif("namespace" not in isolation.available(),
                                     reason="needs the namespace sandbox (root on Linux)")


@pytest.mark.slow
@needs_namespace
def test_the_whole_hostile_corpus_as_one_class_from_inside_the_class_folder(hostile_class, tmp_path):
    """`grader batch .` from inside the class folder (the same class graded from the repository root:
    test_hostile_class_root.py, a module of its own so that xdist runs the two batches side by side)."""
    folder, attacked = hostile_class
    out = tmp_path / "out"
    done = _batch(folder, ".", out)
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: intake errors (hostile notebooks) are reported
    _check(out, attacked, done)
