"""Each student README is its own assignment's, and every command it shows runs there (issue 28.17).

For each assignment of the manifest, ``grader release`` writes a student repository; the commands of its README's
"Check your work" block are run in it as a student runs them (``grader`` is the repository's own package, pytest
reads the repository's own ini; a debugger prompt is answered ``c``), on the untouched stubs. Each must run its
tests: ``grader check`` and pytest exit 1 (tests ran, and the stubs fail them), never 2, 4 or 5 (an unknown
exercise, a file that is not there, no test selected); none prints torch's NumPy warning, which a student cannot
act on. On 4ad1d57 the `attention-modern` README showed `grader check causal_attention`, `grader check softmax
--pdb` and `pytest tests/public/test_softmax.py`, none of which exist there, and said GitHub Classroom runs the
tests on every push (it was retired on 2026-08-28).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.course import manifest

pytestmark = pytest.mark.cost(90)

SPECS = manifest.load_all()


def _commands(readme: str) -> list[list[str]]:
    section = readme[readme.index("## Check your work") :]
    block = section[
        section.index("```bash\n") + 8 : section.index("```", section.index("```bash\n") + 8)
    ]
    return [
        shlex.split(line.split("#")[0]) for line in block.splitlines() if line.split("#")[0].strip()
    ]


@pytest.fixture(scope="module", params=[s.id for s in SPECS])
def released(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[manifest.Assignment, Path]:
    out = tmp_path_factory.mktemp(request.param) / "repo"
    assert main(["release", str(out), "--assignment", request.param]) == 0
    return next(s for s in SPECS if s.id == request.param), out


def test_the_readme_names_only_this_assignment_s_exercises_files_and_tests(released):
    spec, repo = released
    readme = (repo / "README.md").read_text()
    ids = {e.id for e in spec.exercises}
    others = {e.id for s in SPECS for e in s.exercises} - ids
    for command in _commands(readme):
        for word in command[1:]:
            assert word not in others, (
                f"{shlex.join(command)}: {word} is another assignment's exercise"
            )
            if word.startswith("tests/"):
                assert (repo / word).exists(), (
                    f"{shlex.join(command)}: {word} is not in the repository"
                )
    checks = [c for c in _commands(readme) if c[:2] == ["grader", "check"] and len(c) > 2]
    assert checks and all(c[2] in ids for c in checks), checks
    assert "GitHub Classroom" not in readme and "Classroom runs" not in readme
    banned = re.search(r"for example `([^`]+)` in `([^`]+)`", readme)
    assert banned is None or banned[1] in spec.exercise(banned[2]).banned


def test_every_command_of_the_readme_runs_in_the_released_repository(released):
    _, repo = released
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("PYTEST_ADDOPTS", None)
    commands = _commands((repo / "README.md").read_text())
    assert len(commands) >= 5
    for command in commands:
        argv = [sys.executable, "-m", command[0], *command[1:]]
        done = subprocess.run(
            argv, cwd=repo, input="c\n" * 20, capture_output=True, text=True, env=env, timeout=600
        )
        said = done.stdout + done.stderr
        assert done.returncode == 1, (
            f"{shlex.join(command)} exited {done.returncode}:\n{said[-3000:]}"
        )
        assert "NumPy" not in said, f"{shlex.join(command)} printed torch's NumPy warning"
        if "--pdb" in command:
            assert "(Pdb)" in said, said[-2000:]  # the debugger did stop at the first failure
        assert "not implemented yet" in said or "NotImplementedError" in said or "TODO" in said, (
            said[-2000:]
        )
