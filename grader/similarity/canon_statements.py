"""The statement rewrites of :mod:`grader.similarity.canon`: loops, temporaries, statement order.

:func:`statements` rewrites one statement list whose expressions are already canonical
(:class:`grader.similarity.canon_rules.Rewrite` calls it on each list it leaves): a list built by
``append`` in a ``for`` loop becomes the comprehension, a temporary read once by the next statement
is put in its place, and adjacent independent assignments come in a fixed order (:func:`blind`, so
renaming changes no order). Like the expression rules these only read the tree: nothing is run,
imported or evaluated.
"""

from __future__ import annotations

import ast
import copy


def statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """One statement list rewritten: loops into comprehensions, temporaries inlined, then runs in
    order."""
    return _sorted_runs(_inline(_comprehensions(body)))


def _comprehensions(body: list[ast.stmt]) -> list[ast.stmt]:
    """``xs = []`` then ``for t in it: xs.append(e)`` -> ``xs = [e for t in it]``."""
    out: list[ast.stmt] = []
    for stmt in body:
        prev = out[-1] if out else None
        if (
            isinstance(stmt, ast.For)
            and not stmt.orelse
            and len(stmt.body) == 1
            and isinstance(prev, ast.Assign)
            and len(prev.targets) == 1
            and isinstance(prev.targets[0], ast.Name)
            and isinstance(prev.value, ast.List)
            and not prev.value.elts
        ):
            call = stmt.body[0].value if isinstance(stmt.body[0], ast.Expr) else None
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "append"
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == prev.targets[0].id
                and len(call.args) == 1
            ):
                gen = ast.comprehension(stmt.target, stmt.iter, [], 0)
                prev.value = ast.ListComp(call.args[0], [gen])
                prev.end_lineno = stmt.end_lineno
                continue
        out.append(stmt)
    return out


def _reads(node: ast.AST, name: str) -> int:
    return sum(1 for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == name)


def _inline(body: list[ast.stmt]) -> list[ast.stmt]:
    """``t = e`` and the next statement, the only one that names ``t`` (once): ``e`` put in its
    place."""
    out = list(body)
    i = 0
    while i < len(out) - 1:
        stmt, nxt = out[i], out[i + 1]
        target = (
            stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
        )
        if (
            isinstance(stmt, ast.Assign)
            and isinstance(target, ast.Name)
            and isinstance(nxt, (ast.Assign, ast.Return, ast.Expr, ast.AugAssign))
            and _reads(nxt, target.id) == 1
            and not any(_reads(s, target.id) for s in out[i + 2 :])
        ):
            _Substitute(target.id, stmt.value).visit(nxt)
            nxt.lineno = stmt.lineno
            del out[i]
            continue
        i += 1
    return out


class _Substitute(ast.NodeTransformer):
    def __init__(self, name: str, value: ast.expr) -> None:
        self.name, self.value = name, value

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return self.value if node.id == self.name and isinstance(node.ctx, ast.Load) else node


def _names(node: ast.AST, store: bool) -> set[str]:
    kind = ast.Store if store else ast.Load
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, kind)}


def _free(a: ast.stmt, b: ast.stmt) -> bool:
    """Two assignments to names only that neither reads what the other writes."""
    simple = (ast.Assign, ast.AnnAssign, ast.AugAssign)
    if not (isinstance(a, simple) and isinstance(b, simple)):
        return False
    if any(
        isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, ast.Store)
        for s in (a, b)
        for n in ast.walk(s)
    ):
        return False
    wa, wb = _names(a, True), _names(b, True)
    return not (wa & (_names(b, False) | wb)) and not (wb & _names(a, False))


def _sorted_runs(body: list[ast.stmt]) -> list[ast.stmt]:
    """Runs of adjacent independent assignments in a fixed order (their renaming-blind text)."""
    out: list[ast.stmt] = []
    run: list[ast.stmt] = []
    for stmt in body:
        if run and not all(_free(s, stmt) for s in run):
            out += sorted(run, key=blind)
            run = []
        run.append(stmt)
    return out + sorted(run, key=blind)


class _Blind(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name("V", node.ctx)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        node.name = "V"
        return node


def blind(node: ast.AST) -> str:
    """``node``'s text with every name one (the order key: renaming changes no order)."""
    return ast.unparse(_Blind().visit(copy.deepcopy(node)))
