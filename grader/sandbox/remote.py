"""The ``student`` backend for official grading: every call runs in a sandboxed worker.

Same surface as the in-process backend. Outcomes come from what this side observes (:mod:`replies`):

- a per-test limit (the canary's, from the reference's time: :mod:`grader.proofs`; else the exercise's) counts
  the sandbox's CPU seconds (:mod:`cputime`); wall-clock backstops: ``WALL_FACTOR`` × the limit + ``WALL_SLACK_S``
  using no CPU (asleep), ``HARD_FACTOR`` × in all; only those are retried, once (the test's requests replayed,
  :mod:`history`); after a counted timeout an exercise's remaining tests fail without running;
- a crash or output flood fails the call as the student's; the next call starts a fresh worker;
- a protocol violation (a malformed, unasked-for or misshapen reply) fails the rest of its exercise;
- a worker that cannot start is never the student's fault (no student code runs before its "loaded" frame): it
  is retried once the previous sandbox's processes are gone, then :class:`SandboxFault`, kept in ``grader_fault``
  so that ``grade()`` makes an error card; so is, at once, a sandbox that /proc shows is not what its launch
  promised (:mod:`grader.sandbox.attest`, read before the submission is sent to it).

Every incident is recorded for the scorecard, the first worker's attested isolation, and each test's CPU time.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from grader import errors as errors_tree
from grader import safetext
from grader.protocol import errors, wire
from grader.protocol.values import Args, Kwargs
from grader.sandbox import memwatch, replies
from grader.sandbox.attest import AttestationError
from grader.sandbox.channel import Channel, ChannelError
from grader.sandbox.drain import wait_drained
from grader.sandbox.history import NO_HANDLE, History
from grader.sandbox.isolation import LaunchSpec
from grader.sandbox.record import SandboxRecord
from grader.sandbox.starters import ColdStarter, WorkerStarter
from grader.sandbox.warm import STARTUP_TIMEOUT, WarmChannel, expect_message

__all__ = ["SandboxBackend", "SandboxFault", "SandboxRecord", "WarmChannel"]
START_ATTEMPTS, START_BACKOFF_S = 3, 2.0
MAX_TIMEOUTS = (
    1  # an exercise stops at its first timeout: an infinite loop costs one limit, not one per test
)
FRESH_AFTER_BYTES = (
    256 << 20
)  # memory an exercise may leave behind before the next one gets a fresh worker
WALL_FACTOR, WALL_SLACK_S = (
    3.0,
    5.0,
)  # a worker idle this long (WALL_FACTOR × the limit + slack) is stopped,
HARD_FACTOR = 20.0  # and a busy one after this many times its limit, however starved of CPU


class SandboxFault(errors_tree.GraderFault):
    """The grader could not run a test: the scorecard becomes ``status: error`` (kind ``grader``), regraded by a rerun."""


class SandboxBackend:
    def __init__(
        self,
        box: Path,
        launch: LaunchSpec,
        *,
        bans: dict[str, tuple[str, ...]],
        time_limits: dict[str, float],
        budget_s: float,
        single_module: str | None = None,
        starter: WorkerStarter | None = None,
        test_limits: dict[str, float] | None = None,
    ) -> None:
        self.box, self.launch, self.bans, self.single_module = box, launch, bans, single_module
        self.starter: WorkerStarter = starter or ColdStarter(launch.slot)
        self.forked = 0  # workers the zygote forked (each start after a timeout or crash too)
        self.time_limits, self.test_limits = time_limits, test_limits or {}
        self.test_cpu: dict[
            str, float
        ] = {}  # CPU seconds each test took in the sandbox (its last attempt)
        self.budget_end = time.monotonic() + budget_s
        self.channel: Channel | None = None
        self.test_end = self.budget_end  # the wall-clock backstop of the current test
        self.test_limit, self.cpu_used, self.retried = 30.0, 0.0, False
        self.current_test, self.starts = "", 0
        self.pending_seed: int | None = None
        self.incidents: list[dict[str, str]] = []
        self.output, self.output_total = {"stdout": 0, "stderr": 0}, 0
        self.timeouts: dict[str, int] = {}
        self.poisoned: set[str] = set()  # exercises whose worker broke the protocol
        self.current_exercise = ""
        self.loaded_bytes: int | None = (
            None  # the worker's memory right after it loaded the submission
        )
        self.grader_fault: SandboxFault | None = None
        self.observed: dict[str, object] | None = (
            None  # the first worker's attested isolation (attest.py)
        )
        self.history = History()
        self.releases: list[
            int
        ] = []  # the current worker's ids of handles the tests let go of, not yet sent
        self._groups: list[str] = []  # the cgroups of the last sandbox killed
        self._cpu_mark: tuple[Channel | None, float] = (
            None,
            0.0,
        )  # a worker's CPU reading after its last reply

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
            self._flush_releases()  # charged to the exercise that made them, before its memory is judged
            if self._left_memory():
                self.close()  # what one exercise's module hoarded must not starve the next one: a fresh worker
        self._note_cpu()
        self.current_test, self.current_exercise = nodeid, exercise or ""
        self.pending_seed = (
            seed  # sent with the test's first request (and replayed with it after a restart)
        )
        self.test_limit = self.test_limits.get(nodeid) or self.time_limits.get(exercise or "", 30.0)
        self.retried = False
        self.history.reset()
        self._new_attempt()

    def _note_cpu(self) -> None:
        if self.current_test:  # the test that ran last
            self.test_cpu[self.current_test] = round(self.cpu_used, 4)

    def _new_attempt(self) -> None:
        self.cpu_used = 0.0
        self.test_end = min(
            self.budget_end, time.monotonic() + HARD_FACTOR * self.test_limit + WALL_SLACK_S
        )

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
        """A call's figures (with ``grad_output``: its ``grads``): the worker's own (advisory) and ``max_memory_bytes``
        read here from the sandbox's memory cgroup, where the student cannot switch it off (absent without one)."""
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
        """Start the worker if needed, then reset its memory cgroup's peak (None: no cgroup to read)."""
        if self.test_end - time.monotonic() <= 0:
            return None  # _request refuses the call anyway
        return memwatch.start(
            self._ensure().memory_cgroup()
        )  # a failed start raises as _request would

    def release(self, handle: int) -> None:
        """Let the worker drop a module handle: sent with the next request (a round trip of its own for each
        handle of each test was a tenth of a grade's requests), or before the next exercise starts."""
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

    # -- internals ----------------------------------------------------------------------------
    def _left_memory(self) -> bool:
        """The live worker holds more memory than after loading the submission, by over FRESH_AFTER_BYTES."""
        now = memwatch.usage(self.channel.memory_cgroup()) if self.channel is not None else None
        return (
            now is not None
            and self.loaded_bytes is not None
            and now - self.loaded_bytes > FRESH_AFTER_BYTES
        )

    def _request(self, request: dict[str, Any], where: str) -> Any:
        self._refuse(where)
        if (
            self.pending_seed is not None
        ):  # the worker seeds torch before it runs the test's first request
            request, self.pending_seed = {**request, "seed": self.pending_seed}, None
        try:
            key, body = self._exchange(self.history.to_worker(request))
        except ChannelError as exc:
            if exc.kind != "timeout" or exc.cpu or not self._may_retry():
                raise self._incident(exc, where) from None
            key, body = self._retry(request, where, exc)
        return replies.unwrap(key, self.history.record(request, key, body))

    def _refuse(self, where: str) -> None:
        """Raise instead of running: a grader fault, a broken exercise, or no time left."""
        if self.grader_fault is not None:
            raise SandboxFault(str(self.grader_fault))
        if self.current_exercise in self.poisoned:
            raise errors.StudentCrash(
                f"{where}: not run (the worker broke the protocol earlier in this exercise)",
                exc_type="WorkerProtocol",
            )
        if self.timeouts.get(self.current_exercise, 0) >= MAX_TIMEOUTS:
            raise errors.StudentTimeout(
                f"{where}: not run (an earlier test of this exercise timed out)"
            )
        if self.test_end - time.monotonic() <= 0 or self.cpu_used >= self.test_limit:
            raise errors.StudentTimeout(
                f"{where}: not run (test limit or submission budget used up)"
            )

    def _exchange(self, request: dict[str, Any]) -> tuple[str, Any]:
        """Send one request, wait for its reply under the test's CPU and wall limits, check its shape."""
        channel = self._ensure()
        # the reading after this worker's last reply, if any: whatever it ran since (a thread of its own) counts too
        cpu0 = self._cpu_mark[1] if self._cpu_mark[0] is channel else channel.cpu_seconds()
        if (
            self.releases
        ):  # handles of this worker's (never logged: a replay runs on a fresh worker)
            request = {**request, "release": list(self.releases)}
            self.releases.clear()
        try:
            channel.send(request)
        except wire.WireError as exc:  # the request came from a test: encoding it is our job
            raise self._fault(f"a request to the worker could not be encoded: {exc}") from None
        reply = channel.receive(
            self.test_end - time.monotonic(),
            cpu_until=cpu0 + self.test_limit - self.cpu_used,
            stall_s=WALL_FACTOR * self.test_limit + WALL_SLACK_S,
            cpu_now=cpu0,
        )
        cpu1 = channel.cpu_seconds()
        self.cpu_used += cpu1 - cpu0
        self._cpu_mark = (channel, cpu1)
        return replies.check(reply, request.get("op"))

    def _may_retry(self) -> bool:
        """One retry per test (of a wall-clock timeout), while this exercise has no counted timeout."""
        return (
            not self.retried
            and not self.timeouts.get(self.current_exercise)
            and self.budget_end > time.monotonic()
        )

    def _retry(self, request: dict[str, Any], where: str, first: ChannelError) -> tuple[str, Any]:
        """Run the timed-out request again on a fresh worker, after replaying the test's earlier ones."""
        self.retried = True
        self._drop(first, where, " (retried once on a fresh worker)")
        self._new_attempt()
        try:
            self.history.replay(self._exchange)
            return self._exchange(self.history.to_worker(request))
        except ChannelError as exc:
            raise self._incident(exc, where) from None

    def _ensure(self) -> Channel:
        if self.grader_fault is not None:
            raise SandboxFault(str(self.grader_fault))
        if self.channel is None:
            t0 = time.monotonic()
            self.channel = self._start()
            # starting a worker is not the test's time: its wall-clock backstop moves on by as much
            self.test_end = min(self.budget_end, self.test_end + time.monotonic() - t0)
        return self.channel

    def _start(self) -> Channel:
        """A ready worker: a failed start is retried on a fresh one once the last sandbox is gone."""
        problems: list[str] = []
        for attempt in range(START_ATTEMPTS):
            time.sleep(
                START_BACKOFF_S * attempt
            )  # what held it (a uid's process count, memory) may need a moment
            if not wait_drained(self._groups):
                problems.append("the previous sandbox's processes did not go away")
                continue
            try:  # the last attempt: a zygote starter starts cold, in case the zygote is what fails
                return self._start_once(last_attempt=attempt == START_ATTEMPTS - 1)
            except (
                ChannelError,
                OSError,
            ) as exc:  # OSError: no process could be made (EAGAIN, ENOMEM)
                problems.append(str(exc))
        raise self._fault(
            f"the sandboxed worker could not start ({START_ATTEMPTS} attempts): "
            + "; ".join(problems)
        )

    def _start_once(self, *, last_attempt: bool) -> Channel:
        self.starts += 1
        worker = self.starter.start(self.launch, self.box, last_attempt=last_attempt)
        channel = worker.channel
        self.forked += channel.forked
        try:
            if not (worker.ready and worker.files is not None):
                expect_message(channel.receive(STARTUP_TIMEOUT), "ready")
            try:  # every worker, from /proc, before the submission is sent to it: a mismatch is a grader fault
                seen = channel.attested().record()
            except AttestationError as exc:
                channel.kill()
                raise self._fault(str(exc)) from None
            self.observed = self.observed or seen
            root = "/box" if self.launch.backend in ("namespace", "bwrap") else str(worker.box)
            setup: dict[str, Any] = {
                "root": root,
                "bans": {k: list(v) for k, v in self.bans.items()},
                "single_module": self.single_module,
                **({"files": worker.files} if worker.files is not None else {}),
            }
            channel.send(setup)
            expect_message(channel.receive(STARTUP_TIMEOUT), "loaded")
            self.loaded_bytes = memwatch.usage(channel.memory_cgroup())
        except (ChannelError, wire.WireError) as exc:
            said = safetext.text(bytes(channel.output["stderr"][-300:]), 300).strip()
            self._collect_output(channel)
            channel.kill()
            self._groups = channel.cgroups
            raise ChannelError(
                "startup", f"{exc}" + (f" (it said: {said})" if said else "")
            ) from None
        return channel

    def _fault(self, message: str) -> SandboxFault:
        """Record the first grader fault (``grade()`` reads ``grader_fault``) and return one to raise."""
        if self.grader_fault is None:
            self.grader_fault = SandboxFault(message)
        return SandboxFault(str(self.grader_fault))

    def _drop(self, exc: ChannelError, where: str, note: str = "") -> None:
        """Kill the current worker and record why (the next call starts a fresh one)."""
        channel, self.channel = self.channel, None
        self.releases.clear()
        if channel is not None:
            self._collect_output(channel)
            channel.kill()
            self._groups = channel.cgroups
        self.incidents.append(
            {"kind": exc.kind, "test": self.current_test, "message": f"{where}: {exc}{note}"}
        )

    def _incident(self, exc: ChannelError, where: str) -> errors.StudentError:
        self._drop(exc, where)
        self.history.lost()  # old handles are gone with the worker
        if exc.kind == "timeout":
            self.timeouts[self.current_exercise] = self.timeouts.get(self.current_exercise, 0) + 1
            return errors.StudentTimeout(
                f"{where} ran past its time limit ({self.test_limit:g} s of CPU time "
                f"per test; {exc}); the worker was stopped"
            )
        if exc.kind == "protocol":
            self.poisoned.add(self.current_exercise)
        return errors.StudentCrash(f"{where}: {exc}", exc_type=f"Worker{exc.kind.title()}")

    def _collect_output(self, channel: Channel) -> None:
        for name, kept in channel.output.items():
            self.output[name] += len(kept)
        self.output_total += channel.output_total
