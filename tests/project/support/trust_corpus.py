"""The integrity corpora as students: honest styles (tests/corpus/honest) and evasions (tests/corpus/hostile/integrity,
tests/corpus/hostile/structure). Shared by the project's tests and benchmarks/integrity.py.

- An honest student is a folder: its files replace the reference solutions' modules of the same name (helper modules
  are added beside them); a folder holding one file that is no exercise's module is a one-file submission
  (``homework.py``), graded on its own. Every honest student must keep full marks and never be withheld.
- An evasion is one file: it replaces the module its docstring names ("Attack (module)"), and says how it is caught
  ("Caught: withhold", "Caught: review", or "Caught: test NAME" for a check by behaviour, the test it fails).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from grader.course import manifest

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests" / "corpus"
HONEST = CORPUS / "honest"
# the blind honest students (tests/corpus/blind/README.md): honest like the styles above, but kept out of
# the similarity idiom's authors (grader/similarity/idiom.py), which the styles above are
BLIND_HONEST = CORPUS / "blind" / "honest"
EVASIONS = [
    *sorted((CORPUS / "hostile" / "integrity").glob("*.py")),
    *sorted((CORPUS / "hostile" / "structure").glob("*.py")),
]
_ATTACKED = re.compile(r"Attack \((\w+)\)")
_CAUGHT = re.compile(r"Caught: (withhold|review|test (\w+))")


@dataclass(frozen=True)
class Student:
    name: str
    kind: str  # honest | evasion
    source: Path
    assignment: str
    exercises: tuple[str, ...]  # the exercises whose modules it replaces (what is graded)
    single: str | None = None  # the module of a one-file submission
    caught: str = ""  # evasions: withhold | review | test
    test: str = ""  # evasions caught by a test: its name

    def stage(self, folder: Path) -> Path:
        """Write the submission into ``folder`` (created); return the path to grade (a folder or one file)."""
        folder.mkdir(parents=True, exist_ok=True)
        if self.single:
            target = folder / f"{self.single}.py"
            shutil.copy(next(self.source.glob("*.py")), target)
            return target
        shutil.copytree(
            ROOT / "solutions",
            folder,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__", "__init__.py"),
        )
        if self.kind == "honest":
            for file in self.source.glob("*.py"):
                shutil.copy(file, folder / file.name)
        else:
            shutil.copy(self.source, folder / f"{self.module}.py")
        return folder

    @property
    def module(self) -> str:
        return _owner(self.exercises[0])[1].module if self.exercises else ""


def _owner(exercise_id: str) -> tuple[manifest.Assignment, manifest.Exercise]:
    for assignment in manifest.load_all():
        for exercise in assignment.exercises:
            if exercise.id == exercise_id:
                return assignment, exercise
    raise KeyError(exercise_id)


def _by_module() -> dict[str, tuple[str, str]]:
    """module -> (assignment id, exercise id)."""
    return {e.module: (a.id, e.id) for a in manifest.load_all() for e in a.exercises}


def honest() -> list[Student]:
    owners, out = _by_module(), []
    folders = [*HONEST.iterdir(), *BLIND_HONEST.iterdir()]
    for folder in sorted(p for p in folders if p.is_dir()):
        stems = [p.stem for p in sorted(folder.glob("*.py"))]
        mine = [owners[s] for s in stems if s in owners]
        if not mine:  # one file that is no exercise's module: the whole assignment in one file
            basics = manifest.load()
            out.append(
                Student(
                    f"honest-{folder.name}",
                    "honest",
                    folder,
                    basics.id,
                    tuple(basics.ids()),
                    single=stems[0],
                )
            )
            continue
        out.append(
            Student(
                f"honest-{folder.name}", "honest", folder, mine[0][0], tuple(e for _, e in mine)
            )
        )
    return out


def evasions() -> list[Student]:
    owners, out = _by_module(), []
    for path in EVASIONS:
        head = path.read_text("utf-8")[:600]
        module = _ATTACKED.search(head)
        caught = _CAUGHT.search(" ".join(head.split()))
        assert module and caught, (
            f"{path.name}: its docstring must say 'Attack (module)' and 'Caught: ...'"
        )
        assignment, exercise = owners[module.group(1)]
        kind = caught.group(1).split()[0]
        out.append(
            Student(
                f"{path.parent.name}-{path.stem}",
                "evasion",
                path,
                assignment,
                (exercise,),
                caught=kind,
                test=caught.group(2) or "",
            )
        )
    return out
