"""Runs the public tests inside an nbgrader notebook, against the names the notebook defines.

The setup cell does ``public_test = public_tests(globals(), "tests/public/test_<exercise>.py")``;
each test cell holds one public test function, unchanged, under ``@public_test``, which runs it at
once. The test's code runs with the test module's globals (its constants and helpers never
overwrite a notebook name). The ``student`` fixture is the usual
:class:`~grader.student.proxy.StudentProxy`, over a backend whose "modules" are the notebook's
globals; ``seed`` and ``gen`` are drawn as the pytest plugin draws them, so a notebook sees the same
inputs as ``grader check``. A failure raises ``AssertionError`` with the test's own message
(nbgrader gives a grade cell that errors zero points).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.inside.executor import Executor
from grader.inside.frames import safe_str
from grader.protocol.errors import StudentError, StudentNotFound, StudentNotImplemented
from grader.student.inprocess import InProcessBackend
from grader.student.proxy import StudentProxy

_LIBRARY = (
    str(Path(__file__).resolve().parents[1]),
    str(Path(torch.__file__).resolve().parents[1]),
    "<frozen",
)


class _Namespace:
    """A read-only module view of the notebook's globals (looked up at call time, after edits)."""

    def __init__(self, names: dict[str, Any]) -> None:
        self._names = names

    def __getattr__(self, name: str) -> Any:
        try:
            return self._names[name]
        except KeyError:
            raise AttributeError(name) from None


class NotebookExecutor(Executor):
    """An :class:`Executor` whose every module is the notebook namespace."""

    def __init__(self, names: dict[str, Any]) -> None:
        super().__init__(Path.cwd())
        self.names = names

    def _import(self, module: str) -> Any:
        return _Namespace(self.names)

    def _lookup(self, module: str, name: str) -> Any:
        if name not in self.names:
            raise StudentNotFound(
                f"`{name}` is not defined in this notebook: run the cell that defines it "
                "(check the spelling)"
            )
        return super()._lookup(module, name)

    def _translate(self, exc: BaseException, where: str) -> StudentError:
        frames = tuple(
            f"line {fs.lineno}, in {fs.name}: {(fs.line or '').strip()}"
            for fs in traceback.extract_tb(exc.__traceback__)
            if _is_notebook(fs.filename)
        )[-8:]
        if isinstance(exc, NotImplementedError) and frames:
            return StudentNotImplemented(
                f"{where} is not implemented yet", exc_type="NotImplementedError", frames=frames
            )
        return StudentError(f"{where}: {safe_str(exc)}", exc_type=type(exc).__name__, frames=frames)


def _is_notebook(filename: str) -> bool:
    return not filename.startswith(_LIBRARY) and "site-packages" not in filename


def NotebookBackend(names: dict[str, Any]) -> InProcessBackend:
    """The in-process backend over the names a notebook defines."""
    return InProcessBackend(executor=NotebookExecutor(names))


def seed_for(test_file: str, test_name: str, grading_seed: int = 0) -> int:
    """The plugin's per-test seed (``grader.testing.plugin.seed``) for ``test_file::test_name``."""
    name = f"{grading_seed}:{test_file}::{test_name}"
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")


def run(
    test: Callable[..., Any], names: dict[str, Any], *, test_file: str, grading_seed: int = 0
) -> None:
    """Run one public test against the notebook's ``names``; raise ``AssertionError`` when it
    fails."""
    __tracebackhide__ = True
    proxy = StudentProxy(NotebookBackend(names))
    seed = seed_for(test_file, test.__name__, grading_seed)
    torch.manual_seed(seed)
    fixtures = {"student": proxy, "seed": seed, "gen": torch.Generator().manual_seed(seed)}
    try:
        test(**{p: fixtures[p] for p in inspect.signature(test).parameters})
    except StudentError as exc:
        raise AssertionError(exc.feedback()) from None
    except pytest.fail.Exception as exc:
        raise AssertionError(exc.msg) from None
    finally:
        proxy.release_all()
    print(f"passed: {test.__name__}")


def load_tests(path: Path | str) -> types.ModuleType:
    """Import a public test file by path (its helpers and constants; nothing is run)."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"_public_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(
            f"public tests not found: {path} (open the notebook from its assignment folder)"
        )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def public_tests(names: dict[str, Any], path: Path | str) -> Callable[[Callable[..., Any]], None]:
    """The ``@public_test`` decorator of a notebook: run the decorated test against ``names`` at
    once."""
    module = load_tests(path)

    def public_test(test: Callable[..., Any]) -> None:
        __tracebackhide__ = True
        bound = types.FunctionType(
            test.__code__, vars(module), test.__name__, test.__defaults__, test.__closure__
        )
        run(bound, names, test_file=Path(path).name)

    return public_test
