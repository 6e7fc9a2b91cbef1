"""Rerun the held-out set 6 checks: every bug module must differ from the reference on an allowed input.

For each `tests/corpus/buggy/<exercise>/heldout6_*.py`, copy `solutions/` to a temporary package, replace the
exercise's module with the bug, run the exercise's probes (normal float32 inputs unless a probe says otherwise) on
both packages and print the largest absolute difference and the probe where it occurs, or the behaviour that
differs (an exception the reference does not raise). Usage: PYTHONPATH=$PWD python tests/corpus/blind/heldout6_check.py [--tsv]
"""

from __future__ import annotations

import importlib
import math
import shutil
import sys
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[3]  # the checkout
Probe = Callable[[Any, str], dict[str, Any]]


def fill_params(mod: torch.nn.Module) -> torch.nn.Module:
    """Give every parameter entry of the state_dict deterministic values chosen by its name (shared ones: last)."""
    buffers = {n for n, _ in mod.named_buffers()}
    with torch.no_grad():
        for name, t in mod.state_dict(keep_vars=True).items():
            if name in buffers or not t.is_floating_point():
                continue
            g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
            vals = torch.randn(t.shape, generator=g, dtype=torch.float64) * 0.5
            if name.endswith("gamma"):
                vals = vals.abs() + 0.2
            t.copy_(vals.to(t.dtype))
    return mod


