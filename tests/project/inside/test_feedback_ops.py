"""Round two of the hidden suites: explicit hints under student exceptions, mismatch previews, and the ``grads`` and
``on_meta`` operations (in-process and through the sandbox's wire)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from grader.inside.executor import Executor
from grader.protocol.errors import StudentAPIError, StudentError
from grader.sandbox import choice, isolation, remote
from grader.student.inprocess import InProcessBackend
from grader.student.proxy import StudentProxy
from grader.testing.checks import hinted
from grader.testing.devices import expect_built_on_meta
from grader.testing.mismatch import mismatch_preview

FUNCS = """
import torch

def soft(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)

def soft_in_place(x):
    e = torch.exp(x)
    e /= e.sum(-1, keepdim=True)
    return e

def pair(a, b):
    return a * b, a + b

def on_cpu(x):
    return x + torch.arange(x.shape[-1])

def follows(x):
    return x + torch.arange(x.shape[-1], device=x.device)

def reads(x, n):
    return x[:, : int(n)]  # a value read on meta: answered from the values kept beside

def ignores_device(n, device=None):
    return torch.ones(n, n)

class Built(torch.nn.Module):
    def __init__(self, n, device=None):
        super().__init__()
        self.register_buffer("buf", torch.zeros(n, device=device))
        self.w = torch.nn.Parameter(torch.ones(2, n, device=device))

class Careless(torch.nn.Module):
    def __init__(self, n, device=None):
        super().__init__()
        self.register_buffer("buf", torch.zeros(n))

class Plain:
    pass
