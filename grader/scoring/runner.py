"""Run test suites under pytest in this (trusted) process and return per-test results.

pytest is hardened: no plugin autoload, no cache, no conftest, our own empty ini, so nothing a
submission ships (``conftest.py``, ``pytest.ini``, ``pyproject.toml``) is ever read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, cast

import pytest

from grader.errors import GraderFault
from grader.scoring.collect import ResultCollector, TestResult
from grader.student.proxy import Backend
from grader.testing.plugin import backend_factory_key

SUITES_ROOT = Path(__file__).resolve().parents[2]
AUTOLOAD = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"


class _Inject:
    """Hands the sandbox backend factory to the plugin before the session starts."""

    def __init__(self, factory: Callable[[], Backend]) -> None:
        self.factory = factory

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[backend_factory_key] = self.factory


class _QuickReports:
    """Failure reports carry only the one-line message a scorecard keeps.

    pytest's own failure report re-parses the source of every traceback entry (torch's included):
    3-7 s for a submission whose 141 tests all fail, more than the rest of its grade.
    """

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport | None:
        excinfo = call.excinfo
        if excinfo is None or isinstance(excinfo.value, (pytest.skip.Exception, BaseExceptionGroup)):
            return None  # passes and skips: pytest's report is cheap and right
        return pytest.TestReport(item.nodeid, item.location, {k: 1 for k in item.keywords}, "failed",
                                 excinfo.exconly(tryshort=True), _phase(call.when), duration=call.duration,
                                 start=call.start, stop=call.stop, user_properties=item.user_properties)


def _phase(when: str) -> Literal["setup", "call", "teardown"]:
    """A test's phase: runtest_makereport is called for setup, call and teardown, never for collection."""
    return cast('Literal["setup", "call", "teardown"]', when)


def run_suites(files: Sequence[Path], *, student: Path | None = None, seed: int = 0,
               backend_factory: Callable[[], Backend] | None = None, select: str | None = None,
               quiet: bool = True, extra_args: Sequence[str] = (),
               manifest_path: Path | None = None) -> tuple[list[TestResult], int]:
    """Run ``files`` against one submission; return (results in collection order, pytest exit code).

    ``manifest_path`` is the assignments.json the suites read bans from, and beside which the
    ``reference`` fixture finds ``solutions/`` (default: this checkout's).
    """
    collector = ResultCollector()
    plugins: list[object] = [collector, _QuickReports()]
    if backend_factory is not None:
        plugins.append(_Inject(backend_factory))
    args = [*(str(f) for f in files), "-p", "grader.testing.plugin", "-p", "no:cacheprovider",
            # unraisableexception runs gc.collect() five times per session: 0.6 s of a 1 s grade with torch loaded
            "-p", "no:unraisableexception",
            "--noconftest", "-c", os.devnull, "--rootdir", str(SUITES_ROOT), "--import-mode=importlib",
            "--grading-seed", str(seed), "--strict-markers", "-W", "ignore::DeprecationWarning",
            "--manifest", str(manifest_path or SUITES_ROOT / "assignments.json"), *extra_args]
    if student is not None:
        args += ["--student", str(student)]
    if select:
        args += ["-k", select]
    if quiet:
        args += ["-p", "no:terminal"]
    before = os.environ.get(AUTOLOAD)
    os.environ[AUTOLOAD] = "1"  # no installed plugin (and nothing a student pip-installed) loads here
    try:
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


class SuiteError(GraderFault):
    """The trusted suites could not be collected: a grader fault, never a student's."""
