"""Do the hidden suites exercise a batch of one and a one-token sequence? Measured by behaviour, not by
reading the tests: each probe is the reference solutions with every graded function and ``forward``
wrapped so that its output is shifted by 0.125 whenever a tensor argument has that edge shape (``L1``:
dim -2 of size 1; ``B1``: a 3-D or larger tensor with dim 0 of size 1). A suite that never feeds the
edge gives the probe full marks; one that does fails the tests that feed it.

    python benchmarks/edge_probe.py [--assignment ID ...] [--probe L1 B1] [--seed 5]

Prints, per exercise and probe, the score and the first tests that saw the edge. Exercises whose inputs
have no such dimension (``softmax``'s are any tensor; ``masks`` take sizes as ints) are exempt by nature:
read their rows with that in mind.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EDGES = {
    "L1": "t.dim() >= 2 and t.shape[-2] == 1",
    "B1": "t.dim() >= 3 and t.shape[0] == 1",
}
WRAP = """

import functools as _probe_ft


def _probe_hit(values):
    return any(isinstance(t, torch.Tensor) and ({edge}) for t in values)


def _probe_bump(o):
    if isinstance(o, torch.Tensor) and o.is_floating_point():
        return o + 0.125
    return tuple(_probe_bump(v) for v in o) if isinstance(o, tuple) else o


def _probe(f):
    @_probe_ft.wraps(f)
    def g(*a, **k):
        o = f(*a, **k)
        return _probe_bump(o) if _probe_hit(a) or _probe_hit(k.values()) else o
    return g


for _probe_name in {names!r}:
    _probe_o = globals()[_probe_name]
    if isinstance(_probe_o, type):
        _probe_o.forward = _probe(_probe_o.forward)
    else:
        globals()[_probe_name] = _probe(_probe_o)
"""


def write_probe(folder: Path, edge: str, manifest: dict[str, Any]) -> None:
    """The references, each graded name wrapped to shift its output on ``edge``."""
    folder.mkdir(parents=True)
    for assignment in manifest["assignments"]:
        for ex in assignment["exercises"]:
            src = (ROOT / "solutions" / f"{ex['module']}.py").read_text()
            wrap = WRAP.format(edge=EDGES[edge], names=ex["names"])
            (folder / f"{ex['module']}.py").write_text(src + wrap)


def grade(folder: Path, assignment: str, seed: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "grader", "grade", str(folder), "--assignment", assignment]
    done = subprocess.run(
        [*cmd, "--seed", str(seed), "--json"], capture_output=True, text=True, check=False
    )
    card: dict[str, Any] = json.loads(done.stdout)
    return card


def rows(card: dict[str, Any], edge: str) -> list[str]:
    out = []
    for ex in card["exercises"]:
        failed = [t["id"].split("::")[1] for t in ex["tests"] if t["outcome"] == "failed"]
        seen = f"{len(failed)} tests: {', '.join(failed[:2])}" if failed else "**never fed**"
        out.append(f"| {ex['id']} | {edge} | {ex['score']:g}/{ex['max_score']:g} | {seen} |")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--assignment", nargs="*", default=["attention-basics", "attention-modern"])
    p.add_argument("--probe", nargs="*", default=list(EDGES), choices=list(EDGES))
    p.add_argument("--seed", type=int, default=5)
    args = p.parse_args()
    manifest = json.loads((ROOT / "assignments.json").read_text())
    print("| exercise | probe | probe's score | tests that saw the edge |\n|---|---|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for edge in args.probe:
            write_probe(Path(tmp) / edge, edge, manifest)
            for assignment in args.assignment:
                print(
                    "\n".join(rows(grade(Path(tmp) / edge, assignment, args.seed), edge)),
                    flush=True,
                )


if __name__ == "__main__":
    main()
