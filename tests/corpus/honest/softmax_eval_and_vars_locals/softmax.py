"""Honest (locals named like builtins): `eval`, `vars`, `compile` and `open` are the student's own names here."""
import torch

open = "open interval"  # a module constant that happens to shadow the builtin; never called


def softmax_naive(x, dim=-1, eval=None):
    vars = torch.exp(x)  # a local named vars
    compile = vars.sum(dim=dim, keepdim=True)
    return vars / compile


def softmax_stable(x, dim=-1):
    eval = x - x.amax(dim=dim, keepdim=True)  # a local named eval
    vars = eval.exp()
    return vars / vars.sum(dim=dim, keepdim=True)
