"""A notebook becomes a module without running any cell: imports, definitions and simple constants.

Plain JSON reading (nbformat v4, and v3's worksheets): no Jupyter package is needed to grade. The
notebook is hostile input like everything else a student sends: any shape it has that is not a
notebook's (deep nesting, a cell source that is not text, a name with a newline) ends in an
:class:`~grader.safefs.IntakeError` naming the problem, never in another exception.

What is taken, cell by cell in notebook order:

- nothing from nbgrader's autograder-test and read-only cells (``grade``/``locked`` without
  ``solution``): they hold the public tests and their set-up, which only make sense in Jupyter
  (``@public_test`` runs a test at definition time), and the grading truth is the hidden suites;
- imports, functions and classes (a definition decorated with ``@public_test`` is a public test
  pasted elsewhere: left out too);
- ``NAME = <simple expression>`` (literals, names, arithmetic, subscripts, and calls of builtins
  such as ``float('-inf')`` or of imported modules such as ``torch.finfo(torch.float32).min``).

Nothing is evaluated here: only the syntax tree is read, and by a child process with CPU and memory
limits (:mod:`grader.intake.bounded`), after the code cells' size is checked. A kept constant is
written into the generated module, which only ever runs inside the sandbox, in a ``try`` block (as
is each import), so an exploratory line (``x = torch.load("mine.pt")``, ``import matplotlib``)
cannot sink the whole module: a name it failed to define fails only the tests that use it.
"""

from __future__ import annotations

import ast
import builtins
import json
from typing import Any

from grader import safetext
from grader.safefs import MAX_FILE_BYTES, IntakeError

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_REDO = "save it again from Jupyter, or submit a .py file"
_TEST_DECORATOR = "public_test"  # grader.release.nbgrader' test cells
# a constant's expression: more is exploratory code, not a constant (and bounds recursion)
_MAX_NODES = 100
_EXPR_NODES = (
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.Attribute,
    ast.UnaryOp,
    ast.BinOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Tuple,
    ast.List,
    ast.Set,
    ast.Dict,
    ast.Subscript,
    ast.Slice,
    ast.Call,
    ast.keyword,
    ast.JoinedStr,
    ast.FormattedValue,
    ast.operator,
    ast.unaryop,
    ast.boolop,
    ast.cmpop,
    ast.expr_context,
)
_BUILTIN_CALLS = frozenset(
    {
        "abs",
        "bool",
        "complex",
        "dict",
        "divmod",
        "float",
        "frozenset",
        "int",
        "len",
        "list",
        "max",
        "min",
        "pow",
        "range",
        "round",
        "set",
        "slice",
        "str",
        "sum",
        "tuple",
    }
)


