"""pytest plugin for benchmarks/suite.py: one JSON line per test with its wall time and CPU seconds.

Loaded with ``-p suite_plugin`` (the benchmark puts this folder on PYTHONPATH) into every xdist worker. ``cpu`` is
the test process's own CPU during the test; ``children`` the CPU of the processes it started and reaped during the
test (``RUSAGE_CHILDREN``: CLI runs, batch slots, cold sandboxed workers). Workers forked by a long-lived zygote
are not this process's children and are not counted: the machine-wide figures in benchmarks/suite.py are.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator

import pytest

ENV = "SUITE_BENCH_LOG"  # the file the records go to (appended to by every xdist worker)


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, None, None]:
    wall, own, children = (
        time.monotonic(),
        _cpu(resource.RUSAGE_SELF),
        _cpu(resource.RUSAGE_CHILDREN),
    )
    yield
    record = {
        "test": item.nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "wall": time.monotonic() - wall,
        "cpu": _cpu(resource.RUSAGE_SELF) - own,
        "children": _cpu(resource.RUSAGE_CHILDREN) - children,
    }
    path = os.environ.get(ENV)
    if path:
        with open(
            path, "a", encoding="utf-8"
        ) as log:  # one short write per line: workers never interleave
            log.write(json.dumps(record) + "\n")
