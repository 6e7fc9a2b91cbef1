"""`grader selfcheck`: the CPU checks of the reference pass; the CUDA check says so when it verified nothing.

The self-check lives on the trusted side (`grader/selfcheck.py`) and loads the reference by path; no grader
module imports anything from `solutions/`.
"""

from __future__ import annotations

import ast

import pytest
import torch

from grader import selfcheck
from grader.cli import main as cli
from grader.course import references
from grader.errors import ExitCode
from tests.project.support.common import ROOT


def test_cpu_selfcheck_passes_and_prints_a_table(capsys):
    assert selfcheck.main(cuda=False) == 0
    out = capsys.readouterr().out
    assert "max abs err" in out and "NO" not in out.split()
    assert "checks passed" in out


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="a CUDA device is present: the real check runs instead"
)
def test_cuda_selfcheck_without_a_device_returns_2_and_says_why(capsys):
    assert selfcheck.main(cuda=True) == 2
    out = capsys.readouterr().out
    assert "CUDA check skipped: no CUDA device" in out
    assert "nothing was verified" in out


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_selfcheck_passes_on_a_device(capsys):
    assert selfcheck.main(cuda=True) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "float16" in out and "bfloat16" in out and "1024" in out


def test_the_cli_runs_the_same_check_and_exits_0(capsys):
    assert selfcheck.main(cuda=False) == 0
    direct = capsys.readouterr().out
    assert cli.main(["selfcheck"]) == ExitCode.OK
    assert capsys.readouterr().out == direct and "9/9 checks passed" in direct


def test_no_reference_beside_the_manifest_is_the_callers_mistake(tmp_path, capsys):
    with pytest.raises(references.ReferencesMissing, match="no reference solutions"):
        selfcheck.main(cuda=False, root=tmp_path)
    with pytest.raises(references.ReferencesMissing):
        selfcheck.main(cuda=True, root=tmp_path)  # checked before the device, as before the move
    assert capsys.readouterr().out == ""


def test_the_reference_is_loaded_by_path_from_beside_the_manifest():
    ref = selfcheck.reference()
    assert ref.__name__ == "solutions.efficient_attention"
    assert ref.__file__ == str((ROOT / "solutions" / "efficient_attention.py").resolve())


def test_no_grader_module_imports_solutions():
    """The grader reaches the references only through `grader.course.references` (by path), never by an import."""
    found = []
    for path in sorted((ROOT / "grader").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            found += [
                f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "solutions"
            ]
    assert found == []


def test_the_suite_rows_grade_every_assignments_references_and_list_each_cuda_test():
    """Without a GPU the CUDA tests are listed as skipped and never count as verified; the scores are full."""
    rows = selfcheck.suite_rows()
    scores = [r for r in rows if r[1].startswith("score ")]
    assert [r[0] for r in scores] == ["attention-basics", "attention-modern"]
    assert all(ok and outcome == "graded" for _, _, outcome, ok in scores), scores
    cuda = [r for r in rows if not r[1].startswith("score ")]
    assert {r[0] for r in cuda} == {"attention-basics", "attention-modern"} and len(cuda) >= 20
    if not torch.cuda.is_available():
        assert all(outcome == "skipped" and not ok for _, _, outcome, ok in cuda), cuda
    else:
        assert all(ok for *_, ok in cuda), cuda
