"""One exception tree for the trusted side, and the exit codes the command line maps it to.

- :class:`UsageError`: the caller's mistake (a path that is not there, a bad manifest, an option
  that cannot be honoured). The command prints one line that says what to do and exits 2.
- :class:`GraderFault`: the grader could not do its job (slots that do not start, a canary that
  fails, suites that cannot be collected). Never charged to a student; exit 3.
- :class:`SubmissionError`: a submission that cannot be read as given (intake). It becomes an
  intake-error scorecard, never an exit of its own.

What student code raises is not here: it crosses the wall as plain data
(:mod:`grader.protocol.errors`).
"""

from __future__ import annotations

import os
import sys
from enum import IntEnum
from typing import NoReturn

# torch's import warning without numpy (not a dependency, never used here): every command filters it
# (the grader's, a student's `grader check`/`ci`, a student repository's pytest ini), as nothing a
# student can act on
NO_NUMPY = "Failed to initialize NumPy"


class ExitCode(IntEnum):
    """As pytest's ``ExitCode``: what a ``grader`` command's exit status means."""

    OK = 0  # done, whatever the scores
    FAILED = 1  # checks failed (`check`), or some submission ended in an error (`batch`)
    USAGE = 2  # the caller's mistake: nothing was graded
    FAULT = 3  # the grader could not grade (the canary refused, slots could not start)
    INTERRUPTED = 130  # Ctrl-C or SIGTERM: what was finished is kept


def exit_now(code: int) -> NoReturn:
    """End a quick command (``grader grade``/``check``/``ci``) without the interpreter's teardown:
    with torch and pytest loaded it takes 0.3 s after the result is out. Callers have written their
    results (atomically) and reaped their workers in ``finally`` blocks already; only the output
    buffers are left to flush."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class GraderError(Exception):
    """Base of every error the trusted side raises on purpose; ``label`` is how the CLI introduces
    it."""

    label = "error"


class UsageError(GraderError, ValueError):
    """The caller's mistake: the message says what to give instead (exit 2)."""


class GraderFault(GraderError, RuntimeError):
    """The grader itself could not do its job; never a student's failure (exit 3)."""

    label = "grader fault"


class SubmissionError(GraderError, ValueError):
    """A submission cannot be read as given; the message is for its scorecard."""
