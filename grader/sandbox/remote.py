"""The ``student`` backend for official grading: every call runs in a sandboxed worker.

Same surface as the in-process backend. A timeout, crash, protocol break or output flood kills
the worker; the call fails as the student's timeout/crash, the incident is recorded, and the next
call starts a fresh worker, so the remaining tests still run.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from grader.sandbox.channel import Channel, ChannelError
from grader.sandbox.isolation import LaunchSpec
from grader.sandbox.zygote_client import FORKABLE, Zygote
from grader.protocol import errors

STARTUP_TIMEOUT = 120.0
MAX_TIMEOUTS = 2


class WarmChannel:
    """A worker started before its submission is known: it imports torch, then waits for its setup frame.

    The worker is untrusted from its first instruction and holds nothing secret, so starting it early
    is safe; its own empty box receives the submission's files through the setup frame. A backend
    ``take()``s it at most once; whoever made it calls ``discard()`` afterwards (kills it if unused).
    """

    def __init__(self, spec: LaunchSpec) -> None:
        self.spec = spec
        self.box = Path(tempfile.mkdtemp(prefix="grader-warm-"))
        self.box.chmod(0o755)
        self.started = time.monotonic()
        self.taken = False
        self.ready = False  # the worker's "ready" frame (torch imported) was already read
        self.channel = Channel(spec, self.box)

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT) -> bool:
        """Block until the worker has imported torch; False if it died or took too long (then unusable)."""
        if not self.ready and not self.taken:
            try:
                _expect(self.channel.receive(timeout), "ready")
                self.ready = True
            except ChannelError:
                self.discard()
        return self.ready

    def take(self) -> Channel | None:
        if self.taken:
            return None
        self.taken = True
        return self.channel

    def discard(self) -> None:
        if not self.taken:
            self.taken = True
            self.channel.kill()
        shutil.rmtree(self.box, ignore_errors=True)


class SandboxBackend:
    def __init__(self, box: Path, spec: LaunchSpec, *, bans: dict[str, tuple[str, ...]],
                 time_limits: dict[str, float], budget_s: float, single_module: str | None = None,
                 warm: WarmChannel | None = None, zygote: Zygote | None = None) -> None:
        self.box, self.spec, self.bans, self.single_module = box, spec, bans, single_module
        self.warm = warm if warm is not None and warm.spec == spec else None
        self.zygote = zygote if spec.backend in FORKABLE else None
        self.forked = 0  # workers the zygote forked (each start after a timeout or crash too)
        self.startup_wait_s: float | None = None
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
            t0 = time.monotonic()
            ready = self.warm is not None and self.warm.ready and not self.warm.taken
            channel, box, files = self._warm_channel() or (Channel(self.spec, self.box, self.zygote), self.box, None)
            self.forked += channel.forked
            try:
                if not (ready and files is not None):
                    _expect(channel.receive(STARTUP_TIMEOUT), "ready")
                root = "/box" if self.spec.backend in ("namespace", "bwrap") else str(box)
                setup: dict[str, Any] = {"root": root, "bans": {k: list(v) for k, v in self.bans.items()},
                                         "single_module": self.single_module}
                if files is not None:
                    setup["files"] = files
                channel.send(setup)
                _expect(channel.receive(STARTUP_TIMEOUT), "loaded")
                if self.startup_wait_s is None:
                    self.startup_wait_s = round(time.monotonic() - t0, 4)
            except ChannelError as exc:
                self._collect_output(channel)
                channel.kill()
                raise errors.StudentCrash(f"the sandboxed worker could not start: {exc}") from None
            self.channel = channel
        return self.channel

    def _warm_channel(self) -> tuple[Channel, Path, dict[str, str]] | None:
        """The pre-started worker with this submission's files for its setup frame (first start only)."""
        if self.warm is None or self.warm.taken:
            return None
        try:
            files = {p.name: p.read_text("utf-8") for p in sorted(self.box.iterdir()) if p.is_file()}
        except (OSError, UnicodeDecodeError):
            return None  # not plain UTF-8 text: start a cold worker that sees the files as they are
        if self.warm.channel.proc.poll() is not None:
            self.warm.discard()  # it died before seeing any student code: start a cold worker instead
            return None
        channel = self.warm.take()
        return (channel, self.warm.box, files) if channel is not None else None

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
