"""The isolation levels, weakest first: the one list argparse choices, ranks and probes come from.

Kept apart from :mod:`grader.sandbox.isolation` so that building the command line costs no probe.
"""

from typing import Literal, TypeGuard, get_args

Level = Literal["none", "process", "bwrap", "namespace"]  # a sandbox level, as scorecards record it
LEVELS: tuple[Level, ...] = get_args(Level)
BackendName = Literal[
    "inprocess", "none", "process", "bwrap", "namespace"
]  # what a grade runs under: a level, or the
# in-process backend of the public tests and the project's own tests (never a grade of record)
CHOICES = (
    "auto",
    *reversed(LEVELS),
)  # what --isolation accepts: the strongest available, or one level


def is_backend(name: object) -> TypeGuard[BackendName]:
    """Whether ``name`` names a backend (a level or ``inprocess``)."""
    return name == "inprocess" or name in LEVELS


def is_level(name: object) -> TypeGuard[Level]:
    """Whether ``name`` is one of :data:`LEVELS` (what a scorecard, a manifest or a command line may
    say)."""
    return name in LEVELS
