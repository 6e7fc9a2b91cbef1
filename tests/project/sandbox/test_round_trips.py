"""Fewer round trips to the sandboxed worker, same behaviour: a test's seed travels with its first request, and the
module handles a test lets go of travel with the next request (or, at the end of an exercise, in one request of
their own), instead of a round trip each (together a quarter of a full grade's requests)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from grader.sandbox import choice, isolation, remote
from grader.sandbox.channel import Channel
from grader.sandbox.zygote_client import Zygote
from tests.project.support.common import starter_of

SOURCE = (
    "import gc\nimport weakref\n\nimport torch\n\n_live = weakref.WeakSet()\n\n\n"
    "class Thing(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        _live.add(self)\n\n\n"
    "def live():\n    gc.collect()\n    return len(_live)\n\n\ndef draw(n):\n    return torch.rand(n)\n"
    "\n\ndef big(n, x):\n    return torch.arange(n, dtype=torch.float32), x * 2\n"
)


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    z = Zygote()
    assert z.wait_ready()
    yield z
    z.close()


@pytest.fixture
def counted(
    tmp_path: Path, zygote: Zygote, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[remote.SandboxBackend, list[dict]]]:
    (tmp_path / "mod.py").write_text(SOURCE)
    backend = remote.SandboxBackend(
        tmp_path,
        isolation.LaunchSpec(choice.available()[0]),
        bans={},
        time_limits={"ex": 30, "other": 30},
        budget_s=120,
        starter=starter_of(zygote),
    )
    sent: list[dict] = []  # the requests as they went to a worker (setup frames aside)
    send = Channel.send

    def counting(channel: Channel, value: dict) -> None:
        if "op" in value:
            sent.append(value)
        send(channel, value)

    monkeypatch.setattr(Channel, "send", counting)
    try:
        yield backend, sent
    finally:
        backend.close()


def test_the_seed_travels_with_the_first_request(counted):
    backend, sent = counted
    backend.begin_test("t", "ex", 7)
    first, second = backend.call("mod", "draw", (2,), {}), backend.call("mod", "draw", (2,), {})
    assert (
        [r["op"] for r in sent] == ["call", "call"]
        and sent[0]["seed"] == 7
        and "seed" not in sent[1]
    )
    expected = torch.rand(4, generator=torch.Generator().manual_seed(7))
    assert torch.equal(first, expected[:2]) and torch.equal(second, expected[2:])


def test_a_released_handle_is_dropped_before_the_next_request_runs(counted):
    backend, sent = counted
    backend.begin_test("t1", "ex", 1)
    handles = [backend.call("mod", "Thing", (), {}) for _ in range(2)]
    assert backend.call("mod", "live", (), {}) == 2
    for handle in handles:
        backend.release(handle.id)
    assert len(sent) == 3  # no round trip of its own
    backend.begin_test("t2", "ex", 2)
    assert backend.call("mod", "live", (), {}) == 0  # both dropped before `live` ran
    assert len(sent[-1]["release"]) == 2


def test_the_last_handles_of_an_exercise_are_dropped_before_the_next_exercise(counted):
    backend, sent = counted
    backend.begin_test("t1", "ex", 1)
    backend.release(backend.call("mod", "Thing", (), {}).id)
    backend.begin_test(
        "t2", "other", 2
    )  # one request of their own, still charged to the first exercise
    assert [r["op"] for r in sent] == ["call", "release"] and len(sent[-1]["release"]) == 1
    assert backend.call("mod", "live", (), {}) == 0 and "release" not in sent[-1]


def test_handles_of_a_worker_that_is_gone_are_never_sent(counted):
    backend, sent = counted
    backend.begin_test("t1", "ex", 1)
    handle = backend.call("mod", "Thing", (), {})
    backend.close()  # as after a crash: the handle went with its worker
    backend.release(handle.id)
    backend.begin_test("t2", "ex", 2)
    assert backend.call("mod", "live", (), {}) == 0 and "release" not in sent[-1]


def test_large_values_cross_whole_through_wide_pipes(counted):
    """A 10 MB reply and a 3 MB request (the size of a GPT-2-size module's parameters) arrive exact,
    each in one frame, through the 1 MiB pipes the worker's requests and replies use."""
    import fcntl

    from grader.sandbox import workerproc

    backend, sent = counted
    backend.begin_test("t::big", "ex")
    x = torch.randn(3 << 18, generator=torch.Generator().manual_seed(5))  # 3 MiB of float32
    n = 10 << 18  # 10 MiB of float32
    first, second = backend.call("mod", "big", (n, x), {})
    assert torch.equal(first, torch.arange(n, dtype=torch.float32)) and torch.equal(second, x * 2)
    assert [r["name"] for r in sent] == ["big"]
    channel = backend.channel
    assert channel is not None
    for fd in (channel._req_w, channel._resp_r):
        assert fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) == workerproc.PIPE_BYTES
