"""Honest (one file for the whole assignment: every exercise in homework.py, torch.softmax used where it is
allowed, hand-written where it is banned)."""
from __future__ import annotations

from torch import nn
import math
import torch
import torch.nn.functional as F


def softmax_naive(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x) / exp(x).sum(dim), as the book first writes it (overflows for large inputs).

    Works for any shape; the result has the shape and dtype of `x`, and sums to 1 along `dim`.
    """
    exp = torch.exp(x)
    return exp / exp.sum(dim=dim, keepdim=True)


def softmax_stable(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax along `dim` that never overflows: subtract the max along `dim` before `exp`.

    Must give no NaN or inf for inputs of +-1000 (float32) and for float16 inputs; same shape and
    dtype as `x`.
    """
    shifted = x - x.amax(dim=dim, keepdim=True)  # largest entry of each slice becomes 0: exp <= 1
    exp = torch.exp(shifted)
    return exp / exp.sum(dim=dim, keepdim=True)


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """Dot product of every token with every token.

    inputs: (T, d) or (B, T, d). Returns (T, T) or (B, T, T), same dtype, with
    scores[..., i, j] = inputs[..., i, :] . inputs[..., j, :] (row i = query i, column j = key j).
    """
    # inputs: (..., T, d) -> scores: (..., T, T)
    return inputs @ inputs.transpose(-2, -1)


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Normalise the scores of each query into probabilities: softmax over the keys (the last dim).

    scores: (T, T) or (B, T, T). Returns a tensor of the same shape and dtype whose every row
    (last dimension) is positive and sums to 1.
    """
    return torch.softmax(scores, dim=-1)


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    """The context vector of every token: its attention weights times the inputs.

    inputs: (T, d) or (B, T, d). Compose `attention_scores` and `attention_weights`, then return
    weights @ inputs, of shape (T, d) or (B, T, d): row i is sum_j weights[i, j] * inputs[j].
    """
    weights = attention_weights(attention_scores(inputs))  # (..., T, T)
    return weights @ inputs


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 mask: torch.Tensor | None = None, dropout_p: float = 0.0,
                                 scale: float | None = None,
                                 training: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention; returns `(output, weights)`.

    Args:
        query: (..., L, E).  key: (..., S, E).  value: (..., S, Ev).
        mask: None, a bool tensor (True = may attend) or a float tensor added to the scaled
            scores; broadcastable to (..., L, S).
        dropout_p: probability of zeroing an attention weight; used only when `training`.
        scale: multiplies Q K^T; None means 1 / sqrt(E).
        training: dropout is applied only when True (with training=False, no dropout at all).

    Returns:
        output (..., L, Ev) and weights (..., L, S), both in the dtype of `query`. Each row of
        `weights` sums to 1 (before dropout), except rows whose keys are all masked: those rows
        are all zero, and so is their output. With dropout, `weights` are the dropped and rescaled
        weights and `output == weights @ value`.
    """
    assert query.shape[-1] == key.shape[-1], "query and key must have the same last dim E"
    assert key.shape[-2] == value.shape[-2], "key and value must have the same length S"
    assert 0.0 <= dropout_p < 1.0, "dropout_p must be in [0, 1)"
    # query (..., L, E) and key (..., S, E) -> scores, weights: (..., L, S); output: (..., L, Ev)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = (query @ key.transpose(-2, -1)) * scale  # (..., L, E) @ (..., E, S) -> (..., L, S)
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))  # True = attend: block where False
        else:
            scores = scores + mask.to(scores.dtype)  # additive bias, added AFTER scaling (as SDPA does)
    # -inf (not -1e9): representable in every float dtype, and it gives exactly zero weight.
    blocked = torch.isneginf(scores).all(dim=-1, keepdim=True)  # (..., L, 1): rows with no key left
    scores = scores.masked_fill(blocked, 0.0)  # avoid softmax(all -inf) = NaN
    weights = torch.softmax(scores, dim=-1)  # (..., L, S): normalise over the KEYS
    weights = weights.masked_fill(blocked, 0.0)  # a fully-masked query attends to nothing
    if training and dropout_p > 0.0:
        weights = torch.nn.functional.dropout(weights, p=dropout_p, training=True)  # zero, then * 1/(1-p)
    output = weights @ value  # (..., L, S) @ (..., S, Ev) -> (..., L, Ev)
    return output, weights


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean (seq_len, seq_len) mask, True on and below the diagonal.

    mask[i, j] is True when query i may attend to key j, i.e. j <= i. dtype must be torch.bool;
    the tensor is created on `device` (default: CPU).
    """
    assert seq_len >= 0, "seq_len must be non-negative"
    ones = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device)  # (T, T)
    return torch.tril(ones)


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Boolean (B, max_len) mask, True where a position holds a real token.

    lengths: 1-D int64 tensor of B sequence lengths, each in [0, max_len].
    mask[b, j] is True when j < lengths[b]; a length of 0 gives an all-False row.
    dtype must be torch.bool; the result lives on the device of `lengths`.
    """
    assert lengths.dim() == 1, "lengths must be a 1-D tensor of sequence lengths"
    # lengths: (B,), positions: (max_len,) -> mask: (B, max_len)
    positions = torch.arange(max_len, device=lengths.device)  # (S,)
    return positions[None, :] < lengths[:, None]


