"""Held-out set 8 checks: every heldout8 bug must differ from the reference somewhere.

Each bug file replaces one module in a private copy of `solutions/`; the same probes (inputs the
exercise's docstring allows) run through the reference and through the bug. A probe "differs"
when the outputs' max abs difference exceeds 1e-5, NaN/inf appear in only one, shapes differ,
or only one raises. Run from the worktree root:
    PYTHONPATH=$PWD python tests/corpus/blind/heldout8_check.py [--solutions PATH] [--json results.json]
Adapted from tests/corpus/blind/heldout7_check.py, with extra probes (gradients, train mode, float16,
leading dims, non-contiguous inputs, longer sequences) where a bug could hide.
"""

from __future__ import annotations

import importlib
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[3]  # the checkout
SOLUTIONS = ROOT / "solutions"  # overridden by --solutions
CORPUS = ROOT / "tests" / "corpus" / "buggy"  # one folder per exercise
TOL = 1e-5
Probe = tuple[str, Callable[[Any], Any]]


# set 7's harness and probes, unchanged (REF is set there too, for its pair())
sys.path.insert(0, str(Path(__file__).resolve().parent))
import heldout7_check as base  # noqa: E402
from heldout7_check import (  # noqa: E402
    _grads,
    _train,
    compare,
    copy_params,
    g,
    pair,
    run,
    sub,
)


def load(tmp: Path, name: str, module: str | None, bug: Path | None) -> Any:
    """Copy solutions/ to tmp/name, optionally replace `module` by `bug`, import the package."""
    dst = tmp / name
    shutil.copytree(SOLUTIONS, dst)
    if module is not None and bug is not None:
        shutil.copy(bug, dst / f"{module}.py")
    return importlib.import_module(name)


# ---------------------------------------------------------------------------------------------
# extra probes of set 8: gradients, train mode, float16, leading dims, non-contiguous inputs


def _nograd(probes: list[Probe]) -> list[Probe]:
    for _, fn in probes:
        fn.no_grad = False  # type: ignore[attr-defined]
    return probes


def _grad_of(out: torch.Tensor, *leaves: torch.Tensor) -> Any:
    out.backward(g(*out.shape, seed=98).to(out.dtype))
    return (out.detach(),) + tuple(t.grad for t in leaves)


def extra_softmax() -> list[Probe]:
    x46 = g(4, 6, seed=40) * 4
    x2 = g(2, 3, 5, seed=41)
    return [
        ("softmax_stable (4,6) dim=-1", lambda p: sub(p, "softmax").softmax_stable(x46)),
        ("softmax_naive (2,3,5) dim=-1", lambda p: sub(p, "softmax").softmax_naive(x2)),
        ("softmax_stable float16 (2,3,5) dim=1", lambda p: sub(p, "softmax").softmax_stable(x2.half() * 3, dim=1)),
    ]


def extra_simple_attention() -> list[Probe]:
    x = g(3, 2, 5, 4, seed=42)  # two leading dims
    return [("context_vectors (3,2,5,4)", lambda p: sub(p, "simple_attention").context_vectors(x))]


def extra_scaled_dot_product() -> list[Probe]:
    q, k, v = g(2, 2, 4, 8, seed=43), g(2, 2, 6, 8, seed=44), g(2, 2, 6, 3, seed=45)
    pad = torch.tensor([[True] * 6, [True] * 3 + [False] * 3]).view(2, 1, 1, 6)

    def grads(p: Any) -> Any:
        qq, kk, vv = (t.clone().requires_grad_(True) for t in (q, k, v))
        out, _ = sub(p, "scaled_dot_product").scaled_dot_product_attention(qq, kk, vv, mask=pad)
        return _grad_of(out, qq, kk, vv)

    return [
        ("float16 with padding mask", lambda p: sub(p, "scaled_dot_product").scaled_dot_product_attention(
            q.half(), k.half(), v.half(), mask=pad)),
        ("non-contiguous key (transposed view)", lambda p: sub(p, "scaled_dot_product").scaled_dot_product_attention(
            q, k.transpose(-2, -1).contiguous().transpose(-2, -1), v)),
    ] + _nograd([("gradients with padding mask", grads)])


def extra_masks() -> list[Probe]:
    return [
        ("causal_mask(1)", lambda p: sub(p, "masks").causal_mask(1)),
        ("padding_mask([2,4], 7)", lambda p: sub(p, "masks").padding_mask(torch.tensor([2, 4]), 7)),
        ("to_additive of causal 4", lambda p: sub(p, "masks").to_additive(torch.ones(4, 4, dtype=torch.bool).tril())),
    ]


