"""A module's structure read from ``nn.Module``'s own registries, never asked of the student's code.

``m.named_buffers()`` or ``m.state_dict()`` are methods the student's class can override: a
``CausalAttention`` that keeps its mask as a plain attribute and answers ``named_buffers()`` with a
made-up ``mask`` would earn the "mask is a buffer" point. So the handle's structure questions are
answered here from the registries that ``nn.Module`` itself keeps (``_parameters``, ``_buffers``,
``_modules``, ``_non_persistent_buffers_set``), read through the instance-dict descriptor captured
from ``nn.Module`` before any student code ran (a class may override ``__dict__`` or
``__getattr__``; ``type()`` and the descriptor cannot be overridden), and walked with ``dict``'s own
methods. Loading a state dict writes into the same registries, so what a test loads is what the
registries hold. The order is ``nn.Module``'s: the module itself, then its children depth first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn

from grader.protocol.errors import StudentError

_INSTANCE_DICT = vars(nn.Module)["__dict__"]  # captured at import: before the submission is loaded
_MODULE = nn.Module
_TENSOR = torch.Tensor
_REGISTRY_TYPES = (dict, OrderedDict)


def _registry(m: nn.Module, name: str) -> dict[str, Any]:
    """One of ``m``'s registries, exactly a dict (a replaced or subclassed registry could answer
    anything)."""
    found = dict.get(_INSTANCE_DICT.__get__(m, type(m)), name)
    if found is None:
        return {}
    if type(found) not in _REGISTRY_TYPES:
        raise StudentError(
            f"{type(m).__name__}.{name} is not nn.Module's own registry (a {type(found).__name__}): "
            "register parameters, buffers and submodules the usual way",
            exc_type="StructureError",
        )
    return found  # type: ignore[no-any-return]  # a dict by the check above


def _items(registry: dict[str, Any]) -> list[tuple[str, Any]]:
    return list(dict.items(registry))


def named_modules(root: nn.Module, *, every_path: bool = False) -> Iterator[tuple[str, nn.Module]]:
    """``(prefix, module)`` for ``root`` and every registered submodule in ``named_modules()``'s
    order: each module once, or (``every_path``, as ``state_dict()`` walks) under each of its names,
    a module that contains itself cut where it recurs."""
    seen: set[int] = set()
    todo: list[tuple[str, nn.Module, frozenset[int]]] = [("", root, frozenset())]
    while todo:
        prefix, module, above = todo.pop()
        key = id(module)
        if key in (above if every_path else seen):
            continue
        seen.add(key)
        yield prefix, module
        children = [
            (f"{prefix}.{name}" if prefix else name, child, above | {key})
            for name, child in _items(_registry(module, "_modules"))
            if child is not None and issubclass(type(child), _MODULE)
        ]
        todo.extend(reversed(children))


def _members(
    root: nn.Module, registry: str, every_path: bool = False
) -> Iterator[tuple[str, nn.Module, str, torch.Tensor]]:
    for prefix, module in named_modules(root, every_path=every_path):
        for name, value in _items(_registry(module, registry)):
            if value is not None and issubclass(type(value), _TENSOR):
                yield (f"{prefix}.{name}" if prefix else name), module, name, value


def named_parameters(root: nn.Module) -> dict[str, torch.Tensor]:
    """Every registered parameter, a shared one once (as ``named_parameters()``)."""
    seen: set[int] = set()
    out: dict[str, torch.Tensor] = {}
    for full, _, _, value in _members(root, "_parameters"):
        if id(value) not in seen:
            seen.add(id(value))
            out[full] = value
    return out


def named_buffers(root: nn.Module) -> dict[str, torch.Tensor]:
    """Every registered buffer, persistent or not, a shared one once (as ``named_buffers()``)."""
    seen: set[int] = set()
    out: dict[str, torch.Tensor] = {}
    for full, _, _, value in _members(root, "_buffers"):
        if id(value) not in seen:
            seen.add(id(value))
            out[full] = value
    return out


def _persistent(module: nn.Module, name: str) -> bool:
    transient = dict.get(
        _INSTANCE_DICT.__get__(module, type(module)), "_non_persistent_buffers_set"
    )
    return not (type(transient) is set and set.__contains__(transient, name))


def _slots(root: nn.Module) -> dict[str, torch.Tensor]:
    """What a state dict holds: every parameter and every persistent buffer, under each of its
    names."""
    slots = {full: value for full, _, _, value in _members(root, "_parameters", every_path=True)}
    slots.update(
        (full, value)
        for full, module, name, value in _members(root, "_buffers", every_path=True)
        if _persistent(module, name)
    )
    return slots


def state_dict(root: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters and persistent buffers, detached (as ``state_dict()``)."""
    return {name: _TENSOR.detach(value) for name, value in _slots(root).items()}


def load_state_dict(
    root: nn.Module, state: Mapping[str, Any], strict: bool = True
) -> dict[str, list[str]]:
    """Copy ``state`` into the registered tensors (as ``load_state_dict()``: missing and unexpected
    keys, an error for a wrong shape or, when ``strict``, for any key that does not match)."""
    slots = _slots(root)
    missing = [k for k in slots if k not in state]
    unexpected = [k for k in state if k not in slots]
    errors = [
        f"size mismatch for {k}: copying a param with shape {tuple(v.shape)} from checkpoint, the shape in "
        f"current model is {tuple(slots[k].shape)}."
        for k, v in state.items()
        if k in slots and tuple(slots[k].shape) != tuple(v.shape)
    ]
    if strict and unexpected:
        errors.insert(0, f"Unexpected key(s) in state_dict: {', '.join(map(repr, unexpected))}. ")
    if strict and missing:
        errors.insert(0, f"Missing key(s) in state_dict: {', '.join(map(repr, missing))}. ")
    if errors:
        raise RuntimeError(
            f"Error(s) in loading state_dict for {type(root).__name__}:\n\t" + "\n\t".join(errors)
        )
    with torch.no_grad():
        for key, value in state.items():
            if key in slots:
                _TENSOR.copy_(slots[key], value)
    return {"missing_keys": missing, "unexpected_keys": unexpected}


def transplant(root: nn.Module, params: Mapping[str, Any]) -> dict[str, list[int]]:
    """A value test's weights in one step (``grader.testing.params.transplant``): load ``params``
    where ``root`` has a slot of that name, zero each parameter named ``*bias`` that ``params``
    lacks (an absent bias counts as zero), and return every slot's shape from before. Nothing loads
    when a name both hold differs in shape: the test fails on it, as nothing can be compared."""
    slots = _slots(root)
    shapes = {name: list(value.shape) for name, value in slots.items()}
    if any(tuple(slots[k].shape) != tuple(v.shape) for k, v in params.items() if k in slots):
        return shapes
    zeros = {
        name: torch.zeros_like(value)
        for name, value in named_parameters(root).items()
        if name.endswith("bias") and name not in params
    }
    shared = {k: v for k, v in params.items() if k in slots}
    load_state_dict(root, {**shared, **zeros}, strict=False)
    return shapes
