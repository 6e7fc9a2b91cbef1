"""Public tests for `causal_attention`: the book's worked example, shapes, no peeking at the future, the buffer and
the parameters, dropout in eval and training mode."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from grader.testing.attention import causal_oracle, expect_params
from grader.testing.catalogue.modules import causal_suspects
from grader.testing.catalogue.structure import expect_structure
from grader.testing.checks import expect, expect_call, expect_tensor
from grader.testing.diagnosis import tag
from grader.testing.dropout import expect_new_draw, output_multipliers
from grader.testing.oracles import expect_dropout_on_weights, expect_repeatable
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


NOT_A_BUFFER = tag("not-a-buffer", "the mask is not a registered (persistent) buffer: a plain attribute is missing "
                   "from state_dict() and stays behind when .to() moves the module")


@pytest.mark.points(2)
def test_the_parameters_and_the_mask_buffer(student):
    for bias in (False, True):
        h = student.causal_attention.CausalAttention(3, 2, 6, 0.0, qkv_bias=bias)
        got = {k: tuple(v.shape) for k, v in h.named_parameters().items()}
        want = {f"{n}.{kind}": shape for n in PROJECTIONS for kind, shape in (("weight", (2, 3)), ("bias", (2,)))[
            : 1 + bias]}
        expect_structure(got, want, what=f"named_parameters() of CausalAttention(3, 2, 6, 0.0, qkv_bias={bias})")
    expect("mask" in h.named_buffers(), f"named_buffers(): got {sorted(h.named_buffers())}, expected a 'mask' entry"
           f"\n  {NOT_A_BUFFER}")
    expect("mask" in h.state_dict(), f"state_dict(): got keys {sorted(h.state_dict())}, expected a 'mask' entry"
           f"\n  {NOT_A_BUFFER}")


@pytest.mark.points(2.5)
def test_gives_the_books_context_vectors(student):
    h = student.causal_attention.CausalAttention(3, 2, 6, 0.0)
    h.eval()
    params = transplant(h, book_weights(), hint=NAMES_HINT)
    batch = torch.stack((INPUTS, INPUTS), dim=0)  # (2, 6, 3)
    expect_call(lambda: h(batch), torch.stack((CONTEXT_VECS, CONTEXT_VECS)), what="ca(batch) with the book's weights",
                atol=1e-4, rtol=0, suspects=causal_suspects(batch, params))


@pytest.mark.points(2.5)
def test_a_sequence_shorter_than_the_context_and_the_future(student, gen):
    h = student.causal_attention.CausalAttention(4, 4, 8, 0.0)
    h.eval()
    x = torch.randn(2, 6, 4, generator=gen)
    p = h.named_parameters()
    expect_call(lambda: h(x), sdpa_oracle(x, p), what="CausalAttention(4, 4, context_length=8) on x of shape (2, 6, 4)",
                suspects=causal_suspects(x, p, context_length=8))
    changed = x.clone()
    changed[:, 3:] += 10.0  # only tokens 3, 4, 5 change
    before, after = h(x), h(changed)
    expect_tensor(after[:, :3], before[:, :3], what="outputs of tokens 0..2 after changing tokens 3..5")


@pytest.mark.points(2.5)
def test_matches_pytorch_causal_attention_with_its_own_weights(student, gen):
    h = student.causal_attention.CausalAttention(5, 4, 8, 0.0, qkv_bias=True)
    h.eval()
    x = torch.randn(2, 7, 5, generator=gen)
    p = h.named_parameters()
    expect_call(lambda: h(x), sdpa_oracle(x, p), what="output vs F.scaled_dot_product_attention(q, k, v, "
                "is_causal=True)", suspects=causal_suspects(x, p, context_length=8))
    big = x.clone()
    big[..., :] = x * 40  # scores of several hundred: exp overflows unless the row max is subtracted
    expect_call(lambda: h(big), sdpa_oracle(big, p), what="output for inputs x * 40", atol=1e-4, rtol=1e-3,
                suspects=causal_suspects(big, p, context_length=8))


@pytest.mark.points(1.5)
def test_dropout_is_off_in_eval_and_on_the_weights_in_training(student, gen):
    h = student.causal_attention.CausalAttention(6, 12, 6, 0.2)
    h.eval()
    x = torch.randn(16, 6, 6, generator=gen, dtype=torch.float64)
    h.to(dtype=torch.float64)
    p = {k: v.double() for k, v in h.named_parameters().items()}
    first = h(x)
    expect_repeatable(first, h(x), what="two calls in eval mode with dropout=0.2")
    expect_tensor(first, sdpa_oracle(x, p), what="eval-mode output with dropout=0.2",
                  suspects=causal_suspects(x, p))
    h.train()
    q, k = (F.linear(x, p[f"{n}.weight"]) for n in ("W_query", "W_key"))
    weights = torch.softmax((q @ k.transpose(1, 2) / 12 ** 0.5).masked_fill(
        torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf")), dim=-1)
    expect_dropout_on_weights(h(x), weights, F.linear(x, p["W_value.weight"]), 0.2, what="training-mode output")


def causal_weights(x, wq, wk):
    """Causal attention weights in float64, (B, T, T)."""
    q, k = F.linear(x, wq), F.linear(x, wk)
    T = x.shape[1]
    return torch.softmax((q @ k.transpose(1, 2) / q.shape[-1] ** 0.5).masked_fill(
        torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")), dim=-1)


@pytest.mark.points(1)
def test_training_mode_backward_goes_through_the_dropout(student, gen):
    """A forward and backward in training mode (dropout=0.2): an in-place dropout breaks it. The gradients must be
    those of float64 causal attention with the very weights your dropout kept."""
    h = student.causal_attention.CausalAttention(6, 12, 6, 0.2).to(dtype=torch.float64)
    x = torch.randn(8, 6, 6, generator=gen, dtype=torch.float64)
    g = torch.randn(8, 6, 12, generator=gen, dtype=torch.float64)
    p = {k: v.double() for k, v in h.named_parameters().items()}
    out, (grad_x,), param_grads = h.train().grads(x, grad_output=g)
    weights, values = causal_weights(x, p["W_query.weight"], p["W_key.weight"]), F.linear(x, p["W_value.weight"])
    expect_dropout_on_weights(out, weights, values, 0.2, what="training-mode output of a forward and backward")
    keep = output_multipliers(out, weights, values, 0.2)
    expect_new_draw(out, h(x), what="CausalAttention(6, 12, 6, dropout=0.2).train()(x)")
    leaves = [t.clone().requires_grad_(True) for t in (x, *(p[f"{n}.weight"] for n in PROJECTIONS))]
    ((causal_weights(*leaves[:3]) * keep @ F.linear(leaves[0], leaves[3])) * g).sum().backward()
    expect_tensor(grad_x, leaves[0].grad, what="training-mode gradient of the input x")
    for name, leaf in zip(PROJECTIONS, leaves[1:]):
        expect_tensor(param_grads.get(f"{name}.weight"), leaf.grad, what=f"training-mode gradient of {name}.weight")
