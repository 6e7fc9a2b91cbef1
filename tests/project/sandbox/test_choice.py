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
    monkeypatch.setattr(choice.privlib, "launcher", lambda: "/nonexistent/launcher.py")
    choice.probe_early()
    assert "namespace" not in choice.available()
