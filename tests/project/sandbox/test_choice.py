"""Choosing the isolation level (grader/sandbox/choice.py): the namespace probe started early, while a command
loads its manifest, decides exactly as the probe made on demand, and is made once."""

from __future__ import annotations

import subprocess
import sys

import pytest

from grader.sandbox import choice


@pytest.fixture
def fresh(monkeypatch):
    """A process that has probed nothing yet, counting the namespace probes it spawns."""
    spawned: list[subprocess.Popen[bytes] | None] = []
    spawn = choice._spawn_namespace_probe

    def counting():
        spawned.append(spawn())
        return spawned[-1]

    monkeypatch.setattr(choice, "_spawn_namespace_probe", counting)
    monkeypatch.setattr(choice, "_EARLY", None)
    choice.available.cache_clear()
    yield spawned
    choice.available.cache_clear()  # the next caller probes for real again


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the namespace probe is Linux's")
def test_an_early_probe_decides_as_the_late_one_and_runs_once(fresh):
    late = choice.available()
    assert len(fresh) == int(choice._wants_namespace())
    choice.available.cache_clear()
    fresh.clear()
    choice.probe_early()
    assert len(fresh) == int(choice._wants_namespace())
    assert choice.available() == late and choice._EARLY is None  # collected, not spawned again
    assert len(fresh) == int(choice._wants_namespace())
    if choice._wants_namespace():
        assert fresh[0] is not None and fresh[0].returncode is not None  # waited for: no zombie


def test_nothing_is_started_once_the_choice_is_made_or_where_it_would_not_run(fresh, monkeypatch):
    choice.available()
    fresh.clear()
    choice.probe_early()  # already probed in this process
    assert fresh == [] and choice._EARLY is None
    choice.available.cache_clear()
    monkeypatch.setattr(choice.os, "geteuid", lambda: 1000)  # namespace needs root
    choice.probe_early()
    assert fresh == [] and "namespace" not in choice.available()


def test_a_probe_that_fails_means_no_namespace(fresh, monkeypatch):
    monkeypatch.setattr(choice, "_wants_namespace", lambda: True)
    monkeypatch.setattr(choice, "_fork_namespace_probe", lambda: None)  # the fresh interpreter's
    monkeypatch.setattr(choice.privlib, "launcher", lambda: "/nonexistent/launcher.py")
    choice.probe_early()
    assert "namespace" not in choice.available()


# the probe in a forked copy of a single-threaded process: the same verdict as a fresh interpreter's,
# a probe that fails or raises is no namespace, one that hangs is killed, and a process running
# threads spawns the fresh interpreter instead
FORKED_PROBE = r"""
import json, os, subprocess, sys, threading, time
from grader.sandbox import choice, launcher, privlib
out = {}
probe = choice._fork_namespace_probe()
out["forked"] = type(probe).__name__
out["forked_says"] = probe.wait(20)
fresh = subprocess.run([sys.executable, "-I", "-S", "-B", str(privlib.launcher()), "probe-namespace"],
                       cwd="/", capture_output=True, timeout=20)
out["fresh_says"] = fresh.returncode
launcher.probe_namespace = lambda: os._exit(3)
out["failed"] = choice._fork_namespace_probe().wait(20)
def boom():
    raise OSError("no unshare here")
launcher.probe_namespace = boom
out["raised"] = choice._fork_namespace_probe().wait(20)
launcher.probe_namespace = lambda: time.sleep(60)
hung = choice._fork_namespace_probe()
try:
    hung.wait(0.2)
    out["hung"] = "returned"
except subprocess.TimeoutExpired:
    hung.kill()
    out["hung"] = hung.wait()
choice._EARLY = None
choice._fork_namespace_probe = lambda: hung
out["decided"] = "namespace" in choice.available()
stop = threading.Event()
thread = threading.Thread(target=stop.wait)
thread.start()
from importlib import reload
reload(choice)
out["with_threads"] = choice._fork_namespace_probe()
stop.set()
thread.join()
print(json.dumps(out))
"""


@pytest.mark.skipif(
    not choice._wants_namespace(), reason="the namespace probe runs as root on Linux"
)
def test_the_forked_probe_decides_as_a_fresh_interpreter_and_fails_safe():
    import json

    done = subprocess.run(
        [sys.executable, "-I", "-c", FORKED_PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["forked"] == "_ForkedProbe"
    assert seen["forked_says"] == seen["fresh_says"] == 0  # root here: namespaces work
    assert seen["failed"] == 3 and seen["raised"] == 1
    assert seen["hung"] == -9  # killed, and reaped
    assert seen["decided"] is False  # a probe that never answered in time: no namespace
    assert seen["with_threads"] is None
