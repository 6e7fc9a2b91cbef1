"""Rerun the held-out set 7 checks: every heldout7 bug must differ from the reference somewhere.

Each bug file replaces one module in a private copy of `solutions/`; the same probes (inputs the
exercise's docstring allows) run through the reference and through the bug. A probe "differs"
when the outputs' max abs difference exceeds 1e-5, NaN/inf appear in only one, shapes differ,
or only one raises. Run from the worktree root:
    PYTHONPATH=$PWD python tests/corpus/blind/heldout7_check.py
"""

from __future__ import annotations

import importlib
import math
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[3]  # the checkout
CORPUS = ROOT / "tests" / "corpus" / "buggy"
TOL = 1e-5
Probe = tuple[str, Callable[[Any], Any]]


def load(tmp: Path, name: str, module: str | None, bug: Path | None) -> Any:
    """Copy solutions/ to tmp/name, optionally replace `module` by `bug`, import the package."""
    dst = tmp / name
    shutil.copytree(ROOT / "solutions", dst)
    if module is not None and bug is not None:
        shutil.copy(bug, dst / f"{module}.py")
    return importlib.import_module(name)


def sub(pkg: Any, module: str) -> Any:
    return importlib.import_module(f"{pkg.__name__}.{module}")


def copy_params(src: torch.nn.Module, dst: torch.nn.Module) -> None:
    """Give dst the parameters of src where names and shapes match (as the grader transplants)."""
    theirs = dict(dst.named_parameters())
    with torch.no_grad():
        for n, p in src.named_parameters():
            if n in theirs and theirs[n].shape == p.shape:
                theirs[n].copy_(p)


def compare(a: Any, b: Any) -> tuple[float, str]:
    """(max abs diff, note); inf diff for structural or NaN/inf mismatches."""
    if isinstance(a, BaseException) or isinstance(b, BaseException):
        if isinstance(a, BaseException) and isinstance(b, BaseException):
            return 0.0, ""
        bad = a if isinstance(a, BaseException) else b
        who = "reference" if isinstance(a, BaseException) else "bug"
        return math.inf, f"{who} raises {type(bad).__name__}: {str(bad)[:60]}"
    if isinstance(a, (tuple, list)):
        if not isinstance(b, (tuple, list)) or len(a) != len(b):
            return math.inf, "different structure"
        worst = (0.0, "")
        for x, y in zip(a, b):
            d = compare(x, y)
            if d[0] > worst[0]:
                worst = d
        return worst
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor) or a.shape != b.shape:
            return math.inf, f"shape {tuple(a.shape)} vs {tuple(getattr(b, 'shape', ()))}"
        if a.dtype != b.dtype:
            return math.inf, f"dtype {a.dtype} vs {b.dtype}"
        if a.numel() == 0:
            return 0.0, ""
        x, y = a.double(), b.double()
        fa, fb = torch.isfinite(x), torch.isfinite(y)
        if not torch.equal(fa, fb) or not torch.equal(
            x[~fa].nan_to_num(0, 1, -1), y[~fb].nan_to_num(0, 1, -1)
        ):
            return math.inf, "non-finite values differ (NaN/inf)"
        if fa.any():
            return float((x[fa] - y[fa]).abs().max()), ""
        return 0.0, ""
    return (0.0, "") if a == b else (math.inf, f"{a!r} vs {b!r}")


def run(fn: Callable[[Any], Any], pkg: Any) -> Any:
    torch.manual_seed(1234)
    try:
        with torch.no_grad() if getattr(fn, "no_grad", True) else torch.enable_grad():
            return fn(pkg)
    except Exception as exc:  # noqa: BLE001 -- a bug may raise anything: a behaviour difference
        return exc


def g(*shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)


# ---------------------------------------------------------------------------------------------
# probes per exercise; modules with weights are built twice and the reference's weights copied


def pair(pkg: Any, module: str, cls: str, *args: Any, **kw: Any) -> torch.nn.Module:
    """Build REF's and pkg's module with the same arguments; pkg's gets REF's parameters."""
    torch.manual_seed(0)
    ref = getattr(sub(REF, module), cls)(*args, **kw)
    torch.manual_seed(0)
    mine = getattr(sub(pkg, module), cls)(*args, **kw)
    copy_params(ref, mine)
    return mine


