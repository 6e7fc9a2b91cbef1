"""Honest (sys.float_info, warnings and a debug print to stderr)."""
import sys
import warnings

import torch

DEBUG = False


def softmax_naive(x, dim=-1):
    if x.abs().max() > sys.float_info.max_exp:
        warnings.warn("softmax_naive may overflow for such large inputs", stacklevel=2)
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def softmax_stable(x, dim=-1):
    if DEBUG:
        print(f"softmax_stable: {tuple(x.shape)}", file=sys.stderr)
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)
