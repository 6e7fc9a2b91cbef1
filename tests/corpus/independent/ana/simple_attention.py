"""Simplified attention with einsum (ana)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    return torch.einsum("...id,...jd->...ij", inputs, inputs)


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    return F.softmax(scores, dim=-1)


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    w = attention_weights(attention_scores(inputs))
    return torch.einsum("...ij,...jd->...id", w, inputs)
