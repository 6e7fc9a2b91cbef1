"""``grader release OUT``: build the student template repository.

What goes out: ``exercises/`` (the stubs), ``tests/public/``, the manifest, the runtime part of
``grader`` that the public tests and ``grader check``/``grader ci`` need (:data:`RUNTIME`), a
student ``pyproject.toml`` and README, and ``.github/workflows/classroom.yml``. What never goes out:
``solutions/``, ``tests/hidden/``, the sandbox, batch grading, intake and the stub builder. Before
returning, :func:`scan` searches every written file for every line of every solution region and
the release is refused (and removed) if one is found.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from grader import __version__
from grader.course import manifest
from grader.errors import NO_NUMPY, UsageError
from grader.release import texts

# Package files a student repository needs, relative to the ``grader`` package folder.
RUNTIME = (
    "__init__.py",
    "py.typed",
    "errors.py",
    "schema.py",
    "safetext.py",
    "gradetext.py",
    "course/__init__.py",
    "course/manifest.py",
    "course/references.py",
    "exports/__init__.py",
    "exports/rows.py",
    "schemas/__init__.py",
    "schemas/assignments.schema.json",
    "schemas/scorecard.schema.json",
    "schemas/github-classroom.schema.json",
    "scoring/__init__.py",
    "scoring/collect.py",
    "scoring/points.py",
    "scoring/runner.py",
    "scoring/scorecard.py",
    "cardtypes.py",
    "student/__init__.py",
    "student/inprocess.py",
    "student/proxy.py",
    "inside/__init__.py",
    "inside/bans.py",
    "inside/executor.py",
    "inside/loading.py",
    "inside/frames.py",
    "inside/handles.py",
    "inside/ops.py",
    "inside/valued_meta.py",
    "inside/peak.py",
    "inside/standins.py",
    "inside/structure.py",
    "inside/banned_ops.py",
    "protocol/__init__.py",
    "protocol/errors.py",
    "protocol/values.py",
    "testing/__init__.py",
    "testing/attention.py",
    "testing/checks.py",
    "testing/mismatch.py",
    "testing/gradients.py",
    "testing/hints.py",
    "testing/params.py",
    "testing/plugin.py",
    "testing/diagnosis.py",
    "testing/variants.py",
    "testing/dropout.py",
    "testing/layouts.py",
    "testing/catalogue/__init__.py",
    "testing/catalogue/softmax.py",
    "testing/catalogue/sdp.py",
    "testing/oracles.py",
    "testing/catalogue/heads.py",
    "testing/catalogue/knobs.py",
    "testing/catalogue/modules.py",
    "testing/catalogue/decaying.py",
    "testing/catalogue/structure.py",
    "testing/catalogue/efficient.py",
    "testing/catalogue/masks.py",
    "testing/catalogue/bands.py",
    "testing/catalogue/scales.py",
    "check/__init__.py",
    "check/local.py",
    "check/ci.py",
    "check/nbruntime.py",
    "cli/__init__.py",
    "cli/student.py",
)
PACKAGE = Path(__file__).resolve().parents[1]
MIN_LINE = 8  # shorter solution lines ("return x") are too common to mean anything


class ReleaseError(UsageError):
    """The release cannot be built (folder in use, a leak found); the message says what to do."""


def release(out: Path, *, assignment: manifest.Assignment, force: bool = False) -> list[Path]:
    """Write the student repository of ``assignment`` into ``out``; return the files written."""
    root = assignment.root
    prepare(out, force=force, marker=".github/workflows/classroom.yml")
    written = [
        *copy_exercises(assignment, out),
        *copy_public_tests(assignment, out),
        *copy_runtime(out / "grader"),
    ]
    written += _write_texts(assignment, out)
    found = scan(out, solution_lines(root / "solutions", public=root / "tests" / "public"))
    if found:
        shutil.rmtree(out, ignore_errors=True)
        raise ReleaseError(
            f"refused: solution text found in {found[0][0]} ({found[0][1]!r}); "
            "run `grader build` and check that the stubs hold no solution code"
        )
    return written


def prepare(out: Path, *, force: bool, marker: str) -> None:
    """``out`` must be new or empty; with ``force``, an earlier release there (it has ``marker``) is
    replaced."""
    if out.exists() and not out.is_dir():
        raise ReleaseError(f"{out} is a file: give a folder for the release")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise ReleaseError(
                f"{out} is not empty: give a new folder, or --force to replace an earlier release"
            )
        if not (out / marker).exists():
            raise ReleaseError(
                f"{out} does not look like an earlier release (no {marker}): refusing to delete it"
            )
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def copy_exercises(assignment: manifest.Assignment, out: Path) -> list[Path]:
    names = ["__init__.py", *(f"{e.module}.py" for e in assignment.exercises)]
    return [
        copy_file(assignment.root / "exercises" / name, out / "exercises" / name) for name in names
    ]


def copy_public_tests(assignment: manifest.Assignment, out: Path) -> list[Path]:
    return [
        copy_file(assignment.root / e.public_tests, out / e.public_tests)
        for e in assignment.exercises
    ]


def copy_runtime(dest: Path) -> list[Path]:
    """The :data:`RUNTIME` files into ``dest`` (a ``grader`` folder), with a student
    ``__main__``."""
    written = [copy_file(PACKAGE / rel, dest / rel) for rel in RUNTIME]
    return [*written, write_file(dest / "__main__.py", texts.STUDENT_MAIN)]


def _write_texts(assignment: manifest.Assignment, out: Path) -> list[Path]:
    torch, index = texts.torch_version(), texts.CPU_INDEX
    # The manifest names the hidden test files (the schema requires it) but nothing reads them here;
    # it holds this assignment alone, so the student's commands default to it.
    manifest_text = manifest.text_of(assignment)
    return [
        write_file(out / "README.md", texts.readme(assignment, torch=torch, index=index)),
        write_file(
            out / "pyproject.toml",
            texts.PYPROJECT.substitute(
                name=f"{assignment.id}-exercises",
                version=__version__,
                title=assignment.title,
                torch=torch,
                index=index,
                no_numpy=NO_NUMPY,
            ),
        ),
        write_file(
            out / ".github" / "workflows" / "classroom.yml",
            texts.WORKFLOW.substitute(
                torch=torch,
                index=index,
                runner=texts.RUNNER_ID,
                env_name=f"{texts.RUNNER_ID.upper()}_RESULTS",
            ),
        ),
        write_file(out / ".gitignore", texts.GITIGNORE),
        write_file(out / "assignments.json", manifest_text),
    ]


def solution_lines(solutions: Path, *, public: Path | None = None) -> set[str]:
    """Every non-trivial stripped line inside a ``### BEGIN/END SOLUTION`` region of
    ``solutions/*.py``.

    Lines that the public tests already contain verbatim (hints such as ``self.heads =
    nn.ModuleList(``) are public by the instructor's choice and left out.
    """
    shown = "\n".join(p.read_text("utf-8") for p in sorted(public.glob("*.py"))) if public else ""
    found: set[str] = set()
    for path in sorted(solutions.glob("*.py")):
        inside = False
        for line in path.read_text("utf-8").splitlines():
            text = line.strip()
            if "BEGIN SOLUTION" in text or "END SOLUTION" in text:
                inside = "BEGIN" in text
            elif inside and len(text) >= MIN_LINE and text not in shown:
                found.add(text)
    return found


def scan(out: Path, lines: Iterable[str]) -> list[tuple[str, str]]:
    """(file, line) for each solution line found in a file under ``out``."""
    wanted = list(lines)
    hits = []
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        text = path.read_text("utf-8", errors="replace")
        hits += [(str(path.relative_to(out)), line) for line in wanted if line in text]
    return hits


def copy_file(src: Path, dst: Path) -> Path:
    """Copy ``src`` to ``dst``, making its folder; ``dst`` (the release and its bundles list what
    they wrote)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


def write_file(dst: Path, text: str) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(text, "utf-8")
    return dst