def extra_self_attention() -> list[Probe]:
    x = g(3, 4, 5, seed=46)
    return [("V1(5,6) (3,4,5)", lambda p: pair(p, "self_attention", "SelfAttentionV1", 5, 6)(x))]


def extra_causal_attention() -> list[Probe]:
    x = g(3, 5, 5, seed=47)

    def grads(p: Any) -> Any:
        m = pair(p, "causal_attention", "CausalAttention", 5, 4, 8, 0.0).eval()
        xx = x.clone().requires_grad_(True)
        return _grad_of(m(xx), xx)

    return [("B=3 T=5 dropout 0 eval", lambda p: pair(p, "causal_attention", "CausalAttention", 5, 4, 8, 0.0).eval()(x))] \
        + _nograd([("input gradients T=5", grads)])


def extra_multihead_attention() -> list[Probe]:
    x = g(2, 7, 6, seed=48)
    return [
        ("MHA(d_out=8, H=4) T=7", lambda p: pair(p, "multihead_attention", "MultiHeadAttention", 6, 8, 8, 0.0, 4).eval()(x)),
        ("wrapper H=2 d_out=3 T=7", lambda p: pair(p, "multihead_attention", "MultiHeadAttentionWrapper", 6, 3, 8, 0.0, 2).eval()(x)),
        ("wrapper H=2 d_out=4 T=7", lambda p: pair(p, "multihead_attention", "MultiHeadAttentionWrapper", 6, 4, 8, 0.0, 2).eval()(x)),
    ]


def extra_cross_attention() -> list[Probe]:
    x, c = g(2, 4, 8, seed=49), g(2, 4, 8, seed=50)
    pad = torch.tensor([[True, True, False, False], [True, False, False, False]])
    return [("L=S=4 padding, H=4", lambda p: pair(p, "cross_attention", "CrossAttention", 8, 4).eval()(x, c, pad))]


def extra_decaying_attention() -> list[Probe]:
    x = g(1, 7, 12, seed=51)
    return [("DecayingAttention(12, 3) L=7", lambda p: pair(p, "decaying_attention", "DecayingAttention", 12, 3)(x))]


def extra_efficient_attention() -> list[Probe]:
    q, k, v = g(1, 2, 6, 8, seed=52), g(1, 2, 6, 8, seed=53), g(1, 2, 6, 4, seed=54)
    qt = g(1, 6, 2, 8, seed=55).transpose(1, 2)  # non-contiguous

    def fl(p: Any, *a: Any, **kw: Any) -> Any:
        return sub(p, "efficient_attention").flash_attention(*a, **kw)

    def grads(p: Any) -> Any:
        qq, kk, vv = (t.clone().requires_grad_(True) for t in (q, k, v))
        return _grad_of(fl(p, qq, kk, vv, is_causal=True, block_size=4), qq, kk, vv)

    return [
        ("flash float16 causal block 4", lambda p: fl(p, q.half(), k.half(), v.half(), is_causal=True, block_size=4)),
        ("flash non-contiguous q", lambda p: fl(p, qt, k, v, block_size=5)),
        ("sdpa causal L=S=6", lambda p: sub(p, "efficient_attention").sdpa_attention(q, k, v, is_causal=True)),
    ] + _nograd([("flash gradients causal block 4", grads)])


def extra_rope() -> list[Probe]:
    x = g(1, 3, 5, 16, seed=56)
    xt = g(1, 5, 3, 16, seed=57).transpose(1, 2)

    def ap(p: Any, fn: str, x: torch.Tensor, *a: Any) -> Any:
        c, s = sub(p, "rope").rope_frequencies(16, 64)
        return getattr(sub(p, "rope"), fn)(x, c, s, *a)

    return [
        ("apply_rope float16 positions 40..44", lambda p: ap(p, "apply_rope", x.half(), torch.arange(40, 45))),
        ("apply_rope non-contiguous", lambda p: ap(p, "apply_rope", xt)),
        ("apply_rope_interleaved head_dim 16", lambda p: ap(p, "apply_rope_interleaved", x)),
    ]


def extra_grouped_query_attention() -> list[Probe]:
    x = g(3, 5, 24, seed=58)

    def mk(p: Any, **kw: Any) -> torch.nn.Module:
        return pair(p, "grouped_query_attention", "GroupedQueryAttention", 24, 6, 3, **kw)

    return [
        ("H=6, Hkv=3, rope, B=3", lambda p: mk(p, rope=True, max_len=16).eval()(x)),
        ("H=6, Hkv=3, train dropout 0.4", lambda p: _train(mk(p, dropout=0.4), x)),
    ]


