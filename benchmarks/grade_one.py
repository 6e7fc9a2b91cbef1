"""Benchmark: grade the reference submission in-process and under each isolation backend, in one run.

Prints, per backend, the median wall time of a full `grade()` of `solutions/` (all hidden suites),
its ratio to in-process grading, and the fixed cost per submission (the extra time over in-process,
and the sandboxed worker's own start until it reports ready: launcher + `import torch` cold, or a
fork of the zygote in the ``+fork`` rows, as ``grader batch`` does).

Then what a person at the keyboard waits for: ``grader grade solutions`` as a fresh command (a cold
interpreter: imports, the canary, a worker), first with an empty canary cache (the first run of a grader
version on a machine proves itself: solutions and stubs are graded first), then with the proof cached (every
later run), with this user's long-lived zygote (the default) and without it (``GRADER_KEEP_WARM=0``), against
the floor of one ``import torch`` plus the in-process grade.

    python benchmarks/grade_one.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader.grade import grade
from grader.sandbox import choice, isolation
from grader.sandbox.channel import Channel
from grader.sandbox.starters import ZygoteStarter
from grader.sandbox.zygote_client import FORKABLE, Zygote

ROOT = Path(__file__).resolve().parents[1]


def time_grade(backend: str, repeat: int, zygote: Zygote | None = None) -> tuple[float, float]:
    times, score = [], 0.0
    for i in range(repeat):
        start = time.perf_counter()
        card = grade(
            ROOT / "solutions",
            isolation=backend,
            seed=100 + i,
            starter=ZygoteStarter(zygote) if zygote is not None else None,
        )
        times.append(time.perf_counter() - start)
        score = card["score"]
        assert card["status"] == "graded", card["error"]
    return statistics.median(times), score


def worker_start(backend: str, repeat: int, zygote: Zygote | None = None) -> float:
    times = []
    with tempfile.TemporaryDirectory() as box:
        for _ in range(repeat):
            start = time.perf_counter()
            channel = Channel(isolation.LaunchSpec(backend), Path(box), zygote)
            channel.receive(120)
            times.append(time.perf_counter() - start)
            channel.kill()
    return statistics.median(times)


def cold_cli(repeat: int) -> list[tuple[str, float]]:
    """Wall time of ``grader grade solutions`` as a new process: the first run of a grader on a machine (the canary
    to prove, no long-lived zygote yet), then later runs (canary cached) with the user's zygote that the first run
    left (the default) and without it (``GRADER_KEEP_WARM=0``: a cold worker overlapping the imports)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GRADER_CACHE_DIR": str(Path(tmp) / "cache")}
        cmd = [
            str(Path(sys.executable).parent / "grader"),
            "grade",
            str(ROOT / "solutions"),
            "--out",
            f"{tmp}/c.json",
        ]
        for label, runs, extra in (
            ("first run (canary proved)", 1, {}),
            ("later run, shared zygote", repeat, {}),
            ("later run, GRADER_KEEP_WARM=0", repeat, {"GRADER_KEEP_WARM": "0"}),
        ):
            time.sleep(
                3.0
            )  # what the run before left in the background (the zygote's warm-up) is done
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                subprocess.run(cmd, check=True, capture_output=True, env={**env, **extra}, cwd=tmp)
                times.append(time.perf_counter() - start)
            rows.append((label, statistics.median(times)))
    return rows  # the zygote's socket went with the folder: it ends at its next look


def import_torch(repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    backends = ["inprocess", *reversed(choice.available())]
    import torch

    # one thread, as every sandboxed worker and batch slot grades: torch's default (one per core) spins under
    # load and made the in-process floor slower than a sandboxed grade (44.5 s against 23.4 s at a load of 13)
    torch.set_num_threads(1)
    grade(ROOT / "solutions", isolation="inprocess", seed=1)  # warm caches and imports once
    rows = []
    for backend in backends:
        median, score = time_grade(backend, args.repeat)
        start = worker_start(backend, args.repeat) if backend != "inprocess" else 0.0
        rows.append((backend, median, score, start))
        if (
            backend in FORKABLE
        ):  # the same backend, each worker forked from a zygote (as `grader batch` does)
            zygote = Zygote()
            assert zygote.wait_ready(), "the zygote did not start"
            median, score = time_grade(backend, args.repeat, zygote)
            rows.append(
                (f"{backend}+fork", median, score, worker_start(backend, args.repeat, zygote))
            )
            zygote.close()
    base = rows[0][1]
    print(f"grading solutions/ ({args.repeat} runs each, median wall time)")
    print(
        f"{'backend':<16} {'seconds':>8} {'score':>6} {'vs in-process':>14} {'fixed cost':>11} {'worker start':>13}"
    )
    for backend, median, score, start in rows:
        print(
            f"{backend:<16} {median:8.2f} {score:6.0f} {median / base:13.2f}x {median - base:10.2f}s {start:12.2f}s"
        )
    floor = import_torch(args.repeat) + base
    print(
        f"\n`grader grade solutions` as a fresh command (wall time) against the floor: one `import torch` plus the "
        f"in-process grade above = {floor:.2f} s"
    )
    for label, seconds in cold_cli(args.repeat):
        print(f"{label:<30} {seconds:6.2f} s {seconds / floor:6.2f}x the floor   (target <= 3 s)")


if __name__ == "__main__":
    main()
