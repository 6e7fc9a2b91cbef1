"""Names resolved by binding, as Python resolves them: what a name in a submission can stand for.

The integrity scan asks of a name what it is, never how it is spelt: a parameter or a local named
``eval`` is not the builtin, ``g = getattr`` makes ``g`` the builtin, ``from torch import nn`` makes
``nn.functional`` a torch path. Scopes follow the language (module, function, lambda, class,
comprehension; ``global``/``nonlocal``; a class body is not visible from its methods). What a name
may hold is the union over every binding of it in its scope (imports, assignments, ``for`` targets,
definitions; a parameter holds anything), so a value is known only when every binding agrees:
``origins`` gives dotted paths (``torch.nn.functional.softmax``, ``builtins.getattr``, ``@helper.f``
for a submission module's name) with ``?`` for anything unknown, and ``strings`` the literal strings
an expression can only be (``for name in ("W_query", "W_key")``), or None.

Everything here is iterative or depth-capped: a hostile file cannot exhaust the trusted process's
stack.
"""

from __future__ import annotations

import ast
import builtins
import itertools

from grader.scoring.scopes import Binding, Scope, ScopeTree, enclosing_functions

UNKNOWN = "?"
BUILTIN_NAMES = frozenset(
    {*dir(builtins), "__builtins__"}
)  # __builtins__: the namespace every module reads
MAX_STRINGS = 64  # literal strings tracked per expression: more is not a literal any more
MAX_DEPTH = 24  # binding chains followed (x = y; y = z ...): ordinary code needs two or three


