"""What infinite loops cost a class (issue 30, target 2): one run, side by side.

Generates a mixed class (``batch.generate``: correct, buggy, stubs), then the same class with a share
of submissions (default 5%) that loop forever, and grades both with ``grader batch`` (``-j 2``,
namespace, the canary proved in the run), interleaved round by round. A looping submission is the
reference with ``while True: pass`` at the top of every function and method of every exercise (the
worst case: every exercise times out), or, with ``--loops one``, of ``softmax`` only.

Prints the class's wall time with and without them (the ratio: the target is <= 1.3x) and, from
the scorecards' own ``timings.total_s``, the worst looping submission against the median correct one
(the target is <= 3x), and the points the correct submissions got in both runs (a budget must not
take any).

    python benchmarks/loops.py [--n 60] [--share 0.05] [--loops every|one] [--rounds 1]
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import tempfile
import time
from pathlib import Path

from batch import MODULES, ROOT, generate, run_batch


class _LoopFirst(ast.NodeTransformer):
    """``while True: pass`` as the first statement of every function (after its docstring)."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        self.generic_visit(node)
        at = int(
            bool(node.body)
            and isinstance(node.body[0], ast.Expr)
            and isinstance(getattr(node.body[0], "value", None), ast.Constant)
        )
        node.body.insert(at, ast.While(test=ast.Constant(True), body=[ast.Pass()], orelse=[]))
        return node


def looping(source: str) -> str:
    """The module with every function looping forever before it does anything."""
    tree = ast.fix_missing_locations(_LoopFirst().visit(ast.parse(source)))
    return ast.unparse(tree) + "\n"


def add_loops(klass: Path, share: float, which: str) -> list[str]:
    """Turn ``share`` of the class (every 1/share-th submission) into looping ones; their names."""
    folders = sorted(p for p in klass.iterdir() if p.is_dir())
    step = max(1, round(1 / share)) if share > 0 else len(folders) + 1
    chosen = folders[step // 2 :: step]
    for folder in chosen:  # the references, looping in every exercise or in softmax only
        for module in MODULES:
            source = (ROOT / "solutions" / f"{module}.py").read_text()
            loops = which == "every" or module == "softmax"
            (folder / f"{module}.py").write_text(looping(source) if loops else source)
    return [f.name for f in chosen]


def _key(card: dict) -> str:
    sub = card["submission"]
    return str(sub.get("student") or Path(sub["path"]).name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60, help="submissions in the class (default 60)")
    parser.add_argument("--share", type=float, default=0.05, help="looping share (default 0.05)")
    parser.add_argument("--loops", choices=["every", "one"], default="every")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="loops-"))
    plain, mixed = work / "plain", work / "loops"
    generate(plain, args.n)
    generate(mixed, args.n)
    loopers = set(add_loops(mixed, args.share, args.loops))
    for name in loopers:  # "the same class without them"
        for f in (plain / name).iterdir():
            f.unlink()
        (plain / name).rmdir()
    print(f"class of {args.n}: {len(loopers)} looping ({args.loops}), -j {args.jobs}", flush=True)
    walls: dict[str, list[float]] = {"plain": [], "loops": []}
    for r in range(args.rounds):
        for label, klass in (("plain", plain), ("loops", mixed)):
            wall, _, cards, _ = run_batch(klass, work / f"out-{label}-{r}", args.jobs)
            walls[label].append(wall)
            report(label, wall, cards, loopers)
    best = {k: min(v) for k, v in walls.items()}
    ratio = best["loops"] / best["plain"]
    print(f"class with loops / without: {best['loops']:.1f} / {best['plain']:.1f} s = {ratio:.2f}x")
    print(f"(at {time.strftime('%Y-%m-%d %H:%M')}, work in {work})")


def report(label: str, wall: float, cards: list[dict], loopers: set[str]) -> None:
    """One run's wall time, and the looping submissions' cost against the median correct one."""
    total = {_key(c): c["timings"]["total_s"] for c in cards if "timings" in c}
    correct = [
        total[_key(c)]
        for c in cards
        if _key(c) not in loopers and c.get("score") == c.get("max_score") and _key(c) in total
    ]
    median = statistics.median(correct) if correct else float("nan")
    line = f"{label}: {wall:.1f} s, {len(cards)} cards, median correct {median:.2f} s"
    if loopers & total.keys():
        worst = max(total[n] for n in loopers & total.keys())
        kept = [_kept(c) for c in cards if _key(c) in loopers and not _loops_everywhere(c)]
        line += f"; worst looping {worst:.2f} s = {worst / median:.2f}x"
        if kept:
            line += f"; their exercises that do not loop kept full marks: {sum(kept)}/{len(kept)}"
    print(line, flush=True)


def _loops_everywhere(card: dict) -> bool:
    return all(any(t["outcome"] == "timeout" for t in e["tests"]) for e in card["exercises"])


def _kept(card: dict) -> bool:
    """Every exercise the looping submission does not loop in (the references) got full marks."""
    return all(
        e["score"] == e["max_score"]
        for e in card["exercises"]
        if not any(t["outcome"] == "timeout" for t in e["tests"])
    ) and any(t["outcome"] == "timeout" for e in card["exercises"] for t in e["tests"])


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
