"""Attack: allocate and touch memory in 512 MiB steps until something gives."""
import torch

HOARD = []


def softmax_naive(x, dim=-1):
    while True:
        HOARD.append(torch.ones(1 << 27))  # 512 MiB of float32, written


def softmax_stable(x, dim=-1):
    return softmax_naive(x, dim)
