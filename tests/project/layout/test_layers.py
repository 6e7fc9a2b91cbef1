"""The layer plan of the house, pinned from the imports (ast): a package may import only from its own layer's
members or from lower layers, so there is no import cycle between packages, function-level imports included;
and inside a package no module imports itself round a cycle.

Lowest first. `inside` and `protocol` are the sandbox side of the trust wall (see test_packaging's own test
that they import nothing from the trusted side); everything from `student` up is trusted.
"""

from __future__ import annotations

import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parents[3] / "grader"

LAYERS: list[set[str]] = [
    {
        "grader",
        "errors",
        "protocol",
        "safetext",
        "schema",
        "schemas",
        "cardtypes",
    },  # plain data, errors, schemas
    {
        "inside",
        "course",
        "procs",
        "safefs",
        "gradetext",
        "forked",
    },  # the assignment as data; files looked at safely; a trusted function in a forked copy
    {"schema_beside"},  # the schema checks of one command made in a forked copy of it
    {"student", "sandbox"},
    {
        "intake",
        "fingerprint",
    },  # where a submission (or a class folder) enters; what decides a grade
    {"testing", "options"},
    {"scoring", "proofs"},  # proofs: the canary's cache, read by grade() for its per-test limits
    {"grade"},
    {"canary", "selfcheck"},  # both grade the reference solutions through grade()
    {"canary_beside"},  # a first run's proof made beside the student's grade, on top of the canary
    {
        "similarity"
    },  # reads a class's code and scorecards: evidence for the batch's summary and report
    {"exports"},  # what grades become
    {"check"},  # what runs where students are
    {
        "release"
    },  # what we hand out (the Gradescope runner grades, so it sits above grade and exports)
    {"batch"},  # a class on this machine
    {"cluster"},  # a class on many machines, built on the batch engine
    {"cli"},
    {"__main__"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _module_of(dotted: str) -> str:
    """``grader.x.y`` as the module it names: itself when such a file or package exists, else its parent."""
    parts = dotted.split(".")
    while len(parts) > 1:
        rel = GRADER.joinpath(*parts[1:])
        if rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file():
            return ".".join(parts)
        parts = parts[:-1]
    return "grader"


def _unit(dotted: str) -> str:
    """The top-level unit of ``grader.x.y`` (a subpackage or module); ``grader`` for names of the package."""
    module = _module_of(dotted).split(".")
    return module[1] if len(module) > 1 else "grader"


def _imported(path: Path) -> set[str]:
    """Every ``grader`` name imported by ``path``, module-level and function-level alike."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("grader")}
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").startswith("grader")
        ):
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def _imports(path: Path) -> set[str]:
    return {_unit(name) for name in _imported(path)}


def _own_unit(path: Path) -> str:
    rel = path.relative_to(GRADER)
    return "grader" if rel.as_posix() == "__init__.py" else rel.parts[0].removesuffix(".py")


def _dotted(path: Path) -> str:
    rel = path.relative_to(GRADER.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def module_graph() -> dict[str, set[str]]:
    """Module → the grader modules it imports (a package's ``__init__`` counts as the package)."""
    return {
        _dotted(p): {_module_of(n) for n in _imported(p)} - {_dotted(p)}
        for p in GRADER.rglob("*.py")
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while not part or part[-1] != node:
                part.append(stack.pop())
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_unit_of_grader_has_a_layer():
    units = {_own_unit(p) for p in GRADER.rglob("*.py")}
    assert units - RANK.keys() == set(), "add new packages or modules to LAYERS"


def test_no_unit_imports_from_a_higher_layer_or_across_its_own():
    wrong = []
    for path in sorted(GRADER.rglob("*.py")):
        own = _own_unit(path)
        for target in _imports(path) - {own}:
            if RANK[target] >= RANK[own]:
                wrong.append(
                    f"{path.relative_to(GRADER)} ({own}, layer {RANK[own]}) imports {target} "
                    f"(layer {RANK[target]})"
                )
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_itself_round_a_cycle():
    """Inside a package too: `cli/batch.py` ↔ `cli/dask.py` would be a cycle the layers cannot see."""
    assert cycles(module_graph()) == []


def test_the_check_sees_a_violation(tmp_path):
    """An upward import is found: a stand-in module of `protocol` importing from `batch`."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from grader.batch import engine\n")
    assert _imports(probe) == {"batch"} and RANK["batch"] > RANK["protocol"]


def test_the_cycle_check_sees_a_cycle():
    """Two modules of one package that import each other (function-level imports count) are one cycle."""
    graph = {
        "grader.cli.batch": {"grader.cli.dask", "grader.errors"},
        "grader.cli.dask": {"grader.cli.batch"},
        "grader.errors": set(),
    }
    assert cycles(graph) == [["grader.cli.batch", "grader.cli.dask"]]
