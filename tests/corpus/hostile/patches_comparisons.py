"""Attack: monkeypatch torch.allclose, torch.testing.assert_close and Tensor.__eq__, then return zeros."""
import torch
import torch.testing

torch.allclose = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)
torch.equal = lambda *a, **k: True


def softmax_naive(x, dim=-1):
    return torch.zeros_like(x)


def softmax_stable(x, dim=-1):
    return torch.zeros_like(x)
