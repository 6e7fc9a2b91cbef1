"""The hostile class of test_hostile_class.py graded under ``--isolation process`` as root with ``--warm off``:
every worker a fresh launcher that drops to the leased uid, restricts itself and execs the worker. The same tests."""

from __future__ import annotations

import pytest

from tests.project.support.common import ROOT, needs_namespace
from tests.project.support.hostile_class import Graded, build, grade_class, shared_tests

pytestmark = [pytest.mark.cost(130), needs_namespace]
globals().update(shared_tests())


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Graded:
    folder = tmp_path_factory.mktemp("hostile-class") / "class"
    attacked = build(folder)
    return grade_class(
        folder,
        attacked,
        cwd=ROOT,
        target=str(folder),
        out=folder.parent / "out",
        warm="off",
        level="process",
    )
