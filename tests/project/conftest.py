"""The project's tests' fixtures and hooks (helpers they share live in tests/project/support/)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from grader import canary
from grader.course import manifest
from grader.sandbox.zygote_client import Zygote


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one xdist worker more than the cores this process may use. Many tests wait on something
    other than their own CPU (a batch's slots starting, a sleeping submission held to its wall-clock backstop, a
    bomb test held to half a CPU); with one worker per core a core sat idle for 7-16% of the run (2 cores: 559 s
    with 89 s idle; 523 s with 12 s idle with 3 workers)."""
    return (
        len(os.sched_getaffinity(0)) + 1
        if hasattr(os, "sched_getaffinity")
        else (os.cpu_count() or 1) + 1
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The costliest modules first (their ``cost(seconds)`` marker): `.ci/run`'s ``--dist loadfile
    --no-loadscope-reorder`` hands modules to xdist's workers in this order, so each long module starts early
    and the run does not end with one worker alone on it (xdist's own order, most tests first, put the two
    one-test hostile-class modules last on one worker: 105 s with the other core idle)."""
    cost = {item.path: _cost(item) for item in items}
    items.sort(key=lambda item: -cost[item.path])  # stable: collection order within equal costs


def _cost(item: pytest.Item) -> float:
    marker = item.get_closest_marker("cost")
    return float(marker.args[0]) if marker else 0.0


@pytest.fixture(scope="session", autouse=True)
def _canary_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One canary proof per configuration per test session (the CLI tests run it, as a user's run would);
    subprocesses inherit the variable, so they share it. Under xdist every worker's temporary root sits
    in the session's one, and the workers share the cache there (a proof is written atomically)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "canary-cache"
    folder.mkdir(exist_ok=True)
    os.environ[canary.CACHE_ENV] = str(folder)
    os.environ.setdefault(
        "GRADER_KEEP_WARM", "20"
    )  # a zygote a CLI test leaves ends soon after the session


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread() -> None:
    """Each xdist worker (one per core) grades in-process with one torch thread: torch's default of one thread
    per core in every worker oversubscribed the cores, and OpenMP's spinning made in-process gradings 4-5x
    slower (flash_backward + kv_cache + efficient_attention: 4.8-5.4 s with 1 thread, 21-28 s with 2, measured
    on this 2-core machine while it was loaded)."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _own_solutions_package() -> Iterator[None]:
    """Each test gets back the ``solutions`` package it started with. A test that grades another checkout (a
    broken copy of the course) registers that copy's ``solutions`` in ``sys.modules`` (grader/course/
    references.py); left there, it answered a later test's ``import solutions.softmax`` in the same xdist worker
    with the broken copy (CI of stop 36: 3 failures that depended on which tests shared a worker)."""
    before = {
        n: m for n, m in sys.modules.items() if n == "solutions" or n.startswith("solutions.")
    }
    yield
    for name in [n for n in sys.modules if n == "solutions" or n.startswith("solutions.")]:
        if name not in before:
            del sys.modules[name]
    sys.modules.update(before)


@pytest.fixture(scope="module", params=["cold", "fork"])
def zygote(request: pytest.FixtureRequest) -> Iterator[Zygote | None]:
    """Sandbox tests run twice: against a freshly exec'd worker and against one forked from a zygote."""
    if request.param == "cold":
        yield None
        return
    made = Zygote()
    assert made.wait_ready(), "the zygote did not start"
    yield made
    made.close()


@pytest.fixture(scope="session")
def assignment() -> manifest.Assignment:
    return manifest.load()
