"""Two more ``grader batch`` measurements, each compared within one run (see benchmarks/batch.py for the class).

``--loops``: what infinite loops cost. The same generated class is graded twice, as it is and with every 20th
submission's ``softmax.py`` replaced by an infinite loop (tests/corpus/hostile/infinite_loop.py: 5%); prints the
class's wall-time ratio (target <= 1.3) and the worst single submission's grading time against the median correct
one's, from the scorecards (target <= 3), and how the looping exercise's tests were reported.

``--memory``: peak resident memory per role (the batch's trusted process, slots, zygote, workers) at N and 2N
submissions, and the trusted process's resident size at a quarter of each run and at its end (it must not grow
with the class beyond its summary rows).

    python benchmarks/batch_modes.py --loops [--n 100] [-j 2]
    python benchmarks/batch_modes.py --memory [--n 200] [-j 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from batch import CORPUS, generate, run_batch, warm

LOOP_EVERY = 20  # 5% of the class


def loops(work: Path, n: int, jobs: int) -> None:
    kinds = generate(work / "plain", n)
    shutil.copytree(work / "plain", work / "loops")
    looping = sorted(p for p in (work / "loops").iterdir())[::LOOP_EVERY]
    for folder in looping:
        shutil.copy(CORPUS / "hostile" / "infinite_loop.py", folder / "softmax.py")
    warm(work, jobs)
    plain_wall, _, _, _ = run_batch(work / "plain", work / "plain-out", jobs)
    loop_wall, summary, cards, _ = run_batch(work / "loops", work / "loops-out", jobs)
    correct = [c["timings"]["total_s"] for c in cards if c["score"] == c["max_score"]]
    names = {p.name for p in looping}
    looped = [c for c in cards if Path(c["submission"]["path"]).name in names]
    worst = max(cards, key=lambda c: c["timings"]["total_s"])
    print(
        f"{n} submissions {kinds}, {len(looping)} with an infinite loop in softmax ({100 / LOOP_EVERY:g}%), {jobs} "
        f"slots, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"class        : {plain_wall:.1f} s without the loops, {loop_wall:.1f} s with them: "
        f"{loop_wall / plain_wall:.2f}x (target <= 1.3)"
    )
    print(
        f"worst        : {worst['timings']['total_s']:.2f} s ({Path(worst['submission']['path']).name}) against "
        f"{statistics.median(correct):.2f} s for the median correct submission: "
        f"{worst['timings']['total_s'] / statistics.median(correct):.2f}x (target <= 3); the looping ones "
        f"{statistics.median(c['timings']['total_s'] for c in looped):.2f} s median"
    )
    softmax = [
        t for c in looped for e in c["exercises"] if e["id"] == "softmax" for t in e["tests"]
    ]
    outcomes = sorted(
        {(t["outcome"], t["message"].split(":", 1)[-1].strip()[:70]) for t in softmax}
    )
    errors = summary["counts"]["errors"]
    print(
        f"reported     : {errors} grader errors; softmax tests of the looping ones: "
        + "; ".join(f"{o} '{m}'" for o, m in outcomes)
    )


def memory(work: Path, n: int, jobs: int) -> None:
    warm(work, jobs)
    for size in (n, 2 * n):
        generate(work / f"class{size}", size)
        wall, _, _, sampler = run_batch(
            work / f"class{size}", work / f"out{size}", jobs, memory=True
        )
        assert sampler is not None
        peaks, rss = sampler.stop(), sampler.trusted_rss
        print(
            f"{size:5d} submissions ({wall:.0f} s): peak RSS "
            + ", ".join(f"{role} {mb:.0f} MB" for role, mb in sorted(peaks.items()))
            + (
                f"; trusted process {rss[len(rss) // 4] / 1024:.1f} MB at a quarter, {rss[-1] / 1024:.1f} MB at the "
                f"end"
                if len(rss) >= 4
                else ""
            ),
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--loops", action="store_true")
    mode.add_argument("--memory", action="store_true")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="grader-bench-"))
    try:
        (loops if args.loops else memory)(work, args.n, args.jobs)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
