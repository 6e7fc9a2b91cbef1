"""Stand-ins: the grader's own versions of the exercise classes another exercise builds on.

An exercise is graded on its own: the multi-head wrapper's tests must not charge a bug in the student's
`CausalAttention` a second time. When a test asks for an *isolated* module (``student.isolated.<module>``),
the executor imports a fresh copy of that module in which the classes it builds on are these stand-ins.

A stand-in has the constructor and the parameter names of the class it replaces, but it is deliberately
not attention (it gives nothing away): a causal running mean of the values, gated by the queries and
keys token by token. The hidden tests compute the same formula from the parameters they load.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

__all__ = ["ISOLATED_SUFFIX", "STAND_INS", "StandInCausalAttention", "split_isolated", "stand_in_head"]

ISOLATED_SUFFIX = ":isolated"  # appended to a module name on the wire: "multihead_attention:isolated"


def stand_in_head(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  drop: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """The stand-in's output from the projected queries, keys and values (each (B, T, d_out))."""
    gate = torch.sigmoid(q * k)  # (B, T, d_out): token by token, so causal
    counts = torch.arange(1, v.shape[1] + 1, device=v.device, dtype=v.dtype).unsqueeze(-1)  # (T, 1)
    running = v.cumsum(dim=1) / counts  # (B, T, d_out): mean of the values of tokens 0..t
    return (drop(gate) if drop is not None else gate) * running


class StandInCausalAttention(nn.Module):
    """Replaces the student's ``CausalAttention`` while another exercise is graded: same arguments, same
    parameters (``W_query``, ``W_key``, ``W_value``), causal, dropout on its gate in training mode."""

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float = 0.0,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        # written unlike any solution line: the release scan refuses a file that repeats one
        self.projections = ("W_query", "W_key", "W_value")
        for role in self.projections:
            self.add_module(role, nn.Linear(d_in, d_out, qkv_bias))
        self.max_tokens = context_length
        self.drop = nn.Dropout(p=dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[1] > self.max_tokens:
            raise ValueError(f"the grader's stand-in CausalAttention(context_length={self.max_tokens}) got "
                             f"an input of shape {tuple(x.shape)}: heads take (B, T, d_in) with T <= context_length")
        q, k, v = (self.get_submodule(role)(x) for role in self.projections)  # (B, T, d_out) each
        return stand_in_head(q, k, v, self.drop)


# module being graded -> {sibling module it imports: {class name: stand-in}}
STAND_INS: dict[str, dict[str, dict[str, type]]] = {
    "multihead_attention": {"causal_attention": {"CausalAttention": StandInCausalAttention}},
}


def split_isolated(module: str) -> tuple[str, bool]:
    """``"m:isolated"`` -> ``("m", True)``; ``"m"`` -> ``("m", False)``."""
    if module.endswith(ISOLATED_SUFFIX):
        return module[: -len(ISOLATED_SUFFIX)], True
    return module, False
