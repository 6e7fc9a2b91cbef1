"""The sandboxed worker: a fresh interpreter that imports torch, then the student's modules, and
serves calls.

Started as ``python -I -S -B worker.py CONFIG_JSON`` by a launcher, or forked from the zygote
(:mod:`grader.sandbox.zygote`), never from a process that has loaded tests or references. It is
untrusted from its first instruction and holds nothing secret: it reads request frames on fd 0 and
writes one response frame per request on fd 3. What the student prints goes to fds 1 and 2, which
the runner caps and never parses.
"""

from __future__ import annotations

import json
import os
import sys

TYPE_CHECKING = False  # no `typing` import at start-up for annotations alone
if TYPE_CHECKING:
    from typing import Any

    from grader.inside.executor import Executor


def _setup_path(config: dict[str, Any]) -> None:
    # -S skips site (and .pth finders such as an editable install pointing at the host checkout)
    sys.path[:0] = [config["lib"], *config.get("site_dirs", [])]


def main() -> int:
    config = json.loads(sys.argv[1])
    _setup_path(config)
    os.environ.setdefault("OMP_NUM_THREADS", str(config.get("threads", 1)))
    return serve_forever(
        threads=int(config.get("threads", 1)), response_fd=int(config.get("response_fd", 3))
    )


def serve_forever(*, threads: int, response_fd: int) -> int:
    """Say ready, load the submission from the setup frame, then answer requests until EOF or
    ``exit``.

    Also the entry point of a worker forked from the zygote (torch already imported there).
    """
    import torch

    torch.set_num_threads(threads)
    from grader.inside import gpu, warmup
    from grader.protocol import wire, wireparse

    gpu.cap_memory()  # before any student code: an advisory GPU memory cap when a GPU is exposed

    requests = os.fdopen(0, "rb", buffering=0)
    responses = os.fdopen(response_fd, "wb", buffering=0)
    wire.write_frame(
        responses, {"ready": True, "torch": str(torch.__version__), "pid": os.getpid()}
    )
    # while the trusted side takes in the submission; always to the end: a test's CPU limit must not
    # pay for it
    warmup.warm_up()
    setup = wireparse.read_frame(requests, allow_cuda=True)
    executor = _executor(setup)
    wire.write_frame(responses, {"loaded": True})
    while True:
        try:
            request = wireparse.read_frame(requests, allow_cuda=True)
        except EOFError:
            return 0
        if request.get("op") == "exit":
            return 0
        responses.write(serve(executor, request))


def _executor(setup: dict[str, Any]) -> Executor:
    from pathlib import Path

    from grader.inside.executor import Executor

    root = Path(setup["root"])
    for name, text in (setup.get("files") or {}).items():  # a warm worker receives its files late
        (root / Path(name).name).write_text(text, "utf-8")
    bans = {k: tuple(v) for k, v in (setup.get("bans") or {}).items()}
    # its results are encoded at once: the wire's copy is the only one they need
    return Executor(root, bans=bans, single_module=setup.get("single_module"), copies=False)


def _seed(value: object) -> None:
    """Seed torch's global generators for the next test: a worker is forked from a zygote (or
    started) in the same state every time, so without this every grading drew the same dropout masks
    whatever its seed."""
    import torch

    from grader.protocol.errors import StudentAPIError

    if type(value) is not int or not 0 <= value < 1 << 63:
        raise StudentAPIError("a seed is an integer in [0, 2**63)")
    torch.default_generator.manual_seed(value)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(value)


def _before(executor: Executor, request: dict[str, Any]) -> None:
    """What a request may carry besides its operation: handles to drop, and the seed of a test's
    first request."""
    for handle in request.get("release") or ():
        if type(handle) is int:
            executor.release(handle)
    if "seed" in request:
        _seed(request["seed"])


def serve(executor: Executor, request: dict[str, Any]) -> bytes | bytearray:
    """Run one request; every outcome becomes a plain response frame (never an exception here). The
    value is encoded once, inside the guard: a value that cannot be sent is the student's error, not
    a lost reply."""
    from grader.protocol import wire
    from grader.protocol.errors import StudentAPIError, StudentError

    try:
        _before(executor, request)
        op = request["op"]
        if op == "call":
            value = executor.call(
                request["module"], request["name"], request["args"], request["kwargs"]
            )
        elif op == "method":
            value = executor.method(
                request["handle"], request["method"], request["args"], request["kwargs"]
            )
        elif op == "measure":
            value = executor.measure(
                request["module"],
                request["name"],
                request["args"],
                request["kwargs"],
                request.get("grad_output"),
            )
        elif op == "grads":
            value = executor.grads(
                request["module"],
                request["name"],
                request["args"],
                request["kwargs"],
                request["grad_output"],
            )
        elif op == "meta":
            value = executor.meta(
                request["module"], request["name"], request["args"], request["kwargs"]
            )
        elif op == "release":
            executor.release(request["handle"])
            value = None
        elif op == "seed":
            _seed(request["seed"])
            value = None
        else:
            return wire.encode({"api_error": f"unknown op {op!r}"})
        return wire.encode({"ok": value})
    except StudentError as exc:
        return wire.encode({"error": exc.to_plain()})
    except StudentAPIError as exc:
        return wire.encode({"api_error": str(exc)[:2000]})
    except BaseException as exc:  # noqa: BLE001 - a worker never dies of a request
        return wire.encode(
            {
                "error": {
                    "kind": "exception",
                    "exc_type": type(exc).__name__,
                    "message": _safe(exc),
                    "frames": [],
                }
            }
        )


def _safe(exc: BaseException) -> str:
    try:
        return str(exc)[:2000]
    except BaseException:  # noqa: BLE001
        return "<unreadable message>"


if __name__ == "__main__":
    sys.exit(main())
