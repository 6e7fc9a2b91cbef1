"""How a sandboxed worker starts: one :class:`WorkerStarter` protocol, three ways, and a slot's
lanes.

- :class:`ColdStarter`: a fresh interpreter that imports torch itself (1-2 CPU-seconds);
- :class:`PrestartedStarter`: a worker started before its submission was known
  (:class:`WarmChannel`), taken for the first start of one submission, cold after that;
- :class:`ZygoteStarter`: every worker forked from a zygote that imported torch once (milliseconds).

:class:`SlotStarters` is a batch slot's choice among them, submission after submission: the zygote
and its restarts, the pre-started worker for *k+1* while *k* is graded, and the two launch slots
("lanes", :func:`lane_slot`) that keep two in-flight workers off each other's uid and cgroups.
The backend (:class:`grader.sandbox.remote.SandboxBackend`) asks its starter for each worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from grader.sandbox import shared_zygote
from grader.sandbox.channel import Channel
from grader.sandbox.isolation import LaunchSpec
from grader.sandbox.warm import WarmChannel, WarmStart
from grader.sandbox.zygote_client import FORKABLE, Zygote

WARM_MODES = ("fork", "start", "off")  # `grader batch --warm`: zygote, pre-started workers, cold


def lane_slot(slot: int, lane: int) -> int:
    """The launch slot (uid, cgroup names) of a batch slot's lane 0 or 1: no two lanes of any slots
    share one."""
    return 2 * slot + lane


@dataclass(frozen=True)
class Worker:
    """A started worker, before its setup frame."""

    channel: Channel
    # the folder it serves the submission from (a pre-started worker has its own, empty one)
    box: Path
    # the submission's files, sent in its setup frame (pre-started only)
    files: dict[str, str] | None = None
    ready: bool = False  # its "ready" frame (torch imported) was already read


class WorkerStarter(Protocol):
    """Starts the workers of one submission; ``slot`` is the launch slot its launch spec uses."""

    slot: int

    def start(self, launch: LaunchSpec, box: Path, *, last_attempt: bool = False) -> Worker:
        """A worker for ``box`` under ``launch`` (raises ``ChannelError``/``OSError`` when none
        starts)."""
        ...


class ColdStarter:
    """A freshly exec'd worker every time."""

    def __init__(self, slot: int = 0) -> None:
        self.slot = slot

    def start(self, launch: LaunchSpec, box: Path, *, last_attempt: bool = False) -> Worker:
        return Worker(Channel(launch, box), box)


class ZygoteStarter:
    """Every worker forked from ``zygote`` where the backend allows it (not bwrap); the last attempt
    of a start is cold, in case the zygote is what fails."""

    def __init__(self, zygote: Zygote, slot: int = 0) -> None:
        self.zygote, self.slot = zygote, slot

    def start(self, launch: LaunchSpec, box: Path, *, last_attempt: bool = False) -> Worker:
        forkable = launch.backend in FORKABLE and not last_attempt
        return Worker(Channel(launch, box, self.zygote if forkable else None), box)


def with_prestarted(
    early: WarmStart | None, then: WorkerStarter | None = None
) -> WorkerStarter | None:
    """A grade's starter: the pre-started worker (:func:`grader.sandbox.warm.prestart`) for its
    first start, once it is up, then ``then``'s (None: cold ones)."""
    started = early.get() if early is not None else None
    return PrestartedStarter(started, then=then) if started is not None else then


class PrestartedStarter:
    """The pre-started worker ``warm`` for the first start (when its spec matches), cold ones after
    it."""

    def __init__(
        self, warm: WarmChannel, slot: int = 0, *, then: WorkerStarter | None = None
    ) -> None:
        self.warm, self.slot, self.then = (
            warm,
            slot,
            then,
        )  # ``then`` starts the later workers (default: cold)

    def start(self, launch: LaunchSpec, box: Path, *, last_attempt: bool = False) -> Worker:
        ready = self.warm.ready and not self.warm.taken
        taken = self._take(box) if self.warm.launch == launch else None
        if taken is None:
            return (
                self.then.start(launch, box, last_attempt=last_attempt)
                if self.then
                else Worker(Channel(launch, box), box)
            )
        channel, files = taken
        return Worker(channel, self.warm.box, files, ready)

    def _take(self, box: Path) -> tuple[Channel, dict[str, str]] | None:
        """The pre-started worker with this submission's files (first start only): for its setup
        frame where it sees a private ``/box``; else copied here into the host folder it reads, whose
        files a ``process`` worker could not write itself (its leased uid, its Landlock view)."""
        if self.warm.taken:
            return None
        if self.warm.channel.proc.poll() is not None:
            # it died before seeing any student code: start a cold worker instead
            self.warm.discard()
            return None
        try:
            files = {p.name: p.read_text("utf-8") for p in sorted(box.iterdir()) if p.is_file()}
            if self.warm.launch.box_inside is None:
                for name, text in files.items():
                    (self.warm.box / name).write_text(text, "utf-8")
                files = {}
        except (OSError, UnicodeDecodeError):
            return None  # not plain UTF-8 text: start a cold worker that sees the files as they are
        channel = self.warm.take()
        return (channel, files) if channel is not None else None

    @property
    def used(self) -> bool:
        return self.warm.taken

    def close(self) -> None:
        self.warm.discard()


