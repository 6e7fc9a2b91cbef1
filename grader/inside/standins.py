"""Stand-ins: the grader's own versions of the exercise classes another exercise builds on.

An exercise is graded on its own: the multi-head wrapper's tests must not charge a bug in the
student's `CausalAttention` a second time. When a test asks for an *isolated* module
(``student.isolated.<module>``), the executor imports a fresh copy of that module in which the
classes it builds on are these stand-ins.

A stand-in has the constructor and the parameter names of the class it replaces, but it is
deliberately not attention (it gives nothing away): a causal running mean of the values, gated by
the queries and keys token by token. The hidden tests compute the same formula from the parameters
they load. Functions have stand-ins too (``rope_frequencies``/``apply_rope`` for the modern
assignment's GQA and KV cache): position-dependent maps that are not RoPE, computed again by the
tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

__all__ = [
    "ISOLATED_SUFFIX",
    "STAND_INS",
    "StandInCausalAttention",
    "StandInGroupedQueryAttention",
    "split_isolated",
    "stand_in_apply_rope",
    "stand_in_head",
    "stand_in_rope_frequencies",
]

# appended to a module name on the wire: "multihead_attention:isolated"
ISOLATED_SUFFIX = ":isolated"


def stand_in_head(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    drop: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """The stand-in's output from the projected queries, keys and values (each (B, T, d_out))."""
    gate = torch.sigmoid(q * k)  # (B, T, d_out): token by token, so causal
    counts = torch.arange(1, v.shape[1] + 1, device=v.device, dtype=v.dtype).unsqueeze(-1)  # (T, 1)
    running = v.cumsum(dim=1) / counts  # (B, T, d_out): mean of the values of tokens 0..t
    return (drop(gate) if drop is not None else gate) * running


