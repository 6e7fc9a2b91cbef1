"""A reporter plugin (after ``_pytest/junitxml.py``): one :class:`TestResult` per collected test.

Only ``passed`` earns points; xfail, xpass and skips never do. Messages are the student-facing
feedback (``pytest.fail`` text or the student's own exception), never a trusted traceback.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import pytest

MAX_MESSAGE = 2000


@dataclass(slots=True)
class TestResult:
    __test__ = False  # not a test class, whatever pytest thinks of the name

    id: str
    name: str
    exercise: str | None
    max_points: float
    outcome: str = "error"
    message: str = ""
    duration: float = 0.0
    cuda: bool = False
    # what a failure breaks, for a test that caps its exercise when it fails
    severe: str | None = None
    # a failure of the class its severe marker names: what was observed (checks.fail)
    caps: str | None = None
    # digest of the values it failed on (grader.scoring.answers), trusted side
    wrong_answer: str | None = None

    @property
    def points(self) -> float:
        return self.max_points if self.outcome == "passed" else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "points": self.points}


@dataclass(eq=False)  # plugins must be hashable
class ResultCollector:
    """Register with ``pytest.main(..., plugins=[collector])``; read :attr:`results` afterwards."""

    results: dict[str, TestResult] = field(default_factory=dict)
    collection_errors: list[str] = field(default_factory=list)

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            ex, pts = item.get_closest_marker("exercise"), item.get_closest_marker("points")
            self.results[item.nodeid] = TestResult(
                id=item.nodeid,
                name=item.name,
                exercise=ex.args[0] if ex else None,
                max_points=float(pts.args[0]) if pts else 0.0,
                outcome="error",
                message="not run",
                cuda=item.get_closest_marker("cuda") is not None,
                severe=_severe(item),
            )

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collection_errors.append(f"{report.nodeid}: {_short(report)}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        result = self.results.get(report.nodeid)
        if result is None:
            return
        result.duration += report.duration
        outcome = _outcome(report)
        if (
            report.when == "call"
            or (report.when == "setup" and outcome != "passed")
            or (report.when == "teardown" and outcome != "passed" and result.outcome == "passed")
        ):
            result.outcome, result.message = outcome, _message(report, outcome)
            result.caps = next((str(v) for k, v in report.user_properties if k == "caps"), None)
            result.wrong_answer = next(
                (str(v) for k, v in report.user_properties if k == "wrong_answer"), None
            )


def _outcome(report: pytest.TestReport) -> str:
    if hasattr(report, "wasxfail") or report.skipped:
        return "skipped"
    if report.passed:
        return "passed"
    kind = dict(report.user_properties).get("student_kind")
    if kind == "timeout":
        return "timeout"
    if kind == "crash" or report.when != "call":
        return "error"
    return "failed"


def _message(report: pytest.TestReport, outcome: str) -> str:
    if outcome == "passed":
        return ""
    if outcome == "skipped":
        longrepr = report.longrepr
        reason = (
            longrepr[2] if isinstance(longrepr, tuple) else str(getattr(report, "wasxfail", ""))
        )
        return reason.removeprefix("Skipped: ")[:MAX_MESSAGE]
    return _short(report)


def _severe(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("severe")
    return str(marker.args[0]) if marker and marker.args else None


def _short(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, str):
        text = longrepr
    else:
        crash = getattr(longrepr, "reprcrash", None)
        text = crash.message if crash is not None else str(longrepr)
    return text.removeprefix("Failed: ")[:MAX_MESSAGE]
