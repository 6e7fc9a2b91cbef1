"""A value test's weights in one round trip: ``Handle.transplant`` (grader/inside/structure.py) does what the
three calls it replaces did (``state_dict``, ``named_parameters``, ``load_state_dict``).

The oracle is those three calls made with nn.Module's own methods, as ``grader.testing.params.transplant``
made them through the proxy before: the same module state after, the same shapes before, on the references,
modules without a bias, a buffer named ``bias``, tied and shared submodules. Through a handle it is one
request; a student's overridden ``state_dict``/``load_state_dict`` is not asked (registries only); a reply
that is not names and shapes fails the test instead of being trusted.
"""

from __future__ import annotations

import copy
import importlib
from types import ModuleType

import pytest
import torch
from torch import nn

from grader.inside import structure
from grader.student.inprocess import InProcessBackend
from grader.student.proxy import StudentProxy
from grader.testing.params import _shapes, params_of, transplant


def _solution(name: str) -> ModuleType:
    # the references, imported as a package: they import each other relatively
    return importlib.import_module(f"solutions.{name}")


class _GptBlock(nn.Module):
    """GPT-2 keeps its causal mask as a buffer named ``bias``: it must never be zeroed."""

    def __init__(self) -> None:
        super().__init__()
        self.c_attn = nn.Linear(4, 12)
        self.register_buffer("bias", torch.tril(torch.ones(3, 3)))


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(3, 2)
        self.twin = self.inner  # the same module under two names: state_dict lists both
        self.head = nn.Linear(2, 2, bias=False)


def _pairs() -> list[tuple[nn.Module, nn.Module]]:
    """(reference, student module) pairs, the student's structure differing where a test meets it."""
    causal, cross = _solution("causal_attention"), _solution("cross_attention")
    decay, mha = _solution("decaying_attention"), _solution("multihead_attention")
    return [
        (causal.CausalAttention(4, 6, 7, 0.0, True), causal.CausalAttention(4, 6, 7, 0.0, True)),
        (causal.CausalAttention(4, 6, 7, 0.0, False), causal.CausalAttention(4, 6, 7, 0.0, True)),
        (causal.CausalAttention(4, 6, 7, 0.0, True), causal.CausalAttention(4, 6, 7, 0.0, False)),
        (cross.CrossAttention(8, 2, 0.0, True), cross.CrossAttention(8, 2, 0.0, False)),
        (decay.DecayingAttention(6, 3), decay.DecayingAttention(6, 3)),
        (mha.MultiHeadAttention(4, 8, 6, 0.0, 2), mha.MultiHeadAttention(4, 8, 6, 0.0, 2)),
        (nn.Linear(4, 12, bias=False), _GptBlock().c_attn),
        (_GptBlock(), _GptBlock()),
        (_Tied(), _Tied()),
    ]


def _three_calls(h: nn.Module, params: dict[str, torch.Tensor]) -> dict[str, tuple[int, ...]]:
    """What params.transplant did before, with nn.Module's own methods: the oracle."""
    own = h.state_dict()
    extra = {
        k: torch.zeros_like(v)
        for k, v in h.named_parameters()
        if k.endswith("bias") and k not in params
    }
    h.load_state_dict({**{k: v for k, v in params.items() if k in own}, **extra}, strict=False)
    return {k: tuple(v.shape) for k, v in own.items()}


@pytest.mark.parametrize("index", range(9))
def test_one_step_leaves_the_module_as_the_three_calls_did(index):
    ref, h = _pairs()[index]
    with torch.no_grad():
        for p in h.parameters():
            p.add_(torch.randn_like(p))  # a state of its own that the transplant must replace
    twin = copy.deepcopy(h)
    params = params_of(ref)
    expected_shapes = _three_calls(twin, params)
    assert _shapes(structure.transplant(h, params), "h") == expected_shapes
    got, expected = h.state_dict(), twin.state_dict()
    assert list(got) == list(expected)
    for name in expected:
        assert torch.equal(got[name], expected[name]), name
    if isinstance(h, _GptBlock):
        assert torch.equal(h.bias, torch.tril(torch.ones(3, 3)))  # the mask buffer kept its value


def test_a_shape_that_differs_loads_nothing_and_the_test_fails_naming_it():
    causal = _solution("causal_attention")
    h = causal.CausalAttention(4, 5, 7, 0.0, True)  # d_out 5: every projection has another shape
    before = {k: v.clone() for k, v in h.state_dict().items()}
    shapes = structure.transplant(h, params_of(causal.CausalAttention(4, 6, 7, 0.0, True)))
    assert shapes["W_query.weight"] == [5, 4]
    assert all(torch.equal(h.state_dict()[k], v) for k, v in before.items())
    with pytest.raises(pytest.fail.Exception, match=r"got shape \(5, 4\), expected \(6, 4\)"):
        transplant(h, causal.CausalAttention(4, 6, 7, 0.0, True), hint="h")


def test_a_handle_transplants_in_one_request_and_asks_nothing_of_the_students_methods(
    tmp_path, monkeypatch
):
    (tmp_path / "liar.py").write_text(
        "import torch\nfrom torch import nn\n"
        "class Liar(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.proj = nn.Linear(3, 2)\n"
        "    def state_dict(self, *a, **k):\n"
        "        return {'proj.weight': torch.zeros(9, 9)}\n"
        "    def load_state_dict(self, *a, **k):\n"
        "        raise AssertionError('asked')\n"
    )
    backend = InProcessBackend(tmp_path)
    calls: list[str] = []
    method = backend.method
    monkeypatch.setattr(
        backend, "method", lambda h, m, a, k: (calls.append(m), method(h, m, a, k))[1]
    )
    h = StudentProxy(backend).liar.Liar()
    ref = nn.Linear(3, 2)
    used = transplant(h, {"proj.weight": ref.weight, "proj.bias": ref.bias}, hint="h")
    assert calls == ["transplant"]
    assert torch.equal(used["proj.weight"], ref.weight.detach())
    x = torch.randn(4, 3)
    assert torch.equal(h.named_parameters()["proj.weight"], ref.weight.detach())
    assert torch.allclose(
        backend.executor.handles[1][0].proj(x), ref(x)
    )  # the module computes with the reference's weights


@pytest.mark.parametrize(
    "reply",
    [None, [], {"w": "3"}, {"w": [2, -1]}, {"w": [True, 2]}, {"w": (2, 3)}, {1: [2]}, {"w": [2.0]}],
)
def test_a_reply_that_is_not_names_and_shapes_fails_the_test(reply):
    with pytest.raises(pytest.fail.Exception, match="parameters could not be read"):
        _shapes(reply, "h")
    assert _shapes({"w": [2, 3], "b": []}, "h") == {"w": (2, 3), "b": ()}
