"""The hostile class of test_hostile_class.py graded under ``--isolation process`` as root, every worker forked
from the zygote: where namespaces cannot be made (Gradescope's containers), student code still runs as a leased
uid with no capability, under seccomp and, on this kernel, a Landlock file view. The same tests on the same class."""

from __future__ import annotations

import pytest

from tests.project.support.common import needs_namespace
from tests.project.support.hostile_class import Graded, build, grade_class, shared_tests

pytestmark = [pytest.mark.cost(90), needs_namespace]  # root on Linux: the leased uids, the cgroups
globals().update(shared_tests())


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Graded:
    folder = tmp_path_factory.mktemp("hostile-class") / "class"
    attacked = build(folder)
    return grade_class(
        folder,
        attacked,
        cwd=folder,
        target=".",
        out=folder.parent / "out",
        warm="fork",
        level="process",
    )
