"""``grader release --classroom50 DIR``, and the folder ``gh teacher download`` writes.

``DIR/template/`` is the template repository (what ``grader release`` writes, without the retired
GitHub Classroom workflow: Classroom 50 adds its own on accept). ``DIR/autograders/<assignment>/`` is
the per-assignment bundle to copy into ``classroom50/<CLASSROOM>/autograders/<assignment>/``: an
``autograder.py`` honouring Classroom 50's contract, the public tests, the student runtime and the
manifest. Classroom 50's own docs say the bundle is served publicly and the workflow is not a
security boundary, so the bundle never holds a hidden test or a solution line: the release is
refused (and removed) if one is found.

:func:`download_entries` yields (login, repository folder) for the folder ``gh teacher download``
writes: ``<classroom>-<assignment>_submissions_<timestamp>/<classroom>-<assignment>-<login>/`` with
``scores.csv`` at its root, or with ``-d DIR --by-pattern`` the same repositories in ``DIR`` with no
``scores.csv``: the login is then what follows ``-<assignment>-``, as the timestamped folder's prefix gives it.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import stat
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

from grader import manifest
from grader.classroom import release as base
from grader.classroom import texts
from grader.delivery.gradescope import fill

MARKER = ".classroom50-release"
WORKFLOW = Path(".github") / "workflows" / "classroom.yml"
C50_SENTENCE = ("- On every submission, Classroom 50 runs the public tests and shows their points on the\n"
                "  submission's Release; those points also come from the public tests only.")
BUNDLE_SCHEMAS = ("schemas/classroom50-result.schema.json",)
POINTS = re.compile(r"mark\.points\(\s*([0-9.]+)\s*\)")
SCALES = (1, 2, 4, 5, 10, 20, 100, 1000)
MIN_HIDDEN_LINE = 20  # a hidden test's line this long and absent from the public tests is its own


def release(out: Path, *, spec: manifest.Assignment, force: bool = False) -> list[Path]:
    """Write ``out/template`` and ``out/autograders/<assignment>``; return the files written."""
    base.prepare(out, force=force, marker=MARKER)
    written = _template(out / "template", spec)
    bundle = out / "autograders" / spec.id
    written += _bundle(bundle, spec)
    problems = leaks(bundle, spec, shown=out / "template")
    if problems:
        shutil.rmtree(out, ignore_errors=True)
        raise base.ReleaseError(f"refused: the Classroom 50 bundle would publish {problems[0]}")
    return [*written, base.write_file(out / MARKER, "written by grader release --classroom50\n")]


def _template(dest: Path, spec: manifest.Assignment) -> list[Path]:
    written = base.release(dest, spec=spec)
    (dest / WORKFLOW).unlink()
    for folder in (dest / WORKFLOW.parent, dest / WORKFLOW.parent.parent):
        folder.rmdir()
    readme = dest / "README.md"
    readme.write_text(readme.read_text("utf-8").replace(texts.CI, C50_SENTENCE), "utf-8")
    return [p for p in written if p.exists()]


def _bundle(dest: Path, spec: manifest.Assignment) -> list[Path]:
    public = [spec.root / e.public_tests for e in spec.exercises]
    text = fill("autograder.py", ASSIGNMENT=spec.id, TORCH=texts.torch_version(), INDEX=texts.CPU_INDEX,
                SCALE=str(scale(public)))
    written = [base.write_file(dest / "autograder.py", text)]
    written += [base._copy(p, dest / p.relative_to(spec.root)) for p in public]
    written += base.copy_runtime(dest / "grader")
    written += [base._copy(base.PACKAGE / rel, dest / "grader" / rel) for rel in BUNDLE_SCHEMAS]
    written.append(base.write_file(dest / "assignments.json", manifest.text_of(spec)))
    return written


def scale(public_tests: list[Path]) -> int:
    """Units per point that make every public test's points a whole number (result.json wants integers)."""
    values = [Fraction(v) for p in public_tests for v in POINTS.findall(p.read_text("utf-8"))]
    return next((k for k in SCALES if all((v * k).denominator == 1 for v in values)), SCALES[-1])


