"""The ``student`` backend for official grading: every call runs in a sandboxed worker.

Same surface as the in-process backend. A timeout, crash, protocol break or output flood kills
the worker; the call fails as the student's timeout/crash, the incident is recorded, and the next
call starts a fresh worker, so the remaining tests still run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from grader.sandbox.channel import Channel, ChannelError
from grader.sandbox.isolation import LaunchSpec
from grader.student import errors

STARTUP_TIMEOUT = 120.0
MAX_TIMEOUTS = 2


class SandboxBackend:
    def __init__(self, box: Path, spec: LaunchSpec, *, bans: dict[str, tuple[str, ...]],
                 time_limits: dict[str, float], budget_s: float, single_module: str | None = None) -> None:
        self.box, self.spec, self.bans, self.single_module = box, spec, bans, single_module
        self.time_limits = time_limits
        self.budget_end = time.monotonic() + budget_s
        self.channel: Channel | None = None
        self.test_end = self.budget_end
        self.current_test = ""
        self.incidents: list[dict[str, str]] = []
        self.starts = 0
        self.output = {"stdout": 0, "stderr": 0}
        self.output_total = 0
        self.timeouts: dict[str, int] = {}
        self.current_exercise = ""

    # -- the plugin tells us which test runs, so its exercise's time limit applies -------------
    def begin_test(self, nodeid: str, exercise: str | None) -> None:
        self.current_test, self.current_exercise = nodeid, exercise or ""
        self.test_end = min(self.budget_end, time.monotonic() + self.time_limits.get(exercise or "", 30.0))
        if self.timeouts.get(self.current_exercise, 0) >= MAX_TIMEOUTS:
            self.test_end = time.monotonic()  # a hanging exercise is not re-run test after test

    # -- Backend protocol ---------------------------------------------------------------------
    def call(self, module: str, name: str, args: tuple, kwargs: dict) -> Any:
        return self._request({"op": "call", "module": module, "name": name, "args": args, "kwargs": kwargs},
                             f"{module}.{name}")

    def method(self, handle: int, method: str, args: tuple, kwargs: dict) -> Any:
        return self._request({"op": "method", "handle": handle, "method": method, "args": args, "kwargs": kwargs},
                             method)

    def measure(self, module: str, name: str, args: tuple, kwargs: dict) -> tuple[Any, dict]:
        value, stats = self._request({"op": "measure", "module": module, "name": name, "args": args,
                                      "kwargs": kwargs}, f"{module}.{name}")
        return value, {str(k): float(v) for k, v in dict(stats).items() if type(v) in (int, float)}

    def release(self, handle: int) -> None:
        if self.channel is not None:
            try:
                self._request({"op": "release", "handle": handle}, "release")
            except errors.StudentError:
                pass

    def close(self) -> None:
        if self.channel is not None:
            self._collect_output(self.channel)
            self.channel.close()
            self.channel = None

    # -- internals ----------------------------------------------------------------------------
    def _request(self, request: dict, where: str) -> Any:
        if self.test_end - time.monotonic() <= 0:
            why = (f"{MAX_TIMEOUTS} earlier tests of this exercise timed out"
                   if self.timeouts.get(self.current_exercise, 0) >= MAX_TIMEOUTS else "test limit or submission budget used up")
            raise errors.StudentTimeout(f"{where}: not run ({why})")
        channel = self._ensure()
        try:
            channel.send(request)
            reply = channel.receive(self.test_end - time.monotonic())
        except ChannelError as exc:
            raise self._incident(exc, where) from None
        return _unwrap(reply, where)

    def _ensure(self) -> Channel:
        if self.channel is None:
            self.starts += 1
            channel = Channel(self.spec, self.box)
            try:
                _expect(channel.receive(STARTUP_TIMEOUT), "ready")
                root = "/box" if self.spec.backend in ("namespace", "bwrap") else str(self.box)
                channel.send({"root": root, "bans": {k: list(v) for k, v in self.bans.items()},
                              "single_module": self.single_module})
                _expect(channel.receive(STARTUP_TIMEOUT), "loaded")
            except ChannelError as exc:
                self._collect_output(channel)
                channel.kill()
                raise errors.StudentCrash(f"the sandboxed worker could not start: {exc}") from None
            self.channel = channel
        return self.channel

    def _incident(self, exc: ChannelError, where: str) -> errors.StudentError:
        assert self.channel is not None
        self._collect_output(self.channel)
        self.channel.kill()
        self.channel = None  # the next call starts a fresh worker; old handles are gone with it
        self.incidents.append({"kind": exc.kind, "test": self.current_test, "message": f"{where}: {exc}"})
        if exc.kind == "timeout":
            self.timeouts[self.current_exercise] = self.timeouts.get(self.current_exercise, 0) + 1
            return errors.StudentTimeout(f"{where} ran past its time limit ({exc}); the worker was stopped")
        return errors.StudentCrash(f"{where}: {exc}", exc_type=f"Worker{exc.kind.title()}")

    def _collect_output(self, channel: Channel) -> None:
        for name, kept in channel.output.items():
            self.output[name] += len(kept)
        self.output_total += channel.output_total


def _expect(reply: Any, key: str) -> None:
    if type(reply) is not dict or reply.get(key) is not True:
        raise ChannelError("protocol", f"expected a {key!r} message from the worker")


def _unwrap(reply: Any, where: str) -> Any:
    if type(reply) is not dict or len(reply) != 1:
        raise errors.StudentCrash(f"{where}: malformed reply from the worker", exc_type="WorkerProtocol")
    ((key, body),) = reply.items()
    if key == "ok":
        return body
    if key == "error" and type(body) is dict:
        raise errors.from_plain(body)
    if key == "api_error":
        raise errors.StudentAPIError(str(body)[:2000])
    raise errors.StudentCrash(f"{where}: malformed reply from the worker", exc_type="WorkerProtocol")
