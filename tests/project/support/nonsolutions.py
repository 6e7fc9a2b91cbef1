"""Submissions that compute no attention, built from the reference solutions, for the do-nothing tests.

Two families, each a folder of exercise modules with the reference's names, signatures, parameters and
buffers (so every structure check is satisfied and only value checks can tell them apart):

- wrapped (``zeros``, ``ones``, ``random``, ``inputs``): every function and ``forward`` runs the reference
  and then throws its result away, returning zeros / ones / random values of the right shape and dtype, or
  the first tensor input unchanged;
- substituted (``uniform``, ``uniform_masked``, ``passthrough``, ``wrong_axis``): the reference source with
  its softmax replaced by a fake one: uniform weights over every key (mean over keys), uniform over the
  keys the mask allows, the identity (each query takes its own value: ``x @ W_value`` and nothing else),
  or a softmax over the queries instead of the keys. Masks and ALiBi slopes are faked alike.
- ``structure_only``: modules whose ``named_parameters``/``named_buffers``/``state_dict`` report the
  reference's structure (a hidden, unregistered reference instance) while ``forward`` returns zeros.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MODULES = sorted(p.stem for p in (ROOT / "solutions").glob("*.py") if p.stem != "__init__")
WRAPPED = ("zeros", "ones", "random", "inputs")
SUBSTITUTED = ("uniform", "uniform_masked", "passthrough", "wrong_axis")
ALL = (*WRAPPED, *SUBSTITUTED, "structure_only")

_FAKE_RESULT = {  # how a wrapped submission replaces the reference's result `r`
    "zeros": "torch.zeros_like(r)",
    "ones": "torch.ones_like(r)",
    "random": "(torch.rand(r.shape) < 0.5) if r.dtype == torch.bool else torch.randn_like(r)",
    "inputs": "t[0] if t else torch.zeros_like(r)",  # no tensor input: nothing to return
}

_WRAP_HEADER = """import torch
from torch import nn
from . import _ref_{module} as _r


def _fake(r, t):
    if isinstance(r, tuple):
        return tuple(_fake(x, t) for x in r)
    if not isinstance(r, torch.Tensor):
        return r
    return {result}


def _tensors(args, kwargs):
    return [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
"""

_FAKE_SOFTMAX = {  # the body of `_fake_softmax(x, dim)` in a substituted submission
    "uniform": "return torch.ones_like(x) / x.shape[dim]",
    "uniform_masked": "keep = torch.isfinite(x).to(x.dtype)\n    "
    "return keep / keep.sum(dim, keepdim=True).clamp(min=1)",
    "passthrough": "L, S = x.shape[-2], x.shape[-1]\n    return torch.eye(L, S, dtype=x.dtype).expand(x.shape).clone()",
    "wrong_axis": "other = (dim - 1) % x.dim()\n    "
    "e = torch.exp(x - x.amax(other, keepdim=True))\n    return e / e.sum(other, keepdim=True)",
}

_SUB_HELPERS = """

def _fake_softmax(x, dim=-1):
    dim = dim % x.dim()
    {body}


def _fake_attend(q, k, v, mask=None, is_causal=False):
    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    L, S = q.shape[-2], k.shape[-2]
    if is_causal:
        mask = torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - L)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return _fake_softmax(s, -1) @ v
