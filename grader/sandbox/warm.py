"""A worker started before its submission is known (``grader batch --warm start``), trusted side."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable

from grader.sandbox import mirror, sweep
from grader.sandbox.channel import Channel, ChannelError
from grader.sandbox.isolation import LaunchSpec
from grader.sandbox.zygote_client import Zygote

STARTUP_TIMEOUT = 120.0


class WarmChannel:
    """A worker started before its submission is known: it imports torch, then waits for its setup
    frame.

    The worker is untrusted from its first instruction and holds nothing secret, so starting it
    early is safe; its own empty box receives the submission's files through the setup frame. A
    backend ``take()``s it at most once; whoever made it calls ``discard()`` afterwards (kills it if
    unused).
    """

    def __init__(self, launch: LaunchSpec, zygote: Zygote | None = None) -> None:
        self.launch = launch
        self.box = sweep.tempdir("warm")
        self.box.chmod(0o755)
        self.started = time.monotonic()
        self.taken = False
        self.ready = False  # the worker's "ready" frame (torch imported) was already read
        self.channel = Channel(
            launch, self.box, zygote
        )  # forked from ``zygote`` when given (a cold start if it fails)

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT) -> bool:
        """Block until the worker has imported torch; False if it died or took too long (then
        unusable)."""
        if not self.ready and not self.taken:
            try:
                expect_message(self.channel.receive(timeout), "ready")
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


class WarmStart:
    """A :class:`WarmChannel` forked from a zygote on a thread of its own, so that the wait for the
    zygote's fork and the sandbox's set-up (40-60 ms) overlaps what this process does meanwhile
    (``grader grade`` imports torch and pytest). Nothing is sent to the worker before :meth:`get`,
    which the caller calls once it needs the worker.

    What a start computes is computed first, here: the launch's view of this machine and the uid
    lease (reading /proc). On the thread, every system call of it would wait for the GIL behind the
    import (a switch interval each: the worker started 0.3 s late). A cold start (no zygote) is made
    here at once: its worker imports torch beside this process, the longest wait of all."""

    def __init__(
        self, make: Callable[[], WarmChannel | None], launch: LaunchSpec, *, on_thread: bool
    ) -> None:
        self._made: WarmChannel | None = None
        self._error: Exception | None = None
        self._thread: threading.Thread | None = None
        if not on_thread:
            self._run(make)
            return
        try:
            mirror.prepare()
            launch.uid  # noqa: B018 - the lease, taken now (held by the spec)
        except OSError:
            return  # as a start that failed: none made (a later one says why)
        self._thread = threading.Thread(target=self._run, args=(make,), name="warm-start")
        self._thread.start()

    def _run(self, make: Callable[[], WarmChannel | None]) -> None:
        try:
            self._made = make()
        except Exception as exc:  # noqa: BLE001 - raised where the caller waits for it
            self._error = exc

    def get(self) -> WarmChannel | None:
        """The started worker (None: none could start; a cold one comes later), once its thread is
        done; what its start raised is raised here."""
        self._join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._made

    def discard(self) -> None:
        """Kill the worker unless a backend took it (after waiting for its start to end)."""
        self._join()
        if self._made is not None:
            self._made.discard()

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()


def prestart(launch: LaunchSpec, zygote: Zygote | None = None) -> WarmStart:
    """A submission's first worker, started now, before the caller imports torch and pytest: forked
    from ``zygote`` on a thread, or a cold one whose torch import overlaps the caller's. It is
    untrusted from its first instruction and holds nothing secret (:class:`WarmChannel`); a worker
    that fails to start only means a cold one later."""

    def make() -> WarmChannel | None:
        try:
            return WarmChannel(launch, zygote)
        except OSError:
            return None

    return WarmStart(make, launch, on_thread=zygote is not None)


def expect_message(reply: object, key: str) -> None:
    if type(reply) is not dict or reply.get(key) is not True:
        raise ChannelError("protocol", f"expected a {key!r} message from the worker")
