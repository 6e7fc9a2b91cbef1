"""``grader release --classroom50 DIR``: Classroom 50's template repository and autograder bundle.

``DIR/template/`` is the template repository (what ``grader release`` writes, without the retired
GitHub Classroom workflow: Classroom 50 adds its own on accept). ``DIR/autograders/<assignment>/``
is the per-assignment bundle to copy into ``classroom50/<CLASSROOM>/autograders/<assignment>/``: an
``autograder.py`` honouring Classroom 50's contract, the public tests, the student runtime and the
manifest. Classroom 50's own docs say the bundle is served publicly and the workflow is not a
security boundary, so the bundle never holds a hidden test or a solution line: the release is
refused (and removed) if one is found.
The folder ``gh teacher download`` writes is read by :mod:`grader.intake.classroom50`.
"""

from __future__ import annotations

import re
import shutil
from fractions import Fraction
from pathlib import Path

from grader.course import manifest
from grader.release import repository as base
from grader.release import texts
from grader.release.gradescope import fill

MARKER = ".classroom50-release"
WORKFLOW = Path(".github") / "workflows" / "classroom.yml"
C50_SENTENCE = (
    "- On every submission, Classroom 50 runs the public tests and shows their points on the\n"
    "  submission's Release; those points also come from the public tests only."
)
BUNDLE_SCHEMAS = ("schemas/classroom50-result.schema.json",)
POINTS = re.compile(r"mark\.points\(\s*([0-9.]+)\s*\)")
SCALES = (1, 2, 4, 5, 10, 20, 100, 1000)
MIN_HIDDEN_LINE = 20  # a hidden test's line this long and absent from the public tests is its own


def release(out: Path, *, assignment: manifest.Assignment, force: bool = False) -> list[Path]:
    """Write ``out/template`` and ``out/autograders/<assignment>``; return the files written."""
    base.prepare(out, force=force, marker=MARKER)
    written = _template(out / "template", assignment)
    bundle = out / "autograders" / assignment.id
    written += _bundle(bundle, assignment)
    problems = leaks(bundle, assignment, shown=out / "template")
    if problems:
        shutil.rmtree(out, ignore_errors=True)
        raise base.ReleaseError(f"refused: the Classroom 50 bundle would publish {problems[0]}")
    return [*written, base.write_file(out / MARKER, "written by grader release --classroom50\n")]


def _template(dest: Path, assignment: manifest.Assignment) -> list[Path]:
    written = base.release(dest, assignment=assignment)
    (dest / WORKFLOW).unlink()
    for folder in (dest / WORKFLOW.parent, dest / WORKFLOW.parent.parent):
        folder.rmdir()
    readme = dest / "README.md"
    readme.write_text(readme.read_text("utf-8").replace(texts.CI, C50_SENTENCE), "utf-8")
    return [p for p in written if p.exists()]


def _bundle(dest: Path, assignment: manifest.Assignment) -> list[Path]:
    public = [assignment.root / e.public_tests for e in assignment.exercises]
    text = fill(
        "autograder.py",
        ASSIGNMENT=assignment.id,
        TORCH=texts.torch_version(),
        INDEX=texts.CPU_INDEX,
        SCALE=str(scale(public)),
    )
    written = [base.write_file(dest / "autograder.py", text)]
    written += [base.copy_file(p, dest / p.relative_to(assignment.root)) for p in public]
    written += base.copy_runtime(dest / "grader")
    written += [base.copy_file(base.PACKAGE / rel, dest / "grader" / rel) for rel in BUNDLE_SCHEMAS]
    written.append(base.write_file(dest / "assignments.json", manifest.text_of(assignment)))
    return written


def scale(public_tests: list[Path]) -> int:
    """Units per point that make every public test's points a whole number (result.json wants
    integers)."""
    values = [Fraction(v) for p in public_tests for v in POINTS.findall(p.read_text("utf-8"))]
    return next((k for k in SCALES if all((v * k).denominator == 1 for v in values)), SCALES[-1])


def leaks(bundle: Path, assignment: manifest.Assignment, *, shown: Path) -> list[str]:
    """What the bundle must never publish: hidden test files or lines, solution lines (empty when
    clean).

    A hidden test's line counts only when the students do not already have it (``shown``: the
    template repository, e.g. ``__tracebackhide__ = True`` is in the runtime too).
    """
    found = [
        f"{p.relative_to(bundle)} (a hidden-tests path)"
        for p in bundle.rglob("*")
        if "hidden" in p.parts
    ]
    public = "\n".join(
        p.read_text("utf-8", errors="replace") for p in shown.rglob("*") if p.is_file()
    )
    hidden = {
        line.strip()
        for e in assignment.exercises
        for line in (assignment.root / e.hidden_tests).read_text("utf-8").splitlines()
        if len(line.strip()) >= MIN_HIDDEN_LINE and line.strip() not in public
    }
    lines = hidden | base.solution_lines(
        assignment.root / "solutions", public=assignment.root / "tests" / "public"
    )
    found += [f"{file} (line {line!r})" for file, line in base.scan(bundle, lines)]
    return found
