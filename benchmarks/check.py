"""Benchmark: what a student waits for in `grader check`, against the floors measured in the same run.

A student repository is released into a temporary folder (`grader release`) and the reference
solutions are copied into its `exercises/`. Then, median of ``--repeat`` runs each:

- `python -c "import torch"`: the interpreter floor every command pays;
- `check.check()` in a warm process (second call): the in-process floor of the tests themselves;
- `python -m grader check softmax` and `python -m grader check` (all ten) as fresh commands.

Targets (issue 14): one exercise <= 1.5 s, all ten <= 3 s.

    python benchmarks/check.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def wall(cmd: list[str], cwd: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(
            cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def warm_floor(repo: Path, repeat: int) -> float:
    code = (
        "import statistics, sys, time\nfrom grader.check import local as check\ncheck.check()\nts = []\n"
        f"for _ in range({repeat}):\n    t = time.perf_counter(); check.check(); ts.append(time.perf_counter() - t)\n"
        "print(statistics.median(ts))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, check=True, capture_output=True, text=True
    )
    return float(done.stdout.strip().splitlines()[-1])


def release(folder: Path) -> Path:
    repo = folder / "repo"
    subprocess.run(
        [sys.executable, "-m", "grader", "release", str(repo)],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for module in (repo / "exercises").glob("*.py"):
        if module.name != "__init__.py":
            shutil.copy(ROOT / "solutions" / module.name, module)
    return repo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        repo = release(Path(tmp))
        torch_floor = wall([sys.executable, "-c", "import torch"], repo, args.repeat)
        floor = warm_floor(repo, args.repeat)
        one = wall([sys.executable, "-m", "grader", "check", "softmax"], repo, args.repeat)
        every = wall([sys.executable, "-m", "grader", "check"], repo, args.repeat)
    print(f"python -c 'import torch'          {torch_floor:6.2f} s")
    print(f"check() warm, all ten (in-process) {floor:6.2f} s")
    print(
        f"grader check softmax (fresh)       {one:6.2f} s  = import torch + {one - torch_floor:.2f} s "
        f"(target 1.5 s: {'met' if one <= 1.5 else 'not met'})"
    )
    print(
        f"grader check (all ten, fresh)      {every:6.2f} s  = {every / (torch_floor + floor):.2f} x (import torch + "
        f"warm tests) (target 3 s: {'met' if every <= 3.0 else 'not met'})"
    )


if __name__ == "__main__":
    main()