def probes_softmax() -> list[Probe]:
    x = g(5, 5, seed=1) * 3
    x3 = g(2, 3, 4, seed=2)
    wide = g(3, 6, seed=3) + torch.tensor([[0.0], [-1000.0], [1000.0]])
    out: list[Probe] = []
    for fn in ("softmax_naive", "softmax_stable"):
        out += [
            (f"{fn} (5,5) dim=-1", lambda p, fn=fn: getattr(sub(p, "softmax"), fn)(x)),
            (f"{fn} (5,5) dim=0", lambda p, fn=fn: getattr(sub(p, "softmax"), fn)(x, dim=0)),
            (f"{fn} (2,3,4) dim=1", lambda p, fn=fn: getattr(sub(p, "softmax"), fn)(x3, dim=1)),
        ]
    out += [
        (
            "softmax_stable rows offset 0/-1000/+1000",
            lambda p: sub(p, "softmax").softmax_stable(wide),
        ),
        (
            "softmax_stable +-1000 along dim=0",
            lambda p: sub(p, "softmax").softmax_stable(wide.T, dim=0),
        ),
        ("softmax_stable float16", lambda p: sub(p, "softmax").softmax_stable(x.half() * 5)),
    ]
    return out


def probes_simple_attention() -> list[Probe]:
    x2, x3 = g(6, 3, seed=4), g(2, 6, 3, seed=5)
    out: list[Probe] = []
    for name, x in (("(6,3)", x2), ("(2,6,3)", x3)):
        out += [
            (
                f"attention_scores {name}",
                lambda p, x=x: sub(p, "simple_attention").attention_scores(x),
            ),
            (
                f"attention_weights {name}",
                lambda p, x=x: sub(p, "simple_attention").attention_weights(
                    x @ x.transpose(-2, -1)
                ),
            ),
            (
                f"context_vectors {name}",
                lambda p, x=x: sub(p, "simple_attention").context_vectors(x),
            ),
        ]
    return out


def probes_scaled_dot_product() -> list[Probe]:
    q, k, v = g(2, 3, 5, 8, seed=6), g(2, 3, 7, 8, seed=7), g(2, 3, 7, 6, seed=8)
    bmask = g(5, 7, seed=9) > 0
    bmask[2] = False  # a fully masked query row
    bmask[:, 0] |= torch.arange(5) != 2
    fmask = -0.5 * (torch.arange(5)[:, None] - torch.arange(7)[None, :]).abs().float()  # ALiBi-like

    def f(p: Any, **kw: Any) -> Any:
        return sub(p, "scaled_dot_product").scaled_dot_product_attention(q, k, v, **kw)

    return [
        ("no mask, Ev=6 != E=8", lambda p: f(p)),
        ("bool mask with a fully masked row", lambda p: f(p, mask=bmask)),
        ("float ALiBi-like bias", lambda p: f(p, mask=fmask)),
        ("scale=0.3", lambda p: f(p, scale=0.3)),
        ("dropout 0.5 training=False", lambda p: f(p, dropout_p=0.5)),
        ("dropout 0.5 training=True (same seed)", lambda p: f(p, dropout_p=0.5, training=True)),
    ]


def probes_masks() -> list[Probe]:
    lengths = torch.tensor([3, 0, 5])
    b = g(4, 6, seed=10) > 0
    return [
        ("causal_mask(5)", lambda p: sub(p, "masks").causal_mask(5)),
        ("padding_mask([3,0,5], 5)", lambda p: sub(p, "masks").padding_mask(lengths, 5)),
        ("to_additive float32", lambda p: sub(p, "masks").to_additive(b)),
        ("to_additive float16", lambda p: sub(p, "masks").to_additive(b, torch.float16)),
    ]


def probes_self_attention() -> list[Probe]:
    x2, x3 = g(6, 3, seed=11), g(2, 6, 3, seed=12)
    out: list[Probe] = []
    for name, x in (("(6,3)", x2), ("(2,6,3)", x3)):
        out += [
            (
                f"V1(3,4) {name}",
                lambda p, x=x: pair(p, "self_attention", "SelfAttentionV1", 3, 4)(x),
            ),
            (
                f"V2(3,4) {name}",
                lambda p, x=x: pair(p, "self_attention", "SelfAttentionV2", 3, 4)(x),
            ),
            (
                f"V2(3,4,bias) {name}",
                lambda p, x=x: pair(p, "self_attention", "SelfAttentionV2", 3, 4, True)(x),
            ),
        ]
    return out


