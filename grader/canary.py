"""The grader proves it can grade before it scores anyone: the canary.

Before ``grader grade`` or ``grader batch`` grades a student, the reference solutions and the stubs
are graded in the same sandbox configuration (backend, limits, exercises, time limits). The solutions
must get full marks and the stubs zero; otherwise the run is refused with the reason ("reference
solutions scored 0/100 here: RuntimeError: Numpy is not available") and no student scorecard is
written. A machine that cannot grade (a missing dependency, a broken sandbox, CUDA that does not
initialise) then fails loudly instead of giving every student 0.

The proof is cached per (grader source, manifest and suites, environment, backend, exercises): a
batch pays for it once, and so does every later run on an unchanged machine.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import platform
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader import __version__, fingerprint, manifest, procs
from grader.errors import GraderFault

if TYPE_CHECKING:
    from grader.sandbox.shared_zygote import SharedZygote
    from grader.sandbox.starters import WorkerStarter

CACHE_ENV = procs.CACHE_ENV
FORMAT = 2  # 2: keyed on grader.fingerprint


PROVING = ("proving the grader first: grading the reference solutions (full marks expected) and the stubs (zero "
           "expected) in the sandbox, as the students will be; cached until the grader, suites or machine change…")


def proven(record: dict[str, Any], seconds: float) -> str:
    """The line that says the proof holds (``record``: :meth:`Proof.record`)."""
    how = "cached proof" if record["cached"] else f"proven in {seconds:.0f} s"
    top = record["max_score"]
    return (f"canary: reference solutions {record['solutions']:g}/{top:g}, stubs {record['stubs']:g}/{top:g} "
            f"({how})")


class CanaryFailed(GraderFault):
    """This machine cannot grade correctly: the message names what failed."""

    label = "refusing to grade"


@dataclass(frozen=True)
class Proof:
    key: str
    solutions: float
    stubs: float
    max_score: float
    cached: bool

    def record(self) -> dict[str, Any]:
        """What a scorecard and the summary keep of the canary."""
        return {"key": self.key, "solutions": self.solutions, "stubs": self.stubs, "max_score": self.max_score,
                "cached": self.cached}


def prove(assignment: manifest.Assignment, *, backend: str, exercises: list[str] | None = None,
          per_test_time_limit: float | None = None, starter: WorkerStarter | None = None) -> Proof:
    """Grade solutions and stubs under ``backend`` (or reuse a cached proof); raise :class:`CanaryFailed`.

    ``starter`` starts their sandboxed workers the way the students' will be started (forks of this user's
    zygote, where the command uses one); None: freshly exec'd workers."""
    key = cache_key(assignment, backend=backend, exercises=exercises, per_test_time_limit=per_test_time_limit)
    cached = _read(key)
    if cached is not None:
        return cached
    from grader.grade import grade
    from grader.options import GradeOptions

    options = GradeOptions(assignment=assignment.id, manifest_path=assignment.manifest, isolation=backend,
                           exercises=exercises, per_test_time_limit=per_test_time_limit)
    solutions = grade(assignment.root / "solutions", options=options, assignment=assignment, starter=starter)
    _check(solutions, "reference solutions", want_full=True)
    stubs = grade(assignment.root / "exercises", options=options, assignment=assignment, starter=starter)
    _check(stubs, "stubs (exercises/)", want_full=False)
    proof = Proof(key, solutions["score"], stubs["score"], solutions["max_score"], cached=False)
    _write(key, proof)
    return proof


def _check(card: dict[str, Any], what: str, *, want_full: bool) -> None:
    score, top = card["score"], card["max_score"]
    if card["status"] == "graded" and (score == top if want_full else score == 0) and top > 0:
        return
    expected = f"{top:g}/{top:g}" if want_full else f"0/{top:g}"
    raise CanaryFailed(f"{what} scored {score:g}/{top:g} here (expected {expected}): {_first_problem(card)}; "
                       "this machine cannot grade correctly, so no student was graded (fix the environment, "
                       "or see `grader grade solutions` for every failing test)")


