"""The attention modules' misconceptions as knobs of :class:`~grader.testing.catalogue.heads.Spec`,
by group.

Each entry is (misconception id, what the module's output then equals, the Spec fields it turns);
every module exercise picks the groups that apply to it (causal, scale, softmax, heads, padding,
cross, gqa, rope, ...), and :func:`~grader.testing.catalogue.heads.module_variants` runs the one
float64 formula with each. A table apart from the formula it drives: adding a misconception is one
line here, never a change to the computation's code.
"""

from __future__ import annotations

from typing import Any

# (misconception, what the output then equals, the knobs): every module exercise picks the ones that
# apply
ROLES = {"queries": "W_query", "keys": "W_key", "values": "W_value"}  # and the weights of each
KNOBS: dict[str, list[tuple[str, str, dict[str, Any]]]] = {
    "scale": [
        ("wrong-scale", "no scaling at all", {"scale": 1.0}),
        (
            "wrong-scale",
            "the weights multiplied by the scale after the softmax instead of the scores before it",
            {"scale_on": "weights"},
        ),
    ],
    "softmax": [
        (
            "softmax-wrong-dim",
            "the softmax over the queries (dim -2) instead of the keys",
            {"softmax_dim": -2},
        ),
        (
            "softmax-no-max",
            "exp(scores) without the row max subtracted, which overflows here",
            {"naive": True},
        ),
    ],
    "causal": [
        ("mask-missing", "no causal mask at all", {"align": "none"}),
        (
            "mask-inverted",
            "the causal mask inverted (the past blocked, the future kept)",
            {"align": "inverted"},
        ),
        (
            "mask-diagonal",
            "a mask that keeps only keys strictly before the query (itself blocked)",
            {"align": "strict"},
        ),
        (
            "mask-one-ahead",
            "a causal mask that lets each query see the next key too (triu(diagonal=2) blocked, not 1)",
            {"align": "ahead"},
        ),
        (
            "mask-after-softmax",
            "the future zeroed after the softmax, the rows not renormalised",
            {"mask_after_softmax": True},
        ),
        (  # one output, three spellings: masked_fill(mask, 0), (..., -1e-9), scores * tril(ones)
            "mask-fill-finite, mask-multiplied",
            "the future given a score of about 0 (filled with 0 or -1e-9, where -inf or -1e9 "
            "blocks; or the scores multiplied by a 0/1 mask): a zero score still gets weight",
            {"causal_fill": 0.0},
        ),
    ],
    "queries": [  # one projection with another's weights (queries by W_key most often)
        (
            "queries-from-w-key",
            f"the {role} computed by {w} instead of {right}",
            {"weights": ",".join(w if n == role else r for n, r in ROLES.items())},
        )
        for role, right in ROLES.items()
        for w in ROLES.values()
        if w != right
    ],
    "bias": [("qkv-bias-ignored", "the projections without their biases", {"use_bias": False})],
    "heads": [
        (
            "heads-no-transpose",
            "heads split with view(B, H, T, head_dim), no transpose",
            {"split": "view"},
        ),
        *(
            (
                "heads-no-transpose",
                f"the {side} split with view(B, H, T, head_dim), no transpose (the {other} right)",
                {"split": "view", "split_on": on},
            )
            for side, other, on in (("keys and values", "queries", "kv"), ("queries", "keys", "q"))
        ),
        (
            "heads-no-transpose",
            "heads merged back with view(B, T, d) without transposing (B, H, T, hd) first",
            {"merge": "view"},
        ),
        (
            "heads-no-transpose",
            "heads split with view(B, H, T, head_dim) and merged back with view(B, T, d): no "
            "transpose either way",
            {"split": "view", "merge": "view"},
        ),
        (
            "softmax-wrong-dim",
            "the softmax over the heads (dim 1) instead of the keys",
            {"softmax_dim": 1},
        ),
        (
            "heads-no-transpose",
            "heads split strided, view(B, T, head_dim, H).permute(0, 3, 1, 2): head h takes "
            "features h, h + H, ... instead of a contiguous block",
            {"split": "strided"},
        ),
        (
            "heads-no-transpose",
            "heads split strided, view(B, T, head_dim, H), and merged back the same way",
            {"split": "strided", "merge": "2,3,1"},
        ),
        *(
            (
                "heads-no-transpose",
                f"heads merged back with permute(0, {dims}) before the reshape to (B, T, d) where "
                "transpose(1, 2) (dims 0, 2, 1, 3) is due",
                {"merge": dims},
            )
            for dims in ("1,3,2", "2,3,1", "3,1,2", "3,2,1")
        ),
    ],
    "out_proj": [
        ("out-proj-missing", "the heads' output without out_proj", {"skip_out_proj": True})
    ],
    "padding": [
        (
            "mask-inverted",
            "the padding mask inverted (True read as 'padding')",
            {"keep_inverted": True},
        ),
        (
            "mask-broadcast",
            "the (B, S) padding mask unsqueezed to (B, 1, S), which lines the batch up with the "
            "heads",
            {"keep_align": "heads"},
        ),
        (
            "mask-broadcast",
            "the (B, S) padding mask as (B, 1, S, 1), which lines the keys up with the queries",
            {"keep_align": "queries"},
        ),
        (
            "mask-broadcast",
            "the (B, S) padding mask as (B, S, 1, 1), which lines the keys up with the heads",
            {"keep_align": "heads-axis"},
        ),
        (
            "mask-multiplied",
            "the padded keys' scores set to 0 (multiplied by the 0/1 mask) instead of -inf",
            {"keep_fill": 0.0},
        ),
        (
            "mask-multiplied",
            "the padded tokens' keys and values zeroed (multiplied by the mask) instead of their "
            "scores set to -inf: a padded key still scores 0 and takes weight",
            {"keep_as": "zeroed-kv"},
        ),
        (
            "mask-dtype",
            "the padding mask added to the scores as 0/1 floats (+1 for real keys): nothing "
            "blocked",
            {"keep_as": "added"},
        ),
        (
            "mask-one-ahead",
            "a causal mask that lets each query see the next key too (triu(diagonal=2) blocked, not 1)",
            {"align": "ahead"},
        ),
        (
            "mask-after-softmax",
            "the padded keys' weights zeroed after the softmax, the rows not renormalised",
            {"mask_after_softmax": True},
        ),
    ],
    "cross": [
        (
            "kv-from-x",
            "keys and values projected from x instead of the context",
            {"kv_from_x": "kv"},
        ),
        ("kv-from-x", "the keys projected from x instead of the context", {"kv_from_x": "k"}),
        ("kv-from-x", "the values projected from x instead of the context", {"kv_from_x": "v"}),
        (
            "kv-from-x",
            "the keys and values projected from x and the queries from the context (the roles "
            "of the two sequences swapped)",
            {"roles_swapped": True},
        ),
        (
            "mask-spurious",
            "a causal (top-left) mask, which cross-attention does not have",
            {"causal": True, "align": "top-left"},
        ),
        (
            "kv-length-from-query",
            "keys and values split into heads with the queries' length L instead of the "
            "context's S",
            {"kv_len_from_query": True},
        ),
    ],
    "gqa": [
        (
            "gqa-repeat",
            "kv heads tiled with repeat() (query head h reads kv head h % num_kv_heads)",
            {"kv_pairing": "repeat"},
        )
    ],
    "rope": [
        ("rope-on-values", "RoPE applied to the values too", {"rope_on": "qkv"}),
        ("rope-only-queries", "RoPE applied to the queries only, not the keys", {"rope_on": "q"}),
        (
            "rope-pairing",
            "RoPE applied with apply_rope_interleaved (neighbouring features paired) instead of "
            "apply_rope (feature i with i + head_dim // 2)",
            {"rope_pairing": "interleaved"},
        ),
        (
            "rope-before-head-split",
            "RoPE applied on (B, T, H, head_dim) before the transpose: the heads axis "
            "taken for the positions",
            {"rope_before_split": True},
        ),
    ],
}
