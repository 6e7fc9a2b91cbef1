"""Attack: answer a call twice (a forged reply first, then the real one) to desynchronise the runner.

Each later call would otherwise read the answer to the call before it. A reply nobody asked for
is a protocol violation: the rest of the exercise fails, the correct `softmax_stable` included.
"""
import json
import os
import stat
import struct

import torch


def _forged_reply():
    header = json.dumps({"v": {"$m": [["ok", True]]}, "t": []}).encode()  # a well-formed {"ok": True}
    frame = b"GRW1" + struct.pack("<I", len(header)) + header + struct.pack("<Q", 0)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, frame)
        except OSError:
            pass


def softmax_naive(x, dim=-1):
    _forged_reply()
    exp = torch.exp(x)
    return exp / exp.sum(dim=dim, keepdim=True)


def softmax_stable(x, dim=-1):
    exp = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return exp / exp.sum(dim=dim, keepdim=True)
