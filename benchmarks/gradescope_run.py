"""Gradescope without a proof per student: ``run_autograder`` for a correct submission in a simulated container,
with the proof ``setup.sh`` made once in the image and without it (the canary proved for each submission, as
before), against the floor measured in the same run (one ``import torch`` plus the in-process grade).

The container is simulated as the project's tests do (``tests/project/release/test_gradescope.py``): the
``grader release --gradescope`` zip unpacked as ``/autograder`` lays it out, ``setup.sh`` run with its network
part skipped, ``process`` isolation (as root, the student's code runs as a leased uid), an interpreter an
unprivileged uid can run. The ways are interleaved round by round, so they share the machine's load.

    python benchmarks/gradescope_run.py [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grade_one import import_torch, time_grade  # noqa: E402

from grader.cli.main import main as grader  # noqa: E402
from grader.release import course  # noqa: E402
from tests.project.support import readable  # noqa: E402


def image(root: Path, python: Path) -> tuple[dict[str, str], float]:
    """/autograder built and set up (the proof made once); the environment run_autograder sees, and setup's time."""
    zip_path = root.parent / "autograder.zip"
    if grader(["release", "--gradescope", str(zip_path)]) != 0:
        sys.exit("grader release --gradescope failed")
    course.extract(zip_path, root / "source")
    for folder in ("submission", "results"):
        (root / folder).mkdir()
    shutil.copytree(ROOT / "solutions", root / "submission", dirs_exist_ok=True)
    env = {
        **os.environ,
        "GRADER_AUTOGRADER_ROOT": str(root),
        "GRADER_PYTHON": str(python),
        "GRADER_ISOLATION": "process",
        "GRADER_CACHE_DIR": str(root.parent / "cache"),
    }
    start = time.perf_counter()
    setup = [root / "source" / "setup.sh"]
    done = _bash(setup, {**env, "GRADER_SETUP_SKIP_INSTALL": "1"})
    if "proven in the image" not in done.stdout:
        sys.exit(
            f"setup.sh did not prove the grader:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
    return env, time.perf_counter() - start


def _bash(script: list[Path], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["bash", *map(str, script)], capture_output=True, text=True, env=env, timeout=900
    )
    if done.returncode:
        sys.exit(
            f"{script[0].name} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
    return done


def run_autograder(root: Path, env: dict[str, str]) -> tuple[float, dict[str, object]]:
    """One submission graded as Gradescope runs it: wall seconds, and its results.json's canary record."""
    start = time.perf_counter()
    _bash([root / "source" / "run_autograder"], env)
    seconds = time.perf_counter() - start
    results = json.loads((root / "results" / "results.json").read_text())
    if results["score"] != results["extra_data"]["canary"]["max_score"]:
        sys.exit(f"the reference solutions did not get full marks: {results['score']}")
    return seconds, results["extra_data"]["canary"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--repeat", type=int, default=2, help="rounds (median of each way; default 2)"
    )
    args = parser.parse_args()
    times: dict[str, list[float]] = {
        "floor": [],
        "proven in the image": [],
        "proved per submission": [],
    }
    with readable.venv() as python, tempfile.TemporaryDirectory() as tmp:
        if python is None:
            sys.exit("no interpreter of this version that an unprivileged uid can run")
        root = Path(tmp) / "autograder"
        env, setup_s = image(root, python)
        cache, saved = Path(env["GRADER_CACHE_DIR"]), Path(tmp) / "cache-after-setup"
        shutil.copytree(cache, saved)
        for _ in range(args.repeat):
            times["floor"].append(import_torch(1) + time_grade("inprocess", 1)[0])
            shutil.rmtree(cache)
            shutil.copytree(saved, cache)  # only setup.sh's proof
            seconds, proof = run_autograder(root, env)
            assert proof["cached"] is True, proof
            times["proven in the image"].append(seconds)
            shutil.rmtree(
                cache
            )  # no proof: run_autograder proves first, as it did for every submission
            seconds, proof = run_autograder(root, env)
            assert proof["cached"] is False, proof
            times["proved per submission"].append(seconds)
    _report(times, setup_s)


def _report(times: dict[str, list[float]], setup_s: float) -> None:
    floor = statistics.median(times["floor"])
    print(f"setup.sh (once per image, the proof included): {setup_s:.1f} s")
    for way, seconds in times.items():
        median = statistics.median(seconds)
        runs = ", ".join(f"{s:.1f}" for s in seconds)
        print(f"{way:<26} {median:7.2f} s  {median / floor:5.2f}x the floor   (runs: {runs})")
    print("target: run_autograder with the image's proof <= 1.5x the floor")


if __name__ == "__main__":
    main()
