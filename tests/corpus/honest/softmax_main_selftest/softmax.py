"""Honest (a self-test): compares with torch.softmax in a helper nothing calls and in the main block."""
import torch


def softmax_naive(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def softmax_stable(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def _check_against_torch():
    x = torch.randn(4, 5)
    assert torch.allclose(softmax_stable(x), torch.softmax(x, dim=-1))


if __name__ == "__main__":
    _check_against_torch()
    print(torch.nn.functional.softmax(torch.zeros(3), dim=0))
