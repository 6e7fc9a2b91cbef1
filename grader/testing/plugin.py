"""pytest plugin for the public and hidden suites (load with ``-p grader.testing.plugin``).

- markers: ``exercise(id)``, ``points(n)``, ``cuda`` (skips without a CUDA device; a skip earns
  nothing);
- fixtures: ``student`` (the only door to student code), ``reference`` (the trusted solutions),
  ``seed`` and ``gen`` (inputs drawn from the runner's grading seed);
- reports: a student exception becomes its own short feedback, never a grader traceback, followed by
  the test's hint (``grader.testing.hints``) so the raw exception never hides what the test was
  checking.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
import torch

from grader.course import manifest
from grader.protocol.errors import StudentError
from grader.student.proxy import Backend, StudentProxy
from grader.testing.checks import caps_observed
from grader.testing.diagnosis import diagnosis_of
from grader.testing.hints import hint_of

backend_factory_key = pytest.StashKey[Callable[[], Backend]]()
assignment_key = pytest.StashKey[
    manifest.Assignment
]()  # the runner's loaded assignment: not read again


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("grader", "attention-grader exercise suites")
    group.addoption(
        "--student",
        default=None,
        metavar="PATH",
        help="folder with the exercise modules to test (default: ./exercises)",
    )
    group.addoption(
        "--grading-seed",
        type=int,
        default=0,
        metavar="N",
        help="seed from which every test draws its inputs (default 0)",
    )
    group.addoption(
        "--manifest", default=None, metavar="FILE", help="assignments.json to read banned APIs from"
    )
    group.addoption(
        "--assignment",
        default=None,
        help="assignment id in the manifest (default: its default one)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "exercise(id): the exercise (manifest id) a test grades")
    config.addinivalue_line("markers", "points(n): points the test is worth when it passes")
    config.addinivalue_line(
        "markers", "hint(text): the hint shown when the student's code raises in this test"
    )
    config.addinivalue_line(
        "markers", "severe(why): failing it caps the exercise at half its points (why: what breaks)"
    )
    config.addinivalue_line(
        "markers", "cuda: needs a CUDA device; skipped (and worth nothing) without one"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("cuda") and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device: not verified here, and a skipped test earns no points")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    excinfo = call.excinfo
    if excinfo is not None and isinstance(excinfo.value, StudentError):
        report.longrepr = excinfo.value.feedback() + _said_under(item, excinfo.value)
        report.user_properties.append(("student_kind", excinfo.value.kind))
    elif excinfo is not None and caps_observed(excinfo.value):
        report.user_properties.append(
            ("caps", caps_observed(excinfo.value))
        )  # a severe test's own class
    return report


def _said_under(item: pytest.Item, error: StudentError) -> str:
    """What follows a student exception: its diagnosis (a trusted variant raised the same, or the
    exception's own text shows the mistake), else a hint the test gives explicitly; never a guess at
    a mistake."""
    diagnosis = diagnosis_of(error)
    if diagnosis:
        return f"\n  {diagnosis}"
    if (
        error.kind != "exception"
        or error.exc_type in _SELF_EXPLAINED
        or error.message.startswith("importing ")
    ):
        # not implemented, missing, banned, timeouts, import errors: the message says what to do
        return ""
    hint = getattr(error, "hint", None) or hint_of(item)
    return f"\n  hint: {hint}" if hint else ""


_SELF_EXPLAINED = frozenset({"ValueRejected"})


def _student_root(config: pytest.Config) -> Path:
    option = config.getoption("student")
    return Path(option) if option else config.rootpath / "exercises"


def _assignment(config: pytest.Config) -> manifest.Assignment | None:
    loaded = config.stash.get(assignment_key, None)
    if loaded is not None:
        return loaded
    path = config.getoption("manifest")
    if path is None and (config.rootpath / "assignments.json").is_file():
        path = config.rootpath / "assignments.json"
    try:
        return manifest.load(Path(path) if path else None, config.getoption("assignment"))
    except manifest.ManifestError:
        # a student repo without a manifest simply has no bans or time limits checked locally
        return None


@pytest.fixture(scope="session")
def _student_backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    factory = request.config.stash.get(backend_factory_key, None)
    if factory is None:
        from grader.student.inprocess import InProcessBackend

        assignment = _assignment(request.config)
        backend: Backend = InProcessBackend(
            _student_root(request.config),
            bans=assignment.bans() if assignment else {},
            time_limits=assignment.time_limits() if assignment else None,
        )
    else:
        backend = factory()
    yield backend
    close = getattr(backend, "close", None)
    if close:
        close()


@pytest.fixture
def student(
    _student_backend: Backend, request: pytest.FixtureRequest, seed: int
) -> Iterator[StudentProxy]:
    """The submission under test: ``student.<module>.<name>(...)``; nothing else reaches it."""
    begin = getattr(_student_backend, "begin_test", None)
    if (
        begin is not None
    ):  # the sandbox applies the exercise's per-test time limit, and seeds its torch
        marker = request.node.get_closest_marker("exercise")
        begin(request.node.nodeid, marker.args[0] if marker else None, seed)
    proxy = StudentProxy(_student_backend)
    yield proxy
    proxy.release_all()


@pytest.fixture(scope="session")
def reference(pytestconfig: pytest.Config) -> _Reference:
    """The trusted reference solutions: ``reference.<module>.<name>``, from ``solutions/`` beside
    the manifest."""
    from grader.course import references

    path = pytestconfig.getoption("manifest")
    references.solutions_package((Path(path) if path else manifest.DEFAULT_MANIFEST).parent)
    return _Reference()


class _Reference(SimpleNamespace):
    def __getattr__(self, module: str) -> ModuleType:
        return importlib.import_module(f"solutions.{module}")


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """A per-test seed derived from ``--grading-seed``: fresh inputs for every grading run."""
    base = request.config.getoption("grading_seed")
    name = f"{base}:{Path(str(request.node.path)).name}::{request.node.name}"
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")


@pytest.fixture
def gen(seed: int) -> torch.Generator:
    """A CPU generator seeded from :func:`seed`; the global torch seed is set too."""
    # not torch.manual_seed: it queues lazy CUDA/XPU/MTIA seeding, capturing a stack trace each time
    # (3 ms a test, a third of the trusted side's time on a full grade)
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    return torch.Generator().manual_seed(seed)
