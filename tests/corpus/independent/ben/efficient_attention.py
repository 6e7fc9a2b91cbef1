"""SDPA, and tiled attention over query and key blocks (ben)."""

from __future__ import annotations

import math

import torch
from torch import nn


def sdpa_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None,
                   is_causal: bool = False, dropout_p: float = 0.0, training: bool = False) -> torch.Tensor:
    assert not (is_causal and mask is not None), "pass either mask or is_causal=True, not both"
    query_length = query.shape[-2]
    key_length = key.shape[-2]
    if is_causal and query_length != key_length:
        ones = torch.ones(query_length, key_length, dtype=torch.bool, device=query.device)
        mask = torch.tril(ones, diagonal=key_length - query_length)
        is_causal = False
    if not training:
        dropout_p = 0.0
    result = nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)
    return result


def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool = False,
                    block_size: int = 64) -> torch.Tensor:
    assert block_size >= 1, "block_size must be a positive integer"
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    query_length = query.shape[-2]
    key_length = key.shape[-2]
    offset = key_length - query_length
    if query.dtype in (torch.float16, torch.bfloat16):
        compute_dtype = torch.float32
    else:
        compute_dtype = query.dtype
    scale = 1.0 / math.sqrt(query.shape[-1])
    output_blocks = []
    for q_start in range(0, query_length, block_size):
        q_stop = min(q_start + block_size, query_length)
        q_block = query[..., q_start:q_stop, :].to(compute_dtype) * scale
        row_max = torch.full((*q_block.shape[:-1], 1), -math.inf, dtype=compute_dtype, device=query.device)
        row_sum = torch.zeros((*q_block.shape[:-1], 1), dtype=compute_dtype, device=query.device)
        numerator = torch.zeros((*q_block.shape[:-1], value.shape[-1]), dtype=compute_dtype, device=query.device)
        for k_start in range(0, key_length, block_size):
            k_stop = min(k_start + block_size, key_length)
            k_block = key[..., k_start:k_stop, :].to(compute_dtype)
            v_block = value[..., k_start:k_stop, :].to(compute_dtype)
            scores = torch.matmul(q_block, k_block.transpose(-1, -2))
            if is_causal:
                query_positions = torch.arange(q_start, q_stop, device=query.device).unsqueeze(1) + offset
                key_positions = torch.arange(k_start, k_stop, device=query.device).unsqueeze(0)
                scores = scores.masked_fill(key_positions > query_positions, -math.inf)
            block_max = scores.max(dim=-1, keepdim=True).values
            new_max = torch.maximum(row_max, block_max)
            shift = torch.where(new_max == -math.inf, torch.zeros_like(new_max), new_max)
            correction = torch.exp(row_max - shift)
            probabilities = torch.exp(scores - shift)
            row_sum = row_sum * correction + probabilities.sum(dim=-1, keepdim=True)
            numerator = numerator * correction + torch.matmul(probabilities, v_block)
            row_max = new_max
        row_sum = torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)
        output_blocks.append(numerator / row_sum)
    return torch.cat(output_blocks, dim=-2).to(query.dtype)
