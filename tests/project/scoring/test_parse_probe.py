"""The integrity scan parses a large file in a bounded child first: no source costs the trusted process minutes."""

from __future__ import annotations

import subprocess
import time

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
