"""One canonical form for code that students write in several equivalent ways, before it is
tokenized.

A disguise that keeps the program keeps its meaning, so the comparison reads the meaning's one
spelling: the torch function form of a tensor method becomes the method (``torch.exp(x)`` ->
``x.exp()``, ``F.softmax(s, -1)`` -> ``s.softmax(-1)``), ``torch.matmul(a, b)`` becomes ``a @ b``,
``x.size(i)`` becomes ``x.shape[i]``, ``math.sqrt(d)`` becomes ``d ** 0.5`` (and ``* d ** -0.5`` a
division by it), ``x.logical_not()`` becomes ``~x``, every spelling of infinity ``float("inf")``, a
``dim=`` keyword given first becomes positional, a transpose's two dims come in order; a list built
by a ``for`` loop of ``append``s becomes the comprehension; a variable assigned and read once, by
the next statement, is put in its place; adjacent assignments that do not depend on each other come
in a fixed order (functions keep theirs: a fingerprint inside one is the same wherever it stands).
What is left is what a student chose.

:func:`canonical` returns the code as text, one statement a line (headers of compound statements on
their own), and for each line of it the lines of the student's file it came from, so the report
still shows their code.
"""

from __future__ import annotations

import ast
import copy

from grader.similarity import canon_rules

Span = tuple[int, int]


def canonical(source: str, lines: set[int] | None = None) -> tuple[str, list[Span]] | None:
    """``source`` in canonical form (only the top-level statements starting on ``lines``), and the
    original lines of each of its lines; ``None`` when it does not parse (it is then read as it
    is)."""
    try:
        tree = ast.parse(source)
        if lines is not None:
            tree.body = [n for n in tree.body if _first(n) in lines]
        tree = canon_rules.Rewrite().visit(tree)
        out: list[str] = []
        spans: list[Span] = []
        _emit(tree.body, 0, out, spans)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return "\n".join(out) + "\n", spans


def _first(node: ast.stmt) -> int:
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


_BODIES = ("body", "orelse", "finalbody")


def _emit(body: list[ast.stmt], depth: int, out: list[str], spans: list[Span]) -> None:
    """Each statement's text, indented; a compound statement's header, then its bodies."""
    pad = "    " * depth
    for stmt in body:
        span = (_first(stmt), stmt.end_lineno or stmt.lineno)
        if not any(
            isinstance(getattr(stmt, name, None), list) and getattr(stmt, name) for name in _BODIES
        ) and not isinstance(stmt, (ast.Try, ast.Match)):
            for line in ast.unparse(stmt).splitlines():
                out.append(pad + line)
                spans.append(span)
            continue
        _compound(stmt, depth, out, spans)


def _compound(stmt: ast.stmt, depth: int, out: list[str], spans: list[Span]) -> None:
    """A compound statement: its header (unparsed with ``pass`` bodies), then each body under its
    keyword."""
    pad = "    " * depth
    shell = copy.copy(stmt)
    for name in _BODIES:
        if getattr(shell, name, None):
            setattr(shell, name, [ast.Pass()] if name == "body" else [])
    if isinstance(shell, ast.Try):
        shell.handlers = []
        shell.finalbody = [ast.Pass()]
    if isinstance(stmt, ast.Match):
        out.append(pad + ast.unparse(stmt).splitlines()[0])
        spans.append((stmt.lineno, stmt.lineno))
        for case in stmt.cases:
            _emit(case.body, depth + 1, out, spans)
        return
    header = [
        line for line in ast.unparse(shell).splitlines() if line.strip() not in ("pass", "finally:")
    ]
    for line in header:
        out.append(pad + line)
        spans.append((_first(stmt), stmt.lineno))
    _emit(stmt.body, depth + 1, out, spans)  # type: ignore[attr-defined]
    for handler in getattr(stmt, "handlers", []):
        out.append(pad + "except:")
        spans.append((handler.lineno, handler.lineno))
        _emit(handler.body, depth + 1, out, spans)
    for name in ("orelse", "finalbody"):
        part = getattr(stmt, name, None)
        if part:
            out.append(pad + ("else:" if name == "orelse" else "finally:"))
            spans.append((part[0].lineno, part[0].lineno))
            _emit(part, depth + 1, out, spans)
