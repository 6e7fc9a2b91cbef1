"""A student's loop: edit one stub, run its public test with plain pytest, watch it turn green."""

from __future__ import annotations

import shutil
import subprocess
import sys

from tests.project.support.common import ROOT


def _pytest(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_editing_one_stub_turns_its_public_test_green(tmp_path):
    work = tmp_path / "exercises"
    shutil.copytree(ROOT / "exercises", work)
    before = _pytest("tests/public/test_softmax.py", "--student", str(work))
    assert before.returncode == 1 and "not implemented yet" in before.stdout
    shutil.copy(ROOT / "solutions" / "softmax.py", work / "softmax.py")  # the student's edit
    after = _pytest("tests/public/test_softmax.py", "--student", str(work))
    assert after.returncode == 0, after.stdout
    other = _pytest("tests/public/test_masks.py", "--student", str(work))
    assert other.returncode == 1 and "not implemented yet" in other.stdout