class Scopes(ScopeTree):
    """A module's scopes, and what each name and expression in it can stand for."""

    def __init__(self, tree: ast.Module, local_modules: frozenset[str] = frozenset()) -> None:
        super().__init__(tree, local_modules)
        self._origins: dict[int, frozenset[str]] = {}
        self._truncated = False

    def resolve(self, name: str, scope: Scope) -> Scope | None:
        """The scope whose binding ``name`` reads from ``scope``; None for a builtin (or nothing at
        all)."""
        if name in scope.declared_global:
            return self.module if name in self.module.bindings else None
        if name in scope.bindings and name not in scope.declared_nonlocal:
            return scope
        for outer in enclosing_functions(scope):
            if name in outer.bindings and name not in outer.declared_global:
                return outer
        return self.module if name in self.module.bindings else None

    def visible(self, node: ast.Name) -> tuple[list[Binding], bool]:
        """The bindings a name read can see, and whether it may also read a builtin or a star import
        (a module or class binding that is conditional, deleted, or made after a top-level read does
        not hide them)."""
        use = self.scope_of.get(id(node), self.module)
        scope = self.resolve(node.id, use)
        if scope is None:
            return [], True
        found = list(scope.bindings[node.id])
        if scope.kind in ("function", "comprehension") or self._definite(scope, node, use):
            return found, False
        if scope.kind == "class" and node.id in self.module.bindings:
            found += self.module.bindings[node.id]
            return found, not self._definite(self.module, node, use) and self._falls_back(node.id)
        return found, self._falls_back(node.id)

    def _falls_back(self, name: str) -> bool:
        """Whether an unbound module-level read can still find something: a builtin, or a star
        import's name."""
        return name in BUILTIN_NAMES or bool(self.module.star_imports)

    def _definite(self, scope: Scope, node: ast.Name, use: Scope) -> bool:
        """A module or class binding certainly made before ``node`` is read (a loop's target inside
        its body)."""
        if node.id in scope.deleted:
            return False
        at = (node.lineno, node.col_offset)
        for binding in scope.bindings.get(node.id, []):
            statement = binding.statement
            if not isinstance(statement, ast.stmt) or id(statement) not in scope.body:
                continue  # conditional: inside an if, a try, a loop body
            if (
                use is not scope
            ):  # read inside a function: runs after the module (or class body) has run
                return True
            start, end = (
                (statement.lineno, statement.col_offset),
                (statement.end_lineno or 0, statement.end_col_offset or 0),
            )
            if end <= at or (
                isinstance(statement, (ast.For, ast.AsyncFor, ast.With)) and start <= at <= end
            ):
                return True
        return False

    def origins(self, node: ast.AST, depth: int = 0) -> frozenset[str]:
        """Dotted paths ``node`` may stand for (``builtins.getattr``, ``torch._C``, ``@helper.f``),
        ``?`` if unknown."""
        key = id(node)
        if key in self._origins:
            return self._origins[key]
        if depth > MAX_DEPTH:
            self._truncated = True
            return frozenset({UNKNOWN})
        outer, self._truncated = self._truncated, False
        self._origins[key] = frozenset({UNKNOWN})  # a cycle (x = y; y = x) reads as unknown
        found = self._compute(node, depth)
        if (
            self._truncated
        ):  # cut short by the depth cap: right here, not for a shallower reader of this node
            del self._origins[key]
        else:
            self._origins[key] = found
        self._truncated = outer or self._truncated
        return found

    def _compute(self, node: ast.AST, depth: int) -> frozenset[str]:
        if isinstance(node, ast.Name):
            return self._name_origins(node, depth)
        if isinstance(node, ast.Attribute):
            return _extend(self.origins(node.value, depth + 1), {node.attr})
        if isinstance(node, ast.Call):
            return self._call_origins(node, depth)
        if isinstance(node, (ast.IfExp, ast.BoolOp)):
            parts = [node.body, node.orelse] if isinstance(node, ast.IfExp) else node.values
            return frozenset().union(*(self.origins(p, depth + 1) for p in parts))
        if isinstance(node, ast.NamedExpr):
            return self.origins(node.value, depth + 1)
        return frozenset({UNKNOWN})

    def _name_origins(self, node: ast.Name, depth: int) -> frozenset[str]:
        found, fallback = self.visible(node)
        out: set[str] = set()
        for binding in found:
            out |= self.binding_origins(binding, depth)
        if fallback:
            out |= {f"{m}.{node.id}" for m in self.module.star_imports}
            out |= {f"builtins.{node.id}"} if node.id in BUILTIN_NAMES else set()
        return frozenset(out or {UNKNOWN})

    def binding_origins(self, binding: Binding, depth: int = 0) -> frozenset[str]:
        if binding.kind == "import" and isinstance(binding.value, str):
            return frozenset({binding.value})
        if binding.kind == "expr" and isinstance(binding.value, ast.AST):
            return self.origins(binding.value, depth + 1)
        if binding.kind == "iter" and isinstance(binding.value, (ast.Tuple, ast.List, ast.Set)):
            return frozenset().union(
                *(self.origins(e, depth + 1) for e in binding.value.elts)
            ) or frozenset({UNKNOWN})
        if binding.kind == "def" and isinstance(
            binding.value, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ):
            return frozenset({f"def:{binding.value.name}"})
        return frozenset({UNKNOWN})

    def _call_origins(self, node: ast.Call, depth: int) -> frozenset[str]:
        """``getattr(x, "name")`` and ``importlib.import_module("m")`` / ``__import__("m")`` with
        literal names."""
        func = self.origins(node.func, depth + 1)
        if "builtins.getattr" in func and len(node.args) >= 2:
            names = self.strings(node.args[1])
            return (
                _extend(self.origins(node.args[0], depth + 1), names)
                if names
                else frozenset({UNKNOWN})
            )
        if isinstance(node.func, ast.Attribute) and node.func.attr in (
            "__getattr__",
            "__getattribute__",
        ):
            target, name = accessor_operands(node.func, node, self)
            names = self.strings(name) if name is not None else None
            return (
                _extend(self.origins(target, depth + 1), names)
                if names and target
                else frozenset({UNKNOWN})
            )
        if func & {"importlib.import_module", "builtins.__import__"} and node.args:
            names = self.strings(node.args[0])
            return frozenset(names) if names else frozenset({UNKNOWN})
        return frozenset({UNKNOWN})

    def strings(self, node: ast.AST, depth: int = 0) -> frozenset[str] | None:
        """The literal strings ``node`` can only be, or None when it is not known before run
        time."""
        if depth > MAX_DEPTH:
            return None
        if isinstance(node, ast.Constant):
            return frozenset({node.value}) if isinstance(node.value, str) else None
        if isinstance(node, ast.Name):
            found, fallback = self.visible(node)
            if not found or fallback:
                return None
            parts = [self._binding_strings(b, depth + 1) for b in found]
            return None if any(p is None for p in parts) else _capped(frozenset().union(*parts))  # type: ignore[arg-type]
        if isinstance(node, ast.JoinedStr):
            pieces = [
                self.strings(
                    v.value
                    if isinstance(v, ast.FormattedValue)
                    and v.conversion == -1
                    and v.format_spec is None
                    else v,
                    depth + 1,
                )
                for v in node.values
            ]
            return _product(pieces)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return _product(
                [self.strings(node.left, depth + 1), self.strings(node.right, depth + 1)]
            )
        if isinstance(node, ast.IfExp):
            parts = [self.strings(node.body, depth + 1), self.strings(node.orelse, depth + 1)]
            return None if any(p is None for p in parts) else _capped(frozenset().union(*parts))  # type: ignore[arg-type]
        return None

    def _binding_strings(self, binding: Binding, depth: int) -> frozenset[str] | None:
        if binding.kind == "expr" and isinstance(binding.value, ast.AST):
            return self.strings(binding.value, depth)
        elements = self._literal_elements(binding.value, depth) if binding.kind == "iter" else None
        if elements is None:
            return None
        parts = [self.strings(e, depth) for e in elements]
        return None if any(p is None for p in parts) else _capped(frozenset().union(*parts))  # type: ignore[arg-type]

    def _literal_elements(self, node: ast.AST | str | None, depth: int) -> list[ast.expr] | None:
        """The elements of a literal tuple, list or set, also through names bound only to one
        (``NAMES``)."""
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return list(node.elts)
        if not isinstance(node, ast.Name) or depth > MAX_DEPTH:
            return None
        found, fallback = self.visible(node)
        if fallback or not found or any(b.kind != "expr" for b in found):
            return None
        out: list[ast.expr] = []
        for binding in found:
            elements = self._literal_elements(binding.value, depth + 1)
            if elements is None:
                return None
            out += elements
        return out


