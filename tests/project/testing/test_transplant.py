"""grader/testing/params.py: value tests transplant the reference's weights and follow the student's structure."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from grader.testing.params import compared_grads, transplant


class Ref(nn.Module):
    def __init__(self, bias: bool = True) -> None:
        super().__init__()
        self.proj = nn.Linear(3, 2, bias=bias)
        self.gamma = nn.Parameter(torch.full((2, 1), 0.5))


class NoBias(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(3, 2, bias=False)
        self.gamma = nn.Parameter(torch.ones(2, 1))


def test_the_weights_are_copied_and_a_missing_bias_counts_as_zero_in_the_oracle():
    ref, h = Ref(), NoBias()
    used = transplant(h, ref, hint="h")
    assert torch.equal(h.proj.weight, ref.proj.weight) and torch.equal(h.gamma, ref.gamma)
    assert torch.equal(used["proj.bias"], torch.zeros(2)) and torch.equal(
        ref.proj.bias, torch.zeros(2)
    )
    x = torch.randn(4, 3)
    assert torch.allclose(
        h.proj(x), ref.proj(x)
    )  # the oracle now computes what the student's structure can


def test_a_bias_the_reference_lacks_is_zeroed_in_the_student_module():
    ref, h = Ref(bias=False), Ref(bias=True)
    transplant(h, ref, hint="h")
    assert torch.equal(h.proj.bias, torch.zeros(2))


def test_a_parameter_with_a_default_keeps_it_when_the_module_cannot_take_ours():
    class PlainGamma(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(3, 2)
            self.gamma = torch.ones(2, 1)  # not a parameter, not in the state dict

    ref = Ref()
    used = transplant(PlainGamma(), ref, hint="h", defaults={"gamma": torch.ones(1)})
    assert torch.equal(used["gamma"], torch.ones(2, 1)) and torch.equal(
        ref.gamma.detach(), torch.ones(2, 1)
    )


def test_a_missing_weight_or_a_wrong_shape_fails_naming_it():
    class Renamed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.projection = nn.Linear(3, 2)
            self.gamma = nn.Parameter(torch.ones(2, 1))

    with pytest.raises(pytest.fail.Exception, match=r"proj\.weight"):
        transplant(Renamed(), Ref(), hint="name it proj")
    wrong = Ref()
    wrong.gamma = nn.Parameter(torch.ones(3, 1))
    with pytest.raises(
        pytest.fail.Exception, match=r"gamma: got shape \(3, 1\), expected \(2, 1\)"
    ):
        transplant(wrong, Ref(), hint="h")


def test_compared_grads_leaves_out_only_a_bias_the_student_lacks():
    ref = Ref()
    (ref.proj(torch.randn(4, 3)).sum() * ref.gamma.sum()).backward()
    names = [name for name, _, _ in compared_grads(ref, {"proj.weight": torch.zeros(2, 3)})]
    assert sorted(names) == [
        "gamma",
        "proj.weight",
    ]  # gamma is compared (and will fail as missing); the bias is not


def test_a_buffer_named_bias_is_left_alone():
    """GPT-2 keeps its causal mask in a buffer named `bias`: zeroing it would break the student's causality."""

    class MaskedAsBias(Ref):
        def __init__(self) -> None:
            super().__init__(bias=False)
            self.register_buffer("bias", torch.ones(2, 2).tril())

    h = MaskedAsBias()
    transplant(h, Ref(bias=False), hint="h")
    assert torch.equal(h.bias, torch.ones(2, 2).tril())
