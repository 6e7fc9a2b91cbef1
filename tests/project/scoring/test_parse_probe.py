"""The integrity scan parses a large file in a bounded child first: no source costs the trusted process minutes."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from grader import procs
from grader.intake import bounded
from grader.scoring import integrity, parse_probe

# Python 3.11's f-string parser is quadratic in replacement fields: 600 kB of them take minutes of CPU to parse
F_STRING_BOMB = ('x = f"' + "{1}" * 200_000 + '"\n').encode()
HONEST_TABLE = (
    "TABLE = [\n" + "".join(f"    {i * 0.001:.6f},\n" for i in range(30_000)) + "]\n\n\n"
    "def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
    "    return e / e.sum(dim, keepdim=True)\n"
).encode()


def test_a_quadratic_parse_bomb_is_unscannable_and_costs_the_trusted_process_nothing():
    started = time.process_time()
    findings = integrity.scan_source(F_STRING_BOMB, "softmax.py")
    assert time.process_time() - started < 1.0  # the child spent its 5 s; this process only waited
    assert [(f.rule, f.construct) for f in findings] == [
        (
            "unscannable",
            f"takes more than {parse_probe.CPU_S} s of CPU or {parse_probe.MEMORY_BYTES >> 20} MiB to parse",
        )
    ]
    assert (
        integrity.RULES["unscannable"][0] == integrity.WITHHOLD
    )  # the exercise is withheld, its file named


def test_a_large_honest_module_is_parsed_and_scanned_as_usual():
    assert len(HONEST_TABLE) > parse_probe.PROBE_BYTES
    assert parse_probe.too_costly("softmax.py", HONEST_TABLE) is None
    assert integrity.scan_source(HONEST_TABLE, "softmax.py") == []


def test_a_small_file_starts_no_child(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a child was started for a small file")

    monkeypatch.setattr(subprocess, "run", refuse)
    assert parse_probe.too_costly("softmax.py", b"import torch\n" * 1000) is None


def _limits(pid: int) -> dict[str, tuple[str, str]]:
    """``/proc/<pid>/limits`` as {name: (soft, hard)} (empty once the process is gone)."""
    try:
        lines = Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]
    except OSError:
        return {}
    return {line[:26].strip(): tuple(line[26:].split()[:2]) for line in lines}


@pytest.mark.parametrize(
    ("module", "args", "child"),
    [
        ("grader.scoring.parse_probe", (), parse_probe),
        ("grader.intake.bounded", ("nb.ipynb",), bounded),
    ],
)
def test_each_bounded_child_limits_its_memory_and_cpu_before_it_reads_its_input(
    module, args, child
):
    """Both children (one rlimit code, procs.limit_self): seen from outside in /proc while the child waits on
    stdin, its address space and CPU time are capped at its module's own figures."""
    want = {
        "Max address space": (str(child.MEMORY_BYTES), str(child.MEMORY_BYTES)),
        "Max cpu time": (str(child.CPU_S), str(child.CPU_S + 1)),
    }
    proc = subprocess.Popen(
        procs.module_argv(module, *args, site=False),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        **procs.popen_kwargs(),
    )
    try:
        deadline = time.monotonic() + 60  # a ceiling for a starved machine; it takes 0.1 s
        seen = _limits(proc.pid)
        while proc.poll() is None and {k: seen.get(k) for k in want} != want:
            assert time.monotonic() < deadline, f"never limited: {seen}"
            time.sleep(0.01)  # the child sets them first thing, then blocks on stdin
            seen = _limits(proc.pid)
        assert {k: seen.get(k) for k in want} == want, seen
    finally:
        proc.kill()
        proc.wait()