def _extend(bases: frozenset[str], names: set[str] | frozenset[str]) -> frozenset[str]:
    out = {UNKNOWN} if UNKNOWN in bases else set()
    out |= {
        f"{base}.{name}"
        for base in bases
        if base != UNKNOWN and not base.startswith("def:")
        for name in names
    }
    out |= {UNKNOWN for base in bases if base.startswith("def:")}
    return frozenset(out)


def _capped(found: frozenset[str]) -> frozenset[str] | None:
    return found if len(found) <= MAX_STRINGS else None


def _product(pieces: list[frozenset[str] | None]) -> frozenset[str] | None:
    if any(p is None for p in pieces):
        return None
    total = 1
    for piece in pieces:
        total *= len(piece)  # type: ignore[arg-type]  # no None: checked above
        if total > MAX_STRINGS:
            return None
    return frozenset("".join(parts) for parts in itertools.product(*pieces))  # type: ignore[arg-type]


def accessor_operands(
    node: ast.Attribute, call: ast.Call, scopes: Scopes
) -> tuple[ast.AST | None, ast.AST | None]:
    """(object, name) of ``X.__getattr__(...)``: on a class (``object.__setattr__(self, "x", v)``,
    unbound) the object and the name are the first two arguments; on anything else (bound) the name
    is the first."""
    unbound = any(
        b.startswith("builtins.") or b.rsplit(".", 1)[-1][:1].isupper()
        for b in scopes.origins(node.value)
        if b != UNKNOWN
    )
    args: list[ast.AST | None] = [*call.args, None, None]
    return (args[0], args[1]) if unbound else (node.value, args[0])
