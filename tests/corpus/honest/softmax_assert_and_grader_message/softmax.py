"""Honest (torch._assert and messages that mention the grader): strings are not code."""
import torch

HELP = "if this fails, ask the grader. See grader.inside.bans in the course notes; torch.ops.aten is not needed"


def softmax_naive(x, dim=-1):
    torch._assert(x.is_floating_point(), "softmax needs floating-point input: the grader. See the README")
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def softmax_stable(x, dim=-1):
    if x.dim() == 0:
        raise ValueError(f"{HELP}: got a 0-d tensor, the grader. See __closure__ and sys.modules for nothing")
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)
