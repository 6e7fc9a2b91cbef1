"""One submission's worker session, under the sandbox backend (:mod:`grader.sandbox.remote`).

Starting a worker (retried on a fresh one once the previous sandbox's processes are gone; a sandbox
that /proc shows is not what its launch promised is a grader fault at once), exchanging one request
under the current test's CPU limit and wall-clock backstops, retrying a wall-clock timeout once on a
fresh worker after replaying the test's earlier requests, and recording every incident and the
output the workers wrote. Kept apart from the backend's surface (the operations the tests call, the
per-test bookkeeping, the record for the scorecard), which
:class:`~grader.sandbox.remote.SandboxBackend` adds on top of :class:`WorkerSession`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from grader import errors as errors_tree
from grader import safetext
from grader.protocol import errors, wire
from grader.sandbox import memwatch, replies
from grader.sandbox.attest import AttestationError
from grader.sandbox.channel import Channel, ChannelError
from grader.sandbox.drain import wait_drained
from grader.sandbox.history import History
from grader.sandbox.isolation import LaunchSpec
from grader.sandbox.starters import ColdStarter, WorkerStarter
from grader.sandbox.warm import STARTUP_TIMEOUT, expect_message

START_ATTEMPTS, START_BACKOFF_S = 3, 2.0
# an exercise stops at its first timeout: an infinite loop costs one limit, not one per test
MAX_TIMEOUTS = 1
WALL_FACTOR, WALL_SLACK_S = (
    3.0,
    5.0,
)  # a worker idle this long (WALL_FACTOR × the limit + slack) is stopped,
HARD_FACTOR = 20.0  # and a busy one after this many times its limit, however starved of CPU


class SandboxFault(errors_tree.GraderFault):
    """The grader could not run a test: the scorecard becomes ``status: error`` (kind ``grader``),
    regraded by a rerun."""


class WorkerSession:
    """A submission's sandboxed workers, one at a time, and what happened to them (see the module
    docstring)."""

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
        tight_limits: dict[str, float] | None = None,
        until_first_timeout: bool = False,
    ) -> None:
        self.box, self.launch, self.bans, self.single_module = box, launch, bans, single_module
        self.starter: WorkerStarter = starter or ColdStarter(launch.slot)
        self.forked = 0  # workers the zygote forked (each start after a timeout or crash too)
        self.time_limits, self.test_limits = time_limits, test_limits or {}
        # the limits after the submission's first timeout (grader.proofs), and the full one they cut
        self.tight_limits, self.reduced_from = tight_limits or {}, 0.0
        # a grade made beside its proof (grader.canary_beside) is made again after any timeout
        self.until_first_timeout = until_first_timeout
        # CPU seconds each test took in the sandbox (its last attempt)
        self.test_cpu: dict[str, float] = {}
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
        # the worker's memory right after it loaded the submission
        self.loaded_bytes: int | None = None
        self.grader_fault: SandboxFault | None = None
        # the first worker's attested isolation (attest.py)
        self.observed: dict[str, object] | None = None
        self.history = History()
        # the current worker's ids of handles the tests let go of, not yet sent
        self.releases: list[int] = []
        self._groups: list[str] = []  # the cgroups of the last sandbox killed
        # a worker's CPU reading after its last reply
        self._cpu_mark: tuple[Channel | None, float] = (None, 0.0)

    def _new_attempt(self) -> None:
        self.cpu_used = 0.0
        self.test_end = min(
            self.budget_end, time.monotonic() + HARD_FACTOR * self.test_limit + WALL_SLACK_S
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
        if self.until_first_timeout and any(self.timeouts.values()):  # none retried: all counted
            raise errors.StudentTimeout(
                f"{where}: not run (graded again: an earlier test timed out)"
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
        """Send one request, wait for its reply under the test's CPU and wall limits, check its
        shape."""
        channel = self._ensure()
        # the reading after this worker's last reply, if any: whatever it ran since (a thread of its
        # own) counts too
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
        """One retry per test (of a wall-clock timeout), while this exercise has no counted
        timeout."""
        return (
            not self.retried
            and not self.until_first_timeout
            and not self.timeouts.get(self.current_exercise)
            and self.budget_end > time.monotonic()
        )

    def _retry(self, request: dict[str, Any], where: str, first: ChannelError) -> tuple[str, Any]:
        """Run the timed-out request again on a fresh worker, after replaying the test's earlier
        ones."""
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
        """A ready worker: a failed start is retried on a fresh one once the last sandbox is
        gone."""
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
            # every worker, from /proc, before the submission is sent to it: a mismatch is a grader
            # fault
            try:
                seen = channel.attested().record()
            except AttestationError as exc:
                channel.kill()
                raise self._fault(str(exc)) from None
            self.observed = self.observed or seen
            root = self.launch.box_inside or str(worker.box)
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
        """Record the first grader fault (``grade()`` reads ``grader_fault``) and return one to
        raise."""
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
                f"per test{self._reduced()}; {exc}); the worker was stopped"
            )
        if exc.kind == "protocol":
            self.poisoned.add(self.current_exercise)
        return errors.StudentCrash(f"{where}: {exc}", exc_type=f"Worker{exc.kind.title()}")

    def _reduced(self) -> str:
        if not self.reduced_from:
            return ""
        return (
            f", cut from {self.reduced_from:g} s since an earlier test of this submission timed out"
        )

    def _collect_output(self, channel: Channel) -> None:
        for name, kept in channel.output.items():
            self.output[name] += len(kept)
        self.output_total += channel.output_total
