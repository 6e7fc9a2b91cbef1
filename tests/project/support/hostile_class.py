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
    """Processes of the sandbox ``uids`` started before ``started_before`` (a ``time.time()``), still alive after
    ``wait_s`` (a killed namespace takes a moment to reap) and part of no live sandbox.

    Leases are machine-wide and a batch's slots give theirs back as they retire, before the batch ends: a
    concurrent grader (another test module) may be running a worker under one of these uids. Such a worker is
    told apart by what it is, not by when it started: a live ``process``/``none`` sandbox's scratch folder (its
    ``TMPDIR``) still exists, and ours were all removed when their sandboxes ended; a process inside a pid
    namespace lives only while its namespace's init does, which our killed sandboxes' did not. CI once failed
    on a concurrent grader's worker (``Ss python3.11``) counted here as a daemon."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = [
            f"{line} ({why})"
            for line, pid in _candidates(uids, started_before)
            if (why := _not_in_a_live_sandbox(pid))
        ]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def _candidates(uids: set[int], started_before: float) -> list[tuple[str, int]]:
    """(ps line, pid) of every live process of ``uids`` started before ``started_before`` (``ps`` gives whole
    seconds: one second of margin)."""
    now = time.time()
    out = subprocess.run(
        ["ps", "-eo", "uid=,pid=,stat=,etimes=,comm="], capture_output=True, text=True
    ).stdout
    found = []
    for line in out.splitlines():
        cells = line.split()
        if len(cells) < 4 or int(cells[0]) not in uids or "Z" in cells[2]:
            continue
        if now - int(cells[3]) < started_before - 1:
            found.append((line, int(cells[1])))
    return found


def _not_in_a_live_sandbox(pid: int) -> str:
    """Why ``pid`` is no live sandbox's process ("" when it is one, or is gone already)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return ""  # ended while we looked
    except OSError as exc:
        return f"unreadable: {exc}"  # cannot tell: counted
    tmpdir = next((e[7:].decode() for e in environ if e.startswith(b"TMPDIR=")), None)
    if tmpdir is not None:
        return "" if Path(tmpdir).is_dir() else f"its sandbox's TMPDIR {tmpdir} is gone"
    nspid = next(
        (line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), []
    )
    return "" if len(nspid) > 1 else "no TMPDIR and no pid namespace of its own"
