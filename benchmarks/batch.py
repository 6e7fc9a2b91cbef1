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
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from batch_costs import overheads, run_naive
from memsample import MemorySampler, machine_busy

# another checkout to measure (a worktree of an older commit) with this script, and its venv's python
ROOT = Path(os.environ.get("GRADER_BENCH_ROOT") or Path(__file__).resolve().parents[1])
CORPUS = ROOT / "tests" / "corpus"
BASICS = json.loads((ROOT / "assignments.json").read_text())["assignments"][
    0
]  # the default assignment
MODULES = sorted(e["module"] for e in BASICS["exercises"])
HOSTILE = ["infinite_loop.py", "exit_in_call.py", "sysexit_at_import.py", "stdout_flood.py"]


def generate(
    dest: Path,
    n: int,
    *,
    seed: int = 0,
    hostile_share: float = 0.0,
    buggy_share: float = 1 / 3,
    stub_share: float = 1 / 6,
) -> dict:
    """N student folders of the first assignment; returns how many of each kind were made. The default mix is the
    issue's (12 correct, 8 buggy, 4 stubs in 24); hostile ones (infinite loops and the like) each spend their
    per-test CPU limits, so they are opt-in (``--hostile-share``) and reported apart."""
    rng = random.Random(seed)
    buggy = sorted(p for p in (CORPUS / "buggy").rglob("*.py") if p.parent.name in MODULES)
    kinds = {"correct": 0, "buggy": 0, "stub": 0, "hostile": 0}
    for i in range(n):
        folder = dest / f"student{i:04d}"
        folder.mkdir(parents=True)
        draw = rng.random()
        source = ROOT / (
            "exercises"
            if hostile_share + buggy_share <= draw < hostile_share + buggy_share + stub_share
            else "solutions"
        )
        for module in MODULES:
            shutil.copy(source / f"{module}.py", folder / f"{module}.py")
        if draw < hostile_share:
            shutil.copy(CORPUS / "hostile" / rng.choice(HOSTILE), folder / "softmax.py")
            kinds["hostile"] += 1
        elif draw < hostile_share + buggy_share:
            bug = rng.choice(buggy)
            shutil.copy(bug, folder / f"{bug.parent.name}.py")
            kinds["buggy"] += 1
        elif draw < hostile_share + buggy_share + stub_share:
            kinds["stub"] += 1
        else:
            kinds["correct"] += 1
    return kinds


def stubs(dest: Path, n: int) -> None:
    for i in range(n):
        folder = dest / f"stub{i}"
        folder.mkdir(parents=True)
        for module in MODULES:
            shutil.copy(ROOT / "exercises" / f"{module}.py", folder / f"{module}.py")


def run_batch(
    submissions: Path, out: Path, jobs: int, *extra: str, memory: bool = False
) -> tuple[float, dict, list[dict], MemorySampler | None]:
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "grader",
            "batch",
            str(submissions),
            "--out",
            str(out),
            "-j",
            str(jobs),
            "--quiet",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    sampler = MemorySampler(proc.pid) if memory else None
    stdout, stderr = proc.communicate()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    wall = time.monotonic() - t0
    if done.returncode not in (0, 1):
        sys.exit(f"grader batch failed ({done.returncode}): {done.stderr[-2000:]}")
    cards = [json.loads(p.read_text()) for p in sorted((out / "scorecards").glob("*.json"))]
    return wall, json.loads((out / "summary.json").read_text()), cards, sampler


def warm(work: Path, jobs: int) -> None:
    """A two-submission batch first: the canary's proof cached and this user's zygote warm for the runs timed."""
    generate(work / "warm", 2)
    run_batch(work / "warm", work / "warm-out", jobs)


