"""Attack: sys.exit(0) inside a call."""
import sys


def softmax_naive(x, dim=-1):
    sys.exit(0)


def softmax_stable(x, dim=-1):
    raise SystemExit(0)
