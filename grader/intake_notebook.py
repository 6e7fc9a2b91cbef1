"""A notebook becomes a module without running any cell: imports, functions, classes and literal constants.

Plain JSON reading (nbformat v4, and v3's worksheets): no Jupyter package is needed to grade. The
notebook is hostile input like everything else a student sends: any shape it has that is not a
notebook's (deep nesting, a cell source that is not text, a name with a newline) ends in an
:class:`~grader.intake_fs.IntakeError` naming the problem, never in another exception.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from grader import safetext
from grader.intake_fs import MAX_FILE_BYTES, IntakeError

_KEEP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_REDO = "save it again from Jupyter, or submit a .py file"


def notebook_module(name: str, data: bytes) -> str:
    """The module text for notebook ``name`` (already sanitised) whose file holds ``data``."""
    parts: list[str] = []
    futures: dict[str, None] = {}  # `from __future__` must come first, whichever cell it was in
    for number, source in _code_cells(name, data):
        tree, lines = _parse(name, number, source), source.splitlines()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                futures.update({f"from __future__ import {a.name}\n": None for a in node.names})
            elif isinstance(node, _KEEP) or _is_constant(node):
                start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
                parts.append("\n".join(lines[start - 1:node.end_lineno]) + "\n")
    header = f"# Taken from {name} by the grader: imports, functions, classes and constants only.\n"
    module = header + "".join(futures) + "\n\n" + "\n\n".join(parts)
    if len(module.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise IntakeError(f"{name}: its code is larger than {MAX_FILE_BYTES >> 10} KiB")
    return module


def _code_cells(name: str, data: bytes) -> list[tuple[int, str]]:
    """``(cell number, source)`` of each code cell, magics and shell lines blanked."""
    out = []
    for number, cell in enumerate(_cells(name, data), 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        raw = cell.get("source", cell.get("input", ""))
        if isinstance(raw, list) and all(isinstance(line, str) for line in raw):
            raw = "".join(raw)
        if not isinstance(raw, str):
            raise IntakeError(f"{name}: code cell {number} has a source that is not text "
                              f"({type(raw).__name__}); {_REDO}")
        out.append((number, "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                                      for line in raw.splitlines())))
    return out


def _cells(name: str, data: bytes) -> list[Any]:
    try:
        nb = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
        raise IntakeError(f"{name}: not a readable Jupyter notebook ({type(exc).__name__}); {_REDO}") from None
    if not isinstance(nb, dict):
        raise IntakeError(f"{name}: not a readable Jupyter notebook (the top level is not an object); {_REDO}")
    cells = nb.get("cells")
    if not cells and "worksheets" in nb:  # nbformat v3
        sheets = nb["worksheets"]
        if not isinstance(sheets, list) or not all(isinstance(w, dict) and isinstance(w.get("cells", []), list)
                                                   for w in sheets):
            raise IntakeError(f"{name}: not a readable Jupyter notebook (malformed worksheets); {_REDO}")
        cells = [c for w in sheets for c in w.get("cells", [])]
    if not isinstance(cells, list):
        raise IntakeError(f"{name}: not a readable Jupyter notebook (no list of cells); {_REDO}")
    return cells


def _parse(name: str, number: int, source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        where = (f"line {exc.lineno}: {safetext.name(exc.msg)}" if isinstance(exc, SyntaxError)
                 else type(exc).__name__)
        raise IntakeError(f"{name}: code cell {number} cannot be parsed ({where}); fix or delete that cell") from None


def _is_constant(node: ast.stmt) -> bool:
    """``NAME = <literal>`` at the top level: kept, since functions may read it."""
    if not (isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets)):
        return False
    try:
        ast.literal_eval(node.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True
