"""Where a batch slot's time goes, per submission: the same submissions graded in one warm process, in-process
(the floor) and sandboxed (workers forked from a zygote, as a ``grader batch`` slot does), phase by phase.

Each submission is graded both ways in turn (the machine's load moves both alike). Phases are timed by wrapping the
functions that do them (wall seconds; the trusted process's CPU seconds beside): intake and the integrity scan,
pytest's collection, fixtures (the ``student`` fixture's set-up included), the worker's start (fork, isolation,
attestation, loading the submission), the round trips to it (send, wait, reply), its end (kill, drain, cgroups
removed), and what is left (pytest's per-test machinery and the tests' own code). The sandboxed worker's CPU is the
sum of its tests' ``cpu_s``. Run it on a quiet machine or compare within one run.

    python benchmarks/batch_breakdown.py [--n 6] [--isolation namespace]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _pytest.fixtures
import _pytest.main
import torch

from grader.grade import grade
from grader.intake import submission as intake
from grader.options import GradeOptions, launch_spec
from grader.sandbox import remote
from grader.sandbox.starters import SlotStarters
from grader.scoring import withhold

ROOT = Path(__file__).resolve().parents[1]
PHASES = {
    "intake + scan": [(intake, "take"), (withhold, "review")],
    "collection": [(_pytest.main.Session, "perform_collect")],
    "fixtures": [(_pytest.fixtures.FixtureDef, "execute")],
    "worker start": [(remote.SandboxBackend, "_start")],
    "round trips": [(remote.SandboxBackend, "_exchange")],
    "worker end": [(remote.SandboxBackend, "close")],
}


class Timer:
    """Wall and CPU seconds and calls per phase; nested phases (a worker started inside a fixture) are counted
    once, in the innermost."""

    def __init__(self) -> None:
        self.level = ""  # the isolation level being timed: every table is keyed by (level, phase)
        self.wall: dict[tuple[str, str], float] = defaultdict(float)
        self.cpu: dict[tuple[str, str], float] = defaultdict(float)
        self.calls: dict[tuple[str, str], int] = defaultdict(int)
        self.stack: list[list[float]] = []

    def wrap(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            frame = [
                time.perf_counter(),
                time.process_time(),
                0.0,
                0.0,
            ]  # start wall, start cpu, inner wall, cpu
            self.stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                self.stack.pop()
                wall, cpu = time.perf_counter() - frame[0], time.process_time() - frame[1]
                self.wall[self.level, phase] += wall - frame[2]
                self.cpu[self.level, phase] += cpu - frame[3]
                self.calls[self.level, phase] += 1
                if self.stack:
                    self.stack[-1][2] += wall
                    self.stack[-1][3] += cpu

        return timed

    def install(self) -> None:
        for phase, targets in PHASES.items():
            for owner, name in targets:
                setattr(owner, name, self.wrap(phase, getattr(owner, name)))

    def reset(self) -> None:
        for table in (self.wall, self.cpu, self.calls):
            table.clear()

    def phases(self, level: str, n: int) -> dict[str, tuple[float, float, float]]:
        """Each phase's mean (wall, cpu, calls) per grade at ``level``."""
        return {
            p: (self.wall[level, p] / n, self.cpu[level, p] / n, self.calls[level, p] / n)
            for p in PHASES
        }


class Level:
    """Grades at one isolation level, as a batch slot makes them (workers forked from this user's zygote)."""

    def __init__(self, isolation: str) -> None:
        self.isolation, self.options = (
            isolation,
            GradeOptions(isolation=isolation, seed=0, threads=1),
        )
        self.assignment = self.options.load()
        self.starts = (
            None
            if isolation == "inprocess"
            else SlotStarters(
                lambda slot: launch_spec(self.assignment, isolation, slot=slot, threads=1),
                0,
                "fork",
                shared_wait_s=30,
            )
        )
        self.walls: list[float] = []
        self.cpus: list[float] = []
        self.workers: list[float] = []

    def grade(self, sub: Path, timer: Timer, *, keep: bool = True) -> None:
        timer.level = self.isolation
        t, c = time.perf_counter(), time.process_time()
        card = grade(
            sub,
            options=self.options,
            assignment=self.assignment,
            starter=self.starts.next() if self.starts else None,
        )
        if self.starts:
            self.starts.done()
        if keep:
            self.walls.append(time.perf_counter() - t)
            self.cpus.append(time.process_time() - c)
            self.workers.append(
                sum(t.get("cpu_s", 0.0) for e in card["exercises"] for t in e["tests"])
            )

    def figures(self) -> tuple[float, float, float]:
        """Median wall, trusted CPU and worker CPU seconds per grade."""
        return (
            statistics.median(self.walls),
            statistics.median(self.cpus),
            statistics.median(self.workers),
        )

    def close(self) -> None:
        if self.starts:
            self.starts.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--n", type=int, default=6, help="gradings of each submission kind (default 6)"
    )
    parser.add_argument("--isolation", default="namespace")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as a slot does
    subs = [ROOT / "solutions", ROOT / "exercises"] * (args.n // 2)
    timer = Timer()
    timer.install()
    levels = [Level("inprocess"), Level(args.isolation)]
    try:
        for level in levels:
            level.grade(subs[0], timer, keep=False)  # first uses: imports, the worker's zygote
        timer.reset()
        for sub in subs:
            for level in levels:
                level.grade(sub, timer)
    finally:
        for level in levels:
            level.close()
    print(
        f"{len(subs)} gradings (references and stubs in turn), load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'':16}" + "".join(f"{level.isolation:>34}" for level in levels))
    print(f"{'':16}" + "   wall s    cpu s   calls        " * len(levels))
    tables = [timer.phases(level.isolation, len(subs)) for level in levels]
    for phase in PHASES:
        print(
            f"{phase:16}"
            + "".join(f"{w:9.3f}{c:9.3f}{k:8.0f}        " for w, c, k in (t[phase] for t in tables))
        )
    figures = [level.figures() for level in levels]
    for label, i in (("whole grade", 0), ("trusted cpu", 1), ("worker cpu", 2)):
        print(f"{label:16}" + "".join(f"{f[i]:9.3f}" + " " * 25 for f in figures))
    floor, sandboxed = figures[0][0], figures[1][0]
    print(
        f"ratio           : a sandboxed grade is {sandboxed / floor:.2f}x the in-process one (wall, one process); "
        f"CPU {(figures[1][1] + figures[1][2]) / (figures[0][1] + figures[0][2]):.2f}x"
    )


if __name__ == "__main__":
    main()
