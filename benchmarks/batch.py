"""Benchmark ``grader batch`` against a naive, unisolated baseline.

Generates N submissions (mostly correct, some with a typical bug from tests/corpus/buggy, some hostile
from tests/corpus/hostile), then grades them

- with ``grader batch`` (sandboxed slots, workers forked from a zygote that imported torch, -j J), and
- with the naive baseline: one fresh interpreter per submission running pytest in-process on the
  hidden suites, no sandbox (``python -m pytest tests/hidden -p grader.testing.plugin --student DIR -q``),
  J at a time, each with a wall limit (a hostile infinite loop would otherwise hang it forever).

It prints submissions per minute for both, the ratio, the per-submission fixed cost (grading stub
submissions whose every test fails at once: what remains is start-up) for each way a worker can get
torch: forked from the zygote (the default), pre-started while the previous submission is graded, or cold.

    python benchmarks/batch.py            # N=20
    python benchmarks/batch.py --n 200    # the issue's target: 200 submissions in under 5 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
MODULES = sorted(p.stem for p in (ROOT / "solutions").glob("*.py") if p.stem != "__init__")
HOSTILE = ["infinite_loop.py", "exit_in_call.py", "sysexit_at_import.py", "stdout_flood.py"]
NAIVE_LIMIT_S = 60.0


def generate(dest: Path, n: int, *, seed: int = 0, hostile_share: float = 0.1, buggy_share: float = 0.2) -> dict:
    """N student folders; returns how many of each kind were made."""
    rng = random.Random(seed)
    buggy = sorted(p for p in (CORPUS / "buggy").rglob("*.py"))
    kinds = {"correct": 0, "buggy": 0, "hostile": 0}
    for i in range(n):
        folder = dest / f"student{i:04d}"
        folder.mkdir(parents=True)
        for module in MODULES:
            shutil.copy(ROOT / "solutions" / f"{module}.py", folder / f"{module}.py")
        draw = rng.random()
        if draw < hostile_share:
            shutil.copy(CORPUS / "hostile" / rng.choice(HOSTILE), folder / "softmax.py")
            kinds["hostile"] += 1
        elif draw < hostile_share + buggy_share:
            bug = rng.choice(buggy)
            shutil.copy(bug, folder / f"{bug.parent.name}.py")
            kinds["buggy"] += 1
        else:
            kinds["correct"] += 1
    return kinds


def stubs(dest: Path, n: int) -> None:
    for i in range(n):
        folder = dest / f"stub{i}"
        folder.mkdir(parents=True)
        for module in MODULES:
            shutil.copy(ROOT / "exercises" / f"{module}.py", folder / f"{module}.py")


def run_batch(submissions: Path, out: Path, jobs: int, *extra: str) -> tuple[float, dict, list[dict]]:
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "grader", "batch", str(submissions), "--out", str(out), "-j", str(jobs),
                           "--quiet", *extra], capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - t0
    if done.returncode not in (0, 1):
        sys.exit(f"grader batch failed ({done.returncode}): {done.stderr[-2000:]}")
    cards = [json.loads(p.read_text()) for p in sorted((out / "scorecards").glob("*.json"))]
    return wall, json.loads((out / "summary.json").read_text()), cards


def naive_one(folder: Path) -> float:
    t0 = time.monotonic()
    try:
        subprocess.run([sys.executable, "-m", "pytest", "tests/hidden", "-p", "grader.testing.plugin", "--student",
                        str(folder), "-q", "-p", "no:cacheprovider"], capture_output=True, cwd=ROOT,
                       timeout=NAIVE_LIMIT_S)
    except subprocess.TimeoutExpired:
        pass
    return time.monotonic() - t0


def run_naive(submissions: Path, jobs: int) -> tuple[float, list[float]]:
    folders = sorted(p for p in submissions.iterdir() if p.is_dir())
    t0 = time.monotonic()
    with ThreadPoolExecutor(jobs) as pool:
        times = list(pool.map(naive_one, folders))
    return time.monotonic() - t0, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20, help="submissions to generate (default 20)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--stubs", type=int, default=4, help="stub submissions for the fixed-cost measurement")
    parser.add_argument("--skip-naive", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="grader-bench-"))
    try:
        kinds = generate(work / "class", args.n)
        print(f"{args.n} submissions {kinds}, {args.jobs} slots, {os.cpu_count()} cores", flush=True)
        wall, summary, _cards = run_batch(work / "class", work / "out", args.jobs)
        batch_rate = 60 * args.n / wall
        print(f"grader batch : {wall:7.1f} s  {batch_rate:6.1f} submissions/min  (isolation {summary['isolation']}, "
              f"errors {summary['counts']['errors']}, timeouts {summary['counts']['timeouts']}, "
              f"mean {summary['score']['mean']:g})", flush=True)
        if not args.skip_naive:
            nwall, _ = run_naive(work / "class", args.jobs)
            naive_rate = 60 * args.n / nwall
            print(f"naive        : {nwall:7.1f} s  {naive_rate:6.1f} submissions/min  (no sandbox, {args.jobs} at a time)")
            print(f"ratio        : batch is {batch_rate / naive_rate:.2f}x the naive baseline's throughput")
        stubs(work / "stubs", args.stubs)
        fixed = {}
        for mode in ("fork", "start", "off"):
            _, _, stub_cards = run_batch(work / "stubs", work / f"stub-out-{mode}", 1, "--force", "--warm", mode)
            fixed[mode] = statistics.median(c["timings"]["total_s"] for c in stub_cards)
        _, naive_stub = run_naive(work / "stubs", 1)
        print(f"fixed cost   : batch {fixed['fork']:.2f} s/submission forked from the zygote, {fixed['start']:.2f} s "
              f"pre-started, {fixed['off']:.2f} s cold (the zygote saves {fixed['off'] - fixed['fork']:.2f} s); "
              f"naive {statistics.median(naive_stub):.2f} s (fresh interpreter + import torch + pytest)")
        t = summary["timing"]
        if t.get("mean_wall_s_warm") is not None:
            print(f"in the run   : mean slot time per graded submission {t['mean_wall_s_warm']:.2f} s "
                  f"({t['warm_workers_used']} used a warm worker)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
