"""Honest (exp of x minus its log-sum-exp): stable, and in float16 its log-sum-exp is rounded to float16 (up to
half a float16 step of the row's largest score in every exponent: 0.8% of a probability when scores reach 32)."""
import torch


def softmax_naive(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    num = x.exp()
    return num / num.sum(dim, keepdim=True)


def softmax_stable(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))
