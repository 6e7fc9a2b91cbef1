"""Static integrity scan of a submission, on the trusted side, before any of it runs.

Bans and measurements inside the worker are advice: student code shares that process and can clear
a ban table, pull the real function out of a closure, call an unpatched alias (``torch._C._nn``,
``torch.ops.aten``) or switch off the dispatch mode that measures memory. None of that is needed to
solve an exercise, so the scan flags the constructs such tricks are made of (grader internals, the
module registry, frame/closure introspection, private torch entry points, native code, threads,
and the dynamic code or attribute access that could hide the rest). The rules are data (the
tables below); :mod:`grader.scoring.withhold` turns findings into withheld points.

It reads files with ``ast`` only (never imports or runs them) and walks trees iteratively, so a
hostile file cannot exhaust the recursion limit of the trusted process.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from grader import safetext

REASONS = {
    "grader-internals": "reaches into the grader's own code, which student code has no use for",
    "module-registry": "sys.modules and import hooks can swap or patch any loaded module, the grader's too",
    "introspection": "frame, closure and object introspection can pull originals out of the grader's bans",
    "private-torch": "private torch entry points (torch._C, torch.ops/aten, dispatch internals) bypass the "
                     "bans and the memory measurement",
    "dynamic-code": "dynamic code or dynamic attribute access can hide any other construct from this scan",
    "native-code": "native code can change anything in the process",
    "concurrency": "threads and processes run code outside the measured call and the bans",
    "files": "opening files (such as /proc/self/mem) can patch the running process",
    "unscannable": "the file could not be checked",
}
# module (or package) whose import is flagged, whatever is taken from it
MODULES = {
    "grader": "grader-internals", "gc": "introspection", "inspect": "introspection", "traceback": "introspection",
    "importlib": "dynamic-code", "builtins": "dynamic-code", "runpy": "dynamic-code", "code": "dynamic-code",
    "codeop": "dynamic-code", "marshal": "dynamic-code", "pickle": "dynamic-code", "copyreg": "dynamic-code",
    "shelve": "dynamic-code", "dill": "dynamic-code", "cloudpickle": "dynamic-code", "ctypes": "native-code",
    "_ctypes": "native-code", "cffi": "native-code", "mmap": "native-code", "threading": "concurrency",
    "_thread": "concurrency", "multiprocessing": "concurrency", "concurrent": "concurrency",
    "subprocess": "concurrency", "asyncio": "concurrency", "io": "files", "pathlib": "files",
}
# fully qualified names (and everything below them), resolved through import aliases and assignments
QUALIFIED = {
    "sys.modules": "module-registry", "sys.meta_path": "module-registry", "sys.path_hooks": "module-registry",
    "sys.path_importer_cache": "module-registry", "sys._getframe": "introspection",
    "sys.settrace": "introspection", "sys.setprofile": "introspection", "sys.exc_info": "introspection",
    "sys.exception": "introspection", "sys.last_traceback": "introspection", "sys.addaudithook": "introspection",
    "operator.attrgetter": "dynamic-code", "operator.methodcaller": "dynamic-code",
    "types.FunctionType": "dynamic-code", "types.CodeType": "dynamic-code", "types.CellType": "introspection",
    "types.FrameType": "introspection", "types.ModuleType": "module-registry",
    "os.fork": "concurrency", "os.forkpty": "concurrency", "os.system": "concurrency", "os.popen": "concurrency",
    "os.posix_spawn": "concurrency", "os.posix_spawnp": "concurrency", "os.kill": "concurrency",
    "os.open": "files", "os.fdopen": "files", "os.write": "files",
    "torch.ops": "private-torch", "torch.library": "private-torch", "torch.classes": "private-torch",
    "torch.utils.cpp_extension": "native-code", "torch.load": "dynamic-code", "torch.hub": "dynamic-code",
    "torch.from_file": "files", "torch.jit.fork": "concurrency",
}
QUALIFIED_PREFIXES = ("os.exec", "os.spawn")
# attribute names flagged on any object (and as string constants: getattr(f, "__closure__"))
ATTRIBUTES = {
    **dict.fromkeys(("__closure__", "__globals__", "__code__", "__defaults__", "__kwdefaults__", "__wrapped__",
                     "cell_contents", "tb_frame", "tb_next", "f_back", "f_globals", "f_locals", "f_builtins",
                     "f_code", "gi_frame", "gi_code", "cr_frame", "ag_frame", "__dict__", "__subclasses__",
                     "__bases__", "__base__", "__mro__", "mro", "__builtins__", "__getattribute__", "__reduce__",
                     "__reduce_ex__", "__loader__", "__spec__"), "introspection"),
    **dict.fromkeys(("_C", "aten", "_ops", "_disable_current_modes", "_python_dispatch", "TorchDispatchMode"),
                    "private-torch"),
    "__import__": "dynamic-code",
}
# builtins flagged wherever the name is read
BUILTINS = {
    **dict.fromkeys(("exec", "eval", "compile", "__import__", "globals", "locals", "vars", "breakpoint"),
                    "dynamic-code"),
    "__builtins__": "introspection", "open": "files",
}
DYNAMIC_ATTR = frozenset({"getattr", "setattr", "delattr"})
GRADER_TEXT = re.compile(r"^\s*grader\s*$|\bgrader\s*\.\s*[A-Za-z_]")
PRIVATE_TEXT = re.compile(r"\baten\b|_disable_current_modes|\btorch\s*\.\s*(_C|ops)\b")
PUBLIC_DUNDERS = frozenset({"__version__", "__name__"})
MAX_NODES = 200_000  # an honest exercise module has a few thousand


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    construct: str
    rule: str

    @property
    def reason(self) -> str:
        return REASONS[self.rule]

    def to_dict(self) -> dict[str, object]:
        return {"file": safetext.name(self.file), "line": self.line, "construct": safetext.name(self.construct, 120),
                "rule": self.rule, "reason": self.reason}


def scan_box(box: Path) -> list[Finding]:
    """Findings for every ``.py`` file of a staged submission, sorted by file and line."""
    found: list[Finding] = []
    for path in sorted(p for p in box.iterdir() if p.is_file()):
        found += scan_source(path.read_bytes(), path.name)
    return found


def scan_source(source: bytes | str, filename: str) -> list[Finding]:
    try:
        tree = ast.parse(source, filename)
    except SyntaxError:
        return []  # the worker cannot import it either: its tests fail on the syntax error
    except (ValueError, RecursionError, MemoryError) as exc:
        return [Finding(filename, 0, type(exc).__name__, "unscannable")]
    nodes = list(ast.walk(tree))  # iterative and outermost first: a deep file cannot overflow the stack here
    if len(nodes) > MAX_NODES:
        return [Finding(filename, 0, f"{len(nodes)} syntax nodes", "unscannable")]
    aliases = _aliases(nodes)
    inert = {id(n.value) for n in nodes if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    found: dict[tuple[int, str], Finding] = {}
    for node in (n for n in nodes if id(n) not in inert):  # a docstring may talk about anything
        for rule, construct in _check(node, aliases):
            line = getattr(node, "lineno", 0)  # one finding per line and rule: the outermost expression
            found.setdefault((line, rule), Finding(filename, line, construct, rule))
    return sorted(found.values(), key=lambda f: (f.line, f.rule))


# -- names --------------------------------------------------------------------------------------
def _aliases(nodes: list[ast.AST]) -> dict[str, str]:
    """Local name -> dotted path it stands for (imports, and ``x = torch._C`` style assignments)."""
    aliases: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    assigns = [n for n in nodes if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and n.value is not None]
    for _ in range(4):  # x = torch; y = x._C: a few rounds reach the fixpoint of ordinary code
        for node in assigns:
            path = _dotted(node.value, aliases) if node.value is not None else None  # filtered above; for the checker
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if path and isinstance(target, ast.Name):
                    aliases.setdefault(target.id, path)
    return aliases


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """The dotted path an expression names (``F.softmax`` -> ``torch.nn.functional.softmax``), if known."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, aliases) if _depth(node) < 64 else None
        return f"{base}.{node.attr}" if base else None
    literal = _literal_getattr(node)
    if literal is not None:
        base = _dotted(literal[0], aliases)
        return f"{base}.{literal[1]}" if base else None
    return None