def to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Turn a boolean keep-mask into an additive one of the same shape.

    Returns a tensor of `dtype` holding 0.0 where `mask` is True and exactly -inf where it is
    False (not -1e9: that is a finite number), ready to be added to attention scores.
    """
    assert mask.dtype == torch.bool, "to_additive expects a boolean mask (True = may attend)"
    additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device)  # same shape as mask
    return additive.masked_fill(~mask, float("-inf"))


class SelfAttentionV1(nn.Module):
    """Self-attention with the projection matrices as raw parameters of shape (d_in, d_out)."""

    def __init__(self, d_in: int, d_out: int) -> None:
        """Create `W_query`, `W_key`, `W_value`: each `nn.Parameter(torch.rand(d_in, d_out))`."""
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (T, d_in) or (B, T, d_in) -> context vectors (T, d_out) or (B, T, d_out).

        queries = x @ W_query, keys = x @ W_key, values = x @ W_value;
        weights = softmax(queries @ keys^T / sqrt(d_out)) over the keys (the last dim);
        return weights @ values. Transpose only the last two dims of `keys` (it may be 3-D).
        """
        # x: (..., T, d_in) -> queries, keys, values: (..., T, d_out); scores, weights: (..., T, T) -> (..., T, d_out)
        queries = x @ self.W_query  # (..., T, d_out)
        keys = x @ self.W_key  # (..., T, d_out)
        values = x @ self.W_value  # (..., T, d_out)
        scores = queries @ keys.transpose(-2, -1)  # (..., T, d_out) @ (..., d_out, T) -> (..., T, T)
        weights = torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-1)  # (..., T, T), rows sum to 1
        return weights @ values


