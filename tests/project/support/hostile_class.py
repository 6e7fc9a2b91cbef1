"""The whole hostile corpus as one class of students, batch-graded once per kind of worker.

Students: one per top-level attack (it replaces ``softmax.py`` in a correct submission), one with no
``softmax.py`` at all, one per integrity attack (it replaces the exercise its docstring names), one per
hostile notebook (it replaces ``softmax``), and honest controls (the reference solutions, twice, under odd ids, and a
sample of the honest styles of tests/corpus/honest).

test_hostile_class.py grades it with `grader batch .` from inside the class folder, every worker forked from
this user's zygote (the batch's default); test_hostile_class_root.py from the repository root with
``--warm off``, every worker freshly exec'd. Each module grades the class once and every test about an attack
asserts on that attack's scorecard: the corpus is graded twice in the project's suite, not once per test module
that looks at it (it was graded four times: 260 CPU-seconds, a quarter of the suite).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.project.support.common import CORPUS, solutions_copy

EXERCISES = ["softmax", "masks", "scaled_dot_product", "efficient_attention"]
CONTROLS = (
    "honest-one",
    "=HONEST+2",
)  # the second id would be a live formula if the gradebook did not escape it
MISSING = "hostile-missing"  # a correct submission without softmax.py
HOSTILE = sorted((CORPUS / "hostile").glob("*.py"))
INTEGRITY = sorted((CORPUS / "hostile" / "integrity").glob("*.py"))
NOTEBOOKS = sorted((CORPUS / "hostile" / "intake").glob("*.ipynb"))
LIMIT_S = (
    2  # per-test CPU seconds (the manifest's are 10-30 s): the controls' slowest test takes 0.65 s
)
_ATTACKED = re.compile(r"Attack \((\w+)\)")
_CAUGHT = re.compile(r"Caught: (withhold|review|test)")
# honest styles graded beside the attacks (tests/corpus/honest; all of them: benchmarks/integrity.py): each keeps full
# marks, whatever its names look like (a local `eval`, a message naming the grader, os for a debug flag)
HONEST_SAMPLE = (
    "softmax_eval_and_vars_locals",
    "softmax_assert_and_grader_message",
    "masks_debug_env_os",
    "sdp_matmul_compile_local",
    "flash_helpers_partial_and_messages",
)


def caught_as(path: Path) -> str:
    """How an integrity attack is caught, from its docstring: withhold, review or test."""
    found = _CAUGHT.search(" ".join(path.read_text("utf-8", "replace")[:600].split()))
    return found.group(1) if found else ""


def attacked_module(path: Path) -> str:
    """The exercise an attack replaces: its docstring's "Attack (module)", else softmax."""
    found = _ATTACKED.search(path.read_text("utf-8", "replace")[:400])
    return found.group(1) if found else "softmax"


def student_of(attack: Path) -> str:
    return f"{attack.parent.name}-{attack.stem}"


# integrity attacks caught by a review finding: the runtime ban refuses what they reach (their attacked functions
# earn nothing) while the rest of the exercise, honest, keeps its points
REFUSED_AT_RUN_TIME = frozenset(student_of(p) for p in INTEGRITY if caught_as(p) == "review")


def build(folder: Path) -> dict[str, str]:
    """Write the class into ``folder``; return, per student id, the exercise that student attacks ('' for none)."""
    attacked: dict[str, str] = {}
    for attack in [*HOSTILE, *INTEGRITY, *NOTEBOOKS]:
        module = attacked_module(attack) if attack.suffix == ".py" else "softmax"
        sub = solutions_copy(folder / student_of(attack))
        (sub / f"{module}.py").unlink()
        shutil.copy(attack, sub / f"{module}{attack.suffix}")
        attacked[student_of(attack)] = module
    (solutions_copy(folder / MISSING) / "softmax.py").unlink()
    attacked[MISSING] = "softmax"
    for control in CONTROLS:
        solutions_copy(folder / control)
        attacked[control] = ""
    for style in HONEST_SAMPLE:
        sub = solutions_copy(folder / f"honest-{style}")
        for file in (CORPUS / "honest" / style).glob("*.py"):
            shutil.copy(file, sub / file.name)
        attacked[f"honest-{style}"] = ""
    return attacked


@dataclass(frozen=True)
class Graded:
    """One batch of the class: where it ran, how, and its scorecards by student id."""

    out: Path
    attacked: dict[str, str]
    done: subprocess.CompletedProcess[str]
    cards: dict[str, dict]
    forked: bool  # workers forked from a zygote (else freshly exec'd)
    ended: float  # time.time() when the batch command returned
    level: str = "namespace"  # the isolation level it was graded under

    def card(self, attack: str) -> dict:
        """The scorecard of the student whose `softmax.py` is the top-level attack ``attack`` ('' for none)."""
        return self.cards[f"hostile-{attack}" if attack else MISSING]


def grade_class(
    folder: Path,
    attacked: dict[str, str],
    *,
    cwd: Path,
    target: str,
    out: Path,
    warm: str,
    level: str = "namespace",
) -> Graded:
    cmd = [
        str(Path(sys.executable).parent / "grader"),
        "batch",
        target,
        "--out",
        str(out),
        "-j",
        "2",
        "--quiet",
        "--per-test-time-limit",
        str(LIMIT_S),
        "--export",
        "gradescope",
        "--export",
        "csv",
        "--warm",
        warm,
        "--isolation",
        level,
        *(f"--exercise={e}" for e in EXERCISES),
    ]
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=1800)
    cards = {}
    for path in (out / "scorecards").glob("*.json"):
        card = json.loads(path.read_text())
        cards[card["submission"].get("student", path.stem)] = card
    return Graded(out, attacked, done, cards, forked=warm == "fork", ended=time.time(), level=level)


def shared_tests() -> dict[str, object]:
    """test_hostile_class.py's tests, for a module that grades the same class another way to run them on its own
    ``graded`` fixture (``globals().update(shared_tests())``)."""
    from tests.project.security import test_hostile_class

    return {
        name: getattr(test_hostile_class, name)
        for name in dir(test_hostile_class)
        if name.startswith("test_")
    }


def scores(card: dict) -> dict[str, tuple[float, float]]:
    return {e["id"]: (e["score"], e["max_score"]) for e in card["exercises"]}


def messages(card: dict, exercise: str) -> str:
    return "\n".join(
        t["message"] for e in card["exercises"] if e["id"] == exercise for t in e["tests"]
    )


def leftover_sandbox_processes(
    uids: set[int], *, started_before: float, wait_s: float = 10.0
) -> list[str]:
    """Processes of the sandbox ``uids`` started before ``started_before`` (a ``time.time()``) and still alive
    after ``wait_s`` (a killed namespace takes a moment to reap). Leases are machine-wide: once the batch has
    ended, a concurrent grader may lease one of its uids, so a process started after the batch is not counted
    (``ps`` gives whole seconds: one second of margin)."""
    deadline = time.monotonic() + wait_s
    while True:
        now = time.time()
        out = subprocess.run(
            ["ps", "-eo", "uid=,pid=,stat=,etimes=,comm="], capture_output=True, text=True
        ).stdout
        alive = [
            line
            for line in out.splitlines()
            if len(line.split()) >= 4
            and int(line.split()[0]) in uids
            and "Z" not in line.split()[2]
            and now - int(line.split()[3]) < started_before - 1
        ]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)
