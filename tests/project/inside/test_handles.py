"""Module handles passed back to student code, and ``invoke`` on a student's own methods, in-process and
across the sandbox wire (the KV-cache exercises hand a model and a cache to a decoding function); and
``measure_grads``, the figures of a forward AND backward (a hand-written ``autograd.Function.backward``)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from grader.inside.executor import Executor
from grader.protocol import wire, wireparse
from grader.protocol.errors import StudentAPIError
from grader.sandbox import choice, isolation, remote
from grader.student.inprocess import InProcessBackend
from grader.student.proxy import StudentProxy

SOURCE = textwrap.dedent("""
    import torch
    from torch import nn

    class Scale(nn.Module):
        def __init__(self, factor):
            super().__init__()
            self.factor = factor
        def forward(self, x):
            return x * self.factor

    class Store(nn.Module):
        def __init__(self, size):
            super().__init__()
            self.register_buffer("seen", torch.zeros(size))
            self.used = 0
        def update(self, x):
            self.seen[self.used:self.used + len(x)] = x
            self.used += len(x)
            return self.seen[:self.used]
        def reset(self):
            self.used = 0

    def run(model, store, chunks):
        return [store.update(model(c)) for c in chunks][-1]

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            scratch = torch.ones(512, 512)  # 1 MiB made in the backward alone
            return g * scratch[0, 0] * 2

    def twice(x):
        return Twice.apply(x)
""")


@pytest.fixture(params=["inprocess", "sandbox"])
def student(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StudentProxy]:
    (tmp_path / "mod.py").write_text(SOURCE)
    if request.param == "inprocess":
        yield StudentProxy(InProcessBackend(tmp_path))
        return
    backend = remote.SandboxBackend(
        tmp_path,
        isolation.LaunchSpec(choice.available()[0]),
        bans={},
        time_limits={"ex": 30},
        budget_s=120,
    )
    backend.begin_test("t::test", "ex")
    try:
        yield StudentProxy(backend)
    finally:
        backend.close()


def test_a_handle_passed_as_an_argument_is_the_module_again(student):
    model, store = student.mod.Scale(2.0), student.mod.Store(6)
    got = student.mod.run(model, store, [torch.ones(2), torch.full((3,), 5.0)])
    torch.testing.assert_close(got, torch.tensor([2.0, 2.0, 10.0, 10.0, 10.0]))
    assert store.invoke("update", torch.tensor([7.0])).tolist() == [2.0, 2.0, 10.0, 10.0, 10.0, 7.0]
    store.invoke("reset")
    torch.testing.assert_close(
        store.invoke("update", torch.tensor([1.0, 3.0])), torch.tensor([1.0, 3.0])
    )
    assert student.mod.run(model, store, ([torch.ones(1)],)[0]).tolist() == [
        1.0,
        3.0,
        2.0,
    ]  # inside a list


def test_invoke_reaches_only_public_methods_the_class_defines(student):
    store = student.mod.Store(2)
    for name in ("register_buffer", "_apply", "__init__", "apply", "not a name"):
        with pytest.raises(StudentAPIError):
            store.invoke(name)
    with pytest.raises(StudentAPIError, match="defines no method"):
        store.invoke("missing")


def test_a_released_handle_cannot_be_passed(student):
    model, store = student.mod.Scale(2.0), student.mod.Store(2)
    student.release_all()
    with pytest.raises(StudentAPIError, match="no module handle"):
        student.mod.run(model, store, [torch.ones(1)])


def test_on_meta_takes_handles_as_meta_copies_and_leaves_the_modules_as_they_were(student):
    model, store = student.mod.Scale(2.0), student.mod.Store(6)
    student.mod.run(model, store, [torch.ones(2)])
    described = student.mod.run.on_meta(model, store, [torch.ones(3)])
    assert described == {
        "device": "meta",
        "shape": (5,),
        "dtype": "torch.float32",
    }  # the copy held 2, took 3
    assert store.invoke("update", torch.tensor([4.0])).tolist() == [
        2.0,
        2.0,
        4.0,
    ]  # the handle's own: 2 then 1
    assert store.named_buffers()["seen"].device.type == "cpu"


def test_measure_grads_sees_the_tensors_a_backward_makes(student):
    x, g = torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    (out, (gx,)), stats = student.mod.twice.measure_grads(x, grad_output=g)
    torch.testing.assert_close(out, 2 * x)
    torch.testing.assert_close(gx, 2 * g)
    assert stats["max_tensor_bytes"] >= 512 * 512 * 4
    _, forward_only = student.mod.twice.measure(x)
    assert forward_only["max_tensor_bytes"] < 1024


def test_a_worker_results_are_not_copied_before_the_wire_and_in_process_ones_are(tmp_path):
    """``Executor(copies=False)`` (a worker's: the wire copies each result once) hands back the
    module's own tensors, detached and of exactly ``torch.Tensor``; the in-process executor hands
    back copies the test may keep; both carry the same values through the wire."""
    (tmp_path / "mods.py").write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.w = torch.nn.Parameter(torch.arange(6.0).reshape(2, 3))\n"
    )
    for copies in (True, False):
        ex = Executor(tmp_path, copies=copies)
        ref = ex.call("mods", "M", (), {})
        module = ex.handles[ref.id][0]
        state = ex.method(ref.id, "state_dict", (), {})
        got = state["w"]
        assert type(got) is torch.Tensor and not got.requires_grad
        assert (got.data_ptr() == module.w.data_ptr()) is (not copies)
        assert torch.equal(wireparse.decode(bytes(wire.encode(state)))["w"], module.w.detach())
