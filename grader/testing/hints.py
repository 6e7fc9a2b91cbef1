"""The hint a test gives, for the feedback of a student exception raised before any check could give it.

A test passes its hints to the checks (``expect_tensor(..., hint=...)``), which run after the student's call;
when that call raises, the student would see only their own exception. The test's hint is then taken from
an explicit ``@pytest.mark.hint("...")``, else from the first hint in the test's own source (``hint=``, or
``expect``/``fail``'s positional hint) whose value is a plain string (a literal, or a local or module-level
name bound to one).
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from collections.abc import Callable

import pytest


def hint_of(item: pytest.Item) -> str | None:
    """The hint to show with a student exception raised in ``item`` (None: the test gives none)."""
    marker = item.get_closest_marker("hint")
    if marker is not None and marker.args:
        return str(marker.args[0])
    function = getattr(item, "function", None)
    return _first_hint(function) if function is not None else None


@functools.lru_cache(maxsize=512)
def _first_hint(function: Callable[..., object]) -> str | None:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    body = tree.body[0] if tree.body else None
    if not isinstance(body, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    names = {k: v for k, v in getattr(function, "__globals__", {}).items() if isinstance(v, str)}
    names.update(_string_names(body))
    found = [(node.lineno, node.col_offset, text) for call in ast.walk(body) if isinstance(call, ast.Call)
             for node in _hint_nodes(call) if (text := _string(node, names))]
    return min(found)[2] if found else None  # the first in source order: the check nearest the first call


_POSITIONAL_HINT = {"expect": 2, "fail": 1}  # expect(condition, message, hint), fail(message, hint)


def _hint_nodes(call: ast.Call) -> list[ast.expr]:
    """The expressions a check call passes as its hint: ``hint=...``, or positionally to expect/fail."""
    nodes = [kw.value for kw in call.keywords if kw.arg == "hint"]
    position = _POSITIONAL_HINT.get(call.func.id) if isinstance(call.func, ast.Name) else None
    if position is not None and len(call.args) > position:
        nodes.append(call.args[position])
    return nodes


def _string_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    """Local names assigned a plain string (``hint = "..."``) in the test."""
    names: dict[str, str] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _string(node.value, {})
            if value:
                names[node.targets[0].id] = value
    return names


def _string(node: ast.expr, names: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    return None
