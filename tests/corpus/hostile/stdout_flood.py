"""Attack: write 2 GiB to stdout."""
import os


def softmax_naive(x, dim=-1):
    block = b"A" * (1 << 20)
    for _ in range(2048):
        os.write(1, block)


def softmax_stable(x, dim=-1):
    return softmax_naive(x, dim)