def _train(m: torch.nn.Module, x: torch.Tensor, *more: torch.Tensor) -> torch.Tensor:
    m.train()
    torch.manual_seed(7)
    return m(x, *more)


def probes_causal_attention() -> list[Probe]:
    x6, x8 = g(2, 6, 5, seed=13), g(2, 8, 5, seed=14)

    def mk(p: Any) -> torch.nn.Module:
        return pair(p, "causal_attention", "CausalAttention", 5, 4, 8, 0.5).eval()

    return [
        ("eval T=6 < context 8", lambda p: mk(p)(x6)),
        ("eval T=8", lambda p: mk(p)(x8)),
        ("train dropout 0.5 T=8 (same seed)", lambda p: _train(mk(p), x8)),
    ]


def probes_multihead_attention() -> list[Probe]:
    x = g(2, 6, 5, seed=15)

    def wrap(p: Any, d: float) -> torch.nn.Module:
        return pair(p, "multihead_attention", "MultiHeadAttentionWrapper", 5, 4, 8, d, 3).eval()

    def mha(p: Any, d: float) -> torch.nn.Module:
        return pair(p, "multihead_attention", "MultiHeadAttention", 5, 8, 8, d, 2).eval()

    return [
        ("wrapper eval T=6", lambda p: wrap(p, 0.0)(x)),
        ("MHA(d_out=8, H=2) eval T=6", lambda p: mha(p, 0.0)(x)),
        ("MHA train dropout 0.3", lambda p: _train(mha(p, 0.3), x)),
    ]


def probes_cross_attention() -> list[Probe]:
    x, c, c3 = g(2, 3, 8, seed=16), g(2, 5, 8, seed=17), g(2, 3, 8, seed=18)
    pad = torch.tensor([[True, True, True, False, False], [True] * 5])

    def mk(p: Any, d: float = 0.0) -> torch.nn.Module:
        return pair(p, "cross_attention", "CrossAttention", 8, 2, d).eval()

    return [
        ("L=3, S=5, no mask", lambda p: mk(p)(x, c)),
        ("L=3, S=5, padding mask", lambda p: mk(p)(x, c, pad)),
        ("L=S=3, no mask", lambda p: mk(p)(x, c3)),
        ("train dropout 0.3", lambda p: _train(mk(p, 0.3), x, c)),
    ]


def probes_decaying_attention() -> list[Probe]:
    x = g(2, 5, 8, seed=19)
    out: list[Probe] = [
        (
            "DecayingAttention(8, 2) L=5",
            lambda p: pair(p, "decaying_attention", "DecayingAttention", 8, 2)(x),
        )
    ]
    for n in (1, 2, 3, 4, 6, 8, 12, 16):
        out.append(
            (f"alibi_slopes({n})", lambda p, n=n: sub(p, "decaying_attention").alibi_slopes(n))
        )
    return out


def shifted(seed: int, L: int, S: int, shift: float) -> tuple[torch.Tensor, ...]:
    """q, k, v whose every score is lowered by the same constant (an extra feature q=a, k=-a)."""
    q, k, v = g(1, 2, L, 7, seed=seed), g(1, 2, S, 7, seed=seed + 1), g(1, 2, S, 5, seed=seed + 2)
    a = math.sqrt(shift * math.sqrt(8))
    q = torch.cat([q, torch.full((1, 2, L, 1), a)], -1)
    k = torch.cat([k, torch.full((1, 2, S, 1), -a)], -1)
    return q, k, v


