"""Causal self-attention with einsum."""
import torch
from torch import nn


class CausalAttention(nn.Module):
    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(p=dropout)
        self.register_buffer(name="mask", tensor=torch.tril(torch.ones(context_length, context_length,
                                                                       dtype=torch.int8)), persistent=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[-2]
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = torch.einsum("btd,bsd->bts", q, k) / q.shape[-1] ** 0.5
        scores = scores.masked_fill(self.mask[:T, :T] == 0, float("-inf"))
        return torch.einsum("bts,bsd->btd", self.dropout(torch.softmax(scores, -1)), v)
