"""The expression rewrites of :mod:`grader.similarity.canon`: equivalent torch spellings of one
computation.

Each rule maps several spellings of one computation to one of them; none needs to know what a name
means beyond the modules a course imports them as (``torch``, ``F``, ``math``), so a rule never
runs, imports or evaluates code. :class:`Rewrite` walks a tree bottom-up and hands each statement
list it leaves to :func:`grader.similarity.canon_statements.statements` (loops, temporaries, order).
"""

from __future__ import annotations

import ast
import copy

from grader.similarity.canon_statements import statements

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
    """Expressions bottom-up into one spelling; then each statement list (loops, temporaries,
    order)."""

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
                setattr(node, name, statements(body))
        return node
