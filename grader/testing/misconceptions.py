"""The misconceptions the feedback can name: one id each, what it is in a student's words, and whether a student
makes it in the normal case (ordinary inputs, ordinary use) or only shows it on an edge (a device, half precision,
memory, an invalid argument).

A diagnosis names an id here (``diagnosis [id]: ...`` in a test's message, :mod:`grader.testing.diagnosis`); each
corpus bug declares the one it makes (``Misconception: id`` in its docstring). ``named_by`` recognises text that
names the misconception without a diagnosis tag (the canned hints the suites gave before diagnosis): the feedback
benchmark (``benchmarks/feedback.py``) reads it to tell a message that names a bug's own mistake from one that hints
at another. Plain data: no torch, no grader imports (the benchmark loads this file by path to judge older commits).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Misconception:
    id: str
    says: str  # the mistake, as the feedback names it
    normal: bool  # shows for ordinary inputs in ordinary use (the public suites must catch it)
    named_by: str  # a regular expression (case-insensitive) matching text that names it


_M = Misconception
CATALOGUE: tuple[Misconception, ...] = (
    # softmax
    _M(
        "softmax-no-max",
        "exp without the row max subtracted first (exp overflows above 88.7 in float32)",
        True,
        r"subtract(ing)? the (row |running )?max|max subtracted|without the max|exp\(1000\) overflows",
    ),
    _M(
        "softmax-wrong-dim",
        "the softmax (or its sum) taken over the wrong dimension",
        True,
        r"softmax over (the )?(last|keys|dim=-1|the keys|the last|the LAST)|along the `dim`|default dim|"
        r"dim=0 or dim=1|sum along|softmax over dim=-1|use dim=-1|sums? to 1",
    ),
    _M(
        "softmax-no-keepdim",
        "the sum taken without keepdim=True, so it broadcasts against the wrong axis",
        True,
        r"keepdim",
    ),
    _M(
        "not-softmax",
        "the scores divided by their plain sum instead of a softmax",
        True,
        r"plain sum is not softmax|dividing by the plain sum",
    ),
    _M(
        "banned-api",
        "a banned PyTorch function called instead of the computation asked for",
        True,
        r"banned",
    ),
    # autograd, in place
    _M(
        "inplace-input",
        "the caller's input tensor modified in place",
        True,
        r"in place|in-place|inplace|modified (its|the) input|InputModified",
    ),
    _M(
        "inplace-autograd",
        "an in-place operation on a tensor autograd saved, so backward fails",
        True,
        r"never modify in place|modified by an inplace",
    ),
    _M(
        "no-gradient",
        "part of the computation cut off from autograd (.detach(), .data, torch.no_grad())",
        True,
        r"\.detach\(\)|\.data|no_grad|no gradient|differentiable",
    ),
    _M(
        "precision-lowered",
        "a computation done in a lower precision than the inputs' (float32 or half inside)",
        False,
        r"float32 (tensors|constants)|in float32|float64-accurate|half precision|accumulate",
    ),
    _M(
        "dtype-ignored",
        "the result or a buffer in another dtype than the one asked for",
        False,
        r"keep the (input's|model's) dtype|dtype you were given|whatever dtype|in query's dtype|cast .* back|"
        r"dtype argument|float32 .*without dtype",
    ),
    _M(
        "device-ignored",
        "a tensor made on the default device instead of the input's",
        False,
        r"device",
    ),
    # scale
    _M(
        "wrong-scale",
        "the scores scaled by the wrong factor (not 1/sqrt(head_dim))",
        True,
        r"sqrt\(|scale by|divide the scores|scale each head",
    ),
    _M(
        "scale-argument-ignored",
        "the `scale` argument ignored",
        True,
        r"scale argument|the `scale`",
    ),
    _M(
        "scale-zero-as-default",
        "scale=0.0 treated as 'no scale given'",
        False,
        r"scale=0|scale is None",
    ),
    _M(
        "bias-before-scale",
        "an additive bias or decay added before scaling, so it is scaled too",
        True,
        r"after scaling|AFTER scaling|before scaling",
    ),
    # projections and layout
    _M(
        "keys-dot-t",
        "a transpose of the wrong dims: `.T` on a batched tensor (it reverses every dimension), "
        "transpose(0, 1) on a batch, or x^T x instead of x x^T",
        True,
        r"\.T`?|reverses all",
    ),
    _M(
        "queries-from-w-key",
        "the queries computed with W_key",
        True,
        r"queries from W_query|W_key`|copy-paste",
    ),
    _M(
        "qkv-bias-ignored",
        "the qkv_bias argument ignored",
        True,
        r"qkv_bias (argument )?(is )?ignored|follow the bias argument",
    ),  # not "bias=qkv_bias": a hint that lists the constructor's arguments names no mistake
    _M(
        "context-from-scores",
        "the context made from the unnormalised scores instead of the weights",
        True,
        r"WEIGHTS \(not the scores\)",
    ),
    _M(
        "scores-loop",
        "the scores filled by a double loop over one sequence's rows into a float32 torch.zeros",
        True,
        r"for every query at once|double loop",
    ),
    _M(
        "context-single-query",
        "the context of one query only",
        True,
        r"every query at once|not only one token",
    ),
    _M(
        "heads-no-transpose",
        "heads split or merged with view() without the transpose",
        True,
        r"transpose\(1, 2\)|without transpose",
    ),
    _M(
        "kv-from-x",
        "keys or values projected from x instead of the context (or the two sequences' roles swapped)",
        True,
        r"keys and values from context|CONTEXT only",
    ),
    _M(
        "kv-length-from-query",
        "keys and values reshaped with the query's length",
        True,
        r"context's length|context\.shape\[1\]|have their own length",
    ),
    _M(
        "out-proj-missing",
        "no output projection applied",
        True,
        r"out_proj last|finish with out_proj|end with out_proj",
    ),
    _M(
        "out-proj-bias",
        "the output projection's bias wrong (missing, or always there)",
        True,
        r"out_proj \(nn.Linear with bias\)|out_proj .*bias|bias=bias",
    ),
    _M(
        "concat-wrong-dim",
        "the heads concatenated along the wrong dimension",
        True,
        r"concatenate .* on the last dim|dim=-1\)",
    ),
    _M("head-width", "each head given the wrong width", True, r"each head returns \(B, T, d_out\)"),
    _M(
        "heads-shared",
        "one head module repeated for every head ([module] * n), so all heads share weights",
        True,
        r"share (one|the same) (head|module)|\[.*\] \* num_heads|independent heads",
    ),
    _M(
        "v1-init",
        "the V1 weights not initialised as specified (torch.rand(d_in, d_out))",
        True,
        r"torch\.rand\(d_in, d_out\)",
    ),
    _M(
        "v1-weights-layout",
        "V1 weights stored as (d_out, d_in)",
        True,
        r"\(d_in, d_out\) matrices|stores its weight",
    ),
    _M(
        "not-a-buffer",
        "state kept as a plain attribute (a fixed tensor, a Python list of modules) instead of registered "
        "(a buffer, nn.ModuleList)",
        True,
        r"register_buffer|registered buffer|as buffers|not registered",
    ),
    # masks
    _M(
        "mask-missing",
        "no mask applied",
        True,
        r"must not see|mask (every|the scores of|keys) j > i|must only see|future (must not|leaked)|"
        r"mask must hide|no influence at all",
    ),
    _M(
        "mask-inverted",
        "the mask's meaning inverted (True read as 'blocked')",
        True,
        r"invert|right way round|True = may attend|True means|True = real|BLOCKED set|-inf where it is False",
    ),
    _M(
        "additive-as-bool",
        "an additive 0/-inf mask read as a boolean one (mask == 0)",
        True,
        r"mask == 0|not a 0/1 keep-mask|ADDED to the scores",
    ),
    _M(
        "mask-top-left",
        "the causal mask aligned top-left when queries and keys differ in number",
        True,
        r"top-left|bottom-right|absolute position|S - L \+ i|P \+ i|tril\(diagonal",
    ),
    _M(
        "mask-after-softmax",
        "the future zeroed after the softmax, without renormalising",
        True,
        r"BEFORE the softmax|before the softmax",
    ),
    _M(
        "mask-not-sliced",
        "the context-length mask not cut to the sequence's length",
        True,
        r"\[:T, :T\]",
    ),
    _M(
        "mask-broadcast",
        "a mask broadcast against the wrong axis",
        True,
        r"\(B, 1, 1, S\)|broadcast|lengths\[:, None\]",
    ),
    _M(
        "mask-dtype",
        "a mask of the wrong kind (float 0/1 or additive instead of boolean)",
        True,
        r"boolean|0/1 float|float mask",
    ),
    _M(
        "mask-fill-finite",
        "blocked scores filled with a finite number (-1e9) instead of -inf",
        False,
        r"-1e9|exactly -inf",
    ),
    _M("mask-spurious", "a causal mask where none belongs", True, r"no causal mask"),
    _M(
        "mask-diagonal",
        "the causal mask blocks the diagonal too (a token cannot attend to itself)",
        True,
        r"attend to itself|its own (key|position)|diagonal (is )?(blocked|excluded)",
    ),
    _M(
        "mask-multiplied",
        "a mask applied by multiplying the scores by 0/1 (a zero score still gets weight)",
        True,
        r"multipl(y|ying|ied) the scores|score of 0 is not blocked",
    ),
    _M(
        "mask-truthiness",
        "`if mask:` instead of `if mask is not None:`",
        True,
        r"is not None|truthiness",
    ),
    _M("causal-with-mask", "is_causal=True passed along with an explicit mask", True, r"is_causal"),
    _M(
        "fully-masked-nan",
        "NaN for a query that sees no key",
        False,
        r"all -inf is NaN|no visible key|lse = -inf",
    ),
    _M("padding-off-by-one", "the padding mask off by one", True, r"j < lengths"),
    # dropout
    _M(
        "dropout-in-eval",
        "dropout active in eval mode",
        True,
        r"eval|training=True|dropout is the identity",
    ),
    _M(
        "dropout-keep-prob",
        "the dropout probability read as a keep probability",
        True,
        r"DROPPING|keep probability|KEEP probability",
    ),
    _M(
        "dropout-wrong-place",
        "dropout applied somewhere other than the attention weights",
        True,
        r"WEIGHTS \(after the softmax\)|weights after the softmax|on the weights",
    ),
    _M("dropout-no-rescale", "the kept weights not rescaled by 1/(1-p)", True, r"1 / \(1 - p\)"),
    _M(
        "weights-before-dropout",
        "the weights returned before dropout, not the ones used",
        True,
        r"weights used for the output",
    ),
    _M(
        "dropout-shared-mask",
        "one dropout mask drawn once and broadcast across batch items or heads",
        True,
        r"broadcast to all|independent draw",
    ),
    _M(
        "dropout-same-draw",
        "the same dropout mask on every call (a fixed seed or generator)",
        True,
        r"fixed seed|fresh dropout draw",
    ),
    _M(
        "dropout-branch-skipped",
        "dropout left out of one branch (with a mask, or causal)",
        True,
        r"no dropout in (this|the) branch|every branch",
    ),
    # decaying attention
    _M("gamma-not-parameter", "gamma not an nn.Parameter", True, r"nn\.Parameter|learnable"),
    _M(
        "gamma-wrong-axis",
        "gamma broadcast against the wrong axis",
        True,
        r"gamma\[h\] only scales|\(H, 1, 1\)",
    ),
    _M(
        "gamma-init",
        "gamma not initialised to ones",
        True,
        r"initiali[sz]ed? to (ones|1)|torch\.ones\(num_heads",
    ),
    _M(
        "decay-sign",
        "the decay's sign, direction or distance wrong (+gamma|i-j|, i - j, (i - j)**2, one side only)",
        True,
        r"NEGATIVE|absolute distance|\|i - j\|",
    ),
    _M(
        "decay-misapplied",
        "the decay not added to the scaled scores: multiplied into them, or applied to the weights after "
        "the softmax (rows that no longer sum to 1)",
        True,
        r"decay (to|on) the weights|multiplied by exp\(-gamma",
    ),
    _M(
        "qkv-split-layout",
        "the fused qkv output split in the wrong layout",
        True,
        r"reshape\(B, L, 3, H",
    ),
    _M(
        "slopes-wrong",
        "ALiBi slopes wrong (order, h counted from 0, or the non-power-of-two rule)",
        True,
        r"power of two|2 \*\* \(-8",
    ),
    # modern
    _M(
        "gqa-repeat",
        "kv heads tiled with repeat() instead of repeat_interleave()",
        True,
        r"repeat_interleave",
    ),
    _M(
        "kv-heads-full-width",
        "keys and values projected to d_model instead of num_kv_heads * head_dim",
        True,
        r"num_kv_heads \* head_dim",
    ),
    _M("rope-on-values", "RoPE applied to the values", True, r"never (for )?v\b|never v"),
    _M(
        "rope-only-queries",
        "RoPE applied to the queries only",
        True,
        r"apply_rope\(k|the same for k|q and k",
    ),
    _M(
        "rope-before-head-split",
        "RoPE applied before the heads are split",
        True,
        r"after splitting the heads",
    ),
    _M("rope-base-ignored", "the RoPE base argument ignored", True, r"rope_base|base argument"),
    _M(
        "rope-tables-length",
        "RoPE tables of the wrong length",
        False,
        r"max_len rows|one row per position",
    ),
    _M(
        "positions-not-offset",
        "positions restarting at 0 in every chunk",
        True,
        r"absolute positions|cache\.length \+ i|cos\[positions\]|not rows 0",
    ),
    _M("rope-positions-start-one", "RoPE tables starting at position 1", True, r"position 0"),
    _M(
        "rope-frequencies",
        "RoPE frequencies wrong (exponent sign or step)",
        True,
        r"theta|frequenc",
    ),
    _M(
        "rope-pairing",
        "features paired wrongly for the rotation",
        True,
        r"pairing|pair i is|neighbou",
    ),
    _M(
        "rope-rotation-sign",
        "every pair rotated by minus the angle",
        True,
        r"x1 \* cos - x2 \* sin|a cos - b sin",
    ),
    _M("rope-return-order", "(sin, cos) returned instead of (cos, sin)", True, r"\(cos, sin\)"),
    _M(
        "rope-positions-broadcast",
        "per-batch positions broadcast against the heads",
        True,
        r"broadcast",
    ),
    _M("rope-shape", "the rotated tensor's shape changed", True, r"extra leading dims|same shape"),
    _M(
        "rope-tables-layout",
        "RoPE tables in Hugging Face's (max_len, head_dim) layout (each pair's column twice) "
        "instead of one column per pair",
        True,
        r"Hugging Face|one column per pair|head_dim // 2 columns|not duplicated",
    ),
    _M(
        "cache-unbounded",
        "a cache grown without bound instead of preallocated",
        False,
        r"preallocated|do not grow|no growing storage|torch\.cat",
    ),
    _M(
        "cache-unwritten-slots",
        "unwritten cache slots attended to",
        True,
        r"unwritten|not yet written|filled prefix",
    ),
    _M("cache-reset", "reset() keeping the old sequence's count", True, r"reset\(\)"),
    _M(
        "cache-length-not-advanced",
        "the cache's length not advanced after a write, so the next write overwrites",
        True,
        r"advance|length \+= t|length = end",
    ),
    _M(
        "cache-off-by-one",
        "the cache's capacity check off by one (its last slot refused, or one write past max_len)",
        False,
        r"full length|last slot|exactly max_len",
    ),
    _M(
        "cache-grouped-heads",
        "keys and values repeated to every query head before caching",
        False,
        r"num_kv_heads.* cache|group the kv",
    ),
    _M(
        "cache-write-before-check",
        "the cache written before the overflow check",
        False,
        r"BEFORE writing|check first",
    ),
    _M(
        "cache-write-before-attend",
        "a chunk written into the rolling cache before it attends",
        True,
        r"only then write",
    ),
    _M(
        "cache-ring-order",
        "the ring buffer read in storage order after it wraps",
        True,
        r"oldest first|ring buffer",
    ),
    _M(
        "recompute-prefix",
        "the whole prefix projected again at every step",
        False,
        r"project only the NEW|projects? each",
    ),
    _M(
        "memory-full-matrix",
        "the full score matrix built where tiles or a band were asked for",
        False,
        r"never build|\(L, S\)|one tile|T \* T|whole prefix|its band only|L x S",
    ),
    _M(
        "ragged-dropped",
        "the shorter last tile, block or chunk dropped",
        True,
        r"shorter|last tile|ragged",
    ),
    # normal: multi-head attention hands attention its heads as x.view(B, L, H, E).transpose(1, 2), not contiguous
    _M(
        "noncontiguous-view",
        ".view() on an input that may be a non-contiguous view (use .reshape)",
        True,
        r"view size is not compatible|\.reshape\b|not contiguous",
    ),
    _M(
        "squeeze-unit-dims",
        "a bare .squeeze() that also drops a batch, head or sequence dim of size 1",
        False,
        r"\.squeeze\(\)|size-1 dim",
    ),
    _M(
        "dims-from-front",
        "dimensions counted from the front instead of the back",
        False,
        r"leading dims|\(\.\.\., L",
    ),
    _M("default-causal", "is_causal=True by default", True, r"is_causal=False|defaults"),
    _M(
        "error-unchecked",
        "an invalid argument accepted instead of raising ValueError",
        False,
        r"raise ValueError",
    ),
    _M(
        "window-off-by-one",
        "the window one key too wide or too narrow",
        True,
        r"window keys|window - 1|not window \+ 1",
    ),
    _M("window-symmetric", "a symmetric window that also sees future keys", True, r"i - j >= 0"),
    _M(
        "band-range",
        "the band of keys of a block of queries wrong",
        True,
        r"max\(0, start - window \+ 1\)",
    ),
    _M(
        "band-tile-mask",
        "a band tile's mask aligned to the tile instead of the positions",
        True,
        r"mask that tile|tile bottom-right",
    ),
    _M(
        "flash-max-init",
        "the running max started at 0 instead of -inf",
        True,
        r"-inf\b.*running|m = -inf",
    ),
    _M(
        "flash-rescale",
        "the running sum or accumulator not rescaled when the max changes",
        True,
        r"rescale|alpha",
    ),
    _M(
        "lse-wrong",
        "the log-sum-exp wrong (m alone, log(l) alone, or not the final pair)",
        True,
        r"lse = m \+ log|log\(l\)",
    ),
    _M(
        "bwd-delta",
        "D = rowsum(dO * O) missing or computed per tile",
        True,
        r"D = rowsum|rowsum\(dO",
    ),
    _M("bwd-scale", "the softmax scale missing or doubled in dQ and dK", True, r"\* scale"),
    _M(
        "bwd-dq-overwritten",
        "dQ assigned instead of accumulated over the key tiles",
        True,
        r"accumulate with \+|dQ \+=",
    ),
    _M(
        "bwd-probabilities",
        "the backward's probabilities not exp(S - lse)",
        True,
        r"P = exp\(S - lse\)",
    ),
    _M(
        "function-grad-count",
        "backward returning fewer gradients than forward has inputs",
        True,
        r"one gradient per|\(dq, dk, dv, None, None\)",
    ),
)

BY_ID: dict[str, Misconception] = {m.id: m for m in CATALOGUE}
TAG = re.compile(
    r"diagnosis \[([a-z0-9, -]+)\]"
)  # how a message names a misconception (or several, equal there)


SELF_EXPLAINED = {
    "InputModified:": "inplace-input",
    "BannedAPIError:": "banned-api",
}  # the sandbox's own words
HINT = re.compile(r"^\s*hint: (.*)$", re.MULTILINE)


def named_in(message: str) -> set[str]:
    """The ids a test's failure message names: its diagnosis tags if it has any, else every id whose ``named_by``
    matches one of its hints (what a message says it observed names nothing by itself)."""
    tagged = {mid for found in TAG.findall(message) for mid in found.split(", ")}
    if tagged:
        return tagged
    said = next((mid for prefix, mid in SELF_EXPLAINED.items() if message.startswith(prefix)), None)
    if said:
        return {said}
    hints = "\n".join(HINT.findall(message))
    return {m.id for m in CATALOGUE if hints and re.search(m.named_by, hints, re.IGNORECASE)}