class SlotStarters:
    """A batch slot's starters: ``fork`` (a zygote), ``start`` (pre-started workers) or ``off``
    (cold).

    ``fork`` takes this user's zygote (:mod:`grader.sandbox.shared_zygote`) when one runs for this
    grader, waiting up to ``shared_wait_s`` the first time for one still warming up (the batch
    starts it beside its slots), so that the slots of a batch, and the batches after it, share one
    zygote instead of each starting its own (1.4-2 CPU-seconds each); otherwise the slot starts its
    own. It falls back to ``start`` where no zygote can run (bwrap) or it keeps failing. Submissions
    alternate between two lanes: the worker for k+1 imports torch while k is graded, and two
    in-flight workers never share a uid or a cgroup (killing one must not touch the other).
    """

    ZYGOTE_RESTARTS = 3

    def __init__(
        self,
        spec_for: Callable[[int], LaunchSpec],
        slot: int,
        mode: str,
        *,
        shared_wait_s: float = 0.0,
    ) -> None:
        self.lanes = [spec_for(lane_slot(slot, lane)) for lane in (0, 1)]
        self.lane, self.restarts, self.shared_wait_s = 0, 0, shared_wait_s
        self.mode = "start" if mode == "fork" and self.lanes[0].backend not in FORKABLE else mode
        self.zygote: Zygote | None = None
        self.warm: WarmChannel | None = None
        self.current: PrestartedStarter | None = None
        if self.mode == "fork" and not self._zygote():
            self.mode = "start"
        if self.mode == "start":
            self.warm = self._prestart()

    @property
    def shared(self) -> bool:
        """Whether the workers are forked from this user's zygote (not one of this slot's own)."""
        return isinstance(self.zygote, shared_zygote.SharedZygote) and self.zygote.alive

    def next(self) -> WorkerStarter:
        """The starter for the next submission (its lane's launch slot, warm worker or zygote)."""
        current, slot = self.warm, self.lanes[self.lane].slot
        self.lane = 1 - self.lane
        if self.mode == "start":
            self.warm = self._prestart()  # k+1's worker imports torch while k is graded
        if self.mode == "fork" and not (self.zygote and self.zygote.alive) and not self._zygote():
            self.mode, current = "start", None
            self.warm = self._prestart()
        self.current = PrestartedStarter(current, slot) if current is not None else None
        if self.current is not None:
            return self.current
        if self.mode == "fork" and self.zygote is not None:
            return ZygoteStarter(self.zygote, slot)
        return ColdStarter(slot)

    def done(self) -> bool:
        """After a submission: whether it took the pre-started worker (an unused one is killed)."""
        current, self.current = self.current, None
        if current is None:
            return False
        used = current.used
        current.close()
        return used

    def _zygote(self) -> bool:
        if self.zygote is not None:
            self.zygote.close()
        self.restarts += 1
        # a restart: only one already running
        wait = self.shared_wait_s if self.restarts == 1 else 0.0
        self.zygote = shared_zygote.connect_when_warm(wait)
        if self.zygote is None and self.restarts <= self.ZYGOTE_RESTARTS + 1:
            self.zygote = Zygote()
        return self.zygote is not None and self.zygote.wait_ready()

    def _prestart(self) -> WarmChannel:
        return WarmChannel(self.lanes[self.lane])

    def close(self) -> None:
        if self.warm is not None:
            self.warm.discard()
        if self.zygote is not None:
            self.zygote.close()
