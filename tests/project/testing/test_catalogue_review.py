"""Diagnoses mended after a read of the whole feedback: a wrapper whose heads are one module, dropout on the
output, the order of a search among the suspects, and a variant tried twice. Each is shown a learner-written wrong
output (computed here, apart from the catalogue's code) and the right one: the slip is named, the right output
names nothing."""

from __future__ import annotations

import re

import torch
from torch import nn

from grader.testing.catalogue.efficient import formula_suspects
from grader.testing.catalogue.structure import diagnose_structure
from grader.testing.diagnosis import Detector, Suspects, Variant
from grader.testing.oracles import returned_before_dropout


def ids(said: str | None) -> set[str]:
    found = re.findall(r"diagnosis \[([a-z0-9, -]+)\]", said or "")
    return {i for f in found for i in f.split(", ")}


def _shapes(module: nn.Module) -> dict[str, tuple[int, ...]]:
    return {n: tuple(p.shape) for n, p in module.named_parameters()}


def _head() -> nn.Module:
    head = nn.Module()
    head.W_query, head.W_key, head.W_value = (nn.Linear(4, 3, bias=False) for _ in range(3))
    return head


def test_a_wrapper_of_one_repeated_head_is_named_by_its_parameters() -> None:
    right, shared = nn.Module(), nn.Module()
    right.heads = nn.ModuleList([_head() for _ in range(3)])
    shared.heads = nn.ModuleList([_head()] * 3)  # the learner's [head] * num_heads
    expected = _shapes(right)
    assert len(_shapes(shared)) == 3  # named_parameters() lists the one head once
    assert ids(diagnose_structure(_shapes(shared), expected)) == {"heads-shared"}
    assert diagnose_structure(expected, expected) is None
    renamed = {
        n.replace("W_query", "q"): s for n, s in expected.items()
    }  # another mistake: not this one
    assert "heads-shared" not in ids(diagnose_structure(renamed, expected))


def test_dropout_on_the_output_is_told_from_dropout_on_the_weights() -> None:
    torch.manual_seed(0)
    p = 0.2
    w = torch.softmax(torch.randn(2, 6, 6), dim=-1)
    v = torch.randn(2, 6, 4)
    on_output = nn.functional.dropout(
        w @ v, p, training=True
    )  # returned weights: w, before dropout
    dropped_w = nn.functional.dropout(w, p, training=True)
    suspects = returned_before_dropout(w, w, p)
    assert ids(suspects.explain(on_output, w @ v, 1e-5, 1e-4)) == {"dropout-wrong-place"}
    assert ids(suspects.explain(dropped_w @ v, w @ v, 1e-5, 1e-4)) == {"weights-before-dropout"}
    assert suspects.explain((w @ v).clone(), w @ v, 1e-5, 1e-4) == ""


def test_a_search_is_tried_after_every_foreseen_variant() -> None:
    tried: list[str] = []

    def search(got: torch.Tensor, expected: torch.Tensor) -> tuple[str, str]:
        tried.append("search")
        return "wrong-scale", "found by a search"

    got, right = torch.ones(3), torch.zeros(3)
    suspects = Suspects((Detector("wrong-scale", search, last=True),)) + Suspects(
        (Variant("mask-missing", "the foreseen variant", lambda: torch.ones(3)),)
    )
    assert ids(suspects.explain(got, right, 0.0, 0.0)) == {"mask-missing"} and tried == []
    assert ids(suspects.explain(torch.full((3,), 2.0), right, 0.0, 0.0)) == {"wrong-scale"}


def _flipped(items: Suspects) -> list[Variant]:
    return [v for v in items.items if isinstance(v, Variant) and "offset the wrong way" in v.shows]


def test_the_wrong_way_offset_is_tried_twice_only_where_a_row_has_no_key() -> None:
    torch.manual_seed(1)
    q, k, v = torch.randn(1, 5, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 4)  # L > S: no row dead
    assert len(_flipped(formula_suspects(q, k, v, is_causal=True))) == 1
    q, k = torch.randn(1, 3, 4), torch.randn(1, 5, 4)  # L < S: the first rows see no key
    v = torch.randn(1, 5, 4)
    assert len(_flipped(formula_suspects(q, k, v, is_causal=True))) == 2


def test_heads_in_a_plain_list_are_named_unregistered() -> None:
    right, plain = nn.Module(), nn.Module()
    right.heads = nn.ModuleList([_head() for _ in range(2)])
    plain.heads = [_head() for _ in range(2)]  # the learner's plain list: nothing registered
    assert ids(diagnose_structure(_shapes(plain), _shapes(right))) == {"not-a-buffer"}
    bare = {"W_query.weight": (3, 4)}  # no list meant: not this diagnosis
    assert "not-a-buffer" not in ids(diagnose_structure({}, bare))
