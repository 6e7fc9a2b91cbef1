"""A plagiarism corpus: a class of students who each write their own code, and some who copy and disguise it.

Independent work. Each student's module for an exercise starts from a base that many students share (a reference
solution, a corpus bug: the reference with one mistake, an example-class student) and takes that student's own
choices at every place where students differ: equivalent torch calls (``a @ b`` or ``torch.matmul(a, b)``,
``x.exp()`` or ``torch.exp(x)``, ``x.shape[-1]`` or ``x.size(-1)``, ...), a sub-expression in a variable of its own
or inline, the order of independent statements, names, comments and layout (:func:`independent`).

Copies. A copier takes another student's module and disguises it with the transformations students use
(:data:`DISGUISES`): renamed identifiers, reordered functions, reordered statements, changed comments and whitespace,
inlined or extracted helpers, loops <-> comprehensions, different but equivalent torch calls, junk padding
(unused assignments and a helper nobody calls, to dilute the share) (:func:`disguise`).
The steps themselves: :mod:`plagiarism_disguises` and :mod:`plagiarism_steps`.

Every module stays valid Python with the same behaviour (bugs included); :func:`make_class` says which pairs share
an origin: the ground truth of ``benchmarks/similarity.py``.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from plagiarism_disguises import (
    Extract,
    comments,
    extract_helper,
    pad,
    rename,
    reorder_functions,
    reorder_statements,
)
from plagiarism_steps import Loops, Sites


@dataclass
class Student:
    key: str
    modules: dict[str, str] = field(default_factory=dict)  # module -> source
    origin: dict[str, str] = field(default_factory=dict)  # module -> key of whoever wrote it first
    base: dict[str, int] = field(
        default_factory=dict
    )  # module -> the base it was made from (its index)
    family: dict[str, int] = field(
        default_factory=dict
    )  # module -> the family of that base (who wrote it)
    disguises: dict[str, list[str]] = field(default_factory=dict)  # module -> what the copier did


def _fix(tree: ast.Module) -> ast.Module:
    """``import math`` (for ``math.sqrt``) after the docstring and ``__future__`` imports."""
    if not any(
        isinstance(n, ast.Import) and any(a.name == "math" for a in n.names) for n in tree.body
    ):
        at = 0
        while at < len(tree.body) and (
            isinstance(tree.body[at], ast.Expr)
            or (isinstance(tree.body[at], ast.ImportFrom) and tree.body[at].module == "__future__")
        ):  # type: ignore[attr-defined]
            at += 1
        tree.body.insert(at, ast.Import([ast.alias("math")]))
    return ast.fix_missing_locations(tree)


TreeStep = Callable[[ast.Module, random.Random, float], None]
DISGUISES: dict[str, TreeStep | None] = {
    "rename": rename,
    "reorder_functions": reorder_functions,
    "reorder_statements": reorder_statements,
    "comments": None,
    "extract_inline": lambda t, r, p: Extract(r, p).visit(t) and None,
    "helper": extract_helper,
    "loops": lambda t, r, p: Loops(r, p).visit(t) and None,
    "torch_calls": lambda t, r, p: Sites(r, p).visit(t) and None,
    "padding": pad,
}


def disguise(source: str, kinds: list[str], rng: random.Random, p: float = 0.5) -> str:
    """``source`` with each of ``kinds`` applied (at each place it applies, with probability ``p``)."""
    tree = ast.parse(source)
    for kind in kinds:
        step = DISGUISES[kind]
        if step is not None:
            step(tree, rng, p)
    text = ast.unparse(_fix(tree))
    return comments(text, rng, p) if "comments" in kinds else text + "\n"


def independent(source: str, rng: random.Random) -> str:
    """One student's own way of writing ``source``: each of their choices drawn at every place."""
    tree = ast.parse(source)
    rename(tree, rng, 0.7)
    Sites(rng, 0.5).visit(tree)
    Extract(rng, 0.3).visit(tree)
    reorder_statements(tree, rng, 0.5)
    Loops(rng, 0.3).visit(tree)
    return comments(ast.unparse(_fix(tree)), rng, rng.random())


def make_class(
    bases: dict[str, list[str]],
    n: int,
    *,
    families: dict[str, list[int]] | None = None,
    copy_rate: float = 0.1,
    seed: int = 0,
    kinds: list[str] | None = None,
    exact: bool = False,
) -> list[Student]:
    """``n`` students; each module drawn from ``bases[module]`` (a family drawn first, all equally likely, then a
    base of it: ``families[module][i]`` is base i's) and made their own, then a ``copy_rate`` share of them copy
    one to all modules of another student, disguised with 1 to 4 of ``kinds`` (default: all; ``exact``: all of
    ``kinds``, together)."""
    rng = random.Random(seed)
    students = [Student(f"s{i:04d}") for i in range(n)]
    for s in students:
        for module, pool in bases.items():
            fam = (families or {}).get(module) or [0] * len(pool)
            drawn = rng.choice(sorted(set(fam)))
            s.base[module] = rng.choice([i for i, f in enumerate(fam) if f == drawn])
            s.family[module] = drawn
            s.modules[module] = independent(pool[s.base[module]], rng)
            s.origin[module] = s.key
    for s in rng.sample(students, k=int(copy_rate * n)):
        source = rng.choice([o for o in students if o is not s])
        for module in rng.sample(sorted(bases), k=rng.randint(1, len(bases))):
            pool_kinds = kinds or sorted(DISGUISES)
            chosen = (
                list(pool_kinds)
                if exact
                else rng.sample(pool_kinds, k=rng.randint(1, min(4, len(pool_kinds))))
            )
            s.modules[module] = disguise(source.modules[module], chosen, rng)
            s.origin[module] = source.origin[module]
            s.base[module] = source.base[module]
            s.family[module] = source.family[module]
            s.disguises[module] = chosen
    return students
