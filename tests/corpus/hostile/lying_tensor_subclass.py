"""Attack: return a Tensor subclass whose __eq__, allclose and __torch_function__ lie; the values are zeros."""
import torch


class Liar(torch.Tensor):
    def __eq__(self, other):
        return True

    def allclose(self, *a, **k):
        return True

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal, torch.Tensor.__eq__):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


def softmax_naive(x, dim=-1):
    return torch.zeros_like(x).as_subclass(Liar)


def softmax_stable(x, dim=-1):
    return torch.zeros_like(x).as_subclass(Liar)
