# Generated from solutions/decaying_attention.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `decaying_attention`: multi-head attention whose scores decay with distance, and ALiBi slopes.

`DecayingAttention` (from the course notebook) penalises attention between far-apart tokens. For head h,
query position i and key position j:

    scores[h, i, j] = q_i . k_j / sqrt(head_dim) - gamma[h] * |i - j|

The penalty is added AFTER scaling, it is negative (far tokens get less weight), it uses the absolute
distance (both directions decay; there is no causal mask), and each head has its own learnable
`gamma[h]` (a parameter of shape (num_heads, 1, 1), initialised to 1). This is ALiBi (Press et al.,
"Train Short, Test Long", arXiv 2108.12409) with learned slopes.

ALiBi fixes the slopes instead: `alibi_slopes(n)` returns the standard per-head slopes m_h.
Do not call F.scaled_dot_product_attention or nn.MultiheadAttention here: they are banned in this exercise.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class DecayingAttention(nn.Module):
    """Multi-head self-attention with a learnable per-head distance penalty (no mask, no out_proj).

    Attributes (the names are part of the contract: tests load weights by name):
        qkv:   nn.Linear(embed_dim, 3 * embed_dim) (with bias): one projection for q, k and v
        gamma: nn.Parameter of shape (num_heads, 1, 1), initialised to ones: the decay of each head
    """

    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        assert embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads"
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        # a single projection producing [q | k | v] side by side, with a bias
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        # one learnable decay strength per head, starting at 1
        self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attend with scores q.k/sqrt(head_dim) - gamma[h] * |i - j|.

        Args:
            x: (B, L, embed_dim); any L >= 1.

        Returns:
            (B, L, embed_dim): the heads' context vectors concatenated (head 0 first). The qkv output
            is laid out as [q | k | v], each split into heads: reshape it to (B, L, 3, H, head_dim).
        """
        # qkv(x): (B, L, 3 * embed_dim) -> (B, L, 3, H, hd) -> (3, B, H, L, hd); q, k, v: each (B, H, L, hd)
        # scores, weights: (B, H, L, L); gamma: (H, 1, 1); |i - j|: (L, L); context: (B, H, L, hd) -> (B, L, embed_dim)
        batch_size, seq_len, channels = x.shape
        assert channels == self.embed_dim, "the last dim of x must be embed_dim"
        H = self.num_heads
        hd = self.head_dim

        # step 1: one projection, then split into q, k, v and heads
        qkv_projected = self.qkv(x)                                          # (B, L, 3 * embed_dim)
        qkv_split = qkv_projected.reshape(batch_size, seq_len, 3, H, hd)    # (B, L, 3, H, hd)
        qkv_split = qkv_split.permute(2, 0, 3, 1, 4)                         # (3, B, H, L, hd)
        queries = qkv_split[0]                                               # (B, H, L, hd)
        keys = qkv_split[1]
        values = qkv_split[2]

        # step 2: scaled dot-product scores, (B, H, L, L)
        scores = queries @ keys.transpose(-2, -1)
        scaled_scores = scores / math.sqrt(hd)

        # step 3: absolute distance |i - j| between query position i and key position j, (L, L)
        positions = torch.arange(seq_len, device=x.device)
        signed_distance = positions.unsqueeze(1) - positions.unsqueeze(0)
        distance = signed_distance.abs().to(scaled_scores.dtype)

        # step 4: subtract the penalty AFTER scaling; gamma (H, 1, 1) * distance (L, L) -> (H, L, L),
        # broadcast over the batch
        penalty = self.gamma * distance
        decayed_scores = scaled_scores - penalty

        # step 5: softmax over the keys (stable) and weighted sum of the values
        weights = torch.softmax(decayed_scores, dim=-1)
        context = weights @ values                                           # (B, H, L, hd)

        # step 6: concatenate the heads (head 0 first): (B, H, L, hd) -> (B, L, H, hd) -> (B, L, embed_dim)
        context = context.transpose(1, 2).reshape(batch_size, seq_len, self.embed_dim)
        return context


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """The ALiBi slope m_h of each head, as a float32 tensor of shape (num_heads,).

    - num_heads a power of two (n): m_h = 2 ** (-8 * h / n) for h = 1, ..., n
      (n = 8: 1/2, 1/4, ..., 1/256).
    - otherwise: with c the largest power of two below num_heads, take the c slopes of alibi_slopes(c)
      followed by every other slope of alibi_slopes(2 * c) (indices 0, 2, 4, ...), keeping the first
      num_heads - c of those (n = 12: 1/2, ..., 1/256, then 0.7071, 0.3536, 0.1768, 0.0884).
    """
    assert num_heads >= 1, "num_heads must be positive"

    def slopes_for_a_power_of_two(n: int) -> list[float]:
        # m_h = 2 ** (-8 * h / n) for h = 1, ..., n
        slopes = []
        for h in range(1, n + 1):
            slopes.append(2.0 ** (-8.0 * h / n))
        return slopes

    is_power_of_two = (num_heads & (num_heads - 1)) == 0
    if is_power_of_two:
        all_slopes = slopes_for_a_power_of_two(num_heads)
    else:
        # c = the largest power of two below num_heads
        closest_power_of_two = 2 ** math.floor(math.log2(num_heads))
        first_slopes = slopes_for_a_power_of_two(closest_power_of_two)
        # every other slope (indices 0, 2, 4, ...) of the 2c-head set, keeping num_heads - c of them
        doubled_set = slopes_for_a_power_of_two(2 * closest_power_of_two)
        every_other = doubled_set[0::2]
        how_many_extra = num_heads - closest_power_of_two
        extra_slopes = every_other[:how_many_extra]
        all_slopes = first_slopes + extra_slopes

    result = torch.tensor(all_slopes, dtype=torch.float32)
    assert result.shape == (num_heads,)
    return result
