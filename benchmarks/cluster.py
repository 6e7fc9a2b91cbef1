"""Benchmark grading beyond one machine (issue 15) against one machine, on the same class and seed.

Generates N submissions (as ``benchmarks/batch.py`` does: mostly correct, some buggy, some hostile),
warms the canary cache, then grades the class

- on one machine: ``grader batch -j J``;
- as 2 shards run concurrently with ``-j J/2`` each (two smaller machines sharing the work; each shard
  reads ``GRADER_SHARD=K/2`` through ``--shard auto``), then ``grader merge``;
- as 2 shards run one after the other with ``-j J`` each (one machine at a time), then ``grader merge``
  (layer 1);
- on a local Dask cluster of J worker processes: ``grader batch --dask local:J`` (layer 2: the cluster's
  start, each worker's self-check, one task per submission, the results sent back and checked),

and prints each way's wall time, submissions per minute, its overhead against the single-machine run
(wall ratio − 1: process start, a zygote and a canary check per shard, and the merge; for Dask, the
cluster and its checks), and whether each gradebook equals the single run's.

    python benchmarks/cluster.py                 # N=24, J=2
    python benchmarks/cluster.py --n 200         # the issue's target size
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.batch import generate  # noqa: E402  (the same class generator as the batch benchmark)

SHARDS = 2


def grader(*args: str, env: dict[str, str] | None = None) -> float:
    """Run ``grader ARGS`` as a fresh process; return its wall time (exit 0 or 1 expected)."""
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-I", "-m", "grader", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    if done.returncode not in (0, 1):
        sys.exit(f"grader {args[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.monotonic() - t0


def single(klass: Path, out: Path, jobs: int, common: list[str]) -> float:
    return grader("batch", str(klass), "--out", str(out), "-j", str(jobs), *common)


def shard_run(
    klass: Path, work: Path, jobs: int, common: list[str], *, concurrent: bool
) -> tuple[float, float]:
    """Wall time of the shards and of the merge (shards concurrently with jobs/2 slots each, or in turn)."""

    def one(k: int) -> float:
        return grader(
            "batch",
            str(klass),
            "--out",
            str(work / f"shard-{k}"),
            "-j",
            str(per),
            "--shard",
            "auto",
            *common,
            env={"GRADER_SHARD": f"{k}/{SHARDS}"},
        )

    per = max(1, jobs // SHARDS) if concurrent else jobs
    t0 = time.monotonic()
    if concurrent:
        with ThreadPoolExecutor(SHARDS) as pool:
            list(pool.map(one, range(1, SHARDS + 1)))
    else:
        for k in range(1, SHARDS + 1):
            one(k)
    shards = time.monotonic() - t0
    merge = grader(
        "merge",
        *(str(work / f"shard-{k}") for k in range(1, SHARDS + 1)),
        "--out",
        str(work / "merged"),
    )
    return shards, merge


def dask_run(klass: Path, out: Path, jobs: int, common: list[str]) -> float:
    return grader("batch", str(klass), "--out", str(out), "--dask", f"local:{jobs}", *common)


def report(name: str, walls: list[float], n: int, base: float | None, note: str = "") -> None:
    """Best of the rounds (the least disturbed by other load on the machine), every round in brackets."""
    wall = min(walls)
    rate = 60 * n / wall
    overhead = (
        f"  overhead {100 * (wall / base - 1):+6.1f}% (ratio {wall / base:.3f})" if base else ""
    )
    rounds = ", ".join(f"{w:.1f}" for w in walls)
    print(
        f"{name:<34} {wall:7.1f} s  {rate:6.1f} submissions/min{overhead}  [rounds: {rounds} s]{note}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=24, help="submissions to generate (default 24)")
    parser.add_argument(
        "-j", "--jobs", type=int, default=2, help="slots of the single-machine run (default 2)"
    )
    parser.add_argument(
        "--seed", type=int, default=7, help="one seed for every run, so the outputs compare"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds of the four ways, interleaved (best is shown)"
    )
    parser.add_argument(
        "--no-dask", action="store_true", help="leave out the Dask row (no [distributed] extra)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="grader-cluster-bench-"))
    os.environ["GRADER_CACHE_DIR"] = str(work / "cache")  # a canary proof of our own, warmed below
    common = ["--seed", str(args.seed), "--quiet"]
    ways = {
        True: f"{SHARDS} shards at once, -j {max(1, args.jobs // SHARDS)} each",
        False: f"{SHARDS} shards in turn, -j {args.jobs} each",
    }
    try:
        kinds = generate(work / "class", args.n)
        generate(work / "warm", 1)
        print(f"{args.n} submissions {kinds}, {os.cpu_count()} cores, {SHARDS} shards", flush=True)
        print(
            f"canary warm-up (not counted): {single(work / 'warm', work / 'warm-out', 1, common):.1f} s",
            flush=True,
        )
        walls: dict[object, list[float]] = {"single": [], True: [], False: [], "dask": []}
        merges, same = [], True
        for r in range(
            args.repeat
        ):  # fresh output folders each round: a rerun would skip every submission
            expected = work / f"single-{r}" / "gradebook.csv"
            walls["single"].append(single(work / "class", work / f"single-{r}", args.jobs, common))
            for concurrent in (True, False):
                folder = work / f"{'concurrent' if concurrent else 'sequential'}-{r}"
                shards, merge = shard_run(
                    work / "class", folder, args.jobs, common, concurrent=concurrent
                )
                walls[concurrent].append(shards + merge)
                merges.append(merge)
                same &= (folder / "merged" / "gradebook.csv").read_text() == expected.read_text()
            if not args.no_dask:
                walls["dask"].append(
                    dask_run(work / "class", work / f"dask-{r}", args.jobs, common)
                )
                same &= (work / f"dask-{r}" / "gradebook.csv").read_text() == expected.read_text()
        base = min(walls["single"])
        report(f"one machine, -j {args.jobs}", walls["single"], args.n, None)
        for concurrent, how in ways.items():
            report(how + " + merge", walls[concurrent], args.n, base)
        if walls["dask"]:
            report(f"Dask, local:{args.jobs} (TLS)", walls["dask"], args.n, base)
        print(
            f"merge alone: {min(merges):.1f} s; every merged{' and Dask' if walls['dask'] else ''} gradebook "
            f"{'equals' if same else 'DIFFERS FROM'} the single-machine one",
            flush=True,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
