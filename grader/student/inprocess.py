"""Backend that runs student code in this process: for students' own local runs (a debugger works).

Never used to grade officially: it gives student code the test process. The surface is the
sandboxed backend's, so the same tests run in both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grader.inside.executor import Executor
from grader.protocol.values import Args, Kwargs


class InProcessBackend:
    def __init__(self, root: Path | str | None = None, *, bans: dict[str, tuple[str, ...]] | None = None,
                 single_module: str | None = None, executor: Executor | None = None) -> None:
        """Serve the modules in ``root``, or any ready ``executor`` (e.g. a notebook's names)."""
        if executor is None:
            if root is None:
                raise TypeError("InProcessBackend needs a submission folder or an executor")
            executor = Executor(root, bans=bans, single_module=single_module)
        self.executor = executor

    def call(self, module: str, name: str, args: Args, kwargs: Kwargs) -> Any:
        return self.executor.call(module, name, args, kwargs)

    def method(self, handle: int, method: str, args: Args, kwargs: Kwargs) -> Any:
        return self.executor.method(handle, method, args, kwargs)

    def measure(self, module: str, name: str, args: Args, kwargs: Kwargs,
                grad_output: object = None) -> tuple[Any, dict[str, float]]:
        return self.executor.measure(module, name, args, kwargs, grad_output)

    def grads(self, module: str, name: str, args: Args, kwargs: Kwargs, grad_output: object) -> tuple[Any, tuple[Any, ...]]:
        return self.executor.grads(module, name, args, kwargs, grad_output)

    def meta(self, module: str, name: str, args: Args, kwargs: Kwargs) -> Any:
        return self.executor.meta(module, name, args, kwargs)

    def release(self, handle: int) -> None:
        self.executor.release(handle)

    def close(self) -> None:
        self.executor.handles.clear()
