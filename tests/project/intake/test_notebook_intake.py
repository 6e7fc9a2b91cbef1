"""Notebook intake keeps what a graded module needs and nothing else: nbgrader's test cells are dropped,
computed constants are kept (evaluated only in the sandbox), exploratory lines never sink the module."""

from __future__ import annotations

import ast
import json

import pytest

from grader import schema
from grader.grade import grade
from grader.intake import submission as intake
from grader.intake.notebook import notebook_module
from tests.project.support.common import ROOT

MODULES = {"softmax", "masks"}


def _nb(*cells: str | tuple[str, dict]) -> bytes:
    def cell(c: str | tuple[str, dict]) -> dict:
        source, meta = (c, {}) if isinstance(c, str) else c
        return {
            "cell_type": "code",
            "metadata": {"nbgrader": meta} if meta else {},
            "outputs": [],
            "source": source,
        }

    return json.dumps({"nbformat": 4, "metadata": {}, "cells": [cell(c) for c in cells]}).encode()


TEST_CELL = {"grade": True, "grade_id": "t", "locked": True, "points": 2, "solution": False}
SETUP_CELL = {"grade": False, "grade_id": "s", "locked": True, "solution": False}
SOLUTION_CELL = {"grade": False, "grade_id": "x", "locked": False, "solution": True}


def test_nbgrader_test_and_read_only_cells_are_left_out_solution_cells_kept():
    module = notebook_module(
        "softmax.ipynb",
        _nb(
            ("import torch\n\ndef softmax_naive(x, dim=-1):\n    return x\n", SOLUTION_CELL),
            (
                "from grader.check.nbruntime import public_tests\npublic_test = public_tests(globals(), 'x')\n",
                SETUP_CELL,
            ),
            ("@public_test\ndef test_it(student):\n    assert False\n", TEST_CELL),
            "@public_test\ndef test_pasted(student):\n    pass\n",
        ),
    )
    assert "def softmax_naive" in module and "import torch" in module
    assert "public_test" not in module and "nbruntime" not in module and "test_pasted" not in module
    compile(module, "softmax.py", "exec")


def test_a_hostile_flag_cannot_hide_a_cell_by_half_setting_metadata():
    """Only nbgrader's own booleans mark a test cell: a string "true" or a solution cell keeps the code."""
    module = notebook_module(
        "m.ipynb",
        _nb(
            ("def f():\n    return 1\n", {"grade": "true", "locked": 1}),
            ("def g():\n    return 2\n", {**TEST_CELL, "solution": True}),
        ),
    )
    assert "def f" in module and "def g" in module


def test_computed_constants_are_kept_and_exploratory_code_is_not():
    module = notebook_module(
        "m.ipynb",
        _nb(
            "import math\nimport torch\nimport matplotlib.pyplot as plt\n",
            "NEG_INF = float('-inf')\nEPS: float = 1e-9\nLOW = torch.finfo(torch.float32).min\nROOT2 = math.sqrt(2)\n"
            "A, B = 1, 2\nSCALE = 1 / ROOT2\nDOC = '''two\nlines'''\n",
            "def f(x):\n    return x\n\nout = f(3)\nfh = open('/etc/passwd')\nprint(out)\nX = 1; out2 = f(4)\n",
        ),
    )
    for kept in (
        "NEG_INF = float('-inf')",
        "EPS: float = 1e-9",
        "LOW = torch.finfo(torch.float32).min",
        "ROOT2 = math.sqrt(2)",
        "A, B = 1, 2",
        "SCALE = 1 / ROOT2",
        "DOC = '''two\nlines'''",
        "X = 1",
    ):
        assert kept in module, kept
    for dropped in ("out = f(3)", "open(", "print(", "out2"):
        assert dropped not in module, dropped
    names: dict = {}
    exec(compile(module, "m.py", "exec"), names)
    assert names["NEG_INF"] == float("-inf") and names["DOC"] == "two\nlines" and "plt" not in names
    assert (
        names["LOW"] == names["torch"].finfo(names["torch"].float32).min
        and names["SCALE"] == 1 / 2**0.5
    )


def test_a_failing_constant_fails_only_what_uses_it():
    module = notebook_module(
        "m.ipynb",
        _nb(
            "import torch\nW = torch.load('/nonexistent.pt')\nK = int('x')\n"
            "def f():\n    return 7\n"
        ),
    )
    names: dict = {}
    exec(compile(module, "m.py", "exec"), names)
    assert names["f"]() == 7 and "W" not in names and "K" not in names


def test_constants_are_never_evaluated_at_intake(tmp_path):
    marker = tmp_path / "ran"
    nb = tmp_path / "softmax.ipynb"
    nb.write_bytes(
        _nb(
            f"import pathlib\nP = pathlib.Path({str(marker)!r}).write_text('x')\n"
            f"Q = int(pathlib.Path({str(marker)!r}).touch() or 0)\n"
        )
    )
    sub = intake.take(nb, modules=MODULES)
    try:
        assert not marker.exists()
        assert (
            "P = pathlib.Path(" in (sub.box / "softmax.py").read_text()
        )  # it runs later, in the sandbox only
    finally:
        sub.cleanup()


def test_a_notebook_reading_a_computed_constant_grades_full_marks(tmp_path):
    source = (ROOT / "solutions" / "softmax.py").read_text("utf-8")
    stable = source.replace(
        "x.amax(dim=dim, keepdim=True)", "x.amax(dim=dim, keepdim=True).clamp(min=NEG_INF)"
    )
    assert stable != source
    nb = tmp_path / "softmax.ipynb"
    nb.write_bytes(
        _nb(
            stable,
            "NEG_INF = float('-inf')\n",
            ("@public_test\ndef test_x(student): ...\n", TEST_CELL),
        )
    )
    card = grade(nb, exercises=["softmax"], isolation="process", seed=5)
    schema.validate("scorecard", card)
    assert (card["status"], card["score"], card["max_score"]) == ("graded", 6, 6), card.get("error")


SEPARATORS = [
    "\u2028",
    "\u2029",
    "\x0c",
    "\x0b",
    "\x1c",
    "\x1d",
    "\x1e",
    "\x85",
]  # str.splitlines splits at each


@pytest.mark.parametrize("sep", SEPARATORS, ids=[f"U+{ord(s):04X}" for s in SEPARATORS])
def test_a_line_separator_inside_a_comment_or_a_string_stays_there(tmp_path, sep):
    """Python's tokenizer ends a line at \\n, \\r\\n or \\r only; intake split at every separator str.splitlines
    knows, so an honest notebook became unreadable (an indented comment tail: IndentationError) and the text
    after a separator in a comment became code (an `import os` the student never wrote)."""
    nb = tmp_path / "alice.ipynb"
    nb.write_bytes(
        _nb(
            f"def f():\n    return 1  # see p. 2{sep}   of the notes\n",
            f"# note{sep}import os\nS = 'a{sep}b'\r\nT = 2\rU = 3\n",
        )
    )
    sub = intake.take(nb, modules=MODULES)
    try:
        module = (sub.box / "alice.py").read_text("utf-8")
    finally:
        sub.cleanup()
    tree = ast.parse(module)
    assert not any(isinstance(n, ast.Import) for n in ast.walk(tree)), (
        module
    )  # the comment stayed a comment
    names: dict = {}
    exec(compile(tree, "alice.py", "exec"), names)
    assert names["f"]() == 1 and names["S"] == f"a{sep}b" and (names["T"], names["U"]) == (2, 3)
    assert f"# see p. 2{sep}   of the notes" in module
