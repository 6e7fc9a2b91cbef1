"""Attack: write a malformed frame on the reply pipe in one function; the other function is correct.

A protocol violation is hostile: it fails the rest of the exercise, so the correct `softmax_stable`
must not keep its points (it used to keep 4.5 of 6).
"""
import os
import stat
import struct

import torch


def _reply_pipes():
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode):
                yield fd
        except OSError:
            pass


def softmax_naive(x, dim=-1):
    bad = b"GRW1" + struct.pack("<I", 2) + b"{]" + struct.pack("<Q", 0)
    for fd in list(_reply_pipes()):
        try:
            os.write(fd, bad)
        except OSError:
            pass
    return torch.zeros_like(x)


def softmax_stable(x, dim=-1):
    exp = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return exp / exp.sum(dim=dim, keepdim=True)
