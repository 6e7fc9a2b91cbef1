"""The files ``grader release`` writes from templates: student README, pyproject, Classroom
workflow.

The workflow follows what GitHub Classroom generates (name ``Autograding Tests``, one job
``run-autograding-tests``, a runner step with an ``id`` whose ``result`` output the
``autograding-grading-reporter`` reads from ``<ID>_RESULTS``). The runner id must be alphanumeric:
the reporter checks ``runners`` against ``^([a-zA-Z0-9]+,)*[a-zA-Z0-9]+$``. GitHub Classroom was
retired on 2026-08-28; the workflow stays for organisations with old repositories. Its actions are
the Node 24 majors (``actions/checkout@v6``, ``actions/setup-python@v6``): GitHub removes Node 20
from its runners in September 2026.
"""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

from grader.course import manifest

RUNNER_ID = "grader"
# what the student README says of CI (no platform named: GitHub Classroom is retired; a Classroom 50
# template replaces it with what Classroom 50 does)
CI = (
    "- If your course runs the tests on each push (continuous integration set up by your instructor), those\n"
    "  points also come from the public tests only."
)
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def readme(assignment: manifest.Assignment, *, torch: str, index: str) -> str:
    """The student README of ``assignment``: every exercise, file and test name it shows is one of
    this assignment's (a test runs each command it shows in a released repository)."""
    first, one = (
        assignment.exercises[0],
        assignment.exercises[min(1, len(assignment.exercises) - 1)],
    )
    table = "\n".join(f"| `{e.id}` | {e.title} | {e.points:g} |" for e in assignment.exercises)
    banned = next((e for e in assignment.exercises if e.banned), None)
    bans = (
        f"- Some exercises ban library shortcuts (for example `{banned.banned[0]}` in `{banned.id}`): the point is "
        "to\n  write them yourself. Calling a banned function fails the test with a message saying so."
        if banned
        else ""
    )
    return README.substitute(
        title=assignment.title,
        table=table,
        torch=torch,
        index=index,
        one=one.id,
        first=first.id,
        ci=CI,
        public_file=first.public_tests,
        test_name=_first_test(assignment.root / first.public_tests),
        bans=bans,
    )


def _first_test(path: Path) -> str:
    """The name of the first test function in a public suite (what ``pytest -k`` is shown
    selecting)."""
    found = re.search(r"^def (test_\w+)", path.read_text("utf-8"), re.MULTILINE)
    return found[1] if found else "test"


def torch_version() -> str:
    """The instructor's torch release (without a local tag such as ``+cpu``): the students' pin."""
    import torch

    return str(torch.__version__).split("+")[0]


WORKFLOW = Template("""\
name: Autograding Tests
'on':
- push
- repository_dispatch
- workflow_dispatch
permissions:
  checks: write
  actions: read
  contents: read
jobs:
  run-autograding-tests:
    runs-on: ubuntu-latest
    if: github.actor != 'github-classroom[bot]'
    steps:
    - name: Checkout code
      uses: actions/checkout@v6
    - name: Set up Python
      uses: actions/setup-python@v6
      with:
        python-version: '3.11'
    - name: Install CPU torch and the exercises
      run: |
        python -m pip install --upgrade pip
        pip install torch==$torch --index-url $index
        pip install -e .
    - name: Public tests
      id: $runner
      timeout-minutes: 15
      run: grader ci --format github-classroom --timeout 600
    - name: Autograding Reporter
      uses: classroom-resources/autograding-grading-reporter@v1
      env:
        $env_name: "$${{steps.$runner.outputs.result}}"
      with:
        runners: $runner
""")

PYPROJECT = Template("""\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "$name"
version = "$version"
description = "$title: exercises and public tests"
readme = "README.md"
requires-python = ">=3.11"
# torch: install the CPU build first, it is much smaller than the default CUDA one:
#   pip install torch==$torch --index-url $index
dependencies = ["torch>=2.2", "pytest>=8", "jsonschema>=4.18", "rich>=13"]

[project.scripts]
grader = "grader.cli.student:student_run"

[tool.setuptools.packages.find]
include = ["grader*"]

[tool.setuptools.package-data]
grader = ["schemas/*.json", "py.typed"]

[tool.pytest.ini_options]
testpaths = ["tests/public"]
addopts = "-p grader.testing.plugin --import-mode=importlib -p no:cacheprovider"
# torch warns at import when numpy is absent (it is not needed here): nothing a student can act on
filterwarnings = ["ignore:$no_numpy:UserWarning"]
""")

README = Template("""\
# $title

Your exercises are in `exercises/`, one module per exercise. Each function or class you have to
write raises `NotImplementedError("TODO: ...")`: replace that line with working code, and keep the
names and signatures.

| exercise | what you build | points |
|---|---|---|
$table

## Set up (once)

Python 3.11 or newer. In a terminal, in this folder:

```bash
python -m venv .venv
source .venv/bin/activate          # Windows: .venv\\Scripts\\activate
pip install torch==$torch --index-url $index   # the CPU build is enough
pip install -e .
```

## Check your work

```bash
grader check                  # every exercise: a table of points, the first failure, what to do next
grader check $one   # one exercise (or several)
grader check $first --pdb    # stop in the debugger at the first failure
pytest tests/public           # the same tests with plain pytest, with the same messages
pytest $public_file -k $test_name -x --pdb
```

`grader check` exits with status 1 while any public test fails. `grader check --json` prints the
result as JSON.

## How points work

- Every test is worth the points shown in its `@pytest.mark.points(...)` marker; a test gives all
  of its points or none. An exercise's points are the sum of its tests.
- **These are the public tests only.** After the deadline your instructor grades your code with
  **hidden tests**, in a sandbox, with fresh random inputs. The hidden tests decide your grade:
  passing every public test is a good sign, not a guarantee of full marks.
$ci
$bans

## Rules

- Edit only the files in `exercises/`. Do not edit `tests/`, `grader/` or the workflow: the
  instructor's grading uses its own copies, and changes there are flagged.
- Use torch and the Python standard library only.

## For instructors

This repository is generated by `grader release`; it holds no solutions and no hidden tests.
The workflow scores the public tests only. A workflow could also fetch hidden tests from a private
repository with a token secret, but anything the workflow can read the student can read too (they
can edit the workflow to print it), so that does not keep hidden tests secret: grade officially with
`grader grade` / `grader batch` on collected submissions instead.
""")

STUDENT_MAIN = '''\
"""``python -m grader`` in a student repository: the same as the ``grader`` command (check, ci)."""

from __future__ import annotations

from grader.cli.student import student_run

if __name__ == "__main__":
    student_run()
'''

GITIGNORE = """\
__pycache__/
*.pyc
*.egg-info/
.pytest_cache/
.venv/
"""

NBGRADER_CONFIG = Template('''\
"""nbgrader configuration for the course generated by `grader release --nbgrader`."""

c = get_config()  # noqa: F821 - provided by nbgrader
c.CourseDirectory.course_id = "$course"
c.CourseDirectory.root = "."
# The test cells import grader.testing.checks and grader.check.nbruntime: the assignment folder
# ships a copy of that runtime (source/$assignment/grader/), so the kernel only needs torch and pytest.
c.ExecutePreprocessor.timeout = 120
''')
