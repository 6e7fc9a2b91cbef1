"""Banned APIs found by binding in the code an exercise runs: the scan's proof of a ban violation.

For each exercise, the code that can run while its ban is active is followed from its roots: the
exercise's own names (``banned``: the manifest's ``names``; ``banned_in``: the scoped function or
class) and the module-level statements of its module that run code at import (calls; never the ``if
__name__ == "__main__":`` block). From there, every module-level definition a reached name resolves
to (by binding) is reached too, across the submission's modules (``from .helper import f`` reaches
``helper.f``, not the rest of ``helper``). A name in that code that resolves to a banned API, or to
one of its aliases (another torch path to the same operator:
``torch._C._nn.scaled_dot_product_attention``, ``torch.ops.aten._softmax``, a re-export), is a
``banned-api`` finding for that exercise. A tensor method (``x.softmax(...)``) counts whatever ``x``
is, unless a class of the same file defines a method of that name (``x`` may be one of those).

So a self-test that compares with ``torch.softmax`` in a helper nothing calls, or in the main block,
costs nothing; an alias captured in a helper module while another exercise's ban was active does not
escape.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from grader.course import manifest
from grader.inside.banned_ops import operators
from grader.scoring.bindings import UNKNOWN, Scopes
from grader.scoring.integrity import Finding, Parsed
from grader.scoring.integrity_match import show
from grader.scoring.scopes import Binding

Site = tuple[str, ast.AST]  # (module stem, statement)


def findings(
    parsed: dict[str, Parsed], assignment: manifest.Assignment, single_module: str | None
) -> list[Finding]:
    found: dict[tuple[str, int, str], Finding] = {}
    for exercise in assignment.exercises:
        module = single_module or exercise.module
        if parsed.get(module) is None or parsed[module].scopes is None:
            continue
        scoped = [
            (exercise.names, exercise.banned),
            *(((s,), apis) for s, apis in exercise.banned_in.items()),
        ]
        for roots, apis in scoped:
            if apis:
                for stem, node, api in _uses(parsed, module, roots, apis):
                    line = getattr(node, "lineno", 0)
                    shown = show(node)
                    construct = shown if shown == api else f"{shown} (= {api})"
                    key = (stem, line, exercise.id)
                    found.setdefault(
                        key,
                        Finding(parsed[stem].name, line, construct, "banned-api", (exercise.id,)),
                    )
    return sorted(found.values(), key=lambda f: (f.file, f.line))


def _uses(
    parsed: dict[str, Parsed], module: str, roots: tuple[str, ...], apis: tuple[str, ...]
) -> Iterator[tuple[str, ast.AST, str]]:
    for stem, statement in reached(parsed, module, roots):
        scopes = parsed[stem].scopes
        assert scopes is not None  # reached() only enters parsed modules
        for node in ast.walk(statement):
            api = _banned(node, scopes, apis)
            if api:
                yield stem, node, api


def _banned(node: ast.AST, scopes: Scopes, apis: tuple[str, ...]) -> str:
    if not isinstance(node, (ast.Name, ast.Attribute, ast.Call)) or isinstance(
        getattr(node, "ctx", None), ast.Store
    ):
        return ""
    for path in scopes.origins(node):
        for api in apis:
            if _is_api(path, api):
                return api
    if (
        isinstance(node, ast.Attribute)
        and UNKNOWN in scopes.origins(node.value)
        and node.attr not in scopes.methods
    ):
        for api in apis:
            if api.startswith("torch.Tensor.") and node.attr == api.rsplit(".", 1)[1]:
                return api  # x.softmax(...): a tensor method, whatever x is
    return ""


def _is_api(path: str, api: str) -> bool:
    if path == api or path.startswith(api + "."):
        return True
    parts = path.split(".")
    names = {*operators(api), api.rsplit(".", 1)[1]}
    return parts[0] == "torch" and any(p in names for p in parts[1:])


# -- what can run
# -----------------------------------------------------------------------------------
def reached(parsed: dict[str, Parsed], module: str, roots: tuple[str, ...]) -> list[Site]:
    """The statements that can run for ``roots`` of ``module`` (see the module docstring)."""
    todo: list[Site] = [*_import_time(parsed[module], module), *_named(parsed, module, set(roots))]
    seen: set[int] = set()
    out: list[Site] = []
    while todo:
        stem, statement = todo.pop()
        if id(statement) in seen:
            continue
        seen.add(id(statement))
        out.append((stem, statement))
        todo += _referenced(parsed, stem, statement)
    return out


def _import_time(file: Parsed, stem: str) -> list[Site]:
    """Module-level statements that run code when the module is imported (main block excluded)."""
    assert file.tree is not None
    renamed = any(
        isinstance(n, ast.Name) and n.id == "__name__" and isinstance(n.ctx, ast.Store)
        for n in file.nodes
    )
    out: list[Site] = []
    for statement in file.tree.body:
        if isinstance(
            statement,
            (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom),
        ):
            continue
        if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and not any(
            isinstance(n, ast.Call) for n in ast.walk(statement)
        ):
            continue  # reached by name where it is used
        if _main_guard(statement) and not renamed:
            continue
        out.append((stem, statement))
    return out


def _main_guard(statement: ast.stmt) -> bool:
    test = statement.test if isinstance(statement, ast.If) else None
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _named(
    parsed: dict[str, Parsed],
    stem: str,
    names: set[str] | None,
    chain: frozenset[tuple[str, str]] = frozenset(),
) -> list[Site]:
    """The module-level statements binding ``names`` in ``stem`` (None: all of the module),
    following re-exports (``from .a import f`` in ``b``) through the modules ``chain`` has not
    visited yet."""
    file = parsed.get(stem)
    if file is None or file.scopes is None or file.tree is None:
        return []
    if names is not None:
        names = {n for n in names if (stem, n) not in chain}
        chain = chain | {(stem, n) for n in names}
    if names is None:
        return [(stem, s) for s in file.tree.body if not _main_guard(s)]
    bindings = file.scopes.module.bindings
    out = [
        site
        for name in names
        for b in bindings.get(name, [])
        for site in _binding_sites(parsed, stem, b, chain)
    ]
    for star in (
        m for m in file.scopes.module.star_imports if m.startswith("@")
    ):  # names a star import may bring
        out += (
            _named(parsed, star[1:].split(".")[0], names - bindings.keys(), chain)
            if names - bindings.keys()
            else []
        )
    return out


def _referenced(parsed: dict[str, Parsed], stem: str, statement: ast.AST) -> list[Site]:
    """Statements that the names read in ``statement`` resolve to: module-level bindings, other
    modules' names."""
    scopes = parsed[stem].scopes
    assert scopes is not None
    out: list[Site] = []
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            scope = scopes.resolve(node.id, scopes.scope_of.get(id(node), scopes.module))
            if scope is scopes.module:
                out += [
                    site
                    for b in scope.bindings[node.id]
                    for site in _binding_sites(parsed, stem, b)
                ]
            elif scope is None:  # perhaps from a star import of one of the submission's modules
                out += [
                    site
                    for m in scopes.module.star_imports
                    if m.startswith("@")
                    for site in _named(parsed, m[1:].split(".")[0], {node.id})
                ]
        elif isinstance(node, ast.Attribute):
            for base in scopes.origins(node.value):
                if (
                    base.startswith("@") and "." not in base
                ):  # helper.f, with helper the submission's module
                    out += _named(parsed, base[1:], {node.attr})
    return out


def _binding_sites(
    parsed: dict[str, Parsed],
    stem: str,
    binding: Binding,
    chain: frozenset[tuple[str, str]] = frozenset(),
) -> list[Site]:
    if binding.kind == "import" and isinstance(binding.value, str):
        head, _, rest = binding.value.removeprefix("@").partition(".")
        local = binding.value.startswith("@") and rest  # a name of another module of the submission
        return _named(parsed, head, {rest.split(".")[0]}, chain) if local else []
    return [(stem, binding.statement)] if binding.statement is not None else []
