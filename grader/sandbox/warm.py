"""A worker started before its submission is known (``grader batch --warm start``), trusted side."""

from __future__ import annotations

import shutil
import time

from grader.sandbox import sweep
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


def expect_message(reply: object, key: str) -> None:
    if type(reply) is not dict or reply.get(key) is not True:
        raise ChannelError("protocol", f"expected a {key!r} message from the worker")
