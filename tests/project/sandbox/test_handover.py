"""A launch's privileged parent lets go of the worker's pipes before its child may become the worker.

Attestation (grader/sandbox/attest.py) takes whoever holds the request pipe for the worker and holds it to the
sandbox's promise. A root parent (the zygote's proxy, the namespace launcher) that was descheduled between its fork
and closing its own copies was seen holding the pipe after the worker said "ready", and a correct submission got a
grader error under load (CI beside a CPU hog, e21bf4b). Here the parent is made slow on purpose: the child must
still never see it holding the pipe, and a parent that dies instead of closing must not leave its child waiting.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.project.support.common import ROOT

pytestmark = [
    pytest.mark.cost(2),
    pytest.mark.skipif(os.name != "posix", reason="/proc and fork: Linux only"),
]

# runs in its own interpreter; the child answers on its own copy of stdout, so reading to EOF waits for the child
_SCRIPT = r"""
import os, sys, time
from grader.sandbox import attest, launcher

read, write = os.pipe()
os.dup2(read, 0)
os.close(read)
os.close(write)  # both ends share the inode: only the read end may be looked for
pipe = f"pipe:[{os.fstat(0).st_ino}]"
close = launcher._close_pipes

def slow_close(cfg):
    if sys.argv[1] == "dies":
        os._exit(0)  # the parent dies holding the pipes: its child must go on all the same
    time.sleep(0.5)  # a parent descheduled between its fork and its close
    close(cfg)

launcher._close_pipes = slow_close
me = os.getpid()
child = launcher.fork_handing_over({"response_fd": 3})
if child == 0:
    held = os.path.exists(f"/proc/{me}") and attest._holds(me, pipe)
    os.write(1, b"parent held the pipe" if held else b"released")
    os._exit(0)
os.waitpid(child, 0)
"""


@pytest.mark.parametrize("parent", ["slow", "dies"])
def test_the_child_goes_on_only_once_the_parent_has_let_go(parent):
    """Slow: the child waits out the parent's 0.5 s and then sees no copy. Dies: the gate's EOF releases the
    orphan. Reading stdout to EOF waits for the child itself, which holds a copy until it exits."""
    said = subprocess.run(
        [sys.executable, "-c", _SCRIPT, parent],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert said.stdout == b"released", said.stderr.decode()
