"""The public API: ``grader`` declares ``__all__`` and the library functions it lists exist where it says.

``grader/__init__.py`` is imported inside the sandbox as well (``process``/``none`` backends), so the
package itself must stay free of the trusted side: the library functions are listed by module
(``grader.LIBRARY``) rather than re-exported, and ``import grader`` loads no other grader module.
Every module that declares ``__all__`` must define each name in it (a stale entry breaks ``import *``
and mypy's explicit re-exports alike).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys

import pytest

import grader
from tests.project.support.common import ROOT

GRADER = ROOT / "grader"


def _declares_all(path) -> bool:
    tree = ast.parse(path.read_text("utf-8"))
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        for node in tree.body
    )


def _module_name(path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES_WITH_ALL = sorted(
    _module_name(p) for p in GRADER.rglob("*.py") if "templates" not in p.parts and _declares_all(p)
)


def test_the_package_declares_all_and_every_name_in_it_exists():
    assert isinstance(grader.__all__, list) and grader.__all__
    assert sorted(grader.__all__) == sorted(set(grader.__all__)), "a name listed twice"
    missing = [name for name in grader.__all__ if not hasattr(grader, name)]
    assert missing == []
    assert grader.__version__ and "LIBRARY" in grader.__all__


@pytest.mark.parametrize("module", sorted(grader.LIBRARY))
def test_every_library_name_exists_in_its_module(module):
    mod = importlib.import_module(module)
    for name in grader.LIBRARY[module]:
        assert hasattr(mod, name), f"{module} has no {name}"


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("grader.grade", "grade"),
        ("grader.batch.job", "batch"),
        ("grader.check.local", "check"),
        ("grader.canary", "prove"),
    ],
)
def test_library_functions_take_their_options_by_keyword(module, name):
    assert name in grader.LIBRARY[module]
    fn = getattr(importlib.import_module(module), name)
    params = list(inspect.signature(fn).parameters.values())
    positional = [
        p
        for p in params
        if p.kind not in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD)
    ]
    assert len(positional) <= 1, (
        f"{module}.{name}: options must be keyword-only, got {[p.name for p in positional]}"
    )
    assert len(params) > len(positional), f"{module}.{name} takes no options"


def test_the_library_names_the_one_error_tree():
    from grader import errors

    for name in grader.LIBRARY["grader.errors"]:
        cls = getattr(errors, name)
        assert cls is errors.ExitCode or issubclass(cls, errors.GraderError), name


def test_importing_the_package_loads_nothing_else_of_the_grader():
    code = (
        "import sys, grader; print(sorted(m for m in sys.modules if m.split('.')[0] == 'grader'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert out.strip() == "['grader']"


def test_modules_with_all_are_found():
    assert {"grader", "grader.student", "grader.batch.engine", "grader.sandbox.remote"} <= set(
        MODULES_WITH_ALL
    )


@pytest.mark.parametrize("module", MODULES_WITH_ALL)
def test_every_name_in_a_modules_all_exists(module):
    mod = importlib.import_module(module)
    names = mod.__all__
    assert len(names) == len(set(names)), f"{module}: a name listed twice in __all__"
    assert [n for n in names if not hasattr(mod, n)] == []
