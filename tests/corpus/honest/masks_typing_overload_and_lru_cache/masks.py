"""Honest (functools.lru_cache on a pure helper, typing.overload, an Enum)."""
import enum
import functools
from typing import overload

import torch


class Fill(enum.Enum):
    BLOCKED = float("-inf")
    OPEN = 0.0


@functools.lru_cache(maxsize=32)
def _tril_cpu(n: int) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool).tril()


def causal_mask(seq_len, device=None):
    return _tril_cpu(seq_len).clone().to(device) if device is not None else _tril_cpu(seq_len).clone()


@overload
def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor: ...
@overload
def padding_mask(lengths: torch.Tensor, max_len: int, *, inverted: bool) -> torch.Tensor: ...
def padding_mask(lengths, max_len, *, inverted=False):  # noqa: E302
    keep = torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]
    return ~keep if inverted else keep


def to_additive(mask, dtype=torch.float32):
    return torch.full(mask.shape, Fill.OPEN.value, dtype=dtype, device=mask.device).masked_fill(~mask,
                                                                                              Fill.BLOCKED.value)
