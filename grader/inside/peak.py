"""Largest tensor storage produced by any torch op while a call runs (a dispatch mode).

Used to show that an algorithm never materialises a big intermediate (FlashAttention's L x S
matrix). In the sandbox the figure comes from the untrusted worker, so the worker's memory rlimit
is the physical backstop; the figure itself guides the in-process (student) runs.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class PeakStorage(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Otherwise torch wraps __torch_dispatch__ in _disable_dynamo, whose first call imports
        # torch._dynamo: 830 modules, 1.0-1.7 s in every fresh worker. Nothing here is compiled.
        return False

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # torch leaves TorchDispatchMode.__init__ unannotated
        self.max_bytes = 0

    def __torch_dispatch__(
        self,
        func: Callable[..., object],
        types: object,
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        out = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor) and leaf.layout == torch.strided:
                self.max_bytes = max(self.max_bytes, leaf.untyped_storage().nbytes())
        return out
