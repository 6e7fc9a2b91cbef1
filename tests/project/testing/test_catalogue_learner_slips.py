"""Variants added for slips seen in blind held-out bugs, each shown a learner-written wrong output (computed here,
apart from the catalogue's code) and the right one: the slip is named, the right output names nothing."""

from __future__ import annotations

import math
import re

import torch

from grader.testing.catalogue.efficient import formula_suspects
from grader.testing.catalogue.heads import Spec, module_suspects
from grader.testing.catalogue.masks import padding_suspects
from grader.testing.catalogue.sdp import sdp_suspects
from grader.testing.catalogue.softmax import softmax_suspects, weights_suspects
from grader.testing.diagnosis import Suspects


def named(suspects: Suspects, got: torch.Tensor, want: torch.Tensor) -> set[str]:
    said = suspects.explain(got, want, 1e-5, 1e-4)
    return {
        i for found in re.findall(r"diagnosis \[([a-z0-9, -]+)\]", said) for i in found.split(", ")
    }


torch.manual_seed(3)
X = torch.randn(2, 6, 7)


def test_the_max_over_the_last_dim_under_a_softmax_over_another_is_named() -> None:
    shifted = X - X.max(dim=-1, keepdim=True).values  # a stable softmax that forgot its dim
    got = shifted.exp() / shifted.exp().sum(dim=1, keepdim=True)
    right = torch.softmax(X.double(), dim=1).float()
    assert named(softmax_suspects(X, 1), got, right) == {"softmax-wrong-dim"}
    assert named(softmax_suspects(X, 1), right.clone(), right) == set()


def test_weights_of_scaled_scores_are_named_in_numbers() -> None:
    scores = X[0] @ X[0].T
    got = torch.softmax(
        scores / math.sqrt(7), dim=-1
    )  # SDPA's scale where simple attention has none
    right = torch.softmax(scores.double(), dim=-1).float()
    said = weights_suspects(scores).explain(got, right, 1e-5, 1e-4)
    assert "diagnosis [wrong-scale]" in said and "scaled by 0.378" in said, said
    assert named(weights_suspects(scores), right.clone(), right) == set()


def test_a_padding_mask_one_short_is_named() -> None:
    lengths, max_len = torch.tensor([0, 5, 3, 1]), 5
    got = torch.arange(max_len)[None, :] < (lengths - 1)[:, None]
    right = torch.arange(max_len)[None, :] < lengths[:, None]
    assert named(padding_suspects(lengths, max_len), got, right) == {"padding-off-by-one"}


def test_a_boolean_mask_multiplied_into_the_scores_is_named() -> None:
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    mask = torch.rand(4, 4) > 0.4
    mask[:, 0] = True
    s = q @ k.transpose(-2, -1) / math.sqrt(8) * mask  # the learner's "apply the mask"
    got = torch.softmax(s, dim=-1) @ v
    right = (
        torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(~mask, -math.inf), -1)
        @ v
    )
    assert named(sdp_suspects(q, k, v, mask=mask), got, right) == {"mask-multiplied"}


def test_a_causal_offset_of_the_wrong_sign_is_named() -> None:
    q, k, v = torch.randn(1, 1, 3, 8), torch.randn(1, 1, 7, 8), torch.randn(1, 1, 7, 8)

    def causal(diagonal: int) -> torch.Tensor:
        keep = torch.ones(3, 7, dtype=torch.bool).tril(diagonal=diagonal)
        s = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(~keep, -math.inf)
        return torch.softmax(s, -1) @ v

    suspects = formula_suspects(q, k, v, is_causal=True)
    assert named(suspects, causal(3 - 7), causal(7 - 3)) == {"mask-top-left"}
    assert named(suspects, causal(7 - 3).clone(), causal(7 - 3)) == set()


def _learner_mha(
    x: torch.Tensor, p: dict[str, torch.Tensor], *, merge: str, weights_scaled: bool
) -> torch.Tensor:
    B, T, d, H = *x.shape, 2
    q, k, v = (x @ p[f"W_{n}.weight"].T + p[f"W_{n}.bias"] for n in ("query", "key", "value"))
    q, k, v = (t.view(B, T, H, d // H).transpose(1, 2) for t in (q, k, v))  # (B, H, T, hd)
    scale = 1 / math.sqrt(d // H)
    w = torch.softmax(q @ k.transpose(-2, -1) * (1.0 if weights_scaled else scale), dim=-1)
    o = (w * scale if weights_scaled else w) @ v  # (B, H, T, hd)
    o = o.transpose(2, 3) if merge == "2,3" else o.transpose(1, 2)  # (B, H, hd, T) or (B, T, H, hd)
    return o.reshape(B, T, d) @ p["out_proj.weight"].T + p["out_proj.bias"]


def test_heads_merged_with_the_wrong_transpose_or_a_scale_on_the_weights_are_named() -> None:
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    p = {
        f"{n}.{t}": torch.randn(8, 8, dtype=torch.float64)
        if t == "weight"
        else torch.randn(8, dtype=torch.float64)
        for n in ("W_query", "W_key", "W_value", "out_proj")
        for t in ("weight", "bias")
    }
    suspects = module_suspects(x, p, Spec(heads=2), ["scale", "softmax", "heads", "out_proj"])
    right = _learner_mha(x, p, merge="1,2", weights_scaled=False)
    assert named(suspects, _learner_mha(x, p, merge="2,3", weights_scaled=False), right) == {
        "heads-no-transpose"
    }
    assert named(suspects, _learner_mha(x, p, merge="1,2", weights_scaled=True), right) == {
        "wrong-scale"
    }
    assert named(suspects, right.clone(), right) == set()
