"""Honest (setattr/getattr over a literal tuple of names)."""
import torch
from torch import nn

NAMES = ("W_query", "W_key", "W_value")


class SelfAttentionV1(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        for name in NAMES:
            setattr(self, name, nn.Parameter(torch.rand(d_in, d_out)))

    def forward(self, x):
        q, k, v = (x @ getattr(self, name) for name in NAMES)
        return torch.softmax(q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5, dim=-1) @ v


class SelfAttentionV2(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        for part in ("query", "key", "value"):
            setattr(self, f"W_{part}", nn.Linear(d_in, d_out, bias=qkv_bias))

    def forward(self, x):
        q, k, v = (getattr(self, f"W_{part}")(x) for part in ("query", "key", "value"))
        return torch.softmax(q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5, dim=-1) @ v
