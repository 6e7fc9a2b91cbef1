# Generated from solutions/efficient_attention.py by `grader build`. Your task: replace each
# `raise NotImplementedError(...)` with working code. Keep the names and signatures.
"""Exercise `efficient_attention`: call PyTorch's fused attention correctly, then write FlashAttention yourself.

Part 1, `sdpa_attention`, wraps `F.scaled_dot_product_attention` (SDPA) and gets its three traps right:
- a boolean mask means **True = this query may attend to this key** (the inverse of nn.MultiheadAttention's
  `key_padding_mask`), while a float mask is *added* to the scores (0 = keep, -inf = block). A 0/1 float mask
  masks nothing: it adds +1 to the allowed scores;
- SDPA's own `is_causal=True` is *top-left* aligned when L != S. Here causal is *bottom-right* aligned: the L
  queries are the last L positions of the S keys (as in KV-cache decoding), so query i sits at absolute position
  S - L + i and may see keys 0 .. S - L + i;
- SDPA is a function and does not know about `model.train()`: dropout happens whenever `dropout_p > 0`, so pass
  `dropout_p if training else 0.0`.

Part 2, `flash_attention`, computes the same result as non-masked / causal SDPA without ever materialising the
L x S score matrix: it walks over the keys in tiles of `block_size` and keeps, per query row, a running max `m`,
a running softmax denominator `l` and an unnormalised output accumulator (the FlashAttention-2 recurrence).
F.scaled_dot_product_attention is not allowed inside `flash_attention`.

Shapes: query (..., L, E), key (..., S, E), value (..., S, Ev) -> output (..., L, Ev); usually (B, H, L, E).
The scale is 1/sqrt(E).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def sdpa_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None,
                   is_causal: bool = False, dropout_p: float = 0.0, training: bool = False) -> torch.Tensor:
    """Attention through `F.scaled_dot_product_attention`, with the pack's conventions.

    Args:
        query: (B, H, L, E); key: (B, H, S, E); value: (B, H, S, Ev).
        mask: None, a bool tensor broadcastable to (B, H, L, S) with True = may attend, or a float tensor
            (same dtype as `query`) of 0 / -inf that is added to the scaled scores.
        is_causal: bottom-right aligned causal masking: query i (of L) may see keys 0 .. S - L + i. When
            L == S this is ordinary causal attention. Do not combine it with `mask`.
        dropout_p: dropout probability on the attention weights, applied only when `training` is True.
        training: whether the caller is in training mode.

    Returns:
        (B, H, L, Ev), the dtype of `query`.
    """
    assert not (is_causal and mask is not None), "pass either mask or is_causal=True, not both"
    L, S = query.shape[-2], key.shape[-2]
    p = dropout_p if training else 0.0  # SDPA itself knows nothing about .train() / .eval()
    if is_causal and L == S:
        # square case: SDPA's own causal flag is the same thing (and lets it pick a fused kernel)
        return F.scaled_dot_product_attention(query, key, value, dropout_p=p, is_causal=True)
    if is_causal:
        # bottom-right: query i sits at absolute position S - L + i
        mask = _bottom_right_causal(L, S, query.device)
    # a bool mask already means True = may attend; a float mask is added to the scores as is
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=p)


def _bottom_right_causal(L: int, S: int, device: torch.device) -> torch.Tensor:
    """Bool (L, S) keep-mask: query i may see keys 0 .. S - L + i."""
    q_pos = torch.arange(L, device=device)[:, None] + (S - L)
    k_pos = torch.arange(S, device=device)[None, :]
    return k_pos <= q_pos


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                    block_size: int = 64) -> torch.Tensor:
    """Exact attention softmax(q k^T / sqrt(E)) v computed tile by tile with an online softmax.

    Args:
        query: (B, H, L, E); key: (B, H, S, E); value: (B, H, S, Ev) (any leading dims work).
        is_causal: bottom-right aligned causal masking, as in `sdpa_attention`. When L > S the first L - S
            query rows see no key at all: return 0 for them (as SDPA does), never NaN.
        block_size: number of keys per tile; any value >= 1 (the last tile may be shorter; block_size may
            exceed S).

    Returns:
        (B, H, L, Ev), the dtype of `query`. Never build an (L, S) tensor: only (L, block_size) tiles.
        Initialise the running max to -inf (not 0), the denominator and the accumulator to 0; after each
        tile rescale the old denominator and accumulator by exp(m_old - m_new); divide once at the end.
    """
    assert block_size >= 1, "block_size must be a positive integer"
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    # query: (B, H, L, E); a tile of bs keys: key (B, H, bs, E), value (B, H, bs, Ev) -> scores (B, H, L, bs)
    # running max m and denominator: (B, H, L, 1); accumulator and output: (B, H, L, Ev)
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    out_dtype = query.dtype
    # half precision: keep the running statistics and the accumulator in float32
    work = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    q = query.to(work)
    scale = E ** -0.5
    lead = query.shape[:-2]

    m = torch.full((*lead, L, 1), float("-inf"), dtype=work, device=query.device)  # running max
    l = torch.zeros((*lead, L, 1), dtype=work, device=query.device)                # running denominator
    acc = torch.zeros((*lead, L, value.shape[-1]), dtype=work, device=query.device)  # unnormalised output

    q_pos = torch.arange(L, device=query.device)[:, None] + (S - L)  # absolute query positions (bottom-right)
    big_neg = torch.finfo(work).min

    for start in range(0, S, block_size):
        stop = min(start + block_size, S)
        k_tile = key[..., start:stop, :].to(work)
        v_tile = value[..., start:stop, :].to(work)

        s = torch.matmul(q, k_tile.transpose(-2, -1)) * scale  # (..., L, bs)
        keep = None
        if is_causal:
            keep = torch.arange(start, stop, device=query.device)[None, :] <= q_pos  # (L, bs)
            s = s.masked_fill(~keep, big_neg)

        m_new = torch.maximum(m, s.max(dim=-1, keepdim=True).values)
        p = torch.exp(s - m_new)
        if keep is not None:
            p = p * keep  # blocked keys give exactly 0, even in a row that has seen nothing yet
        alpha = torch.exp(m - m_new)  # rescale what was summed under the old max (exp(-inf) = 0 at first)

        l = alpha * l + p.sum(dim=-1, keepdim=True)
        acc = alpha * acc + torch.matmul(p, v_tile)
        m = m_new

    # rows that saw no key (causal with L > S) have l == 0 and acc == 0: divide by 1 there, giving 0
    l_safe = torch.where(l > 0, l, torch.ones_like(l))
    return (acc / l_safe).to(out_dtype)