"""


def _submission(tmp_path: Path) -> Path:
    (tmp_path / "mod.py").write_text(FUNCS)
    return tmp_path


def test_hinted_puts_the_hint_on_a_student_error():
    with pytest.raises(StudentError) as caught, hinted("try this"):
        raise StudentError("boom", exc_type="RuntimeError")
    assert caught.value.hint == "try this"


def test_frozen_importlib_frames_never_count_as_the_students(tmp_path, monkeypatch):
    (tmp_path / "bad.py").write_text("import torch\nraise ValueError('at import')\n")
    monkeypatch.chdir(
        tmp_path
    )  # "<frozen importlib._bootstrap>" resolved against this cwd lies inside the root
    with pytest.raises(StudentError) as caught:
        Executor(tmp_path).call("bad", "anything", (), {})
    assert caught.value.frames and all("frozen" not in f for f in caught.value.frames), (
        caught.value.frames
    )
    assert "in your code:\n    bad.py, line 2" in caught.value.feedback()


def test_the_preview_shows_the_first_mismatch_with_enough_digits():
    expected = torch.zeros(3, 20, dtype=torch.float64)
    got = expected.clone()
    got[2, 13] = 1e-9
    text = mismatch_preview(got, expected, atol=1e-12, rtol=0)
    assert "first mismatch at index (2, 13): got 1e-09, expected 0" in text
    assert "<1e-09>" in text and "<0>" in text
    near = mismatch_preview(torch.tensor([0.123456789]), torch.tensor([0.123456]), atol=0, rtol=0)
    assert (
        "got 0.123457, expected 0.123456" in near
    )  # four digits would print the same number twice


def test_a_boolean_mask_mismatch_prints_as_a_grid():
    expected = torch.ones(4, 4, dtype=torch.bool).tril()
    got = expected.clone()
    got[1, 3] = True
    lines = mismatch_preview(got, expected, atol=0, rtol=0).splitlines()
    assert "first mismatch at index (1, 3): got True, expected False" in lines[0]
    assert "1101 | 1100   <- first mismatch" in lines[3]


def test_grads_of_a_function_match_autograd(tmp_path):
    student = StudentProxy(InProcessBackend(_submission(tmp_path)))
    x, g = torch.randn(3, 5, dtype=torch.float64), torch.randn(3, 5, dtype=torch.float64)
    out, (gx,) = student.mod.soft.grads(x, grad_output=g, dim=0)
    leaf = x.clone().requires_grad_(True)
    (torch.softmax(leaf, dim=0) * g).sum().backward()
    torch.testing.assert_close(out, torch.softmax(x, dim=0))
    torch.testing.assert_close(gx, leaf.grad)
    (_prod, _total), (ga, gb) = student.mod.pair.grads(x, 2 * x, grad_output=(g, None))
    torch.testing.assert_close(ga, 2 * x * g)  # only the first output's gradient flows
    torch.testing.assert_close(gb, x * g)


def test_a_backward_broken_by_an_in_place_op_is_the_students_error(tmp_path):
    student = StudentProxy(InProcessBackend(_submission(tmp_path)))
    x = torch.randn(2, 4, dtype=torch.float64)
    with pytest.raises(StudentError, match="modified by an inplace operation"):
        student.mod.soft_in_place.grads(x, grad_output=torch.ones_like(x))


def test_on_meta_reports_where_results_are_and_raises_for_cpu_tensors(tmp_path):
    student = StudentProxy(InProcessBackend(_submission(tmp_path)))
    x = torch.randn(2, 3)
    assert student.mod.follows.on_meta(x) == {
        "device": "meta",
        "shape": (2, 3),
        "dtype": "torch.float32",
    }
    assert student.mod.ignores_device.on_meta(3, device="meta")["device"] == "cpu"
    with pytest.raises(StudentError, match="device"):
        student.mod.on_cpu.on_meta(x)


def test_a_module_on_meta_keeps_its_own_weights(tmp_path):
    (tmp_path / "m.py").write_text(
        textwrap.dedent("""
        import torch
        from torch import nn

        class Lin(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(3, 2)
                self.plain = torch.ones(2)  # not a buffer: stays on the CPU when the module moves

            def forward(self, x, use_plain=False):
                return self.lin(x) + (self.plain if use_plain else 0)
        """)
    )
    student = StudentProxy(InProcessBackend(tmp_path))
    h = student.m.Lin()
    x = torch.randn(4, 3)
    before = h(x)
    assert h.on_meta(x) == {"device": "meta", "shape": (4, 2), "dtype": "torch.float32"}
    torch.testing.assert_close(h(x), before)
    with pytest.raises(StudentError, match="device"):
        h.on_meta(x, use_plain=True)


def test_grads_and_on_meta_cross_the_sandbox_wire(tmp_path):
    backend = remote.SandboxBackend(
        _submission(tmp_path),
        isolation.LaunchSpec(choice.available()[0]),
        bans={},
        time_limits={"ex": 30},
        budget_s=120,
    )
    backend.begin_test("t::test", "ex")
    try:
        student = StudentProxy(backend)
        x, g = torch.randn(3, 5, dtype=torch.float64), torch.randn(3, 5, dtype=torch.float64)
        _out, (gx,) = student.mod.soft.grads(x, grad_output=g)
        leaf = x.clone().requires_grad_(True)
        (torch.softmax(leaf, dim=-1) * g).sum().backward()
        torch.testing.assert_close(gx, leaf.grad)
        assert student.mod.follows.on_meta(x)["device"] == "meta"
        assert student.mod.reads.on_meta(x, torch.tensor(2))["shape"] == (3, 2)
        assert student.mod.Built.on_meta(3, device="meta")["buffers"]["buf"]["device"] == "meta"
        assert student.mod.Careless.on_meta(3, device="meta")["buffers"]["buf"]["device"] == "cpu"
        with pytest.raises(StudentError, match="modified by an inplace operation"):
            student.mod.soft_in_place.grads(x, grad_output=g)
    finally:
        backend.close()


def test_a_class_on_meta_describes_where_its_constructor_put_its_tensors(tmp_path):
    student = StudentProxy(InProcessBackend(_submission(tmp_path)))
    meta = {"device": "meta", "dtype": "torch.float32"}
    assert student.mod.Built.on_meta(3, device="meta") == {
        "parameters": {"w": {**meta, "shape": (2, 3)}},
        "buffers": {"buf": {**meta, "shape": (3,)}},
    }
    careless = student.mod.Careless.on_meta(3, device="meta")
    assert careless["buffers"]["buf"]["device"] == "cpu"
    with pytest.raises(StudentAPIError, match="is not a function"):
        student.mod.Plain.on_meta()


def test_expect_built_on_meta_names_the_ignored_device_and_checks_the_buffers(tmp_path):
    student = StudentProxy(InProcessBackend(_submission(tmp_path)))
    want = {"buf": ((3,), "torch.float32")}
    expect_built_on_meta(student.mod.Built.on_meta(3, device="meta"), what="Built", buffers=want)
    with pytest.raises(
        pytest.fail.Exception, match=r"'buf' is on cpu(.|\n)*diagnosis \[device-ignored\]"
    ):
        expect_built_on_meta(student.mod.Careless.on_meta(3, device="meta"), what="C", buffers=want)
    with pytest.raises(
        pytest.fail.Exception, match=r"buffer 'buf' is \(4,\) torch.float32, expected \(3,\)"
    ):
        expect_built_on_meta(student.mod.Built.on_meta(4, device="meta"), what="B", buffers=want)
    with pytest.raises(pytest.fail.Exception, match="no registered buffer 'cache'"):
        expect_built_on_meta(
            student.mod.Built.on_meta(3, device="meta"), what="B", buffers={"cache": want["buf"]}
        )
