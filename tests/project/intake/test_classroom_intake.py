"""`.ipynb` submissions: definitions taken with `ast`, never executed; both shapes; a broken notebook; `grade()`."""

from __future__ import annotations

import nbformat
import pytest

from grader import schema
from grader.grade import grade
from grader.intake import submission as intake
from tests.project.support.common import ROOT

MODULES = {"softmax", "masks"}


def _notebook(path, *sources: str) -> None:
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("# my work")]
        + [nbformat.v4.new_code_cell(s) for s in sources]
    )
    nbformat.write(nb, str(path))


def test_a_notebook_per_exercise_in_a_folder(tmp_path):
    _notebook(
        tmp_path / "softmax.ipynb", "import torch\n\ndef softmax_naive(x, dim=-1):\n    return x\n"
    )
    _notebook(
        tmp_path / "masks.ipynb",
        "%matplotlib inline\nimport torch\nEPS = 1e-9\n",
        "def causal_mask(n):\n    return torch.ones(n, n).tril().bool()\n\ncausal_mask(3)\n",
    )
    sub = intake.take(tmp_path, modules=MODULES)
    assert sub.layout == "directory" and [f["name"] for f in sub.files] == [
        "masks.py",
        "softmax.py",
    ]
    masks = (sub.box / "masks.py").read_text()
    assert "EPS = 1e-9" in masks and "def causal_mask" in masks
    assert "causal_mask(3)" not in masks and "%matplotlib" not in masks
    compile(masks, "masks.py", "exec")
    sub.cleanup()


def test_one_notebook_for_all_exercises_is_a_single_module(tmp_path):
    softmax = (ROOT / "solutions" / "softmax.py").read_text()
    _notebook(
        tmp_path / "alice.ipynb",
        softmax,
        "from __future__ import annotations\n\ndef causal_mask(n): ...\n",
    )
    sub = intake.take(tmp_path / "alice.ipynb", modules=MODULES)
    assert (sub.layout, sub.single_module) == ("notebook", "alice")
    text = (sub.box / "alice.py").read_text()
    assert text.count("from __future__ import annotations") == 1
    assert text.index("from __future__") < text.index("import torch")
    compile(text, "alice.py", "exec")
    sub.cleanup()


def test_top_level_statements_are_never_executed(tmp_path):
    marker = tmp_path / "ran"
    _notebook(
        tmp_path / "softmax.ipynb",
        f"open({str(marker)!r}, 'w').write('x')\nimport os\nos.system('true')\n",
    )
    sub = intake.take(tmp_path / "softmax.ipynb", modules=MODULES)
    assert not marker.exists()
    module = (sub.box / "softmax.py").read_text()
    assert "open(" not in module and "os.system" not in module and "import os" in module
    sub.cleanup()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not a readable Jupyter notebook"),
        ('{"cells": 3}', "not a readable Jupyter notebook"),
    ],
)
def test_an_unreadable_notebook_is_a_clear_intake_error(tmp_path, content, expected):
    (tmp_path / "softmax.ipynb").write_text(content)
    with pytest.raises(intake.IntakeError, match=expected):
        intake.take(tmp_path / "softmax.ipynb", modules=MODULES)


def test_a_cell_with_a_syntax_error_names_the_cell(tmp_path):
    _notebook(tmp_path / "softmax.ipynb", "import torch\n", "def softmax_naive(x:\n")
    with pytest.raises(
        intake.IntakeError, match=r"softmax.ipynb: code cell 3 cannot be parsed \(line 1"
    ):
        intake.take(tmp_path / "softmax.ipynb", modules=MODULES)


def test_grade_a_notebook_made_from_the_solutions(tmp_path):
    nb = tmp_path / "softmax.ipynb"
    _notebook(
        nb,
        (ROOT / "solutions" / "softmax.py").read_text(),
        "softmax_stable(__import__('torch').ones(3))\n",
    )
    card = grade(nb, exercises=["softmax"], isolation="process", seed=5)
    schema.validate("scorecard", card)
    assert card["status"] == "graded" and card["submission"]["layout"] == "notebook"
    assert (card["score"], card["max_score"]) == (6, 6)


def test_grade_reports_a_broken_notebook_as_an_intake_error(tmp_path):
    nb = tmp_path / "softmax.ipynb"
    nb.write_text("{")
    card = grade(nb, exercises=["softmax"], isolation="process")
    assert card["status"] == "error" and card["error"]["kind"] == "intake"
    assert "not a readable Jupyter notebook" in card["error"]["message"]
