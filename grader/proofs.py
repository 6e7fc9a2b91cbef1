"""The canary's proofs, cached, and what they teach the grades after them: per-test time limits.

A proof (:mod:`grader.canary`) is cached per (grader source, manifest and suites, environment,
launch configuration, exercises): a batch pays for it once, and so does every later run on an
unchanged machine. It also keeps the CPU time each reference test took in the sandbox, measured
there (the one thing stored: ``proof.schema.json``), and every grade derives its per-test limits
from it (:func:`limit_for`): ``FACTOR`` times the reference's own time, never under ``FLOOR_S``
and never over the manifest's limit for the exercise. An infinite loop then costs a second a
test instead of the manifest's 10-30, while a correct but slow solution (Python loops where the
reference vectorises) keeps a margin of ``FACTOR``. Once one test of a submission has timed out,
its later tests run under the same limits with a floor of ``TIGHT_FLOOR_S`` instead (``tight``):
a submission that loops in every exercise costs one full limit and then a fraction of a second
an exercise, while the references keep their margin of ``FACTOR`` (the median reference test
takes 2 ms of CPU: the floors are 500x and 50x it). Kept below :mod:`grader.grade`, which reads
the limits for its own configuration from here, so that every path that grades (a command, a
batch slot, Gradescope, a cluster worker) uses them without passing them along.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from grader import __version__, procs, safefs
from grader.cardtypes import Scorecard, error_of
from grader.course import manifest
from grader.sandbox.levels import BackendName

if TYPE_CHECKING:
    from grader.options import GradeOptions

CACHE_ENV = procs.CACHE_ENV
FORMAT = 5  # 2: per-test limits; 3: keyed on grader.fingerprint; 4: tight limits; 5: reference CPU
FACTOR, FLOOR_S, TIGHT_FLOOR_S = 25.0, 1.0, 0.1


class TestLimits(NamedTuple):
    """The per-test CPU limits a grade uses: ``full`` until its first timeout, ``tight`` after."""

    full: dict[str, float]
    tight: dict[str, float]


class Reference(NamedTuple):
    """What one reference test took in the sandbox, and the exercise whose ceiling bounds its limit."""

    exercise: str
    cpu_s: float


@dataclass(frozen=True)
class Proof:
    key: str
    solutions: float
    stubs: float
    max_score: float
    cached: bool
    references: dict[str, Reference] = field(default_factory=dict)  # test id -> its reference's run

    def record(self) -> dict[str, Any]:
        """What a scorecard and the summary keep of the canary."""
        return {
            "key": self.key,
            "solutions": self.solutions,
            "stubs": self.stubs,
            "max_score": self.max_score,
            "cached": self.cached,
        }

    def limits(self, assignment: manifest.Assignment) -> TestLimits:
        """Each test's CPU limits, full and tight, from its reference's time and the manifest."""
        ceiling = {e.id: e.time_limit_s for e in assignment.exercises}
        known = {t: r for t, r in self.references.items() if r.exercise in ceiling}
        return TestLimits(
            {t: limit_for(r.cpu_s, ceiling[r.exercise]) for t, r in known.items()},
            {t: limit_for(r.cpu_s, ceiling[r.exercise], TIGHT_FLOOR_S) for t, r in known.items()},
        )


def limit_for(reference_cpu_s: float, exercise_limit_s: float, floor: float = FLOOR_S) -> float:
    """The CPU seconds a test may take, from what the reference took (see the module docstring)."""
    return round(min(exercise_limit_s, max(floor, FACTOR * reference_cpu_s)), 3)


def references_from(card: Scorecard) -> dict[str, Reference]:
    """Each reference test's CPU seconds from the solutions' scorecard (tests that ran in a sandbox:
    ``cpu_s``)."""
    return {
        t["id"]: Reference(e["id"], float(t["cpu_s"]))
        for e in card.get("exercises", [])
        for t in e["tests"]
        if "cpu_s" in t
    }


def limits(
    assignment: manifest.Assignment,
    *,
    backend: BackendName,
    exercises: list[str] | None,
    per_test_time_limit: float | None,
) -> TestLimits:
    """The per-test limits a grade in this configuration uses: the cached proof's (none when there
    is none, or when an explicit per-test limit overrides them all)."""
    if per_test_time_limit is not None or backend == "inprocess":
        return TestLimits({}, {})
    proof = cached(assignment, backend=backend, exercises=exercises, per_test_time_limit=None)
    return proof.limits(assignment) if proof else TestLimits({}, {})


def for_grade(
    assignment: manifest.Assignment, options: GradeOptions, backend: BackendName
) -> tuple[dict[str, float], TestLimits]:
    """Both limits a sandboxed grade uses: each exercise's (the manifest's, the options' override,
    or :func:`while_proving`'s while the proof is made) and each test's (:func:`limits`)."""
    override = options.per_test_time_limit
    time_limits = assignment.time_limits(override)
    if options.proof_pending and override is None:
        return while_proving(time_limits), TestLimits({}, {})
    tests = limits(
        assignment, backend=backend, exercises=options.exercises, per_test_time_limit=override
    )
    return time_limits, tests


def while_proving(time_limits: dict[str, float]) -> dict[str, float]:
    """The per-test limits of a grade made while its proof is still being made
    (:mod:`grader.canary_beside`): the lowest any proof could set, ``FLOOR_S`` under each exercise's
    ceiling (:func:`limit_for`). No test that stays under them would time out under the proof's."""
    return {exercise: min(seconds, FLOOR_S) for exercise, seconds in time_limits.items()}


