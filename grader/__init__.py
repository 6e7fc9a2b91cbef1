"""Attention-mechanisms exercise pack and autograder.

Where things live (the layout tells the architecture; docs/design/architecture.md draws it):

- ``grader.cli``         the ``grader`` command only: one module per command family;
- ``grader.course``      the assignment as data: manifest, reference solutions, stubs (``grader
  build``);
- ``grader.intake``      where a submission enters (folder, .py, .ipynb, archive), class folders and
  rosters;
- ``grader.inside``      what runs inside the sandbox (worker, executor, bans): untrusted from its
  first line;
- ``grader.protocol``    the plain data that crosses the wall (values, wire format, student errors);
- ``grader.sandbox``     where student code is isolated, seen from the trusted side (launchers,
  zygote, channel);
- ``grader.student``     the ``student`` proxy the suites use, and its in-process backend;
- ``grader.testing``     the pytest plugin the public and hidden suites run under;
- ``grader.scoring``     where results are scored and the scorecard is built;
- ``grader.grade``       one submission graded (``grader.canary`` proves the grader first);
- ``grader.exports``     what grades become: gradebook, summary, report, LMS and Gradescope files;
- ``grader.batch``       a class on this machine; ``grader.cluster`` a class on many machines;
- ``grader.check``       what runs where students are; ``grader.release`` what we hand out.
"""

from __future__ import annotations

# The one place the version is written: pyproject.toml reads it (dynamic), CHANGELOG.md's latest
# heading names it (a test pins both). Bump it, with a CHANGELOG entry, whenever grading changes;
# scorecards also record what decided each grade (grader.fingerprint), so a rerun regrades what
# changed even between two releases.
__version__ = "0.4.16"

# The library functions the commands are thin shells over (keyword options after at most one
# positional), and the one error tree, by module. Reached through their modules, not re-exported
# here: `grader.grade` and `grader.batch` are modules of this package (a function of the same name
# would shadow them), and this package is imported inside the sandbox too (`process`/`none`), which
# must never load the trusted side.
LIBRARY: dict[str, tuple[str, ...]] = {
    "grader.grade": ("grade", "GradeRefused"),
    "grader.options": ("GradeOptions", "launch_spec"),
    "grader.batch.job": ("batch",),
    "grader.check.local": ("check",),
    "grader.canary": ("prove",),
    "grader.errors": ("ExitCode", "GraderError", "UsageError", "GraderFault"),
}

__all__ = ["LIBRARY", "__version__"]
