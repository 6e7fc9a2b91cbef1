"""What the scorecard keeps of a submission's sandbox, as its backend (:mod:`grader.sandbox.remote`)
saw it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SandboxRecord:
    """What the scorecard keeps of a submission's sandbox: incidents (raw messages), output sizes,
    workers."""

    incidents: list[dict[str, str]]
    stdout_bytes: int
    stderr_bytes: int
    worker_starts: int
    worker_forks: int
    # the isolation /proc showed (attest.py); None: no worker started
    observed: dict[str, object] | None = None
    test_cpu: dict[str, float] = field(
        default_factory=dict
    )  # test id -> CPU seconds it took in the sandbox
