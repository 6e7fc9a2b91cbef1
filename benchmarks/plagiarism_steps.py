"""The plagiarism corpus's tree steps that rewrite code into equivalent code: torch calls (:class:`Sites`) and
loops <-> comprehensions (:class:`Loops`); used by :mod:`plagiarism` for independent work and for disguises."""

from __future__ import annotations

import ast
import random

METHODS = {
    "exp",
    "sum",
    "matmul",
    "masked_fill",
    "transpose",
    "amax",
    "amin",
    "sqrt",
    "tril",
    "triu",
    "mean",
    "log",
    "softmax",
    "cumsum",
    "flatten",
    "tanh",
    "sigmoid",
    "relu",
    "abs",
    "square",
    "rsqrt",
}
DIM_FIRST = {"sum", "mean", "amax", "amin", "softmax", "cumsum", "log_softmax", "argmax"}
WORDS = [
    "a",
    "b",
    "q",
    "k",
    "v",
    "w",
    "s",
    "p",
    "t",
    "out",
    "res",
    "tmp",
    "val",
    "acc",
    "buf",
    "att",
    "mat",
    "z",
    "h",
    "m",
    "n",
    "x2",
    "y",
    "scr",
    "wts",
    "ctx",
    "nrm",
    "den",
    "num",
    "mx",
    "lse",
    "blk",
    "idx",
    "pos",
]


