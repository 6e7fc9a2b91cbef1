"""``grader ci --format github-classroom``: the public tests as a GitHub Classroom runner result.

The tests run in a child process (``python -m grader.check.local``) under a wall-clock limit, so
a submission that hangs or kills its interpreter still yields a runner JSON with a ``tests`` array
(the reporter throws without one). The JSON is :func:`grader.exports.rows.to_github_classroom` of
the scorecard: each test carries its real points, because the reporter sums ``tests[].score``.

Points in CI come from the public tests only; the runner's ``message`` says so.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from grader import schema
from grader.cardtypes import Scorecard, error_of
from grader.check import local as check_mod
from grader.course import manifest
from grader.exports import rows as exports
from grader.scoring import scorecard

FORMATS = ("github-classroom",)
DEFAULT_TIMEOUT_S = 600.0
CI_MESSAGE = (
    "CI points come from the public tests only ({score:g}/{max:g}). Your grade is decided by the "
    "hidden tests your instructor runs later; run `grader check` locally to see what to fix."
)


def run_card(
    assignment: manifest.Assignment,
    *,
    exercises: Sequence[str] = (),
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Scorecard:
    """The public-test scorecard of ``spec``, computed in a child process; an error scorecard on
    timeout or crash."""
    root = assignment.root
    started, t0 = scorecard.now(), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="grader-ci-") as tmp:
        out = Path(tmp) / "card.json"
        cmd = [
            sys.executable,
            "-m",
            "grader.check.local",
            str(out),
            str(assignment.manifest),
            assignment.id,
            *exercises,
        ]
        proc = subprocess.Popen(
            cmd,
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            return _error_card(
                assignment,
                started,
                t0,
                f"the public tests did not finish within {timeout_s:g} s "
                "(an endless loop?); run `grader check` locally to find the slow test",
            )
        if proc.returncode == 0 and out.is_file():
            card: Scorecard = json.loads(out.read_text("utf-8"))  # the plugin's own scorecard
            return card
        tail = output.decode("utf-8", "replace").strip().splitlines()[-5:]
        return _error_card(
            assignment,
            started,
            t0,
            f"the public tests crashed (exit {proc.returncode}): " + " | ".join(tail),
        )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.communicate()


def _error_card(
    assignment: manifest.Assignment, started: str, t0: float, message: str
) -> Scorecard:
    card = scorecard.with_error(
        check_mod.skeleton(assignment, assignment.root / "exercises", 0, started), "grader", message
    )
    return scorecard.finished(card, seconds=time.monotonic() - t0)


def github_classroom(card: Scorecard) -> dict[str, Any]:
    """The runner JSON for ``card``; the error entry and the message speak to the student."""
    result = exports.to_github_classroom(card)
    result["message"] = CI_MESSAGE.format(score=card["score"], max=result["max_score"])
    if card["status"] == "error":
        for test in result["tests"]:
            if test["name"] == "grading":
                test["message"] = error_of(card)["message"][:2000]
    schema.validate("github-classroom", result)
    return result


def encode(result: dict[str, Any]) -> str:
    """base64 of the compact JSON, as the reporter decodes it (``Buffer.from(x, "base64")``)."""
    return base64.b64encode(json.dumps(result, separators=(",", ":")).encode("utf-8")).decode(
        "ascii"
    )


def emit(
    result: dict[str, Any], *, github_output: str | None = None, stream: TextIO | None = None
) -> str:
    """Append ``result=<base64>`` to ``$GITHUB_OUTPUT`` when set, else print the JSON; say where it
    went."""
    github_output = github_output if github_output is not None else os.environ.get("GITHUB_OUTPUT")
    if github_output:
        with open(github_output, "a", encoding="utf-8") as fh:
            fh.write(f"result={encode(result)}\n")
        return f"result written to $GITHUB_OUTPUT ({github_output})"
    print(json.dumps(result, indent=2), file=stream or sys.stdout)
    return "result printed"


def ci(
    assignment: manifest.Assignment,
    *,
    fmt: str = "github-classroom",
    exercises: Sequence[str] = (),
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> dict[str, Any]:
    """Run ``spec``'s public tests (its ``exercises/`` beside its manifest) and return the result in
    ``fmt``."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    return github_classroom(run_card(assignment, exercises=exercises, timeout_s=timeout_s))