class StandInCausalAttention(nn.Module):
    """Replaces the student's ``CausalAttention`` while another exercise is graded: same arguments,
    same parameters (``W_query``, ``W_key``, ``W_value``), causal, dropout on its gate in training
    mode."""

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float = 0.0,
        qkv_bias: bool = False,
    ) -> None:
        super().__init__()
        # written unlike any solution line: the release scan refuses a file that repeats one
        self.projections = ("W_query", "W_key", "W_value")
        for role in self.projections:
            self.add_module(role, nn.Linear(d_in, d_out, qkv_bias))
        self.max_tokens = context_length
        self.drop = nn.Dropout(p=dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[1] > self.max_tokens:
            raise ValueError(
                f"the grader's stand-in CausalAttention(context_length={self.max_tokens}) got "
                f"an input of shape {tuple(x.shape)}: heads take (B, T, d_in) with T <= context_length"
            )
        q, k, v = (self.get_submodule(role)(x) for role in self.projections)  # (B, T, d_out) each
        return stand_in_head(q, k, v, self.drop)


# -------------------------------------------------------------------------------------------------
# RoPE, GQA The grouped-query module builds on rope.py, and KV-cache decoding on both. Their
# stand-ins are position dependent and mix features (so a wrong position, a missing call or a call
# on the values shows), but they are not rotations: nothing of RoPE's solution is given away. The
# hidden tests compute the same formulas.


def stand_in_rope_frequencies(
    head_dim: int, max_len: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two (max_len, head_dim // 2) tables, smooth in the position and different per column and per
    base."""
    if head_dim % 2 or head_dim <= 0 or max_len <= 0:
        raise ValueError(
            f"the grader's stand-in rope_frequencies({head_dim}, {max_len}) needs an even head_dim "
            "and max_len >= 1"
        )
    where = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (max_len, 1)
    speed = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64) / math.log(
        base
    )  # (head_dim // 2,)
    travelled = where * speed  # (max_len, head_dim // 2)
    return (1.0 / (1.0 + 0.25 * travelled)).to(dtype), torch.tanh(0.5 * travelled).to(dtype)


def stand_in_apply_rope(
    x: torch.Tensor,
    first: torch.Tensor,
    second: torch.Tensor,
    positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """x * [first | first reversed] + (x rolled by one feature) * [second | -second], the tables'
    rows taken at ``positions`` (None: 0 .. T-1; (T,) or (B, T) absolute positions), in x's
    dtype."""
    width, tokens = x.shape[-1], x.shape[-2]
    rows = torch.arange(tokens, device=x.device) if positions is None else positions
    # meta tensors hold no values
    last = int(rows.max()) if rows.numel() and rows.device.type != "meta" else 0
    if width != 2 * first.shape[-1] or last >= first.shape[0] or tokens > first.shape[0]:
        raise ValueError(
            f"the grader's stand-in apply_rope got x with {width} features at positions up to "
            f"{max(last, tokens - 1)}, tables of shape {tuple(first.shape)}: tables come from "
            "rope_frequencies(head_dim, max_len, ...), positions must stay below max_len"
        )
    gain, mix = first[rows], second[rows]  # (T, width // 2) or (B, T, width // 2)
    if rows.dim() == 2:  # one row of positions per sequence: the same for every head
        gain, mix = gain.unsqueeze(-3), mix.unsqueeze(-3)
    scale = torch.cat([gain, gain.flip(-1)], dim=-1)
    shift = torch.cat([mix, mix.neg()], dim=-1)
    return (x * scale + torch.roll(x, shifts=1, dims=-1) * shift).to(x.dtype)


class CountingLinear(nn.Linear):
    """An ``nn.Linear`` that counts the token rows it has projected, in its buffer ``rows`` (read by
    the grader through ``named_buffers()``: decoding with a KV cache projects each token once)."""

    rows: torch.Tensor

    def __init__(self, d_in: int, d_out: int, bias: bool) -> None:
        super().__init__(d_in, d_out, bias)
        self.register_buffer("rows", torch.zeros((), dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.rows.add_(
            x.numel() // max(x.shape[-1], 1)
        )  # an int64 buffer: .to(dtype) leaves it alone
        return super().forward(x)


class StandInGroupedQueryAttention(nn.Module):
    """Replaces the student's ``GroupedQueryAttention`` while kv_cache is graded: same arguments,
    parameters and attributes (W_query, W_key, W_value, out_proj, dropout, num_heads, num_kv_heads,
    head_dim, max_len, use_rope, rope_cos, rope_sin: the stand-in tables above). It has no forward
    of its own: decoding goes through these attributes, which is what the kv_cache exercise asks."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_kv_heads: int,
        dropout: float = 0.0,
        bias: bool = False,
        rope: bool = False,
        max_len: int = 2048,
        rope_base: float = 10000.0,
    ) -> None:
        super().__init__()
        if num_heads <= 0 or num_kv_heads <= 0 or d_model % num_heads or num_heads % num_kv_heads:
            raise ValueError(
                f"the grader's stand-in GroupedQueryAttention({d_model}, {num_heads}, {num_kv_heads}) "
                "needs num_heads | d_model and num_kv_heads | num_heads"
            )
        self.num_heads, self.num_kv_heads, self.head_dim = (
            num_heads,
            num_kv_heads,
            d_model // num_heads,
        )
        self.max_len, self.use_rope = max_len, bool(rope)
        narrow = self.head_dim * num_kv_heads
        self.add_module("W_query", nn.Linear(d_model, d_model, bias))
        self.add_module("W_key", CountingLinear(d_model, narrow, bias))
        self.add_module("W_value", CountingLinear(d_model, narrow, bias))
        self.add_module("out_proj", nn.Linear(d_model, d_model, bias))
        self.add_module("dropout", nn.Dropout(p=dropout))
        if self.use_rope:
            tables = stand_in_rope_frequencies(self.head_dim, max_len, rope_base)
            for name, table in zip(("rope_cos", "rope_sin"), tables, strict=True):
                self.register_buffer(name, table)

    def forward(self, *args: object, **kwargs: object) -> torch.Tensor:
        raise RuntimeError(
            "the grader's stand-in GroupedQueryAttention cannot be called: decode through its "
            "W_query, W_key, W_value, rope tables and out_proj (decode_step), not model(x)"
        )


# module being graded -> {sibling module it imports: {class or function name: stand-in}}
STAND_INS: dict[str, dict[str, dict[str, object]]] = {
    "multihead_attention": {"causal_attention": {"CausalAttention": StandInCausalAttention}},
    "grouped_query_attention": {
        "rope": {"rope_frequencies": stand_in_rope_frequencies, "apply_rope": stand_in_apply_rope}
    },
    "kv_cache": {
        "grouped_query_attention": {"GroupedQueryAttention": StandInGroupedQueryAttention},
        "rope": {"rope_frequencies": stand_in_rope_frequencies, "apply_rope": stand_in_apply_rope},
    },
}


def split_isolated(module: str) -> tuple[str, bool]:
    """``"m:isolated"`` -> ``("m", True)``; ``"m"`` -> ``("m", False)``."""
    if module.endswith(ISOLATED_SUFFIX):
        return module[: -len(ISOLATED_SUFFIX)], True
    return module, False
