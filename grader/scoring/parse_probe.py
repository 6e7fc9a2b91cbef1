"""Whether a large source file parses within bounds, tried in a child: no file can cost the trusted
scan minutes.

The integrity scan parses every ``.py`` file of a submission in the trusted process (it needs the
tree). Python 3.11's parser is quadratic on some sources: a 1 MiB module of f-string replacement
fields took 157 s of CPU and 678 MiB to parse, within intake's size caps. A file above
:data:`PROBE_BYTES` is therefore parsed first by a fresh ``python -I -S`` that limits its own CPU
time and address space (as :mod:`grader.intake.bounded` does for notebooks); only a file that parses
there within the limits is parsed here. A file that exhausts them is the submission's doing: the
scan reports it ``unscannable``. A probe that cannot run is the grader's fault.
"""

from __future__ import annotations

import signal
import sys

from grader import procs
from grader.errors import GraderFault

# below this a parse is cheap whatever the source (the quadratic case: 0.6 s at 64 KiB)
PROBE_BYTES = 64 << 10
CPU_S = 5  # an honest 1 MiB module parses in well under a second
MEMORY_BYTES = 1 << 30
# past this with CPU to spare, the machine is starved: the grader's problem, not the file's
WALL_S = 120
_KILLED = (
    -signal.SIGXCPU,
    -signal.SIGKILL,
    3,
)  # the CPU limit (soft, then hard), the OOM killer, MemoryError


def too_costly(name: str, data: bytes) -> str | None:
    """Why ``data`` cannot be parsed within the limits (None where it can, or is small enough not to
    ask)."""
    if len(data) <= PROBE_BYTES:
        return None
    done = procs.run_bounded(
        "grader.scoring.parse_probe",
        what=f"parsing {name} for the integrity scan",
        wall_s=WALL_S,
        cpu_s=CPU_S,
        input=data,
    )
    if done.returncode in _KILLED:
        return f"takes more than {CPU_S} s of CPU or {MEMORY_BYTES >> 20} MiB to parse"
    if done.returncode != 0:
        raise GraderFault(
            f"the integrity scan's parser failed (exit status {done.returncode}): "
            f"{done.stderr.decode('utf-8', 'replace')[-300:]}"
        )
    return None


def _main() -> int:
    """The child: limits first, then the source from stdin; exit 0 whether or not it is valid
    Python."""
    import ast

    procs.limit_self(cpu_s=CPU_S, memory_bytes=MEMORY_BYTES)
    data = sys.stdin.buffer.read()
    try:
        ast.parse(data)
    except (SyntaxError, ValueError, RecursionError):
        return 0  # the scan's own parse says so, cheaply
    except MemoryError:
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(_main())
