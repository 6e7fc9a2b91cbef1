"""The disguise steps of the plagiarism corpus (besides the torch calls and loops of
:mod:`plagiarism_steps`): renamed identifiers, reordered statements and functions, a call extracted
to a variable or inlined (:class:`Extract`), an extracted helper, comments and layout, junk
padding. :data:`plagiarism.DISGUISES` names them for copiers; :func:`plagiarism.independent` draws
some of them for each student's own work. Each keeps the module valid Python with the same
behaviour.
"""

from __future__ import annotations

import ast
import builtins
import io
import random
import tokenize

from plagiarism_steps import WORDS

_KEEP = set(dir(builtins)) | {"self", "torch", "nn", "F", "math", "super", "cls"}


def _functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]


def _api(tree: ast.Module) -> set[str]:
    """Names a test reaches: top-level definitions, methods, parameters, attributes (never renamed)."""
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for fn in _functions(tree):
        names.add(fn.name)
        names.update(a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs])
        names.update(a.arg for a in (fn.args.vararg, fn.args.kwarg) if a)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def rename(tree: ast.Module, rng: random.Random, p: float = 1.0) -> None:
    """Local variables (and loop and comprehension targets) get new names."""
    api = _api(tree)
    stored = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    local = sorted(stored - api - _KEEP)
    fresh = rng.sample(WORDS, k=min(len(local), len(WORDS)))
    mapping = {
        old: f"{new}_{rng.randrange(100)}"
        for old, new in zip(local, fresh, strict=False)
        if rng.random() < p
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in mapping:
            node.id = mapping[node.id]


def _reads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _writes(node: ast.AST) -> set[str]:
    return {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def _independent(a: ast.stmt, b: ast.stmt) -> bool:
    simple = (ast.Assign, ast.AnnAssign, ast.AugAssign)
    sets_attribute = any(
        isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
        for s in (a, b)
        for n in ast.walk(s)
    )
    return (
        isinstance(a, simple)
        and isinstance(b, simple)
        and not sets_attribute
        and not (_writes(a) & (_reads(b) | _writes(b)))
        and not (_writes(b) & _reads(a))
    )


def reorder_statements(tree: ast.Module, rng: random.Random, p: float = 1.0) -> None:
    """Adjacent independent assignments swapped."""
    for fn in _functions(tree):
        body = fn.body
        i = 0
        while i < len(body) - 1:
            if _independent(body[i], body[i + 1]) and rng.random() < p:
                body[i], body[i + 1] = body[i + 1], body[i]
                i += 2
            else:
                i += 1


def reorder_functions(tree: ast.Module, rng: random.Random, p: float = 1.0) -> None:
    """Top-level definitions (and methods) in another order; imports and constants stay first."""
    for holder in [tree, *(n for n in tree.body if isinstance(n, ast.ClassDef))]:
        defs = [n for n in holder.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        if len(defs) < 2 or rng.random() >= p:
            continue
        rest = [n for n in holder.body if not isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        order = defs[:]
        while order == defs:
            rng.shuffle(order)
        if holder is tree:  # a class used by a later one must stay above it: only functions move
            classes = [n for n in defs if isinstance(n, ast.ClassDef)]
            order = [n for n in order if not isinstance(n, ast.ClassDef)] + classes
        holder.body = rest + order


class Extract(ast.NodeTransformer):
    """A call inside an assignment's value moved to a variable of its own (extract), or the reverse (inline)."""

    def __init__(self, rng: random.Random, p: float) -> None:
        self.rng, self.p = rng, p

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        body: list[ast.stmt] = []
        for stmt in node.body:
            inner = self._inner_call(stmt)
            if inner is not None and self.rng.random() < self.p:
                name = f"{self.rng.choice(WORDS)}_{self.rng.randrange(100)}"
                body.append(ast.Assign([ast.Name(name, ast.Store())], inner[1], lineno=0))
                setattr(inner[0], inner[2], ast.Name(name, ast.Load()))
            body.append(stmt)
        node.body = _inline(body, self.rng, self.p)
        return node

    @staticmethod
    def _inner_call(stmt: ast.stmt) -> tuple[ast.AST, ast.expr, str] | None:
        if not isinstance(stmt, (ast.Assign, ast.Return)) or stmt.value is None:
            return None
        for node in ast.walk(stmt.value):
            for name in ("left", "right"):
                child = getattr(node, name, None)
                if isinstance(node, ast.BinOp) and isinstance(child, ast.Call):
                    return node, child, name
        return None


def _inline(body: list[ast.stmt], rng: random.Random, p: float) -> list[ast.stmt]:
    """``t = expr`` followed by the one statement using ``t`` once: ``expr`` put in its place."""
    out: list[ast.stmt] = []
    i = 0
    while i < len(body):
        stmt, nxt = body[i], body[i + 1] if i + 1 < len(body) else None
        target = (
            stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
        )
        if (
            isinstance(target, ast.Name)
            and nxt is not None
            and rng.random() < p
            and [n.id for n in ast.walk(nxt) if isinstance(n, ast.Name)].count(target.id) == 1
            and all(target.id not in _reads(s) for s in body[i + 2 :])
            and isinstance(nxt, (ast.Assign, ast.Return))
        ):
            value = stmt.value  # type: ignore[union-attr]
            for node in ast.walk(nxt):
                for name, child in ast.iter_fields(node):
                    if isinstance(child, ast.Name) and child.id == target.id:
                        setattr(node, name, value)
                    elif isinstance(child, list):
                        child[:] = [
                            value if isinstance(c, ast.Name) and c.id == target.id else c
                            for c in child
                        ]
            out.append(nxt)
            i += 2
            continue
        out.append(stmt)
        i += 1
    return out


def extract_helper(tree: ast.Module, rng: random.Random, p: float = 1.0) -> None:
    """A top-level function's returned expression moved into a helper of its own."""
    for fn in [n for n in tree.body if isinstance(n, ast.FunctionDef)]:
        ret = fn.body[-1] if fn.body else None
        if not isinstance(ret, ast.Return) or ret.value is None or rng.random() >= p:
            continue
        free = sorted(_reads(ret.value) - _KEEP - {n.name for n in tree.body if hasattr(n, "name")})
        helper = f"_{rng.choice(WORDS)}_{fn.name}"
        tree.body.append(
            ast.FunctionDef(
                helper,
                ast.arguments([], [ast.arg(a) for a in free], None, [], [], None, []),
                [ast.Return(ret.value)],
                [],
                None,
                lineno=0,
            )
        )
        ret.value = ast.Call(
            ast.Name(helper, ast.Load()), [ast.Name(a, ast.Load()) for a in free], []
        )


def comments(source: str, rng: random.Random, p: float = 1.0) -> str:
    """Comments and blank lines added, the layout of some lines changed."""
    notes = [
        "# compute it",
        "# TODO check this",
        "# shape check",
        "# see the lecture",
        "# done",
        "# step",
        "# normalise",
        "# mask out",
        "# main part",
    ]
    out = []
    skip = _in_strings(source)
    for number, line in enumerate(source.splitlines(), 1):
        if number in skip or number + 1 in skip:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        if (
            line.strip()
            and not line.lstrip().startswith(("@", "else", "elif", "except", "finally", ")", "]"))
            and rng.random() < 0.3 * p
        ):
            out.append(indent + rng.choice(notes))
        out.append(
            line + (f"  {rng.choice(notes)}" if rng.random() < 0.15 * p and line.strip() else "")
        )
        if rng.random() < 0.1 * p:
            out.append("")
    return "\n".join(out) + "\n"


def _in_strings(source: str) -> set[int]:
    """Lines inside a multi-line string (no comment goes there)."""
    inside: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
            inside.update(range(tok.start[0] + 1, tok.end[0] + 1))
    return inside


def _junk(rng: random.Random) -> ast.stmt:
    """An assignment nobody reads, of an arithmetic of small constants (no behaviour)."""
    terms = " + ".join(
        f"{rng.randrange(1, 99)} * {rng.randrange(1, 9)}" for _ in range(rng.randint(1, 3))
    )
    name = f"{rng.choice(WORDS)}_pad{rng.randrange(100)}"
    return ast.parse(f"{name} = [{terms}, {rng.randrange(9)}]").body[0]


def pad(tree: ast.Module, rng: random.Random, p: float = 1.0) -> None:
    """Junk added to dilute the copy: unused assignments inside functions, before each statement with
    probability ``p`` (as many again as the code, at ``p = 1``), and a helper nobody calls."""
    for fn in _functions(tree):
        body: list[ast.stmt] = []
        for stmt in fn.body:
            if not isinstance(stmt, ast.Expr) and rng.random() < p:  # never before a docstring
                body.append(_junk(rng))
            body.append(stmt)
        fn.body = body
    helper = ast.parse(f"def _{rng.choice(WORDS)}_unused{rng.randrange(100)}():\n    pass").body[0]
    helper.body = [_junk(rng) for _ in range(rng.randint(3, 6))]  # type: ignore[attr-defined]
    tree.body.append(helper)
