"""Public tests for `self_attention`: the book's worked examples for V1 and V2, parameter layout, batches."""

from __future__ import annotations

import pytest
import torch

from grader.testing.catalogue.modules import self_suspects
from grader.testing.catalogue.structure import expect_structure
from grader.testing.checks import expect, expect_call
from grader.testing.diagnosis import tag

pytestmark = pytest.mark.exercise("self_attention")

# Seed 001: "Your journey starts with one step", embedded in 3 dims.
INPUTS = torch.tensor([[0.43, 0.15, 0.89],   # Your     (x^1)
                       [0.55, 0.87, 0.66],   # journey  (x^2)
                       [0.57, 0.85, 0.64],   # starts   (x^3)
                       [0.22, 0.58, 0.33],   # with     (x^4)
                       [0.77, 0.25, 0.10],   # one      (x^5)
                       [0.05, 0.80, 0.55]])  # step     (x^6)

# The book's outputs (torch.manual_seed(123) for V1, 789 for V2). The tutorial seed prints
# [[0.2948, 0.7944], ...] and [[-0.0793, 0.0640], ...] instead: its forward uses W_key for the queries.
V1_OUTPUT = torch.tensor([[0.2996, 0.8053], [0.3061, 0.8210], [0.3058, 0.8203],
                          [0.2948, 0.7939], [0.2927, 0.7891], [0.2990, 0.8040]])
V2_OUTPUT = torch.tensor([[-0.0739, 0.0713], [-0.0748, 0.0703], [-0.0749, 0.0702],
                          [-0.0760, 0.0685], [-0.0763, 0.0679], [-0.0754, 0.0693]])
NAMES = ("W_query", "W_key", "W_value")


def book_v1_weights() -> dict[str, torch.Tensor]:
    """The book's `SelfAttentionV1(3, 2)` parameters after torch.manual_seed(123), in creation order."""
    torch.manual_seed(123)
    return {"W_query": torch.rand(3, 2), "W_key": torch.rand(3, 2), "W_value": torch.rand(3, 2)}


def book_v2_weights() -> dict[str, torch.Tensor]:
    """The book's `SelfAttentionV2(3, 2)` Linear weights (d_out, d_in) after torch.manual_seed(789)."""
    torch.manual_seed(789)
    layers = [torch.nn.Linear(3, 2, bias=False) for _ in range(3)]
    return {f"{name}.weight": layer.weight.detach().clone()
            for name, layer in zip(("W_query", "W_key", "W_value"), layers)}


def linear(w: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {f"{n}.weight": w[n].T for n in NAMES}


@pytest.mark.points(1.5)
def test_parameter_names_and_shapes(student):
    v1 = student.self_attention.SelfAttentionV1(3, 5).named_parameters()
    expect_structure({n: tuple(t.shape) for n, t in v1.items()}, {n: (3, 5) for n in NAMES},
                     what="SelfAttentionV1(3, 5)'s parameters")
    for bias in (False, True):
        v2 = student.self_attention.SelfAttentionV2(3, 5, qkv_bias=bias).named_parameters()
        expect_structure({n: tuple(t.shape) for n, t in v2.items()},
                         {f"{n}.{k}": s for n in NAMES for k, s in (("weight", (5, 3)), ("bias", (5,)))[: 1 + bias]},
                         what=f"SelfAttentionV2(3, 5, qkv_bias={bias})'s parameters")
    w = torch.cat([p.detach().reshape(-1) for p in student.self_attention.SelfAttentionV1(16, 16).named_parameters()
                   .values()])
    expect(bool(torch.isfinite(w).all()) and float(w.min()) >= 0 and float(w.max()) < 1 and abs(float(w.mean()) - 0.5)
           < 0.06, f"fresh SelfAttentionV1(16, 16) weights: got values in [{float(w.min()):.3g}, {float(w.max()):.3g}], "
           f"mean {float(w.mean()):.3g}, expected uniform on [0, 1)\n  " + tag(
               "v1-init", "the V1 weights are not initialised as specified: nn.Parameter(torch.rand(d_in, d_out))"))


@pytest.mark.points(2.5)
def test_v1_reproduces_the_book_example(student):
    sa = student.self_attention.SelfAttentionV1(3, 2)
    w = book_v1_weights()
    sa.load_state_dict(w)
    expect_call(lambda: sa(INPUTS), V1_OUTPUT, what="SelfAttentionV1(3, 2)(inputs) with the book's seed-123 weights",
                atol=1e-4, rtol=0, suspects=self_suspects(INPUTS, linear(w)))
    big = INPUTS * 60  # scores of several hundred: exp overflows unless the row max is subtracted
    want = torch.softmax((big @ w["W_query"]) @ (big @ w["W_key"]).T / 2 ** 0.5, dim=-1) @ (big @ w["W_value"])
    expect_call(lambda: sa(big), want, what="SelfAttentionV1(3, 2) on inputs * 60", atol=1e-3, rtol=1e-3,
                suspects=self_suspects(big, linear(w)))


@pytest.mark.points(2)
def test_v2_reproduces_the_book_example(student):
    sa = student.self_attention.SelfAttentionV2(3, 2)
    w = book_v2_weights()
    sa.load_state_dict(w)
    expect_call(lambda: sa(INPUTS), V2_OUTPUT, what="SelfAttentionV2(3, 2)(inputs) with the book's seed-789 weights",
                atol=1e-4, rtol=0, suspects=self_suspects(INPUTS, w))


@pytest.mark.points(2)
def test_batched_input_gives_one_result_per_sequence(student):
    sa = student.self_attention.SelfAttentionV2(3, 4)
    batch = torch.stack([INPUTS, INPUTS.flip(0)])  # (2, 6, 3): two different sequences
    p = sa.named_parameters()
    q, k, v = (batch @ p[f"{n}.weight"].T for n in NAMES)
    want = torch.softmax(q @ k.transpose(1, 2) / 2.0, dim=-1) @ v
    expect_call(lambda: sa(batch), want, what="SelfAttentionV2(3, 4) on a (2, 6, 3) batch",
                suspects=self_suspects(batch, p))
