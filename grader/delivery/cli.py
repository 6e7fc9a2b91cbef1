"""``grader release``: the student repository (grader.classroom), an nbgrader course, and the
``--gradescope ZIP`` and ``--classroom50 DIR`` bundles built on them (this package)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.errors import ExitCode


def _usage(message: str) -> int:
    print(f"grader: error: {message}", file=sys.stderr)
    return ExitCode.USAGE


def _cmd_release(args: argparse.Namespace) -> int:
    from grader.classroom import release

    if not (args.out or args.nbgrader or args.gradescope or args.classroom50):
        return _usage("give an output folder (grader release OUT) and/or --nbgrader COURSE_DIR, "
                      "--gradescope ZIP, --classroom50 DIR")
    try:
        if args.gradescope or args.classroom50:
            release_deliveries(args)
        if args.out:
            written = release.release(Path(args.out), force=args.force)
            print(f"student repository: {len(written)} files in {args.out}", file=sys.stderr)
        if args.nbgrader:
            from grader.classroom import notebooks

            written = notebooks.write_course(Path(args.nbgrader), force=args.force)
            print(f"nbgrader course: {len(written)} files in {args.nbgrader}; next: cd {args.nbgrader} && "
                  f"nbgrader generate_assignment {notebooks.ASSIGNMENT}", file=sys.stderr)
    except release.ReleaseError as exc:
        return _usage(str(exc))
    return ExitCode.OK


def release_deliveries(args: argparse.Namespace) -> None:
    """Write what the options ask for; :class:`grader.classroom.release.ReleaseError` says what went wrong."""
    from grader.classroom.release import ReleaseError

    if args.gradescope:
        from grader.delivery import gradescope

        zip_path = Path(args.gradescope)
        if zip_path.exists() and not args.force:
            raise ReleaseError(f"{zip_path} exists: give a new file name, or --force to replace it")
        gradescope.build_zip(zip_path)
        print(f"gradescope: {zip_path} (upload it as the autograder; setup.sh and run_autograder at its root)",
              file=sys.stderr)
    if args.classroom50:
        from grader.delivery import classroom50

        written = classroom50.release(Path(args.classroom50), force=args.force)
        print(f"classroom50: {len(written)} files in {args.classroom50}: template/ is the template repository, "
              f"autograders/<assignment>/ goes into classroom50/<CLASSROOM>/autograders/", file=sys.stderr)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``grader release``: the student repository, an nbgrader course, the Gradescope and Classroom 50 bundles."""
    p = sub.add_parser("release", help="build the student repository (and/or an nbgrader course)")
    p.add_argument("out", nargs="?", help="folder for the student template repository (must be new or empty)")
    p.add_argument("--nbgrader", metavar="COURSE_DIR", help="also write COURSE_DIR/source/<assignment>/*.ipynb")
    p.add_argument("--gradescope", metavar="ZIP", help="also write the Gradescope autograder zip (setup.sh, run_autograder)")
    p.add_argument("--classroom50", metavar="DIR", help="also write DIR/template (the template repository) and "
                   "DIR/autograders/<assignment>/ (the Classroom 50 autograder bundle: public tests only)")
    p.add_argument("--force", action="store_true", help="replace what an earlier release wrote there")
    p.set_defaults(func=_cmd_release)
