"""One test's requests to its worker, so a timed-out test can be replayed on a fresh worker.

Tests hold *virtual* module-handle ids, issued here and never reused; each maps to the id the
current worker gave. A worker that dies takes its handles with it (they map to nothing, so an old
handle can never reach a module a later worker made); a retry replays the test's earlier requests
on the fresh worker and maps each virtual id to the handle the replay made.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from grader import safetext
from grader.protocol.values import HandleRef

NO_HANDLE = -1  # no worker ever issues it: the worker answers "no module handle"


class History:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self.log: list[tuple[dict[str, Any], int | None]] = []
        self.real: dict[int, int] = {}

    def reset(self) -> None:
        """A new test: nothing earlier is replayed (its handles were released at its end)."""
        self.log.clear()
        self.real.clear()

    def lost(self) -> None:
        """The worker died: its handles are gone."""
        self.reset()

    def to_worker(self, request: dict[str, Any]) -> dict[str, Any]:
        """``request`` with the worker's ids for the test's virtual ones (the target and any handle
        argument)."""
        mapped = {
            k: self._real_refs(v) if k in ("args", "kwargs") else v for k, v in request.items()
        }
        if "handle" in request:
            mapped["handle"] = self.real.get(request["handle"], NO_HANDLE)
        return mapped

    def _real_refs(self, value: object) -> object:
        if type(value) is HandleRef:
            return HandleRef(self.real.get(value.id, NO_HANDLE), value.class_name)
        if isinstance(value, (list, tuple)):  # exactly a list or a tuple: the test's own arguments
            return type(value)(self._real_refs(v) for v in value)
        if isinstance(value, dict):
            return {k: self._real_refs(v) for k, v in value.items()}
        return value

    def record(self, request: dict[str, Any], key: str, body: object) -> object:
        """Log ``request`` (as the test made it); a new handle in the reply is given a virtual
        id."""
        created = None
        if key == "ok" and type(body) is HandleRef:
            created = next(self._ids)
            self.real[created] = body.id
            body = HandleRef(created, safetext.name(body.class_name))
        if request.get("op") == "release":
            self.real.pop(
                request.get("handle", NO_HANDLE), None
            )  # virtual ids start at 1: NO_HANDLE is never one
        self.log.append((request, created))
        return body

    def release(self, handle: int) -> int | None:
        """A test let go of ``handle``: the current worker's id for it (None if that worker never
        made it); the replay then skips whatever was aimed at it."""
        return self.real.pop(handle, None)

    def replay(self, exchange: Callable[[dict[str, Any]], tuple[str, Any]]) -> None:
        """Send the test's earlier requests to a fresh worker (``exchange`` sends one, returns its
        reply)."""
        log, self.log, old = self.log, [], dict(self.real)
        self.real.clear()
        for request, created in log:
            if request.get("op") == "release" or (
                request.get("handle") is not None and request["handle"] not in old
            ):
                continue  # released, or aimed at a handle that was already gone
            key, body = exchange(self.to_worker(request))
            if created is not None and key == "ok" and type(body) is HandleRef and created in old:
                self.real[created] = body.id
            self.log.append((request, created))
