"""Public tests for `causal_attention`: the book's worked example, shapes, no peeking at the future, the buffer."""

from __future__ import annotations

import pytest
import torch

from grader.testing.attention import causal_oracle, expect_params
from grader.testing.checks import expect, expect_shape, expect_tensor
from grader.testing.params import transplant

pytestmark = pytest.mark.exercise("causal_attention")

# Seed 001 ("Your journey starts with one step"): six 3-d token embeddings, and the context vectors that
# CausalAttention(d_in=3, d_out=2) prints for a batch of two copies, weights drawn after torch.manual_seed(123).
INPUTS = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                       [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])
CONTEXT_VECS = torch.tensor([[-0.4519, 0.2216], [-0.5874, 0.0058], [-0.6300, -0.0632],
                             [-0.5675, -0.0843], [-0.5526, -0.0981], [-0.5299, -0.1081]])
PROJECTIONS = ("W_query", "W_key", "W_value")


def book_weights(d_in: int = 3, d_out: int = 2) -> dict[str, torch.Tensor]:
    """The three projection weights the book gets after torch.manual_seed(123), in the order W_query, W_key, W_value."""
    with torch.random.fork_rng():
        torch.manual_seed(123)
        return {f"{name}.weight": torch.nn.Linear(d_in, d_out, bias=False).weight.detach().clone()
                for name in PROJECTIONS}


NAMES_HINT = ("name the projections self.W_query, self.W_key and self.W_value, each an "
              "nn.Linear(d_in, d_out, bias=qkv_bias)")


def sdpa_oracle(x: torch.Tensor, p: dict[str, torch.Tensor]) -> torch.Tensor:
    """PyTorch's own causal attention (math backend) on the projections the parameters `p` define."""
    expect_params(p, [f"{n}.weight" for n in PROJECTIONS], NAMES_HINT)
    return causal_oracle(x, p)


@pytest.mark.points(2)
def test_output_shape_for_a_sequence_shorter_than_the_context(student, gen):
    h = student.causal_attention.CausalAttention(3, 4, 8, 0.0)
    h.eval()
    x = torch.randn(2, 5, 3, generator=gen)
    expect_shape(h(x), (2, 5, 4), what="CausalAttention(d_in=3, d_out=4, context_length=8)(x of shape (2, 5, 3))",
                 hint="the output is (B, T, d_out); for T < context_length use the mask's [:T, :T] corner")


@pytest.mark.points(3)
def test_gives_the_books_context_vectors(student):
    h = student.causal_attention.CausalAttention(3, 2, 6, 0.0)
    h.eval()
    transplant(h, book_weights(), hint=NAMES_HINT)
    batch = torch.stack((INPUTS, INPUTS), dim=0)  # (2, 6, 3)
    got = h(batch)
    expect_tensor(got, torch.stack((CONTEXT_VECS, CONTEXT_VECS)), what="ca(batch) with the book's weights",
                  atol=1e-4, rtol=0,
                  hint="scores = queries @ keys^T, mask the future with -inf, softmax(scores / sqrt(d_out)), "
                       "then weights @ values")


@pytest.mark.points(2.5)
def test_future_tokens_do_not_change_earlier_outputs(student, gen):
    h = student.causal_attention.CausalAttention(4, 4, 6, 0.0)
    h.eval()
    x = torch.randn(2, 6, 4, generator=gen)
    changed = x.clone()
    changed[:, 3:] += 10.0  # only tokens 3, 4, 5 change
    before, after = h(x), h(changed)
    expect_shape(before, (2, 6, 4), what="output")
    expect_tensor(after[:, :3], before[:, :3], what="outputs of tokens 0..2 after changing tokens 3..5",
                  hint="token t must only see tokens 0..t: set the scores above the diagonal to -inf "
                       "BEFORE the softmax")


@pytest.mark.points(2.5)
def test_matches_pytorch_causal_attention_with_its_own_weights(student, gen):
    h = student.causal_attention.CausalAttention(5, 4, 8, 0.0, qkv_bias=True)
    h.eval()
    x = torch.randn(2, 7, 5, generator=gen)
    got = h(x)
    expected = sdpa_oracle(x, h.named_parameters())
    expect_tensor(got, expected, what="output vs F.scaled_dot_product_attention(q, k, v, is_causal=True)",
                  hint="queries from W_query, keys from W_key, values from W_value; scale by 1/sqrt(d_out)")


@pytest.mark.points(2)
def test_mask_is_a_registered_buffer(student):
    h = student.causal_attention.CausalAttention(3, 2, 6, 0.0)
    expect("mask" in h.named_buffers(), f"named_buffers(): got {sorted(h.named_buffers())}, expected a 'mask' entry",
           "store the causal mask with self.register_buffer('mask', ...), not as a plain attribute: "
           "a buffer moves with .to(device) and is saved in state_dict()")
    expect("mask" in h.state_dict(), f"state_dict(): got keys {sorted(h.state_dict())}, expected a 'mask' entry",
           "register the mask with persistent=True (the default)")
