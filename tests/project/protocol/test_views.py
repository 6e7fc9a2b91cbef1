"""Inputs the wire cannot express, built inside the sandbox on a test's instruction (``View``): transposed and
sliced views and one tensor passed as several arguments; in-process and across the sandbox wire, and malformed
instructions refused on both sides of it."""

from __future__ import annotations

import json
import struct
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from grader.protocol import wire, wireparse
from grader.protocol.values import ValueRejected, View, to_plain
from grader.sandbox import choice, isolation, remote
from grader.student import StudentAPIError
from grader.student.inprocess import InProcessBackend
from grader.student.proxy import StudentProxy
from grader.testing.layouts import shared, sliced, transposed

SOURCE = textwrap.dedent('''
    import torch

    def layout(*xs):
        """What the student's code sees: contiguity, strides, and which arguments are one object."""
        return [(x.is_contiguous(), tuple(x.stride()), [y is x for y in xs]) for x in xs]

    def flatten(q):
        return q.view(-1, q.shape[-1])  # a .view that only works on contiguous memory

    def total(x):
        return x.sum(dim=-1)
''')


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


def test_views_arrive_with_the_asked_for_layout_and_the_same_values(student):
    t = torch.arange(24.0).reshape(2, 3, 4)
    ((tr, sl, plain),) = [student.mod.layout(transposed(t), sliced(t), t)]
    assert (
        tr[:2] == (False, (12, 1, 3))
        and sl[:2] == (False, (21, 7, 1))
        and plain[:2] == (True, (12, 4, 1))
    )
    torch.testing.assert_close(student.mod.total(transposed(t)), t.sum(dim=-1))
    torch.testing.assert_close(
        student.mod.total(sliced(t)), t.sum(dim=-1)
    )  # the 1e4 padding is never read


def test_shared_views_are_one_object_and_others_are_not(student):
    t = torch.randn(3, 4)
    got = student.mod.layout(shared(t), shared(t), shared(t, 1), t)
    assert [row[2] for row in got] == [
        [True, True, False, False],
        [True, True, False, False],
        [False, False, True, False],
        [False, False, False, True],
    ]


def test_a_view_only_code_fails_on_a_transposed_input(student):
    t = torch.randn(2, 3, 4)
    torch.testing.assert_close(student.mod.flatten(t), t.reshape(-1, 4))
    with pytest.raises(Exception, match="view size is not compatible"):
        student.mod.flatten(transposed(t, 0, 1))


@pytest.mark.parametrize(
    "view",
    [
        View(torch.ones(2, 3), permute=(0, 0)),
        View(torch.ones(2, 3), permute=(0, 1, 2)),
        View(torch.ones(2, 3), permute=(True, 0)),
        View(torch.ones(2, 3), narrow=(1, 2, 2)),
        View(torch.ones(2, 3), narrow=(2, 0, 1)),
        View(torch.ones(2, 3), narrow=(0, -1, 1)),
        View(torch.ones(2, 3), share=8),
        View(torch.ones(2, 3), share=-1),
    ],
)
def test_a_malformed_instruction_is_refused_before_it_leaves(student, view):
    with pytest.raises(ValueRejected):
        to_plain(view)
    with pytest.raises(StudentAPIError):
        student.mod.total(view)


def _frame(tree: object, table: list[dict[str, object]], payload: bytes) -> bytes:
    header = json.dumps({"v": tree, "t": table}).encode()
    return (
        wire.MAGIC
        + struct.pack("<I", len(header))
        + header
        + struct.pack("<Q", len(payload))
        + payload
    )


ENTRY = {"dtype": "float32", "shape": [2, 3], "offset": 0, "nbytes": 24, "device": "cpu"}


@pytest.mark.parametrize(
    "body",
    [
        [{"$t": 0}, [1, 0, 2], None, None],  # a permutation of the wrong length
        [{"$t": 0}, None, [1, 2, 5], None],  # a slice past the end
        [{"$t": 0}, None, None, "0"],  # a share key that is not an int
        [{"$t": 0}, None, None],  # a field missing
        [{"$t": 0}, [1, 0] * 40, None, None],  # more dims than a tensor may have
        [{"$t": 0, "x": 1}, None, None, None],  # a base that is not a plain tensor reference
        [{"$h": [1, "M"]}, None, None, None],  # a base that is a handle
        [{"$t": 0}, {"$pickle": "gASV"}, None, None],
    ],
)
def test_a_hostile_view_frame_is_a_wire_error(body):
    with pytest.raises(wire.WireError):
        wireparse.decode(_frame({"$v": body}, [ENTRY], b"\0" * 24))


def test_a_view_round_trips_on_the_wire():
    view = View(torch.arange(6.0).reshape(2, 3), permute=(1, 0), narrow=(0, 1, 2), share=3)
    got = wireparse.decode(wire.encode(view))
    assert type(got) is View and (got.permute, got.narrow, got.share) == ((1, 0), (0, 1, 2), 3)
    assert torch.equal(got.base, view.base)
