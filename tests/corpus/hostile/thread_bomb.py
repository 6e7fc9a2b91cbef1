"""Attack: start threads until the process cannot, then return zeros."""
import threading
import time

import torch


def softmax_naive(x, dim=-1):
    started = 0
    try:
        for _ in range(100_000):
            threading.Thread(target=time.sleep, args=(1e6,), daemon=True).start()
            started += 1
    except RuntimeError:
        pass
    return torch.zeros_like(x)


def softmax_stable(x, dim=-1):
    return softmax_naive(x, dim)
