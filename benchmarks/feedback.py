"""Feedback that tells the truth: what the suites say about each corpus bug.

Every bug of ``tests/corpus/buggy/<exercise>/`` (the reference solutions with one module replaced) is graded in this
process on its exercise's hidden suite (whole, seed 1234) and public suite. Per exercise and per assignment it prints:
bugs caught by the hidden suite; caught by the public suite, all and the normal-case ones (the misconception's
``normal`` flag, :mod:`grader.testing.misconceptions`); whether the first failing hidden test's message names the
bug's own misconception (its ``Misconception: id`` docstring line), names another one (misleading) or none
(neutral): a ``diagnosis [id]`` tag decides, else the ids whose ``named_by`` pattern matches the message's hints
(a bug declared ``unlisted``, a mistake no id describes, is never named and counts as normal-case); and severe
caps that fired on a bug other than the class a cap names (an overflowing or underflowing softmax: ``softmax-no-max``,
``flash-max-init``).

``--ref COMMIT`` grades with that commit's grader and suites (a temporary git worktree; the corpus, its tags and the
registry stay this checkout's), so before and after are the same benchmark. Bugs whose docstring says ``Held out:
yes`` (written after the catalogue, never tuned against) are reported again on their own. A few minutes.

    python benchmarks/feedback.py [--assignment ID] [--exercise ID ...] [--prefix NAME] [--ref COMMIT] [--json] [--bugs]
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus" / "buggy"
SEED = 1234
UNLISTED = "unlisted"  # a bug whose mistake no catalogue id describes: never named, any id misleads
CAP_CLASSES = {
    "softmax-no-max",
    "flash-max-init",
}  # what the severe tests name: outputs that overflow or underflow


def registry() -> ModuleType:
    """This checkout's misconception registry, loaded by path (the grader under test may be an older one), its
    tables first under the names it imports them by."""
    for table in ("misconceptions_basics", "misconceptions_weights", "misconceptions_modern"):
        _by_path(f"grader.testing.{table}", ROOT / "grader" / "testing" / f"{table}.py")
    return _by_path("misconceptions", ROOT / "grader" / "testing" / "misconceptions.py")


def _by_path(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def declared(bug: Path, reg: ModuleType) -> tuple[str, bool]:
    """(the bug's misconception id, whether it is held out) from its docstring."""
    doc = ast.get_docstring(ast.parse(bug.read_text())) or ""
    found = reg.DECLARED.search(doc)
    if not found:
        raise SystemExit(f"{bug}: no 'Misconception: id' line in its docstring")
    return found.group(1), bool(re.search(r"^Held out: yes\s*$", doc, re.MULTILINE))


# ----------------------------------------------------------------------------------------------- grading (raw)
def first_failure(results: list[Any]) -> dict[str, str] | None:
    failed = next((r for r in results if r.outcome not in ("passed", "skipped")), None)
    return None if failed is None else {"test": failed.name, "message": failed.message}


def grade(root: Path, bugs: list[Path]) -> list[dict[str, Any]]:
    """Raw outcomes of ``bugs`` graded by the grader and suites under ``root`` (imported from there)."""
    sys.path.insert(0, str(root))
    import torch

    import grader
    from grader.course import manifest
    from grader.scoring.points import exercise_scores
    from grader.scoring.runner import run_suites

    assert Path(grader.__file__).resolve().is_relative_to(root.resolve()), (
        f"graded with {grader.__file__}"
    )
    torch.set_num_threads(1)  # small tensors, many suites: OpenMP's threads only spin
    owner = {
        e.id: (a, e) for a in manifest.load_all(root / "assignments.json") for e in a.exercises
    }
    rows = []
    for bug in bugs:
        spec, exercise = owner[bug.parent.name]
        with tempfile.TemporaryDirectory() as tmp:
            sub = Path(tmp)
            for path in (root / "solutions").glob("*.py"):
                if path.name != "__init__.py":
                    shutil.copy(path, sub / path.name)
            shutil.copy(bug, sub / f"{exercise.module}.py")
            row: dict[str, Any] = {"bug": f"{bug.parent.name}/{bug.stem}", "assignment": spec.id}
            for suite, tests in (
                ("hidden", exercise.hidden_tests),
                ("public", exercise.public_tests),
            ):
                results, _ = run_suites([root / tests], student=sub, seed=SEED, assignment=spec)
                (score,) = [s for s in exercise_scores(results, spec) if s.id == exercise.id]
                row[suite] = {
                    "score": score.score,
                    "max": score.max_score,
                    "capped": score.capped,
                    "first": first_failure(results),
                }
        print(
            f"  {row['bug']}: hidden {row['hidden']['score']:g}/{row['hidden']['max']:g}, public "
            f"{row['public']['score']:g}/{row['public']['max']:g}",
            file=sys.stderr,
        )
        rows.append(row)
    return rows


def grade_at(ref: str, bugs: list[Path]) -> list[dict[str, Any]]:
    """:func:`grade` run by a fresh interpreter in a temporary worktree of ``ref``."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), ref],
            check=True,
        )
        try:
            out = subprocess.run(
                [sys.executable, __file__, "--raw", str(tree), *map(str, bugs)],
                check=True,
                stdout=subprocess.PIPE,
                text=True,
                cwd=tree,
            ).stdout
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True
            )
    return list(json.loads(out))


# ----------------------------------------------------------------------------------------------- judging
def judge(row: dict[str, Any], mid: str, held_out: bool, reg: ModuleType) -> dict[str, Any]:
    hidden, public = row["hidden"], row["public"]
    first = hidden["first"]
    named = reg.named_in(first["message"]) if first else set()
    verdict = reg.verdict(mid, first["message"]) if first else None
    return {
        **row,
        "misconception": mid,
        "normal": reg.BY_ID[mid].normal if mid in reg.BY_ID else True,  # unlisted: asked as normal
        "held_out": held_out,
        "caught": hidden["score"] < hidden["max"],
        "public_caught": public["score"] < public["max"],
        "verdict": verdict,
        "named": sorted(named),
        "cap_misfire": bool(hidden["capped"]) and mid not in CAP_CLASSES,
    }


COLUMNS = (
    "bugs",
    "caught",
    "public",
    "normal",
    "public_normal",
    "names",
    "misleading",
    "neutral",
    "cap_misfires",
)


def tally(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {
        "bugs": len(rows),
        "caught": sum(r["caught"] for r in rows),
        "public": sum(r["public_caught"] for r in rows),
        "normal": sum(r["normal"] for r in rows),
        "public_normal": sum(r["public_caught"] and r["normal"] for r in rows),
        "names": sum(r["verdict"] == "names" for r in rows),
        "misleading": sum(r["verdict"] == "misleading" for r in rows),
        "neutral": sum(r["verdict"] == "neutral" for r in rows),
        "cap_misfires": sum(r["cap_misfire"] for r in rows),
    }


def pct(part: int, whole: int) -> str:
    return f"{part} ({100 * part / whole:.0f}%)" if whole else "0"


def markdown(groups: list[tuple[str, dict[str, int]]]) -> str:
    lines = [
        "| | bugs | hidden caught | public caught | public caught, normal case | first message names it "
        "| misleading | neutral | cap misfires |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, t in groups:
        caught = t["caught"]
        lines.append(
            f"| {name} | {t['bugs']} | {pct(caught, t['bugs'])} | {pct(t['public'], t['bugs'])} | "
            f"{pct(t['public_normal'], t['normal'])} of {t['normal']} | {pct(t['names'], caught)} | "
            f"{pct(t['misleading'], caught)} | {pct(t['neutral'], caught)} | {t['cap_misfires']} |"
        )
    return "\n".join(lines)


def report(rows: list[dict[str, Any]]) -> str:
    groups: list[tuple[str, dict[str, int]]] = []
    for assignment in dict.fromkeys(r["assignment"] for r in rows):
        mine = [r for r in rows if r["assignment"] == assignment]
        for exercise in dict.fromkeys(r["bug"].split("/")[0] for r in mine):
            groups.append(
                (exercise, tally([r for r in mine if r["bug"].startswith(exercise + "/")]))
            )
        groups.append((f"**{assignment}**", tally(mine)))
    text = markdown(groups)
    held = [r for r in rows if r["held_out"]]
    if held:
        text += "\n\nHeld-out bugs (written after the catalogue):\n\n" + markdown(
            [
                (f"**{a}**", tally([r for r in held if r["assignment"] == a]))
                for a in dict.fromkeys(r["assignment"] for r in held)
            ]
        )
    return text


def bug_lines(rows: list[dict[str, Any]]) -> str:
    out = []
    for r in rows:
        first = r["hidden"]["first"]
        out.append(
            f"{r['bug']} [{r['misconception']}] {r['verdict']} named={r['named']}"
            f"{' CAP' if r['cap_misfire'] else ''} public={'caught' if r['public_caught'] else 'MISSED'}"
            + (f"\n    {first['test']}: {first['message'][:400]!r}" if first else "")
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--assignment", help="only this assignment's exercises")
    p.add_argument("--exercise", action="append", help="only this exercise (repeatable)")
    p.add_argument(
        "--prefix",
        help="only the bugs whose file name starts with this (heldout2_: one held-out set)",
    )
    p.add_argument("--ref", help="grade with this commit's grader and suites")
    p.add_argument("--json", action="store_true", help="print every bug's row as JSON")
    p.add_argument(
        "--bugs", action="store_true", help="also list every bug with its verdict and first message"
    )
    p.add_argument("--save", type=Path, help="also write the raw grading results to this file")
    p.add_argument(
        "--load", type=Path, help="judge the raw results saved by --save instead of grading again"
    )
    p.add_argument(
        "--raw", nargs="+", metavar=("ROOT", "BUG"), help=argparse.SUPPRESS
    )  # the --ref child
    args = p.parse_args(argv)
    if args.raw:
        print(json.dumps(grade(Path(args.raw[0]), [Path(b) for b in args.raw[1:]])))
        return 0
    reg = registry()
    bugs = sorted(CORPUS.glob("*/*.py"))
    if args.exercise:
        bugs = [b for b in bugs if b.parent.name in args.exercise]
    if args.prefix:
        bugs = [b for b in bugs if b.name.startswith(args.prefix)]
    if args.assignment:
        sys.path.insert(0, str(ROOT))
        from grader.course import manifest

        bugs = [b for b in bugs if b.parent.name in manifest.load(assignment=args.assignment).ids()]
    tags = {
        b: declared(b, reg) for b in bugs
    }  # every bug declares a known id, checked before anything is graded
    unknown = sorted(f"{b}: {t[0]}" for b, t in tags.items() if t[0] not in {*reg.BY_ID, UNLISTED})
    if unknown:
        raise SystemExit("unknown misconception ids: " + "; ".join(unknown))
    if args.load:
        saved = {r["bug"]: r for r in json.loads(args.load.read_text())}
        bugs = [b for b in bugs if f"{b.parent.name}/{b.stem}" in saved]
        raw = [saved[f"{b.parent.name}/{b.stem}"] for b in bugs]
    else:
        raw = grade_at(args.ref, bugs) if args.ref else grade(ROOT, bugs)
    if args.save:
        args.save.write_text(json.dumps(raw))
    rows = [judge(row, *tags[bug], reg) for row, bug in zip(raw, bugs)]
    print(
        json.dumps(rows, indent=1)
        if args.json
        else report(rows) + ("\n\n" + bug_lines(rows) if args.bugs else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
