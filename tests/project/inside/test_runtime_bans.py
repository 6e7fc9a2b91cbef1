"""The worker's runtime ban (grader/inside/bans.py): stubs for the direct names, and a torch function mode that refuses
the banned operators by whatever route they are reached (aliases in torch._C and torch.ops, getattr built at run
time, originals captured before the window opened). Only inside the window, and only the window's own bans.
"""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F

from grader.course import manifest
from grader.inside import bans
from grader.protocol.errors import BannedAPIError

pytestmark = pytest.mark.cost(2)  # seconds on 2 cores: started early (tests/project/conftest.py)

SOFTMAX = manifest.load().exercise("softmax").banned
SDPA = ("torch.nn.functional.scaled_dot_product_attention",)
Q4, Q3 = torch.randn(1, 2, 5, 8), torch.randn(2, 5, 8)
CAPTURED_SDPA, CAPTURED_SOFTMAX, CAPTURED_F_SOFTMAX = (
    F.scaled_dot_product_attention,
    torch.softmax,
    F.softmax,
)

SDPA_ROUTES = {
    "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(Q4, Q4, Q4),
    "3-d inputs (math backend)": lambda: F.scaled_dot_product_attention(Q3, Q3, Q3, dropout_p=0.0),
    "captured before the window": lambda: CAPTURED_SDPA(Q4, Q4, Q4),
    "torch._C._nn": lambda: torch._C._nn.scaled_dot_product_attention(Q4, Q4, Q4),
    "torch.ops.aten overload": lambda: torch.ops.aten.scaled_dot_product_attention.default(
        Q4, Q4, Q4
    ),
    "torch.ops.aten packet": lambda: torch.ops.aten.scaled_dot_product_attention(Q4, Q4, Q4),
    "the CPU flash kernel": lambda: (
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(Q4, Q4, Q4)
    ),
    "reduce(getattr)": lambda: functools.reduce(
        getattr, ["_C", "_nn", "scaled_dot_product_attention"], torch
    )(Q4, Q4, Q4),
    "getattr of a built name": lambda: getattr(
        F, "_".join(["scaled", "dot", "product", "attention"])
    )(Q4, Q4, Q4),
}
SOFTMAX_ROUTES = {
    "torch.softmax": lambda: torch.softmax(Q3, -1),
    "captured torch.softmax": lambda: CAPTURED_SOFTMAX(Q3, -1),
    "captured F.softmax": lambda: CAPTURED_F_SOFTMAX(Q3, -1),
    "torch._C._VariableFunctions": lambda: torch._C._VariableFunctions.softmax(Q3, -1),
    "TensorBase method": lambda: torch._C.TensorBase.softmax(Q3, -1),
    "type(x).softmax": lambda: type(Q3).softmax(Q3, -1),
    "torch._softmax": lambda: torch._softmax(Q3, -1, False),
    "torch.ops.aten._softmax": lambda: torch.ops.aten._softmax(Q3, -1, False),
    "nn.Softmax from its own module": lambda: torch.nn.modules.activation.Softmax(-1)(Q3),
    "log_softmax(...).exp()": lambda: torch._C._VariableFunctions.log_softmax(Q3, -1).exp(),
}


@pytest.mark.parametrize("route", sorted(SDPA_ROUTES))
def test_every_route_to_sdpa_is_refused_inside_the_window_and_works_outside(route):
    run = SDPA_ROUTES[route]
    with (
        bans.banned(SDPA),
        pytest.raises(BannedAPIError, match="scaled_dot_product_attention is not allowed"),
    ):
        run()
    assert run() is not None  # outside the window it runs (the flash kernel returns a tuple)


@pytest.mark.parametrize("route", sorted(SOFTMAX_ROUTES))
def test_every_route_to_softmax_is_refused_inside_the_softmax_window_only(route):
    run = SOFTMAX_ROUTES[route]
    with (
        bans.banned(SOFTMAX),
        pytest.raises(BannedAPIError, match="is not allowed in this exercise"),
    ):
        run()
    with bans.banned(SDPA):  # another exercise's window: softmax is allowed there
        assert isinstance(run(), torch.Tensor)


def test_honest_arithmetic_runs_unrefused_inside_every_window():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    with bans.banned(
        (
            *SOFTMAX,
            *SDPA,
            "torch.nn.MultiheadAttention",
            "torch.nn.functional.multi_head_attention_forward",
        )
    ):
        e = torch.exp(x - x.amax(-1, keepdim=True))
        (e / e.sum(-1, keepdim=True)).sum().backward()
        torch.logsumexp(x.detach(), -1)
        torch.nn.functional.dropout(x.detach(), 0.1)
    assert x.grad is not None


def test_nested_windows_refuse_the_union_and_unwind_cleanly():
    with bans.banned(SDPA):
        with bans.banned(SOFTMAX):
            for run in (SOFTMAX_ROUTES["torch.softmax"], SDPA_ROUTES["torch._C._nn"]):
                with pytest.raises(BannedAPIError):
                    run()
        with pytest.raises(BannedAPIError):
            SDPA_ROUTES["torch._C._nn"]()
        assert isinstance(SOFTMAX_ROUTES["torch.softmax"](), torch.Tensor)
    assert torch._C._len_torch_function_stack() == 0 and not bans._ACTIVE  # type: ignore[attr-defined]
