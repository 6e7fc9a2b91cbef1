"""The `student` door: only its small API reaches student code, in-process and sandboxed alike."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from grader.student import (BannedAPIError, StudentAPIError, StudentError, StudentNotFound,
                            StudentNotImplemented, StudentProxy)
from grader.student.inprocess import InProcessBackend

MODULE = '''
import torch
from torch import nn


def double(x):
    return x * 2


def returns_lambda():
    return lambda: 1


def boom():
    raise ValueError("student says no")


def todo():
    raise NotImplementedError("TODO: implement todo in mod.py")


def uses_sdpa(q):
    return torch.nn.functional.scaled_dot_product_attention(q, q, q)


class Liar(torch.Tensor):
    def __eq__(self, other):
        return True


def liar(x):
    return torch.zeros_like(x).as_subclass(Liar)


class Lin(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.W = nn.Linear(d, d)
        self.register_buffer("mask", torch.ones(d, dtype=torch.bool))

    def forward(self, x):
        return self.W(x)
'''


@pytest.fixture
def student(tmp_path: Path) -> StudentProxy:
    (tmp_path / "mod.py").write_text(textwrap.dedent(MODULE))
    bans = {"mod": ("torch.nn.functional.scaled_dot_product_attention",)}
    return StudentProxy(InProcessBackend(tmp_path, bans=bans))


def test_functions_return_plain_copies(student):
    x = torch.ones(3)
    y = student.mod.double(x)
    assert type(y) is torch.Tensor
    torch.testing.assert_close(y, torch.full((3,), 2.0))


def test_a_tensor_subclass_is_converted_to_a_plain_tensor(student):
    y = student.mod.liar(torch.ones(2))
    assert type(y) is torch.Tensor and not bool((y == torch.ones(2)).all())


def test_module_handle_api(student):
    h = student.mod.Lin(4)
    params = h.named_parameters()
    assert set(params) == {"W.weight", "W.bias"} and set(h.named_buffers()) == {"mask"}
    assert "mask" in h.state_dict()
    x = torch.randn(2, 4)
    torch.testing.assert_close(h(x), x @ params["W.weight"].T + params["W.bias"])
    zero = {k: torch.zeros_like(v) for k, v in params.items()}
    assert h.load_state_dict(zero, strict=False) == {"missing_keys": ["mask"], "unexpected_keys": []}
    torch.testing.assert_close(h(x), torch.zeros(2, 4))
    out, input_grads, param_grads = h.eval().to(dtype=torch.float64).grads(
        x.double(), grad_output=torch.ones(2, 4, dtype=torch.float64))
    assert out.dtype == torch.float64
    torch.testing.assert_close(param_grads["W.bias"], torch.full((4,), 2.0, dtype=torch.float64))
    assert input_grads[0].shape == (2, 4)


def test_any_other_access_is_refused(student):
    h = student.mod.Lin(2)
    with pytest.raises(StudentAPIError):
        h.W  # attribute poking
    with pytest.raises(StudentAPIError):
        h.W.weight.data
    with pytest.raises(StudentAPIError):
        student.mod.double(lambda: 1)  # a callable may not cross
    with pytest.raises(StudentAPIError):
        student.mod._private
    with pytest.raises(StudentAPIError):
        student._backend_swap = None
    with pytest.raises(StudentError, match="returns_lambda returned: got a value of type function"):
        student.mod.returns_lambda()


def test_student_errors_carry_type_message_and_only_student_frames(student):
    with pytest.raises(StudentError) as info:
        student.mod.boom()
    err = info.value
    assert err.exc_type == "ValueError" and "student says no" in err.message
    assert err.frames and all(f.startswith("mod.py") for f in err.frames)
    assert "grader" not in err.feedback()


def test_not_found_and_not_implemented_are_clear(student):
    with pytest.raises(StudentNotFound, match="nothere.py not found"):
        student.nothere.f()
    with pytest.raises(StudentNotFound, match="`missing` not found in mod.py"):
        student.mod.missing()
    with pytest.raises(StudentNotImplemented, match="not implemented yet"):
        student.mod.todo()


def test_banned_api_raises_only_inside_student_code(student):
    q = torch.randn(1, 2, 4)
    with pytest.raises(BannedAPIError, match="not allowed"):
        student.mod.uses_sdpa(q)
    torch.nn.functional.scaled_dot_product_attention(q, q, q)  # the trusted side is unaffected


def test_arguments_are_copied_so_student_code_cannot_mutate_them(tmp_path):
    (tmp_path / "m.py").write_text("def mutate(x):\n    x.add_(100)\n    return x\n")
    student = StudentProxy(InProcessBackend(tmp_path))
    x = torch.zeros(2)
    student.m.mutate(x)
    assert bool((x == 0).all())
