"""Attack: os._exit(0) inside a call (a grader that trusts exit codes would see success)."""
import os


def softmax_naive(x, dim=-1):
    os._exit(0)


def softmax_stable(x, dim=-1):
    os._exit(0)