def _first_problem(card: dict[str, Any]) -> str:
    if card["status"] == "error":
        return f"{card['error']['kind']} error: {card['error']['message'][:300]}"
    for exercise in card["exercises"]:
        for test in exercise["tests"]:
            if test["counted"] and (test["outcome"] != "passed") == (card["score"] < card["max_score"]):
                first_line = (test["message"].splitlines() or [""])[0]
                return f"{test['id']}: {test['outcome']}: {first_line[:300]}"
    return "no failing test recorded"


# -- the cache ------------------------------------------------------------------------------------
def cached(assignment: manifest.Assignment, *, backend: str, exercises: list[str] | None = None,
           per_test_time_limit: float | None = None) -> Proof | None:
    """The cached proof for this configuration, or None when :func:`prove` would have to grade."""
    return _read(cache_key(assignment, backend=backend, exercises=exercises, per_test_time_limit=per_test_time_limit))


def zygote_for_proof(assignment: manifest.Assignment, *, backend: str, exercises: list[str] | None = None,
                     per_test_time_limit: float | None = None) -> SharedZygote | None:
    """This user's zygote, started now when a proof is due under a backend that forks; None when a cached proof
    will do or the backend cannot fork. Started before the caller imports the grading side, it warms up meanwhile,
    and the proof's workers fork from it as the students' will (two cold workers were 3 CPU-seconds of a first run)."""
    from grader.sandbox import shared_zygote
    from grader.sandbox.zygote_client import FORKABLE

    if backend not in FORKABLE or cached(assignment, backend=backend, exercises=exercises,
                                         per_test_time_limit=per_test_time_limit) is not None:
        return None
    return shared_zygote.warm(prepare=lambda: importlib.import_module("grader.grade"))  # torch, pytest meanwhile


def cache_key(assignment: manifest.Assignment, *, backend: str, exercises: list[str] | None,
              per_test_time_limit: float | None) -> str:
    """A hash of everything that could change the canary's outcome on this machine: what decides a grade
    (:func:`grader.fingerprint.record`, the scorecard's own record), the stubs, and this machine's particulars,
    the launch configuration the proof's workers actually get included (uid drop, file view, filters, limits):
    a proof made under one configuration is never reused for another that may not even start a worker."""
    from grader.options import launch_spec

    grading = fingerprint.record(assignment, backend=backend, per_test_time_limit=per_test_time_limit)
    stubs = fingerprint.files(assignment)["stubs"]
    launch = launch_spec(assignment, backend).fingerprint() if backend != "inprocess" else "inprocess"
    env = [grading["key"], hashlib.sha256(b"".join(p.read_bytes() for p in stubs)).hexdigest(), __version__,
           sys.version, platform.platform(), _torch_build(), str(os.geteuid() if hasattr(os, "geteuid") else ""),
           launch, assignment.id, ",".join(sorted(exercises or [])), str(FORMAT)]
    return hashlib.sha256("\0".join(env).encode()).hexdigest()[:32]


def _torch_build() -> str:
    """torch's version file (release, CUDA, git revision), read without importing torch (about a second)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return "no torch"
    version = Path(spec.origin).with_name("version.py")
    return hashlib.sha256(version.read_bytes()).hexdigest() if version.is_file() else "no torch/version.py"


def cache_dir() -> Path:
    return procs.cache_root() / "canary"


def _read(key: str) -> Proof | None:
    try:
        data = json.loads((cache_dir() / f"{key}.json").read_text("utf-8"))
        return Proof(key, float(data["solutions"]), float(data["stubs"]), float(data["max_score"]), cached=True)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(key: str, proof: Proof) -> None:
    """Atomically; a cache that cannot be written only costs the next run another proof."""
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{key}.")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"solutions": proof.solutions, "stubs": proof.stubs, "max_score": proof.max_score}, fh)
        os.replace(tmp, folder / f"{key}.json")
    except OSError:
        pass