"""

_SUB_OVERRIDES = {  # functions a substituted submission defines instead of the reference's
    "softmax": "def softmax_naive(x, dim=-1):\n    return _fake_softmax(x, dim)\n\n\n"
    "def softmax_stable(x, dim=-1):\n    return _fake_softmax(x, dim)\n",
    "simple_attention": "def attention_scores(inputs):\n    return torch.zeros(*inputs.shape[:-1], inputs.shape[-2])\n",
    "masks": "def causal_mask(seq_len, device=None):\n    return {causal}\n\n\n"
    "def padding_mask(lengths, max_len):\n    return torch.ones(len(lengths), max_len, dtype=torch.bool)\n\n\n"
    "def to_additive(mask, dtype=torch.float32):\n    return torch.zeros(mask.shape, dtype=dtype)\n",
    "decaying_attention": "def alibi_slopes(num_heads):\n    return torch.full((num_heads,), 0.5)\n",
    "efficient_attention": "def sdpa_attention(query, key, value, mask=None, is_causal=False, dropout_p=0.0, "
    "training=False):\n    return _fake_attend(query, key, value, mask, is_causal)\n\n\n"
    "def flash_attention(query, key, value, is_causal=False, block_size=64):\n"
    "    return _fake_attend(query, key, value, None, is_causal)\n",
}

_STRUCTURE_CLASS = '''class {name}(nn.Module):
    """Reports the reference's parameters and buffers, computes nothing."""

    def __init__(self, *args, **kwargs):
        super().__init__()
        object.__setattr__(self, "_hidden", _r.{name}(*args, **kwargs))  # not a registered submodule

    def named_parameters(self, *args, **kwargs):
        return self._hidden.named_parameters(*args, **kwargs)

    def named_buffers(self, *args, **kwargs):
        return self._hidden.named_buffers(*args, **kwargs)

    def state_dict(self, *args, **kwargs):
        return self._hidden.state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        return self._hidden.load_state_dict(*args, **kwargs)

    def forward(self, x, *args, **kwargs):
        with torch.no_grad():
            return torch.zeros_like(self._hidden(x, *args, **kwargs))
'''


def build(kind: str, dest: Path) -> Path:
    """Write the non-solution ``kind`` (one of :data:`ALL`) into ``dest`` and return it."""
    dest.mkdir(parents=True)
    for module in MODULES:
        source = (ROOT / "solutions" / f"{module}.py").read_text()
        if kind in SUBSTITUTED:
            (dest / f"{module}.py").write_text(_substituted(kind, module, source))
            continue
        (dest / f"_ref_{module}.py").write_text(source)
        text = (
            _structure_only(module, source)
            if kind == "structure_only"
            else _wrapped(kind, module, source)
        )
        (dest / f"{module}.py").write_text(text)
    return dest


def _public(source: str) -> list[ast.FunctionDef | ast.ClassDef]:
    return [
        n
        for n in ast.parse(source).body
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")
    ]


def _wrapped(kind: str, module: str, source: str) -> str:
    lines = [_WRAP_HEADER.format(module=module, result=_FAKE_RESULT[kind])]
    for node in _public(source):
        if isinstance(node, ast.FunctionDef):
            lines.append(
                f"\ndef {node.name}(*args, **kwargs):\n"
                f"    return _fake(_r.{node.name}(*args, **kwargs), _tensors(args, kwargs))\n"
            )
        else:
            lines.append(
                f"\nclass {node.name}(_r.{node.name}):\n    def forward(self, *args, **kwargs):\n"
                "        return _fake(super().forward(*args, **kwargs), _tensors(args, kwargs))\n"
            )
    return "\n".join(lines)


def _substituted(kind: str, module: str, source: str) -> str:
    body = source.replace("torch.softmax(", "_fake_softmax(")
    helpers = _SUB_HELPERS.format(body=_FAKE_SOFTMAX[kind])
    override = _SUB_OVERRIDES.get(module)
    if override is None:
        return body + helpers
    causal = {"passthrough": "torch.eye(seq_len, dtype=torch.bool)"}.get(
        kind, "torch.ones(seq_len, seq_len, dtype=torch.bool)"
    )
    names = {n.name for n in _public(source)} - {
        n.name for n in _public(override.format(causal=causal))
    }
    kept = [ast.get_source_segment(body, n) for n in _public(body) if n.name in names]
    head = "import math\n\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
    return "\n\n\n".join([head + helpers, *kept, override.format(causal=causal)]) + "\n"


def _structure_only(module: str, source: str) -> str:
    lines = ["import torch", "from torch import nn", f"from . import _ref_{module} as _r", ""]
    for node in _public(source):
        if isinstance(node, ast.ClassDef):
            lines += ["", _STRUCTURE_CLASS.format(name=node.name)]
        else:
            lines += [
                "",
                f"def {node.name}(*args, **kwargs):",
                f"    r = _r.{node.name}(*args, **kwargs)",
                "    r = r[0] if isinstance(r, tuple) else r",
                "    return torch.zeros_like(r)"
                if module != "scaled_dot_product"
                else "    return torch.zeros_like(r), torch.zeros_like(r)",
                "",
            ]
    return "\n".join(lines)
