# Generated from solutions/scaled_dot_product.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `scaled_dot_product`: scaled dot-product attention by hand, with masks and dropout.

    Attention(Q, K, V) = softmax(Q K^T * scale + bias) V,   scale = 1 / sqrt(E) by default

Conventions (the same as `F.scaled_dot_product_attention`, which you may NOT call here):
- query (..., L, E), key (..., S, E), value (..., S, Ev): any number of leading batch dims, equal
  in all three; L (queries) may differ from S (keys), Ev may differ from E.
- `mask` is broadcastable to (..., L, S) and is either
  * boolean: True = this query MAY attend to this key, False = blocked;
  * floating point (additive): added to the SCALED scores (0 = allowed, -inf = blocked, or any
    finite bias such as ALiBi's -m * |i - j|).
- A query whose keys are all blocked gets all-zero weights and a zero output (no NaN), as SDPA does.
- Dropout acts on the attention WEIGHTS, only when `training` is True: each weight is zeroed with
  probability `dropout_p` and the survivors are multiplied by 1 / (1 - dropout_p).
- Return `(output, weights)`: output (..., L, Ev), weights (..., L, S) = the weights actually used.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class ScaledScores(nn.Module):
    """Q K^T * scale over the last two dims: (..., L, E) x (..., S, E) -> (..., L, S).

    `scale=None` means 1 / sqrt(E), resolved from the query at call time.
    """

    def __init__(self, scale: float | None = None) -> None:
        super().__init__()
        self.scale: float | None = scale

    def forward(self, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        scale = 1.0 / math.sqrt(query.shape[-1]) if self.scale is None else self.scale
        return (query @ key.transpose(-2, -1)) * scale

    def extra_repr(self) -> str:
        return "scale=1/sqrt(E)" if self.scale is None else f"scale={self.scale}"


class ScoreMask(nn.Module):
    """Applies an attention mask to scaled scores.

    A bool mask keeps the scores where it is True and fills -inf where it is False; a float mask is
    added to the scores (0 / -inf, or any finite bias).
    """

    def forward(self, scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        if mask is None:
            return scores
        if mask.dtype == torch.bool:
            return scores.masked_fill(~mask, float("-inf"))
        return scores + mask.to(dtype=scores.dtype)


class SafeSoftmax(nn.Module):
    """Softmax over the keys that gives an all-zero row (not NaN) when every key of a query is blocked."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim: int = dim

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        blocked_rows = torch.isneginf(scores).all(dim=self.dim, keepdim=True)
        # neutral scores in those rows keep the softmax (and its backward) free of NaN; zeroed just after
        weights = F.softmax(scores.masked_fill(blocked_rows, 0.0), dim=self.dim)
        return weights.masked_fill(blocked_rows, 0.0)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class ScaledDotProductAttention(nn.Module):
    """softmax(Q K^T * scale + mask) V with dropout on the weights; forward returns (output, weights).

    Dropout follows the module's mode: it is active only after `.train()`.
    """

    def __init__(self, dropout_p: float = 0.0, scale: float | None = None) -> None:
        super().__init__()
        self.scores = ScaledScores(scale)
        self.masking = ScoreMask()
        self.softmax = SafeSoftmax(dim=-1)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        scores = self.masking(self.scores(query, key), mask)         # (..., L, S)
        weights = self.dropout(self.softmax(scores))                  # (..., L, S)
        output = weights @ value.to(dtype=weights.dtype)              # (..., L, Ev)
        return output.to(dtype=query.dtype), weights.to(dtype=query.dtype)


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 mask: torch.Tensor | None = None, dropout_p: float = 0.0,
                                 scale: float | None = None,
                                 training: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention; returns `(output, weights)`.

    Args:
        query: (..., L, E).  key: (..., S, E).  value: (..., S, Ev).
        mask: None, a bool tensor (True = may attend) or a float tensor added to the scaled
            scores; broadcastable to (..., L, S).
        dropout_p: probability of zeroing an attention weight; used only when `training`.
        scale: multiplies Q K^T; None means 1 / sqrt(E).
        training: dropout is applied only when True (with training=False, no dropout at all).

    Returns:
        output (..., L, Ev) and weights (..., L, S), both in the dtype of `query`. Each row of
        `weights` sums to 1 (before dropout), except rows whose keys are all masked: those rows
        are all zero, and so is their output. With dropout, `weights` are the dropped and rescaled
        weights and `output == weights @ value`.
    """
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    assert 0.0 <= dropout_p < 1.0, "dropout_p must be in [0, 1)"
    # query (..., L, E) and key (..., S, E) -> scores, weights: (..., L, S); output: (..., L, Ev)
    attention = ScaledDotProductAttention(dropout_p=dropout_p, scale=scale).train(training)
    return attention(query, key, value, mask)
