"""Read a notebook in a child process with CPU and memory limits: no notebook can cost the trusted
process.

A notebook is JSON whose code cells are parsed (``json.loads``, ``ast.parse``, ``ast.literal_eval``)
to take its definitions. Done in the trusted process, a 6 MiB list literal in one cell took a batch
to 3.3 GB before the check on the module's size could refuse it, and ``ast.parse`` of a 1 MiB
f-string of replacement fields takes minutes of CPU (Python 3.11's f-string parser is quadratic).
So :func:`notebook_module` hands the open file to a fresh ``python -I -S`` (stdlib and
:mod:`grader.intake.notebook` only) that limits its own address space and CPU time before reading
a byte, checks sizes before parsing, and answers one line of JSON: the module text or why the
notebook cannot be read. Running out of either limit is the notebook's doing (an
:class:`IntakeError`); a reader that cannot start or fails otherwise is the grader's
(:class:`~grader.errors.GraderFault`).
"""

from __future__ import annotations

import json
import signal
import sys
from typing import BinaryIO

from grader import procs, safetext
from grader.errors import GraderFault
from grader.safefs import MAX_TOTAL_BYTES, IntakeError

CPU_S = 5  # CPU seconds to read one notebook (an honest one takes well under 0.1 s)
# the reader's address space: a 64 MiB notebook of outputs with one emoji takes 400 MiB
MEMORY_BYTES = 768 << 20
# past this with CPU to spare, the machine is starved: the grader's problem, not the notebook's
WALL_S = 120
_KILLED = (
    -signal.SIGXCPU,
    -signal.SIGKILL,
)  # the CPU limit (soft, then hard), or the kernel's OOM killer


def notebook_module(name: str, source: BinaryIO) -> str:
    """The module text of notebook ``name`` (sanitised), read from the open file ``source`` by a
    bounded child."""
    done = procs.run_bounded(
        "grader.intake.bounded",
        name,
        what="the notebook reader",
        wall_s=WALL_S,
        cpu_s=CPU_S,
        stdin=source,
    )
    if done.returncode in _KILLED:
        raise IntakeError(
            f"{name}: takes more than {CPU_S} s of CPU or {MEMORY_BYTES >> 20} MiB of memory to read; "
            "submit a .py file"
        )
    try:
        reply = json.loads(done.stdout) if done.returncode == 0 else None
    except ValueError:
        reply = None
    if not isinstance(reply, dict) or not isinstance(reply.get("module", reply.get("error")), str):
        tail = safetext.name(done.stderr.decode("utf-8", "replace")[-600:], 600)
        raise GraderFault(f"the notebook reader failed (exit status {done.returncode}): {tail}")
    if "error" in reply:
        raise IntakeError(reply["error"])
    module: str = reply["module"]
    return module


def _main(name: str) -> None:
    """The child: limits first, then the notebook from stdin, then one line of JSON on stdout."""
    procs.limit_self(cpu_s=CPU_S, memory_bytes=MEMORY_BYTES)
    from grader.intake.notebook import notebook_module as read

    reply: dict[str, str]
    try:
        data = sys.stdin.buffer.read(MAX_TOTAL_BYTES + 1)
        if len(data) > MAX_TOTAL_BYTES:
            raise IntakeError(f"{name}: larger than {MAX_TOTAL_BYTES >> 20} MiB")
        reply = {"module": read(name, data)}
    except IntakeError as exc:
        reply = {"error": str(exc)}
    except MemoryError:
        reply = {
            "error": f"{name}: needs more than {MEMORY_BYTES >> 20} MiB of memory to read; submit a .py file"
        }
    sys.stdout.write(json.dumps(reply))


if __name__ == "__main__":
    _main(sys.argv[1])
