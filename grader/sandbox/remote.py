"""The ``student`` backend for official grading: every call runs in a sandboxed worker.

Same surface as the in-process backend. Outcomes come from what this side observes (:mod:`replies`):

- a per-test limit (the canary's, from the reference's time: :mod:`grader.proofs`; else the
  exercise's) counts the sandbox's CPU seconds (:mod:`cputime`); wall-clock backstops:
  ``WALL_FACTOR`` × the limit + ``WALL_SLACK_S`` using no CPU (asleep), ``HARD_FACTOR`` × in all;
  only those are retried, once (the test's requests replayed, :mod:`history`); after a counted
  timeout an exercise's remaining tests fail without running, and the submission's later tests get
  the canary's tight limits (one infinite loop pays a full limit, the next ones a fraction);
- a crash or output flood fails the call as the student's; the next call starts a fresh worker;
- a protocol violation (a malformed, unasked-for or misshapen reply) fails the rest of its exercise;
- a worker that cannot start is never the student's fault (no student code runs before its "loaded"
  frame): it is retried once the previous sandbox's processes are gone, then :class:`SandboxFault`,
  kept in ``grader_fault`` so that ``grade()`` makes an error card; so is, at once, a sandbox that
  /proc shows is not what its launch promised (:mod:`grader.sandbox.attest`, read before the
  submission is sent to it).

Every incident is recorded for the scorecard, the first worker's attested isolation, and each test's
CPU time. Starting, exchanging, retrying and recording are the worker session's
(:mod:`grader.sandbox.session`); this module is the backend's surface on top of it.
"""

from __future__ import annotations

import time
from typing import Any

from grader.protocol import errors
from grader.protocol.values import Args, Kwargs
from grader.sandbox import memwatch
from grader.sandbox.history import NO_HANDLE
from grader.sandbox.record import SandboxRecord
from grader.sandbox.session import WorkerSession
from grader.sandbox.warm import WarmChannel

__all__ = ["SandboxBackend", "SandboxRecord", "WarmChannel"]
# memory an exercise may leave behind before the next one gets a fresh worker
FRESH_AFTER_BYTES = 256 << 20


class SandboxBackend(WorkerSession):
    """The ``student`` backend over a :class:`WorkerSession`: the operations, handle releases and
    the record."""

    def record(self) -> SandboxRecord:
        """This backend's own account of the submission's sandbox, for the scorecard."""
        self._note_cpu()
        return SandboxRecord(
            list(self.incidents),
            self.output["stdout"],
            self.output["stderr"],
            self.starts,
            self.forked,
            self.observed,
            dict(self.test_cpu),
        )

    # -- the plugin tells us which test runs, so its exercise's time limit applies -------------
    def begin_test(self, nodeid: str, exercise: str | None, seed: int | None = None) -> None:
        if (exercise or "") != self.current_exercise:
            # charged to the exercise that made them, before its memory is judged
            self._flush_releases()
            if self._left_memory():
                # what one exercise's module hoarded must not starve the next one: a fresh worker
                self.close()
        self._note_cpu()
        self.current_test, self.current_exercise = nodeid, exercise or ""
        # sent with the test's first request (and replayed with it after a restart)
        self.pending_seed = seed
        self.test_limit = self.test_limits.get(nodeid) or self.time_limits.get(exercise or "", 30.0)
        self._tighten(nodeid)
        self.retried = False
        self.history.reset()
        self._new_attempt()

    def _tighten(self, nodeid: str) -> None:
        """A submission that has timed out once (an infinite loop, most likely in every exercise)
        pays one full limit: its later tests get the reference-sized limits with a lower floor
        (:data:`grader.proofs.TIGHT_FLOOR_S`), which the references pass with a margin of 25x."""
        tight = self.tight_limits.get(nodeid, self.test_limit)
        full, self.reduced_from = self.test_limit, 0.0
        if any(self.timeouts.values()) and tight < full:
            self.test_limit, self.reduced_from = tight, full

    def _note_cpu(self) -> None:
        if self.current_test:  # the test that ran last
            self.test_cpu[self.current_test] = round(self.cpu_used, 4)

    # -- Backend protocol ---------------------------------------------------------------------
    def call(self, module: str, name: str, args: Args, kwargs: Kwargs) -> Any:
        return self._about("call", module, name, args, kwargs)

    def method(self, handle: int, method: str, args: Args, kwargs: Kwargs) -> Any:
        return self._request(
            {"op": "method", "handle": handle, "method": method, "args": args, "kwargs": kwargs},
            method,
        )

    def grads(
        self, module: str, name: str, args: Args, kwargs: Kwargs, grad_output: object
    ) -> tuple[Any, tuple[Any, ...]]:
        result: tuple[Any, tuple[Any, ...]] = self._about(
            "grads", module, name, args, kwargs, grad_output=grad_output
        )
        return result

    def meta(self, module: str, name: str, args: Args, kwargs: Kwargs) -> Any:
        return self._about("meta", module, name, args, kwargs)

    def measure(
        self, module: str, name: str, args: Args, kwargs: Kwargs, grad_output: object = None
    ) -> tuple[Any, dict[str, float]]:
        """A call's figures (with ``grad_output``: its ``grads``): the worker's own (advisory) and
        ``max_memory_bytes`` read here from the sandbox's memory cgroup, where the student cannot
        switch it off (absent without one)."""
        watch = self._memory_watch()
        try:
            value, stats = self._about(
                "measure",
                module,
                name,
                args,
                kwargs,
                **({} if grad_output is None else {"grad_output": grad_output}),
            )
        except BaseException:
            if watch is not None:
                watch.close()
            raise
        return value, memwatch.figures(stats, watch)

    def _about(
        self, op: str, module: str, name: str, args: Args, kwargs: Kwargs, **extra: object
    ) -> Any:
        """A request about the function or class ``module.name``."""
        return self._request(
            {"op": op, "module": module, "name": name, "args": args, "kwargs": kwargs, **extra},
            f"{module}.{name}",
        )

    def _memory_watch(self) -> memwatch.MemoryWatch | None:
        """Start the worker if needed, then reset its memory cgroup's peak (None: no cgroup to
        read)."""
        if self.test_end - time.monotonic() <= 0:
            return None  # _request refuses the call anyway
        return memwatch.start(
            self._ensure().memory_cgroup()
        )  # a failed start raises as _request would

    def release(self, handle: int) -> None:
        """Let the worker drop a module handle: sent with the next request (a round trip of its own
        for each handle of each test was a tenth of a grade's requests), or before the next exercise
        starts."""
        real = self.history.release(handle)
        if self.channel is not None and real is not None:
            self.releases.append(real)

    def _flush_releases(self) -> None:
        if self.releases and self.channel is not None:
            try:
                self._request({"op": "release", "handle": NO_HANDLE}, "release")
            except errors.StudentError:
                pass

    def close(self) -> None:
        self.releases.clear()  # the worker's handles go with it
        if self.channel is not None:
            self._collect_output(self.channel)
            self.channel.close()
            self.channel = None

    def _left_memory(self) -> bool:
        """The live worker holds more memory than after loading the submission, by over
        FRESH_AFTER_BYTES."""
        now = memwatch.usage(self.channel.memory_cgroup()) if self.channel is not None else None
        return (
            now is not None
            and self.loaded_bytes is not None
            and now - self.loaded_bytes > FRESH_AFTER_BYTES
        )
