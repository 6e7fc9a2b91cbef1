"""The misconceptions of the softmax, autograd and in-place changes, the scale, and the projections
and their layout: the first assignment's, which the second shares.

Plain data (no imports): :mod:`grader.testing.misconceptions` makes each row a ``Misconception``
(id, what the feedback calls the mistake, whether it shows in the normal case, a regular expression
for text that names it).
"""

from __future__ import annotations

BASICS: tuple[tuple[str, str, bool, str], ...] = (
    # softmax
    (
        "softmax-no-max",
        "exp without the row max subtracted first (exp overflows above 88.7 in float32)",
        True,
        r"subtract(ing)? the (row |running )?max|max subtracted|without the max|exp\(1000\) overflows",
    ),
    (
        "softmax-wrong-dim",
        "the softmax (or its sum) taken over the wrong dimension",
        True,
        r"softmax over (the )?(last|keys|dim=-1|the keys|the last|the LAST)|along the `dim`|default dim|"
        r"dim=0 or dim=1|sum along|softmax over dim=-1|use dim=-1|sums? to 1",
    ),
    (
        "softmax-no-keepdim",
        "the sum taken without keepdim=True, so it broadcasts against the wrong axis",
        True,
        r"keepdim",
    ),
    (
        "not-softmax",
        "the scores divided by their plain sum instead of a softmax",
        True,
        r"plain sum is not softmax|dividing by the plain sum",
    ),
    (
        "banned-api",
        "a banned PyTorch function called instead of the computation asked for",
        True,
        r"banned",
    ),
    # autograd, in place
    (
        "inplace-input",
        "the caller's input tensor modified in place",
        True,
        r"in place|in-place|inplace|modified (its|the) input|InputModified",
    ),
    (
        "inplace-autograd",
        "an in-place operation on a tensor autograd saved, so backward fails",
        True,
        r"never modify in place|modified by an inplace",
    ),
    (
        "no-gradient",
        "part of the computation cut off from autograd (.detach(), .data, torch.no_grad())",
        True,
        r"\.detach\(\)|\.data|no_grad|no gradient|differentiable",
    ),
    (
        "precision-lowered",
        "a computation done in a lower precision than the inputs' (float32 or half inside)",
        False,
        r"float32 (tensors|constants)|in float32|float64-accurate|half precision|accumulate",
    ),
    (
        "dtype-ignored",
        "the result or a buffer in another dtype than the one asked for",
        False,
        r"keep the (input's|model's) dtype|dtype you were given|whatever dtype|in query's dtype|cast .* back|"
        r"dtype argument|float32 .*without dtype",
    ),
    (
        "device-ignored",
        "a tensor made on the default device instead of the input's",
        False,
        r"device",
    ),
    # scale
    (
        "wrong-scale",
        "the scores scaled by the wrong factor (not 1/sqrt(head_dim))",
        True,
        r"sqrt\(|scale by|divide the scores|scale each head",
    ),
    (
        "scale-argument-ignored",
        "the `scale` argument ignored",
        True,
        r"scale argument|the `scale`",
    ),
    (
        "scale-zero-as-default",
        "scale=0.0 treated as 'no scale given'",
        False,
        r"scale=0|scale is None",
    ),
    (
        "bias-before-scale",
        "an additive bias or decay added before scaling, so it is scaled too",
        True,
        r"after scaling|AFTER scaling|before scaling",
    ),
    # projections and layout
    (
        "keys-dot-t",
        "a transpose of the wrong dims: `.T` on a batched tensor (it reverses every dimension), "
        "transpose(0, 1) on a batch, or x^T x instead of x x^T",
        True,
        r"\.T`?|reverses all",
    ),
    (
        "queries-from-w-key",
        "a projection computed with another one's weights (the queries with W_key, the values "
        "with W_key, ...: a copy-paste slip)",
        True,
        r"queries from W_query|W_key`|copy-paste",
    ),
    (
        "qkv-bias-ignored",
        "the qkv_bias argument ignored",
        True,
        r"qkv_bias (argument )?(is )?ignored|follow the bias argument",
    ),  # not "bias=qkv_bias": a hint that lists the constructor's arguments names no mistake
    (
        "context-from-scores",
        "the context made from the unnormalised scores instead of the weights",
        True,
        r"WEIGHTS \(not the scores\)",
    ),
    (
        "scores-loop",
        "the scores filled by a double loop over one sequence's rows into a float32 torch.zeros",
        True,
        r"for every query at once|double loop",
    ),
    (
        "context-single-query",
        "the context of one query only",
        True,
        r"every query at once|not only one token",
    ),
    (
        "heads-no-transpose",
        "heads split or merged with view() without the transpose",
        True,
        r"transpose\(1, 2\)|without transpose",
    ),
    (
        "kv-from-x",
        "keys or values projected from x instead of the context (or the two sequences' roles swapped)",
        True,
        r"keys and values from context|CONTEXT only",
    ),
    (
        "kv-length-from-query",
        "keys and values reshaped with the query's length",
        True,
        r"context's length|context\.shape\[1\]|have their own length",
    ),
    (
        "out-proj-missing",
        "no output projection applied",
        True,
        r"out_proj last|finish with out_proj|end with out_proj",
    ),
    (
        "out-proj-bias",
        "the output projection's bias wrong (missing, or always there)",
        True,
        r"out_proj \(nn.Linear with bias\)|out_proj .*bias|bias=bias",
    ),
    (
        "concat-wrong-dim",
        "the heads concatenated along the wrong dimension",
        True,
        r"concatenate .* on the last dim|dim=-1\)",
    ),
    ("head-width", "each head given the wrong width", True, r"each head returns \(B, T, d_out\)"),
    (
        "heads-shared",
        "one head module repeated for every head ([module] * n), so all heads share weights",
        True,
        r"share (one|the same) (head|module)|\[.*\] \* num_heads|independent heads",
    ),
    (
        "v1-init",
        "the V1 weights not initialised as specified (torch.rand(d_in, d_out))",
        True,
        r"torch\.rand\(d_in, d_out\)",
    ),
    (
        "v1-weights-layout",
        "V1 weights stored as (d_out, d_in)",
        True,
        r"\(d_in, d_out\) matrices|stores its weight",
    ),
    (
        "not-a-buffer",
        "state kept as a plain attribute (a fixed tensor, a Python list of modules) instead of registered "
        "(a buffer, nn.ModuleList)",
        True,
        r"register_buffer|registered buffer|as buffers|not registered",
    ),
)
