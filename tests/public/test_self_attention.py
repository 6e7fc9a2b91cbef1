"""Public tests for `self_attention`: the book's worked examples for V1 and V2, parameter layout, batches."""

from __future__ import annotations

import pytest
import torch

from grader.testing.checks import expect, expect_shape, expect_tensor

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
QUERY_HINT = ("queries = x @ W_query (V2: self.W_query(x)); the tutorial's printed numbers come from "
              "`queries = x @ self.W_key`, a copy-paste bug. Scale the scores by 1/sqrt(d_out), softmax over dim=-1")


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


@pytest.mark.points(2.5)
def test_v1_reproduces_the_book_example(student):
    sa = student.self_attention.SelfAttentionV1(3, 2)
    sa.load_state_dict(book_v1_weights())
    expect_tensor(sa(INPUTS), V1_OUTPUT, what="SelfAttentionV1(3, 2)(inputs) with the book's seed-123 weights",
                  atol=1e-4, rtol=0, hint=QUERY_HINT)


@pytest.mark.points(2.5)
def test_v2_reproduces_the_book_example(student):
    sa = student.self_attention.SelfAttentionV2(3, 2)
    sa.load_state_dict(book_v2_weights())
    expect_tensor(sa(INPUTS), V2_OUTPUT, what="SelfAttentionV2(3, 2)(inputs) with the book's seed-789 weights",
                  atol=1e-4, rtol=0, hint=QUERY_HINT)


@pytest.mark.points(1)
def test_parameter_names_and_shapes(student):
    v1 = student.self_attention.SelfAttentionV1(3, 5).named_parameters()
    for name in ("W_query", "W_key", "W_value"):
        expect(name in v1, f"SelfAttentionV1(3, 5) has no parameter {name!r} (it has {sorted(v1)})",
               f"self.{name} = nn.Parameter(torch.rand(d_in, d_out))")
        expect_shape(v1[name], (3, 5), what=f"SelfAttentionV1(3, 5).{name}", hint="V1 stores (d_in, d_out) matrices")
    v2 = student.self_attention.SelfAttentionV2(3, 5).named_parameters()
    expect(sorted(v2) == ["W_key.weight", "W_query.weight", "W_value.weight"],
           f"SelfAttentionV2(3, 5) parameters: got {sorted(v2)}, expected W_query.weight, W_key.weight, W_value.weight",
           "self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias), and qkv_bias defaults to False")


@pytest.mark.points(2)
def test_batched_input_gives_one_result_per_sequence(student):
    sa = student.self_attention.SelfAttentionV2(3, 4)
    batch = torch.stack([INPUTS, INPUTS.flip(0)])  # (2, 6, 3): two different sequences
    out = sa(batch)
    expect_shape(out, (2, 6, 4), what="SelfAttentionV2(3, 4) on a (2, 6, 3) batch",
                 hint="transpose only the last two dims of keys: keys.transpose(-2, -1), not keys.T")
    for b in range(2):
        expect_tensor(out[b], sa(batch[b]), what=f"batched output of sequence {b} vs sequence {b} alone",
                      hint="tokens of one sequence must never attend to another sequence; softmax over dim=-1")
