"""Honest (the Hugging Face rotate_half style; a local named `eval` for the angles)."""
import torch


def rope_frequencies(head_dim, max_len, base=10000.0, dtype=torch.float32):
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim must be even and >= 2, got {head_dim}")
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    eval = torch.outer(torch.arange(max_len, dtype=torch.float64), inv)
    return eval.cos().to(dtype), eval.sin().to(dtype)


def _tables(x, cos, sin, positions):
    T, half = x.shape[-2], x.shape[-1] // 2
    if x.shape[-1] % 2 or cos.shape[-1] != half or sin.shape[-1] != half:
        raise ValueError(f"x has {x.shape[-1]} features; the tables have {cos.shape[-1]} columns")
    if positions is None:
        if T > cos.shape[0]:
            raise ValueError(f"sequence length {T} exceeds max_len {cos.shape[0]}")
        c, s = cos[:T], sin[:T]
    else:
        c, s = cos[positions], sin[positions]
        if positions.dim() == 2:
            c, s = c[:, None], s[:, None]
    work = torch.promote_types(x.dtype, torch.float32)
    return c.to(work), s.to(work)


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, cos, sin, positions=None):
    c, s = _tables(x, cos, sin, positions)
    xw = x.to(c.dtype)
    return (xw * torch.cat((c, c), -1) + _rotate_half(xw) * torch.cat((s, s), -1)).to(x.dtype)


def apply_rope_interleaved(x, cos, sin, positions=None):
    c, s = _tables(x, cos, sin, positions)
    pairs = x.to(c.dtype).unflatten(-1, (-1, 2))
    a, b = pairs[..., 0], pairs[..., 1]
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2).to(x.dtype)
