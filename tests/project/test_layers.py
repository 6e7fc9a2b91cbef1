"""The layer plan of the house, pinned from the imports (ast): a package may import only from its own layer's
members or from lower layers, so there is no import cycle between packages, function-level imports included.

Lowest first. `inside` and `protocol` are the sandbox side of the trust wall (see test_packaging's own test
that they import nothing from the trusted side); everything from `student` up is trusted.
"""

from __future__ import annotations

import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parents[2] / "grader"

LAYERS: list[set[str]] = [
    {"grader", "errors", "protocol", "safetext", "schema", "schemas"},  # plain data, the error tree, schemas
    {"inside", "manifest", "references", "exports", "procs", "intake_fs", "gradetext"},
    {"student", "sandbox", "intake_archive", "intake_notebook", "fingerprint"},
    {"intake_bounded"},  # reads a notebook in a child process, through intake_notebook
    {"intake", "testing", "options"},
    {"scoring", "proofs"},  # proofs: the canary's cache, read by grade() for its per-test limits
    {"grade", "build"},
    {"canary", "selfcheck"},  # both grade the reference solutions through grade()
    {"classroom"},
    {"delivery"},
    {"similarity"},  # reads a class's code and scorecards: evidence for the batch's summary and report
    {"batch"},
    {"commands"},
    {"cli"},
    {"__main__"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _unit(dotted: str) -> str:
    """The top-level unit of ``grader.x.y`` (a subpackage or module); ``grader`` for names of the package."""
    parts = dotted.split(".")
    if len(parts) < 2:
        return "grader"
    head = parts[1]
    return head if (GRADER / head).is_dir() or (GRADER / f"{head}.py").is_file() else "grader"


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("grader")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("grader"):
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return {_unit(name) for name in found}


def _own_unit(path: Path) -> str:
    rel = path.relative_to(GRADER)
    return "grader" if rel.as_posix() == "__init__.py" else rel.parts[0].removesuffix(".py")


def test_every_unit_of_grader_has_a_layer():
    units = {_own_unit(p) for p in GRADER.rglob("*.py")}
    assert units - RANK.keys() == set(), "add new packages or modules to LAYERS"


def test_no_unit_imports_from_a_higher_layer_or_across_its_own():
    wrong = []
    for path in sorted(GRADER.rglob("*.py")):
        own = _own_unit(path)
        for target in _imports(path) - {own}:
            if RANK[target] >= RANK[own]:
                wrong.append(f"{path.relative_to(GRADER)} ({own}, layer {RANK[own]}) imports {target} "
                             f"(layer {RANK[target]})")
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_a_violation(tmp_path):
    """An upward import is found: a stand-in module of `protocol` importing from `batch`."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from grader.batch import engine\n")
    assert _imports(probe) == {"batch"} and RANK["batch"] > RANK["protocol"]
