"""Where the file view is only file permissions, check what a sandbox uid could read before grading.

``process`` without Landlock (an old kernel, or a container whose seccomp profile refuses it) has no
allowlist of its own: a leased uid can read whatever any user may read. That is acceptable only when
the secrets are not among it, as after Gradescope's ``setup.sh`` (``solutions/`` and the hidden
suites root-only). So before such a grade, an unprivileged probe, started as the leased uid, tries
to open each secret; if it can, grading is refused with what to do instead.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

from grader import procs
from grader.course import manifest
from grader.sandbox import view
from grader.sandbox.choice import IsolationError

# stdlib only, in a fresh interpreter that already is the probed uid (subprocess drops it before
# exec)
_PROBE = """import json, os, sys
seen = []
for path in sys.argv[1:]:
    try:
        os.listdir(path) if os.path.isdir(path) else open(path, 'rb').close()
        seen.append(path)
    except OSError:
        pass
print(json.dumps(seen))"""


class SecretsExposed(IsolationError):
    """A sandbox uid could read the solutions or the hidden suites: grading is refused."""


def secrets(assignment: manifest.Assignment) -> list[str]:
    """What no student code may read: the reference solutions, the hidden suites, this user's zygote
    sockets."""
    root = assignment.root
    found = [root / "solutions", *sorted((root / "solutions").glob("*.py"))]
    found += [root / e.hidden_tests for e in assignment.exercises]
    found.append(procs.cache_root() / "zygotes")
    return [str(p) for p in found if p.exists()]


@functools.cache
def readable(uid: int, paths: tuple[str, ...]) -> tuple[str, ...]:
    """Which of ``paths`` a process running as ``uid`` (no groups) can open."""
    # an interpreter the uid can run (grade() checked there is one)
    python = view.worker_python() or sys.executable
    done = subprocess.run(
        [python, "-I", "-S", "-c", _PROBE, *paths],
        user=uid,
        group=uid,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
    if done.returncode != 0:
        raise SecretsExposed(
            f"cannot check what the sandbox uid {uid} may read (its probe failed: "
            f"{done.stderr.strip()[-300:]}); is the interpreter readable to other users?"
        )
    return tuple(json.loads(done.stdout))


def check(assignment: manifest.Assignment, uid: int) -> None:
    """Raise :class:`SecretsExposed` when ``uid`` can read any secret of ``assignment``."""
    seen = readable(uid, tuple(secrets(assignment)))
    if seen:
        shown = ", ".join(str(Path(p)) for p in seen[:4]) + (" ..." if len(seen) > 4 else "")
        raise SecretsExposed(
            f"refusing to grade under `process` isolation: this kernel offers no Landlock file view, and the sandbox's "
            f"unprivileged uid could read {shown}. Make them readable by their owner only (for example "
            f"`chmod -R go-rwx {assignment.root / 'solutions'} {assignment.root / 'tests' / 'hidden'}`), or grade "
            "where namespaces (root) or Landlock (Linux 5.13+) are available"
        )
