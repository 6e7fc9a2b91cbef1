"""Honest (forward(self, *args, **kwargs), a shared base class, and vars(self) in a repr)."""
import math

import torch
from torch import nn


class _Attend(nn.Module):
    def project(self, x):
        raise NotImplementedError

    def forward(self, *args, **kwargs):
        (x,) = args
        q, k, v = self.project(x)
        return torch.softmax((q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1]), dim=-1) @ v

    def extra_repr(self):
        return ", ".join(sorted(k for k in vars(self) if not k.startswith("_")))


class SelfAttentionV1(_Attend):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def project(self, x):
        return x @ self.W_query, x @ self.W_key, x @ self.W_value


class SelfAttentionV2(_Attend):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def project(self, x):
        return self.W_query(x), self.W_key(x), self.W_value(x)
