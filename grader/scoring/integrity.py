"""Static integrity scan of a submission, on the trusted side, before any of it runs.

Bans and measurements inside the worker are advice: student code shares that process. So the scan reads every
file (``ast`` only: nothing is imported or run) and reports two kinds of finding, each with its file and line:

- ``withhold``: proof. The construct reaches what no exercise needs and what tampering is made of: the grader's own
  modules, the module registry, the callers' frames or the whole object graph, a function's closure or globals
  (where a ban stub's original would be), torch's mode stacks (where the bans and the memory measurement run); or
  (:mod:`grader.scoring.banned`) the exercise's own code names, by binding, an API banned there. An exercise whose
  code has one is withheld (:mod:`grader.scoring.withhold`).
- ``review``: reach that is not proof, shown to the instructor as "needs review" and never costing a point: any
  attribute or namespace access whose name is not known before run time, a dynamic builtin taken as a value, code
  made at run time, a private torch entry point, a library patched, and any import outside the allow-list below.

Names are resolved by binding (:mod:`grader.scoring.bindings`): a parameter named ``eval`` is not the builtin,
``g = getattr`` makes ``g(torch, name)`` a dynamic access. Strings and comments are not code; a string is read only
where it becomes a name (``getattr(torch, NAME)`` with ``NAME = "_C"`` is ``torch._C``). Imports are an allow-list
(the scan is complete by construction: a module nobody listed is a finding, not a miss); within allowed modules,
the few entry points that reach further (``sys.modules``, ``operator.attrgetter``, ``typing.get_type_hints``) are
findings too. The rules are data: :mod:`grader.scoring.integrity_rules`.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field, replace
from pathlib import Path

from grader import safetext
from grader.scoring import parse_probe
from grader.scoring.bindings import UNKNOWN, Scopes, accessor_operands
from grader.scoring.integrity_rules import (
    ACCESSORS,
    ALLOWED_MODULES,
    ATTRIBUTE_BUILTINS,
    ATTRIBUTES,
    CALLS,
    DISPATCH_NAMES,
    HARMLESS_DUNDERS,
    IMPORTERS,
    MODULE_KINDS,
    QUALIFIED,
    SYS_PLAIN,
    TORCH_PRIVATE_OK,
    VALUE_BUILTINS,
)
from grader.scoring.integrity_rules import REVIEW as REVIEW  # re-exported: the scan's API
from grader.scoring.integrity_rules import RULES as RULES
from grader.scoring.integrity_rules import WITHHOLD as WITHHOLD

MAX_NODES = 200_000  # an honest exercise module has a few thousand
CACHED_BYTES = (
    16 << 10
)  # files up to this size are parsed once per process (see parse): a few MB at most


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    construct: str
    rule: str
    exercises: tuple[str, ...] = field(
        default=()
    )  # for `withhold`: the exercises it withholds (set by withhold.py)

    @property
    def severity(self) -> str:
        return RULES[self.rule][0]

    @property
    def reason(self) -> str:
        return RULES[self.rule][1]

    def to_dict(self) -> dict[str, object]:
        return {
            "file": safetext.name(self.file),
            "line": self.line,
            "construct": safetext.name(self.construct, 120),
            "rule": self.rule,
            "severity": self.severity,
            "reason": self.reason,
            "exercises": list(self.exercises),
        }

    def attributed(self, exercises: tuple[str, ...]) -> Finding:
        return replace(self, exercises=exercises)


@dataclass(frozen=True)
class Parsed:
    """One file read for the scan: its tree and its scopes (or the finding that it could not be read)."""

    name: str
    tree: ast.Module | None
    scopes: Scopes | None
    nodes: list[ast.AST]
    problem: Finding | None = None


def parse(
    source: bytes | str, filename: str, local_modules: frozenset[str] = frozenset()
) -> Parsed:
    """The file read for the scan; a small file seen before (the same bytes, name and neighbours) is not read again
    (a class of submissions shares most of its helpers and untouched modules)."""
    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    if len(data) <= CACHED_BYTES:
        return _parse_cached(data, filename, local_modules)
    return _parse(data, filename, local_modules)


@functools.lru_cache(maxsize=32)
def _parse_cached(data: bytes, filename: str, local_modules: frozenset[str]) -> Parsed:
    return _parse(data, filename, local_modules)


def _parse(source: bytes, filename: str, local_modules: frozenset[str]) -> Parsed:
    costly = parse_probe.too_costly(
        filename, source
    )  # a large file is parsed in a bounded child first
    if costly is not None:
        return Parsed(filename, None, None, [], Finding(filename, 0, costly, "unscannable"))
    try:
        tree = ast.parse(source, filename)
    except SyntaxError:
        return Parsed(
            filename, None, None, []
        )  # the worker cannot import it either: its tests fail on that
    except (ValueError, RecursionError, MemoryError) as exc:
        return Parsed(
            filename, None, None, [], Finding(filename, 0, type(exc).__name__, "unscannable")
        )
    nodes = list(
        ast.walk(tree)
    )  # iterative and outermost first: a deep file cannot overflow the stack here
    if len(nodes) > MAX_NODES:
        return Parsed(
            filename,
            None,
            None,
            [],
            Finding(filename, 0, f"{len(nodes)} syntax nodes", "unscannable"),
        )
    try:
        scopes = Scopes(
            tree, local_modules - {"grader"}
        )  # `import grader` is the grader's, whatever the box holds
    except RecursionError:
        return Parsed(
            filename, None, None, [], Finding(filename, 0, "RecursionError", "unscannable")
        )
    return Parsed(filename, tree, scopes, nodes)


def local_modules(box: Path) -> frozenset[str]:
    return frozenset(p.stem for p in box.glob("*.py"))


def parse_box(box: Path) -> dict[str, Parsed]:
    """Every ``.py`` file of a staged submission, by module name."""
    local = local_modules(box)
    return {
        p.stem: parse(p.read_bytes(), p.name, local)
        for p in sorted(box.glob("*.py"))
        if p.is_file()
    }


def scan_box(box: Path) -> list[Finding]:
    """Findings for every ``.py`` file of a staged submission, sorted by file and line."""
    return [f for parsed in parse_box(box).values() for f in scan(parsed)]


def scan_source(
    source: bytes | str, filename: str, local: frozenset[str] = frozenset()
) -> list[Finding]:
    return scan(parse(source, filename, local))


def scan(parsed: Parsed) -> list[Finding]:
    if parsed.problem is not None:
        return [parsed.problem]
    if parsed.scopes is None:
        return []
    calls = {id(n.func): n for n in parsed.nodes if isinstance(n, ast.Call)}
    found: dict[tuple[int, str, str], Finding] = {}
    for node in parsed.nodes:
        for rule, construct in _check(node, parsed.scopes, calls):
            line = getattr(
                node, "lineno", 0
            )  # one finding per line and rule (the outermost expression); per
            key = (
                line,
                rule,
                construct if rule == "module" else "",
            )  # module for imports: each is named
            found.setdefault(key, Finding(parsed.name, line, construct, rule))
    return sorted(found.values(), key=lambda f: (f.line, f.rule))


# -- rules --------------------------------------------------------------------------------------
def _check(node: ast.AST, scopes: Scopes, calls: dict[int, ast.Call]) -> list[tuple[str, str]]:
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
    """``X.__getattr__``/``__getattribute__``/``__setattr__``/``__delattr__`` called: unbound on a class
    (``object.__setattr__(self, "x", v)``) the name is the second argument, bound (``super().__getattr__("x")``) the
    first; a name known before run time is read as that attribute, any other is a dynamic access."""
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
    """``getattr``/``setattr``/``delattr``: a name known before run time is read as the attribute it is."""
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
    """An object imported from outside the submission (a module, a class, a function of a library)."""
    return any(o != UNKNOWN and not o.startswith(("@", "def:")) for o in origins)


def show(node: ast.AST) -> str:
    """The construct as written, short: a long or multi-line one is not unparsed whole (that is quadratic)."""
    one_line = getattr(node, "lineno", 0) == getattr(node, "end_lineno", -1)
    if not one_line or (node.end_col_offset or 0) - node.col_offset > 100:  # type: ignore[attr-defined]
        tail = node.attr if isinstance(node, ast.Attribute) else type(node).__name__
        return f"... .{tail}" if isinstance(node, ast.Attribute) else f"<long {tail} expression>"
    try:
        return ast.unparse(node)
    except (RecursionError, ValueError):
        return type(node).__name__
