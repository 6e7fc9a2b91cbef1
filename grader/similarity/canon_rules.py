"""The rewrites of :mod:`grader.similarity.canon`: equivalent torch spellings, loops, temporaries, statement order.

Each rule maps several spellings of one computation to one of them; none needs to know what a name means beyond
the modules a course imports them as (``torch``, ``F``, ``math``), so a rule never runs, imports or evaluates code.
"""

from __future__ import annotations

import ast
import copy

MODULES = frozenset({"torch", "F", "functional", "nn"})  # torch.f(x, ...) / F.f(x, ...) -> x.f(...)
METHODS = frozenset(
    {
        "exp",
        "log",
        "sum",
        "mean",
        "amax",
        "amin",
        "max",
        "min",
        "sqrt",
        "rsqrt",
        "abs",
        "square",
        "tril",
        "triu",
        "masked_fill",
        "transpose",
        "softmax",
        "log_softmax",
        "cumsum",
        "flatten",
        "tanh",
        "sigmoid",
        "relu",
        "argmax",
        "reshape",
        "permute",
        "unsqueeze",
        "squeeze",
        "clamp",
        "pow",
        "div",
        "mul",
        "add",
        "sub",
        "bmm",
        "logsumexp",
        "masked_fill_",
        "view",
        "contiguous",
        "isinf",
        "isneginf",
        "logical_not",
        "neg",
        "norm",
        "chunk",
        "split",
    }
)
DIM_FIRST = frozenset(
    {
        "sum",
        "mean",
        "amax",
        "amin",
        "softmax",
        "log_softmax",
        "cumsum",
        "argmax",
        "logsumexp",
        "max",
        "min",
        "unsqueeze",
        "squeeze",
    }
)
_INF = ast.Call(ast.Name("float", ast.Load()), [ast.Constant("inf")], [])


def _name(node: ast.AST, *names: str) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _inf(node: ast.AST) -> bool:
    """``float("inf")``, ``math.inf``, ``torch.inf``."""
    if (
        isinstance(node, ast.Attribute)
        and node.attr == "inf"
        and _name(node.value, "math", "torch", "np")
    ):
        return True
    return (
        isinstance(node, ast.Call)
        and _name(node.func, "float")
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and str(node.args[0].value).strip().lower() in ("inf", "+inf")
    )


def _neg_inf(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and _name(node.func, "float")
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and str(node.args[0].value).strip().lower() == "-inf"
    )


class Rewrite(ast.NodeTransformer):
    """Expressions bottom-up into one spelling; then each statement list (loops, temporaries, order)."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if _neg_inf(node):
            return ast.UnaryOp(ast.USub(), copy.copy(_INF))
        if not isinstance(f, ast.Attribute):
            return node
        if (
            f.attr == "matmul"
            and _name(f.value, *MODULES)
            and len(node.args) == 2
            and not node.keywords
        ):
            return ast.BinOp(node.args[0], ast.MatMult(), node.args[1])
        if f.attr == "sqrt" and _name(f.value, "math") and len(node.args) == 1:
            return ast.BinOp(node.args[0], ast.Pow(), ast.Constant(0.5))
        if (
            f.attr in METHODS
            and _name(f.value, *MODULES)
            and node.args
            and not isinstance(node.args[0], ast.Starred)
        ):
            f = ast.Attribute(node.args[0], f.attr, ast.Load())
            node = ast.Call(f, node.args[1:], node.keywords)
        return self._method(node, f)

    @staticmethod
    def _method(node: ast.Call, f: ast.Attribute) -> ast.AST:
        if f.attr == "matmul" and len(node.args) == 1 and not node.keywords:
            return ast.BinOp(f.value, ast.MatMult(), node.args[0])
        if f.attr == "logical_not" and not node.args:
            return ast.UnaryOp(ast.Invert(), f.value)
        if f.attr == "size":
            return (
                ast.Attribute(f.value, "shape", ast.Load())
                if not node.args
                else ast.Subscript(
                    ast.Attribute(f.value, "shape", ast.Load()), node.args[0], ast.Load()
                )
            )
        if (
            f.attr in DIM_FIRST
            and not node.args
            and node.keywords
            and node.keywords[0].arg == "dim"
        ):
            node.args, node.keywords = [node.keywords[0].value], node.keywords[1:]
        if f.attr == "transpose" and len(node.args) == 2:
            node.args.sort(key=ast.unparse)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if _inf(node):
            return copy.copy(_INF)
        if node.attr == "mT":
            minus = [ast.UnaryOp(ast.USub(), ast.Constant(n)) for n in (1, 2)]
            return ast.Call(
                ast.Attribute(node.value, "transpose", ast.Load()),
                sorted(minus, key=ast.unparse),
                [],
            )
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        r = node.right
        if (
            isinstance(node.op, ast.Mult)
            and isinstance(r, ast.BinOp)
            and isinstance(r.op, ast.Pow)
            and ast.unparse(r.right) == "-0.5"
        ):  # a * d ** -0.5 -> a / d ** 0.5
            return ast.BinOp(node.left, ast.Div(), ast.BinOp(r.left, ast.Pow(), ast.Constant(0.5)))
        return node

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                setattr(node, name, _statements(body))
        return node


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
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
                and _name(call.func.value, prev.targets[0].id)
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
    """``t = e`` and the next statement, the only one that names ``t`` (once): ``e`` put in its place."""
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