def _depth(node: ast.AST, cap: int = 64) -> int:
    depth = 0
    while isinstance(node, ast.Attribute) and depth <= cap:
        node, depth = node.value, depth + 1
    return depth


def _literal_getattr(node: ast.AST) -> tuple[ast.AST, str] | None:
    """``getattr(obj, "name")`` with a literal name: (obj, name)."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
        return node.args[0], node.args[1].value
    return None


# -- rules --------------------------------------------------------------------------------------
def _check(node: ast.AST, aliases: dict[str, str]) -> list[tuple[str, str]]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [hit for path in _imported(node) for hit in _path_rules(path)]
    if isinstance(node, ast.Attribute):
        return _attribute_rules(node.attr, _show(node)) + _path_rules(_dotted(node, aliases) or "", _show(node))
    if isinstance(node, ast.Name):
        return [(BUILTINS[node.id], node.id)] if node.id in BUILTINS else []
    if isinstance(node, ast.Call):
        return _call_rules(node, aliases)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _text_rules(node.value)
    return []


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level or not node.module:
        return []  # a relative import: the submission's own modules, scanned themselves
    return [node.module, *(f"{node.module}.{a.name}" for a in node.names)]


def _path_rules(path: str, shown: str | None = None) -> list[tuple[str, str]]:
    if not path:
        return []
    parts, shown = path.split("."), shown or path
    if parts[0] in MODULES:
        return [(MODULES[parts[0]], shown)]
    for name, rule in QUALIFIED.items():
        if path == name or path.startswith(name + "."):
            return [(rule, shown)]
    if path.startswith(QUALIFIED_PREFIXES):
        return [("concurrency", shown)]
    if parts[0] == "torch" and any(_private(p) for p in parts[1:]):
        return [("private-torch", shown)]
    return []


def _private(part: str) -> bool:
    return part.startswith("_") and part not in PUBLIC_DUNDERS


def _attribute_rules(attr: str, shown: str) -> list[tuple[str, str]]:
    return [(ATTRIBUTES[attr], shown)] if attr in ATTRIBUTES else []


def _call_rules(node: ast.Call, aliases: dict[str, str]) -> list[tuple[str, str]]:
    if not (isinstance(node.func, ast.Name) and node.func.id in DYNAMIC_ATTR) or len(node.args) < 2:
        return []
    name, target = node.args[1], node.args[0]
    if isinstance(name, ast.Constant) and isinstance(name.value, str):
        path = _dotted(target, aliases)
        return _attribute_rules(name.value, _show(node)) + _path_rules(f"{path}.{name.value}" if path else "",
                                                                       _show(node))
    if isinstance(target, ast.Name) and target.id == "self":
        return []  # setattr(self, name, value): the student's own object
    return [("dynamic-code", _show(node))]


def _text_rules(value: str) -> list[tuple[str, str]]:
    shown = repr(value[:60])
    if GRADER_TEXT.search(value):
        return [("grader-internals", shown)]
    if value in ATTRIBUTES:
        return [(ATTRIBUTES[value], shown)]
    if PRIVATE_TEXT.search(value):
        return [("private-torch", shown)]
    return []


def _show(node: ast.AST) -> str:
    """The construct as written, short: a long or multi-line one is not unparsed whole (that is quadratic)."""
    one_line = getattr(node, "lineno", 0) == getattr(node, "end_lineno", -1)
    if not one_line or (node.end_col_offset or 0) - node.col_offset > 100:  # type: ignore[attr-defined]
        tail = node.attr if isinstance(node, ast.Attribute) else type(node).__name__
        return f"... .{tail}" if isinstance(node, ast.Attribute) else f"<long {tail} expression>"
    try:
        return ast.unparse(node)
    except (RecursionError, ValueError):
        return type(node).__name__
