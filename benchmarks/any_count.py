"""Count `Any` in the function signatures under a package (issue 13, item 8: "replace the `Any` in signatures").

Two figures per run: `bare` counts parameters and return annotations that are exactly `Any`
(`x: Any`, `-> Any`, `*args: Any`); `nested` counts those whose annotation mentions `Any` anywhere
(`dict[str, Any]`, `list[Any] | None`), bare ones included. Usage: `python benchmarks/any_count.py [grader]`.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path


def _is_any(node: ast.expr) -> bool:
    """`Any` or `typing.Any`, or the same written as a string annotation."""
    if isinstance(node, ast.Name):
        return node.id == "Any"
    if isinstance(node, ast.Attribute):
        return node.attr == "Any"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.strip() in {"Any", "typing.Any"}
    return False


def _mentions_any(node: ast.expr) -> bool:
    """True when `Any` appears anywhere inside the annotation (strings parsed as annotations)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                if _mentions_any(ast.parse(sub.value, mode="eval").body):
                    return True
            except SyntaxError:
                continue
        elif _is_any(sub):
            return True
    return False


def _annotations(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.expr]:
    """Every parameter annotation and the return annotation of one function."""
    a = fn.args
    params = [
        *a.posonlyargs,
        *a.args,
        *a.kwonlyargs,
        *(p for p in (a.vararg, a.kwarg) if p is not None),
    ]
    yield from (p.annotation for p in params if p.annotation is not None)
    if fn.returns is not None:
        yield fn.returns


def count(root: Path) -> tuple[int, int]:
    """(bare, nested) counts over every .py file under root."""
    bare = nested = 0
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for ann in _annotations(node):
                    bare += _is_any(ann)
                    nested += _mentions_any(ann)
    return bare, nested


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "grader")
    bare, nested = count(root)
    print(f"{root}: Any in signatures: bare={bare} nested={nested}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
