"""``grader release``: the student repository (grader.release.repository), an nbgrader course, and
the ``--gradescope ZIP`` and ``--classroom50 DIR`` bundles built on them (this package).

The manifest is read once; each output is written for the assignment chosen (``--assignment``, by
default the manifest's default one). With ``--assignment all`` every output is written once per
assignment, under a name that ends in the assignment's id (``OUT/<id>``, ``ZIP`` ->
``<stem>-<id>.zip``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.course import manifest
from grader.errors import ExitCode

ALL = "all"


def _usage(message: str) -> int:
    print(f"grader: error: {message}", file=sys.stderr)
    return ExitCode.USAGE


def _cmd_release(args: argparse.Namespace) -> int:
    from grader.release import repository as release

    if not (args.out or args.nbgrader or args.gradescope or args.classroom50):
        return _usage(
            "give an output folder (grader release OUT) and/or --nbgrader COURSE_DIR, "
            "--gradescope ZIP, --classroom50 DIR"
        )
    try:
        specs = chosen(
            manifest_path=Path(args.manifest) if args.manifest else None, assignment=args.assignment
        )
        for assignment in specs:
            release_one(args, assignment, many=len(specs) > 1)
    except (release.ReleaseError, manifest.ManifestError) as exc:
        return _usage(str(exc))
    return ExitCode.OK


def chosen(
    *, manifest_path: Path | None = None, assignment: str | None = None
) -> list[manifest.Assignment]:
    """The assignments to release: ``assignment`` (``all``: every one) from the manifest, loaded
    once."""
    if assignment == ALL:
        return manifest.load_all(manifest_path)
    return [manifest.load(manifest_path, assignment)]


def output(path: str, assignment: manifest.Assignment, *, many: bool) -> Path:
    """Where ``spec``'s copy of an output goes: ``path`` itself, or (several assignments) a name
    ending in its id."""
    given = Path(path)
    if not many:
        return given
    return (
        given.with_name(f"{given.stem}-{assignment.id}{given.suffix}")
        if given.suffix == ".zip"
        else given / assignment.id
    )


def release_one(args: argparse.Namespace, assignment: manifest.Assignment, *, many: bool) -> None:
    """Write every output the options ask for, for ``spec``; ``ReleaseError`` says what went wrong,
    and ``ManifestError`` names a suite file the manifest gives wrong (every release ships the
    public suites; the Gradescope zip the hidden ones and the references too)."""
    from grader.release import repository as release

    manifest.check_paths(assignment, ("public", "hidden") if args.gradescope else ("public",))
    release_deliveries(args, assignment, many=many)
    if args.out:
        out = output(args.out, assignment, many=many)
        written = release.release(out, assignment=assignment, force=args.force)
        print(
            f"student repository ({assignment.id}): {len(written)} files in {out}", file=sys.stderr
        )
    if args.nbgrader:
        from grader.release import nbgrader as notebooks

        course = output(args.nbgrader, assignment, many=many)
        written = notebooks.write_course(course, assignment=assignment, force=args.force)
        print(
            f"nbgrader course: {len(written)} files in {course}; next: cd {course} && "
            f"nbgrader generate_assignment {assignment.id}",
            file=sys.stderr,
        )


def release_deliveries(
    args: argparse.Namespace, assignment: manifest.Assignment, *, many: bool
) -> None:
    """The Gradescope zip and the Classroom 50 bundle, where the options ask for them."""
    from grader.release.repository import ReleaseError

    if args.gradescope:
        from grader.release import gradescope

        zip_path = output(args.gradescope, assignment, many=many)
        if zip_path.exists() and not args.force:
            raise ReleaseError(f"{zip_path} exists: give a new file name, or --force to replace it")
        gradescope.build_zip(zip_path, assignment=assignment)
        print(
            f"gradescope: {zip_path} (upload it as the autograder; setup.sh and run_autograder at its root)",
            file=sys.stderr,
        )
    if args.classroom50:
        from grader.release import classroom50

        folder = output(args.classroom50, assignment, many=many)
        written = classroom50.release(folder, assignment=assignment, force=args.force)
        print(
            f"classroom50: {len(written)} files in {folder}: template/ is the template repository, "
            f"autograders/{assignment.id}/ goes into classroom50/<CLASSROOM>/autograders/",
            file=sys.stderr,
        )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``grader release``: the student repository, an nbgrader course, the Gradescope and Classroom
    50 bundles."""
    p = sub.add_parser("release", help="build the student repository (and/or an nbgrader course)")
    p.add_argument(
        "out", nargs="?", help="folder for the student template repository (must be new or empty)"
    )
    p.add_argument(
        "--nbgrader", metavar="COURSE_DIR", help="also write COURSE_DIR/source/<assignment>/*.ipynb"
    )
    p.add_argument(
        "--gradescope",
        metavar="ZIP",
        help="also write the Gradescope autograder zip (setup.sh, run_autograder)",
    )
    p.add_argument(
        "--classroom50",
        metavar="DIR",
        help="also write DIR/template (the template repository) and "
        "DIR/autograders/<assignment>/ (the Classroom 50 autograder bundle: public tests only)",
    )
    p.add_argument(
        "--assignment",
        metavar="ID",
        help=f"the assignment to release (default: the manifest's default "
        f"one, {manifest.DEFAULT_ASSIGNMENT} here); {ALL!r}: each one, every output under a name ending "
        "in its id",
    )
    p.add_argument(
        "--manifest",
        metavar="FILE",
        help="assignments.json (default: this checkout's); its exercises/, "
        "solutions/ and tests/ folders sit beside it",
    )
    p.add_argument(
        "--force", action="store_true", help="replace what an earlier release wrote there"
    )
    p.set_defaults(func=_cmd_release)
