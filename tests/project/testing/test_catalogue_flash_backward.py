"""FlashAttention backward's catalogue (:mod:`grader.testing.catalogue.flash_backward`): each diagnosis on a corpus bug
that shows it and never on the reference (the tiled backward's gradients, the forward's log-sum-exp)."""

from __future__ import annotations

import pytest
import torch

from grader.testing.catalogue.flash import flash_suspects
from grader.testing.catalogue.flash_backward import backward_suspects, lse_suspects
from tests.project.support.common import CORPUS, ROOT
from tests.project.testing.test_catalogue_rope import load  # a corpus module loaded by path
from tests.project.testing.test_catalogue_window import named

BUGS = CORPUS / "buggy" / "flash_backward"


def reference():
    return load(ROOT / "solutions" / "flash_backward.py")


def inputs(L: int, S: int):
    gen = torch.Generator().manual_seed(11)
    q, k = (torch.randn(2, 2, n, 5, generator=gen, dtype=torch.float64) for n in (L, S))
    return (
        q,
        k,
        torch.randn(2, 2, S, 3, generator=gen, dtype=torch.float64),
        torch.randn(2, 2, L, 3, generator=gen, dtype=torch.float64),
    )


BACKWARD_BUGS = [
    ("bwd_D_per_tile", "bwd-delta", 0),
    ("bwd_missing_D", "bwd-delta", 0),
    ("bwd_no_scale", "bwd-scale", 0),
    ("bwd_dk_unscaled", "bwd-scale", 1),
    ("bwd_ds_scaled_twice", "bwd-scale", 0),
    ("bwd_dq_overwritten", "bwd-dq-overwritten", 0),
    ("bwd_softmax_per_tile", "bwd-probabilities", 0),
    ("bwd_tile_local_max", "bwd-probabilities", 0),
    ("bwd_drops_ragged_tile", "ragged-dropped", 1),
    ("bwd_causal_top_left", "mask-top-left", 0),
    ("bwd_no_causal_mask", "mask-missing", 0),
]


@pytest.mark.parametrize("bug,mid,which", BACKWARD_BUGS)
def test_a_backward_bug_is_named_and_the_reference_is_not(bug, mid, which):
    q, k, v, do = inputs(6, 13)
    ref = reference()
    out, lse = ref.flash_forward(q, k, v, True, 4)
    want = ref.flash_attention_backward(q, k, v, out, lse, do, True, 4)[which]
    suspects = backward_suspects(q, k, v, out, lse, do, True, 4, which)
    got = load(BUGS / f"{bug}.py").flash_attention_backward(q, k, v, out, lse, do, True, 4)[which]
    assert named(suspects, got, want) == {mid}
    assert named(suspects, want.clone(), want) == set()


@pytest.mark.parametrize("bug", ["fwd_lse_is_running_max", "fwd_lse_log_denominator_only"])
def test_an_lse_bug_is_named_and_the_reference_is_not(bug):
    q, k, v, _ = inputs(6, 13)
    want = reference().flash_forward(q, k, v, True, 4)[1]
    assert named(
        lse_suspects(q, k, True), load(BUGS / f"{bug}.py").flash_forward(q, k, v, True, 4)[1], want
    ) == {"lse-wrong"}
    assert named(lse_suspects(q, k, True), want.clone(), want) == set()


def test_a_causal_default_in_the_forward_is_named_and_the_reference_is_not():
    q, k, v, _ = inputs(9, 100)
    want = reference().flash_forward(q, k, v)[0]
    suspects = flash_suspects(q, k, v, causal_default=True)
    assert named(
        suspects, load(BUGS / "fwd_default_causal.py").flash_forward(q, k, v)[0], want
    ) == {"default-causal"}
    assert named(suspects, want.clone(), want) == set()
