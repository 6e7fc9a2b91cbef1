"""Structure checks that the student's module cannot answer for itself.

A buffer the specification says appears in ``state_dict()`` is looked for there, not in
``named_buffers()`` (a buffer registered with ``persistent=False`` is in the second only).

The worker reads ``named_buffers()``, ``state_dict()`` and ``named_parameters()`` from
``nn.Module``'s own registries (:mod:`grader.inside.structure`), so an overridden method cannot
claim a buffer. A registered buffer can still be a decoy that forward never reads; this check asks
the computation instead: a buffer the output depends on changes the output when it is zeroed (a
causal mask zeroed attends to every key, or to none).
"""

from __future__ import annotations

import torch

from grader.student.proxy import Handle
from grader.testing.checks import expect
from grader.testing.diagnosis import tag


def expect_buffer_is_used(h: Handle, name: str, x: torch.Tensor, *, what: str, hint: str) -> None:
    """``h(x)`` must change when the registered buffer ``name`` is zeroed (restored afterwards)."""
    __tracebackhide__ = True
    state = h.state_dict()
    expect(
        name in state,
        f"{what}: state_dict() has keys {sorted(state)}, expected {name!r} among them\n  "
        + tag(
            "not-a-buffer",
            f"{name!r} is not in state_dict(): register it with self.register_buffer({name!r}, ...) "
            "(persistent, the default; persistent=False keeps it out of state_dict())",
        ),
    )
    saved = state[name]
    before = h(x)
    h.load_state_dict({name: torch.zeros_like(saved)}, strict=False)
    try:
        after = h(x)
    finally:
        h.load_state_dict({name: saved}, strict=False)
    same = (
        isinstance(before, torch.Tensor)
        and isinstance(after, torch.Tensor)
        and torch.equal(before, after)
    )
    expect(
        not same,
        f"{what}: zeroing the {name!r} buffer left the output unchanged, expected the output to depend "
        "on it (a buffer forward never reads is not the module's mask)\n  "
        + tag(
            "device-ignored",
            f"forward uses another {name} than the registered buffer: one built in forward (or kept in "
            "a plain attribute) stays on the default device when the module moves (.to() moves buffers "
            f"only); {hint}",
        ),
    )
