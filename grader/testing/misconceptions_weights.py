"""The misconceptions of what happens to the scores and the weights: masks (causal, padding,
additive), dropout and decaying attention's decay and ALiBi slopes.

Plain data (no imports): :mod:`grader.testing.misconceptions` makes each row a ``Misconception``
(id, what the feedback calls the mistake, whether it shows in the normal case, a regular expression
for text that names it).
"""

from __future__ import annotations

WEIGHTS: tuple[tuple[str, str, bool, str], ...] = (
    # masks
    (
        "mask-missing",
        "no mask applied",
        True,
        r"must not see|mask (every|the scores of|keys) j > i|must only see|future (must not|leaked)|"
        r"mask must hide|no influence at all",
    ),
    (
        "mask-inverted",
        "the mask's meaning inverted (True read as 'blocked')",
        True,
        r"invert|right way round|True = may attend|True means|True = real|BLOCKED set|-inf where it is False",
    ),
    (
        "additive-as-bool",
        "an additive 0/-inf mask read as a boolean one (mask == 0)",
        True,
        r"mask == 0|not a 0/1 keep-mask|ADDED to the scores",
    ),
    (
        "mask-top-left",
        "the causal mask aligned top-left when queries and keys differ in number",
        True,
        r"top-left|bottom-right|absolute position|S - L \+ i|P \+ i|tril\(diagonal",
    ),
    (
        "mask-after-softmax",
        "the future zeroed after the softmax, without renormalising",
        True,
        r"BEFORE the softmax|before the softmax",
    ),
    (
        "mask-not-sliced",
        "the context-length mask not cut to the sequence's length",
        True,
        r"\[:T, :T\]",
    ),
    (
        "mask-broadcast",
        "a mask broadcast against the wrong axis",
        True,
        r"\(B, 1, 1, S\)|broadcast|lengths\[:, None\]",
    ),
    (
        "mask-dtype",
        "a mask of the wrong kind (float 0/1 or additive instead of boolean)",
        True,
        r"boolean|0/1 float|float mask",
    ),
    (
        "mask-fill-finite",
        "blocked scores filled with a finite number (-1e9) instead of -inf",
        False,
        r"-1e9|exactly -inf",
    ),
    ("mask-spurious", "a causal mask where none belongs", True, r"no causal mask"),
    (
        "mask-diagonal",
        "the causal mask blocks the diagonal too (a token cannot attend to itself)",
        True,
        r"attend to itself|its own (key|position)|diagonal (is )?(blocked|excluded)",
    ),
    (
        "mask-one-ahead",
        "the causal mask off by one the other way: each token also sees the next one",
        True,
        r"the next (key|token) too|one (key|token) ahead",
    ),
    (
        "mask-multiplied",
        "a mask applied by multiplying instead of filling: the scores times a 0/1 mask (a zero score "
        "still gets weight), or a 0/1 mask times -inf (0 * -inf is NaN)",
        True,
        r"multipl(y|ying|ied) the scores|score of 0 is not blocked",
    ),
    (
        "mask-truthiness",
        "`if mask:` instead of `if mask is not None:`",
        True,
        r"is not None|truthiness",
    ),
    ("causal-with-mask", "is_causal=True passed along with an explicit mask", True, r"is_causal"),
    (
        "fully-masked-nan",
        "NaN for a query that sees no key",
        False,
        r"all -inf is NaN|no visible key|lse = -inf",
    ),
    ("padding-off-by-one", "the padding mask off by one", True, r"j < lengths"),
    # dropout
    (
        "dropout-in-eval",
        "dropout active in eval mode",
        True,
        r"eval|training=True|dropout is the identity",
    ),
    (
        "dropout-keep-prob",
        "the dropout probability read as a keep probability",
        True,
        r"DROPPING|keep probability|KEEP probability",
    ),
    (
        "dropout-wrong-place",
        "dropout applied somewhere other than the attention weights",
        True,
        r"WEIGHTS \(after the softmax\)|weights after the softmax|on the weights",
    ),
    ("dropout-no-rescale", "the kept weights not rescaled by 1/(1-p)", True, r"1 / \(1 - p\)"),
    (
        "weights-before-dropout",
        "the weights returned before dropout, not the ones used",
        True,
        r"weights used for the output",
    ),
    (
        "dropout-shared-mask",
        "one dropout mask drawn once and broadcast across batch items or heads",
        True,
        r"broadcast to all|independent draw",
    ),
    (
        "dropout-same-draw",
        "the same dropout mask on every call (a fixed seed or generator)",
        True,
        r"fixed seed|fresh dropout draw",
    ),
    (
        "dropout-branch-skipped",
        "dropout left out of one branch (with a mask, or causal)",
        True,
        r"no dropout in (this|the) branch|every branch",
    ),
    # decaying attention
    ("gamma-not-parameter", "gamma not an nn.Parameter", True, r"nn\.Parameter|learnable"),
    (
        "gamma-wrong-axis",
        "gamma broadcast against the wrong axis",
        True,
        r"gamma\[h\] only scales|\(H, 1, 1\)",
    ),
    (
        "gamma-init",
        "gamma not initialised to ones",
        True,
        r"initiali[sz]ed? to (ones|1)|torch\.ones\(num_heads",
    ),
    (
        "decay-sign",
        "the decay's sign, direction or distance wrong (+gamma|i-j|, i - j, (i - j)**2, one side only)",
        True,
        r"NEGATIVE|absolute distance|\|i - j\|",
    ),
    (
        "decay-misapplied",
        "the decay not added to the scaled scores: multiplied into them, or applied to the weights after "
        "the softmax (rows that no longer sum to 1)",
        True,
        r"decay (to|on) the weights|multiplied by exp\(-gamma",
    ),
    (
        "qkv-split-layout",
        "the fused qkv output split in the wrong layout",
        True,
        r"reshape\(B, L, 3, H",
    ),
    (
        "slopes-wrong",
        "ALiBi slopes wrong (order, h counted from 0, or the non-power-of-two rule)",
        True,
        r"power of two|2 \*\* \(-8",
    ),
)
