"""Public tests for `multihead_attention`: the wrapper's worked example, shapes and gradients; the fused module's
parameters and buffer, agreement with nn.MultiheadAttention, causality, dropout, and the d_out % num_heads check."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from grader.protocol.errors import StudentError
from grader.testing.attention import expect_params, mha_oracle
from grader.testing.catalogue.modules import mha_suspects, wrapper_suspects
from grader.testing.catalogue.structure import expect_structure
from grader.testing.checks import expect, expect_call, expect_shape, expect_tensor, fail
from grader.testing.diagnosis import tag
from grader.testing.gradients import GRADIENT_SUSPECTS, no_gradient
from grader.testing.oracles import expect_dropout_on_weights, expect_repeatable
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


def wrapper_heads(x: torch.Tensor, p: dict[str, torch.Tensor], H: int) -> list[torch.Tensor]:
    """Each head's causal attention (nn.MultiheadAttention with one head and identity in/out maps)."""
    outs = []
    for i in range(H):
        q, k, v = (x @ p[f"heads.{i}.{n}.weight"].T for n in PROJECTIONS)
        mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        w = torch.softmax((q @ k.transpose(1, 2) / q.shape[-1] ** 0.5).masked_fill(mask, float("-inf")), dim=-1)
        outs.append(w @ v)
    return outs


@pytest.mark.points(1)
def test_wrapper_concatenates_the_heads(student, gen):
    h = student.multihead_attention.MultiHeadAttentionWrapper(3, 2, 8, 0.0, num_heads=3)
    h.eval()
    x = torch.randn(2, 5, 3, generator=gen)
    p = h.named_parameters()
    on = wrapper_suspects(lambda: wrapper_heads(x, p, 3), 2, 3)
    what = "MultiHeadAttentionWrapper(d_in=3, d_out=2, num_heads=3)(x of shape (2, 5, 3))"
    got = expect_call(lambda: h(x), torch.zeros(2, 5, 6), what=what, suspects=on, check_values=False)
    expect_tensor(got, torch.cat(wrapper_heads(x, p, 3), dim=-1), what=what, suspects=on)


@pytest.mark.points(2)
def test_wrapper_gives_the_books_context_vectors(student):
    with torch.random.fork_rng():  # the book builds the heads one after the other after torch.manual_seed(123)
        torch.manual_seed(123)
        params = {f"heads.{i}.{n}.weight": nn.Linear(3, 2, bias=False).weight.detach().clone()
                  for i in range(3) for n in PROJECTIONS}
    h = student.multihead_attention.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=3)
    h.eval()
    transplant(h, params, hint="keep the heads in self.heads = nn.ModuleList([CausalAttention(...) for _ in range(H)])")
    batch = torch.stack((INPUTS, INPUTS))
    expect_call(lambda: h(batch), torch.stack((WRAPPER_OUT, WRAPPER_OUT)), what="mha(batch) with the book's weights",
                atol=1e-4, rtol=0, suspects=wrapper_suspects(lambda: wrapper_heads(batch, params, 3), 2, 3))


@pytest.mark.points(1)
def test_wrapper_gradients_reach_the_input(student):
    h = student.multihead_attention.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)
    h.eval()
    h.to(dtype=torch.float64)
    x = torch.stack((INPUTS, INPUTS.flip(0))).double()
    g = torch.linspace(-1.0, 1.0, 24, dtype=torch.float64).reshape(2, 6, 2)
    out, (gx,), _ = h.grads(x, grad_output=g.repeat(1, 1, 2))
    p = h.named_parameters()
    leaf = x.clone().requires_grad_(True)
    want = torch.cat(wrapper_heads(leaf, p, 2), dim=-1)
    (want * g.repeat(1, 1, 2)).sum().backward()
    expect_tensor(out, want.detach(), what="float64 wrapper output")
    if gx is None:
        no_gradient("backward", "the input x")
    expect_tensor(gx, leaf.grad, what="gradient of the input x", suspects=GRADIENT_SUSPECTS)


@pytest.mark.points(1.5)
def test_fused_parameters_and_mask_buffer(student):
    for bias in (False, True):
        h = student.multihead_attention.MultiHeadAttention(6, 8, 8, 0.0, num_heads=2, qkv_bias=bias)
        got = {k: tuple(v.shape) for k, v in h.named_parameters().items()}
        want = {f"{n}.{kind}": shape for n in PROJECTIONS for kind, shape in (("weight", (8, 6)), ("bias", (8,)))[
            : 1 + bias]}
        want.update({"out_proj.weight": (8, 8), "out_proj.bias": (8,)})
        expect_structure(got, want, what=f"named_parameters() of MultiHeadAttention(6, 8, 8, 0.0, 2, qkv_bias={bias})")
    expect("mask" in h.named_buffers(), f"named_buffers(): got {sorted(h.named_buffers())}, expected a 'mask' entry\n  "
           + tag("not-a-buffer", "the mask is not a registered buffer: a plain attribute is missing from state_dict() "
                 "and stays behind when .to() moves the module"))


