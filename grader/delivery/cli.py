"""The ``--gradescope ZIP`` and ``--classroom50 DIR`` options of ``grader release``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


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
