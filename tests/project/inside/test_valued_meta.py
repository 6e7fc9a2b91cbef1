"""``on_meta`` with values (:mod:`grader.inside.valued_meta`): honest code that reads its tensors
(bounds checks, ``.tolist()``, ``nonzero``) passes a device test, while every placement verdict
stays the meta device's own."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from grader.protocol.errors import StudentError
from grader.student.inprocess import InProcessBackend
from grader.student.proxy import StudentProxy

CODE = """
import torch
from torch import nn

def checked(x, positions, max_len=16):
    # an honest bounds check: reads two values
    if int(positions.min()) < 0 or int(positions.max()) >= max_len:
        raise ValueError("position out of range")
    if not bool((positions >= 0).all()):
        raise ValueError("negative position")
    return x[..., positions, :] * 2

def listed(x, positions):
    assert positions.tolist() == sorted(positions.tolist()), "positions must ascend"
    return x + 1

def picked(x, keep):
    return x[..., torch.nonzero(keep).squeeze(-1)]

def shaped_by_a_value(x, n):
    return x[:, : int(n)]

def counted_once(x):
    t = torch.zeros(())
    t.add_(1)  # CPU work that touches no meta tensor: must run once
    y = x.clone()
    y.add_(1)  # in place on a meta tensor: its values follow
    assert int(t) == 1, int(t)
    assert abs(float(y.sum()) - float(x.sum()) - y.numel()) < 1e-3
    return y

def draws(x):
    return x * torch.rand(x.shape, device=x.device)

def reads_then_ignores_device(x, positions):
    n = int(positions.max()) + 1
    return x[..., :n, :] + torch.arange(x.shape[-1])

def moved_to_cpu(x):
    return x.cpu() * 2

def read_back_to_cpu(x):
    return torch.tensor(x.sum().item())

class Cache(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("length", torch.tensor(3))
        self.register_buffer("keys", torch.randn(2, 8, 4))

    def forward(self, x):
        n = int(self.length)
        if n + x.shape[1] > self.keys.shape[1]:
            raise ValueError("cache full")
        return torch.cat([self.keys[:, :n], x], dim=1)
"""


def _student(tmp_path: Path) -> StudentProxy:
    (tmp_path / "m.py").write_text(textwrap.dedent(CODE))
    return StudentProxy(InProcessBackend(tmp_path))


def _on_meta(shape: tuple[int, ...], dtype: str = "torch.float32") -> dict[str, object]:
    return {"device": "meta", "shape": shape, "dtype": dtype}


def test_honest_code_that_reads_its_tensors_runs_on_meta(tmp_path):
    student = _student(tmp_path)
    x, positions = torch.randn(2, 3, 9, 4), torch.arange(3, 8)
    assert student.m.checked.on_meta(x, positions) == _on_meta((2, 3, 5, 4))
    assert student.m.listed.on_meta(x, positions) == _on_meta((2, 3, 9, 4))
    keep = torch.tensor([True, False, True, True])
    assert student.m.picked.on_meta(x, keep) == _on_meta((2, 3, 9, 3))
    # the shape follows the value read: 5 columns kept, not some stand-in
    assert student.m.shaped_by_a_value.on_meta(torch.randn(2, 7), torch.tensor(5)) == _on_meta(
        (2, 5)
    )


def test_the_values_are_the_inputs_own(tmp_path):
    student = _student(tmp_path)
    with pytest.raises(StudentError, match="position out of range"):
        student.m.checked.on_meta(torch.randn(1, 20, 4), torch.arange(10, 17))
    with pytest.raises(StudentError, match="positions must ascend"):
        student.m.listed.on_meta(torch.randn(3), torch.tensor([2, 1]))


def test_cpu_work_runs_once_and_in_place_changes_keep_their_values(tmp_path):
    assert _student(tmp_path).m.counted_once.on_meta(torch.randn(3, 4)) == _on_meta((3, 4))


def test_device_mistakes_are_judged_as_on_meta(tmp_path):
    student = _student(tmp_path)
    x, positions = torch.randn(2, 3, 9, 4), torch.arange(3, 8)
    with pytest.raises(StudentError, match="device"):  # a CPU tensor meets a meta one
        student.m.reads_then_ignores_device.on_meta(x, positions)
    assert student.m.moved_to_cpu.on_meta(x)["device"] == "cpu"
    assert student.m.read_back_to_cpu.on_meta(x)["device"] == "cpu"


def test_a_module_reads_its_buffers_on_meta_and_keeps_its_own(tmp_path):
    student = _student(tmp_path)
    h = student.m.Cache()
    before = h.state_dict()
    assert h.on_meta(torch.randn(2, 4, 4)) == _on_meta((2, 7, 4))
    with pytest.raises(StudentError, match="cache full"):
        h.on_meta(torch.randn(2, 6, 4))
    for name, value in h.state_dict().items():
        torch.testing.assert_close(value, before[name])


def test_the_cpu_generator_is_left_as_it_was(tmp_path):
    student, x = _student(tmp_path), torch.randn(50, 50)
    torch.manual_seed(7)
    expected = torch.rand(5)
    torch.manual_seed(7)
    assert student.m.draws.on_meta(x) == _on_meta((50, 50))
    torch.testing.assert_close(torch.rand(5), expected)
