"""What ``benchmarks/batch.py`` compares a batch with: the naive baseline (a fresh interpreter
running pytest in-process per submission, no sandbox) and the per-test costs (a wire round trip to a
forked worker, pytest's machinery for an empty test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(os.environ.get("GRADER_BENCH_ROOT") or Path(__file__).resolve().parents[1])
BASICS = json.loads((ROOT / "assignments.json").read_text())["assignments"][0]
HIDDEN = [
    e["hidden_tests"] for e in BASICS["exercises"]
]  # the naive baseline runs this assignment's suites only
NAIVE_LIMIT_S = 60.0


def naive_one(folder: Path) -> float:
    t0 = time.monotonic()
    try:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                *HIDDEN,
                "-p",
                "grader.testing.plugin",
                "--student",
                str(folder),
                "-q",
                "-p",
                "no:cacheprovider",
            ],
            capture_output=True,
            cwd=ROOT,
            timeout=NAIVE_LIMIT_S,
        )
    except subprocess.TimeoutExpired:
        pass
    return time.monotonic() - t0


def run_naive(submissions: Path, jobs: int, limit: int | None = None) -> tuple[float, list[float]]:
    """The naive baseline over the first ``limit`` submissions (all by default): wall time and each one's."""
    folders = sorted(p for p in submissions.iterdir() if p.is_dir())[:limit]
    t0 = time.monotonic()
    with ThreadPoolExecutor(jobs) as pool:
        times = list(pool.map(naive_one, folders))
    return time.monotonic() - t0, times


def overheads() -> None:
    """Per-test costs: a wire round trip to a forked worker, and pytest's own machinery for an empty test."""
    code = (
        "import time, tempfile, torch\nfrom pathlib import Path\n"
        "try:\n    from grader.course import manifest\nexcept ImportError:\n    from grader import manifest\n"
        "from grader.options import launch_spec\nfrom grader.sandbox.remote import SandboxBackend\n"
        "from grader.sandbox.starters import ZygoteStarter\nfrom grader.sandbox.zygote_client import Zygote\n"
        "z = Zygote(); z.wait_ready(); box = Path(tempfile.mkdtemp())\n"
        "(box / 'm.py').write_text('def f(x):\\n    return x\\n')\n"
        "b = SandboxBackend(box, launch_spec(manifest.load(), 'namespace'), bans={}, time_limits={'e': 10}, "
        "budget_s=60, starter=ZygoteStarter(z)); b.begin_test('t', 'e', 1); x = torch.ones(4, 4)\n"
        "b.call('m', 'f', (x,), {}); t = time.perf_counter()\n"
        "for _ in range(500): b.call('m', 'f', (x,), {})\n"
        "print((time.perf_counter() - t) / 500); b.close(); z.close()\n"
    )
    wire = float(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
        ).stdout.split()[-1]
    )
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "test_empty.py").write_text(
            "import pytest\n\n\n@pytest.mark.parametrize('i', range(500))\n"
            "def test_nothing(i):\n    pass\n"
        )
        code = (
            "import sys, time\nfrom pathlib import Path\nfrom grader.scoring.runner import run_suites\n"
            "f = [Path(sys.argv[1])]\nrun_suites(f)\nt = time.perf_counter(); run_suites(f)\n"
            "print((time.perf_counter() - t) / 500)\n"
        )
        machinery = float(
            subprocess.run(
                [sys.executable, "-c", code, f"{tmp}/test_empty.py"],
                capture_output=True,
                text=True,
                cwd=ROOT,
                check=True,
            ).stdout.split()[-1]
        )
    print(
        f"per test     : a wire round trip to a forked worker {wire * 1e3:.2f} ms; pytest's machinery for an "
        f"empty test {machinery * 1e3:.2f} ms (a grade of solutions/: 160 tests, about 550 round trips)"
    )
