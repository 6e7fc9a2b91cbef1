"""Attack: reserve 16 GiB without touching it (cgroups alone would let this through)."""
import torch


def softmax_naive(x, dim=-1):
    big = torch.empty(1 << 32)  # 16 GiB
    return big[: x.numel()].view_as(x)


def softmax_stable(x, dim=-1):
    return softmax_naive(x, dim)
