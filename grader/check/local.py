"""``grader check``: the public tests, run in this process against the student's ``exercises/``.

In-process on purpose: it is the student's own code on the student's own machine, and a debugger
(``breakpoint()``, ``--pdb``) must work. The result is a scorecard-shaped dict (isolation backend
``inprocess``); :func:`render` prints it as a table with the next thing to do for each exercise.
These are the public tests only: the hidden tests decide the grade, and the output says so.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from grader.cardtypes import Scorecard
from grader.course import manifest
from grader.errors import UsageError
from grader.gradetext import split_message
from grader.scoring import scorecard
from grader.scoring.points import exercise_scores
from grader.scoring.runner import run_suites

PUBLIC_ONLY = (
    "These are the public tests only. Your grade is decided by hidden tests your instructor runs "
    "after the deadline: passing every public test does not guarantee full marks."
)


class CheckError(UsageError):
    """``grader check`` cannot start (no exercises folder, unknown exercise); the message says what
    to do."""


def load(
    *, manifest_path: Path | None = None, root: Path | None = None, assignment: str | None = None
) -> manifest.Assignment:
    """The assignment from ``manifest_path``, else from the repository found from here (or
    ``root``)."""
    path = manifest_path or (root or manifest.find_root(Path.cwd())) / "assignments.json"
    try:
        return manifest.check_paths(manifest.load(path, assignment), ("public",))
    except manifest.ManifestError as exc:
        raise CheckError(str(exc)) from None


def check(
    *,
    exercises: Sequence[str] = (),
    root: Path | None = None,
    student: Path | None = None,
    assignment: str | manifest.Assignment | None = None,
    seed: int = 0,
    pdb: bool = False,
) -> Scorecard:
    """Run the public tests of ``exercises`` (all when empty); return a schema-valid scorecard dict.

    ``assignment`` is an id in the manifest of ``root`` (default: found from the current folder), or
    an assignment already loaded, whose suites and ``exercises/`` sit beside its manifest.
    """
    started, t0 = scorecard.now(), time.monotonic()
    spec = (
        assignment
        if isinstance(assignment, manifest.Assignment)
        else load(root=root, assignment=assignment)
    )
    try:
        chosen = [spec.exercise(e) for e in exercises] if exercises else list(spec.exercises)
    except manifest.ManifestError as exc:
        raise CheckError(str(exc)) from None
    student = student or spec.root / "exercises"
    if not student.is_dir():
        raise CheckError(
            f"no exercises folder at {student}: run grader check from your assignment repository"
        )
    results, _ = run_suites(
        [spec.root / e.public_tests for e in chosen],
        student=student,
        seed=seed,
        quiet=not pdb,
        extra_args=["--pdb", "-s"] if pdb else [],
        assignment=spec,
    )
    ids = {e.id for e in chosen}
    scores = [s for s in exercise_scores(results, spec) if s.id in ids]
    card = scorecard.scored(skeleton(spec, student, seed, started), scores, require_cuda=False)
    card["timings"]["tests_s"] = round(time.monotonic() - t0, 4)
    return scorecard.finished(card, seconds=time.monotonic() - t0)


def skeleton(assignment: manifest.Assignment, student: Path, seed: int, started: str) -> Scorecard:
    """An empty scorecard for a local, in-process run."""
    return scorecard.new(
        assignment=assignment.id,
        max_score=assignment.max_points,
        path=student,
        isolation=scorecard.inprocess_isolation(),
        seed=seed,
        layout="exercises-folder",
        started=started,
    )


def failed(card: Scorecard) -> bool:
    """True while any counted test has not passed (``grader check`` then exits 1)."""
    return card["status"] != "graded" or any(
        t["outcome"] != "passed" for e in card["exercises"] for t in e["tests"] if t["counted"]
    )


# -- advice
# ------------------------------------------------------------------------------------------
_ADVICE: tuple[tuple[str, str], ...] = (
    (
        r"TODO: implement ([\w.]+) in",
        "open exercises/{module}.py and replace the `raise NotImplementedError` "
        "in {0} with your code",
    ),
    (
        r"\w+\.([\w.]+) is not implemented yet",
        "open exercises/{module}.py and replace the "
        "`raise NotImplementedError` in {0} with your code",
    ),
    (
        r"`(\w+)` not found in",
        "define `{0}` in exercises/{module}.py (check the spelling and the signature)",
    ),
    (
        r"module (\w+)\.py not found",
        "exercises/{0}.py is missing: restore it (git checkout exercises/{0}.py)",
    ),
    (
        r"(\S+) is not allowed in this exercise",
        "{0} is banned here: the exercise is to write it yourself with basic tensor operations",
    ),
    (r"SyntaxError", "fix the syntax error in exercises/{module}.py (the message gives the line)"),
    (
        r"IndentationError",
        "fix the indentation in exercises/{module}.py (the message gives the line)",
    ),
    (r"time limit|timed out|ran past", "your code ran too long: look for an endless loop"),
    (
        r"ImportError|ModuleNotFoundError",
        "exercises/{module}.py imports something that is not installed: "
        "use torch and the standard library only",
    ),
)


def advice(message: str, module: str, test: str = "") -> str:
    """The next thing to do about a failure: the test's own hint, a mapped common case, or how to
    debug."""
    head, hint = split_message(message)
    for pattern, template in _ADVICE:
        found = re.search(pattern, head)
        if found:
            return template.format(*found.groups(), module=module)
    if hint:
        return hint
    where = f"tests/public/test_{module}.py" + (f"::{test}" if test else "")
    return f"read the message, then debug with: pytest {where} --pdb"


# -- rendering
# ---------------------------------------------------------------------------------------
def rows(card: Scorecard) -> list[tuple[str, str, str, str]]:
    """(exercise, points, first failure, next step) per exercise, in manifest order."""
    out = []
    for e in card["exercises"]:
        bad = [t for t in e["tests"] if t["counted"] and t["outcome"] != "passed"]
        points = f"{e['score']:g} / {e['max_score']:g}"
        if not bad:
            out.append((e["id"], points, "all public tests pass", "-"))
            continue
        first = bad[0]
        out.append(
            (
                e["id"],
                points,
                f"{_short(first['message']) or first['outcome']}\n"
                f"[dim]{first['name']} ({len(bad)} of {len(e['tests'])} failing)[/dim]",
                advice(first["message"], e["id"], first["name"]),
            )
        )
    return out


def _short(message: str) -> str:
    """The first line of a failure, without the exception type and the stub's TODO note."""
    from rich.markup import escape

    head = split_message(message)[0].splitlines()[0] if message.strip() else ""
    head = re.sub(r"^NotImplementedError: |\s*\(TODO: [^)]*\)", "", head)
    return escape(head[:240])