def extra_kv_cache() -> list[Probe]:
    x = g(2, 5, 16, seed=59)

    def go(p: Any, chunk: int) -> Any:
        kv = sub(p, "kv_cache")
        torch.manual_seed(0)
        ref_model = sub(REF, "grouped_query_attention").GroupedQueryAttention(16, 4, 1, rope=False, max_len=32)
        model = kv.GroupedQueryAttention(16, 4, 1, rope=False, max_len=32)
        copy_params(ref_model, model)
        model.eval()
        return kv.decode(model, kv.KVCache(2, 1, 8, 4), x, chunk)

    return [
        ("MQA no rope, chunk 2", lambda p: go(p, 2)),
        ("MQA no rope, chunk 5 (one chunk)", lambda p: go(p, 5)),
    ]


def extra_sliding_window() -> list[Probe]:
    q, k, v = g(2, 1, 9, 4, seed=60), g(2, 1, 9, 4, seed=61), g(2, 1, 9, 4, seed=62)

    def roll(p: Any, w: int, step: int) -> Any:
        cache = sub(p, "sliding_window").RollingKVCache(2, 1, w, 4)
        return torch.cat([cache(q[..., i:i + step, :], k[..., i:i + step, :], v[..., i:i + step, :])
                          for i in range(0, 9, step)], dim=-2)

    return [
        ("banded float16 window 4 block 3", lambda p: sub(p, "sliding_window").banded_attention(
            q.half(), k.half(), v.half(), 4, block_size=3)),
        ("banded window 1", lambda p: sub(p, "sliding_window").banded_attention(q, k, v, 1, block_size=4)),
        ("RollingKVCache window 2 chunks of 3", lambda p: roll(p, 2, 3)),
        ("RollingKVCache window 4 token by token", lambda p: roll(p, 4, 1)),
    ]


def extra_flash_backward() -> list[Probe]:
    q, k, v = g(2, 1, 4, 8, seed=63), g(2, 1, 9, 8, seed=64), g(2, 1, 9, 5, seed=65)
    return _nograd([
        ("grads causal L=4 < S=9 block 4", lambda p: _grads(p, q, k, v, is_causal=True, block_size=4)),
        ("grads float16 non-causal block 4", lambda p: _grads(p, q.half(), k.half(), v.half(), block_size=4)),
        ("grads single tile block 64", lambda p: _grads(p, q, k, v)),
    ])


REF: Any = None


def main() -> int:
    global REF
    import argparse
    import json

    global SOLUTIONS
    ap = argparse.ArgumentParser()
    ap.add_argument("--solutions", type=Path, default=SOLUTIONS)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    SOLUTIONS = args.solutions.resolve()
    files = sorted(CORPUS.glob("*/heldout8_*.py"))
    tmp = Path(tempfile.mkdtemp(prefix="heldout8_"))
    sys.path.insert(0, str(tmp))
    REF = base.REF = load(tmp, "h8ref", None, None)
    differ = 0
    results = []
    for i, bug in enumerate(files):
        exercise = bug.parent.name
        pkg = load(tmp, f"h8bug{i}", exercise, bug)
        probes = getattr(base, f"probes_{exercise}")() + globals()[f"extra_{exercise}"]()
        hits = []
        for name, fn in probes:
            d, note = compare(run(fn, REF), run(fn, pkg))
            if d > TOL:
                hits.append((name, d, note))
        rec = {"exercise": exercise, "file": bug.name, "probes": len(probes), "hits": len(hits)}
        if hits:
            differ += 1
            name, d, note = max(hits, key=lambda h: h[1])
            first = hits[0]
            what = note or f"max abs diff {d:.3g}"
            first_what = first[2] or f"max abs diff {first[1]:.3g}"
            rec.update(first=first[0], first_what=first_what, worst=name, worst_what=what,
                       all=[h[0] for h in hits])
            print(f"DIFFERS\t{exercise}\t{bug.name}\t{len(hits)}/{len(probes)} probes\tfirst: {first[0]} "
                  f"({first_what})\tworst: {name}: {what}")
        else:
            print(f"SAME\t{exercise}\t{bug.name}\t0/{len(probes)} probes")
        results.append(rec)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"SUMMARY: {differ}/{len(files)} heldout8 bugs differ from the reference "
          f"({len(files) - differ} identical on every probe)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if differ == len(files) else 1


if __name__ == "__main__":
    raise SystemExit(main())
