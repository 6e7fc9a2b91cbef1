"""A module uses another grader module through its public names only: ``other._helper`` (a private name reached
across modules) is a shared piece without a home. Found from the imports (ast), function-level ones included."""

from __future__ import annotations

import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parents[3] / "grader"

# Known, left for their owners: (module, the private name it reaches). Remove a line once it is fixed.
KNOWN: set[tuple[str, str]] = set()


def _aliases(tree: ast.AST) -> set[str]:
    """The local names bound to grader modules or their members by ``import`` / ``from grader... import``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grader"):
            found |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.asname or a.name for a in node.names if a.name.startswith("grader")}
    return found


def private_reaches(path: Path) -> set[str]:
    """``alias._name`` for every grader alias of ``path`` (dunders are not private)."""
    tree = ast.parse(path.read_text())
    aliases = _aliases(tree)
    return {
        f"{node.value.id}.{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in aliases
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
    }


def test_no_module_reaches_into_another_grader_modules_private_names():
    found = {
        (path.relative_to(GRADER.parent).as_posix(), name)
        for path in sorted(GRADER.rglob("*.py"))
        for name in private_reaches(path)
    }
    assert found - KNOWN == set(), "give the shared piece a public home (as grader/cli/evidence.py)"


def test_the_check_sees_a_private_reach(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def f(args):\n    from grader.cli import similarity as s\n    s._cmd_similarity(args)\n"
        "    return s.register, s.__doc__\n"
    )
    assert private_reaches(probe) == {"s._cmd_similarity"}