def leaks(bundle: Path, spec: manifest.Assignment, *, shown: Path) -> list[str]:
    """What the bundle must never publish: hidden test files or lines, solution lines (empty when clean).

    A hidden test's line counts only when the students do not already have it (``shown``: the template
    repository, e.g. ``__tracebackhide__ = True`` is in the runtime too).
    """
    found = [f"{p.relative_to(bundle)} (a hidden-tests path)" for p in bundle.rglob("*") if "hidden" in p.parts]
    public = "\n".join(p.read_text("utf-8", errors="replace") for p in shown.rglob("*") if p.is_file())
    hidden = {line.strip() for e in spec.exercises for line in (spec.root / e.hidden_tests).read_text("utf-8")
              .splitlines() if len(line.strip()) >= MIN_HIDDEN_LINE and line.strip() not in public}
    lines = hidden | base.solution_lines(spec.root / "solutions", public=spec.root / "tests" / "public")
    found += [f"{file} (line {line!r})" for file, line in base.scan(bundle, lines)]
    return found


# -- gh teacher download ----------------------------------------------------------------------------
DOWNLOAD_NAME = re.compile(r"^(?P<prefix>.+)_submissions_\d{4}_\d{2}_\d{2}_T_\d{2}_\d{2}_\d{2}$")


def _lmode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0


def _repos(root: Path) -> list[Path]:
    """Every entry but regular files (scores.csv): folders, and links or devices for the caller to refuse."""
    return sorted(p for p in root.iterdir()
                  if not p.name.startswith((".", "__")) and not stat.S_ISREG(_lmode(p)))


def _logins(root: Path) -> list[str]:
    try:
        with (root / "scores.csv").open(newline="", encoding="utf-8-sig") as fh:
            return [row["username"].strip() for row in csv.DictReader(fh) if (row.get("username") or "").strip()]
    except (OSError, KeyError, csv.Error, UnicodeDecodeError):
        return []


def is_download(root: Path, assignment: str | None = None) -> bool:
    """``root`` looks like what ``gh teacher download`` wrote: its name, ``scores.csv``, or (``-d DIR
    --by-pattern``, which writes neither) repositories all named ``<classroom>-<assignment>-<login>``."""
    root = Path(root)
    if not stat.S_ISDIR(_lmode(root)):
        return False
    repos = [p for p in _repos(root) if stat.S_ISDIR(_lmode(p))]
    if not any(stat.S_ISDIR(_lmode(p / "exercises")) for p in repos):
        return False
    if DOWNLOAD_NAME.match(root.name) is not None or _logins(root):  # `-d DIR` keeps the name literal
        return True
    return assignment is not None and all(_by_pattern(p.name, assignment) for p in _repos(root))


def _by_pattern(name: str, assignment: str) -> str | None:
    """The login in ``<classroom>-<assignment>-<login>`` (the first ``-<assignment>-`` in the name), else None."""
    found = re.match(rf"^.+?-{re.escape(assignment.lower())}-(?P<login>.+)$", name.lower())
    return name[found.start("login"):] if found else None


def download_entries(root: Path, assignment: str | None = None) -> Iterator[tuple[str, Path]]:
    """(login, repository folder) for each entry of a ``gh teacher download`` folder, links included
    (never followed here: the caller refuses them). The login is the repository name without the
    ``<classroom>-<assignment>-`` prefix: matched against ``scores.csv`` when present, else the prefix the
    folder's name gives, else (``--by-pattern`` into a folder of any name) what follows ``-<assignment>-``."""
    root = Path(root)
    named = DOWNLOAD_NAME.match(root.name)
    prefix = named["prefix"].lower() + "-" if named else ""
    logins = sorted(_logins(root), key=len, reverse=True)  # the longest login that ends the name wins
    for repo in _repos(root):
        name = repo.name.lower()
        login = next((u for u in logins if name.endswith("-" + u.lower())), None)
        if login is None and prefix and name.startswith(prefix) and len(name) > len(prefix):
            login = repo.name[len(prefix):]
        if login is None and assignment:
            login = _by_pattern(repo.name, assignment)
        yield login or repo.name, repo