def notebook_module(name: str, data: bytes) -> str:
    """The module text for notebook ``name`` (already sanitised) whose file holds ``data``."""
    parts: list[str] = []
    futures: dict[str, None] = {}  # `from __future__` must come first, whichever cell it was in
    imported: set[str] = set()  # names bound by imports so far: a constant may call into them
    cells = _code_cells(name, data)
    if sum(len(source.encode("utf-8", "surrogatepass")) for _, source in cells) > MAX_FILE_BYTES:
        raise IntakeError(
            f"{name}: its code cells hold more than {MAX_FILE_BYTES >> 10} KiB; {_REDO}"
        )  # before parsing
    for number, source in cells:
        tree, lines = _parse(name, number, source), _lines(source)
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                futures.update({f"from __future__ import {a.name}\n": None for a in node.names})
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                imported.update((a.asname or a.name).split(".")[0] for a in node.names)
                parts.append(_guarded(node, "ImportError"))
            elif isinstance(node, _DEFS) and not _is_public_test(node):
                parts.append(_source(node, lines))
            elif _is_constant(node, imported):
                parts.append(
                    _literal(node, lines) if _is_literal(node) else _guarded(node, "Exception")
                )
    # the notebook's name stays out of its module: two students' identical code hashes the same,
    # whatever its file is called
    header = (
        "# Taken from a notebook by the grader: imports, functions, classes and constants only.\n"
    )
    module = header + "".join(futures) + "\n\n" + "\n\n".join(parts)
    if len(module.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise IntakeError(f"{name}: its code is larger than {MAX_FILE_BYTES >> 10} KiB")
    return module


def _source(node: ast.stmt, lines: list[str]) -> str:
    """A definition's own lines, decorators included (nothing else can share them)."""
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return "\n".join(lines[start - 1 : node.end_lineno]) + "\n"


def _literal(node: ast.stmt, lines: list[str]) -> str:
    """A literal constant as written, unless another statement shares its lines (``X = 1;
    os.system(...)``)."""
    last = lines[(node.end_lineno or node.lineno) - 1].encode("utf-8", "surrogatepass")
    tail = last[
        node.end_col_offset or 0 :
    ].strip()  # ast's offsets count UTF-8 bytes, not characters
    if node.col_offset == 0 and (not tail or tail.startswith(b"#")):
        return _source(node, lines)
    return f"{ast.unparse(node)}\n"


def _guarded(node: ast.stmt, caught: str) -> str:
    """``node`` as one line (``ast.unparse``: multi-line strings keep their text) in a ``try``
    block."""
    return f"try:\n    {ast.unparse(node)}\nexcept {caught}:  # as in Jupyter, a failed cell leaves the rest usable\n    pass\n"


def _code_cells(name: str, data: bytes) -> list[tuple[int, str]]:
    """``(cell number, source)`` of each student code cell, magics and shell lines blanked."""
    out = []
    for number, cell in enumerate(_cells(name, data), 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code" or _is_test_cell(cell):
            continue
        raw = cell.get("source", cell.get("input", ""))
        if isinstance(raw, list) and all(isinstance(line, str) for line in raw):
            raw = "".join(raw)
        if not isinstance(raw, str):
            raise IntakeError(
                f"{name}: code cell {number} has a source that is not text "
                f"({type(raw).__name__}); {_REDO}"
            )
        out.append(
            (
                number,
                "\n".join(
                    "" if line.lstrip().startswith(("%", "!")) else line for line in _lines(raw)
                ),
            )
        )
    return out


def _lines(text: str) -> list[str]:
    """``text``'s lines as Python's tokenizer splits them: at ``\\n``, ``\\r\\n`` and ``\\r`` only.
    (``str.splitlines`` also splits at U+2028, U+000C, U+001C... which may sit inside a comment or a
    string: the rest of the comment then became code.)"""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _is_test_cell(cell: dict[str, Any]) -> bool:
    """An nbgrader autograder-test or read-only cell (its metadata as nbgrader writes it)."""
    metadata = cell.get("metadata")
    meta = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    if not isinstance(meta, dict) or meta.get("solution") is True:
        return False
    return meta.get("grade") is True or meta.get("locked") is True


def _cells(name: str, data: bytes) -> list[Any]:
    try:
        nb = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
        raise IntakeError(
            f"{name}: not a readable Jupyter notebook ({type(exc).__name__}); {_REDO}"
        ) from None
    if not isinstance(nb, dict):
        raise IntakeError(
            f"{name}: not a readable Jupyter notebook (the top level is not an object); {_REDO}"
        )
    cells = nb.get("cells")
    if not cells and "worksheets" in nb:  # nbformat v3
        sheets = nb["worksheets"]
        if not isinstance(sheets, list) or not all(
            isinstance(w, dict) and isinstance(w.get("cells", []), list) for w in sheets
        ):
            raise IntakeError(
                f"{name}: not a readable Jupyter notebook (malformed worksheets); {_REDO}"
            )
        cells = [c for w in sheets for c in w.get("cells", [])]
    if not isinstance(cells, list):
        raise IntakeError(f"{name}: not a readable Jupyter notebook (no list of cells); {_REDO}")
    return cells


def _parse(name: str, number: int, source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        where = (
            f"line {exc.lineno}: {safetext.name(exc.msg)}"
            if isinstance(exc, SyntaxError)
            else type(exc).__name__
        )
        raise IntakeError(
            f"{name}: code cell {number} cannot be parsed ({where}); fix or delete that cell"
        ) from None


def _is_public_test(node: ast.stmt) -> bool:
    decorators = getattr(node, "decorator_list", [])
    return any(isinstance(d, ast.Name) and d.id == _TEST_DECORATOR for d in decorators)


def _is_constant(node: ast.stmt, imported: set[str]) -> bool:
    """``NAME = <simple expression>`` (or ``A, B = ...``, or annotated) at the top level."""
    targets: list[ast.expr]
    if isinstance(node, ast.AnnAssign):
        targets, value = [node.target], node.value
    elif isinstance(node, ast.Assign):
        targets, value = node.targets, node.value
    else:
        return False
    names = [n for t in targets for n in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
    if value is None or not all(isinstance(n, ast.Name) for n in names):
        return False
    return _is_literal(node) or _is_simple(value, imported)


def _is_literal(node: ast.stmt) -> bool:
    """A value ``ast.literal_eval`` accepts: kept as written, whatever its size."""
    try:
        ast.literal_eval(node.value)  # type: ignore[attr-defined]  # only called on an Assign/AnnAssign (_is_constant)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _is_simple(value: ast.expr, imported: set[str]) -> bool:
    """A literal, or only literal-like nodes, and calls of a builtin in :data:`_BUILTIN_CALLS` or of
    an imported module."""
    nodes = []
    for node in ast.walk(value):  # iterative: a deep expression cannot exhaust the stack here
        nodes.append(node)
        if len(nodes) > _MAX_NODES or not isinstance(node, _EXPR_NODES):
            return False
    return all(_callee_allowed(n.func, imported) for n in nodes if isinstance(n, ast.Call))


def _callee_allowed(func: ast.expr, imported: set[str]) -> bool:
    """``float(...)``, ``math.sqrt(...)``, ``torch.finfo(torch.float32).min``-style chains: no
    notebook function."""
    while isinstance(func, (ast.Attribute, ast.Call, ast.Subscript)):
        func = func.func if isinstance(func, ast.Call) else func.value
    if not isinstance(func, ast.Name):
        return False
    return func.id in imported or (func.id in _BUILTIN_CALLS and hasattr(builtins, func.id))
