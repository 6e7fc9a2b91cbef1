"""How submissions are graded, as one frozen object: :class:`GradeOptions`.

``grade()``, ``grader grade``, ``grader batch`` (whose :class:`grader.batch.results.Options` adds
the batch's own fields) and the canary take it, and the CLIs read their argparse defaults from it. A
module of its own, light to import: ``grader --help`` must not load pytest or torch to show a
default.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.course import manifest
from grader.sandbox import isolation as iso
from grader.sandbox.levels import BackendName

__all__ = ["DEFAULTS", "GradeOptions", "launch_spec"]


@dataclass(frozen=True, kw_only=True)
class GradeOptions:
    """How submissions are graded: one object for ``grader grade``, ``grader batch`` (whose
    :class:`grader.batch.results.Options` adds its own) and the canary; the CLIs' defaults are read
    from it."""

    # the assignment's id in the manifest (None: the manifest's default one)
    assignment: str | None = None
    manifest_path: Path | None = None  # assignments.json (default: this checkout's)
    isolation: str = "auto"
    require_isolation: str | None = None
    seed: int | None = None  # None: a fresh random seed for every submission
    require_cuda: bool = False  # count CUDA tests in max_score even without a GPU
    threads: int = 1  # torch threads of each sandboxed worker
    exercises: list[str] | None = None  # grade only these exercise ids (quick checks, tests)
    per_test_time_limit: float | None = None  # overrides the manifest's per-exercise limits
    # the commands prove the machine first (False: the project's own tests only)
    canary: bool = True
    # graded while the canary's proof is being made beside it: under the lowest limits a proof could
    # set (grader.proofs.while_proving), the card then kept only if no test reached them
    proof_pending: bool = False
    # the integrity review made in a forked copy while the tests run, on a spare core (`grader
    # grade`: a person waits for it; a batch's slots use every core already)
    review_beside: bool = False

    def load(self) -> manifest.Assignment:
        """The assignment these options name, its hidden suites and references there (raises
        ``manifest.ManifestError``)."""
        return manifest.check_paths(manifest.load(self.manifest_path, self.assignment), ("hidden",))


DEFAULTS = GradeOptions()  # what the CLIs show and use when an option is not given


def launch_spec(
    assignment: manifest.Assignment, backend: BackendName, *, slot: int = 0, threads: int = 1
) -> iso.LaunchSpec:
    """The worker launch spec ``grade()`` uses (so a caller can pre-start a matching warm
    worker)."""
    lim = assignment.limits
    limits = iso.Limits(
        memory_mb=lim.memory_mb,
        processes=lim.processes,
        file_size_mb=lim.file_size_mb,
        cpu_s=int(lim.submission_wall_s),
        output_bytes=lim.output_kb << 10,
    )
    return iso.LaunchSpec(
        backend if backend != "inprocess" else "none", slot=slot, threads=threads, limits=limits
    )