def call(f: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """f(*args, **kw), or the note 'raises <type>' so that one failing call does not hide the others."""
    try:
        return f(*args, **kw)
    except Exception as e:  # noqa: BLE001 - an exception is a behaviour to compare
        return f"raises {type(e).__name__}"


def rnd(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


# ----------------------------------------------------------------------------------------------------------- probes
def p_softmax(m: Any, pkg: str) -> dict[str, Any]:
    x2, x3 = rnd(4, 4), rnd(3, 4, 5, seed=1)
    big = torch.tensor([[1000.0, 999.0, 998.0], [-1000.0, -999.0, -1000.5]])
    out: dict[str, Any] = {}
    for fn in ("softmax_naive", "softmax_stable"):
        f = getattr(m, fn)
        out[f"{fn}(randn(4,4))"] = call(f, x2)
        for d in (0, 1, -1):
            out[f"{fn}(randn(3,4,5), dim={d})"] = call(f, x3, dim=d)
    out["softmax_stable(+-1000 rows)"] = m.softmax_stable(big)
    out["softmax_stable(randn fp16)"] = m.softmax_stable(
        rnd(3, 5, seed=2, dtype=torch.float16)
    ).float()
    return out


def p_simple(m: Any, pkg: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, x in (("(6,3)", rnd(6, 3)), ("(2,6,3)", rnd(2, 6, 3, seed=1))):
        out[f"attention_scores{name}"] = call(m.attention_scores, x)
        out[f"context_vectors{name}"] = call(m.context_vectors, x)
    out["attention_weights(randn(6,6))"] = m.attention_weights(rnd(6, 6, seed=2))
    out["attention_weights(randn(2,6,6))"] = m.attention_weights(rnd(2, 6, 6, seed=3))
    return out


def p_sdpa(m: Any, pkg: str) -> dict[str, Any]:
    q, k, v = rnd(2, 3, 4, 8), rnd(2, 3, 5, 8, seed=1), rnd(2, 3, 5, 6, seed=2)
    bmask = rnd(4, 5, seed=3) > 0
    bmask[1] = False  # one query with no key
    i, j = torch.arange(4)[:, None], torch.arange(5)[None, :]
    alibi = -0.7 * (i - j).abs().float()
    f = m.scaled_dot_product_attention
    out: dict[str, Any] = {}
    for name, kw in (
        ("no mask", {}),
        ("bool mask with an all-False row", {"mask": bmask}),
        ("float ALiBi bias mask", {"mask": alibi}),
        ("scale=0.3", {"scale": 0.3}),
    ):
        o, w = f(q, k, v, **kw)
        out[f"{name}: output"], out[f"{name}: weights"] = o, w
    torch.manual_seed(7)
    o, w = f(q, k, v, dropout_p=0.5, training=True)
    out["dropout_p=0.5 training: output"], out["dropout_p=0.5 training: weights"] = o, w
    out["dropout_p=0.5 training: output - weights @ v"] = o - w @ v
    return out


def p_masks(m: Any, pkg: str) -> dict[str, Any]:
    out: dict[str, Any] = {f"causal_mask({t})": m.causal_mask(t) for t in (1, 4, 6)}
    out["padding_mask([0,3,5], 5)"] = m.padding_mask(torch.tensor([0, 3, 5]), 5)
    keep = rnd(3, 4) > 0
    keep[0] = False
    out["to_additive(bool (3,4))"] = m.to_additive(keep)
    out["to_additive(bool (3,4), float64)"] = m.to_additive(keep, torch.float64)
    return out


def p_self(m: Any, pkg: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for cls, kw in (
        ("SelfAttentionV1", {}),
        ("SelfAttentionV2", {}),
        ("SelfAttentionV2", {"qkv_bias": True}),
    ):
        mod = fill_params(getattr(m, cls)(3, 2, **kw))
        for name, x in (("(6,3)", rnd(6, 3)), ("(2,6,3)", rnd(2, 6, 3, seed=1))):
            out[f"{cls}(3, 2, {kw}) on {name}"] = mod(x)
    return out


def p_causal(m: Any, pkg: str) -> dict[str, Any]:
    x = rnd(2, 6, 3)
    mod = fill_params(m.CausalAttention(3, 4, 8, 0.0)).eval()
    out: dict[str, Any] = {
        "CausalAttention(3,4,ctx=8) eval, T=6": mod(x),
        "T=8": mod(rnd(2, 8, 3, seed=1)),
    }
    mod = fill_params(m.CausalAttention(3, 4, 8, 0.5)).train()
    torch.manual_seed(7)
    out["dropout=0.5 train, T=6"] = mod(x)
    return out


def p_mha(m: Any, pkg: str) -> dict[str, Any]:
    x = rnd(2, 6, 3)
    w = fill_params(m.MultiHeadAttentionWrapper(3, 2, 8, 0.0, num_heads=3)).eval()
    h = fill_params(m.MultiHeadAttention(3, 6, 8, 0.0, num_heads=3)).eval()
    return {
        "Wrapper(3,2,ctx=8,H=3) on (2,6,3)": w(x),
        "MultiHeadAttention(3,6,ctx=8,H=3) on (2,6,3)": h(x),
        "MultiHeadAttention on (2,8,3)": h(rnd(2, 8, 3, seed=1)),
    }


def p_cross(m: Any, pkg: str) -> dict[str, Any]:
    mod = fill_params(m.CrossAttention(8, 2)).eval()
    x, c, c5 = rnd(2, 3, 8), rnd(2, 5, 8, seed=1), rnd(2, 5, 8, seed=2)
    pad = torch.tensor([[True, True, True, False, False], [True, True, True, True, True]])
    out: dict[str, Any] = {"L=3,S=5 no mask": mod(x, c)}
    for name, args in (("L=3,S=5 padding mask", (x, c, pad)), ("L=S=5 padding mask", (c5, c, pad))):
        try:
            out[name] = mod(*args)
        except Exception as e:  # noqa: BLE001 - recorded as a behaviour
            out[name] = f"raises {type(e).__name__}"
    return out


def p_decay(m: Any, pkg: str) -> dict[str, Any]:
    mod = fill_params(m.DecayingAttention(8, 2))
    out: dict[str, Any] = {"DecayingAttention(8,2) on (2,5,8)": mod(rnd(2, 5, 8))}
    for n in (1, 2, 6, 8, 12):
        out[f"alibi_slopes({n})"] = m.alibi_slopes(n)
    return out


def p_eff(m: Any, pkg: str) -> dict[str, Any]:
    q, k, v = rnd(2, 2, 4, 8), rnd(2, 2, 6, 8, seed=1), rnd(2, 2, 6, 5, seed=2)
    q6 = rnd(2, 2, 6, 8, seed=3)
    out: dict[str, Any] = {
        "sdpa L=4,S=6": m.sdpa_attention(q, k, v),
        "sdpa is_causal L=4,S=6": m.sdpa_attention(q, k, v, is_causal=True),
        "sdpa is_causal L=S=6": m.sdpa_attention(q6, k, v, is_causal=True),
        "sdpa bool mask": m.sdpa_attention(q, k, v, mask=rnd(4, 6, seed=4) > -0.5),
    }
    torch.manual_seed(7)
    out["sdpa dropout_p=0.5 training=False"] = m.sdpa_attention(
        q, k, v, dropout_p=0.5, training=False
    )
    kl, vl = rnd(2, 2, 13, 8, seed=5), rnd(2, 2, 13, 5, seed=6)
    for causal in (False, True):
        out[f"flash L=4,S=13,block=4 causal={causal}"] = m.flash_attention(q, kl, vl, causal, 4)
    out["flash L=6,S=4 causal block=3"] = m.flash_attention(
        q6, k[..., :4, :], v[..., :4, :], True, 3
    )
    return out


def p_rope(m: Any, pkg: str) -> dict[str, Any]:
    cos, sin = m.rope_frequencies(8, 16)
    out: dict[str, Any] = {"rope_frequencies(8,16) cos": cos, "sin": sin}
    c2, s2 = m.rope_frequencies(64, 4096)
    out["rope_frequencies(64,4096) cos"], out["rope_frequencies(64,4096) sin"] = c2, s2
    x = rnd(2, 3, 5, 8)
    for fn in ("apply_rope", "apply_rope_interleaved"):
        f = getattr(m, fn)
        for pname, pos in (
            ("None", None),
            ("(5,) 4..8", torch.arange(4, 9)),
            ("(B,T)", torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])),
        ):
            xc = x.clone()
            try:
                out[f"{fn}(x (2,3,5,8), positions={pname})"] = f(xc, cos, sin, pos)
            except Exception as e:  # noqa: BLE001
                out[f"{fn}(x (2,3,5,8), positions={pname})"] = f"raises {type(e).__name__}"
            out[f"{fn}: x after the call (positions={pname})"] = xc
    return out


def p_gqa(m: Any, pkg: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, kw in (
        ("GQA(16,H=4,Hkv=2)", {}),
        ("GQA(16,H=4,Hkv=1,bias)", {"bias": True}),
        ("GQA(16,H=4,Hkv=2,rope,max_len=8)", {"rope": True, "max_len": 8}),
    ):
        hkv = 1 if "Hkv=1" in name else 2
        mod = fill_params(m.GroupedQueryAttention(16, 4, hkv, **kw)).eval()
        for xn, x in (("T=6", rnd(2, 6, 16)), ("T=8", rnd(2, 8, 16, seed=1))):
            try:
                out[f"{name} {xn}"] = mod(x)
            except Exception as e:  # noqa: BLE001
                out[f"{name} {xn}"] = f"raises {type(e).__name__}"
    return out


def p_kv(m: Any, pkg: str) -> dict[str, Any]:
    gqa = importlib.import_module(f"{pkg}.grouped_query_attention")
    model = fill_params(gqa.GroupedQueryAttention(16, 4, 2, rope=True, max_len=16)).eval()
    x, x2 = rnd(2, 7, 16), rnd(2, 5, 16, seed=1)
    out: dict[str, Any] = {}
    for cs in (1, 3):
        cache = m.KVCache(2, 2, 16, 4)
        out[f"decode(x (2,7,16), chunk={cs})"] = call(m.decode, model, cache, x, cs)
        out[f"then decode(x2 (2,5,16), chunk={cs}) continuing"] = call(
            m.decode, model, cache, x2, cs
        )
        out[f"cache.length after (chunk={cs})"] = cache.length
        cache.reset()
        out[f"after reset, decode(x2, chunk={cs})"] = call(m.decode, model, cache, x2, cs)
    cache = m.KVCache(1, 2, 4, 3)
    try:
        ka, _va = cache.update(rnd(1, 2, 4, 3, seed=2), rnd(1, 2, 4, 3, seed=3))
        out["update filling max_len=4 exactly"] = ka
    except Exception as e:  # noqa: BLE001
        out["update filling max_len=4 exactly"] = f"raises {type(e).__name__}"
    return out


def p_sw(m: Any, pkg: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "sliding_window_mask(6,3)": m.sliding_window_mask(6, 3),
        "sliding_window_mask(3,3,kv_len=7)": m.sliding_window_mask(3, 3, kv_len=7),
        "sliding_window_mask(5,1)": m.sliding_window_mask(5, 1),
    }
    q, k, v = rnd(2, 2, 11, 8), rnd(2, 2, 11, 8, seed=1), rnd(2, 2, 11, 6, seed=2)
    for w, bs in ((3, 4), (1, 4), (20, 4), (5, 64)):
        out[f"banded_attention(T=11, window={w}, block={bs})"] = call(
            m.banded_attention, q, k, v, w, bs
        )
    vv = rnd(2, 2, 11, 8, seed=2)
    for chunk in (1, 3):
        cache = m.RollingKVCache(2, 2, 4, 8)
        outs = [
            cache(q[..., i : i + chunk, :], k[..., i : i + chunk, :], vv[..., i : i + chunk, :])
            for i in range(0, 11, chunk)
        ]
        out[f"RollingKVCache(window=4) decoding T=11 in chunks of {chunk}"] = torch.cat(
            outs, dim=-2
        )
        out[f"held() after (chunks of {chunk})"] = cache.held()[0]
    return out


def p_flash_bwd(m: Any, pkg: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cases = (
        ("L=5,S=13,block=4", 5, 13, False),
        ("causal L=5,S=13,block=4", 5, 13, True),
        ("causal L=6,S=4,block=3", 6, 4, True),
        ("causal L=S=9,block=4", 9, 9, True),
    )
    for name, L, S, causal in cases:
        bs = 3 if "block=3" in name else 4
        q, k, v = rnd(2, 2, L, 8), rnd(2, 2, S, 8, seed=1), rnd(2, 2, S, 5, seed=2)
        o, lse = m.flash_forward(q, k, v, causal, bs)
        out[f"{name}: flash_forward out"], out[f"{name}: lse"] = o, lse
        q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
        try:
            y = m.flash_attention(q, k, v, causal, bs)
            y.backward(rnd(*y.shape, seed=3))
            for t, n in ((q, "dq"), (k, "dk"), (v, "dv")):
                out[f"{name}: {n}"] = t.grad
        except Exception as e:  # noqa: BLE001
            out[f"{name}: backward"] = f"raises {type(e).__name__}"
    return out


PROBES: dict[str, Probe] = {
    "softmax": p_softmax,
    "simple_attention": p_simple,
    "scaled_dot_product": p_sdpa,
    "masks": p_masks,
    "self_attention": p_self,
    "causal_attention": p_causal,
    "multihead_attention": p_mha,
    "cross_attention": p_cross,
    "decaying_attention": p_decay,
    "efficient_attention": p_eff,
    "rope": p_rope,
    "grouped_query_attention": p_gqa,
    "kv_cache": p_kv,
    "sliding_window": p_sw,
    "flash_backward": p_flash_bwd,
}


# ------------------------------------------------------------------------------------------------------- comparison
def diff(a: Any, b: Any) -> float | str:
    """Largest absolute difference (inf where one side is NaN/inf and the other is not), or a behaviour note."""
    if isinstance(a, str) or isinstance(b, str):
        ra = a if isinstance(a, str) else "returns"
        rb = b if isinstance(b, str) else "returns"
        return 0.0 if a == b else f"reference {ra}, bug {rb}"
    if isinstance(a, tuple):
        return max(
            (diff(x, y) for x, y in zip(a, b)), key=lambda d: math.inf if isinstance(d, str) else d
        )
    if not isinstance(a, torch.Tensor):
        return abs(float(a) - float(b))
    if not isinstance(b, torch.Tensor) or a.shape != b.shape:
        return f"shape {tuple(a.shape)} vs {tuple(getattr(b, 'shape', ()))}"
    if a.dtype != b.dtype:
        return f"dtype {a.dtype} vs {b.dtype}"
    a, b = a.detach().double(), b.detach().double()
    same = (a == b) | (a.isnan() & b.isnan())
    d = torch.where(same, torch.zeros_like(a), (a - b).abs().nan_to_num(nan=math.inf))
    return float(d.max()) if d.numel() else 0.0


def run_probe(mod: Any, pkg: str, ex: str) -> dict[str, Any] | str:
    torch.manual_seed(0)
    try:
        return PROBES[ex](mod, pkg)
    except Exception as e:  # noqa: BLE001
        return f"raises {type(e).__name__}: {str(e)[:80]}"


def load(tmp: Path, pkg: str, ex: str, bug: Path | None) -> Any:
    shutil.copytree(ROOT / "solutions", tmp / pkg)
    if bug is not None:
        shutil.copy(bug, tmp / pkg / f"{ex}.py")
    return importlib.import_module(f"{pkg}.{ex}")


def check(bug: Path, tmp: Path, n: int) -> tuple[str, str, float | str]:
    """(exercise, worst probe, its difference) for one bug file."""
    ex = bug.parent.name
    ref, mod = load(tmp, f"h6ref{n}", ex, None), load(tmp, f"h6bug{n}", ex, bug)
    r, b = run_probe(ref, f"h6ref{n}", ex), run_probe(mod, f"h6bug{n}", ex)
    if isinstance(r, str):
        raise RuntimeError(f"reference probe failed for {ex}: {r}")
    if isinstance(b, str):
        return ex, "probe as a whole", f"bug {b}"
    worst, worst_d, behaviour = "", 0.0, ""
    for key, rv in r.items():
        d = diff(rv, b.get(key, "missing"))
        if isinstance(d, str):
            behaviour = behaviour or f"{key}: {d}"
        elif d > worst_d:
            worst, worst_d = key, d
    # a numeric difference is the more telling one; add a behaviour difference if any
    if worst_d > 1e-6:
        return ex, worst, f"{worst_d:.3g}" + (f" (also {behaviour})" if behaviour else "")
    if behaviour:
        key, _, d = behaviour.partition(": ")
        return ex, key, d
    return ex, worst, worst_d


def main() -> int:
    bugs = sorted((ROOT / "tests" / "corpus" / "buggy").glob("*/heldout6_*.py"))
    tmp = Path(tempfile.mkdtemp(prefix="heldout6_"))
    sys.path.insert(0, str(tmp))
    failures = 0
    rows = ["exercise\tfile\tdescription\tdiffers on\tmax abs diff or behaviour"]
    try:
        for n, bug in enumerate(bugs):
            ex, where, d = check(bug, tmp, n)
            real = isinstance(d, str) or d > 1e-6  # str: a formatted difference or a behaviour
            failures += not real
            shown = d if isinstance(d, str) else f"{d:.3g}"
            print(f"{'DIFFERS' if real else 'SAME   '}\t{ex}\t{bug.name}\t{where}\t{shown}")
            first = bug.read_text().split("\n", 1)[0].removeprefix('"""Bug: ').rstrip(".")
            rows.append(f"{ex}\t{bug.relative_to(ROOT)}\t{first}\t{where}\t{shown}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"summary: {len(bugs) - failures}/{len(bugs)} bugs differ from the reference; {failures} do not"
    )
    if "--tsv" in sys.argv:
        (Path(__file__).with_name("heldout6_bugs.tsv")).write_text("\n".join(rows) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
