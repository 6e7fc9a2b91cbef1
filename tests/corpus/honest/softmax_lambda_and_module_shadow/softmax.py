"""Honest (lambdas, and a module-level name `vars` bound before use)."""
import torch

vars = {"dim": -1}

softmax_naive = lambda x, dim=vars["dim"]: torch.exp(x) / torch.exp(x).sum(dim, keepdim=True)  # noqa: E731


def softmax_stable(x, dim=vars["dim"]):
    z = x - x.max(dim, keepdim=True)[0]
    return (lambda e: e / e.sum(dim, keepdim=True))(z.exp())
