"""Public tests for `multihead_attention`: the wrapper's worked example, shapes, agreement with
nn.MultiheadAttention, causality, and the d_out % num_heads check."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from grader.protocol.errors import StudentError
from grader.testing.attention import expect_params, mha_oracle
from grader.testing.checks import expect, expect_shape, expect_tensor, fail
from grader.testing.params import transplant

pytestmark = pytest.mark.exercise("multihead_attention")

# Seed 001: the six 3-d embeddings of "Your journey starts with one step", and the output of
# MultiHeadAttentionWrapper(d_in=3, d_out=2, context_length=6, dropout=0.0, num_heads=3) after torch.manual_seed(123)
# on a batch of two copies (each copy gives these rows).
INPUTS = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                       [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])
WRAPPER_OUT = torch.tensor([
    [-0.4519, 0.2216, 0.4772, 0.1063, 0.4566, 0.2729],
    [-0.5874, 0.0058, 0.5891, 0.3257, 0.5792, 0.3011],
    [-0.6300, -0.0632, 0.6202, 0.3860, 0.6249, 0.3102],
    [-0.5675, -0.0843, 0.5478, 0.3589, 0.5691, 0.2785],
    [-0.5526, -0.0981, 0.5321, 0.3428, 0.5543, 0.2520],
    [-0.5299, -0.1081, 0.5077, 0.3493, 0.5337, 0.2499]])
PROJECTIONS = ("W_query", "W_key", "W_value")
MHA_NAMES = ("W_query.weight", "W_key.weight", "W_value.weight", "out_proj.weight", "out_proj.bias")
MHA_HINT = "name the layers W_query, W_key, W_value (nn.Linear) and out_proj (nn.Linear with bias)"


@pytest.mark.points(2)
def test_wrapper_concatenates_the_heads(student, gen):
    h = student.multihead_attention.MultiHeadAttentionWrapper(3, 2, 8, 0.0, num_heads=3)
    h.eval()
    x = torch.randn(2, 5, 3, generator=gen)
    expect_shape(h(x), (2, 5, 6), what="MultiHeadAttentionWrapper(d_in=3, d_out=2, num_heads=3)(x of shape (2, 5, 3))",
                 hint="each head returns (B, T, d_out); concatenate the num_heads outputs on the last dim")


@pytest.mark.points(3)
def test_wrapper_gives_the_books_context_vectors(student):
    with torch.random.fork_rng():  # the book builds the heads one after the other after torch.manual_seed(123)
        torch.manual_seed(123)
        params = {f"heads.{i}.{n}.weight": nn.Linear(3, 2, bias=False).weight.detach().clone()
                  for i in range(3) for n in PROJECTIONS}
    h = student.multihead_attention.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=3)
    h.eval()
    transplant(h, params, hint="keep the heads in self.heads = nn.ModuleList([CausalAttention(...) for _ in range(H)])")
    got = h(torch.stack((INPUTS, INPUTS)))
    expect_tensor(got, torch.stack((WRAPPER_OUT, WRAPPER_OUT)), what="mha(batch) with the book's weights",
                  atol=1e-4, rtol=0, hint="torch.cat([head(x) for head in self.heads], dim=-1)")


@pytest.mark.points(2)
def test_fused_output_shape(student, gen):
    h = student.multihead_attention.MultiHeadAttention(6, 8, 8, 0.0, num_heads=2)
    h.eval()
    x = torch.randn(2, 5, 6, generator=gen)
    expect_shape(h(x), (2, 5, 8), what="MultiHeadAttention(d_in=6, d_out=8, context_length=8, num_heads=2)(x (2, 5, 6))",
                 hint="view (B, T, H, hd), transpose(1, 2), attend, transpose back, contiguous().view(B, T, d_out)")


@pytest.mark.points(3)
def test_fused_matches_nn_multiheadattention_with_its_own_weights(student, gen):
    h = student.multihead_attention.MultiHeadAttention(8, 8, 7, 0.0, num_heads=2, qkv_bias=True)
    h.eval()
    x = torch.randn(2, 5, 8, generator=gen)
    got = h(x)
    expect_tensor(got, mha_oracle(expect_params(h.named_parameters(), MHA_NAMES, MHA_HINT), 2, x, causal=True),
                  what="output vs nn.MultiheadAttention with the same weights and a causal mask",
                  hint="scale each head's scores by 1/sqrt(head_dim) (not d_out), split heads with "
                       "view(B, T, H, hd).transpose(1, 2), and finish with out_proj")


@pytest.mark.points(2)
def test_fused_future_tokens_do_not_change_earlier_outputs(student, gen):
    h = student.multihead_attention.MultiHeadAttention(4, 8, 6, 0.0, num_heads=4)
    h.eval()
    x = torch.randn(2, 6, 4, generator=gen)
    changed = x.clone()
    changed[:, 2:] += 10.0
    before, after = h(x), h(changed)
    expect_shape(before, (2, 6, 8), what="output")
    expect_tensor(after[:, :2], before[:, :2], what="outputs of tokens 0..1 after changing tokens 2..5",
                  hint="mask the scores of keys j > i with -inf in every head, before the softmax")


@pytest.mark.points(2)
def test_fused_rejects_d_out_not_divisible_by_num_heads(student, gen):
    ok = student.multihead_attention.MultiHeadAttention(4, 8, 5, 0.0, num_heads=4)
    ok.eval()
    expect_shape(ok(torch.randn(1, 3, 4, generator=gen)), (1, 3, 8), what="MultiHeadAttention(4, 8, ..., num_heads=4)")
    try:
        student.multihead_attention.MultiHeadAttention(4, 6, 5, 0.0, num_heads=4)
    except StudentError as exc:
        expect(exc.kind != "not_implemented", f"got {exc.message}, expected an error about d_out % num_heads")
    else:
        fail("MultiHeadAttention(d_in=4, d_out=6, num_heads=4) was built without an error, expected one",
             "6 features cannot be split into 4 equal heads: assert d_out % num_heads == 0 in __init__")