def children_cpu() -> float:
    """CPU seconds of every finished child of this process and their waited-for children (a batch and its slots)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def inprocess_floor(folder: Path, count: int) -> tuple[float, float]:
    """Median wall and CPU seconds of one ``grade()`` in-process in a warm process with one torch thread, over
    ``count`` non-hostile submissions."""
    code = (
        "import json, statistics, sys, time, torch\nfrom pathlib import Path\nfrom grader.grade import grade\n"
        "torch.set_num_threads(1)\n"  # as each slot and worker: one core each (OpenMP threads spin under load)
        "subs = [Path(p) for p in sys.argv[1:]]\ngrade(subs[0], isolation='inprocess', seed=0)\nts, cs = [], []\n"
        "for s in subs:\n    t, c = time.perf_counter(), time.process_time(); grade(s, isolation='inprocess', "
        "seed=0); ts.append(time.perf_counter() - t); cs.append(time.process_time() - c)\n"
        "print(statistics.median(ts), statistics.median(cs))\n"
    )
    hostile = set(HOSTILE)
    subs = [
        str(p)
        for p in sorted(folder.iterdir())
        if not any(
            (p / "softmax.py").read_bytes() == (CORPUS / "hostile" / h).read_bytes()
            for h in hostile
        )
    ]
    done = subprocess.run(
        [sys.executable, "-c", code, *subs[:count]],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    wall, cpu = done.stdout.split()[-2:]
    return float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20, help="submissions to generate (default 20)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--stubs", type=int, default=4, help="stub submissions for the fixed-cost measurement"
    )
    parser.add_argument("--skip-naive", action="store_true")
    parser.add_argument(
        "--naive-n", type=int, default=40, help="submissions the naive baseline grades (default 40)"
    )
    parser.add_argument(
        "--hostile-share", type=float, default=0.0, help="share of hostile submissions (default 0)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="grader-bench-"))
    try:
        kinds = generate(work / "class", args.n, hostile_share=args.hostile_share)
        print(
            f"{args.n} submissions {kinds}, {args.jobs} slots, {os.cpu_count()} cores", flush=True
        )
        warm(work, args.jobs)
        floors = [
            inprocess_floor(work / "class", min(6, args.n))
        ]  # before and after the batch: the load changes
        cpu0, busy0 = children_cpu(), machine_busy()
        wall, summary, _cards, sampler = run_batch(
            work / "class", work / "out", args.jobs, memory=True
        )
        assert sampler is not None
        peaks, rss = sampler.stop(), sampler.trusted_rss
        cpu = (children_cpu() - cpu0 + sampler.workers_cpu()) / args.n
        busy = (machine_busy() - busy0) / args.n
        batch_rate = 60 * args.n / wall
        print(
            f"grader batch : {wall:7.1f} s  {batch_rate:6.1f} submissions/min  {wall / args.n:.2f} s a submission "
            f"amortised (isolation {summary['isolation']}, errors {summary['counts']['errors']}, timeouts "
            f"{summary['counts']['timeouts']}, mean {summary['score']['mean']:g})",
            flush=True,
        )
        floors.append(inprocess_floor(work / "class", min(6, args.n)))
        floor, floor_cpu = (statistics.mean(f[i] for f in floors) for i in (0, 1))
        lanes = min(args.jobs, os.cpu_count() or 1)  # in-process, no more at once than cores
        print(
            f"floor        : {floor:.2f} s a submission graded in-process in a warm process (no sandbox, serial, "
            f"the correct and buggy ones; {floors[0][0]:.2f} s before the batch, {floors[1][0]:.2f} s after); / "
            f"{lanes} cores = {floor / lanes:.2f} s; batch is {wall / args.n / (floor / lanes):.2f}x that "
            f"(load average now {os.getloadavg()[0]:.1f})",
            flush=True,
        )
        print(
            f"CPU          : the machine busy {busy:.2f} CPU-s a submission ({busy * args.n / wall / lanes:.0%} of "
            f"{lanes} cores; other load included) against {floor_cpu:.2f} in-process: {busy / floor_cpu:.2f}x; "
            f"the batch's own process tree {cpu:.2f} (the shared zygote's workers are outside it)",
            flush=True,
        )
        print(
            "memory       : peak RSS "
            + ", ".join(f"{role} {mb:.0f} MB" for role, mb in sorted(peaks.items()))
            + (
                "; the batch's own process at each quarter of the run "
                + ", ".join(
                    f"{rss[min(len(rss) - 1, len(rss) * q // 4)] / 1024:.0f}" for q in (1, 2, 3, 4)
                )
                + " MB"
                if len(rss) >= 4
                else ""
            ),
            flush=True,
        )
        overheads()
        if not args.skip_naive:
            sample = min(args.n, args.naive_n)
            nwall, _ = run_naive(work / "class", args.jobs, sample)
            naive_rate = 60 * sample / nwall
            print(
                f"naive        : {nwall:7.1f} s for the first {sample}  {naive_rate:6.1f} submissions/min  (no sandbox, "
                f"{args.jobs} at a time)"
            )
            print(
                f"ratio        : batch is {batch_rate / naive_rate:.2f}x the naive baseline's throughput"
            )
        if not args.stubs:
            return
        stubs(work / "stubs", args.stubs)
        fixed = {}
        for mode in ("fork", "start", "off"):
            _, _, stub_cards, _ = run_batch(
                work / "stubs", work / f"stub-out-{mode}", 1, "--force", "--warm", mode
            )
            fixed[mode] = statistics.median(c["timings"]["total_s"] for c in stub_cards)
        _, naive_stub = run_naive(work / "stubs", 1)
        print(
            f"fixed cost   : batch {fixed['fork']:.2f} s/submission forked from the zygote, {fixed['start']:.2f} s "
            f"pre-started, {fixed['off']:.2f} s cold (the zygote saves {fixed['off'] - fixed['fork']:.2f} s); "
            f"naive {statistics.median(naive_stub):.2f} s (fresh interpreter + import torch + pytest)"
        )
        t = summary["timing"]
        if t.get("mean_wall_s_warm") is not None:
            print(
                f"in the run   : mean slot time per graded submission {t['mean_wall_s_warm']:.2f} s "
                f"({t['warm_workers_used']} used a warm worker)"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
