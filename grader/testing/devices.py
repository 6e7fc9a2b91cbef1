"""Device checks on the CPU grader: tensors made inside a function or ``forward`` must follow the
input's device.

``student.<module>.<fn>.on_meta(...)`` and ``handle.on_meta(...)`` run the student's code with every
input (and, for a module, every parameter and registered buffer) on PyTorch's ``meta`` device, which
has shapes but no data. A tensor built on the CPU inside the code (``torch.ones(T, T)``,
``torch.arange(L)``, a mask kept as a plain attribute) then either raises in the student's code or
comes back on the CPU. Limits: meta accepts a CPU operand in some ops (``@`` with a CPU matrix), and
data-dependent code (``.item()``, ``if mask.any()``) cannot run on meta.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grader.testing.checks import expect
from grader.testing.diagnosis import tag

DEVICE_HINT = (
    "make every tensor on the input's device: torch.ones(..., device=x.device), "
    "torch.arange(..., device=x.device), torch.zeros_like(x); keep a fixed mask in a registered buffer "
    "(self.register_buffer) so that module.to(device) moves it"
)


def expect_on_input_device(run: Callable[[], Any], *, what: str, hint: str | None = None) -> None:
    """Fail unless every tensor the ``on_meta`` call ``run`` returns is on ``meta``, the device of
    its inputs; when the student's code raises there because a CPU tensor met a meta one, its own
    message says so (the diagnosis ``device-ignored``,
    :data:`grader.testing.diagnosis.TELLTALES`)."""
    __tracebackhide__ = True
    described = run()
    for i, item in enumerate(described if isinstance(described, tuple) else (described,)):
        expect(isinstance(item, dict), f"{what}: returned {item}, expected a tensor", hint)
        expect(
            item["device"] == "meta",
            f"{what}: output {i} is on {item['device']}, expected the inputs' device "
            "(meta)\n  "
            + tag(
                "device-ignored",
                "your code builds its result on a device of its own (a tensor made "
                "without device=, or kept as a plain attribute that .to() does not move)",
            ),
        )


def expect_built_on_meta(
    described: Any, *, what: str, buffers: dict[str, tuple[tuple[int, ...], str]]
) -> None:
    """Fail unless a module built with ``device="meta"`` (``student.<module>.<Class>.on_meta``)
    holds every parameter and buffer there, and ``buffers`` (name: shape, dtype) among them: a
    constructor that drops its ``device=`` leaves them on the CPU."""
    __tracebackhide__ = True
    expect(isinstance(described, dict), f"{what}: built {described}, expected a module", None)
    held = {**described["parameters"], **described["buffers"]}
    for name, (shape, dtype) in buffers.items():
        got = described["buffers"].get(name)
        expect(got is not None, f"{what}: no registered buffer {name!r}", None)
        expect(
            (tuple(got["shape"]), got["dtype"]) == (shape, dtype),
            f"{what}: buffer {name!r} is {tuple(got['shape'])} {got['dtype']}, expected {shape} {dtype}",
            None,
        )
    for name, got in held.items():
        expect(
            got["device"] == "meta",
            f"{what}: {name!r} is on {got['device']}, expected the device it was asked for (meta)\n  "
            + tag(
                "device-ignored",
                "your constructor makes its tensors without device=device (the argument it was "
                "given), so they stay on the CPU",
            ),
        )
