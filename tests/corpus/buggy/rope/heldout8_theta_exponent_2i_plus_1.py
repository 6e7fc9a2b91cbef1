"""Bug: rope_frequencies uses theta_i = base ** (-(2i + 1) / head_dim) (the handout's (2k - 1)/d with k counted from 1) instead of base ** (-2i / head_dim), so every pair turns at the wrong speed (theta_0 is not 1 radian per position).

Misconception: rope-frequencies
Held out: yes
Source: https://github.com/stanford-cs336/assignment1-basics/issues/22 (RoPE theta exponent written as (2k-1)/d instead of 2(k-1)/d); written from scratch
"""

import torch


def rope_frequencies(head_dim, max_len, base=10000.0, dtype=torch.float32):
    if head_dim < 2 or head_dim % 2:
        raise ValueError("head_dim must be even and >= 2")
    if max_len < 1:
        raise ValueError("max_len must be >= 1")
    k = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)  # pair number k = 1 .. d/2
    theta = base ** (-(2 * k - 1) / head_dim)
    m = torch.arange(max_len, dtype=torch.float64)
    ang = torch.outer(m, theta)
    return torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)


def _tables(x, cos, sin, positions):
    T, d = x.shape[-2], x.shape[-1]
    if d % 2 or cos.shape[-1] != d // 2:
        raise ValueError("head_dim must be even and equal to twice the tables' width")
    if positions is None:
        if T > cos.shape[0]:
            raise ValueError("sequence longer than the tables")
        c, s = cos[:T], sin[:T]
    elif positions.dim() == 2:
        c, s = cos[positions].unsqueeze(1), sin[positions].unsqueeze(1)  # (B, 1, T, d/2)
    else:
        c, s = cos[positions], sin[positions]
    wt = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    return c.to(wt), s.to(wt), wt


def apply_rope(x, cos, sin, positions=None):
    c, s, wt = _tables(x, cos, sin, positions)
    h = x.shape[-1] // 2
    a, b = x[..., :h].to(wt), x[..., h:].to(wt)
    return torch.cat([a * c - b * s, a * s + b * c], dim=-1).to(x.dtype)


def apply_rope_interleaved(x, cos, sin, positions=None):
    c, s, wt = _tables(x, cos, sin, positions)
    a, b = x[..., 0::2].to(wt), x[..., 1::2].to(wt)
    out = torch.empty(x.shape, dtype=wt, device=x.device)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out.to(x.dtype)