def probes_efficient_attention() -> list[Probe]:
    q, k, v = g(2, 2, 3, 8, seed=20), g(2, 2, 5, 8, seed=21), g(2, 2, 5, 6, seed=22)
    ql = g(2, 2, 7, 8, seed=23)
    bm = g(3, 5, seed=24) > -0.5
    bm[:, 0] = True
    sq, sk, sv = shifted(25, 4, 9, 200.0)

    def sd(p: Any, *a: Any, **kw: Any) -> Any:
        return sub(p, "efficient_attention").sdpa_attention(*a, **kw)

    def fl(p: Any, *a: Any, **kw: Any) -> Any:
        return sub(p, "efficient_attention").flash_attention(*a, **kw)

    return [
        ("sdpa causal L=3 < S=5", lambda p: sd(p, q, k, v, is_causal=True)),
        ("sdpa bool mask", lambda p: sd(p, q, k, v, mask=bm)),
        ("sdpa dropout 0.5 training=False", lambda p: sd(p, q, k, v, dropout_p=0.5)),
        ("flash non-causal block 2", lambda p: fl(p, q, k, v, block_size=2)),
        ("flash causal L=3 < S=5 block 2", lambda p: fl(p, q, k, v, is_causal=True, block_size=2)),
        ("flash causal L=7 > S=5 block 64", lambda p: fl(p, ql, k, v, is_causal=True)),
        ("flash scores shifted by -200", lambda p: fl(p, sq, sk, sv, block_size=3)),
    ]


