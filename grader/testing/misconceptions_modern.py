"""The misconceptions of the second assignment's exercises (RoPE, grouped-query attention, the KV
cache, sliding windows, the FlashAttention backward) and of tensor layout (views, squeezes, dims
counted from the front).

Plain data (no imports): :mod:`grader.testing.misconceptions` makes each row a ``Misconception``
(id, what the feedback calls the mistake, whether it shows in the normal case, a regular expression
for text that names it).
"""

from __future__ import annotations

MODERN: tuple[tuple[str, str, bool, str], ...] = (
    # modern
    (
        "gqa-repeat",
        "kv heads tiled with repeat() instead of repeat_interleave()",
        True,
        r"repeat_interleave",
    ),
    (
        "kv-heads-full-width",
        "keys and values projected to d_model instead of num_kv_heads * head_dim",
        True,
        r"num_kv_heads \* head_dim",
    ),
    ("rope-on-values", "RoPE applied to the values", True, r"never (for )?v\b|never v"),
    (
        "rope-only-queries",
        "RoPE applied to the queries only",
        True,
        r"apply_rope\(k|the same for k|q and k",
    ),
    (
        "rope-before-head-split",
        "RoPE applied before the heads are split",
        True,
        r"after splitting the heads",
    ),
    ("rope-base-ignored", "the RoPE base argument ignored", True, r"rope_base|base argument"),
    (
        "rope-tables-length",
        "RoPE tables of the wrong length",
        False,
        r"max_len rows|one row per position",
    ),
    (
        "positions-not-offset",
        "positions restarting at 0 in every chunk",
        True,
        r"absolute positions|cache\.length \+ i|cos\[positions\]|not rows 0",
    ),
    (
        "cache-returns-stale",
        "update returns the filled prefix as it was before this write (sliced before length advances)",
        True,
        r"before self\.length advances|without the ones it just wrote",
    ),
    (
        "decode-restarts",
        "decode() empties the cache on every call: a later call forgets the sequence so far",
        True,
        r"decoded as a new sequence|empties the cache",
    ),
    (
        "cache-before-rope",
        "the keys written to the KV cache before RoPE turns them (the cache holds unturned keys)",
        True,
        r"before (RoPE|apply_rope)|unturned keys",
    ),
    ("rope-positions-start-one", "RoPE tables starting at position 1", True, r"position 0"),
    (
        "rope-frequencies",
        "RoPE frequencies wrong (exponent sign or step)",
        True,
        r"theta|frequenc",
    ),
    (
        "rope-pairing",
        "features paired wrongly for the rotation",
        True,
        r"pairing|pair i is|neighbou",
    ),
    (
        "rope-rotation-sign",
        "every pair rotated by minus the angle",
        True,
        r"x1 \* cos - x2 \* sin|a cos - b sin",
    ),
    ("rope-return-order", "(sin, cos) returned instead of (cos, sin)", True, r"\(cos, sin\)"),
    (
        "rope-positions-broadcast",
        "per-batch positions broadcast against the heads",
        True,
        r"broadcast",
    ),
    ("rope-shape", "the rotated tensor's shape changed", True, r"extra leading dims|same shape"),
    (
        "rope-tables-layout",
        "RoPE tables in Hugging Face's (max_len, head_dim) layout (each pair's column twice) "
        "instead of one column per pair",
        True,
        r"Hugging Face|one column per pair|head_dim // 2 columns|not duplicated",
    ),
    (
        "cache-unbounded",
        "a cache grown without bound instead of preallocated",
        False,
        r"preallocated|do not grow|no growing storage|torch\.cat",
    ),
    (
        "cache-unwritten-slots",
        "unwritten cache slots attended to",
        True,
        r"unwritten|not yet written|filled prefix",
    ),
    ("cache-reset", "reset() keeping the old sequence's count", True, r"reset\(\)"),
    (
        "cache-length-not-advanced",
        "the cache's length not advanced after a write, so the next write overwrites",
        True,
        r"advance|length \+= t|length = end",
    ),
    (
        "cache-off-by-one",
        "a capacity or length check off by one (exactly max_len refused, or one write past it)",
        False,
        r"full length|last slot|exactly max_len",
    ),
    (
        "cache-grouped-heads",
        "keys and values repeated to every query head before caching",
        False,
        r"num_kv_heads.* cache|group the kv",
    ),
    (
        "cache-write-before-check",
        "the cache written before the overflow check",
        False,
        r"BEFORE writing|check first",
    ),
    (
        "cache-write-before-attend",
        "a chunk written into the rolling cache before it attends",
        True,
        r"only then write",
    ),
    (
        "cache-ring-order",
        "the ring buffer read in storage order after it wraps",
        True,
        r"oldest first|ring buffer",
    ),
    (
        "recompute-prefix",
        "the whole prefix projected again at every step",
        False,
        r"project only the NEW|projects? each",
    ),
    (
        "memory-full-matrix",
        "the full score matrix built where tiles or a band were asked for",
        False,
        r"never build|\(L, S\)|one tile|T \* T|whole prefix|its band only|L x S",
    ),
    (
        "ragged-dropped",
        "the shorter last tile, block or chunk dropped",
        True,
        r"shorter|last tile|ragged",
    ),
    # normal: multi-head attention hands attention its heads as x.view(B, L, H, E).transpose(1, 2),
    # not contiguous
    (
        "noncontiguous-view",
        ".view() on an input that may be a non-contiguous view (use .reshape)",
        True,
        r"view size is not compatible|\.reshape\b|not contiguous",
    ),
    (
        "squeeze-unit-dims",
        "a bare .squeeze() that also drops a batch, head or sequence dim of size 1",
        False,
        r"\.squeeze\(\)|size-1 dim",
    ),
    (
        "dims-from-front",
        "dimensions counted from the front instead of the back",
        False,
        r"leading dims|\(\.\.\., L",
    ),
    ("default-causal", "is_causal=True by default", True, r"is_causal=False|defaults"),
    (
        "error-unchecked",
        "an invalid argument accepted instead of raising ValueError",
        False,
        r"raise ValueError",
    ),
    (
        "window-off-by-one",
        "the window one key too wide or too narrow",
        True,
        r"window keys|window - 1|not window \+ 1",
    ),
    ("window-symmetric", "a symmetric window that also sees future keys", True, r"i - j >= 0"),
    (
        "band-range",
        "the band of keys of a block of queries wrong",
        True,
        r"max\(0, start - window \+ 1\)",
    ),
    (
        "band-tile-mask",
        "a band tile's mask aligned to the tile instead of the positions",
        True,
        r"mask that tile|tile bottom-right",
    ),
    (
        "flash-max-init",
        "the running max started at 0 instead of -inf",
        True,
        r"-inf\b.*running|m = -inf",
    ),
    (
        "flash-rescale",
        "the running sum or accumulator not rescaled when the max changes",
        True,
        r"rescale|alpha",
    ),
    (
        "lse-wrong",
        "the log-sum-exp wrong (m alone, log(l) alone, or not the final pair)",
        True,
        r"lse = m \+ log|log\(l\)",
    ),
    (
        "bwd-delta",
        "D = rowsum(dO * O) missing or computed per tile",
        True,
        r"D = rowsum|rowsum\(dO",
    ),
    ("bwd-scale", "the softmax scale missing or doubled in dQ and dK", True, r"\* scale"),
    (
        "bwd-dq-overwritten",
        "dQ assigned instead of accumulated over the key tiles",
        True,
        r"accumulate with \+|dQ \+=",
    ),
    (
        "bwd-probabilities",
        "the backward's probabilities not exp(S - lse)",
        True,
        r"P = exp\(S - lse\)",
    ),
    (
        "function-grad-count",
        "backward returning fewer gradients than forward has inputs",
        True,
        r"one gradient per|\(dq, dk, dv, None, None\)",
    ),
)
