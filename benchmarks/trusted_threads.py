"""Benchmark: a sandboxed grade's trusted side on one torch thread (the default) against as many as torch
starts with (one a core), side by side in one warm process.

``grader grade``, Gradescope's ``run_autograder`` and a cluster worker grade in a process whose torch has one
OpenMP thread a core; the trusted side computes only oracles on small tensors while the worker computes the
student's code, and its idle threads spin for the CPU the worker needs. ``grader batch``'s slots already ran on
one thread. Each round grades ``solutions/`` once per setting, in turn (the machine's load moves both alike),
with workers forked from a zygote as a command's are; it prints the median wall time and this process's CPU per
grade, and their ratios. The in-process grade (the floor) is timed with torch's default threads, as the
``grader grade`` floor is.

    python benchmarks/trusted_threads.py [--rounds 5] [--isolation namespace]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from grader.grade import grade
from grader.options import GradeOptions, launch_spec
from grader.sandbox.starters import SlotStarters
from grader.scoring import runner

ROOT = Path(__file__).resolve().parents[1]


def timed(options: GradeOptions, starts: SlotStarters | None) -> tuple[float, float]:
    """Wall and this process's CPU seconds of one grade of the references (full marks checked)."""
    t, c = time.perf_counter(), time.process_time()
    card = grade(ROOT / "solutions", options=options, starter=starts.next() if starts else None)
    if starts:
        starts.done()
    assert card["status"] == "graded" and card["score"] == card["max_score"], card["error"]
    return time.perf_counter() - t, time.process_time() - c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--isolation", default="namespace")
    args = parser.parse_args()
    sandboxed = GradeOptions(isolation=args.isolation, seed=0)
    assignment = sandboxed.load()
    starts = SlotStarters(
        lambda slot: launch_spec(assignment, args.isolation, slot=slot), 0, "fork", shared_wait_s=30
    )
    settings = {"one thread (default)": 1, f"{torch.get_num_threads()} threads (before)": None}
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in settings}
    rows["in-process (floor)"] = []
    for r in range(args.rounds + 1):  # the first round warms caches and the zygote: not kept
        for name, threads in settings.items():
            runner.SANDBOXED_TRUSTED_THREADS = threads
            figures = timed(sandboxed, starts)
            if r:
                rows[name].append(figures)
        figures = timed(GradeOptions(isolation="inprocess", seed=0), None)
        if r:
            rows["in-process (floor)"].append(figures)
    report(rows, args)


def report(rows: dict[str, list[tuple[float, float]]], args: argparse.Namespace) -> None:
    med = {
        k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
        for k, v in rows.items()
    }
    floor = med["in-process (floor)"][0]
    print(
        f"grading solutions/ under {args.isolation} (workers forked), {args.rounds} rounds, median per grade"
    )
    print(f"{'trusted side':28} {'wall s':>7} {'vs floor':>9} {'trusted CPU s':>14}")
    for name, (wall, cpu) in med.items():
        print(f"{name:28} {wall:7.2f} {wall / floor:8.2f}x {cpu:14.2f}")
    (one_w, one_c), (many_w, many_c) = list(med.values())[:2]
    print(
        f"ratio          : one thread's grade is {one_w / many_w:.2f}x the other's wall, {one_c / many_c:.2f}x its CPU"
    )


if __name__ == "__main__":
    main()
