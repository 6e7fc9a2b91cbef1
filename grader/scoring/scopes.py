"""The scopes of a module, as Python builds them: which names each scope binds, and how (the first
half of :mod:`grader.scoring.bindings`).

Module, function, lambda, class and comprehension scopes; ``global``/``nonlocal``; a function's
defaults, decorators and annotations belong to the enclosing scope, its body to its own; a
comprehension's first iterable to the enclosing scope. A binding records what gives the name its
value (an import path, an expression, the iterable of a ``for``, a definition, a parameter) and the
statement that makes it. Iterative: a deep file cannot exhaust the trusted process's stack.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(frozen=True)
class Binding:
    """One way a name gets its value: ``kind`` is import/expr/iter/def/param/unknown."""

    kind: str
    value: ast.AST | str | None = None
    statement: ast.AST | None = None  # the statement that binds (for reachability)


@dataclass(eq=False)
class Scope:
    node: ast.AST
    kind: str  # module, function, class, comprehension
    parent: Scope | None
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    declared_global: set[str] = field(default_factory=set)
    declared_nonlocal: set[str] = field(default_factory=set)
    star_imports: list[str] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)
    body: set[int] = field(
        default_factory=set
    )  # ids of the statements directly in this scope's body

    def bind(self, name: str, binding: Binding) -> None:
        self.bindings.setdefault(name, []).append(binding)


class ScopeTree:
    """The scopes of one module and the scope of each of its nodes."""

    def __init__(self, tree: ast.Module, local_modules: frozenset[str] = frozenset()) -> None:
        self.local_modules = local_modules
        # names of the methods the module's classes define
        self.methods: frozenset[str] = frozenset()
        self.module = Scope(tree, "module", None, body={id(n) for n in tree.body})
        self.scope_of: dict[int, Scope] = {}
        self._build(tree)

    def _build(self, tree: ast.Module) -> None:
        todo: list[tuple[ast.AST, Scope]] = [(tree, self.module)]
        while todo:
            node, scope = todo.pop()
            self.scope_of[id(node)] = scope
            inner = self._enter(node, scope)
            for child, where in self._children(node, scope, inner):
                todo.append((child, where))

    def _enter(self, node: ast.AST, scope: Scope) -> Scope | None:
        """The scope ``node`` opens (binding its name in ``scope`` first), if any; and the bindings
        it makes."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._target_scope(scope, node.name).bind(node.name, Binding("def", node, node))
            if scope.kind == "class" and not isinstance(node, ast.ClassDef):
                self.methods |= {node.name}
            inner = Scope(
                node,
                "class" if isinstance(node, ast.ClassDef) else "function",
                scope,
                body={id(n) for n in node.body},
            )
            if not isinstance(node, ast.ClassDef):
                self._bind_params(node.args, inner)
            return inner
        if isinstance(node, ast.Lambda):
            inner = Scope(node, "function", scope)
            self._bind_params(node.args, inner)
            return inner
        if isinstance(node, _COMPREHENSIONS):
            inner = Scope(node, "comprehension", scope)
            for gen in node.generators:
                self._bind_target(gen.target, inner, Binding("iter", gen.iter, node))
            return inner
        self._statement_bindings(node, scope)
        return None

    def _children(
        self, node: ast.AST, scope: Scope, inner: Scope | None
    ) -> list[tuple[ast.AST, Scope]]:
        """Children with the scope each is evaluated in (defaults, decorators and bases outside;
        bodies inside)."""
        if inner is None:
            return [(child, scope) for child in ast.iter_child_nodes(node)]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            outside: list[ast.AST] = [
                *args.defaults,
                *(d for d in args.kw_defaults if d is not None),
            ]
            if not isinstance(node, ast.Lambda):
                outside += [
                    *node.decorator_list,
                    *([node.returns] if node.returns else []),
                    *(a.annotation for a in _all_args(args) if a.annotation is not None),
                ]
            body = node.body if isinstance(node.body, list) else [node.body]
            return [*((c, scope) for c in outside), *((c, inner) for c in body)]
        if isinstance(node, ast.ClassDef):
            outside = [*node.decorator_list, *node.bases, *node.keywords]
            return [*((c, scope) for c in outside), *((c, inner) for c in node.body)]
        assert isinstance(node, _COMPREHENSIONS)
        first, *rest = node.generators
        parts: list[ast.AST] = [
            first.target,
            *first.ifs,
            *(x for g in rest for x in (g.target, g.iter, *g.ifs)),
        ]
        parts += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        return [(first.iter, scope), *((p, inner) for p in parts)]

    def _bind_params(self, args: ast.arguments, scope: Scope) -> None:
        for arg in _all_args(args):
            scope.bind(arg.arg, Binding("param", arg, None))

    def _statement_bindings(self, node: ast.AST, scope: Scope) -> None:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self._bind_target(target, scope, Binding("expr", node.value, node), node.value)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            kind = (
                "expr" if isinstance(node, ast.AnnAssign) and node.value is not None else "unknown"
            )
            if isinstance(node, ast.AnnAssign) and node.value is None and scope.kind != "function":
                # `x: int` binds nothing at module or class level (in a function it makes x local)
                return
            self._target_scope(scope, node.target.id).bind(
                node.target.id, Binding(kind, node.value, node)
            )
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self._target_scope(scope, target.id).deleted.add(target.id)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self._bind_target(node.target, scope, Binding("iter", node.iter, node))
        elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            where = scope
            while where.kind == "comprehension" and where.parent is not None:
                where = where.parent
            self._target_scope(where, node.target.id).bind(
                node.target.id, Binding("expr", node.value, node)
            )
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self._bind_import(node, scope)
        elif isinstance(node, ast.Global):
            scope.declared_global.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            scope.declared_nonlocal.update(node.names)
        else:
            self._other_targets(node, scope)

    def _other_targets(self, node: ast.AST, scope: Scope) -> None:
        names: list[str] = []
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    self._bind_target(item.optional_vars, scope, Binding("unknown", None, node))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.append(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.append(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.append(node.rest)
        for name in names:
            self._target_scope(scope, name).bind(name, Binding("unknown", None, node))

    def _bind_target(
        self, target: ast.AST, scope: Scope, binding: Binding, value: ast.AST | None = None
    ) -> None:
        if isinstance(target, ast.Name):
            self._target_scope(scope, target.id).bind(target.id, binding)
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
            for i, elt in enumerate(target.elts):
                inner = elt.value if isinstance(elt, ast.Starred) else elt
                if (
                    values is not None
                    and len(values) == len(target.elts)
                    and not isinstance(elt, ast.Starred)
                ):
                    self._bind_target(
                        inner, scope, Binding("expr", values[i], binding.statement), values[i]
                    )
                else:
                    self._bind_target(inner, scope, Binding("unknown", None, binding.statement))

    def _bind_import(self, node: ast.Import | ast.ImportFrom, scope: Scope) -> None:
        for alias in node.names:
            if isinstance(node, ast.Import):
                head = alias.name.split(".")[0]
                path = alias.name if alias.asname else head
                self._target_scope(scope, alias.asname or head).bind(
                    alias.asname or head, Binding("import", self.local_path(path), node)
                )
                continue
            base = (
                self.local_path(node.module or "") if node.level == 0 else "@" + (node.module or "")
            )
            if alias.name == "*":
                scope.star_imports.append(base)
                continue
            path = f"{base}.{alias.name}" if base not in ("", "@") else f"@{alias.name}"
            self._target_scope(scope, alias.asname or alias.name).bind(
                alias.asname or alias.name, Binding("import", path, node)
            )

    def local_path(self, path: str) -> str:
        """A submission module imported by its plain name is the submission's (``@helper``), not a
        library."""
        return f"@{path}" if path.split(".")[0] in self.local_modules else path

    def _target_scope(self, scope: Scope, name: str) -> Scope:
        if name in scope.declared_global:
            return self.module
        if name in scope.declared_nonlocal:
            found = enclosing_functions(scope)
            return next(
                (s for s in found if name in s.bindings), found[0] if found else self.module
            )
        return scope

    # -- resolving
    # ----------------------------------------------------------------------------------


def _all_args(args: ast.arguments) -> list[ast.arg]:
    return [
        *args.posonlyargs,
        *args.args,
        *([args.vararg] if args.vararg else []),
        *args.kwonlyargs,
        *([args.kwarg] if args.kwarg else []),
    ]


def enclosing_functions(scope: Scope) -> list[Scope]:
    """Scopes a name read in ``scope`` falls back to, innermost first: functions and comprehensions,
    never classes (a method does not see its class body), never the module (the caller tries it
    last)."""
    out, outer = [], scope.parent
    while outer is not None and outer.kind != "module":
        if outer.kind != "class":
            out.append(outer)
        outer = outer.parent
    return out