def provisional_holds(card: Scorecard) -> bool:
    """Whether a grade made under :func:`while_proving`'s limits is the grade the proof's limits
    would have given: no test timed out, not even once before a retry (every test then stayed under
    limits no higher than the proof's, and a submission that never timed out never gets the tight
    ones), and the grader did not fail (a fault on a loaded machine may not recur)."""
    if card["status"] == "error":
        return error_of(card)["kind"] != "grader"
    return not any(incident["kind"] == "timeout" for incident in card.get("incidents", []))


def cached(
    assignment: manifest.Assignment,
    *,
    backend: BackendName,
    exercises: list[str] | None = None,
    per_test_time_limit: float | None = None,
) -> Proof | None:
    """The cached proof for this configuration, or None when :func:`grader.canary.prove` would have
    to grade."""
    return read(
        cache_key(
            assignment,
            backend=backend,
            exercises=exercises,
            per_test_time_limit=per_test_time_limit,
        )
    )


def cache_key(
    assignment: manifest.Assignment,
    *,
    backend: BackendName,
    exercises: list[str] | None,
    per_test_time_limit: float | None,
) -> str:
    """A hash of everything that could change the canary's outcome on this machine: what decides a
    grade (:func:`grader.fingerprint.record`, the scorecard's own record), the stubs, and this
    machine's particulars, the launch configuration the proof's workers actually get included (uid
    drop, file view, filters, limits): a proof made under one configuration is never reused for
    another that may not even start a worker."""
    from grader import fingerprint
    from grader.options import launch_spec

    grading = fingerprint.record(
        assignment, backend=backend, per_test_time_limit=per_test_time_limit
    )
    stubs = fingerprint.files(assignment)["stubs"]
    launch = (
        launch_spec(assignment, backend).fingerprint() if backend != "inprocess" else "inprocess"
    )
    env = [
        grading["key"],
        hashlib.sha256(b"".join(p.read_bytes() for p in stubs)).hexdigest(),
        __version__,
        sys.version,
        platform.platform(),
        _torch_build(),
        str(os.geteuid() if hasattr(os, "geteuid") else ""),
        launch,
        assignment.id,
        ",".join(sorted(exercises or [])),
        str(FORMAT),
    ]
    return hashlib.sha256("\0".join(env).encode()).hexdigest()[:32]


def _torch_build() -> str:
    """torch's version file (release, CUDA, git revision), read without importing torch (about a
    second)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return "no torch"
    version = Path(spec.origin).with_name("version.py")
    return (
        hashlib.sha256(version.read_bytes()).hexdigest()
        if version.is_file()
        else "no torch/version.py"
    )


def cache_dir() -> Path:
    return procs.cache_root() / "canary"


def read(key: str) -> Proof | None:
    """The proof cached under ``key``; None (so it is made again) when absent, unreadable, or not
    valid under ``proof.schema.json`` (the one definition of a proof file, also checked on write):
    a cache is never trusted over a fresh proof. A file read before is read again only once its
    size, times or inode changed (a command asks about four times, a batch slot per submission)."""
    path = cache_dir() / f"{key}.json"
    signature = safefs.signature(path)
    if signature is None:
        return None
    if signature not in _READ:
        proof = _parse(key, path)
        if proof is None:
            return None
        _READ[signature] = proof
    return _READ[signature]


_READ: dict[safefs.Signature, Proof] = {}  # valid proof files by their stat


def _parse(key: str, path: Path) -> Proof | None:
    from grader import schema  # already imported where a grade runs: it read the manifest

    try:
        data = json.loads(path.read_text("utf-8"))
        schema.validate("proof", data)
    except (OSError, ValueError):  # SchemaError, JSONDecodeError and a bad encoding among them
        return None
    references = {
        t: Reference(r["exercise"], float(r["cpu_s"])) for t, r in data["references"].items()
    }
    return Proof(
        key,
        float(data["solutions"]),
        float(data["stubs"]),
        float(data["max_score"]),
        cached=True,
        references=references,
    )


def write(key: str, proof: Proof) -> None:
    """Atomically, checked against its schema; a cache that cannot be written only costs the next
    run another proof."""
    from grader import schema

    document = {
        "schema_version": schema.SCHEMAS["proof"],
        "solutions": proof.solutions,
        "stubs": proof.stubs,
        "max_score": proof.max_score,
        "references": {
            t: {"exercise": r.exercise, "cpu_s": r.cpu_s} for t, r in proof.references.items()
        },
    }
    schema.validate("proof", document, writing=True)
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{key}.")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(document, fh)
        os.replace(tmp, folder / f"{key}.json")
    except OSError:
        pass
