"""Benchmark: the sandboxed worker's allocator, quick between measured calls against fixed, in one run.

A worker keeps freed blocks up to 32 MiB in its heap between measured calls and returns them to the
kernel just before one (``grader/inside/allocator.py``); before 0.4.14 every block of 128 KiB or more
was mapped fresh and unmapped when freed, all the time. This grades ``solutions/`` in workers forked
from a zygote both ways, in turn, each in a fresh process (the fixed way from a copy of the grader
whose allocator switches do nothing), and prints per grade the worker's CPU, the trusted side's, the
in-process floor measured in the same process, their ratios, and the memory figures of the measured
calls (read from the sandbox's memory cgroup, as graded).

    python benchmarks/worker_heap.py [--rounds 3] [--grades 3] [--assignment ID ...]

Needs the namespace sandbox (root on Linux): the worker's CPU is read from its cgroup.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# One process per mode and round: a zygote, one warm-up grade, then timed grades.
LOOP = r"""
import json, resource, sys, time
from pathlib import Path
import torch
torch.set_num_threads(1)
import grader
assert Path(grader.__file__).resolve().is_relative_to(Path.cwd().resolve()), grader.__file__
from grader.course import manifest
from grader.grade import grade
from grader.sandbox import memwatch, remote, workerproc
from grader.sandbox.starters import ZygoteStarter
from grader.sandbox.zygote_client import Zygote

sub, assignment, grades = Path(sys.argv[1]), manifest.load(assignment=sys.argv[2]), int(sys.argv[3])
worker_cpu, figures = [0.0], []
kill = workerproc.WorkerProcess.kill
def counted_kill(self):
    worker_cpu[0] += self.cpu_seconds()
    kill(self)
workerproc.WorkerProcess.kill = counted_kill
read = memwatch.figures
def kept(stats, watch):
    out = read(stats, watch)
    figures.append(out.get("max_memory_bytes", -1.0) / 2**20)
    return out
remote.memwatch.figures = kept

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

zygote = Zygote()
assert zygote.wait_ready(), "the zygote did not start"
def sandboxed(seed):
    return grade(sub, isolation="namespace", seed=seed, starter=ZygoteStarter(zygote), assignment=assignment)
sandboxed(1), grade(sub, isolation="inprocess", seed=1, assignment=assignment)
rows = {"floor": [], "trusted": [], "worker": []}
for i in range(grades):
    t = cpu(); card = grade(sub, isolation="inprocess", seed=10 + i, assignment=assignment)
    rows["floor"].append(cpu() - t)
    t, w, figures[:] = cpu(), worker_cpu[0], []
    card = sandboxed(10 + i)
    rows["trusted"].append(cpu() - t)
    time.sleep(0.2)  # the worker's end is counted when its session closes
    rows["worker"].append(worker_cpu[0] - w)
    assert card["score"] == card["max_score"], card["error"] or "the reference lost points"
rows["memory_mib"] = list(figures)
zygote.close()
print("ROWS " + json.dumps(rows))
"""


def fixed_copy(tmp: Path) -> Path:
    """A copy of the grader whose worker never switches its allocator: 128 KiB, fixed, as started."""
    tree = tmp / "fixed"  # with the course: the manifest's files must lie in its folder
    skip = shutil.ignore_patterns("__pycache__", ".git", ".venv*", "out", "benchmarks", "docs")
    shutil.copytree(ROOT, tree, ignore=skip)
    path = tree / "grader" / "inside" / "allocator.py"
    text = path.read_text()
    for name in ("quick", "honest"):
        text = text.replace(f"def {name}() -> None:", f"def {name}() -> None:\n    return None")
    path.write_text(text)
    return tree


def one(tree: Path, assignment: str, grades: int) -> dict[str, list[float]]:
    out = subprocess.run(
        [sys.executable, "-c", LOOP, str(tree / "solutions"), assignment, str(grades)],
        capture_output=True,
        text=True,
        env={**_env(), "PYTHONPATH": str(tree)},
        cwd=tree,  # `python -c` puts its folder first on the path
        check=False,
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("ROWS ")), None)
    if line is None:
        raise SystemExit(f"a grading loop failed:\n{out.stderr[-3000:]}")
    return json.loads(line[5:])


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def report(assignment: str, runs: dict[str, list[dict[str, list[float]]]]) -> None:
    def med(mode: str, key: str) -> float:
        return statistics.median(x for run in runs[mode] for x in run[key])

    print(f"{assignment}:")
    for mode in ("fixed", "quick"):
        floor, trusted, worker = (med(mode, k) for k in ("floor", "trusted", "worker"))
        memory = sorted({round(x, 1) for run in runs[mode] for x in run["memory_mib"]})
        print(
            f"  {mode:<6} worker {worker:.3f} CPU-s, trusted {trusted:.3f}, floor {floor:.3f}: "
            f"sandboxed {(worker + trusted) / floor:.2f}x the floor; memory figures {memory} MiB"
        )
    ratio = med("quick", "worker") / med("fixed", "worker")
    print(f"  quick / fixed: the worker's CPU {ratio:.2f}x")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="processes per mode, interleaved")
    p.add_argument("--grades", type=int, default=3, help="timed grades in each process")
    p.add_argument("--assignment", action="append", help="default: attention-basics and -modern")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"fixed": fixed_copy(Path(tmp)), "quick": ROOT}
        for assignment in args.assignment or ["attention-basics", "attention-modern"]:
            runs: dict[str, list[dict[str, list[float]]]] = {"fixed": [], "quick": []}
            for _ in range(args.rounds):
                for mode, tree in trees.items():
                    runs[mode].append(one(tree, assignment, args.grades))
            report(assignment, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
