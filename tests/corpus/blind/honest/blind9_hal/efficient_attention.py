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

_HALF_DTYPES = (torch.float16, torch.bfloat16)


def _check_qkv(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, who: str) -> None:
    """Types, ranks, matching dims, dtypes and devices of the three attention operands."""
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{who}: {name} must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dim() < 2:
            raise ValueError(f"{who}: {name} must be (..., length, features), got {tuple(tensor.shape)}")
        if not torch.is_floating_point(tensor):
            raise TypeError(f"{who}: {name} must be floating point, got dtype {tensor.dtype}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"{who}: query and key must have the same last dim E, got {query.shape[-1]} and "
                         f"{key.shape[-1]}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"{who}: key and value must have the same length S, got {key.shape[-2]} and "
                         f"{value.shape[-2]}")
    if not (query.shape[:-2] == key.shape[:-2] == value.shape[:-2]):
        raise ValueError(f"{who}: query, key and value must share their leading dims, got "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(f"{who}: query, key and value must share a dtype, got {query.dtype}, {key.dtype}, "
                        f"{value.dtype}")
    if not (query.device == key.device == value.device):
        raise ValueError(f"{who}: query, key and value must be on one device, got {query.device}, "
                         f"{key.device}, {value.device}")
    if query.shape[-1] < 1:
        raise ValueError(f"{who}: the feature dim E must be at least 1")


def _bottom_right_causal(num_queries: int, num_keys: int, device: torch.device,
                         key_offset: int = 0, num_tile_keys: int | None = None) -> torch.Tensor:
    """Keep-mask (True = may attend) of bottom-right causal attention, for keys key_offset .. key_offset + n - 1.

    Query i sits at absolute position num_keys - num_queries + i and may see keys 0 .. that position.
    """
    n = num_keys if num_tile_keys is None else num_tile_keys
    query_positions = torch.arange(num_queries, device=device) + (num_keys - num_queries)  # (L,)
    key_positions = torch.arange(key_offset, key_offset + n, device=device)               # (n,)
    return key_positions.unsqueeze(0) <= query_positions.unsqueeze(1)                      # (L, n)


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
    _check_qkv(query, key, value, "sdpa_attention")
    if not isinstance(is_causal, bool) or not isinstance(training, bool):
        raise TypeError("is_causal and training must be bools")
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)):
        raise TypeError(f"dropout_p must be a real number, got {type(dropout_p).__name__}")
    if not 0.0 <= float(dropout_p) < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    num_queries, num_keys = int(query.shape[-2]), int(key.shape[-2])
    scores_shape = torch.Size((*query.shape[:-2], num_queries, num_keys))

    attn_mask = None
    if mask is not None:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"mask must be None or a torch.Tensor, got {type(mask).__name__}")
        if mask.dtype != torch.bool and not torch.is_floating_point(mask):
            raise TypeError(f"mask must be boolean (True = may attend) or floating point (additive), got "
                            f"{mask.dtype}")
        try:
            broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
        except RuntimeError as exc:
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to {tuple(scores_shape)}") from exc
        if broadcast != scores_shape:
            raise ValueError(f"mask of shape {tuple(mask.shape)} would enlarge the scores' shape {tuple(scores_shape)}")
        # a bool mask goes as is (SDPA: True = may attend); a float one must match the dtype of query
        attn_mask = mask.to(device=query.device, dtype=torch.bool if mask.dtype == torch.bool else query.dtype)

    # SDPA's own is_causal is top-left aligned; with L != S the bottom-right mask is built by hand
    use_builtin_causal = is_causal and num_queries == num_keys
    if is_causal and not use_builtin_causal:
        attn_mask = _bottom_right_causal(num_queries, num_keys, query.device)

    effective_p = float(dropout_p) if training else 0.0  # SDPA knows nothing about .train() / .eval()
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=effective_p,
                                            is_causal=use_builtin_causal)

    # rows that may see no key at all: zero output (never NaN), whatever the backend did
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            no_key_rows = ~attn_mask.any(dim=-1, keepdim=True)
        else:
            no_key_rows = torch.isneginf(attn_mask).all(dim=-1, keepdim=True)
        if bool(no_key_rows.any().item()):
            output = output.masked_fill(no_key_rows, 0.0)
    return output.to(query.dtype)


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
    if isinstance(block_size, bool) or not isinstance(block_size, int):
        raise TypeError(f"block_size must be an int, got {type(block_size).__name__}")
    assert block_size >= 1, "block_size must be a positive integer"
    _check_qkv(query, key, value, "flash_attention")
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be a bool, got {type(is_causal).__name__}")

    num_queries, num_keys = int(query.shape[-2]), int(key.shape[-2])
    embed_dim = int(query.shape[-1])
    scale = 1.0 / math.sqrt(embed_dim)
    # float16 / bfloat16: the running statistics and the accumulator are kept in float32
    compute_dtype = torch.float32 if query.dtype in _HALF_DTYPES else query.dtype
    q = query.to(compute_dtype)

    # query: (B, H, L, E); a tile of bs keys: key (B, H, bs, E), value (B, H, bs, Ev) -> scores (B, H, L, bs)
    # running max m and denominator: (B, H, L, 1); accumulator and output: (B, H, L, Ev)
    stats_shape = (*query.shape[:-1], 1)
    running_max = torch.full(stats_shape, float("-inf"), dtype=compute_dtype, device=query.device)
    running_denominator = torch.zeros(stats_shape, dtype=compute_dtype, device=query.device)
    accumulator = torch.zeros((*query.shape[:-1], value.shape[-1]), dtype=compute_dtype, device=query.device)

    for start in range(0, num_keys, block_size):
        stop = min(start + block_size, num_keys)
        key_tile = key[..., start:stop, :].to(compute_dtype)
        value_tile = value[..., start:stop, :].to(compute_dtype)
        tile_scores = (q @ key_tile.transpose(-2, -1)) * scale            # (..., L, bs)
        if is_causal:
            keep = _bottom_right_causal(num_queries, num_keys, query.device, start, stop - start)
            tile_scores = tile_scores.masked_fill(~keep, float("-inf"))

        # the max is only a stabilising shift (the result does not depend on it): no gradient through it
        tile_max = tile_scores.detach().amax(dim=-1, keepdim=True)
        new_max = torch.maximum(running_max, tile_max)
        # a row that has seen no allowed key yet keeps m = -inf: shift it by 0 instead (exp(-inf) = 0, no NaN)
        safe_max = torch.where(torch.isneginf(new_max), torch.zeros_like(new_max), new_max)
        correction = torch.exp(running_max - safe_max)                    # exp(m_old - m_new), 0 when m_old = -inf
        tile_probs = torch.exp(tile_scores - safe_max)                    # unnormalised, (..., L, bs)
        running_denominator = correction * running_denominator + tile_probs.sum(dim=-1, keepdim=True)
        accumulator = correction * accumulator + tile_probs @ value_tile
        running_max = new_max

    # divide once at the end; rows without any allowed key (L > S, causal) have l = 0 and return 0
    has_keys = running_denominator > 0
    safe_denominator = torch.where(has_keys, running_denominator, torch.ones_like(running_denominator))
    output = torch.where(has_keys, accumulator / safe_denominator, torch.zeros_like(accumulator))
    return output.to(query.dtype)
