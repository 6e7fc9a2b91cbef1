"""Attack: sleep forever inside a call (no CPU used, so only a wall deadline stops it)."""
import time


def softmax_naive(x, dim=-1):
    time.sleep(1e6)


def softmax_stable(x, dim=-1):
    time.sleep(1e6)
