"""Both sides of the integrity check, measured: honest styles must lose 0 points, every evasion must be caught.

Students come from tests/project/support/trust_corpus.py: the honest styles of tests/corpus/honest (each replaces some of the
reference solutions' modules, or is one file for the whole assignment) and the evasions of
tests/corpus/hostile/integrity and .../structure (each replaces the module its docstring names).

1. Statically, every student: the scan's verdict (grader.scoring.withhold.review), with no parse cache.
   Honest: points withheld (must be 0) and review findings (allowed: they cost nothing). Evasions: caught as
   withhold / review, or left to behaviour (structure tricks: a hidden test), or missed (must be 0). Scan time.
2. End to end (``--e2e``, default on): ``grader batch`` grades the students under each isolation level this machine
   has (namespace forked and cold; process), each student on its own exercises only (one batch per exercise set).
   Honest: points lost (must be 0). Evasions: caught when the exercise is withheld, or a review finding is on the
   card and every failing test of the exercise carries the runtime ban's refusal, or (structure) the named hidden
   test failed; missed otherwise (must be 0).

    python benchmarks/integrity.py              # static + end to end, every level available
    python benchmarks/integrity.py --no-e2e     # static only (seconds)
    python benchmarks/integrity.py --levels namespace-fork
    python benchmarks/integrity.py --levels process-fork none-cold   # as a non-root user: process is refused
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.course import manifest  # noqa: E402
from grader.intake import submission as intake  # noqa: E402
from grader.sandbox import choice  # noqa: E402
from grader.scoring import integrity, withhold  # noqa: E402
from tests.project.support import trust_corpus  # noqa: E402

ASSIGNMENTS = {a.id: a for a in manifest.load_all()}
LEVELS = {
    "namespace-fork": ("namespace", "fork"),
    "namespace-cold": ("namespace", "off"),
    "process-fork": ("process", "fork"),
    "none-cold": ("none", "off"),
}  # none: what a non-root user without bubblewrap may pass, knowingly
REFUSED = "is not allowed in this exercise"
REFUSALS: dict[str, str] = {}  # level -> what grader batch said when it refused to grade under it


def static(students: list[trust_corpus.Student], work: Path) -> dict[str, dict]:
    """Per student: withheld exercises, points withheld, review findings, scan seconds (no parse cache)."""
    out = {}
    for student in students:
        assignment = ASSIGNMENTS[student.assignment]
        taken = intake.take(
            student.stage(work / "static" / student.name),
            modules={e.module for e in assignment.exercises},
        )
        integrity._parse_cached.cache_clear()  # every file read afresh: what one real submission costs
        t0 = time.process_time()  # CPU: the machine may be shared
        verdict = withhold.review(taken.box, assignment, taken.single_module)
        seconds = time.process_time() - t0
        files = len(list(taken.box.glob("*.py")))
        taken.cleanup()
        out[student.name] = {
            "withheld": sorted(verdict.withheld),
            "seconds": seconds,
            "files": files,
            "points": sum(e.points for e in assignment.exercises if e.id in verdict.withheld),
            "review": [(f.file, f.line, f.rule) for f in verdict.needs_review],
        }
    return out


def static_caught(student: trust_corpus.Student, verdict: dict) -> str:
    if student.exercises[0] in verdict["withheld"]:
        return "withhold"
    if any(file == f"{student.module}.py" for file, _, _ in verdict["review"]):
        return "review"
    return "behaviour" if student.caught == "test" else "missed"


def e2e(students: list[trust_corpus.Student], work: Path, level: str) -> dict[str, dict]:
    """Grade every student with `grader batch` under ``level``, one batch per (assignment, exercise set)."""
    backend, warm = LEVELS[level]
    groups: dict[tuple[str, tuple[str, ...]], list[trust_corpus.Student]] = defaultdict(list)
    for student in students:
        groups[(student.assignment, student.exercises)].append(student)
    cards: dict[str, dict] = {}
    for n, ((assignment, exercises), members) in enumerate(sorted(groups.items())):
        folder = work / level / f"class-{n}"
        for student in members:
            path = student.stage(folder / "staged" / student.name)
            target = folder / "class" / (student.name + (".py" if path.is_file() else ""))
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
        cmd = [
            str(Path(sys.executable).parent / "grader"),
            "batch",
            str(folder / "class"),
            "--out",
            str(folder / "out"),
            "--quiet",
            "--assignment",
            assignment,
            "--isolation",
            backend,
            "--warm",
            warm,
            "-j",
            "2",
            *(f"--exercise={e}" for e in exercises),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd="/")
        if (
            done.returncode == 2
        ):  # refused before grading anything (a level this user may not choose)
            REFUSALS[level] = (done.stderr.strip().splitlines() or ["exit 2"])[-1]
        for card_path in (folder / "out" / "scorecards").glob("*.json"):
            card = json.loads(card_path.read_text())
            cards[card["submission"].get("student", card_path.stem)] = card
    return cards


def e2e_verdict(student: trust_corpus.Student, card: dict | None) -> tuple[str, float]:
    """(caught-as or 'honest', points lost) from a scorecard."""
    if card is None or card["status"] != "graded":
        return ("error: " + ((card or {}).get("error") or {}).get("kind", "no scorecard"), 0.0)
    lost = round(card["max_score"] - card["score"], 6)
    if student.kind == "honest":
        return "honest", lost
    by_id = {e["id"]: e for e in card["exercises"]}
    entry = by_id[student.exercises[0]]
    failed = [t for t in entry["tests"] if t["outcome"] != "passed" and t["counted"]]
    if entry.get("withheld"):
        return "withhold", lost
    if student.caught == "test":
        return (
            "behaviour" if any(t["name"].startswith(student.test) for t in failed) else "missed"
        ), lost
    refused = bool(failed) and all(REFUSED in t["message"] for t in failed)
    review = any(f["severity"] == "review" for f in card["integrity"])
    return ("review" if refused and review else "missed"), lost


def report_static(
    honest: list[trust_corpus.Student], evasions: list[trust_corpus.Student], seen: dict[str, dict]
) -> None:
    times = [v["seconds"] for v in seen.values()]
    lost = sum(seen[s.name]["points"] for s in honest)
    reviewed = [s.name for s in honest if seen[s.name]["review"]]
    print(
        f"static scan of {len(seen)} submissions ({sum(v['files'] for v in seen.values())} files), no parse cache:"
    )
    print(
        f"  scan CPU time per submission: mean {statistics.mean(times) * 1000:.0f} ms, median "
        f"{statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms"
    )
    print(
        f"  honest styles: {len(honest)}; points withheld: {lost:g} (must be 0); with a review finding "
        f"(costs nothing): {len(reviewed)} {reviewed}"
    )
    kinds = defaultdict(list)
    for student in evasions:
        kinds[static_caught(student, seen[student.name])].append(student.name)
    print(
        f"  evasions: {len(evasions)}; caught as withhold {len(kinds['withhold'])}, review {len(kinds['review'])}, "
        f"left to behaviour {len(kinds['behaviour'])}, missed {len(kinds['missed'])} (must be 0) {kinds['missed']}"
    )
    wrong = [
        s.name for s in evasions if static_caught(s, seen[s.name]) not in (s.caught, "behaviour")
    ]
    print(f"  evasions caught otherwise than their docstring says: {wrong}")


def report_e2e(
    level: str,
    honest: list[trust_corpus.Student],
    evasions: list[trust_corpus.Student],
    cards: dict,
    seconds: float,
) -> None:
    verdicts = {s.name: e2e_verdict(s, cards.get(s.name)) for s in [*honest, *evasions]}
    lost = {s.name: verdicts[s.name][1] for s in honest if verdicts[s.name][1]}
    kinds = defaultdict(list)
    for student in evasions:
        kinds[verdicts[student.name][0]].append(student.name)
    missed = [
        name
        for kind, names in kinds.items()
        if kind not in ("withhold", "review", "behaviour")
        for name in names
    ]
    if level in REFUSALS:
        print(f"end to end, {level}: refused by grader batch ({REFUSALS[level]}); nobody graded")
        return
    ungraded = [name for name, (kind, _) in verdicts.items() if kind.startswith("error")]
    print(
        f"end to end, {level}: not graded (error scorecard or none) {len(ungraded)} (must be 0) {ungraded}"
    )
    print(
        f"end to end, {level} ({seconds:.0f} s wall): honest points lost {sum(lost.values()):g} (must be 0) {lost}; "
        f"evasions caught as withhold {len(kinds['withhold'])}, review {len(kinds['review'])}, behaviour "
        f"{len(kinds['behaviour'])}, missed {len(missed)} (must be 0) {missed}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-e2e", dest="e2e", action="store_false")
    parser.add_argument(
        "--levels",
        nargs="*",
        default=[lvl for lvl in LEVELS if lvl != "none-cold"],
        choices=list(LEVELS),
    )
    args = parser.parse_args()
    honest, evasions = trust_corpus.honest(), trust_corpus.evasions()
    with tempfile.TemporaryDirectory(prefix="integrity-bench-") as tmp:
        work = Path(tmp)
        report_static(honest, evasions, static([*honest, *evasions], work))
        if not args.e2e:
            return
        available = set(choice.available())
        for level in args.levels:
            if LEVELS[level][0] not in available:
                print(f"end to end, {level}: not available on this machine")
                continue
            t0 = time.perf_counter()
            cards = e2e([*honest, *evasions], work, level)
            report_e2e(level, honest, evasions, cards, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
