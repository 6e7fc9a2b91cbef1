"""The hostile class of test_hostile_class.py graded from the repository root (where the grader's own packages
sit in the working directory) with ``--warm off``: every sandboxed worker, restarts after a kill included,
freshly exec'd. The same tests on the same class; each scorecard shows that no worker was a fork."""

from __future__ import annotations

import pytest

from tests.project.support.common import ROOT, needs_namespace
from tests.project.support.hostile_class import Graded, build, grade_class, shared_tests

pytestmark = [
    pytest.mark.cost(200),
    needs_namespace,
]  # seconds on 2 cores: started early (tests/project/conftest.py)
globals().update(shared_tests())


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Graded:
    folder = tmp_path_factory.mktemp("hostile-class") / "class"
    attacked = build(folder)
    return grade_class(
        folder, attacked, cwd=ROOT, target=str(folder), out=folder.parent / "out", warm="off"
    )
