"""Inside the sandbox: cap this worker's share of GPU memory before student code runs (advisory).

The trusted side sets ``GRADER_GPU_MEMORY_MB`` only when it exposes a GPU. The cap is torch's
per-process memory fraction, queued to run when CUDA is first initialised (so a worker that never
touches CUDA pays nothing). It is advisory, and the isolation record says so: student code can
raise the fraction again or allocate with the driver directly; no kernel limit exists without MIG.
"""

from __future__ import annotations

import os

ENV = "GRADER_GPU_MEMORY_MB"


def cap_memory() -> bool:
    """Queue the cap; False when no cap was asked for (no GPU exposed)."""
    wanted = os.environ.get(ENV, "")
    if not wanted.isdigit():
        return False
    import torch

    def apply() -> None:
        for index in range(torch.cuda.device_count()):
            total = torch.cuda.get_device_properties(index).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, (int(wanted) << 20) / total), index)

    torch.cuda._lazy_call(apply)
    return True