class Sites(ast.NodeTransformer):
    """Equivalent torch calls, each site flipped with probability ``p``."""

    def __init__(self, rng: random.Random, p: float) -> None:
        self.rng, self.p = rng, p

    def _flip(self) -> bool:
        return self.rng.random() < self.p

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        right = node.right
        if (
            isinstance(node.op, ast.Div)
            and isinstance(right, ast.Call)
            and isinstance(right.func, ast.Attribute)
            and right.func.attr == "sqrt"
            and _is_name(right.func.value, "math")
            and self._flip()
        ):
            return ast.BinOp(
                node.left, ast.Mult(), ast.BinOp(right.args[0], ast.Pow(), ast.Constant(-0.5))
            )
        if isinstance(node.op, ast.MatMult) and self._flip():
            return ast.Call(
                ast.Attribute(ast.Name("torch", ast.Load()), "matmul", ast.Load()),
                [node.left, node.right],
                [],
            )
        if (
            isinstance(node.op, ast.Pow)
            and isinstance(node.right, ast.Constant)
            and node.right.value == 0.5
            and self._flip()
        ):
            return ast.Call(
                ast.Attribute(ast.Name("math", ast.Load()), "sqrt", ast.Load()), [node.left], []
            )
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Invert) and self._flip():  # ~mask of a boolean mask
            return ast.Call(ast.Attribute(node.operand, "logical_not", ast.Load()), [], [])
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Name) and f.id == "float" and _is(node.args, "-inf") and self._flip():
            return ast.UnaryOp(
                ast.USub(), ast.Attribute(ast.Name("torch", ast.Load()), "inf", ast.Load())
            )
        if isinstance(f, ast.Attribute) and f.attr in DIM_FIRST and self._flip():
            dim = [kw for kw in node.keywords if kw.arg == "dim"]
            if dim and not node.args:  # x.sum(dim=-1) <-> x.sum(-1)
                return ast.Call(f, [dim[0].value], [kw for kw in node.keywords if kw.arg != "dim"])
            if len(node.args) == 1 and not (
                isinstance(f.value, ast.Name) and f.value.id in ("torch", "F")
            ):
                return ast.Call(f, [], [ast.keyword("dim", node.args[0]), *node.keywords])
        if (
            isinstance(f, ast.Attribute)
            and f.attr == "size"
            and len(node.args) == 1
            and self._flip()
        ):
            return ast.Subscript(
                ast.Attribute(f.value, "shape", ast.Load()), node.args[0], ast.Load()
            )
        if not isinstance(f, ast.Attribute) or f.attr not in METHODS or not self._flip():
            return node
        if (
            isinstance(f.value, ast.Name)
            and f.value.id == "torch"
            and node.args
            and not isinstance(node.args[0], ast.Starred)
        ):
            if f.attr == "matmul" and len(node.args) == 2:
                return ast.BinOp(node.args[0], ast.MatMult(), node.args[1])
            return ast.Call(
                ast.Attribute(node.args[0], f.attr, ast.Load()), node.args[1:], node.keywords
            )
        if f.attr == "transpose" and len(node.args) == 2 and not node.keywords:
            return ast.Call(f, node.args[::-1], [])
        if not (
            isinstance(f.value, ast.Name) and f.value.id in ("torch", "F", "nn", "math", "self")
        ) and isinstance(f.value, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
            return ast.Call(
                ast.Attribute(ast.Name("torch", ast.Load()), f.attr, ast.Load()),
                [f.value, *node.args],
                node.keywords,
            )
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        v = node.value
        if (
            isinstance(v, ast.Attribute)
            and v.attr == "shape"
            and isinstance(node.slice, (ast.Constant, ast.UnaryOp))
            and self._flip()
        ):
            return ast.Call(ast.Attribute(v.value, "size", ast.Load()), [node.slice], [])
        return node


def _is(args: list[ast.expr], text: str) -> bool:
    return len(args) == 1 and isinstance(args[0], ast.Constant) and args[0].value == text


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


class Loops(ast.NodeTransformer):
    """``[e for x in it]`` (a whole assignment's value or an argument) <-> a for loop appending to a list."""

    def __init__(self, rng: random.Random, p: float) -> None:
        self.rng, self.p = rng, p

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        body: list[ast.stmt] = []
        for stmt in node.body:
            comp = self._comprehension(stmt)
            if comp is not None and self.rng.random() < self.p:
                holder, field_name, lc = comp
                name = f"{self.rng.choice(WORDS)}s_{self.rng.randrange(100)}"
                gen = lc.generators[0]
                body.append(
                    ast.Assign([ast.Name(name, ast.Store())], ast.List([], ast.Load()), lineno=0)
                )
                append = ast.Expr(
                    ast.Call(
                        ast.Attribute(ast.Name(name, ast.Load()), "append", ast.Load()),
                        [lc.elt],
                        [],
                    )
                )
                body.append(ast.For(gen.target, gen.iter, [append], [], lineno=0))
                if field_name:
                    setattr(holder, field_name, ast.Name(name, ast.Load()))
                else:
                    holder.args[holder.args.index(lc)] = ast.Name(name, ast.Load())  # type: ignore[attr-defined]
            body.append(stmt)
        node.body = _to_comprehensions(body, self.rng, self.p)
        return node

    @staticmethod
    def _comprehension(stmt: ast.stmt) -> tuple[ast.AST, str, ast.ListComp] | None:
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.ListComp)
                and len(node.generators) == 1
                and not node.generators[0].ifs
            ):
                for parent in ast.walk(stmt):
                    if isinstance(parent, ast.Call) and node in parent.args:
                        return parent, "", node
                    if isinstance(parent, (ast.Assign, ast.Return)) and parent.value is node:
                        return parent, "value", node
        return None


def _to_comprehensions(body: list[ast.stmt], rng: random.Random, p: float) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    i = 0
    while i < len(body):
        a, b = body[i], body[i + 1] if i + 1 < len(body) else None
        if (
            isinstance(a, ast.Assign)
            and isinstance(a.value, ast.List)
            and not a.value.elts
            and isinstance(b, ast.For)
            and len(b.body) == 1
            and isinstance(b.body[0], ast.Expr)
            and isinstance(b.body[0].value, ast.Call)
            and isinstance(b.body[0].value.func, ast.Attribute)
            and b.body[0].value.func.attr == "append"
            and len(b.body[0].value.args) == 1
            and not b.orelse
            and rng.random() < p
        ):
            elt = b.body[0].value.args[0]
            out.append(
                ast.Assign(
                    a.targets,
                    ast.ListComp(elt, [ast.comprehension(b.target, b.iter, [], 0)]),
                    lineno=0,
                )
            )
            i += 2
            continue
        out.append(a)
        i += 1
    return out
