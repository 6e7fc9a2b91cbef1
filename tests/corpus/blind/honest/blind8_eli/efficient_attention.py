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
    num_queries = query.shape[-2]
    num_keys = key.shape[-2]

    # trap 3: SDPA drops whenever dropout_p > 0, so switch it off outside training
    if training:
        effective_dropout = dropout_p
    else:
        effective_dropout = 0.0

    # trap 1: a bool mask already means True = may attend (SDPA's convention); a float mask is added,
    # and SDPA wants it in the dtype of the query
    attention_mask = mask
    if attention_mask is not None and attention_mask.dtype != torch.bool:
        attention_mask = attention_mask.to(query.dtype)

    # trap 2: causal is bottom-right aligned here, SDPA's is_causal is top-left aligned
    use_sdpa_is_causal = False
    if is_causal:
        if num_queries == num_keys:
            # both alignments agree on a square: let SDPA use its fast causal path
            use_sdpa_is_causal = True
        else:
            # query i sits at absolute position S - L + i and may see keys 0 .. S - L + i
            all_true = torch.ones(num_queries, num_keys, dtype=torch.bool, device=query.device)
            attention_mask = torch.tril(all_true, diagonal=num_keys - num_queries)

    output = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                            dropout_p=effective_dropout, is_causal=use_sdpa_is_causal)
    assert output.shape[-2] == num_queries and output.shape[-1] == value.shape[-1]
    return output


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
    output_dtype = query.dtype
    num_queries = query.shape[-2]
    num_keys = key.shape[-2]
    embed_dim = query.shape[-1]
    value_dim = value.shape[-1]
    device = query.device

    # half precision loses too much in the running sums: accumulate in float32, cast back at the end
    if output_dtype in (torch.float16, torch.bfloat16):
        working_dtype = torch.float32
    else:
        working_dtype = output_dtype
    q = query.to(working_dtype)
    k = key.to(working_dtype)
    v = value.to(working_dtype)

    # scale the queries once instead of every tile of scores
    scale = 1.0 / math.sqrt(embed_dim)
    scaled_q = q * scale

    # the leading dims (B, H, ...) of the output, broadcast between query and key/value
    leading_shape = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])

    # running statistics of every query row
    running_max = torch.full((*leading_shape, num_queries, 1), float("-inf"), dtype=working_dtype, device=device)
    running_denominator = torch.zeros((*leading_shape, num_queries, 1), dtype=working_dtype, device=device)
    accumulator = torch.zeros((*leading_shape, num_queries, value_dim), dtype=working_dtype, device=device)

    # absolute positions of the queries for bottom-right causal masking: query i is at S - L + i
    query_positions = torch.arange(num_queries, device=device) + (num_keys - num_queries)

    for tile_start in range(0, num_keys, block_size):
        tile_end = min(tile_start + block_size, num_keys)   # the last tile may be shorter
        key_tile = k[..., tile_start:tile_end, :]            # (..., bs, E)
        value_tile = v[..., tile_start:tile_end, :]          # (..., bs, Ev)

        # scores of this tile only: (..., L, bs), never (..., L, S)
        tile_scores = scaled_q @ key_tile.transpose(-2, -1)

        if is_causal:
            key_positions = torch.arange(tile_start, tile_end, device=device)
            # (L, 1) >= (1, bs): query may see the key when the key is not in its future
            tile_keep = query_positions.unsqueeze(1) >= key_positions.unsqueeze(0)
            tile_scores = tile_scores.masked_fill(~tile_keep, float("-inf"))

        # new running max. The result does not depend on which constant is subtracted,
        # so the max is treated as a constant (detached): the gradient stays exact.
        tile_max = tile_scores.amax(dim=-1, keepdim=True).detach()
        new_max = torch.maximum(running_max, tile_max)
        # rows that have seen no key yet still have max -inf; subtract 0 there instead of -inf
        # (exp(-inf - (-inf)) would be NaN); all their exponentials are exp(-inf) = 0 anyway
        safe_new_max = torch.where(new_max == float("-inf"), torch.zeros_like(new_max), new_max)

        # unnormalised probabilities of this tile, (..., L, bs)
        tile_exponentials = torch.exp(tile_scores - safe_new_max)
        # how much the old sums must shrink because the max went up (exp(-inf) = 0 at the start)
        correction = torch.exp(running_max - safe_new_max)

        running_denominator = running_denominator * correction + tile_exponentials.sum(dim=-1, keepdim=True)
        accumulator = accumulator * correction + tile_exponentials @ value_tile
        running_max = new_max

    # divide once at the end; rows that saw no key at all (denominator 0) give 0, not NaN
    no_key_seen = running_denominator == 0
    safe_denominator = torch.where(no_key_seen, torch.ones_like(running_denominator), running_denominator)
    output = accumulator / safe_denominator
    output = output.to(output_dtype)
    assert output.shape[-2:] == (num_queries, value_dim)
    return output
