"""Static integrity scan of a submission, on the trusted side, before any of it runs.

Bans and measurements inside the worker are advice: student code shares that process. So the scan
reads every file (``ast`` only: nothing is imported or run) and reports two kinds of finding, each
with its file and line:

- ``withhold``: proof. The construct reaches what no exercise needs and what tampering is made of:
  the grader's own modules, the module registry, the callers' frames or the whole object graph, a
  function's closure or globals (where a ban stub's original would be), torch's mode stacks (where
  the bans and the memory measurement run); or (:mod:`grader.scoring.banned`) the exercise's own
  code names, by binding, an API banned there. An exercise whose code has one is withheld
  (:mod:`grader.scoring.withhold`).
- ``review``: reach that is not proof, shown to the instructor as "needs review" and never costing a
  point: any attribute or namespace access whose name is not known before run time, a dynamic
  builtin taken as a value, code made at run time, a private torch entry point, a library patched,
  and any import outside the allow-list below.

Names are resolved by binding (:mod:`grader.scoring.bindings`): a parameter named ``eval`` is not
the builtin, ``g = getattr`` makes ``g(torch, name)`` a dynamic access. Strings and comments are not
code; a string is read only where it becomes a name (``getattr(torch, NAME)`` with ``NAME = "_C"``
is ``torch._C``). Imports are an allow-list (the scan is complete by construction: a module nobody
listed is a finding, not a miss); within allowed modules, the few entry points that reach further
(``sys.modules``, ``operator.attrgetter``, ``typing.get_type_hints``) are findings too. The rules
are data: :mod:`grader.scoring.integrity_rules`, applied to each node by
:mod:`grader.scoring.integrity_match`.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field, replace
from pathlib import Path

from grader import safetext
from grader.scoring import integrity_match, parse_probe
from grader.scoring.bindings import Scopes
from grader.scoring.integrity_rules import REVIEW as REVIEW  # re-exported: the scan's API
from grader.scoring.integrity_rules import RULES as RULES
from grader.scoring.integrity_rules import WITHHOLD as WITHHOLD

MAX_NODES = 200_000  # an honest exercise module has a few thousand
# files up to this size are parsed once per process (see parse): a few MB at most
CACHED_BYTES = 16 << 10


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
    """One file read for the scan: its tree and its scopes (or the finding that it could not be
    read)."""

    name: str
    tree: ast.Module | None
    scopes: Scopes | None
    nodes: list[ast.AST]
    problem: Finding | None = None


def parse(
    source: bytes | str, filename: str, local_modules: frozenset[str] = frozenset()
) -> Parsed:
    """The file read for the scan; a small file seen before (the same bytes, name and neighbours) is
    not read again (a class of submissions shares most of its helpers and untouched modules)."""
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
        for rule, construct in integrity_match.check(node, parsed.scopes, calls):
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
