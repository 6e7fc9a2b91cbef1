"""Backend that runs student code in this process: for students' own local runs (a debugger works).

Never used to grade officially: it gives student code the test process. The surface is the
sandboxed backend's, so the same tests run in both. Given ``time_limits`` (per exercise, from the
manifest), each call runs under a CPU-time alarm (``ITIMER_PROF``: a debugger waiting at its prompt
uses none), and an exercise stops at its first timeout, as in the sandbox: an infinite loop in a
student's CI run costs one limit, and every other exercise's feedback is kept. Advice, like
everything in the student's own process; the sandbox enforces it from outside.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from grader.inside.executor import Executor
from grader.protocol.errors import StudentTimeout
from grader.protocol.values import Args, Kwargs

T = TypeVar("T")
REPEAT_S = 0.5  # the alarm keeps firing: code that catches the first one is stopped by the next


class _Expired(BaseException):
    """Raised into student code by the alarm (a BaseException: ``except Exception`` does not swallow
    it)."""


class InProcessBackend:
    def __init__(
        self,
        root: Path | str | None = None,
        *,
        bans: dict[str, tuple[str, ...]] | None = None,
        single_module: str | None = None,
        executor: Executor | None = None,
        time_limits: dict[str, float] | None = None,
    ) -> None:
        """Serve the modules in ``root``, or any ready ``executor`` (e.g. a notebook's names)."""
        if executor is None:
            if root is None:
                raise TypeError("InProcessBackend needs a submission folder or an executor")
            executor = Executor(root, bans=bans, single_module=single_module)
        self.executor = executor
        self.time_limits, self.exercise, self.timed_out = time_limits, "", set[str]()

    def begin_test(self, nodeid: str, exercise: str | None, seed: int | None = None) -> None:
        """Which exercise the next calls belong to (its time limit); the seed is set here by the
        ``gen`` fixture."""
        self.exercise = exercise or ""

    def call(self, module: str, name: str, args: Args, kwargs: Kwargs) -> Any:
        return self._timed(f"{module}.{name}", self.executor.call, module, name, args, kwargs)

    def method(self, handle: int, method: str, args: Args, kwargs: Kwargs) -> Any:
        return self._timed(method, self.executor.method, handle, method, args, kwargs)

    def measure(
        self, module: str, name: str, args: Args, kwargs: Kwargs, grad_output: object = None
    ) -> tuple[Any, dict[str, float]]:
        return self._timed(
            f"{module}.{name}", self.executor.measure, module, name, args, kwargs, grad_output
        )

    def grads(
        self, module: str, name: str, args: Args, kwargs: Kwargs, grad_output: object
    ) -> tuple[Any, tuple[Any, ...]]:
        return self._timed(
            f"{module}.{name}", self.executor.grads, module, name, args, kwargs, grad_output
        )

    def meta(self, module: str, name: str, args: Args, kwargs: Kwargs) -> Any:
        return self._timed(f"{module}.{name}", self.executor.meta, module, name, args, kwargs)

    def _timed(self, where: str, run: Callable[..., T], *args: Any) -> T:
        limit = (self.time_limits or {}).get(self.exercise)
        if limit is None or threading.current_thread() is not threading.main_thread():
            return run(*args)
        if self.exercise in self.timed_out:
            raise StudentTimeout(f"{where}: not run (an earlier test of this exercise timed out)")
        fired: list[bool] = []

        def expire(signum: int, frame: FrameType | None) -> None:
            fired.append(True)
            raise _Expired

        previous = signal.signal(signal.SIGPROF, expire)
        signal.setitimer(signal.ITIMER_PROF, limit, REPEAT_S)
        try:
            return run(*args)
        except BaseException:
            if not fired:
                raise
            self.timed_out.add(self.exercise)
            raise StudentTimeout(
                f"{where} ran past its time limit ({limit:g} s of CPU time per test)"
            ) from None
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, previous)

    def release(self, handle: int) -> None:
        self.executor.release(handle)

    def close(self) -> None:
        self.executor.handles.clear()
