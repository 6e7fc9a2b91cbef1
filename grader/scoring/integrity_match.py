"""Which integrity rules one syntax node breaks: the rules (:mod:`grader.scoring.integrity_rules`)
applied.

Kept apart from :mod:`grader.scoring.integrity` (reading a file for the scan, and the findings it
makes): this is the judgement of a single node, an import, an attribute, a name, a call or a
definition, with every name resolved by binding (:mod:`grader.scoring.bindings`).
"""

from __future__ import annotations

import ast

from grader.scoring.bindings import UNKNOWN, Scopes, accessor_operands
from grader.scoring.integrity_modules import ALLOWED_MODULES, MODULE_KINDS, SYS_PLAIN
from grader.scoring.integrity_rules import (
    ACCESSORS,
    ATTRIBUTE_BUILTINS,
    ATTRIBUTES,
    CALLS,
    DISPATCH_NAMES,
    HARMLESS_DUNDERS,
    IMPORTERS,
    QUALIFIED,
    TORCH_PRIVATE_OK,
    VALUE_BUILTINS,
)


def check(node: ast.AST, scopes: Scopes, calls: dict[int, ast.Call]) -> list[tuple[str, str]]:
    """(rule, construct as written) for each rule ``node`` breaks (``calls``: the calls by id of
    their function)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [hit for path in _imported(node, scopes) for hit in _module_rules(path)]
    if isinstance(node, ast.Attribute):
        shown = show(node)
        call = calls.get(id(node))
        if (
            node.attr in ACCESSORS and call is not None
        ):  # object.__setattr__(self, "x", v): a literal name is plain
            hits = _accessor(node, call, scopes)
        else:
            hits = _attribute_rules(node.attr, shown)
        hits += [hit for path in scopes.origins(node) for hit in path_rules(path, shown)]
        if isinstance(node.ctx, (ast.Store, ast.Del)) and _library(scopes.origins(node.value)):
            hits.append(("monkeypatch", shown))
        return hits
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        return _name_rules(node, scopes, calls)
    if isinstance(node, ast.Call):
        return _call_rules(node, scopes)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ATTRIBUTES:
        return [(ATTRIBUTES[node.name], f"def {node.name}")]
    return []


def _imported(node: ast.Import | ast.ImportFrom, scopes: Scopes) -> list[str]:
    if isinstance(node, ast.Import):
        return [scopes.local_path(a.name) for a in node.names]
    if node.level:
        return []  # a relative import: the submission's own modules, scanned themselves
    module = scopes.local_path(node.module or "")
    return [module, *(f"{module}.{a.name}" for a in node.names if a.name != "*")]


def _module_rules(path: str) -> list[tuple[str, str]]:
    head = path.split(".")[0]
    if path.startswith("@") or not head:
        return []
    hits = path_rules(path, path)
    if head not in ALLOWED_MODULES and head != "grader":
        hits.append(("module", f"{head} ({MODULE_KINDS.get(head, 'not on the allow-list')})"))
    return hits


def path_rules(path: str, shown: str) -> list[tuple[str, str]]:
    """What a dotted path reaches (``torch._C._nn.x``, ``sys.modules``, ``builtins.getattr``)."""
    if path == UNKNOWN or path.startswith(("@", "def:")):
        return []
    parts = path.split(".")
    if parts[0] == "grader":
        return [("grader-internals", shown)]
    for name, rule in QUALIFIED.items():
        if path == name or path.startswith(name + "."):
            return [(rule, shown)]
    if parts[0] == "sys" and len(parts) > 1 and parts[1] not in SYS_PLAIN:
        return [("introspection", shown)]
    if parts[0] == "builtins" and len(parts) > 1 and parts[1] in VALUE_BUILTINS:
        return []  # the builtin itself: judged where it is called or taken as a value
    if parts[0] != "torch":
        return []
    if any(p in DISPATCH_NAMES for p in parts[1:]):
        return [("dispatch-modes", shown)]
    if path not in TORCH_PRIVATE_OK and any(
        p.startswith("_") and not _dunder(p) for p in parts[1:]
    ):
        return [("private-torch", shown)]
    return []


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _attribute_rules(attr: str, shown: str) -> list[tuple[str, str]]:
    if attr in ATTRIBUTES:
        return [(ATTRIBUTES[attr], shown)]
    if _dunder(attr) and attr not in HARMLESS_DUNDERS:
        return [("introspection", shown)]
    return []


def _accessor(node: ast.Attribute, call: ast.Call, scopes: Scopes) -> list[tuple[str, str]]:
    """``X.__getattr__``/``__getattribute__``/``__setattr__``/``__delattr__`` called: unbound on a
    class (``object.__setattr__(self, "x", v)``) the name is the second argument, bound
    (``super().__getattr__("x")``) the first; a name known before run time is read as that
    attribute, any other is a dynamic access."""
    target, name = accessor_operands(node, call, scopes)
    names = scopes.strings(name) if name is not None else None
    if names is None:
        return [("dynamic-access", show(call))]
    bases = scopes.origins(target) if target is not None else frozenset({UNKNOWN})
    hits = [hit for name in sorted(names) for hit in _attribute_rules(name, show(call))]
    return hits + [
        hit
        for base in sorted(bases)
        for name in sorted(names)
        for hit in path_rules(f"{base}.{name}", show(call))
    ]


def _name_rules(
    node: ast.Name, scopes: Scopes, calls: dict[int, ast.Call]
) -> list[tuple[str, str]]:
    origins = scopes.origins(node)
    if "builtins.__builtins__" in origins:
        return [("dynamic-access", node.id)]
    if id(node) not in calls and any(
        o.removeprefix("builtins.") in VALUE_BUILTINS for o in origins if o.startswith("builtins.")
    ):
        return [("builtin-as-value", node.id)]
    return []


def _call_rules(node: ast.Call, scopes: Scopes) -> list[tuple[str, str]]:
    builtins_called = {
        o.removeprefix("builtins.") for o in scopes.origins(node.func) if o.startswith("builtins.")
    }
    hits = [(CALLS[name], show(node)) for name in sorted(builtins_called & CALLS.keys())]
    if builtins_called & ATTRIBUTE_BUILTINS and len(node.args) >= 2:
        hits += _dynamic_attribute(node, scopes, "getattr" not in builtins_called)
    if scopes.origins(node.func) & IMPORTERS:  # a module imported by a name known before run time
        hits += [hit for path in sorted(scopes.origins(node)) for hit in _module_rules(path)]
    return hits


def _dynamic_attribute(node: ast.Call, scopes: Scopes, writes: bool) -> list[tuple[str, str]]:
    """``getattr``/``setattr``/``delattr``: a name known before run time is read as the attribute it
    is."""
    shown = show(node)
    names = scopes.strings(node.args[1])
    if names is None:
        return [("dynamic-access", shown)]
    bases = scopes.origins(node.args[0])
    hits = [hit for name in sorted(names) for hit in _attribute_rules(name, shown)]
    hits += [
        hit
        for base in sorted(bases)
        for name in sorted(names)
        for hit in path_rules(f"{base}.{name}", shown)
    ]
    if writes and _library(bases):
        hits.append(("monkeypatch", shown))
    return hits


def _library(origins: frozenset[str]) -> bool:
    """An object imported from outside the submission (a module, a class, a function of a
    library)."""
    return any(o != UNKNOWN and not o.startswith(("@", "def:")) for o in origins)


def show(node: ast.AST) -> str:
    """The construct as written, short: a long or multi-line one is not unparsed whole (that is
    quadratic)."""
    one_line = getattr(node, "lineno", 0) == getattr(node, "end_lineno", -1)
    if not one_line or (node.end_col_offset or 0) - node.col_offset > 100:  # type: ignore[attr-defined]
        tail = node.attr if isinstance(node, ast.Attribute) else type(node).__name__
        return f"... .{tail}" if isinstance(node, ast.Attribute) else f"<long {tail} expression>"
    try:
        return ast.unparse(node)
    except (RecursionError, ValueError):
        return type(node).__name__