def render(card: Scorecard, stream: TextIO | None = None) -> None:
    """Print the table and the public-tests-only notice."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=stream or sys.stdout, soft_wrap=False)
    table = Table(title="grader check: public tests", show_lines=True)
    for name, style in (
        ("exercise", "bold"),
        ("points (public)", None),
        ("first failure", None),
        ("next step", "cyan"),
    ):
        table.add_column(name, style=style, overflow="fold")
    for exercise, points, failure, step in rows(card):
        table.add_row(exercise, points, failure, escape(step))
    console.print(table)
    total = f"{card['score']:g}/{card['max_score']:g} public points"
    if failed(card):
        console.print(
            f"[bold]{total}.[/bold] Fix the first failure of each exercise, then run grader check again."
        )
    else:
        console.print(f"[bold green]All public tests passed ({total}).[/bold green]")
    console.print(PUBLIC_ONLY)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m grader.check.local OUT MANIFEST ASSIGNMENT [EXERCISE...]``: write the scorecard
    to OUT (used by ``grader ci``, which has loaded the assignment and names it)."""
    args = list(sys.argv[1:] if argv is None else argv)
    out, path, assignment, exercises = Path(args[0]), Path(args[1]), args[2], args[3:]
    card = check(exercises=exercises, assignment=load(manifest_path=path, assignment=assignment))
    scorecard.write(card, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
