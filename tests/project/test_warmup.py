"""The worker's warm-up: a worker that nobody waits on warms every path; one whose setup frame is already in
the pipe (restarted mid-grade) stops between steps and leaves the rest to the first test that needs it."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from grader.inside import warmup
asked = []
def stop():
    asked.append(1)
    return len(asked) > {steps}
warmup.warm_up(stop=stop)
print(len(asked), warmup._done, "torch._dynamo" in sys.modules, flush=True)
"""


def _run(steps: int) -> list[str]:
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", PROBE.format(steps=steps)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_a_worker_nobody_waits_on_warms_every_path_including_the_meta_device():
    assert _run(steps=99) == ["2", "True", "True"]  # asked before each of the two steps, then done


def test_a_pending_setup_frame_stops_the_warm_up_before_the_meta_step():
    # the meta step is what imports torch._dynamo (0.65 s of CPU): skipped, it is not imported at all
    assert _run(steps=1) == ["2", "False", "False"]
    assert _run(steps=0) == ["1", "False", "False"]
