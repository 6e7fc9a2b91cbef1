"""Benchmark: the project's own suite as .ci/run runs it, timed, and where its CPU goes; beside other commits.

For this checkout (with the interpreter running this script) and each ``--ref`` (a git worktree of that commit and
a fresh venv built there as .ci/run builds one), runs the README's test command, ``python -m pytest -n auto --dist
loadfile --no-loadscope-reorder``, and prints the wall time, the machine's busy and idle CPU seconds over the run
(/proc/stat: every process, sandboxed workers and zygotes included), the test counts and failures, and the
costliest modules (wall seconds, the test process's own CPU and its reaped children's: benchmarks/suite_plugin.py;
a lower bound, since workers forked by a zygote or reaped inside a sandbox's pid namespace are not a test's
children: the machine's busy figure counts them); then each run's wall-time ratio to this checkout's. Rounds
take turns (``--repeat``), so the machine's other load falls on every commit alike; the best round of each is
compared.

    python benchmarks/suite.py [--ref 313a8ab] [--repeat 1] [--top 15] [--json]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = Path(__file__).resolve().with_name("suite_plugin.py")
COMMAND = [
    "-m",
    "pytest",
    "-n",
    "auto",
    "--dist",
    "loadfile",
    "--no-loadscope-reorder",
    "-q",
    "-p",
    "suite_plugin",
]


@dataclass
class Run:
    label: str
    wall_s: float
    busy_cpu_s: float
    idle_cpu_s: float
    counts: dict[str, int]
    modules: dict[str, dict[str, float]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # pytest's FAILED/ERROR summary lines


def machine_cpu() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / tick, idle / tick


def checkout(ref: str, scratch: Path) -> tuple[Path, str]:
    """A worktree of ``ref`` and a venv with its dependencies, built as .ci/run builds one."""
    tree = scratch / re.sub(r"\W", "_", ref)
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), ref],
        check=True,
        capture_output=True,
    )
    python = str(tree / ".venv-bench" / "bin" / "python")
    subprocess.run([sys.executable, "-m", "venv", str(tree / ".venv-bench")], check=True)
    for spec in (["torch==2.13.0"], ["-e", ".[dev]"]):
        subprocess.run(
            [python, "-m", "pip", "install", "-q", *spec],
            cwd=tree,
            check=True,
            capture_output=True,
            env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        )
    return tree, python


def run_suite(label: str, tree: Path, python: str, scratch: Path) -> Run:
    log = scratch / f"{label}-{time.monotonic_ns()}.jsonl"
    plugin_dir = scratch / "plugin"
    plugin_dir.mkdir(exist_ok=True)
    shutil.copy(
        PLUGIN, plugin_dir / PLUGIN.name
    )  # a folder of its own on PYTHONPATH: nothing else to shadow
    env = {**os.environ, "PYTHONPATH": str(plugin_dir), "SUITE_BENCH_LOG": str(log)}
    busy, idle = machine_cpu()
    start = time.monotonic()
    done = subprocess.run([python, *COMMAND], cwd=tree, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    busy2, idle2 = machine_cpu()
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-500:]
    counts = {
        kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?)", tail)
    }
    failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    return Run(label, wall, busy2 - busy, idle2 - idle, counts, modules(log), failed)


def modules(log: Path) -> dict[str, dict[str, float]]:
    """Per test module: summed wall seconds, own CPU and reaped children's CPU of its tests."""
    out: dict[str, dict[str, float]] = collections.defaultdict(
        lambda: {"wall": 0.0, "cpu": 0.0, "children": 0.0}
    )
    if log.exists():
        for line in log.read_text().splitlines():
            record = json.loads(line)
            module = out[record["test"].split("::")[0].rsplit("/", 1)[-1]]
            for key in module:
                module[key] += record[key]
    return dict(out)


def report(runs: list[Run], top: int) -> None:
    base = runs[0]
    print(
        f"{'run':<14} {'wall s':>8} {'busy CPU s':>11} {'idle CPU s':>11} {'busy/wall':>10} {'x wall':>7}  tests"
    )
    for r in runs:
        print(
            f"{r.label:<14} {r.wall_s:8.1f} {r.busy_cpu_s:11.1f} {r.idle_cpu_s:11.1f} {r.busy_cpu_s / r.wall_s:10.2f} "
            f"{r.wall_s / base.wall_s:7.2f}  {r.counts}"
        )
    for r in runs:
        for line in r.failed:
            print(f"  {r.label}: {line[:200]}")
    for r in runs:
        print(
            f"\n{r.label}: the {top} costliest modules (own + children CPU s; wall s summed over their tests)"
        )
        rows = sorted(r.modules.items(), key=lambda kv: -(kv[1]["cpu"] + kv[1]["children"]))[:top]
        for name, m in rows:
            print(f"  {m['cpu'] + m['children']:7.1f} CPU  {m['wall']:7.1f} wall  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--ref", action="append", default=[], help="another commit to run beside this checkout"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds; each commit runs once a round"
    )
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument(
        "--json", action="store_true", help="print every run as JSON instead of the tables"
    )
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="suite-bench-"))
    scratch.chmod(
        0o755
    )  # mkdtemp's 0700 would hide a ref's code from the tests that grade as an unprivileged uid
    trees = [("this", ROOT, sys.executable)]
    try:
        trees += [(ref, *checkout(ref, scratch)) for ref in args.ref]
        rounds = [
            [run_suite(label, tree, python, scratch) for label, tree, python in trees]
            for _ in range(args.repeat)
        ]
    finally:
        for _, tree, _ in trees[1:]:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                capture_output=True,
            )
        shutil.rmtree(scratch, ignore_errors=True)
    best = [min((rnd[i] for rnd in rounds), key=lambda r: r.wall_s) for i in range(len(trees))]
    if args.json:
        print(json.dumps([asdict(r) for rnd in rounds for r in rnd], indent=1))
    else:
        report(best, args.top)
    return 0 if not best[0].failed else 1


if __name__ == "__main__":
    sys.exit(main())
