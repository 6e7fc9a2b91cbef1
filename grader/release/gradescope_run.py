"""What a Gradescope ``run_autograder`` runs: grade ``/autograder/submission``, write
``results.json``.

Run as root by Gradescope, as ``python -I -m grader.release.gradescope_run --root /autograder``
(``--root`` or ``GRADER_AUTOGRADER_ROOT`` moves the tree, for tests). The student's code never runs
as root: Gradescope's containers cannot create namespaces, so the strongest backend there is
``process`` (rlimits, seccomp, no_new_privs, a Landlock file view where the kernel has one) with a
leased unprivileged uid, which cannot read ``source/tests/hidden`` or ``source/solutions`` (outside
the Landlock view, and ``setup.sh`` made them root-only). Where namespaces do work, ``auto`` takes
them. The backend and uid used are recorded in ``extra_data.isolation``.

Any failure of the grader (the canary refusing this machine, a crash, an error scorecard of kind
``grader``) writes **no** ``results.json`` and exits 1, with the reason on stdout. That is
Gradescope's own failure signal (its autograder documentation, "Troubleshooting": no valid
results.json gives "The autograder failed to execute correctly"): the submission is marked failed,
not scored, the instructor sees the reason in the autograder output and can rerun it once the cause
is fixed; a results.json of 0 would be a grade. A submission that cannot be read as uploaded is the
student's: a results.json of 0 that says why (:func:`gradescope_results.intake_rejected`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.cardtypes import Scorecard
from grader.course import manifest
from grader.errors import GraderFault
from grader.exports import gradescope as gs
from grader.sandbox.levels import BackendName

if TYPE_CHECKING:
    from grader.options import GradeOptions

ROOT_ENV = "GRADER_AUTOGRADER_ROOT"
DEFAULTS: dict[str, Any] = {
    "assignment": manifest.DEFAULT_ASSIGNMENT,
    "hidden_visibility": "after_published",
    "isolation": "auto",
    "canary": True,
}


@dataclass(frozen=True)
class Tree:
    """The autograder folders (Gradescope's layout under one root)."""

    root: Path

    @property
    def source(self) -> Path:
        return self.root / "source"

    @property
    def submission(self) -> Path:
        return self.root / "submission"

    @property
    def results(self) -> Path:
        return self.root / "results" / "results.json"

    @property
    def metadata(self) -> Path:
        return self.root / "submission_metadata.json"


FAILED_NOTE = (
    'No results.json was written, so Gradescope shows this submission as "The autograder failed to '
    'execute correctly" and records no score. Fix the cause above, then rerun the autograder on it.'
)


class GraderFailed(GraderFault):
    """The grader, not the submission, failed; the message is for the instructor."""


def config(tree: Tree) -> dict[str, Any]:
    try:
        loaded = json.loads((tree.source / "gradescope.json").read_text("utf-8"))
    except FileNotFoundError:
        loaded = {}
    return {**DEFAULTS, **loaded}


def choose_backend(requested: str) -> BackendName:
    """The strongest backend here (as root without namespaces: ``process``, whose student code runs
    as a leased uid like every level's under root); never ``none``."""
    from grader.sandbox import choice

    backend = choice.choose(requested)
    if backend == "none":
        raise GraderFailed(
            "no isolation backend stronger than `none` here: refusing to run student code"
        )
    return backend


def grade(tree: Tree, settings: dict[str, Any], isolation: str) -> dict[str, Any]:
    """Grade the submission; return results.json (raise :class:`GraderFailed` on a grader fault)."""
    from grader import canary
    from grader.course import manifest
    from grader.exports import late
    from grader.options import GradeOptions

    manifest_path = tree.source / "assignments.json"
    assignment = manifest.load(manifest_path, settings["assignment"])
    backend = choose_backend(isolation)
    options = GradeOptions(assignment=assignment.id, manifest_path=manifest_path, isolation=backend)
    extra: dict[str, Any] = {"backend_requested": isolation}
    try:
        attested = canary.attest(assignment, backend=backend, enabled=settings["canary"])
    except canary.CanaryFailed as exc:
        raise GraderFailed(str(exc)) from None
    if attested.record is not None:
        extra["canary"] = attested.record
    card = _graded(tree.submission, options, assignment, backend)
    error = card["error"] if card["status"] == "error" else None
    if error is not None and error["kind"] == "intake":
        document = gs.intake_rejected(card, extra=extra)
    elif error is not None:
        raise GraderFailed(f"{error['kind']} error: {error['message']}")
    else:
        penalty = late.assess(
            card["score"], late.policy(manifest_path, assignment.id), late.metadata(tree.metadata)
        )
        document = gs.results(
            card, visibility=settings["hidden_visibility"], late=penalty, extra=extra
        )
    return document  # validated by its builder


def _graded(
    submission: Path, options: GradeOptions, assignment: manifest.Assignment, backend: BackendName
) -> Scorecard:
    """The submission's card, its first worker started before this process imports torch and
    pytest: a fresh container has no zygote to fork from, and a cold worker's own torch import
    (about a second) then overlaps ours instead of following it (as ``grader grade`` does)."""
    from grader.options import launch_spec
    from grader.sandbox import starters, warm

    early = warm.prestart(launch_spec(assignment, backend, threads=options.threads))
    try:
        from grader.grade import grade as grade_one  # torch and pytest: while the worker starts

        return grade_one(
            submission,
            options=options,
            assignment=assignment,
            starter=starters.with_prestarted(early),
        )
    finally:
        early.discard()


def run(tree: Tree, isolation: str | None = None) -> int:
    """Grade and write results.json (exit 0, whatever the score); on a grader failure, no
    results.json (exit 1)."""
    tree.results.unlink(missing_ok=True)  # no earlier run's results may stand for this one
    try:
        settings = config(tree)
        document = grade(tree, settings, isolation or settings["isolation"])
    except Exception as exc:  # noqa: BLE001 - any grader fault is Gradescope's failure state, never a score
        traceback.print_exc(
            file=sys.stdout
        )  # Gradescope shows the autograder output to instructors only
        print(f"GRADER FAILED, not the submission: {type(exc).__name__}: {exc}\n{FAILED_NOTE}")
        return 1
    gs.write_atomic(tree.results, document)
    print(f"results.json: score {document['score']:g} (graded)")
    return 0


def prove_image(tree: Tree, isolation: str | None = None) -> int:
    """``setup.sh``'s step: prove the grader once, in the image, under the configuration
    ``run_autograder`` will use. The proof is cached under its key (the launch configuration, torch,
    Python, the kernel, the suites: as for any proof), so each submission's run finds it instead of
    grading the references again; a run whose configuration differs (another kernel on the grading
    host) does not match the key and proves again, never trusting it."""
    from grader import canary

    settings = config(tree)
    if not settings["canary"]:
        return 0
    try:
        assignment = manifest.load(tree.source / "assignments.json", settings["assignment"])
        record = canary.prove(
            assignment, backend=choose_backend(isolation or settings["isolation"])
        ).record()
    except GraderFault as exc:
        print(
            f"could not prove the grader in the image ({exc}); run_autograder will prove it for each submission"
        )
        return 1
    print(
        f"canary: reference solutions {record['solutions']:g}/{record['max_score']:g}, stubs {record['stubs']:g} "
        "(proven in the image; run_autograder reuses the proof while its configuration matches)"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gradescope_run", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root", default=os.environ.get(ROOT_ENV, "/autograder"), help="the autograder folder"
    )
    parser.add_argument(
        "--isolation", choices=["auto", "namespace", "bwrap", "process"], default=None
    )
    parser.add_argument(
        "--prove", action="store_true", help="prove the grader only (setup.sh, once per image)"
    )
    args = parser.parse_args(argv)
    return (prove_image if args.prove else run)(Tree(Path(args.root)), args.isolation)


if __name__ == "__main__":
    sys.exit(main())
