"""Each test seeds the sandboxed worker's torch from its own per-test seed.

A worker is forked from a zygote (or exec'd) in the same state every time: unseeded, every grading drew the same
dropout masks whatever its grading seed, and a reference could fail a dropout-rate test on every run of one
configuration (a canary refused 99.5/100 this way). Now draws follow the seed: the same seed draws the same
numbers on any worker (a restart's replay included), another seed other numbers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from grader.sandbox import choice, isolation, remote
from grader.sandbox.zygote_client import Zygote
from tests.project.support.common import starter_of

SOURCE = (
    "import torch\n\n\ndef draw(n):\n    return torch.rand(n)\n\n\ndef dropped(n, p):\n"
    "    return (torch.nn.functional.dropout(torch.ones(n), p) == 0).sum()\n"
)


@pytest.fixture(scope="module")
def shared_zygote() -> Iterator[Zygote]:
    z = Zygote()
    assert z.wait_ready()
    yield z
    z.close()


def _backend(box: Path, zygote: Zygote | None) -> remote.SandboxBackend:
    (box / "mod.py").write_text(SOURCE)
    return remote.SandboxBackend(
        box,
        isolation.LaunchSpec(choice.available()[0]),
        bans={},
        time_limits={"ex": 30},
        budget_s=120,
        starter=starter_of(zygote),
    )


def _draw(backend: remote.SandboxBackend, test: str, seed: int) -> torch.Tensor:
    backend.begin_test(test, "ex", seed)
    value: torch.Tensor = backend.call("mod", "draw", (5,), {})
    return value


@pytest.mark.parametrize("forked", [False, True], ids=["cold", "forked"])
def test_the_same_seed_draws_the_same_numbers_and_another_seed_others(
    tmp_path, shared_zygote, forked
):
    backend = _backend(tmp_path, shared_zygote if forked else None)
    try:
        first, again, other = (
            _draw(backend, "a", 11),
            _draw(backend, "b", 11),
            _draw(backend, "c", 12),
        )
    finally:
        backend.close()
    generator = torch.Generator().manual_seed(11)
    assert torch.equal(
        first, torch.rand(5, generator=generator)
    )  # torch's own generator, seeded with 11
    assert torch.equal(first, again) and not torch.equal(first, other)


def test_two_workers_forked_from_one_zygote_draw_what_their_seeds_say(tmp_path, shared_zygote):
    draws = []
    for box, seed in ((tmp_path / "one", 5), (tmp_path / "two", 6)):
        box.mkdir()
        backend = _backend(box, shared_zygote)
        try:
            draws.append(_draw(backend, "t", seed))
        finally:
            backend.close()
    assert not torch.equal(
        draws[0], draws[1]
    )  # unseeded, both forks started from the zygote's one state


def test_dropout_rates_vary_with_the_seed_around_p(tmp_path, shared_zygote):
    backend = _backend(tmp_path, shared_zygote)
    try:
        counts = []
        for seed in range(8):
            backend.begin_test(f"t{seed}", "ex", seed)
            counts.append(int(backend.call("mod", "dropped", (2000, 0.3), {})))
    finally:
        backend.close()
    assert len(set(counts)) > 1 and all(abs(c / 2000 - 0.3) < 0.05 for c in counts), counts


def test_a_restarted_worker_replays_the_seed_first(tmp_path, shared_zygote):
    """The seed travels with the test's first request, which the test's history records, so a timed-out test's
    replay on a fresh worker re-seeds before re-running the test's earlier requests."""
    backend = _backend(tmp_path, shared_zygote)
    try:
        backend.begin_test("t", "ex", 21)
        before = backend.call("mod", "draw", (3,), {})
        assert [request.get("seed") for request, _ in backend.history.log] == [21]
        backend.close()  # the worker is gone, as after a timeout: the replay runs on a fresh one
        backend.history.replay(backend._exchange)
        after = backend.call("mod", "draw", (3,), {})
    finally:
        backend.close()
    expected = torch.rand(6, generator=torch.Generator().manual_seed(21))
    assert torch.equal(before, expected[:3]) and torch.equal(after, expected[3:])