def probes_rope() -> list[Probe]:
    x = g(2, 2, 6, 8, seed=26)
    pos = torch.arange(10, 16)
    pos2 = torch.stack([torch.arange(6), torch.arange(3, 9)])

    def tabs(p: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return sub(p, "rope").rope_frequencies(8, 32)

    def ap(p: Any, fn: str, *a: Any) -> Any:
        c, s = tabs(p)
        return getattr(sub(p, "rope"), fn)(x, c, s, *a)

    out: list[Probe] = [
        ("rope_frequencies(8, 32)", lambda p: tabs(p)),
        ("rope_frequencies(64, 4096)", lambda p: sub(p, "rope").rope_frequencies(64, 4096)),
        (
            "rope_frequencies(8, 2048, dtype=float16)",
            lambda p: sub(p, "rope").rope_frequencies(8, 2048, dtype=torch.float16),
        ),
    ]
    for fn in ("apply_rope", "apply_rope_interleaved"):
        out += [
            (f"{fn} positions None", lambda p, fn=fn: ap(p, fn)),
            (f"{fn} positions 10..15", lambda p, fn=fn: ap(p, fn, pos)),
            (f"{fn} positions (B, T)", lambda p, fn=fn: ap(p, fn, pos2)),
        ]
    return out


def probes_grouped_query_attention() -> list[Probe]:
    x = g(2, 6, 16, seed=27)

    def mk(p: Any, hkv: int, **kw: Any) -> torch.nn.Module:
        return pair(p, "grouped_query_attention", "GroupedQueryAttention", 16, 4, hkv, **kw).eval()

    return [
        ("H=4, Hkv=2", lambda p: mk(p, 2)(x)),
        ("H=4, Hkv=1 (MQA)", lambda p: mk(p, 1)(x)),
        ("H=4, Hkv=4 (MHA)", lambda p: mk(p, 4)(x)),
        ("H=4, Hkv=2, rope", lambda p: mk(p, 2, rope=True, max_len=32)(x)),
        (
            "H=4, Hkv=2, rope base 500000",
            lambda p: mk(p, 2, rope=True, max_len=32, rope_base=500000.0)(x),
        ),
    ]


def probes_kv_cache() -> list[Probe]:
    x = g(2, 6, 16, seed=28)
    x2 = g(2, 3, 16, seed=29)

    def go(p: Any, chunk: int, max_len: int = 32, again: bool = False) -> Any:
        kv = sub(p, "kv_cache")
        torch.manual_seed(0)
        ref_model = sub(REF, "grouped_query_attention").GroupedQueryAttention(
            16, 4, 2, rope=True, max_len=32
        )
        model = kv.GroupedQueryAttention(16, 4, 2, rope=True, max_len=32)
        copy_params(ref_model, model)
        model.eval()
        cache = kv.KVCache(2, 2, max_len, 4)
        out = kv.decode(model, cache, x, chunk)
        if again:
            out = torch.cat([out, kv.decode(model, cache, x2, chunk)], dim=1)
        return out

    return [
        ("decode chunk 1", lambda p: go(p, 1)),
        ("decode chunk 4 (last shorter)", lambda p: go(p, 4)),
        ("decode chunk 2, then a continuation", lambda p: go(p, 2, again=True)),
        ("decode filling max_len=6 exactly", lambda p: go(p, 3, max_len=6)),
    ]


def probes_sliding_window() -> list[Probe]:
    q, k, v = g(1, 2, 10, 4, seed=30), g(1, 2, 10, 4, seed=31), g(1, 2, 10, 4, seed=32)

    def roll(p: Any, step: int) -> Any:
        sw = sub(p, "sliding_window")
        cache = sw.RollingKVCache(1, 2, 3, 4)
        outs = [
            cache(q[..., i : i + step, :], k[..., i : i + step, :], v[..., i : i + step, :])
            for i in range(0, 10, step)
        ]
        return torch.cat(outs, dim=-2)

    return [
        ("sliding_window_mask(6, 3)", lambda p: sub(p, "sliding_window").sliding_window_mask(6, 3)),
        (
            "sliding_window_mask(3, 2, kv_len=7)",
            lambda p: sub(p, "sliding_window").sliding_window_mask(3, 2, kv_len=7),
        ),
        (
            "banded_attention T=10 window 3 block 4",
            lambda p: sub(p, "sliding_window").banded_attention(q, k, v, 3, block_size=4),
        ),
        ("RollingKVCache(window 3) token by token", lambda p: roll(p, 1)),
        ("RollingKVCache(window 3) chunks of 2", lambda p: roll(p, 2)),
    ]


def _grads(p: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: Any) -> Any:
    qq, kk, vv = (t.clone().requires_grad_(True) for t in (q, k, v))
    out = sub(p, "flash_backward").flash_attention(qq, kk, vv, **kw)
    out.backward(g(*out.shape, seed=99))
    return out.detach(), qq.grad, kk.grad, vv.grad


def probes_flash_backward() -> list[Probe]:
    q, k, v = g(1, 2, 5, 8, seed=33), g(1, 2, 7, 8, seed=34), g(1, 2, 7, 6, seed=35)
    ql = g(1, 2, 9, 8, seed=36)
    climb_k = k + torch.arange(7).view(1, 1, 7, 1) * 0.5  # later tiles raise the running max
    probes: list[Probe] = [
        (
            "flash_forward L=5 S=7 block 3",
            lambda p: sub(p, "flash_backward").flash_forward(q, k, v, block_size=3),
        ),
        ("grads non-causal block 3", lambda p: _grads(p, q, k, v, block_size=3)),
        (
            "grads causal L=9 > S=7 block 2",
            lambda p: _grads(p, ql, k, v, is_causal=True, block_size=2),
        ),
        ("grads climbing keys block 2", lambda p: _grads(p, q.abs(), climb_k, v, block_size=2)),
    ]
    for _, fn in probes[1:]:
        fn.no_grad = False  # type: ignore[attr-defined]
    return probes


REF: Any = None


def main() -> int:
    global REF
    files = sorted(CORPUS.glob("*/heldout7_*.py"))
    tmp = Path(tempfile.mkdtemp(prefix="heldout7_"))
    sys.path.insert(0, str(tmp))
    REF = load(tmp, "h7ref", None, None)
    differ = 0
    for i, bug in enumerate(files):
        exercise = bug.parent.name
        pkg = load(tmp, f"h7bug{i}", exercise, bug)
        probes = globals()[f"probes_{exercise}"]()
        hits = []
        for name, fn in probes:
            d, note = compare(run(fn, REF), run(fn, pkg))
            if d > TOL:
                hits.append((name, d, note))
        if hits:
            differ += 1
            name, d, note = max(hits, key=lambda h: h[1])
            first = hits[0][0]
            what = note or f"max abs diff {d:.3g}"
            print(
                f"DIFFERS\t{exercise}\t{bug.name}\t{len(hits)}/{len(probes)} probes\tfirst: {first}\t"
                f"worst: {name}: {what}"
            )
        else:
            print(f"SAME\t{exercise}\t{bug.name}\t0/{len(probes)} probes")
    shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"SUMMARY: {differ}/{len(files)} heldout7 bugs differ from the reference "
        f"({len(files) - differ} identical on every probe)"
    )
    return 0 if differ == len(files) else 1


if __name__ == "__main__":
    raise SystemExit(main())
