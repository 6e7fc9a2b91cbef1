"""Run test suites under pytest in this (trusted) process and return per-test results.

pytest is hardened: no plugin autoload, no cache, no conftest, our own empty ini, so nothing a
submission ships (``conftest.py``, ``pytest.ini``, ``pyproject.toml``) is ever read.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

import pytest

from grader.course import manifest
from grader.errors import GraderFault
from grader.scoring.collect import ResultCollector, TestResult
from grader.student.proxy import Backend
from grader.testing.plugin import assignment_key, backend_factory_key

if TYPE_CHECKING:
    from grader.scoring.answers import Recorder

SUITES_ROOT = manifest.REPO_ROOT
AUTOLOAD = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"


class _Inject:
    """Hands the backend factory and the loaded assignment to the plugin before the session
    starts."""

    def __init__(
        self, factory: Callable[[], Backend] | None, assignment: manifest.Assignment | None
    ) -> None:
        self.factory, self.assignment = factory, assignment

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        if self.factory is not None:
            config.stash[backend_factory_key] = self.factory
        if self.assignment is not None:
            config.stash[assignment_key] = self.assignment


class _QuickReports:
    """Failure reports carry only the one-line message a scorecard keeps.

    pytest's own failure report re-parses the source of every traceback entry (torch's included):
    3-7 s for a submission whose 141 tests all fail, more than the rest of its grade.
    """

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> pytest.TestReport | None:
        excinfo = call.excinfo
        if excinfo is None or isinstance(
            excinfo.value, (pytest.skip.Exception, BaseExceptionGroup)
        ):
            return None  # passes and skips: pytest's report is cheap and right
        return pytest.TestReport(
            item.nodeid,
            item.location,
            {k: 1 for k in item.keywords},
            "failed",
            excinfo.exconly(tryshort=True),
            _phase(call.when),
            duration=call.duration,
            start=call.start,
            stop=call.stop,
            user_properties=item.user_properties,
        )


def _phase(when: str) -> Literal["setup", "call", "teardown"]:
    """A test's phase: runtest_makereport is called for setup, call and teardown, never for
    collection."""
    return cast('Literal["setup", "call", "teardown"]', when)


# The trusted side's torch threads while a sandboxed grade's suites run (None: left as they are).
# It computes only oracles on small tensors while the worker computes the student's: with one OpenMP
# thread a core, its idle threads spin for CPU the worker needs (benchmarks/trusted_threads.py).
SANDBOXED_TRUSTED_THREADS: int | None = 1


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """``threads`` torch threads in this process meanwhile, then as many as before (None: as is)."""
    if threads is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_suites(
    files: Sequence[Path],
    *,
    student: Path | None = None,
    seed: int = 0,
    backend_factory: Callable[[], Backend] | None = None,
    select: str | None = None,
    quiet: bool = True,
    extra_args: Sequence[str] = (),
    assignment: manifest.Assignment | None = None,
    trusted_threads: int | None = None,
) -> tuple[list[TestResult], int]:
    """Run ``files`` against one submission; return (results in collection order, pytest exit code).

    ``assignment`` is the loaded assignment the suites read bans from, and beside whose manifest the
    ``reference`` fixture finds ``solutions/`` (default: this checkout's); ``trusted_threads``: this
    process's torch threads while they run (:func:`torch_threads`).
    """
    collector = ResultCollector()
    plugins: list[object] = [collector, _QuickReports()]
    if (
        backend_factory is not None
    ):  # a grade: each failed test's wrong answer, observed here (grader.scoring.answers)
        from grader.scoring.answers import (
            Answers,
            Recorder,
        )  # a grade only: `grader check` never ships it

        recorder = Recorder()
        plugins.append(Answers(recorder))
        backend_factory = _observed(backend_factory, recorder)
    if backend_factory is not None or assignment is not None:
        plugins.append(_Inject(backend_factory, assignment))
    # test ids are relative to it: tests/hidden/...
    root = assignment.root if assignment else SUITES_ROOT
    args = [
        *(str(f) for f in files),
        "-p",
        "grader.testing.plugin",
        "-p",
        "no:cacheprovider",
        # unraisableexception runs gc.collect() five times per session: 0.6 s of a 1 s grade with
        # torch loaded
        "-p",
        "no:unraisableexception",
        # the logging plugin adds and removes its handlers around every phase of every test: 0.4 ms
        # a test
        "-p",
        "no:logging",
        "--noconftest",
        "-c",
        os.devnull,
        "--rootdir",
        str(root),
        "--import-mode=importlib",
        "--grading-seed",
        str(seed),
        "--strict-markers",
        "-W",
        "ignore::DeprecationWarning",
        "--manifest",
        str(assignment.manifest if assignment else manifest.DEFAULT_MANIFEST),
        *extra_args,
    ]
    if student is not None:
        args += ["--student", str(student)]
    if select:
        args += ["-k", select]
    if quiet:
        args += ["-p", "no:terminal"]
    _forget_other_copies(files, root)
    before = os.environ.get(AUTOLOAD)
    # no installed plugin (and nothing a student pip-installed) loads here
    os.environ[AUTOLOAD] = "1"
    try:
        with torch_threads(trusted_threads):
            code = pytest.main(args, plugins=plugins)
    finally:  # the caller's environment as it was (a `grader check` user may rely on their plugins)
        if before is None:
            os.environ.pop(AUTOLOAD, None)
        else:
            os.environ[AUTOLOAD] = before
    if code in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR):
        raise SuiteError(f"pytest could not run the suites (exit {int(code)}): {' '.join(args)}")
    if collector.collection_errors:
        raise SuiteError("test collection failed: " + "; ".join(collector.collection_errors))
    return list(collector.results.values()), int(code)


def _observed(factory: Callable[[], Backend], recorder: Recorder) -> Callable[[], Backend]:
    from grader.scoring.answers import Observing

    def make() -> Backend:
        return Observing(factory(), recorder)

    return make


def _forget_other_copies(files: Sequence[Path], root: Path) -> None:
    """Drop suite modules imported from another course folder: pytest's importlib mode reuses
    ``sys.modules[name]`` whatever file it came from, so a second course's
    ``tests/hidden/test_x.py`` (same name, relative to its own root) would silently run the first
    course's tests instead."""
    wanted = {Path(f).resolve() for f in files}
    tails = tuple(
        p.relative_to(root.resolve()).as_posix() for p in wanted if p.is_relative_to(root.resolve())
    )
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path.endswith(tails) and Path(path).resolve() not in wanted:
            del sys.modules[name]


class SuiteError(GraderFault):
    """The trusted suites could not be collected: a grader fault, never a student's."""
