"""What a batch's trusted process holds per submission: the engine's run and the end step (gradebook, summary,
report, exports), with the grading itself replaced by copies of one real scorecard (memory is the question, not
speed), side by side for this tree and another checkout.

For each N, in a fresh process per tree: the Python memory still held once the engine returned (``tracemalloc``,
what grows with the class while it is graded), the peak while ``job.finish`` writes everything, and the resident
size at the end. Prints both trees' figures, their per-submission slopes and the ratios.

    python benchmarks/trusted_memory.py [--n 100 400] [--against /path/to/older/checkout] [--card scorecard.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXPORTS = (
    "github-classroom",
    "csv",
)  # a file per submission and one for the class; Gradescope's is validated
# per document against a large schema, which only makes the run slower, not the memory different


def _real_card(path: str | None) -> dict[str, Any]:
    """A whole scorecard: the one given, else the reference solutions graded once (``process`` isolation)."""
    if path:
        card: dict[str, Any] = json.loads(Path(path).read_text("utf-8"))
        return card
    from grader.grade import grade

    return grade(ROOT / "solutions", isolation="process", seed=7, canary=False)


def measure(card_file: Path, n: int) -> dict[str, float]:
    """Run the engine over ``n`` fabricated submissions (each graded as a copy of the card), then finish."""
    import tracemalloc

    from grader.batch import engine, job
    from grader.intake.classfolder import Entry

    template = json.loads(card_file.read_text("utf-8"))

    class Copies:
        backend, slots = "process", 1

        def __init__(self, **_: Any) -> None: ...

        def prove(self, pending: list[Entry]) -> None:
            return None

        def grade(self, todo: list[Entry]) -> Any:
            for entry in todo:
                card = copy.deepcopy(template)
                card["submission"].update(student=entry.student, path=str(entry.path))
                yield engine.Result(entry, card, wall_s=0.1)

        def stop(self) -> None: ...

        def figures(self) -> dict[str, Any]:
            return {}

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        entries = [
            Entry(f"s{i:05d}", f"s{i:05d}", out / "none" / f"s{i}", "folder") for i in range(n)
        ]
        options = engine.Options(assignment=template["assignment"], seed=7, canary=False)
        assignment = options.load()
        tracemalloc.start()
        run = engine.run(entries, out=out, options=options, assignment=assignment, grading=Copies)
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        job.finish(
            run, out=out, options=options, assignment=assignment, export=("gradescope", "csv")
        )
        peak = tracemalloc.get_traced_memory()[1]
    return {"held_mb": held / 2**20, "finish_peak_mb": peak / 2**20, "max_rss_mb": _hwm_kb() / 1024}


def _hwm_kb() -> int:
    """This process's peak resident size (VmHWM; getrusage's would carry the parent's across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _child(tree: Path, card_file: Path, n: int) -> dict[str, float]:
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]);"
        "from trusted_memory import measure; from pathlib import Path;"
        "print(json.dumps(measure(Path(sys.argv[3]), int(sys.argv[4]))))"
    )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [sys.executable, "-c", code, str(tree), str(ROOT / "benchmarks"), str(card_file), str(n)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, cwd=tree, check=False)
    if done.returncode:
        sys.exit(f"{tree}: the measurement failed:\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--n", type=int, nargs="+", default=[100, 400], help="class sizes (default 100 400)"
    )
    parser.add_argument("--against", type=Path, help="another checkout to measure beside this one")
    parser.add_argument("--card", help="a whole scorecard to copy (default: grade solutions/ once)")
    args = parser.parse_args()
    trees = [ROOT] + ([args.against.resolve()] if args.against else [])
    with tempfile.TemporaryDirectory() as tmp:
        card_file = Path(tmp) / "card.json"
        card_file.write_text(json.dumps(_real_card(args.card)), "utf-8")
        print(f"one scorecard: {card_file.stat().st_size / 1024:.0f} KB of JSON")
        rows = {}
        for n in args.n:
            for t in trees:
                rows[t, n] = _child(t, card_file, n)
                print(f"  measured {t} at N={n}: {rows[t, n]}", flush=True)
    _report(trees, args.n, rows)


def _report(
    trees: list[Path], sizes: list[int], rows: dict[tuple[Path, int], dict[str, float]]
) -> None:
    keys = ("held_mb", "finish_peak_mb", "max_rss_mb")
    print(f"{'tree':<32} {'N':>6} " + " ".join(f"{k:>15}" for k in keys))
    for n in sizes:
        for t in trees:
            print(f"{str(t)[-32:]:<32} {n:>6} " + " ".join(f"{rows[t, n][k]:>15.1f}" for k in keys))
    if len(sizes) < 2:
        return
    lo, hi = min(sizes), max(sizes)
    for k in keys:
        slopes = [1024 * (rows[t, hi][k] - rows[t, lo][k]) / (hi - lo) for t in trees]
        line = " | ".join(
            f"{str(t)[-24:]}: {s:.1f} KB/submission" for t, s in zip(trees, slopes, strict=True)
        )
        ratio = (
            f"  (other / this: {slopes[1] / slopes[0]:.1f}x)"
            if len(trees) > 1 and slopes[0] > 0
            else ""
        )
        print(f"{k}: {line}{ratio}")


if __name__ == "__main__":
    main()