@pytest.mark.points(3.5)
def test_fused_matches_nn_multiheadattention_with_its_own_weights(student, gen):
    h = student.multihead_attention.MultiHeadAttention(8, 8, 7, 0.0, num_heads=2, qkv_bias=True)
    h.eval()
    x = torch.randn(2, 5, 8, generator=gen)  # T = 5 < context_length = 7
    p = expect_params(h.named_parameters(), MHA_NAMES, MHA_HINT)
    expect_call(lambda: h(x), mha_oracle(p, 2, x, causal=True), suspects=mha_suspects(x, p, 2, context_length=7),
                what="output vs nn.MultiheadAttention with the same weights and a causal mask")
    big = x * 30  # scores of several hundred: exp overflows unless the row max is subtracted
    expect_call(lambda: h(big), mha_oracle(p, 2, big, causal=True), atol=1e-4, rtol=1e-3,
                what="output for inputs x * 30", suspects=mha_suspects(big, p, 2))


@pytest.mark.points(1.5)
def test_fused_future_tokens_do_not_change_earlier_outputs(student, gen):
    h = student.multihead_attention.MultiHeadAttention(4, 8, 6, 0.0, num_heads=4)
    h.eval()
    x = torch.randn(2, 6, 4, generator=gen)
    changed = x.clone()
    changed[:, 2:] += 10.0
    before, after = h(x), h(changed)
    expect_shape(before, (2, 6, 8), what="output")
    expect_tensor(after[:, :2], before[:, :2], what="outputs of tokens 0..1 after changing tokens 2..5")


@pytest.mark.points(2)
def test_fused_dropout_is_off_in_eval_and_on_in_training(student, gen):
    h = student.multihead_attention.MultiHeadAttention(8, 8, 6, 0.5, num_heads=2)
    h.eval()
    x = torch.randn(2, 6, 8, generator=gen)
    first = h(x)
    expect_repeatable(first, h(x), what="two eval-mode calls (dropout=0.5)")
    p = expect_params(h.named_parameters(), MHA_NAMES, MHA_HINT)
    expect_tensor(first, mha_oracle(p, 2, x, causal=True), what="eval-mode output with dropout=0.5",
                  suspects=mha_suspects(x, p, 2))
    h.train()
    expect(not torch.equal(h(x), h(x)), "two training-mode calls with dropout=0.5 gave identical outputs")
    # W_value and out_proj the identity: the output is each head's dropout(weights) @ x's slice, recoverable
    d, H, T, p_drop = 16, 2, 4, 0.3
    h = student.multihead_attention.MultiHeadAttention(d, d, T, p_drop, num_heads=H)
    w = {"W_query.weight": torch.randn(d, d, generator=gen) / 4, "W_key.weight": torch.randn(d, d, generator=gen) / 4,
         "W_value.weight": torch.eye(d), "out_proj.weight": torch.eye(d), "out_proj.bias": torch.zeros(d)}
    transplant(h, w, hint=MHA_HINT)
    h.train()
    x = torch.randn(32, T, d, generator=gen, dtype=torch.float64)
    h.to(dtype=torch.float64)
    heads = h(x).view(32, T, H, d // H).transpose(1, 2)
    q, k = ((x @ w[f"{n}.weight"].double().T).view(32, T, H, d // H).transpose(1, 2) for n in ("W_query", "W_key"))
    scores = (q @ k.transpose(-2, -1) / (d // H) ** 0.5).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1),
                                                                      float("-inf"))
    expect_dropout_on_weights(heads, torch.softmax(scores, dim=-1), x.view(32, T, H, d // H).transpose(1, 2), p_drop,
                              what="training-mode output (W_value and out_proj the identity), per head")


@pytest.mark.points(1.5)
def test_fused_rejects_d_out_not_divisible_by_num_heads(student, gen):
    ok = student.multihead_attention.MultiHeadAttention(4, 8, 5, 0.0, num_heads=4)
    ok.eval()
    expect_shape(ok(torch.randn(1, 3, 4, generator=gen)), (1, 3, 8), what="MultiHeadAttention(4, 8, ..., num_heads=4)")
    try:
        student.multihead_attention.MultiHeadAttention(4, 6, 5, 0.0, num_heads=4)
    except StudentError as exc:
        expect(exc.kind != "not_implemented", f"got {exc.message}, expected an error about d_out % num_heads")
    else:
        fail("MultiHeadAttention(d_in=4, d_out=6, num_heads=4) was built without an error, expected one\n  " + tag(
            "error-unchecked", "an invalid configuration is accepted: 6 features cannot be split into 4 equal heads; "
            "check d_out % num_heads == 0 in __init__ and raise"))
