"""A submission's code as the executor reaches it: its modules, and every run of its code.

Each module is imported once, into a package of its own over the submission folder (two submissions
in one process never share module objects); an import's failure is remembered, not retried. An
exercise graded *isolated* gets a second package in which the classes it builds on are the grader's
stand-ins (:mod:`grader.inside.standins`), so a bug in those exercises is not charged to it again.
Every run of student code happens under the bans of its scope (:mod:`grader.inside.bans`), and
whatever it raises becomes the :class:`~grader.protocol.errors.StudentError` the trusted side is
told about.

Kept apart from :mod:`grader.inside.executor` (the operations the proxy asks for, and the module
handles): :class:`~grader.inside.executor.Executor` is a :class:`StudentCode` that serves them.
"""

from __future__ import annotations

import importlib
import itertools
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from grader.inside import bans, standins
from grader.inside.frames import raised_in, safe_str, student_frames
from grader.protocol.errors import (
    StudentAPIError,
    StudentError,
    StudentNotFound,
    StudentNotImplemented,
)

_packages = itertools.count()


class Options(TypedDict, total=False):
    """What a :class:`StudentCode` (and so an executor) takes besides the submission's folder."""

    bans: dict[str, tuple[str, ...]] | None
    single_module: str | None


class StudentCode:
    """The modules of the submission in ``root``, imported on first use, and the guard every run
    goes through."""

    def __init__(
        self,
        root: Path | str,
        *,
        bans: dict[str, tuple[str, ...]] | None = None,
        single_module: str | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.bans = dict(bans or {})
        self.single_module = single_module
        self.package = f"_submission_{next(_packages)}"
        self._modules: dict[str, types.ModuleType | StudentError] = {}
        _install_package(self.package, self.root)

    def _lookup(self, module: str, name: str) -> Any:
        if name.startswith("_"):
            raise StudentAPIError(
                f"private name {name!r} cannot be reached through the student proxy"
            )
        mod = self._import(module)
        if not hasattr(mod, name):
            shown = standins.split_isolated(module)[0]
            raise StudentNotFound(
                f"`{name}` not found in {shown}.py: define it there (check the spelling)"
            )
        return getattr(mod, name)

    def _import(self, module: str) -> types.ModuleType:
        if module not in self._modules:
            try:
                self._modules[module] = self._load(module)
            except StudentError as exc:
                # import side effects happen once; the failure is remembered
                self._modules[module] = exc
        found = self._modules[module]
        if isinstance(found, StudentError):
            raise found
        return found

    def _load(self, module: str) -> types.ModuleType:
        module, isolated = standins.split_isolated(module)
        source = self.single_module or module
        if not module.isidentifier() or not (self.root / f"{source}.py").is_file():
            raise StudentNotFound(
                f"module {source}.py not found in the submission: create it (is it in the "
                "right folder?)"
            )
        package = self._isolated_package(module) if isolated else self.package
        scoped = tuple(
            n for scope, names in self.bans.items() if scope.startswith(f"{module}.") for n in names
        )
        loaded: types.ModuleType = self._guarded(
            module,
            lambda: importlib.import_module(f"{package}.{source}"),
            where=f"importing {source}.py",
            install=scoped,
        )
        if (
            isolated
        ):  # a module that defines the class itself (one-file submissions) gets the stand-in too
            for classes in standins.STAND_INS.get(module, {}).values():
                for name in classes.keys() & vars(loaded).keys():
                    setattr(loaded, name, classes[name])
        return loaded

    def _isolated_package(self, module: str) -> str:
        """A second package over the submission in which the classes ``module`` builds on are
        stand-ins, so a bug (even an import error) in those exercises is not charged again to this
        one."""
        package = f"{self.package}_{module}_isolated"
        if package not in sys.modules:
            _install_package(package, self.root)
            for sibling, classes in standins.STAND_INS.get(module, {}).items():
                vars(self._sibling(package, sibling)).update(classes)
        return package

    def _sibling(self, package: str, sibling: str) -> types.ModuleType:
        """The student's own ``sibling`` module in ``package`` (its other helpers stay importable),
        or an empty module when it cannot be imported (that failure is the sibling exercise's to
        charge)."""
        name = f"{package}.{sibling}"
        if self.single_module is None and (self.root / f"{sibling}.py").is_file():
            try:
                own: types.ModuleType = self._guarded(
                    sibling, lambda: importlib.import_module(name), where=f"importing {sibling}.py"
                )
                return own
            except StudentError:
                sys.modules.pop(name, None)
        sys.modules[name] = types.ModuleType(name, "the grader's stand-ins")
        return sys.modules[name]

    def _guarded(
        self,
        scope: str,
        fn: Callable[[], Any],
        where: str | None = None,
        install: tuple[str, ...] = (),
    ) -> Any:
        """Run student code with the bans of ``scope`` (``module`` or ``module.Name``) active."""
        scope = scope.replace(
            standins.ISOLATED_SUFFIX, ""
        )  # the same bans and names as the module itself
        module = scope.split(".")[0]
        names = (*self.bans.get(module, ()), *(self.bans.get(scope, ()) if scope != module else ()))
        where = where or scope
        try:
            with bans.banned(names, install=install):
                return fn()
        except (StudentError, StudentAPIError):
            raise
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: student code never ends the run
            raise self._translate(exc, where) from None

    def _translate(self, exc: BaseException, where: str) -> StudentError:
        frames = student_frames(exc, self.root)
        exc_type, message = type(exc).__name__, safe_str(exc)
        if isinstance(exc, NotImplementedError) and raised_in(exc, self.root):
            return StudentNotImplemented(
                f"{where} is not implemented yet ({message or 'stub'})",
                exc_type=exc_type,
                frames=frames,
            )
        if isinstance(exc, SyntaxError):
            message = f"{exc.msg} ({Path(exc.filename or '?').name}, line {exc.lineno})"
        return StudentError(f"{where}: {message}", exc_type=exc_type, frames=frames)


def _install_package(package: str, root: Path) -> None:
    # A synthetic package over the submission folder, so `from .causal_attention import ...` works
    # and two submissions in one process never share module objects.
    pkg = types.ModuleType(package)
    pkg.__path__ = [str(root)]
    pkg.__package__ = package
    sys.modules[package] = pkg
