"""Attack: print a full-marks scorecard and forged reply frames on every plausible fd, then answer zeros."""
import json
import os
import struct

import torch

FAKE = {"schema_version": 1, "status": "graded", "score": 100, "max_score": 100}


def _forge():
    print(json.dumps(FAKE), flush=True)
    header = json.dumps({"v": {"ok": True}, "t": []}).encode()
    frame = b"GRW1" + struct.pack("<I", len(header)) + header + struct.pack("<Q", 0)
    for fd in range(3, 12):
        try:
            os.write(fd, frame + b"garbage\x00\xff")
        except OSError:
            pass


def softmax_naive(x, dim=-1):
    _forge()
    return torch.zeros_like(x)


def softmax_stable(x, dim=-1):
    _forge()
    return torch.zeros_like(x)