class SelfAttentionV2(nn.Module):
    """Self-attention with `nn.Linear` projections (`bias=qkv_bias`)."""

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False) -> None:
        """Create `W_query`, `W_key`, `W_value`: each `nn.Linear(d_in, d_out, bias=qkv_bias)`."""
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (T, d_in) or (B, T, d_in) -> context vectors (T, d_out) or (B, T, d_out).

        Same computation as `SelfAttentionV1.forward`, with queries = W_query(x) and so on.
        """
        # x: (..., T, d_in) -> queries, keys, values: (..., T, d_out); scores, weights: (..., T, T) -> (..., T, d_out)
        queries = self.W_query(x)  # (..., T, d_out)
        keys = self.W_key(x)  # (..., T, d_out)
        values = self.W_value(x)  # (..., T, d_out)
        scores = queries @ keys.transpose(-2, -1)  # (..., T, d_out) @ (..., d_out, T) -> (..., T, T)
        weights = torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-1)  # (..., T, T), rows sum to 1
        return weights @ values


class CausalAttention(nn.Module):
    """Single-head causal self-attention with dropout on the attention weights.

    Args:
        d_in: size of each input vector.
        d_out: size of each query/key/value vector, and of each output vector.
        context_length: the longest sequence the module accepts (size of the `mask` buffer).
        dropout: probability of zeroing an attention weight during training.
        qkv_bias: whether the three projections have a bias.

    Attributes the grader relies on (names matter, they appear in `state_dict()`):
        W_query, W_key, W_value: nn.Linear(d_in, d_out, bias=qkv_bias).
        dropout: nn.Dropout(dropout), applied to the attention weights.
        mask: a buffer registered with `register_buffer`, (context_length, context_length).
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        self.d_out = d_out
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        # True on and below the diagonal: query i may attend to key j <= i (SDPA convention)
        causal = torch.tril(torch.ones(context_length, context_length, dtype=torch.bool))  # (ctx, ctx)
        self.register_buffer("mask", causal)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Causal self-attention over `x`.

        Args:
            x: (B, T, d_in) with 1 <= T <= context_length.

        Returns:
            The context vectors, (B, T, d_out): row t is a weighted average of the value vectors of
            positions 0..t, with weights softmax(q_t . k_j / sqrt(d_out)) over j <= t (dropout on the
            weights in training mode only).
        """
        # x: (B, T, d_in) -> queries, keys, values: (B, T, d_out); scores, weights: (B, T, T); context: (B, T, d_out)
        B, T, _ = x.shape
        assert T <= self.context_length, f"sequence length {T} exceeds context_length {self.context_length}"
        queries = self.W_query(x)  # (B, T, d_out)
        keys = self.W_key(x)  # (B, T, d_out)
        values = self.W_value(x)  # (B, T, d_out)

        scores = queries @ keys.transpose(1, 2)  # (B, T, d_out) @ (B, d_out, T) -> (B, T, T)
        allowed = self.mask[:T, :T]  # (T, T): the top-left corner, for inputs shorter than context_length
        scores = scores.masked_fill(~allowed, float("-inf"))  # block every key j > i
        weights = torch.softmax(scores / math.sqrt(self.d_out), dim=-1)  # (B, T, T), rows sum to 1
        weights = self.dropout(weights)  # zeroes and rescales weights in training mode only

        return weights @ values


class MultiHeadAttentionWrapper(nn.Module):
    """`num_heads` independent causal attention heads whose outputs are concatenated.

    Args:
        d_in: size of each input vector.
        d_out: output size of EACH head (the wrapper returns num_heads * d_out features).
        context_length: the longest sequence accepted.
        dropout: dropout probability on each head's attention weights.
        num_heads: how many heads.
        qkv_bias: whether the heads' projections have a bias.

    Attributes the grader relies on:
        heads: nn.ModuleList of num_heads CausalAttention(d_in, d_out, context_length, dropout, qkv_bias),
            so the parameters are named `heads.0.W_query.weight`, `heads.1.W_key.weight`, ...
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run every head on `x` (B, T, d_in) and concatenate: returns (B, T, num_heads * d_out).

        Features [h * d_out, (h + 1) * d_out) of the output come from head h.
        """
        # num_heads outputs, each (B, T, d_out) -> concatenated on the last dim: (B, T, num_heads * d_out)
        return torch.cat([head(x) for head in self.heads], dim=-1)


class MultiHeadAttention(nn.Module):
    """Fused multi-head causal self-attention with an output projection.

    Args:
        d_in: size of each input vector.
        d_out: total output size; must be divisible by num_heads (raise otherwise, e.g. with an assert).
        context_length: the longest sequence accepted.
        dropout: dropout probability on the attention weights.
        num_heads: number of heads; head_dim = d_out // num_heads.
        qkv_bias: whether W_query, W_key and W_value have a bias.

    Attributes the grader relies on (names appear in `state_dict()`):
        W_query, W_key, W_value: nn.Linear(d_in, d_out, bias=qkv_bias); head h uses output features
            [h * head_dim, (h + 1) * head_dim) of each.
        out_proj: nn.Linear(d_out, d_out) (with bias), applied to the concatenated heads.
        dropout: nn.Dropout(dropout) on the attention weights.
        mask: the causal mask, a registered buffer.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # combines the heads' outputs
        self.dropout = nn.Dropout(dropout)
        # True on and below the diagonal: query i may attend to key j <= i (SDPA convention)
        causal = torch.tril(torch.ones(context_length, context_length, dtype=torch.bool))  # (ctx, ctx)
        self.register_buffer("mask", causal)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Multi-head causal self-attention over `x`.

        Args:
            x: (B, T, d_in) with 1 <= T <= context_length.

        Returns:
            (B, T, d_out): out_proj applied to the concatenation of the num_heads head outputs, where head h
            is causal attention with queries/keys/values = features [h * head_dim, (h + 1) * head_dim) of
            W_query(x)/W_key(x)/W_value(x), scaled by 1/sqrt(head_dim).
        """
        # queries, keys, values: (B, T, d_out) -> (B, T, H, hd) -> (B, H, T, hd), with H = num_heads, hd = head_dim
        # scores, weights: (B, H, T, T); context: (B, H, T, hd) -> (B, T, H, hd) -> (B, T, d_out) -> out_proj
        B, T, _ = x.shape
        assert T <= self.context_length, f"sequence length {T} exceeds context_length {self.context_length}"
        H, hd = self.num_heads, self.head_dim

        queries = self.W_query(x).view(B, T, H, hd).transpose(1, 2)  # (B, T, d_out) -> (B, T, H, hd) -> (B, H, T, hd)
        keys = self.W_key(x).view(B, T, H, hd).transpose(1, 2)  # (B, H, T, hd)
        values = self.W_value(x).view(B, T, H, hd).transpose(1, 2)  # (B, H, T, hd)

        scores = queries @ keys.transpose(2, 3)  # (B, H, T, hd) @ (B, H, hd, T) -> (B, H, T, T)
        allowed = self.mask[:T, :T]  # (T, T), broadcast over B and H
        scores = scores.masked_fill(~allowed, float("-inf"))  # block every key j > i
        weights = torch.softmax(scores / math.sqrt(hd), dim=-1)  # (B, H, T, T), scale by the HEAD dim
        weights = self.dropout(weights)  # training mode only

        context = (weights @ values).transpose(1, 2)  # (B, H, T, hd) -> (B, T, H, hd)
        context = context.contiguous().view(B, T, self.d_out)  # (B, T, H, hd) -> (B, T, d_out)
        return self.out_proj(context)


class CrossAttention(nn.Module):
    """Multi-head cross-attention: queries from `x`, keys and values from `context`.

    Attributes (the names are part of the contract: tests load weights by name):
        W_query, W_key, W_value: nn.Linear(d_model, d_model, bias=qkv_bias)
        out_proj:                nn.Linear(d_model, d_model) (with bias)
        dropout:                 nn.Dropout(dropout), applied to the attention weights
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, qkv_bias: bool = False) -> None:
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.W_query = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_key = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_value = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, context: torch.Tensor,
                key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Attend from every position of `x` to the (real) positions of `context`.

        Args:
            x: (B, L, d_model), the sequence the queries come from.
            context: (B, S, d_model), the sequence the keys and values come from (S may differ from L).
            key_padding_mask: None, or a bool tensor (B, S): True = real token, False = padding.
                Every row has at least one True.

        Returns:
            (B, L, d_model): out_proj of the concatenated heads' context vectors.
        """
        # queries from x: (B, L, d_model) -> (B, L, H, hd) -> (B, H, L, hd); keys, values from context: (B, H, S, hd)
        # scores, weights: (B, H, L, S); key_padding_mask: (B, S) -> (B, 1, 1, S); context: (B, H, L, hd) -> (B, L, d_model)
        B, L, _ = x.shape
        S = context.shape[1]  # the key length comes from the context, never from x
        H, hd = self.num_heads, self.head_dim

        q = self.W_query(x).view(B, L, H, hd).transpose(1, 2)  # (B, H, L, hd)
        k = self.W_key(context).view(B, S, H, hd).transpose(1, 2)  # (B, H, S, hd)
        v = self.W_value(context).view(B, S, H, hd).transpose(1, 2)  # (B, H, S, hd)

        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)  # (B, H, L, S)
        if key_padding_mask is not None:
            keep = key_padding_mask.bool().view(B, 1, 1, S)  # (B, 1, 1, S): broadcast over heads and queries
            scores = scores.masked_fill(~keep, float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # (B, H, L, S): each row sums to 1 over the keys
        weights = self.dropout(weights)

        out = (weights @ v).transpose(1, 2).contiguous().view(B, L, self.d_model)  # (B, L, H, hd) -> (B, L, d_model)
        return self.out_proj(out)


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
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.gamma = nn.Parameter(torch.ones(num_heads, 1, 1))  # (H, 1, 1): broadcasts over (H, L, L)

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
        B, L, C = x.shape
        H, hd = self.num_heads, self.head_dim

        qkv = self.qkv(x).reshape(B, L, 3, H, hd).permute(2, 0, 3, 1, 4)  # (3, B, H, L, hd)
        q, k, v = qkv[0], qkv[1], qkv[2]  # each (B, H, L, hd)

        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)  # (B, H, L, L)
        pos = torch.arange(L, device=x.device)
        distance = (pos.view(L, 1) - pos.view(1, L)).abs().to(scores.dtype)  # (L, L): |i - j|
        scores = scores - self.gamma * distance  # (H, 1, 1) * (L, L) -> (H, L, L): one decay per head

        weights = torch.softmax(scores, dim=-1)  # (B, H, L, L)
        return (weights @ v).transpose(1, 2).reshape(B, L, C)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """The ALiBi slope m_h of each head, as a float32 tensor of shape (num_heads,).

    - num_heads a power of two (n): m_h = 2 ** (-8 * h / n) for h = 1, ..., n
      (n = 8: 1/2, 1/4, ..., 1/256).
    - otherwise: with c the largest power of two below num_heads, take the c slopes of alibi_slopes(c)
      followed by every other slope of alibi_slopes(2 * c) (indices 0, 2, 4, ...), keeping the first
      num_heads - c of those (n = 12: 1/2, ..., 1/256, then 0.7071, 0.3536, 0.1768, 0.0884).
    """
    assert num_heads >= 1, "num_heads must be positive"
    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    c = 1 << (num_heads.bit_length() - 1)  # the largest power of two <= num_heads
    slopes = power_of_two(c)
    if c != num_heads:
        slopes += power_of_two(2 * c)[0::2][: num_heads - c]
    return torch.tensor(slopes, dtype=torch.float32)


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
    if is_causal and L != S:
        # SDPA's is_causal would be top-left aligned (query i sees keys 0..i): build the bottom-right mask.
        mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diagonal=S - L)  # (L, S)
        is_causal = False
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask,
                                          dropout_p=dropout_p if training else 0.0, is_causal=is_causal)


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
    L, S = query.shape[-2], key.shape[-2]
    # Half precision inputs: accumulate in float32, cast back at the end.
    acc_dtype = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    q = query.to(acc_dtype) * (1.0 / math.sqrt(query.shape[-1]))  # (B, H, L, E), scale folded into q
    m = torch.full((*query.shape[:-1], 1), float("-inf"), dtype=acc_dtype, device=query.device)  # (B, H, L, 1)
    denom = torch.zeros_like(m)  # (B, H, L, 1)
    acc = torch.zeros((*query.shape[:-1], value.shape[-1]), dtype=acc_dtype, device=query.device)  # (B, H, L, Ev)
    q_pos = torch.arange(L, device=query.device)[:, None] + (S - L)  # (L, 1): absolute position of each query

    for start in range(0, S, block_size):
        end = min(start + block_size, S)  # the last tile may be shorter
        k_tile = key[..., start:end, :].to(acc_dtype)  # (B, H, bs, E)
        v_tile = value[..., start:end, :].to(acc_dtype)  # (B, H, bs, Ev)
        scores = q @ k_tile.transpose(-2, -1)  # (B, H, L, bs)
        if is_causal:
            k_pos = torch.arange(start, end, device=query.device)  # (bs,)
            scores = scores.masked_fill(k_pos > q_pos, float("-inf"))  # (L, bs) mask broadcasts
        m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))  # (B, H, L, 1)
        # A row that has seen only masked keys so far has m_new = -inf; exp(-inf - (-inf)) would be NaN.
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)  # (B, H, L, 1)
        p = torch.exp(scores - m_safe)  # (B, H, L, bs), masked entries become 0
        alpha = torch.exp(m - m_safe)  # (B, H, L, 1): rescales the old statistics (0 on the first tile)
        denom = alpha * denom + p.sum(dim=-1, keepdim=True)
        acc = alpha * acc + p @ v_tile
        m = m_new

    # Rows that saw no key at all (causal with L > S) have denom 0 and acc 0: return 0 there, like SDPA.
    out = acc / torch.where(denom == 0, torch.ones_like(denom), denom)  # (B, H, L, Ev)
    return out.to(query.dtype)
