"""The `student` door: only its small API reaches student code, in-process and sandboxed alike."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from grader.protocol.errors import StudentCrash, StudentTimeout
from grader.protocol.values import HandleRef
from grader.sandbox import replies
from grader.sandbox.channel import ChannelError
from grader.sandbox.history import History
from grader.student import (
    BannedAPIError,
    StudentAPIError,
    StudentError,
    StudentNotFound,
    StudentNotImplemented,
    StudentProxy,
)
from grader.student.inprocess import InProcessBackend

MODULE = """
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
"""


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
    assert h.load_state_dict(zero, strict=False) == {
        "missing_keys": ["mask"],
        "unexpected_keys": [],
    }
    torch.testing.assert_close(h(x), torch.zeros(2, 4))
    out, input_grads, param_grads = (
        h.eval()
        .to(dtype=torch.float64)
        .grads(x.double(), grad_output=torch.ones(2, 4, dtype=torch.float64))
    )
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
    with pytest.raises(StudentNotFound, match=r"nothere\.py not found"):
        student.nothere.f()
    with pytest.raises(StudentNotFound, match=r"`missing` not found in mod\.py"):
        student.mod.missing()
    with pytest.raises(StudentNotImplemented, match="not implemented yet"):
        student.mod.todo()


def test_banned_api_raises_only_inside_student_code(student):
    q = torch.randn(1, 2, 4)
    with pytest.raises(BannedAPIError, match="not allowed"):
        student.mod.uses_sdpa(q)
    torch.nn.functional.scaled_dot_product_attention(q, q, q)  # the trusted side is unaffected


def test_arguments_are_copied_and_changing_one_in_place_is_the_students_error(tmp_path):
    """The caller's tensor is never touched (the door sends copies), and a function that changes its input
    in place fails with a message saying so: inputs belong to the caller (issue 11, "inputs are the caller's")."""
    (tmp_path / "m.py").write_text(
        "import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        x[0] = 5\n        return x * 2\n\n"
        "def mutate(x):\n    x.add_(100)\n    return x\n\ndef fresh(x):\n    return x + 100\n"
    )
    student = StudentProxy(InProcessBackend(tmp_path))
    x = torch.zeros(2)
    with pytest.raises(StudentError, match=r"m\.mutate changed its argument 1 in place"):
        student.m.mutate(x)
    with pytest.raises(StudentError, match=r"M\.forward changed its argument 1 in place"):
        student.m.M()(x)
    assert bool((x == 0).all())
    assert torch.equal(student.m.fresh(x), torch.full((2,), 100.0))


# -- what a sandboxed worker's reply may claim (grader.sandbox.replies), and handle replay ------------


@pytest.mark.parametrize("kind", ["timeout", "crash", "protocol", "grader", None, 7])
def test_a_worker_cannot_claim_an_outcome_only_the_grader_observes(kind):
    err = replies.student_error(
        {"kind": kind, "exc_type": "", "message": "ran past its time limit", "frames": []}
    )
    assert type(err) is StudentError and not isinstance(err, (StudentTimeout, StudentCrash))
    assert err.kind == "exception" and err.exc_type.startswith(
        "your code raised an exception named"
    )


@pytest.mark.parametrize(
    "exc_type",
    [
        "WorkerCrash",
        "WorkerProtocol",
        "StudentTimeout",
        "GraderFault",
        "grader.protocol.errors.StudentCrash",
        "BannedAPIError",
    ],
)
def test_grader_like_exception_names_are_shown_as_the_students(exc_type):
    err = replies.student_error(
        {"kind": "exception", "exc_type": exc_type, "message": "m", "frames": []}
    )
    assert err.feedback().startswith(f"your code raised an exception named {exc_type}: m")


def test_legitimate_kinds_and_names_pass_unchanged_and_text_is_made_safe():
    banned = replies.student_error(
        {"kind": "banned", "exc_type": "BannedAPIError", "message": "no", "frames": []}
    )
    assert type(banned) is BannedAPIError and banned.exc_type == "BannedAPIError"
    todo = replies.student_error(
        {
            "kind": "not_implemented",
            "exc_type": "NotImplementedError",
            "message": "todo\x1b[2J",
            "frames": ["m.py, line 1\u202e", 5],
        }
    )
    assert type(todo) is StudentNotImplemented and todo.exc_type == "NotImplementedError"
    assert "\x1b" not in todo.message and "\u202e" not in todo.frames[0] and todo.frames[1] == "5"
    assert type(replies.student_error({"kind": "not_found"})) is StudentNotFound


@pytest.mark.parametrize(
    "reply, op",
    [
        ([1], "call"),
        ({"ok": 1, "error": {}}, "call"),
        ({"fine": 1}, "call"),
        ({"error": "text"}, "call"),
        ({"ok": 5}, "measure"),
        ({"ok": (1, 2)}, "measure"),
        ({"ok": 1}, "release"),
        ({"api_error": 3}, "call"),
    ],
)
def test_a_reply_of_the_wrong_shape_is_a_protocol_violation(reply, op):
    with pytest.raises(ChannelError) as info:
        replies.check(reply, op)
    assert info.value.kind == "protocol"


def test_handles_are_virtual_and_replayed_on_a_fresh_worker():
    history = History()
    make = {"op": "call", "module": "m", "name": "Lin", "args": (), "kwargs": {}}
    held = history.record(make, "ok", HandleRef(41, "Lin"))
    use = {"op": "method", "handle": held.id, "method": "forward", "args": (), "kwargs": {}}
    assert history.to_worker(use)["handle"] == 41
    history.record(use, "ok", None)
    sent: list[dict] = []

    def fresh_worker(request: dict) -> tuple[str, object]:
        sent.append(request)
        return ("ok", HandleRef(1, "Lin")) if request["op"] == "call" else ("ok", None)

    history.replay(fresh_worker)
    assert [r["op"] for r in sent] == ["call", "method"] and sent[1]["handle"] == 1
    assert history.to_worker(use)["handle"] == 1
    history.lost()  # the worker died: an old handle reaches nothing a later worker made
    assert history.to_worker(use)["handle"] == -1
